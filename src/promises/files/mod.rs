//! `files`: existence, permissions, content and edits of files and
//! directories, through the host layer. Each step checks first and only
//! then changes; under dry-run (or `action_policy => "warn"`) it says
//! what it would do instead, in cf-agent's words.

pub mod bytes;
pub mod copy;
pub mod edit;
pub mod link;
pub mod perms;
pub mod search;
pub mod template;
mod transform;

use super::{ActContext, Actuator};

use crate::eval::expanded::ExpandedPromise;

use crate::eval::bodies::ResolvedBody;

use crate::host::fs::{FileKind, Meta, can_chown};
use crate::report::Outcome;
use perms::{ModeSpec, gid_of, rx_for_dirs, uid_of};
use std::path::{Path, PathBuf};

pub struct Files;

/// cf-agent's mode for files it creates without a `perms` body.
const DEFAULT_FILE_MODE: u32 = 0o600;
/// ... and for directories (parents included).
const DEFAULT_DIR_MODE: u32 = 0o700;

/// The running verdict of one files promise.
#[derive(Debug, Default)]
pub struct Verdict {
    repaired: bool,
    failed: bool,
    warned: bool,
    /// A step reported itself kept, as cf-agent's steps each report their
    /// own outcome (and set its classes) whatever the promise's overall
    /// one: a copy's attributes checked after it, permissions found as
    /// promised by the check that follows every change to a regular file.
    kept_step: bool,
}

impl Verdict {
    pub(crate) fn repaired(&mut self) {
        self.repaired = true;
    }

    pub(crate) fn failed(&mut self) {
        self.failed = true;
    }

    pub(crate) fn warned(&mut self) {
        self.warned = true;
    }

    pub(crate) fn kept_step(&mut self) {
        self.kept_step = true;
    }

    fn outcome(&self) -> Outcome {
        if self.failed {
            Outcome::Failed
        } else if self.warned {
            Outcome::Warned
        } else if self.repaired {
            Outcome::Repaired
        } else {
            Outcome::Kept
        }
    }
}

impl Actuator for Files {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let mut v = Verdict::default();
        let is_dir_promise = p.promiser.ends_with("/.") || p.promiser.ends_with('/');
        let target: PathBuf = if is_dir_promise {
            PathBuf::from(p.promiser.trim_end_matches('.').trim_end_matches('/'))
        } else {
            PathBuf::from(&p.promiser)
        };
        if !target.is_absolute() {
            tracing::error!(
                "File '{}' is not an absolute path; files promises need one",
                p.promiser
            );
            return Outcome::Failed;
        }
        if search::is_regex_promiser(p) && act.host.lstat(&target).ok().flatten().is_none() {
            let matches = search::regex_promiser_matches(act.ctx, act.host, &p.promiser);
            // Nothing matches: a promise to create makes the promiser as
            // written, its pattern characters taken literally, as cf-agent
            // does (01_vars/02_functions/lsdir.cf creates `tu/*`).
            if matches.is_empty() && p.flag("create").unwrap_or(false) {
                leaf(act, p, &target, is_dir_promise, true, &mut v);
            }
            for path in matches {
                leaf(act, p, &path, false, true, &mut v);
                enter_parent(act, &path);
            }
            return finish(act, p, v);
        }
        if let Some(ds) = p.body("depth_search") {
            // A copy walks the source tree; everything else the target's.
            if let Some(body) = p.body("copy_from") {
                copy::copy_from(act, p, &target, body, &mut v);
            }
            let mut found = search::depth_search(act.ctx, act.host, &target, ds, act.dry_run);
            if let Some(sel) = p.body("file_select") {
                let now = crate::host::clock::now_secs();
                found.retain(|f| search::selected(act.ctx, act.host, sel, &f.path, &f.meta, now));
            }
            if p.body("delete").is_some() {
                // Contents before the directories that hold them.
                found.sort_by(|a, b| b.path.cmp(&a.path));
            }
            for f in found {
                leaf(act, p, &f.path, false, false, &mut v);
            }
            return finish(act, p, v);
        }
        if let Some(body) = p.body("copy_from") {
            copy::copy_from(act, p, &target, body, &mut v);
        }
        if let Some(body) = p.body("link_from") {
            link::link_from(act, p, &target, body, &mut v);
            enter_parent(act, &target);
            return finish(act, p, v);
        }
        // What a copy made is not followed: a link it copied points where
        // the source's owner chose.
        let follow = p.body("copy_from").is_none();
        leaf(act, p, &target, is_dir_promise, follow, &mut v);
        enter_parent(act, &target);
        finish(act, p, v)
    }
}

