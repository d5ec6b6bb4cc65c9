//! Which files a files promise acts on: the promiser itself, the files a
//! regex promiser matches, or the tree a `depth_search` body walks,
//! filtered by a `file_select` body.

use super::perms::{ModeSpec, gid_of, uid_of};
use crate::eval::bodies::ResolvedBody;
use crate::eval::expanded::ExpandedPromise;
use crate::host::Host;
use crate::host::fs::{FileKind, Meta};
use crate::promises::port::EvalPort;
use crate::report::change::{Change, Changes, Decision};
use std::path::{Path, PathBuf};

use crate::eval::expanded::path_looks_like_regex as looks_like_regex;

/// The files a regex promiser (each path component a pattern, matched in
/// full) names, sorted. The fixed components are taken as written; where a
/// pattern is to be matched in a directory that cannot be read (one yet to
/// be made), the rest of the promiser is taken as written too, as cf-agent
/// does: `"$(dir)/tu/*" create => "true"` makes a file named `*`.
pub fn regex_promiser_matches(ctx: &mut EvalPort<'_>, host: &Host, promiser: &str) -> Vec<PathBuf> {
    let comps: Vec<&str> = promiser.split('/').filter(|c| !c.is_empty()).collect();
    let mut current = vec![PathBuf::from("/")];
    let mut literal = Vec::new();
    for (i, comp) in comps.iter().enumerate() {
        if !looks_like_regex(comp) {
            current = current.into_iter().map(|c| c.join(comp)).collect();
            continue;
        }
        let mut next = Vec::new();
        for c in current {
            match host.read_dir(&c) {
                // A pattern that does not compile matches nothing.
                Ok(names) => {
                    if let Ok(re) = ctx.regex(comp) {
                        let odd = &ctx.agent_control().suspiciousnames;
                        next.extend(
                            names
                                .into_iter()
                                .filter(|n| re.is_full_match(n))
                                .filter(|n| {
                                    odd.is_empty()
                                        || !host
                                            .lstat(&c.join(n))
                                            .ok()
                                            .flatten()
                                            .is_some_and(|m| suspicious(odd, &c, n, &m))
                                })
                                .map(|n| c.join(n)),
                        );
                    }
                }
                Err(_) => literal.push(c.join(comps[i..].join("/"))),
            }
        }
        current = next;
    }
    current.extend(literal);
    current.sort();
    current
}

/// Agent control's `suspiciousnames`: a regular file or link of such a
/// name is skipped where cf-agent's ConsiderFile looks (depth searches,
/// copied trees, regex promisers), with its warning.
pub(super) fn suspicious(names: &[String], dir: &Path, name: &str, meta: &Meta) -> bool {
    if matches!(meta.kind, FileKind::File | FileKind::Symlink) && names.iter().any(|n| n == name) {
        crate::warn!(
            "Filename '{}/{name}' is classified as suspiscious, skipping",
            dir.display()
        );
        return true;
    }
    false
}

/// Whether a promiser should be read as a regular expression.
pub fn is_regex_promiser(p: &ExpandedPromise) -> bool {
    crate::eval::expanded::is_regex_path(&p.promiser, p.scalar("pathtype"))
}

/// The groups of a regex promiser's pattern on a path it matched, as
/// `$(match.N)` binds them for that file (group 0 the whole path).
pub fn promiser_groups(ctx: &mut EvalPort<'_>, promiser: &str, path: &Path) -> Vec<Option<String>> {
    ctx.regex(promiser)
        .ok()
        .and_then(|r| r.full_captures(&path.to_string_lossy()))
        .unwrap_or_default()
}

/// One file found by a depth search.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    pub meta: Meta,
}

/// What a depth search found: the entries, and the directories it read
/// (`base` first), whose entries a `changes` body compares with its
/// records.
#[derive(Debug, Default)]
pub struct Search {
    pub found: Vec<Found>,
    pub dirs: Vec<PathBuf>,
}

/// How many levels a `depth_search` body goes down: `inf` (or no depth)
/// is without end, as is a number that does not parse.
pub fn depth_of(body: &ResolvedBody) -> usize {
    match body.scalar("depth") {
        Some("inf") | None => usize::MAX,
        Some(d) => d.parse().unwrap_or(usize::MAX),
    }
}

/// Walks `base` as a `depth_search` body asks; `base` itself is included
/// only with `include_basedir`. Dead links are removed on the way with
/// `rmdeadlinks` (reported as cf-agent does), unless dry-running.
pub fn depth_search(
    ctx: &mut EvalPort<'_>,
    host: &Host,
    base: &Path,
    body: &ResolvedBody,
    changes: &mut Changes,
) -> Search {
    let depth = depth_of(body);
    let include_base = body
        .scalar("include_basedir")
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false);
    let rmdeadlinks = body
        .scalar("rmdeadlinks")
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false);
    let traverse_links = body
        .scalar("traverse_links")
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false);
    let xdev = body
        .scalar("xdev")
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false);
    let mut out = Vec::new();
    let mut dirs = Vec::new();
    let Some(base_meta) = host.stat(base).ok().flatten() else {
        return Search::default();
    };
    if include_base {
        out.push(Found {
            path: base.to_path_buf(),
            meta: base_meta,
        });
    }
    if base_meta.kind != FileKind::Dir {
        return Search { found: out, dirs };
    }
    let walk = Walk {
        depth,
        rmdeadlinks,
        traverse_links,
        xdev,
        base_dev: base_meta.dev,
        dirs: DirFilter::of(ctx, body),
    };
    walk.dir(ctx, host, base, 1, changes, &mut out, &mut dirs);
    Search { found: out, dirs }
}

