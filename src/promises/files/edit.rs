//! `edit_line` and `edit_template`: the file is read once into lines, the
//! edit bundle's promises change the lines in memory (in edit-line normal
//! order, three passes, each promise acting at most once per run as
//! cf-agent's promise locks make it), and the file is written once,
//! atomically, only if the lines changed.
//!
//! The operations follow cf-agent 3.21's semantics closely, quirks
//! included (a `before` insertion into a region goes to the top of the
//! file; regions for insertions start at the start delimiter; `first`
//! occurrence replacements report themselves as not convergent), because
//! a policy written for cf-agent must do the same thing here. Change
//! messages of the edit promises are held back and printed only when the
//! file is really written, as cf-agent does; errors and warnings are
//! printed at once.
//!
//! Performance: every promise is one pass over the lines with regexes from
//! the run's compile cache; deletions rebuild the line vector in one pass,
//! so editing stays linear in the file size.

use super::super::{ActContext, BundleCall};

use crate::eval::expanded::{AttrValue, ExpandedPromise};

use crate::eval::bodies::ResolvedBody;

use super::{Verdict, bytes};
use crate::eval::vars::Variable;
use crate::load::LoadedFile;
use crate::report::Outcome;
use crate::report::change::{Change, Decision};
use crate::syntax::ast::Bundle;
use crate::values::regex::Regex;
use crate::values::value::{DataType, Origin, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Edit bundles' promise types in the order they run.
pub const EDIT_ORDER: &[&str] = &[
    "vars",
    "classes",
    "delete_lines",
    "field_edits",
    "insert_lines",
    "replace_patterns",
    "reports",
];

/// cf-agent refuses to edit files larger than this unless told otherwise
/// (`edit_defaults`' `max_file_size`, else agent control's `editfilesize`;
/// 0 for no limit).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 100_000;

/// How often cf-agent applies a replacement to one line before it gives up.
const MAX_REPLACEMENTS_PER_LINE: usize = 20;

/// `$(match.N)` references kept literal while a `replace_with` body is
/// resolved, so each match can fill them in.
const MATCH_PLACEHOLDERS: usize = 32;

/// The lines of a file being edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lines {
    pub lines: Vec<String>,
    /// Whether the file ended with a newline (kept as it was).
    pub trailing_newline: bool,
}

impl Lines {
    pub fn parse(text: &str) -> Lines {
        if text.is_empty() {
            return Lines {
                lines: Vec::new(),
                trailing_newline: true,
            };
        }
        let trailing_newline = text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(text);
        Lines {
            lines: body.split('\n').map(str::to_string).collect(),
            trailing_newline,
        }
    }

    /// The file's text; every line ends with a newline, as cf-agent writes
    /// it.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(self.lines.iter().map(|l| l.len() + 1).sum());
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

/// A promise result as cf-agent aggregates them inside edit bundles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Res {
    Noop,
    Change,
    Warn,
    /// Stopped early; cf-agent prints no summary line for it.
    Interrupted,
    Fail,
}

impl Res {
    pub(super) fn update(&mut self, other: Res) {
        if other > *self {
            *self = other;
        }
    }

    pub(super) fn outcome(self) -> Outcome {
        match self {
            Res::Noop => Outcome::Kept,
            Res::Change => Outcome::Repaired,
            Res::Warn | Res::Fail => Outcome::Failed,
            Res::Interrupted => Outcome::Interrupted,
        }
    }
}

/// What edits a files promise asks for.
enum EditKind {
    Bundle {
        name: String,
        args: Vec<Value>,
    },
    CfengineTemplate(String),
    Mustache {
        template: String,
        /// The template's name in messages (`inline` for a string).
        label: String,
    },
}

/// The file an edit is promised on, which must be there: the promise
/// fails, in cf-agent's words, when it cannot be opened.
pub(super) fn stat_editable(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    v: &mut Verdict,
) -> Option<crate::host::fs::Meta> {
    match act.host.stat(target) {
        Ok(Some(m)) => Some(m),
        _ => {
            crate::error!(
                "File '{}' was marked for editing but could not be opened",
                p.promiser
            );
            v.failed();
            None
        }
    }
}

/// Edits the file a files promise names: its edit_line bundle, or its
/// template. A file that is not there (`exists` false) is made by a
/// template once it has been read (cf-agent's CFE-3955), and found
/// missing by an edit_line bundle.
pub(crate) fn edit_file(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    exists: bool,
    v: &mut Verdict,
) {
    let defaults = p.body("edit_defaults");
    let Some(kind) = edit_kind(p, v) else {
        return;
    };
    if let EditKind::Mustache { template, label } = &kind {
        let meta = if exists {
            let Some(meta) = stat_editable(act, p, target, v) else {
                return;
            };
            Some(meta)
        } else {
            None
        };
        render_mustache(act, p, target, meta.as_ref(), template, label, v);
        return;
    }
    // A template is read before the file it makes.
    let is_template = matches!(kind, EditKind::CfengineTemplate(_));
    let (prepared, kind) = if is_template {
        let Some(prepared) = edit_bundle(act, p, kind, v) else {
            return;
        };
        if !exists && super::create(act, p, target, false, v).is_none() {
            crate::error!(
                "Failed to create file '{}' for rendering cfengine template '{}'",
                p.promiser,
                p.scalar("edit_template").unwrap_or_default()
            );
            v.failed();
            return;
        }
        (Some(prepared), None)
    } else {
        (None, Some(kind))
    };
    let Some(meta) = stat_editable(act, p, target, v) else {
        return;
    };
    let Some((original, read_stamp)) = read_editable(act, p, target, &meta, v) else {
        return;
    };
    let flag_of = |name: &str| {
        defaults
            .and_then(|d| d.scalar(name))
            .and_then(crate::values::number::parse_bool)
            .unwrap_or(false)
    };
    let empty_first = is_template || flag_of("empty_file_before_editing");
    let inherit = is_template || flag_of("inherit");
    let join = flag_of("recognize_join");
    // The lines as read are not kept beside the edited ones: they are read
    // again from `original` when compared, which holds half as much.
    let mut lines: Vec<String> = read_lines(&bytes::decode_borrowed(&original), join)
        .map(str::to_string)
        .collect();
    if empty_first {
        lines.clear();
    }
    let prepared = match (prepared, kind) {
        (Some(prepared), _) => Some(prepared),
        (None, Some(kind)) => edit_bundle(act, p, kind, v),
        (None, None) => None,
    };
    let Some((file, bundle, args)) = prepared else {
        return;
    };
    // With `action_policy => "warn"` cf-agent edits in memory as usual and
    // then shows what would change; a dry run instead has each edit
    // promise say what it would do.
    let mut editor = Editor {
        lines: &mut lines,
        filename: p.promiser.clone(),
        done: HashSet::new(),
        pending: Vec::new(),
        inserted: Vec::new(),
    };
    editor.run_bundle(act, &file, &bundle, &args, empty_first, inherit);
    let pending = std::mem::take(&mut editor.pending);
    if read_lines(&bytes::decode_borrowed(&original), join).eq(lines.iter().map(String::as_str)) {
        return;
    }
    let edited = Edited {
        original: &original,
        read_stamp,
        mode: meta.mode,
        pending,
        join,
    };
    write_edited(act, p, target, lines, edited, v);
}

/// Reads a file to be edited, as cf-agent loads it: refused (the promise
/// failing) when it is bigger than the edit limit or cannot be read.
pub(super) fn read_editable(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    meta: &crate::host::fs::Meta,
    v: &mut Verdict,
) -> Option<(Vec<u8>, Option<crate::host::fs::Stamp>)> {
    let defaults = p.body("edit_defaults");
    let max = defaults
        .and_then(|d| d.scalar("max_file_size"))
        .and_then(|m| crate::values::number::parse_int(m).ok())
        .map(|m| m.max(0) as u64)
        .or(act.ctx.agent_control().editfilesize)
        .unwrap_or(DEFAULT_MAX_FILE_SIZE);
    if max > 0 && meta.size > max {
        crate::info!(
            "File '{}' is bigger than the edit limit. max_file_size = {} > {max} bytes",
            p.promiser,
            meta.size
        );
        crate::error!(
            "File '{}' was marked for editing but could not be opened",
            p.promiser
        );
        v.failed();
        return None;
    }
    // A device, FIFO or directory is not edited (cf-agent's words): ncf's
    // tests expect an edit of /dev/zero to fail.
    if meta.kind != crate::host::fs::FileKind::File {
        crate::info!("{} is not a plain file", p.promiser);
        crate::error!(
            "File '{}' was marked for editing but could not be opened",
            p.promiser
        );
        v.failed();
        return None;
    }
    let (original, read_stamp) = match act.host.read_for_edit(target) {
        Ok((b, stamp)) => (b, stamp),
        Err(_) => {
            crate::error!(
                "File '{}' was marked for editing but could not be opened",
                p.promiser
            );
            v.failed();
            return None;
        }
    };
    Some((original, read_stamp))
}