/// cf-agent enters the directory of a file it promises without a depth
/// search and stays there: later relative paths (a function's, a
/// command's working directory) start from it
/// (01_vars/02_functions/filesexist-is-collecting.cf).
fn enter_parent(act: &ActContext<'_>, target: &Path) {
    if let Some(dir) = target.parent() {
        act.host.enter_dir(dir);
    }
}

/// Everything a files promise does to one path (not copies and links,
/// which the promise does once for its base path).
fn leaf(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    is_dir_promise: bool,
    follow_link: bool,
    v: &mut Verdict,
) {
    let shown = target.display().to_string();
    if let Some(del) = p.body("delete") {
        delete(act, only_warning(p.warn_only()), &shown, target, del, v);
        return;
    }
    if let Some(ren) = p.body("rename") {
        rename(act, only_warning(p.warn_only()), &shown, target, ren, v);
        return;
    }
    let meta = match act.host.lstat(target) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!("Cannot stat '{shown}': {e}");
            v.failed();
            return;
        }
    };
    // A promiser that is a symlink stands for what it points to, as in
    // cf-agent (a root-owned /etc/resolv.conf link is edited through),
    // when the safe walk follows it; a link it refuses fails the promise.
    // Links met by a depth search are entries of their own.
    let meta = match meta {
        Some(m) if m.kind == FileKind::Symlink && follow_link => match act.host.stat(target) {
            Ok(Some(t)) => Some(t),
            Ok(None) => Some(m),
            Err(e) => {
                tracing::error!("Cannot stat '{shown}': {e}");
                v.failed();
                return;
            }
        },
        m => m,
    };
    let wants_create = p.flag("create").unwrap_or(false) || p.scalar("content").is_some();
    // A dry run that would create the file goes on with an empty one; it
    // has said what it would create, which cf-agent says alone.
    let would_create = meta.is_none() && act.dry_run;
    let meta = match meta {
        Some(m) => Some(m),
        None if wants_create => create(act, p, target, is_dir_promise, v),
        None => None,
    };
    let Some(meta) = meta else {
        if !v.failed
            && !v.warned
            && (p.attrs.contains_key("edit_line") || p.attrs.contains_key("edit_template"))
        {
            tracing::error!("File '{shown}' was marked for editing but could not be opened");
            v.failed();
        }
        return;
    };
    if let Some(command) = p.scalar("transformer") {
        transform::transform(act, p, &shown, command, v);
        // A transformer may replace the file (gzip leaves FILE.gz).
        if act.host.lstat(target).ok().flatten().is_none() {
            return;
        }
    }
    if let Some(body) = p.body("perms") {
        let before = (v.failed, v.warned);
        apply_perms(act, &shown, target, &meta, body, v);
        // cf-agent checks a regular file's permissions once more after all
        // its changes and finds them as promised; not for a default perms
        // body, whose attributes the promise has without the body.
        if meta.kind == FileKind::File
            && before == (v.failed, v.warned)
            && !act.dry_run
            && !body.is_default()
        {
            v.kept_step();
        }
    }
    if meta.kind == FileKind::File {
        if let Some(content) = p.scalar("content") {
            set_content(act, &shown, target, content, p.warn_only(), would_create, v);
        }
        if p.attrs.contains_key("edit_line")
            || p.attrs.contains_key("edit_template")
            || p.attrs.contains_key("edit_template_string")
        {
            edit::edit_file(act, p, target, v);
        }
    }
    if p.flag("touch") == Some(true) {
        if act.dry_run {
            tracing::warn!(
                "Should update time stamps for '{shown}'{}",
                only_warning(p.warn_only())
            );
            v.warned();
        } else if let Err(e) = act.host.touch(target) {
            tracing::error!("Could not touch '{shown}': {e}");
            v.failed();
        } else {
            tracing::info!("Touched (updated time stamps) for path '{shown}'");
            v.repaired();
        }
    }
}