/// A `depth_search` body's settings, for the walk below.
struct Walk {
    depth: usize,
    rmdeadlinks: bool,
    traverse_links: bool,
    xdev: bool,
    base_dev: u64,
    dirs: DirFilter,
}

/// A `depth_search` body's `exclude_dirs` and `include_dirs`, compiled.
pub(super) struct DirFilter {
    exclude: Vec<std::sync::Arc<crate::values::regex::Regex>>,
    include: Vec<std::sync::Arc<crate::values::regex::Regex>>,
}

impl DirFilter {
    pub(super) fn of(ctx: &mut EvalPort<'_>, body: &ResolvedBody) -> DirFilter {
        DirFilter {
            exclude: compile_all(ctx, &body.list("exclude_dirs")),
            include: compile_all(ctx, &body.list("include_dirs")),
        }
    }

    /// No directory skipped.
    pub(super) fn none() -> DirFilter {
        DirFilter {
            exclude: Vec::new(),
            include: Vec::new(),
        }
    }

    /// Whether a directory is passed over, as cf-agent's SkipDirLinks
    /// decides: the patterns are matched against its name and against its
    /// whole path; an excluded directory, or one no `include_dirs` pattern
    /// names, is neither entered nor itself acted on (nor copied).
    pub(super) fn skips(&self, path: &Path, name: &str) -> bool {
        let full = path.to_string_lossy();
        let names = |r: &std::sync::Arc<crate::values::regex::Regex>| {
            r.is_full_match(name) || r.is_full_match(&full)
        };
        self.exclude.iter().any(names)
            || (!self.include.is_empty() && !self.include.iter().any(names))
    }
}

impl Walk {
    /// Walks one directory at `level` (1 for the search's base), in name
    /// order; a subdirectory's entries come before the subdirectory
    /// itself, as cf-agent acts on a directory after its contents.
    #[allow(clippy::too_many_arguments)]
    fn dir(
        &self,
        ctx: &mut EvalPort<'_>,
        host: &Host,
        dir: &Path,
        level: usize,
        changes: &mut Changes,
        out: &mut Vec<Found>,
        dirs: &mut Vec<PathBuf>,
    ) {
        // `level` is the depth of a directory's entries (1 for the base's).
        // cf-agent 3.21 reads the base whatever the depth, and enters a
        // directory it lists at `level` only when `depth` is over 1 and
        // `level - 1` is at most `depth`: so `depth => "0"` and `"1"` reach
        // the base's entries alone, and a depth d of 2 or more reaches
        // entries d + 2 levels down (DepthSearch's rlevel starts at 0 and is
        // compared with `<=`). ncf's permissions methods rely on it.
        if level > 1 && (self.depth <= 1 || level - 2 > self.depth) {
            return;
        }
        dirs.push(dir.to_path_buf());
        let mut entries = host.read_dir(dir).unwrap_or_default();
        entries.sort();
        for name in entries {
            let path = dir.join(&name);
            let Some(meta) = host.lstat(&path).ok().flatten() else {
                continue;
            };
            if suspicious(&ctx.agent_control().suspiciousnames, dir, &name, &meta) {
                continue;
            }
            if self.rmdeadlinks
                && meta.kind == FileKind::Symlink
                && host.stat(&path).ok().flatten().is_none()
            {
                let change = Change::new("delete", path.display().to_string())
                    .done(format!("Removed dead link '{}'", path.display()))
                    .should(format!("Should remove dead link '{}'", path.display()))
                    .without_suffix();
                if changes.plan(&change) == Decision::Make && host.remove_file(&path).is_ok() {
                    changes.made(change);
                }
                continue;
            }
            let is_dir = meta.kind == FileKind::Dir
                || (self.traverse_links
                    && meta.kind == FileKind::Symlink
                    && host
                        .stat(&path)
                        .ok()
                        .flatten()
                        .is_some_and(|m| m.kind == FileKind::Dir));
            if !is_dir {
                out.push(Found { path, meta });
                continue;
            }
            if self.dirs.skips(&path, &name) || (self.xdev && meta.dev != self.base_dev) {
                continue;
            }
            self.dir(ctx, host, &path, level + 1, changes, out, dirs);
            out.push(Found { path, meta });
        }
    }
}

fn compile_all(
    ctx: &mut EvalPort<'_>,
    patterns: &[String],
) -> Vec<std::sync::Arc<crate::values::regex::Regex>> {
    patterns.iter().filter_map(|p| ctx.regex(p).ok()).collect()
}