/// A file's content as an edit found it, and how the edit may be saved.
struct Edited<'a> {
    original: &'a [u8],
    read_stamp: Option<crate::host::fs::Stamp>,
    mode: u32,
    /// What the edit promises did, said once it is saved.
    pending: Vec<String>,
    /// Whether `original` is read with continued lines joined
    /// ([`read_lines`]), for what a promise that only warns says of it
    /// line by line.
    join: bool,
}

/// The lines of a file's text as an edit reads them; `join`
/// (`recognize_join`): cf-agent reads a line ending in a backslash and the
/// next one into the same buffer, so the continued line is what remains.
fn read_lines(text: &str, join: bool) -> impl Iterator<Item = &str> {
    let body = (!text.is_empty()).then(|| text.strip_suffix('\n').unwrap_or(text));
    body.into_iter()
        .flat_map(crate::scan::split_newlines)
        .filter(move |l| !(join && l.ends_with('\\')))
}

/// Saves edited lines that differ from the file's: a dry run (or a warn
/// only promise) says what would change, a real run writes beside the
/// file and renames, keeping a backup as asked.
fn write_edited(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    lines: Vec<String>,
    e: Edited<'_>,
    v: &mut Verdict,
) {
    let lines = Lines {
        lines,
        trailing_newline: true,
    };
    let text = bytes::encode_owned(lines.render());
    // A dry run names each line it would change; only a promise that
    // itself only warns also says so of the whole file.
    // One record of the file's edit: what each promise did to its lines,
    // then the file saved.
    let mut change = Change::new("edit", &p.promiser);
    for line in e.pending {
        change = change.done(line);
    }
    let change = change.done(format!("Edited file '{}'", p.promiser));
    let change = act
        .changes
        .with_content(change, e.original, &text)
        .should_when_warning(format!(
            "Should edit file '{}', but only warning promised",
            p.promiser
        ));
    // The line by line account is worked out only when it is said.
    match act.changes.plan_explained(&change, || {
        let text = bytes::decode_borrowed(e.original);
        let before: Vec<&str> = read_lines(&text, e.join).collect();
        warn_diff(&before, &lines.lines)
    }) {
        Decision::Make => {
            if write_with_backup(act, p, target, e.mode, &text, e.read_stamp, v) {
                act.changes.made(change);
                v.repaired();
            }
        }
        Decision::Withheld { as_if_made, .. } => {
            if as_if_made {
                act.host.simulate_file(target, &text, e.mode);
            }
            v.warned();
        }
    }
}

/// What edits the file: an edit_line bundle, a CFEngine template or a
/// mustache template; `None` when nothing does (or, failed, when the
/// inline template is missing).
fn edit_kind(p: &ExpandedPromise, v: &mut Verdict) -> Option<EditKind> {
    let method = p.scalar("template_method").unwrap_or("cfengine");
    let kind = if let Some(AttrValue::Bundle { name, args }) = p.attrs.get("edit_line") {
        EditKind::Bundle {
            name: name.clone(),
            args: args.clone(),
        }
    } else if method == "inline_mustache" {
        let Some(t) = p.scalar("edit_template_string") else {
            crate::error!(
                "'edit_template_string' not set for promiser: '{}'",
                p.promiser
            );
            v.failed();
            return None;
        };
        EditKind::Mustache {
            template: t.to_string(),
            label: "inline".into(),
        }
    } else if let Some(t) = p.scalar("edit_template") {
        if method == "mustache" {
            EditKind::Mustache {
                template: t.to_string(),
                label: t.to_string(),
            }
        } else {
            EditKind::CfengineTemplate(t.to_string())
        }
    } else {
        return None;
    };
    Some(kind)
}

/// The bundle that edits the file, with its arguments: the edit_line
/// bundle named, or the one a CFEngine template becomes.
fn edit_bundle(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    kind: EditKind,
    v: &mut Verdict,
) -> Option<(Arc<LoadedFile>, Arc<Bundle>, Vec<Value>)> {
    Some(match kind {
        EditKind::Bundle { name, args } => {
            let Some((file, bundle)) = act.policy.bundle(&p.namespace, &name) else {
                crate::error!(
                    "edit_line bundle '{name}' of files promise '{}' is not defined",
                    p.promiser
                );
                v.failed();
                return None;
            };
            // Fewer arguments than parameters: cf-agent runs the bundle
            // all the same, the parameters left unbound (`$(str)` stays
            // as written; 10_files/09_insert_lines/namespaced_edit_line_bundle.cf).
            // More: cf-agent stops the whole run ("formal and actual
            // parameter mismatch is fatal"); we fail the promise.
            if bundle.params.len() < args.len() {
                crate::error!(
                    "edit_line bundle '{name}' takes {} arguments, files promise '{}' gives {}",
                    bundle.params.len(),
                    p.promiser,
                    args.len()
                );
                v.failed();
                return None;
            }
            (file.clone(), Arc::new(bundle.clone()), args)
        }
        EditKind::CfengineTemplate(path) => {
            match super::template::cfengine_bundle(act, Path::new(&path)) {
                Ok((file, bundle)) => (Arc::new(file), Arc::new(bundle), Vec::new()),
                Err(msg) => {
                    crate::error!("{}", msg.replace("{promiser}", &p.promiser));
                    v.failed();
                    return None;
                }
            }
        }
        EditKind::Mustache { .. } => unreachable!("rendered above"),
    })
}

/// Renders a mustache template over the promise's data (or the state of
/// the run) and replaces the file's content when it differs.
fn render_mustache(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    meta: Option<&crate::host::fs::Meta>,
    template: &str,
    label: &str,
    v: &mut Verdict,
) {
    let text = if label == "inline" {
        template.to_string()
    } else {
        match act.host.read(Path::new(template)) {
            Ok(b) => bytes::decode(&b),
            Err(_) => {
                crate::error!("Template file '{template}' could not be opened for reading");
                v.failed();
                return;
            }
        }
    };
    let data = match template_data(p) {
        Ok(Some(d)) => d,
        Ok(None) => act.ctx.datastate(),
        Err(()) => {
            crate::error!("No template data for the promise '{}'", p.promiser);
            v.failed();
            return;
        }
    };
    let rendered = match crate::functions::mustache::render(&text, &data) {
        Ok(r) => r,
        Err(e) => {
            crate::error!("Error rendering mustache template '{label}': {e}");
            v.failed();
            return;
        }
    };
    let (current, read_stamp) = if meta.is_some() {
        match act.host.read_for_edit(target) {
            Ok(c) => c,
            Err(e) => {
                crate::error!("Could not read '{}': {e}", p.promiser);
                v.failed();
                return;
            }
        }
    } else {
        (Vec::new(), None)
    };
    if meta.is_some() && current == rendered.as_bytes() {
        return;
    }
    let change = Change::new("render", &p.promiser)
        .done(format!(
            "Updated rendering of '{}' from mustache template '{label}'",
            p.promiser
        ))
        .should(format!(
            "Should update rendering of '{}' from mustache template '{label}'",
            p.promiser
        ));
    let change = act
        .changes
        .with_content(change, &current, rendered.as_bytes());
    match act.changes.plan(&change) {
        Decision::Make => {
            // A file the template is promised to fill is made once the
            // rendering is known to change it (cf-agent's CFE-3955).
            let mode = match meta {
                Some(m) => m.mode,
                None => match super::create(act, p, target, false, v) {
                    Some(m) => m.mode,
                    None => {
                        crate::error!(
                            "Failed to create file '{}' for rendering mustache template '{label}'",
                            p.promiser
                        );
                        v.failed();
                        return;
                    }
                },
            };
            if write_with_backup(act, p, target, mode, rendered.as_bytes(), read_stamp, v) {
                act.changes.made(change);
                v.repaired();
            }
        }
        Decision::Withheld { as_if_made, .. } => {
            if as_if_made {
                let mode = meta.map_or(super::DEFAULT_FILE_MODE, |m| m.mode);
                act.host.simulate_file(target, rendered.as_bytes(), mode);
            }
            v.warned();
        }
    }
}