/// `rename`: a new name, disabling (a suffix and a mode), or rotation.
fn rename(
    act: &mut ActContext<'_>,
    only: &str,
    shown: &str,
    target: &Path,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let Some(meta) = act.host.lstat(target).ok().flatten() else {
        return;
    };
    if let Some(n) = body
        .scalar("rotate")
        .and_then(|r| r.parse::<u32>().ok())
        .filter(|&n| n > 0)
    {
        if act.dry_run {
            tracing::warn!("Should rotate file '{shown}' in {n} fifo{only}");
            v.warned();
            return;
        }
        for i in (1..n).rev() {
            let from = PathBuf::from(format!("{shown}.{i}"));
            let to = PathBuf::from(format!("{shown}.{}", i + 1));
            if act.host.lstat(&from).ok().flatten().is_some() {
                let _ = act.host.rename(&from, &to);
            }
        }
        let first = PathBuf::from(format!("{shown}.1"));
        match act.host.rename(target, &first) {
            Ok(()) => {
                let _ = act.host.create_empty(target, meta.mode);
                tracing::info!("Rotated file '{shown}' in {n} fifo");
                v.repaired();
            }
            Err(e) => {
                tracing::error!("Could not rotate '{shown}': {e}");
                v.failed();
            }
        }
        return;
    }
    let disable = body
        .scalar("disable")
        .and_then(crate::values::number::parse_bool)
        == Some(true);
    let newname = match body.scalar("newname") {
        Some(n) if n.starts_with('/') => PathBuf::from(n),
        Some(n) => target.parent().unwrap_or(Path::new("/")).join(n),
        None if disable => PathBuf::from(format!(
            "{shown}{}",
            body.scalar("disable_suffix").unwrap_or(".cfdisabled")
        )),
        None => return,
    };
    if act.dry_run {
        if disable && body.scalar("newname").is_none() {
            // cf-agent's words for disabling.
            let kind = if meta.kind == FileKind::Dir {
                "directory"
            } else {
                "file"
            };
            tracing::warn!("File object '{shown}' exists, contrary to promise");
            tracing::warn!("Should rename '{kind}' '{shown}'{only}");
        } else {
            tracing::warn!(
                "Should rename file '{shown}' to '{}'{only}",
                newname.display()
            );
        }
        v.warned();
        return;
    }
    let disabling = disable && body.scalar("newname").is_none();
    let mut mode = meta.mode;
    if disabling {
        // cf-agent's order and words: the warning, the mode (disable_mode,
        // or the mode it has), then the rename.
        tracing::warn!("File object '{shown}' exists, contrary to promise");
        if let Some(spec) = body
            .scalar("disable_mode")
            .and_then(|m| ModeSpec::parse(m).ok())
        {
            mode = spec.apply(meta.mode);
            if let Err(e) = act.host.chmod(target, mode) {
                tracing::error!("Could not change permissions of '{shown}': {e}");
                v.failed();
                return;
            }
        }
        tracing::info!("Changed permissions of '{shown}' to 'mode {mode:04o}'");
    }
    match act.host.rename(target, &newname) {
        Ok(()) => {
            if disabling {
                tracing::info!(
                    "Disabled file '{shown}' by renaming to '{}' with mode {mode:04o}",
                    newname.display()
                );
            } else {
                tracing::info!("Renamed file '{shown}' to '{}'", newname.display());
            }
            v.repaired();
        }
        Err(e) => {
            tracing::error!("Could not rename '{shown}': {e}");
            v.failed();
        }
    }
}

fn finish(act: &mut ActContext<'_>, p: &ExpandedPromise, v: Verdict) -> Outcome {
    if v.failed {
        tracing::error!(
            "Errors encountered when actuating files promise '{}'",
            p.promiser
        );
    } else if v.warned {
        tracing::warn!(
            "Warnings encountered when actuating files promise '{}'",
            p.promiser
        );
    }
    let outcome = v.outcome();
    if v.kept_step && outcome != Outcome::Kept {
        // 00_basics/03_bodies/114.cf: a copy kept and permissions repaired
        // set both the kept and the repaired classes.
        act.reported_outcomes = Some(vec![Outcome::Kept, outcome]);
    }
    outcome
}

/// The mode a new file or directory gets: the perms body's, else cf-agent's default.
fn creation_mode(p: &ExpandedPromise, is_dir: bool) -> u32 {
    let default = if is_dir {
        DEFAULT_DIR_MODE
    } else {
        DEFAULT_FILE_MODE
    };
    match p
        .body("perms")
        .and_then(|b| b.scalar("mode"))
        .map(ModeSpec::parse)
    {
        Some(Ok(spec)) => {
            let m = spec.apply(default);
            if is_dir { rx_for_dirs(m) } else { m }
        }
        _ => default,
    }
}

/// What cf-agent adds to a "Should ..." warning when the promise itself
/// only warns (`action_policy => "warn"`), as opposed to a `--dry-run`.
pub(crate) fn only_warning(warn_only: bool) -> &'static str {
    if warn_only {
        ", but only warning promised"
    } else {
        ""
    }
}