/// Whether a file passes a `file_select` body. Each criterion given is a
/// class-like name in `file_result` (default: all given criteria hold).
pub fn selected(
    ctx: &mut EvalPort<'_>,
    host: &Host,
    body: &ResolvedBody,
    path: &Path,
    meta: &Meta,
    now: i64,
) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The names are cf-agent's in `file_result` (`size` for search_size,
    // `mode`, `owner`, `group`), each true when its criterion holds.
    let mut results: Vec<(&str, bool)> = Vec::new();
    let leaf = body.list("leaf_name");
    if leaf.is_empty() {
        results.push(("leaf_name", true));
    } else {
        let ok = leaf
            .iter()
            .any(|p| ctx.regex(p).is_ok_and(|r| r.is_full_match(&name)));
        results.push(("leaf_name", ok));
    }
    let paths = body.list("path_name");
    if !paths.is_empty() {
        let full = path.display().to_string();
        let ok = paths
            .iter()
            .any(|p| ctx.regex(p).is_ok_and(|r| r.is_full_match(&full)));
        results.push(("path_name", ok));
    }
    let types = body.list("file_types");
    if !types.is_empty() {
        let t = match meta.kind {
            FileKind::File => "plain",
            FileKind::Dir => "dir",
            FileKind::Symlink => "symlink",
            FileKind::Fifo => "fifo",
            FileKind::Other => "char",
        };
        let ok = types.iter().any(|x| x == t || (x == "reg" && t == "plain"));
        results.push(("file_types", ok));
    }
    let modes = body.list("search_mode");
    if !modes.is_empty() {
        let ok = modes
            .iter()
            .any(|m| ModeSpec::parse(m).is_ok_and(|s| s.apply(meta.mode) == meta.mode & 0o7777));
        results.push(("mode", ok));
    }
    if let Some(range) = body.scalar("search_size") {
        results.push(("size", in_range(range, meta.size as i64)));
    }
    let owners = body.list("search_owners");
    if owners.is_empty() {
        // cf-agent counts owner and group as matched when not asked for.
        results.push(("owner", true));
    } else {
        let ok = owners.iter().any(|o| uid_of(o) == Some(meta.uid));
        results.push(("owner", ok));
    }
    let groups = body.list("search_groups");
    if groups.is_empty() {
        results.push(("group", true));
    } else {
        let ok = groups.iter().any(|g| gid_of(g) == Some(meta.gid));
        results.push(("group", ok));
    }
    for (attr, t) in [
        ("mtime", meta.mtime),
        ("ctime", meta.ctime),
        ("atime", meta.atime),
    ] {
        if let Some(range) = body.scalar(attr) {
            results.push((attr, in_range(range, t)));
        }
    }
    // A list of regular expressions (the MPF's symlinked_to gives one);
    // the file is a symlink whose target matches one of them.
    let link_targets = body.list("issymlinkto");
    if !link_targets.is_empty() {
        let ok = host.read_link(path).is_ok_and(|l| {
            let l = l.display().to_string();
            link_targets
                .iter()
                .any(|t| ctx.regex(t).is_ok_and(|r| r.is_full_match(&l)))
        });
        results.push(("issymlinkto", ok));
    }
    // A program run for the file, `$(this.promiser)` in its command
    // line the file's path (the body as written, see
    // `ExpandedPromise::written_body`), as cf-agent's SelectExecProgram
    // and SelectExecRegexMatch run it: without a shell.
    if let Some(program) = body.scalar("exec_program") {
        let file = path.to_string_lossy();
        let line = program
            .replace("$(this.promiser)", &file)
            .replace("${this.promiser}", &file);
        let run = |output| {
            let spec = crate::host::exec::CommandSpec {
                argv: crate::host::exec::split_command_line(&line),
                output,
                ..Default::default()
            };
            host.run(&spec)
                .map_err(|e| crate::error!("Couldn't run '{line}' to select '{file}': {e}"))
                .ok()
        };
        if let Some(regex) = body.scalar("exec_regex") {
            let ok = run(crate::host::exec::OutputSelect::Both).is_some_and(|r| {
                ctx.regex(regex)
                    .is_ok_and(|re| r.output_text().lines().any(|l| re.is_full_match(l)))
            });
            results.push(("exec_regex", ok));
        }
        let ok = run(crate::host::exec::OutputSelect::Stdout).is_some_and(|r| r.code == Some(0));
        results.push(("exec_program", ok));
    }
    let _ = now;
    match body.scalar("file_result") {
        Some(expr) => {
            let expr = expr.to_string();
            crate::syntax::classexpr::ClassExpr::parse(&expr)
                .map(|e| e.eval(&mut |n| results.iter().any(|(k, v)| *k == n && *v)))
                .unwrap_or(false)
        }
        None => results.iter().all(|(_, v)| *v),
    }
}

/// `"a,b"` (as `irange`/`ago` functions print them) holds `v` if a <= v <= b.
fn in_range(range: &str, v: i64) -> bool {
    let Some((a, b)) = range.split_once(',') else {
        return false;
    };
    let parse = |s: &str| crate::values::number::parse_int(s).ok();
    match (parse(a), parse(b)) {
        (Some(lo), Some(hi)) => lo <= v && v <= hi,
        _ => false,
    }
}