/// The data a mustache template is rendered with: the promise's
/// `template_data` (a container, or JSON or YAML text, as cf-agent's
/// parser reads a literal there), `None` when it names none, an error
/// when it is not a container.
pub(super) fn template_data(p: &ExpandedPromise) -> Result<Option<serde_json::Value>, ()> {
    let text = match p.attrs.get("template_data") {
        None => return Ok(None),
        Some(AttrValue::Value(Value::Data(d))) => return Ok(Some((**d).clone())),
        Some(AttrValue::Value(Value::Scalar(s))) => s,
        Some(_) => return Err(()),
    };
    if text.contains("$(") || text.contains("${") || text.contains("@(") {
        return Err(());
    }
    let parsed = if text.len() > 3 && text.starts_with("---") {
        crate::functions::data::parse_yaml(text).map_err(|_| ())?
    } else {
        crate::values::json::parse(text).map_err(|_| ())?
    };
    if parsed.is_object() || parsed.is_array() {
        Ok(Some(parsed))
    } else {
        Err(())
    }
}

/// The copy of the old content `edit_backup` asks for, then the new
/// content, each written atomically: at every moment the file holds its
/// old content or its new one. When the file is no longer what the edit
/// read (`read`), another writer's change is kept and the promise fails.
pub(super) fn write_with_backup(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    mode: u32,
    data: &[u8],
    read: Option<crate::host::fs::Stamp>,
    v: &mut Verdict,
) -> bool {
    let defaults = p.body("edit_defaults");
    let backup = defaults
        .and_then(|d| d.scalar("edit_backup"))
        .unwrap_or("true");
    if backup != "false" {
        let plain = backup_path(target, backup, act.now, crate::host::clock::now_secs());
        let dest = if backup == "rotate" {
            let keep = defaults
                .and_then(|d| d.scalar("rotate"))
                .and_then(|r| r.parse::<u32>().ok())
                .unwrap_or(1)
                .max(1);
            rotate(act, &plain, keep);
            numbered(&plain, 1)
        } else {
            plain
        };
        if let Err(e) = act.host.copy_atomic(target, &dest, mode) {
            crate::error!("Unable to backup old '{}': {e}", p.promiser);
            v.failed();
            return false;
        }
        // The copy keeps the file's owner and group, as cf-agent's does.
        if let Ok(Some(m)) = act.host.stat(target)
            && let Err(e) = act.host.chown(&dest, Some(m.uid), Some(m.gid))
        {
            crate::warn!(
                "Could not give the backup '{}' the owner of '{}': {e}",
                dest.display(),
                p.promiser
            );
        }
        if let Some(repo) = super::repository::of(act, p) {
            super::repository::archive(act, &repo, &dest);
        }
    }
    match act
        .host
        .write_atomic_unless_changed(target, data, mode, read.as_ref())
    {
        Ok(()) => true,
        Err(e) => {
            crate::error!("Unable to save file '{}' after editing: {e}", p.promiser);
            v.failed();
            false
        }
    }
}

/// Where the copy made before editing goes: `file.cf-before-edit`, or
/// with cf-agent's time stamp (`file_<epoch>_<ctime>.cf-before-edit`),
/// whose number is when the agent started (`started`) and whose date is
/// when the file is saved (`now`), as in cf-agent.
fn backup_path(target: &Path, policy: &str, started: i64, now: i64) -> PathBuf {
    let mut name = target.as_os_str().to_os_string();
    if policy == "timestamp" {
        name.push(format!(
            "_{started}_{}",
            crate::values::canon::canonify(&ctime(now))
        ));
    }
    name.push(".cf-before-edit");
    name.into()
}

fn numbered(p: &Path, n: u32) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(format!(".{n}"));
    s.into()
}

/// Moves `name.1` to `name.2` and so on, dropping what falls off the end.
fn rotate(act: &mut ActContext<'_>, name: &Path, keep: u32) {
    for i in (1..keep).rev() {
        let from = numbered(name, i);
        if let Ok(Some(_)) = act.host.lstat(&from) {
            let _ = act.host.rename(&from, &numbered(name, i + 1));
        }
    }
}

/// `ctime(3)` without its newline: `Mon Jan  1 00:00:00 2024`, local time.
fn ctime(t: i64) -> String {
    let mut tm: libc::tm = unsafe_zeroed_tm();
    let tt = t as libc::time_t;
    // SAFETY: both pointers are valid for the call.
    unsafe { libc::localtime_r(&tt, &mut tm) };
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        DAYS[tm.tm_wday.rem_euclid(7) as usize],
        MONTHS[tm.tm_mon.rem_euclid(12) as usize],
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tm.tm_year + 1900
    )
}

fn unsafe_zeroed_tm() -> libc::tm {
    // SAFETY: libc::tm is plain old data; all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

/// What cf-agent prints when only a warning is promised: line by line
/// against the old content, the old lines that differ, then the new
/// lines beyond the old end.
fn warn_diff(old: &[&str], new: &[String]) -> Vec<String> {
    if old.is_empty() != new.is_empty() {
        let line =
            "File content wants to change from from/to full/empty but only a warning promised";
        return vec![line.to_string(), line.to_string()];
    }
    let mut out = Vec::new();
    for (i, o) in old.iter().enumerate() {
        match new.get(i) {
            Some(n) if n == o => {}
            Some(_) => out.push(format!("edit_line warning promised: - {o}")),
            None => out.push(format!(
                " ! edit_line change warning promised: (remove) {o}"
            )),
        }
    }
    for n in new.iter().skip(old.len()) {
        out.push(format!(" ! edit_line change warning promised: (add) {n}"));
    }
    out
}

/// A report inside an edit bundle prints once per run for each promise
/// and line, however many passes meet it.
pub(super) fn report_once(
    done: &mut HashSet<String>,
    act: &mut ActContext<'_>,
    ep: &ExpandedPromise,
) {
    let key = format!("reports\u{1}{}\u{1}{}", ep.promiser, ep.line);
    if done.insert(key) {
        super::super::Actuator::evaluate(&super::super::reports::Reports, act, ep);
    }
}

/// A region of the lines: the start delimiter's index (or none: from the
/// top) and the end delimiter's (or none: to the end).
#[derive(Debug, Clone, Copy)]
struct Region {
    begin: Option<usize>,
    end: Option<usize>,
}

struct Editor<'l> {
    lines: &'l mut Vec<String>,
    filename: String,
    /// Promises that acted this run (cf-agent's promise locks).
    done: HashSet<String>,
    /// What the promises did to the lines, said only if the file is
    /// written.
    pending: Vec<String>,
    /// Where lines were inserted, in order (see `put`).
    inserted: Vec<usize>,
}

/// One promise's bookkeeping while it acts.
struct Sub<'e> {
    ep: &'e ExpandedPromise,
    ptype: &'static str,
    result: Res,
    /// Interrupted while acting (not before, on its region): cf-agent
    /// then ends the promise with its `Errors encountered` line.
    interrupted_acting: bool,
    /// Some edit was made (or would be): a promise that also failed sets
    /// the classes of both, as cf-agent's each step reports its own.
    changed: bool,
    /// The edit promise's own `action_policy => "warn"` (or `"nop"`): its
    /// edits are warnings and the lines stay as they were.
    warn_only: bool,
}

impl Sub<'_> {
    fn set(&mut self, r: Res) {
        self.result.update(r);
    }

    /// An interruption met while acting on the selected lines.
    fn interrupt_acting(&mut self) {
        self.set(Res::Interrupted);
        self.interrupted_acting = true;
    }
}