fn create(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    is_dir: bool,
    v: &mut Verdict,
) -> Option<Meta> {
    let mode = creation_mode(p, is_dir);
    // A regex promiser names each file it matched; others as written.
    let shown = if search::is_regex_promiser(p) {
        target.display().to_string()
    } else {
        p.promiser.clone()
    };
    if act.dry_run {
        let only = only_warning(p.warn_only());
        if is_dir {
            tracing::warn!("Should create directory '{}'{only}", shown);
        } else {
            // cf-agent names each missing parent directory, outermost first.
            let mut missing = Vec::new();
            let mut dir = target.parent();
            while let Some(d) = dir
                && act.host.lstat(d).ok().flatten().is_none()
            {
                missing.push(d);
                dir = d.parent();
            }
            for d in missing.iter().rev() {
                tracing::warn!(
                    "Should make directory '{}' for '{}'{only}",
                    d.display(),
                    shown
                );
            }
            tracing::warn!("Should create file '{}', mode '{:04o}'{only}", shown, mode);
        }
        v.warned();
        // A dry run goes on as if the file were there (empty), so that its
        // content and edits show as the real run's would.
        if is_dir || p.warn_only() || p.scalar("file_type") == Some("fifo") {
            return None;
        }
        act.host.simulate_file(target, b"", mode);
        return act.host.lstat(target).ok().flatten();
    }
    if let Some(parent) = target.parent() {
        match act.host.mkdir_all(parent, DEFAULT_DIR_MODE) {
            Ok(made) if !made.is_empty() && !is_dir => {
                tracing::info!("Created directory for '{}'", shown);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!("Could not create directories for '{}': {e}", shown);
                v.failed();
                return None;
            }
        }
    }
    let result = if is_dir {
        act.host.mkdir_all(target, mode).map(|_| ())
    } else if p.scalar("file_type") == Some("fifo") {
        act.host.create_fifo(target, mode)
    } else {
        act.host.create_empty(target, mode)
    };
    match result {
        Ok(()) => {
            if is_dir {
                tracing::info!("Created directory '{}'", shown);
            } else {
                tracing::info!("Created file '{}', mode {:04o}", shown, mode);
            }
            v.repaired();
            act.host.lstat(target).ok().flatten()
        }
        Err(e) => {
            tracing::error!("Error creating '{}': {e}", shown);
            v.failed();
            None
        }
    }
}

fn apply_perms(
    act: &mut ActContext<'_>,
    shown: &str,
    target: &Path,
    meta: &Meta,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    if meta.kind == FileKind::Symlink {
        return;
    }
    if let Some(mode_text) = body.scalar("mode") {
        match ModeSpec::parse(mode_text) {
            Ok(spec) => {
                let mut want = spec.apply(meta.mode);
                let rxdirs = body
                    .scalar("rxdirs")
                    .and_then(crate::values::number::parse_bool)
                    .unwrap_or(true);
                if meta.kind == FileKind::Dir && rxdirs {
                    want = rx_for_dirs(want);
                }
                if want != meta.mode {
                    if act.dry_run {
                        tracing::warn!(
                            "Should change permissions of '{}' from {:04o} to {:04o}",
                            shown,
                            meta.mode,
                            want
                        );
                        v.warned();
                    } else if let Err(e) = act.host.chmod(target, want) {
                        tracing::error!("Could not change permissions of '{}': {e}", shown);
                        v.failed();
                    } else {
                        tracing::info!(
                            "Object '{}' had permissions {:04o}, changed it to {:04o}",
                            shown,
                            meta.mode,
                            want
                        );
                        v.repaired();
                    }
                }
            }
            Err(e) => {
                tracing::error!(
                    "Invalid mode in perms body '{}' for '{}': {e}",
                    body.name,
                    shown
                );
                v.failed();
            }
        }
    }
    let owners = body.list("owners");
    let groups = body.list("groups");
    let want_uid = pick_id(&owners, meta.uid, uid_of, "user", shown, v);
    let want_gid = pick_id(&groups, meta.gid, gid_of, "group", shown, v);
    if want_uid.is_none() && want_gid.is_none() {
        return;
    }
    if act.dry_run {
        tracing::warn!(
            "Should change the owner or group of '{}', but only warning promised",
            shown
        );
        v.warned();
        return;
    }
    if !can_chown() {
        tracing::error!(
            "Cannot change the owner or group of '{}': only root may",
            shown
        );
        v.failed();
        return;
    }
    match act.host.chown(target, want_uid, want_gid) {
        Ok(()) => {
            if let Some(u) = want_uid {
                tracing::info!("Owner of '{}' was {}, set to {}", shown, meta.uid, u);
            }
            if let Some(g) = want_gid {
                tracing::info!("Group of '{}' was {}, set to {}", shown, meta.gid, g);
            }
            v.repaired();
        }
        Err(e) => {
            tracing::error!("Could not change the owner or group of '{}': {e}", shown);
            v.failed();
        }
    }
}