impl Editor<'_> {
    /// Records a change the promise made to the lines. The lines are
    /// edited in memory whatever the mode (so the diff shown is the change
    /// a real run makes); its message is held until the file is written,
    /// or under a dry run the promise says at once what it would do. A
    /// promise that only warns says nothing here: the file's warning does.
    /// A line changed: `done` is kept for the file's record; `would`, the
    /// words of a change withheld, is worked out only then (an edit of a
    /// big file notes thousands of lines).
    fn note(
        &mut self,
        act: &mut ActContext<'_>,
        sub: &mut Sub<'_>,
        done: String,
        would: impl FnOnce() -> String,
    ) {
        note_line(&mut self.pending, &self.filename, act, sub, done, would);
    }

    fn run_bundle(
        &mut self,
        act: &mut ActContext<'_>,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        args: &[Value],
        empty_first: bool,
        inherit: bool,
    ) {
        let mut vars = Vec::new();
        for (name, value) in [
            ("filename", self.filename.clone()),
            ("empty_before_use", empty_first.to_string()),
        ] {
            let var = Variable::new(Value::str(value), DataType::String, Origin::Agent)
                .with_tags(vec!["source=promise".into()]);
            vars.push(("edit", name.to_string(), var));
        }
        // `$(match.N)` stays literal until a replacement fills it in.
        for n in 0..MATCH_PLACEHOLDERS {
            let literal = Value::str(format!("$(match.{n})"));
            let var = Variable::new(literal, DataType::String, Origin::Agent);
            vars.push(("match", n.to_string(), var));
        }
        // The scheduler runs the bundle: its passes, its promise types in
        // cf-agent's order for edit_line, vars, classes and iterations;
        // each edit comes back here.
        let call = BundleCall {
            file,
            bundle,
            args,
            frame_type: "edit_line",
            order: EDIT_ORDER,
            inherit,
            promiser_acts: &["reports", "insert_lines"],
            vars,
        };
        let runner = act.bundles;
        runner.run(act, &call, &mut |act, ep| self.visit(act, ep));
    }

    /// One expanded edit promise, from the runner: acts on the lines and
    /// says how it ended (`None`: it did not act, having acted in an
    /// earlier pass).
    fn visit(&mut self, act: &mut ActContext<'_>, ep: &ExpandedPromise) -> Option<Outcome> {
        let ptype = EDIT_ORDER
            .iter()
            .copied()
            .find(|t| *t == &*ep.promise_type)?;
        if ptype == "reports" {
            report_once(&mut self.done, act, ep);
            return None;
        }
        let warn_only = ep
            .body("action")
            .and_then(|a| a.scalar("action_policy"))
            .is_some_and(|p| p == "warn" || p == "nop");
        let mut sub = Sub {
            ep,
            ptype,
            result: Res::Noop,
            interrupted_acting: false,
            changed: false,
            warn_only,
        };
        // A promise that only warns works on the lines as any other (its
        // warnings say what it would do) and then leaves them as they were.
        let kept = warn_only.then(|| (self.lines.clone(), self.inserted.clone()));
        let acted = match ptype {
            "insert_lines" => self.insert(act, &mut sub),
            "delete_lines" => self.delete(act, &mut sub),
            "replace_patterns" => self.replace(act, &mut sub),
            "field_edits" => self.field_edit(act, &mut sub),
            _ => false,
        };
        if let Some((lines, inserted)) = kept {
            *self.lines = lines;
            self.inserted = inserted;
        }
        if !acted && sub.result == Res::Noop {
            // Locked: it acted in an earlier pass.
            return None;
        }
        let shown = if ptype == "field_edits" {
            "fields_edit"
        } else {
            ptype
        };
        match sub.result {
            Res::Change => self
                .pending
                .push(format!("{shown} promise '{}' repaired", ep.promiser)),
            Res::Fail => crate::error!(
                "Errors encountered when actuating {shown} promise '{}'",
                ep.promiser
            ),
            Res::Interrupted if sub.interrupted_acting => crate::error!(
                "Errors encountered when actuating {shown} promise '{}'",
                ep.promiser
            ),
            Res::Warn => crate::warn!(
                "Warnings encountered when actuating {shown} promise '{}'",
                ep.promiser
            ),
            Res::Noop | Res::Interrupted => {}
        }
        if sub.changed && sub.result > Res::Change {
            act.reported_outcomes = Some(vec![Outcome::Repaired, sub.result.outcome()]);
        }
        Some(sub.result.outcome())
    }

    /// Takes the promise's once-per-run lock; false if it acted already.
    fn lock(&mut self, sub: &Sub<'_>, extra: &str) -> bool {
        let key = format!(
            "{}\u{1}{}\u{1}{}\u{1}{:?}\u{1}{extra}",
            sub.ptype, sub.ep.promiser, self.filename, sub.ep.attrs
        );
        self.done.insert(key)
    }

    /// cf-agent's region selection: the start delimiter's line, and the
    /// end delimiter's after it. `None` (with cf-agent's verbose reason)
    /// when there is no start, or the start is the last line and not
    /// part of the region.
    fn select_region(&self, act: &mut ActContext<'_>, body: &ResolvedBody) -> Option<Region> {
        let start = body.scalar("select_start");
        let end = body.scalar("select_end");
        let include_start = flag(body, "include_start_delimiter");
        let start_re = start.and_then(|s| compile(act, s).ok());
        let end_re = end.and_then(|e| compile(act, e).ok());
        let n = self.lines.len();
        let mut beg = None;
        for (i, l) in self.lines.iter().enumerate() {
            if let Some(re) = &start_re
                && beg.is_none()
                && re.is_full_text_match(l)
            {
                if !include_start && i + 1 == n {
                    return None;
                }
                beg = Some(i);
                continue;
            }
            if let Some(re) = &end_re
                && beg.is_some()
                && re.is_full_text_match(l)
            {
                return Some(Region {
                    begin: beg,
                    end: Some(i),
                });
            }
        }
        if beg.is_none() && start.is_some() {
            return None;
        }
        Some(Region {
            begin: beg,
            end: None,
        })
    }

    /// The region a promise works in, or `None` after reporting why there
    /// is none. `what` names the operation in cf-agent's messages.
    fn region_for(
        &mut self,
        act: &mut ActContext<'_>,
        sub: &mut Sub<'_>,
        what: &str,
    ) -> Option<(Region, Option<&'static str>)> {
        let Some(body) = sub.ep.body("select_region") else {
            return Some((
                Region {
                    begin: None,
                    end: None,
                },
                None,
            ));
        };
        let body = body.clone();
        match self.select_region(act, &body) {
            Some(r) => {
                // The body's own `select_end_match_eof`, else agent
                // control's, as cf-agent reads it.
                let to_eof = body
                    .scalar("select_end_match_eof")
                    .and_then(crate::values::number::parse_bool)
                    .unwrap_or(act.ctx.agent_control().select_end_match_eof);
                if r.end.is_none() && body.scalar("select_end").is_some() && !to_eof {
                    return Some((r, Some("end-missing")));
                }
                Some((r, None))
            }
            None => {
                let promiser = &sub.ep.promiser;
                let f = &self.filename;
                match what {
                    "delete" => {
                        if flag(&body, "include_start_delimiter")
                            || flag(&body, "include_end_delimiter")
                        {
                            crate::error!(
                                "The promised line deletion '{promiser}' could not select an edit region in '{f}' (this is a good thing, as policy suggests deleting the markers)"
                            );
                        } else {
                            crate::error!(
                                "The promised line deletion '{promiser}' could not select an edit region in '{f}' (but the delimiters were expected in the file)"
                            );
                        }
                    }
                    "insert" => crate::error!(
                        "The promised line insertion '{promiser}' could not select an edit region in '{f}'"
                    ),
                    "replace" => crate::error!(
                        "The promised pattern replace '{promiser}' could not select an edit region in '{f}'"
                    ),
                    _ => crate::error!(
                        "The promised column edit '{promiser}' could not select an edit region in '{f}'"
                    ),
                }
                sub.set(Res::Interrupted);
                None
            }
        }
    }

    // ---------------------------------------------------------------
    // insert_lines

    fn insert(&mut self, act: &mut ActContext<'_>, sub: &mut Sub<'_>) -> bool {
        let ep = sub.ep;
        let itype = ep.scalar("insert_type").unwrap_or("literal").to_string();
        let policy: Vec<String> = ep
            .value("whitespace_policy")
            .map(list_of)
            .unwrap_or_default();
        let select = ep.body("insert_select").cloned();
        if !sanity_check_insert(&itype, &policy, select.as_ref()) {
            crate::error!(
                "The promised line insertion '{}' breaks its own promises",
                ep.promiser
            );
            sub.set(Res::Interrupted);
            return true;
        }
        let Some((region, problem)) = self.region_for(act, sub, "insert") else {
            return true;
        };
        if problem.is_some() {
            let end = ep
                .body("select_region")
                .and_then(|b| b.scalar("select_end"))
                .unwrap_or("");
            crate::error!(
                "The promised end pattern '{end}' was not found when selecting region to insert in '{}'",
                self.filename
            );
            sub.set(Res::Interrupted);
            return true;
        }
        let line_extra = if itype == "preserve_all_lines" {
            ep.line.to_string()
        } else {
            String::new()
        };
        if !self.lock(sub, &line_extra) {
            return false;
        }
        let loc = ep.body("location");
        let before = loc.and_then(|l| l.scalar("before_after")) == Some("before");
        let ins = Insertion {
            itype,
            policy,
            select,
            before,
            expand: ep.flag("expand_scalars").unwrap_or(false),
        };
        // The region for insertions runs from the start delimiter itself
        // to the end delimiter (cf-agent ignores include_* here).
        let begin = region.begin.unwrap_or(0);
        let end = region.end;
        match loc.and_then(|l| l.scalar("select_line_matching")) {
            None => self.insert_to_region(act, sub, &ins, begin, end),
            Some(pattern) => {
                let first = loc.and_then(|l| l.scalar("first_last")) == Some("first");
                let Ok(re) = compile(act, pattern) else {
                    sub.set(Res::Fail);
                    return true;
                };
                let stop = end.unwrap_or(self.lines.len()).min(self.lines.len());
                let range = begin.min(stop)..stop;
                let found = if first {
                    self.lines[range.clone()]
                        .iter()
                        .position(|l| re.is_full_text_match(l))
                } else {
                    self.lines[range.clone()]
                        .iter()
                        .rposition(|l| re.is_full_text_match(l))
                };
                match found {
                    None => {
                        crate::error!(
                            "The promised line insertion '{}' could not select a locator matching regex '{pattern}' in '{}'",
                            ep.promiser,
                            self.filename
                        );
                        sub.set(Res::Interrupted);
                    }
                    Some(i) => {
                        let at = range.start + i;
                        let prev = at.checked_sub(1);
                        self.insert_at_location(act, sub, &ins, begin, end, Some(at), prev);
                    }
                }
            }
        }
        true
    }

    fn insert_to_region(
        &mut self,
        act: &mut ActContext<'_>,
        sub: &mut Sub<'_>,
        ins: &Insertion,
        begin: usize,
        end: Option<usize>,
    ) {
        if self.lines.is_empty() {
            self.insert_at_location(act, sub, ins, begin, end, None, None);
            return;
        }
        if ins.before {
            // cf-agent passes no previous line here, which means "the top
            // of the file" even inside a region.
            self.insert_at_location(act, sub, ins, begin, end, Some(begin), None);
            return;
        }
        let multi = ins.itype == "preserve_all_lines";
        let chunk: Vec<&str> = sub.ep.promiser.split('\n').collect();
        let n = self.lines.len();
        let mut prev = None;
        let mut ip = begin;
        while ip < n {
            if !multi && self.match_chunk_exact(&chunk, ip, end) {
                return;
            }
            if ip + 1 == n || Some(ip + 1) == end {
                self.insert_at_location(act, sub, ins, begin, end, Some(ip), prev);
                return;
            }
            prev = Some(ip);
            ip += 1;
        }
    }

    /// Whether the lines from `at` are `chunk`, line for line, without
    /// reaching `end` (cf-agent's MatchRegion, exact form).
    fn match_chunk_exact(&self, chunk: &[&str], at: usize, end: Option<usize>) -> bool {
        for (k, c) in chunk.iter().enumerate() {
            let i = at + k;
            match self.lines.get(i) {
                Some(l) if l == c && Some(i) != end => {}
                _ => return false,
            }
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_at_location(
        &mut self,
        act: &mut ActContext<'_>,
        sub: &mut Sub<'_>,
        ins: &Insertion,
        begin: usize,
        end: Option<usize>,
        location: Option<usize>,
        prev: Option<usize>,
    ) {
        if ins.itype == "file" || ins.itype == "file_preserve_block" {
            self.insert_file(act, sub, ins, begin, end, location, prev);
        } else {
            let chunk = sub.ep.promiser.clone();
            self.insert_compound(act, sub, ins, &chunk, begin, end, location, prev);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_file(
        &mut self,
        act: &mut ActContext<'_>,
        sub: &mut Sub<'_>,
        ins: &Insertion,
        begin: usize,
        mut end: Option<usize>,
        location: Option<usize>,
        mut prev: Option<usize>,
    ) {
        let path = sub.ep.promiser.clone();
        let text = match act.host.read(Path::new(&path)) {
            Ok(b) => bytes::decode(&b),
            Err(e) => {
                crate::error!(
                    "Could not read file '{path}'. (fopen: {})",
                    crate::host::strerror(&e)
                );
                sub.set(Res::Fail);
                return;
            }
        };
        let preserve = ins.itype == "file_preserve_block";
        let mut loc = location;
        let mut begin = Some(begin);
        for raw in Lines::parse(&text).lines {
            let line = if ins.expand {
                act.ctx.expand(&raw).text
            } else {
                raw
            };
            if !select_line(act, &line, ins.select.as_ref()) {
                continue;
            }
            let b = begin.unwrap_or(0);
            if !preserve && self.in_region(act, &line, b, end, &ins.policy) {
                continue;
            }
            let mark = self.inserted.len();
            self.insert_compound(act, sub, ins, &line, b, end, loc, prev);
            self.shift_since(mark, &mut [&mut loc, &mut prev, &mut end, &mut begin]);
            // cf-agent moves on to the next lines; a missing locator stays
            // missing (it sets another variable than the one it reads).
            prev = match prev {
                Some(p) => (p + 1 < self.lines.len()).then_some(p + 1),
                None => (!self.lines.is_empty()).then_some(0),
            };
            loc = loc.and_then(|l| (l + 1 < self.lines.len()).then_some(l + 1));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_compound(
        &mut self,
        act: &mut ActContext<'_>,
        sub: &mut Sub<'_>,
        ins: &Insertion,
        chunk: &str,
        begin: usize,
        mut end: Option<usize>,
        mut location: Option<usize>,
        mut prev: Option<usize>,
    ) {
        let preserve_all = ins.itype == "preserve_all_lines";
        let preserve_block =
            preserve_all || ins.itype == "preserve_block" || ins.itype == "file_preserve_block";
        let parts: Vec<&str> = chunk.split('\n').collect();
        if !preserve_all
            && let Some(l) = location
            && self.match_chunk_exact(&parts, l, None)
        {
            return;
        }
        let mut begin = Some(begin);
        for part in parts {
            if !select_line(act, part, ins.select.as_ref()) {
                continue;
            }
            let b = begin.unwrap_or(0);
            if !preserve_block && self.in_region(act, part, b, end, &ins.policy) {
                continue;
            }
            let mark = self.inserted.len();
            self.insert_line(act, sub, ins, part, location, prev);
            self.shift_since(mark, &mut [&mut location, &mut prev, &mut end, &mut begin]);
            if preserve_block && ins.before && location.is_none() && prev.is_none() {
                location = Some(0);
            }
            prev = match prev {
                Some(p) => (p + 1 < self.lines.len()).then_some(p + 1),
                None => (!self.lines.is_empty()).then_some(0),
            };
            location = match location {
                Some(l) => (l + 1 < self.lines.len()).then_some(l + 1),
                None => (!self.lines.is_empty()).then_some(0),
            };
        }
    }

    /// Whether a line to insert is already in the region, under the
    /// promise's whitespace policy.
    fn in_region(
        &self,
        act: &mut ActContext<'_>,
        line: &str,
        begin: usize,
        end: Option<usize>,
        policy: &[String],
    ) -> bool {
        let stop = end.unwrap_or(self.lines.len()).min(self.lines.len());
        let start = begin.min(stop);
        let matcher = Matcher::new(act, line, policy);
        self.lines[start..stop].iter().any(|l| matcher.matches(l))
    }

    fn insert_line(
        &mut self,
        act: &mut ActContext<'_>,
        sub: &mut Sub<'_>,
        ins: &Insertion,
        line: &str,
        location: Option<usize>,
        prev: Option<usize>,
    ) {
        let f = self.filename.clone();
        let exact_block = ins.itype == "preserve_block";
        if prev.is_none() && ins.before {
            if self.lines.is_empty() {
                self.put(0, line);
                self.note(
                    act,
                    sub,
                    format!("Inserted the promised line '{line}' into '{f}'"),
                    || format!("Should insert line '{line}' into '{f}'"),
                );
                return;
            }
            if self.lines[0] != line {
                self.put(0, line);
                self.note(
                    act,
                    sub,
                    format!("Prepended the promised line '{line}' to {f}"),
                    || format!("Should prepend line '{line}' to {f}"),
                );
            }
            return;
        }
        if ins.before {
            // The line before the locator is `prev`.
            let neighbour = prev.and_then(|p| self.lines.get(p).cloned());
            if !exact_block
                && let Some(n) = neighbour
                && Matcher::new(act, line, &ins.policy).matches(&n)
            {
                return;
            }
            let at = prev.map_or(0, |p| p + 1);
            self.put(at, line);
            self.note(
                act,
                sub,
                format!("Inserted the promised line '{line}' into '{f}' before locator"),
                || format!("Should insert line '{line}' into '{f}' before locator"),
            );
        } else {
            let neighbour = location.and_then(|l| self.lines.get(l + 1).cloned());
            if !exact_block
                && let Some(n) = neighbour
                && Matcher::new(act, line, &ins.policy).matches(&n)
            {
                return;
            }
            let at = location.map_or(self.lines.len(), |l| (l + 1).min(self.lines.len()));
            self.put(at, line);
            self.note(
                act,
                sub,
                format!("Inserted the promised line '{line}' into '{f}' after locator"),
                || format!("Should insert line '{line}' into '{f}' after locator"),
            );
        }
    }

    // ---------------------------------------------------------------
    // delete_lines

    fn delete(&mut self, act: &mut ActContext<'_>, sub: &mut Sub<'_>) -> bool {
        let ep = sub.ep;
        let Some((region, problem)) = self.region_for(act, sub, "delete") else {
            return true;
        };
        if problem.is_some() {
            let end = ep
                .body("select_region")
                .and_then(|b| b.scalar("select_end"))
                .unwrap_or("");
            crate::error!(
                "The promised end pattern '{end}' was not found when selecting region to delete in '{}'",
                self.filename
            );
            sub.set(Res::Interrupted);
            return true;
        }
        if !self.lock(sub, "") {
            return false;
        }
        let body = ep.body("select_region");
        let include_start = body.is_some_and(|b| flag(b, "include_start_delimiter"));
        let include_end = body.is_some_and(|b| flag(b, "include_end_delimiter"));
        let from = match region.begin {
            None => 0,
            Some(b) if include_start => b,
            Some(b) => b + 1,
        };
        let terminator = match region.end {
            None => None,
            Some(e) if include_end => Some(e + 1),
            Some(e) => Some(e),
        };
        let not_matching = ep.flag("not_matching").unwrap_or(false);
        let select = ep.body("delete_select").cloned();
        let mut chunk = Vec::new();
        for part in ep.promiser.split('\n') {
            match compile(act, part) {
                Ok(re) => chunk.push(re),
                Err(e) => {
                    crate::error!("{e} {}", ep.located());
                    sub.set(Res::Fail);
                    return true;
                }
            }
        }
        let n = self.lines.len();
        let stop = terminator.unwrap_or(n).min(n);
        let mut keep = vec![true; n];
        let mut i = from;
        while i < stop {
            let matched = match_chunk_regex(self.lines, &chunk, i, terminator);
            let matches = if not_matching {
                usize::from(matched == 0)
            } else {
                matched
            };
            if matches == 0 || !select_line(act, &self.lines[i], select.as_ref()) {
                i += 1;
                continue;
            }
            for k in 0..matches {
                let (line, f) = (&self.lines[i + k], &self.filename);
                // Joined, not formatted: `format!` took half of an edit of a big file.
                let n = (k + 1).to_string();
                let done = ["Deleted the promised line ", &n, " '", line, "' from ", f].concat();
                let would = || ["Should delete line '", line, "' from ", f].concat();
                note_line(&mut self.pending, f, act, sub, done, would);
                keep[i + k] = false;
            }
            i += matches;
        }
        if keep.iter().any(|k| !k) {
            let mut k = keep.into_iter();
            self.lines.retain(|_| k.next().unwrap_or(true));
        }
        true
    }

    // ---------------------------------------------------------------
    // replace_patterns

    fn replace(&mut self, act: &mut ActContext<'_>, sub: &mut Sub<'_>) -> bool {
        let ep = sub.ep;
        let value = ep
            .body("replace_with")
            .and_then(|b| b.scalar("replace_value"))
            .map(str::to_string);
        let Some(value) = value else {
            crate::error!(
                "The promised pattern replace '{}' has no replacement string",
                ep.promiser
            );
            sub.set(Res::Interrupted);
            return true;
        };
        let Some((region, problem)) = self.region_for(act, sub, "replace") else {
            return true;
        };
        if problem.is_some() {
            sub.set(Res::Interrupted);
            return true;
        }
        if !self.lock(sub, "") {
            return false;
        }
        let once = ep
            .body("replace_with")
            .and_then(|b| b.scalar("occurrences"))
            == Some("first");
        if once {
            crate::warn!("Setting replace-occurrences policy to 'first' is not convergent");
        }
        let re = match compile(act, &ep.promiser) {
            Ok(r) => r,
            Err(e) => {
                crate::error!("{e} {}", ep.located());
                sub.set(Res::Fail);
                return true;
            }
        };
        let anchored = ep.promiser.starts_with('^') && ep.promiser.ends_with('$');
        // CFEngine 3.28: a pattern that still matches its replacement is
        // let be when replacing once more leaves the line as long.
        let allow_non_convergent = ep.flag("allow_non_convergent").unwrap_or(false);
        let begin = region.begin.unwrap_or(0);
        let stop = region.end.unwrap_or(self.lines.len()).min(self.lines.len());
        for i in begin..stop {
            let original = &self.lines[i];
            let Some(mut caps) = re.first_captures(original) else {
                continue;
            };
            let mut buf = original.clone();
            let mut replaced = false;
            let mut match_len = 0usize;
            let mut count = 1usize;
            loop {
                if replaced && match_len == buf.len() {
                    break;
                }
                if count > MAX_REPLACEMENTS_PER_LINE {
                    break;
                }
                count += 1;
                let (s, e) = caps[0].expect("group 0 takes part");
                match_len = e - s;
                let with = expand_match(act, &value, &buf, &caps);
                buf = format!("{}{}{}", &buf[..s], with, &buf[e..]);
                replaced = true;
                if once {
                    break;
                }
                match re.first_captures(&buf) {
                    Some(c) => caps = c,
                    None => break,
                }
            }
            // What one more replacement makes of the line: as long, the
            // pattern may match its replacement under allow_non_convergent.
            let converges_anyway = allow_non_convergent
                && match re.first_captures(&buf) {
                    Some(c) => {
                        let (s, e) = c[0].expect("group 0 takes part");
                        let with = expand_match(act, &value, &buf, &c);
                        buf.len() - (e - s) + with.len() == buf.len()
                    }
                    None => true,
                };
            if !anchored && re.is_match(&buf) && !converges_anyway {
                crate::error!(
                    "Promised replacement '{buf}' on line '{}' for pattern '{}' is not convergent while editing '{}' (regular expression matches the replacement string)",
                    self.lines[i],
                    ep.promiser,
                    self.filename
                );
                crate::error!("{}", ep.reference());
                sub.set(Res::Fail);
                break;
            }
            if !replaced || (converges_anyway && buf == self.lines[i]) {
                continue;
            }
            self.lines[i] = buf;
            let f = self.filename.clone();
            self.note(
                act,
                sub,
                ["Replaced pattern '", &ep.promiser, "' in '", &f, "'"].concat(),
                || format!("Should replace pattern '{}' in '{f}'", ep.promiser),
            );
            if once {
                break;
            }
            if re.is_match(&self.lines[i]) && !converges_anyway {
                crate::error!(
                    "Promised replacement '{}' for pattern '{}' is not properly convergent while editing '{}' (pattern still matches the end-state replacement string '{}', consider use of a negative look ahead)",
                    self.lines[i],
                    ep.promiser,
                    self.filename,
                    self.lines[i]
                );
                crate::info!("{}", ep.reference());
                sub.interrupt_acting();
            }
        }
        true
    }

    // ---------------------------------------------------------------
    // field_edits

    fn field_edit(&mut self, act: &mut ActContext<'_>, sub: &mut Sub<'_>) -> bool {
        let ep = sub.ep;
        let body = ep.body("edit_field").cloned().unwrap_or_default();
        let Some(sep) = body.scalar("field_separator").map(str::to_string) else {
            crate::error!(
                "No field_separator in promise to edit by column for '{}'",
                ep.promiser
            );
            sub.set(Res::Warn);
            return true;
        };
        let from_zero = flag(&body, "start_fields_from_zero");
        let column = body
            .scalar("select_field")
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(|n| if from_zero { n + 1 } else { n })
            .unwrap_or(0);
        if column <= 0 {
            crate::error!("No select_field in promise to edit '{}'", ep.promiser);
            sub.set(Res::Warn);
            return true;
        }
        let column = column as usize;
        let Some(value) = body.scalar("field_value").map(str::to_string) else {
            crate::error!(
                "No field_value is promised to column_edit '{}'",
                ep.promiser
            );
            sub.set(Res::Warn);
            return true;
        };
        let Some((region, _)) = self.region_for(act, sub, "field") else {
            return true;
        };
        if !self.lock(sub, "") {
            return false;
        }
        let op = body.scalar("field_operation").unwrap_or("none").to_string();
        let value_sep = body
            .scalar("value_separator")
            .and_then(|s| s.chars().next());
        let extend = flag(&body, "extend_fields");
        let blanks = flag(&body, "allow_blank_fields");
        let (re, sep_re) = match (compile(act, &ep.promiser), compile(act, &sep)) {
            (Ok(re), Ok(sep_re)) => (re, sep_re),
            (Err(e), _) | (_, Err(e)) => {
                crate::error!("{e} {}", ep.located());
                sub.set(Res::Fail);
                return true;
            }
        };
        let begin = region.begin.unwrap_or(0);
        let stop = region.end.unwrap_or(self.lines.len()).min(self.lines.len());
        let mut any = false;
        for i in begin..stop {
            if !re.is_full_text_match(&self.lines[i]) {
                continue;
            }
            any = true;
            let line = self.lines[i].clone();
            let seps = sep_re.find_all(&line);
            let Some(&(s0, e0)) = seps.first() else {
                sub.set(Res::Interrupted);
                return true;
            };
            let joiner = line[s0..e0].to_string();
            let mut fields = Vec::new();
            let mut last = 0;
            for &(s, e) in &seps {
                fields.push(line[last..s].to_string());
                last = e;
            }
            fields.push(line[last..].to_string());
            if !blanks {
                fields.retain(|f| !f.is_empty());
            }
            if column > fields.len() {
                // A line too short is left as it is, the promise
                // interrupted, and the next line edited, as cf-agent does
                // (10_files/08_field_edits/030.cf).
                if !extend {
                    crate::error!(
                        "The file {} has only {} fields, but there is a promise for field {column}",
                        self.filename,
                        fields.len()
                    );
                    sub.interrupt_acting();
                    continue;
                }
                fields.resize(column, String::new());
            }
            let cur = fields[column - 1].clone();
            let f = self.filename.clone();
            let new = match value_sep {
                Some(vs) => {
                    let mut parts: Vec<String> = if cur.is_empty() {
                        Vec::new()
                    } else {
                        cur.split(vs).map(str::to_string).collect()
                    };
                    let msg = edit_subfields(&mut parts, &op, &value, &f);
                    let Some(msg) = msg else {
                        continue;
                    };
                    self.note(act, sub, msg, || format!("Should edit field in {f}"));
                    parts.join(&vs.to_string())
                }
                None => {
                    let (new, msg) = if op == "delete" {
                        (
                            String::new(),
                            format!("Deleted column field value '' in '{f}'"),
                        )
                    } else {
                        (
                            value.clone(),
                            format!("Set whole column field value '{cur}' to '{value}' in '{f}'"),
                        )
                    };
                    if new == cur && op != "delete" {
                        continue;
                    }
                    self.note(act, sub, msg, || format!("Should edit field in {f}"));
                    new
                }
            };
            fields[column - 1] = new;
            self.lines[i] = fields.join(&joiner);
        }
        if !any {
            crate::error!(
                "No matched line to edit fields of for pattern '{}' in '{}'",
                ep.promiser,
                self.filename
            );
            sub.set(Res::Fail);
        }
        true
    }

    /// Inserts one line at `at`, remembering where: callers holding
    /// indices of lines (cf-agent holds pointers) shift them past it.
    fn put(&mut self, at: usize, line: &str) {
        let at = at.min(self.lines.len());
        self.lines.insert(at, line.to_string());
        self.inserted.push(at);
    }

    /// Shifts line indices over the insertions made since `mark`.
    fn shift_since(&self, mark: usize, idx: &mut [&mut Option<usize>]) {
        for &at in &self.inserted[mark..] {
            for i in idx.iter_mut() {
                if let Some(v) = i.as_mut()
                    && *v >= at
                {
                    *v += 1;
                }
            }
        }
    }
}

/// The attributes of one insertion.
struct Insertion {
    itype: String,
    policy: Vec<String>,
    select: Option<ResolvedBody>,
    before: bool,
    expand: bool,
}

/// cf-agent's sanity check of an insertion's selection and whitespace
/// options.
fn sanity_check_insert(itype: &str, policy: &[String], select: Option<&ResolvedBody>) -> bool {
    let mut ok = true;
    if let Some(s) = select {
        let with = [
            "insert_if_startwith_from_list",
            "insert_if_match_from_list",
            "insert_if_contains_from_list",
        ]
        .iter()
        .filter(|a| s.attrs.contains_key(**a))
        .count();
        let not = [
            "insert_if_not_startwith_from_list",
            "insert_if_not_match_from_list",
            "insert_if_not_contains_from_list",
        ]
        .iter()
        .filter(|a| s.attrs.contains_key(**a))
        .count();
        if not > 1 {
            crate::error!(
                "Line insertion selection promise is meaningless - the alternatives are mutually exclusive (only one is allowed)"
            );
            ok = false;
        }
        if with > 0 && not > 0 {
            crate::error!(
                "Line insertion selection promise is meaningless - cannot mix positive and negative constraints"
            );
            ok = false;
        }
    }
    let exact = policy.iter().any(|p| p == "exact_match");
    let other = policy.iter().any(|p| p != "exact_match");
    if other && itype == "preserve_block" {
        crate::error!("Line insertion should not use whitespace policy with preserve_block");
        ok = false;
    }
    if exact && other {
        crate::error!(
            "Line insertion selection promise is meaningless - cannot mix exact_match with other ignore whitespace options"
        );
        ok = false;
    }
    ok
}

/// cf-agent's line selection (`insert_select`, `delete_select`): the
/// first list the body has decides.
fn select_line(act: &mut ActContext<'_>, line: &str, body: Option<&ResolvedBody>) -> bool {
    let Some(b) = body else {
        return true;
    };
    let find = |suffix: &str| -> Option<(bool, Vec<String>)> {
        for prefix in ["insert_if_", "delete_if_"] {
            for (neg, name) in [
                (false, format!("{prefix}{suffix}")),
                (true, format!("{prefix}not_{suffix}")),
            ] {
                if b.attrs.contains_key(&name) {
                    return Some((neg, b.list(&name)));
                }
            }
        }
        None
    };
    // The order cf-agent checks them in: startwith, not_startwith, match,
    // not_match, contains, not_contains.
    for suffix in [
        "startwith_from_list",
        "match_from_list",
        "contains_from_list",
    ] {
        for want_neg in [false, true] {
            let Some((neg, list)) = find(suffix) else {
                continue;
            };
            if neg != want_neg {
                continue;
            }
            let hit = list.iter().any(|sel| match suffix {
                "startwith_from_list" => line.starts_with(sel.as_str()),
                "match_from_list" => compile(act, sel).is_ok_and(|r| r.is_full_text_match(line)),
                _ => compile(act, sel).is_ok_and(|r| r.is_match(line)),
            });
            return if neg { !hit } else { hit };
        }
    }
    true
}

/// How many lines from `at` match the chunk of regexes, or 0 (cf-agent's
/// MatchRegion in regex form; the terminator line never matches).
fn match_chunk_regex(
    lines: &[String],
    chunk: &[Arc<Regex>],
    at: usize,
    end: Option<usize>,
) -> usize {
    for (k, re) in chunk.iter().enumerate() {
        let i = at + k;
        if Some(i) == end {
            return 0;
        }
        match lines.get(i) {
            Some(l) if re.is_full_text_match(l) => {}
            _ => return 0,
        }
    }
    chunk.len()
}

/// The change to the sub-values of a field (`value_separator`), with
/// cf-agent's message; `None` when nothing changes.
fn edit_subfields(parts: &mut Vec<String>, op: &str, value: &str, f: &str) -> Option<String> {
    match op {
        "delete" => {
            let before = parts.len();
            parts.retain(|p| p != value);
            (parts.len() != before)
                .then(|| format!("Deleted column field sub-value '{value}' in '{f}'"))
        }
        "set" => {
            if (parts.len() == 1 && parts[0] == value) || (parts.is_empty() && value.is_empty()) {
                return None;
            }
            *parts = vec![value.to_string()];
            Some(format!("Set field sub-value '{value}' in '{f}'"))
        }
        "prepend" => {
            if parts.iter().any(|p| p == value) {
                return None;
            }
            parts.insert(0, value.to_string());
            Some(format!("Prepended field sub-value '{value}' in '{f}'"))
        }
        "alphanum" => {
            let added = !parts.iter().any(|p| p == value);
            if added {
                parts.insert(0, value.to_string());
            }
            let before = parts.clone();
            parts.sort();
            (added || *parts != before)
                .then(|| format!("Inserted field sub-value '{value}' in '{f}'"))
        }
        _ => {
            if parts.iter().any(|p| p == value) {
                return None;
            }
            parts.push(value.to_string());
            Some(format!("Appended field sub-value '{value}' in '{f}'"))
        }
    }
}

/// Compares a line to insert with a line of the file under a whitespace
/// policy: exact by default, else cf-agent's escaped pattern with the
/// ignored whitespace turned into `\s*`/`\s+`.
struct Matcher {
    exact: String,
    patterns: Vec<Arc<Regex>>,
}

impl Matcher {
    fn new(act: &mut ActContext<'_>, line: &str, policy: &[String]) -> Matcher {
        let mut patterns = Vec::new();
        if !policy.is_empty() && !policy.iter().any(|p| p == "exact_match") {
            let mut pat = escape_regex(line);
            for p in policy {
                pat = match p.as_str() {
                    "ignore_embedded" => collapse_inner_space(&pat),
                    "ignore_leading" if !pat.starts_with("\\s*") => {
                        format!("\\s*{}", pat.trim_start())
                    }
                    "ignore_trailing" if !pat.ends_with("\\s*") => {
                        format!("{}\\s*", pat.trim_end())
                    }
                    _ => pat,
                };
                if let Ok(re) = compile(act, &pat) {
                    patterns.push(re);
                }
            }
        }
        Matcher {
            exact: line.to_string(),
            patterns,
        }
    }

    fn matches(&self, haystack: &str) -> bool {
        if self.patterns.is_empty() {
            return self.exact == haystack;
        }
        self.patterns
            .iter()
            .any(|re| re.is_full_text_match(haystack))
    }
}

fn escape_regex(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Runs of whitespace between the first and last non-space characters
/// become `\s+`.
fn collapse_inner_space(pat: &str) -> String {
    let chars: Vec<char> = pat.chars().collect();
    let first = chars.iter().position(|c| !c.is_whitespace());
    let last = chars.iter().rposition(|c| !c.is_whitespace());
    let (Some(first), Some(last)) = (first, last) else {
        return pat.to_string();
    };
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if i > first && i < last && c.is_whitespace() {
            while i + 1 < chars.len() && chars[i + 1].is_whitespace() {
                i += 1;
            }
            out.push_str("\\s+");
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// `replace_value` with `$(match.N)` bound to this match's groups.
fn expand_match(
    act: &mut ActContext<'_>,
    template: &str,
    line: &str,
    caps: &[Option<(usize, usize)>],
) -> String {
    if !template.contains("$(match.") && !template.contains("${match.") {
        return template.to_string();
    }
    if let Some(text) = substitute_groups(template, line, caps) {
        return text;
    }
    let groups: Vec<(String, String)> = caps
        .iter()
        .enumerate()
        .map(|(n, g)| {
            let text = g.map(|(s, e)| line[s..e].to_string()).unwrap_or_default();
            (n.to_string(), text)
        })
        .collect();
    act.ctx.expand_with("match", &groups, template)
}

/// `template` with its `$(match.N)` references replaced by the groups,
/// when those are all it refers to (the usual `replace_value`): what
/// expanding it with the groups bound as `match.N` gives, without binding
/// them in the variable store for every line replaced. None for anything
/// else (another reference, a group the pattern does not have, a stray
/// `$` or `@`), which the caller expands as usual.
fn substitute_groups(
    template: &str,
    line: &str,
    caps: &[Option<(usize, usize)>],
) -> Option<String> {
    use crate::values::refs::next_ref;
    let plain = |t: &str| !t.contains(['$', '@']);
    let mut out = String::with_capacity(template.len() + line.len());
    let mut pos = 0;
    while let Some(r) = next_ref(template, pos) {
        let before = &template[pos..r.start];
        let n = template[r.inner_start..r.inner_end].strip_prefix("match.")?;
        if r.list_sigil || !plain(before) || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let i: usize = n.parse().ok()?;
        if i.to_string() != n {
            return None;
        }
        out.push_str(before);
        if let Some((s, e)) = *caps.get(i)? {
            out.push_str(&line[s..e]);
        }
        pos = r.end;
    }
    let tail = &template[pos..];
    plain(tail).then(|| out + tail)
}

fn compile(act: &mut ActContext<'_>, pattern: &str) -> Result<Arc<Regex>, String> {
    act.ctx.regex(pattern).map_err(|e| e.to_string())
}

/// [`Editor::note`] on the editor's fields, so that `would` may borrow its
/// lines.
fn note_line(
    pending: &mut Vec<String>,
    filename: &str,
    act: &mut ActContext<'_>,
    sub: &mut Sub<'_>,
    done: String,
    would: impl FnOnce() -> String,
) {
    if sub.warn_only {
        crate::warn!("{}, but only warning promised", would());
        sub.set(Res::Warn);
        return;
    }
    let decision = act.changes.plan_with(|| {
        Change::new("edit_line", filename)
            .should(would())
            .silent_when_warning()
    });
    match decision {
        Decision::Withheld {
            as_if_made: true, ..
        } => sub.set(Res::Warn),
        Decision::Withheld { .. } => {
            sub.set(Res::Change);
            sub.changed = true;
        }
        Decision::Make => {
            pending.push(done);
            sub.set(Res::Change);
            sub.changed = true;
        }
    }
}

fn flag(body: &ResolvedBody, name: &str) -> bool {
    body.scalar(name)
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false)
}

fn list_of(v: &Value) -> Vec<String> {
    match v {
        Value::Scalar(s) => vec![s.clone()],
        Value::List(l) => l.clone(),
        Value::Data(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_put_in_directly_only_when_they_are_all_the_template_names() {
        let line = "key_7 = old";
        let caps = [Some((0, 11)), Some((0, 5)), None];
        let sub = |t: &str| substitute_groups(t, line, &caps);
        assert_eq!(sub("$(match.1) = new").as_deref(), Some("key_7 = new"));
        assert_eq!(
            sub("${match.0}|$(match.2)|").as_deref(),
            Some("key_7 = old||")
        );
        // Left to the expansion: other references, a group the pattern
        // lacks, a number not written as cf-agent names it, stray sigils.
        for t in [
            "$(match.1) $(x)",
            "$(match.3)",
            "$(match.01)",
            "$(match.)",
            "@(match.1)",
            "$(match.1) $5",
            "$(match.1) $(",
            "$(match.1)@",
        ] {
            assert_eq!(sub(t), None, "{t}");
        }
    }

    #[test]
    fn lines_round_trip() {
        assert_eq!(Lines::parse("a\nb\n").render(), "a\nb\n");
        assert_eq!(Lines::parse("a\nb").lines, vec!["a", "b"]);
        assert_eq!(Lines::parse("").lines.len(), 0);
        assert_eq!(Lines::parse("\n").lines, vec![""]);
    }

    #[test]
    fn timestamped_backup_numbers_the_start_and_dates_the_save() {
        let started = 1_796_195_027;
        let p = backup_path(Path::new("/r/d"), "timestamp", started, started + 3);
        let name = p.to_string_lossy().to_string();
        let date = crate::values::canon::canonify(&ctime(started + 3));
        assert_eq!(name, format!("/r/d_{started}_{date}.cf-before-edit"));
        let plain = backup_path(Path::new("/r/d"), "true", started, started + 3);
        assert_eq!(plain, Path::new("/r/d.cf-before-edit"));
    }

    #[test]
    fn whitespace_patterns() {
        assert_eq!(collapse_inner_space(" a  b c "), " a\\s+b\\s+c ");
        assert_eq!(escape_regex("a.b"), "a\\.b");
    }

    #[test]
    fn subfields() {
        let mut p = vec!["a".to_string()];
        assert!(edit_subfields(&mut p, "append", "b", "f").is_some());
        assert_eq!(p, vec!["a", "b"]);
        assert!(edit_subfields(&mut p, "append", "b", "f").is_none());
        assert!(edit_subfields(&mut p, "alphanum", "0", "f").is_some());
        assert_eq!(p, vec!["0", "a", "b"]);
    }
}