/// The id to change to, if the current one is not among the promised
/// ones: the first promised one that exists.
fn pick_id(
    names: &[String],
    current: u32,
    lookup: fn(&str) -> Option<u32>,
    what: &str,
    shown: &str,
    v: &mut Verdict,
) -> Option<u32> {
    if names.is_empty() {
        return None;
    }
    let ids: Vec<u32> = names
        .iter()
        .filter_map(|n| {
            let id = lookup(n);
            if id.is_none() {
                tracing::error!("Unknown {what} '{n}' in perms of '{}'", shown);
                v.failed();
            }
            id
        })
        .collect();
    if ids.contains(&current) {
        None
    } else {
        ids.first().copied()
    }
}

fn set_content(
    act: &mut ActContext<'_>,
    shown: &str,
    target: &Path,
    content: &str,
    warn_only: bool,
    just_created: bool,
    v: &mut Verdict,
) {
    let current = match act.host.read(target) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("Could not read '{}': {e}", shown);
            v.failed();
            return;
        }
    };
    if current == content.as_bytes() {
        return;
    }
    let mode = act
        .host
        .lstat(target)
        .ok()
        .flatten()
        .map_or(DEFAULT_FILE_MODE, |m| m.mode);
    if !warn_only {
        show_diff(act, target, &current, content.as_bytes());
    }
    if act.dry_run {
        if !warn_only {
            act.host.simulate_file(target, content.as_bytes(), mode);
        }
        if !just_created {
            tracing::warn!(
                "Should update file '{}' with content '{}'{}",
                shown,
                content,
                only_warning(warn_only)
            );
        }
        v.warned();
        return;
    }
    match act.host.write_atomic(target, content.as_bytes(), mode) {
        Ok(()) => {
            tracing::info!("Updated file '{}' with content '{}'", shown, content);
            v.repaired();
        }
        Err(e) => {
            tracing::error!("Could not write '{}': {e}", shown);
            v.failed();
        }
    }
}

fn delete(
    act: &mut ActContext<'_>,
    only: &str,
    shown: &str,
    target: &Path,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let meta = match act.host.lstat(target) {
        Ok(Some(m)) => m,
        Ok(None) => return,
        Err(e) => {
            tracing::error!("Cannot stat '{}': {e}", shown);
            v.failed();
            return;
        }
    };
    let is_dir = meta.kind == FileKind::Dir;
    let rmdirs = body
        .scalar("rmdirs")
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(true);
    if is_dir && !rmdirs {
        return;
    }
    if act.dry_run {
        let kind = if is_dir { "directory" } else { "file" };
        tracing::warn!("Should delete {kind} '{shown}'{only}");
        v.warned();
        return;
    }
    let r = if is_dir {
        act.host.remove_dir(target)
    } else {
        act.host.remove_file(target)
    };
    match r {
        Ok(()) => {
            if is_dir {
                tracing::info!("Deleted directory '{}'", shown);
            } else {
                tracing::info!("Deleted file '{}'", shown);
            }
            v.repaired();
        }
        Err(e) => {
            tracing::error!("Could not delete '{}': {e}", shown);
            v.failed();
        }
    }
}

/// Prints a unified diff of a file's content change, when `--diff` asks
/// for it. Binary content is summarized instead.
pub(crate) fn show_diff(act: &ActContext<'_>, path: &Path, old: &[u8], new: &[u8]) {
    if !act.diff {
        return;
    }
    use std::io::Write;
    let shown = path.display().to_string();
    let mut out = std::io::stdout().lock();
    match (std::str::from_utf8(old), std::str::from_utf8(new)) {
        (Ok(o), Ok(n)) => {
            let diff = similar::TextDiff::from_lines(o, n);
            let _ = write!(
                out,
                "{}",
                diff.unified_diff().context_radius(3).header(&shown, &shown)
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "Binary file {shown} differs ({} bytes -> {} bytes)",
                old.len(),
                new.len()
            );
        }
    }
}
