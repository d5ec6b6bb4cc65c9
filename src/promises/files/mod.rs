//! `files`: existence, permissions, content and edits of files and
//! directories, through the host layer. Each step checks first and only
//! then changes; under dry-run (or `action_policy => "warn"`) it says
//! what it would do instead, in cf-agent's words.

mod acl;
pub mod bytes;
mod changes;
pub mod copy;
pub mod edit;
mod fsattrs;
pub mod link;
pub mod perms;
pub mod remote;
mod repository;
pub mod search;
pub mod template;
mod transform;
pub mod xml;

use super::{ActContext, Actuator, Applied};
use crate::report::change::Change;

use crate::eval::expanded::ExpandedPromise;

use crate::eval::bodies::ResolvedBody;

use crate::host::fs::{FileKind, Meta, can_chown};
use crate::report::Outcome;
use perms::{ModeSpec, gid_of, rx_for_dirs, uid_of};
use std::path::{Path, PathBuf};

pub struct Files;

/// cf-agent's mode for files it creates without a `perms` body.
const DEFAULT_FILE_MODE: u32 = 0o600;
/// ... and for directories (parents included), unless body agent
/// control's `default_directory_create_mode` (CFEngine 3.27) changes it:
/// see [`dir_mode`].
const DEFAULT_DIR_MODE: u32 = 0o700;

/// The mode of the directories the agent makes: 0700, or what
/// `default_directory_create_mode` made of it.
fn dir_mode(act: &ActContext<'_>) -> u32 {
    act.ctx
        .agent_control()
        .default_dir_mode
        .unwrap_or(DEFAULT_DIR_MODE)
}

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
    /// The backups copies made beside the files they replaced, for the
    /// repository (see [`repository`]).
    backups: Vec<PathBuf>,
    /// A dry run said it would create the file and goes on with an empty
    /// one; what it would write then is not said again.
    would_create: bool,
    /// What `fsattrs` asks of the promised file, to do once its other
    /// steps are done (see [`fsattrs`]).
    immutable: Option<fsattrs::Immutable>,
    /// No "No action was requested" warning at the end: the promiser
    /// exists and the file_select does not select it (the promise stops
    /// there without a word, as cf-agent's does), or a regex promiser
    /// said it for each file it matched, or it matched nothing.
    no_action_said: bool,
    /// The file was created with the promised content already in it (see
    /// [`content_at_creation`]); the content step reports it without
    /// writing again.
    content_made: bool,
    /// The promiser's `lstat` as the promise's start saw it (or made it),
    /// when nothing since may have changed it: its steps need not look
    /// again.
    seen: Option<(PathBuf, Meta)>,
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

    pub(crate) fn backed_up(&mut self, backup: PathBuf) {
        self.backups.push(backup);
    }

    /// Records what became of a change: repaired when made; warned (or
    /// failed, as the change says) when withheld; failed, after `failed`
    /// said why, when making it failed. The made value, if any.
    pub(crate) fn settle<T, E>(&mut self, a: Applied<T, E>, failed: impl FnOnce(E)) -> Option<T> {
        match a {
            Applied::Made(t) => {
                self.repaired();
                Some(t)
            }
            Applied::Withheld { outcome, .. } => {
                if outcome == Outcome::Warned {
                    self.warned();
                } else {
                    self.failed();
                }
                None
            }
            Applied::Failed(e) => {
                failed(e);
                self.failed();
                None
            }
        }
    }

    /// The outcomes whose classes are set. Each step sets the classes of
    /// its own outcome, as cf-agent's do: a copy kept and permissions
    /// repaired set both the kept and the repaired classes
    /// (00_basics/03_bodies/114.cf), a file made and a template that
    /// cannot be read both the repaired and the failed ones
    /// (10_files/templating/missing_template_file.cf).
    fn outcomes(&self) -> Vec<Outcome> {
        let outcome = self.outcome();
        let mut reported = Vec::new();
        if self.kept_step && outcome != Outcome::Kept {
            reported.push(Outcome::Kept);
        }
        if self.repaired && outcome != Outcome::Repaired {
            reported.push(Outcome::Repaired);
        }
        reported.push(outcome);
        reported
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
        // The promise looks at its file many times; its directory is
        // checked once (see `Host::settle`).
        let _settled = act.host.settle();
        let outcome = evaluate(act, p);
        // An override of the immutable bit ends with its promise, however
        // the promise ended.
        act.host.set_override_immutable(false);
        outcome
    }
}

fn evaluate(act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
    let mut v = Verdict::default();
    let is_dir_promise = p.promiser.ends_with("/.") || p.promiser.ends_with('/');
    let target = promised_path(p);
    if !target.is_absolute() {
        crate::error!(
            "File '{}' is not an absolute path; files promises need one",
            p.promiser
        );
        return Outcome::Failed;
    }
    act.host.mirror_promised(&target);
    fips_check(act, p);
    let immutable = fsattrs::begin(act, p, &target, &mut v);
    v.immutable = immutable;
    // `X/.` names nothing when X is not a directory (cf-agent's lstat
    // of it fails): deleting it leaves a file X alone (ncf's
    // directory_absent on a file, its test
    // 30_generic_methods/directory_absent.cf).
    if p.promiser.ends_with("/.")
        && p.body("delete").is_some()
        && act
            .host
            .stat(&target)
            .ok()
            .flatten()
            .is_some_and(|m| m.kind != FileKind::Dir)
    {
        return finish(act, p, v);
    }
    if search::is_regex_promiser(p) && act.host.lstat(&target).ok().flatten().is_none() {
        let matches = search::regex_promiser_matches(&mut act.ctx, act.host, &p.promiser);
        // Nothing matches: a promise to create makes the promiser as
        // written, its pattern characters taken literally, as cf-agent
        // does (01_vars/02_functions/lsdir.cf creates `tu/*`).
        if matches.is_empty() && p.flag("create").unwrap_or(false) {
            leaf(act, p, &target, is_dir_promise, Reach::Promiser, &mut v);
        } else {
            v.no_action_said = true;
        }
        for path in matches {
            // A match the file_select does not select is left alone, as an
            // existing promiser is (below).
            if left_out_by_select(act, p, &path) {
                continue;
            }
            let groups = search::promiser_groups(&mut act.ctx, &p.promiser, &path);
            each_file(act, p, &path, &groups, &mut v, |act, fp, v| {
                leaf(act, fp, &path, false, Reach::Promiser, v)
            });
            // cf-agent verifies each match as a promise of its own.
            if promises_nothing(p) {
                warn_no_action(&path.display().to_string());
            }
            enter_parent(act, &path);
        }
        return finish(act, p, v);
    }
    // An existing promiser that the file_select does not select is left
    // alone, unless it is a directory to search (cf-agent), as a
    // directory not selected is not filled with links
    // (10_files/04_match/not_selected_dirs_are_skipped.cf). A symlink
    // is judged as the link itself: symlinked_to selects it by its
    // target (10_files/10_links/select_file_by_symlink_target.cf), and
    // a link to another file is left alone, as is the file it points
    // to.
    if left_out_by_select(act, p, &target) {
        v.no_action_said = true;
        return finish(act, p, v);
    }
    // Data a template cannot use fails the promise before it makes
    // anything (10_files/templating/mustache_invalid_template_data.cf).
    if edit::template_data(p).is_err() {
        crate::error!("No template data for the promise '{}'", p.promiser);
        v.failed();
        return finish(act, p, v);
    }
    // A fifo cannot be edited: cf-agent's sanity check refuses the
    // promise before it makes anything (10_files/07_delete_lines/700.cf).
    if p.scalar("file_type") == Some("fifo")
        && [
            "edit_line",
            "edit_xml",
            "edit_template",
            "edit_template_string",
        ]
        .iter()
        .any(|a| p.attrs.contains_key(*a))
    {
        crate::error!("Editing is not allowed on fifos {}", p.located());
        return Outcome::Failed;
    }
    // cf-agent makes a missing promiser (`create`, or `touch`) before
    // anything else the promise does: a copy or a link then finds it
    // in the way (10_files/02_maintain/001.cf, 101.cf).
    if creates_first(p) {
        let mut seen = act.host.lstat(&target).ok().flatten();
        if seen.is_none() {
            let is_dir = is_dir_promise || p.body("depth_search").is_some();
            let content = content_at_creation(act, p, is_dir, &v);
            seen = create_with(act, p, &target, is_dir, content, &mut v);
            if seen.is_none() {
                return finish(act, p, v);
            }
        }
        // What stands there now, for the promise's steps when nothing
        // comes between that may change it (a copy, a link, a search).
        let nothing_between = ["copy_from", "link_from", "depth_search"]
            .iter()
            .all(|a| !p.attrs.contains_key(*a));
        if nothing_between {
            v.seen = seen.map(|m| (target.clone(), m));
        }
    }
    if let Some(ds) = p.body("depth_search") {
        // A copy walks the source tree; everything else the target's.
        if let Some(body) = p.body("copy_from") {
            copy::copy_from(act, p, &target, body, &mut v);
            archive_backups(act, p, &mut v);
        }
        let search::Search { mut found, dirs } =
            search::depth_search(&mut act.ctx, act.host, &target, ds, &mut act.changes);
        if let Some(sel) = p.written_body("file_select") {
            let now = crate::host::clock::now_secs();
            found.retain(|f| search::selected(&mut act.ctx, act.host, sel, &f.path, &f.meta, now));
        }
        if p.body("delete").is_some() {
            // Contents before the directories that hold them.
            found.sort_by(|a, b| b.path.cmp(&a.path));
        }
        let watch = changes::Watch::of(act, p);
        if watch.as_ref().is_some_and(changes::Watch::report_diffs) {
            crate::error!(
                "Difference reporting is not allowed during a depth_search {}",
                p.located()
            );
            return Outcome::Failed;
        }
        // Each watched directory's recorded names, to tell new entries.
        let listings: std::collections::HashMap<PathBuf, Vec<String>> = match &watch {
            Some(_) => dirs
                .iter()
                .map(|d| (d.clone(), changes::recorded_listing(act, d)))
                .collect(),
            None => Default::default(),
        };
        let mut selected: std::collections::HashMap<PathBuf, Vec<String>> = Default::default();
        for f in found {
            if watch.is_some()
                && let (Some(dir), Some(name)) = (f.path.parent(), f.path.file_name())
            {
                let name = name.to_string_lossy().into_owned();
                let known = listings
                    .get(dir)
                    .is_some_and(|l| l.binary_search(&name).is_ok());
                if !known {
                    changes::log_new_file(act, p, &f.path.display().to_string());
                }
                selected.entry(dir.to_path_buf()).or_default().push(name);
            }
            each_file(act, p, &f.path, &[], &mut v, |act, fp, v| {
                leaf(act, fp, &f.path, false, Reach::Searched, v)
            });
            if let Some(c) = act.host.changes_chroot()
                && p.body("rename").is_none()
            {
                let shown = searched_name(p, &target, &f.path);
                c.record_evaluated(&shown);
                // As cf-agent, once the promise changed something.
                if v.repaired {
                    c.record_changed(&shown);
                }
            }
        }
        if let Some(w) = &watch {
            for d in &dirs {
                let names = selected.remove(d).unwrap_or_default();
                changes::check_directory(act, p, w, d, names, &mut v);
            }
        }
        return finish(act, p, v);
    }
    if let Some(body) = p.body("copy_from") {
        copy::copy_from(act, p, &target, body, &mut v);
        archive_backups(act, p, &mut v);
    }
    if let Some(body) = p.body("link_from") {
        link::link_from(act, p, &target, body, &mut v);
    }
    // What a copy made is not followed: a link it copied points where
    // the source's owner chose.
    let reach = if p.body("copy_from").is_none() {
        Reach::Promiser
    } else {
        Reach::Copied
    };
    leaf(act, p, &target, is_dir_promise, reach, &mut v);
    enter_parent(act, &target);
    finish(act, p, v)
}

/// Acts on one of the files a promise names (a regex promiser's match, a
/// depth search's find) as cf-agent does: with the promise expanded for
/// that file (`$(this.promiser)` its path, `$(match.N)` the pattern's
/// `groups` on it), the classes body setting the classes of what became
/// of that file (10_files/this_promiser.cf, 04_match/match_scope.cf).
/// The promise's own classes are set for its promiser once it is done.
fn each_file(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    path: &Path,
    groups: &[Option<String>],
    v: &mut Verdict,
    on: impl FnOnce(&mut ActContext<'_>, &ExpandedPromise, &mut Verdict),
) {
    let fp = act.ctx.for_file(p, &path.to_string_lossy(), groups);
    let fp = fp.as_ref().unwrap_or(p);
    let mut file = Verdict {
        would_create: v.would_create,
        ..Verdict::default()
    };
    on(act, fp, &mut file);
    // A file nothing was said of (a depth search's base it does not
    // delete) sets no classes of its own.
    let said = file.repaired || file.failed || file.warned || file.kept_step;
    if said && let Some(body) = fp.body("classes") {
        for o in file.outcomes() {
            act.ctx
                .define_outcome_classes(act.state.as_deref_mut(), act.now, body, o);
        }
    }
    v.repaired |= file.repaired;
    v.failed |= file.failed;
    v.warned |= file.warned;
    v.kept_step |= file.kept_step;
    v.would_create |= file.would_create;
    v.backups.append(&mut file.backups);
}

/// Whether an existing `path` is one the promise's file_select does not
/// select; a directory to search is never left out (see `evaluate`).
fn left_out_by_select(act: &mut ActContext<'_>, p: &ExpandedPromise, path: &Path) -> bool {
    let Some(sel) = p.written_body("file_select") else {
        return false;
    };
    let Some(meta) = act.host.lstat(path).ok().flatten() else {
        return false;
    };
    if p.body("depth_search").is_some() && meta.kind == FileKind::Dir {
        return false;
    }
    !search::selected(
        &mut act.ctx,
        act.host,
        sel,
        path,
        &meta,
        crate::host::clock::now_secs(),
    )
}

/// Moves the backups the promise's copies made into its repository, if
/// it has one, as cf-agent does after each copy.
fn archive_backups(act: &mut ActContext<'_>, p: &ExpandedPromise, v: &mut Verdict) {
    let backups = std::mem::take(&mut v.backups);
    let Some(repo) = repository::of(act, p) else {
        return;
    };
    for saved in backups {
        if repository::archive(act, &repo, &saved) {
            crate::info!("Archived backup '{}'", saved.display());
        }
    }
}

/// Whether the promise makes its promiser, when missing, before its other
/// steps: `create => "true"` or `touch => "true"`.
fn creates_first(p: &ExpandedPromise) -> bool {
    p.flag("create") == Some(true) || p.flag("touch") == Some(true)
}

/// Whether `create => "false"` (or "no") was written: cf-agent makes the
/// file of a promise that promises all its content (`content`, a template)
/// unless told not to.
fn create_refused(p: &ExpandedPromise) -> bool {
    p.flag("create") == Some(false)
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

/// How a files promise came to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// The promiser (or a file its pattern matched): a link stands for
    /// what it points to.
    Promiser,
    /// The promiser, made by a copy: a link it copied is not followed.
    Copied,
    /// An entry a depth search met: a link is an entry of its own.
    Searched,
}

/// The path a files promise names: a directory's promiser (`/.` or `/` at
/// its end) without that end.
fn promised_path(p: &ExpandedPromise) -> PathBuf {
    if p.promiser.ends_with("/.") || p.promiser.ends_with('/') {
        PathBuf::from(p.promiser.trim_end_matches('.').trim_end_matches('/'))
    } else {
        PathBuf::from(&p.promiser)
    }
}

/// Everything a files promise does to one path (not copies and links,
/// which the promise does once for its base path).
fn leaf(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    is_dir_promise: bool,
    reach: Reach,
    v: &mut Verdict,
) {
    let follow_link = reach == Reach::Promiser;
    let watch = changes::Watch::of(act, p);
    let shown = target.display().to_string();
    if let Some(del) = p.body("delete") {
        // A depth search never deletes the directory it starts from
        // (`include_basedir` selects it for the other steps): cf-agent
        // leaves that to a promise of its own, as ncf's directory_absent
        // does (its test 30_generic_methods/directory_absent.cf).
        if reach == Reach::Searched && target == promised_path(p) {
            crate::debug!("Skipping deletion of parent directory for recursive promise '{shown}'");
            return;
        }
        delete(act, &shown, target, del, v);
        return;
    }
    if let Some(ren) = p.body("rename") {
        rename(act, &shown, target, ren, false, v);
        // cf-agent checks a regular file that is still there once more
        // after all the promise's steps: a rotation (done once a run) is
        // said again (28_inform_testing/01_files/rename_rotate.cf), when
        // the file_select (if any) selects what is there now.
        let now = act.host.lstat(target).ok().flatten();
        let selected = |act: &mut ActContext<'_>, m: &crate::host::fs::Meta| {
            p.written_body("file_select").is_none_or(|sel| {
                search::selected(
                    &mut act.ctx,
                    act.host,
                    sel,
                    target,
                    m,
                    crate::host::clock::now_secs(),
                )
            })
        };
        if let Some(m) = now
            && m.kind == FileKind::File
            && selected(act, &m)
        {
            rename(act, &shown, target, ren, true, v);
        }
        return;
    }
    let handed = v.seen.take().filter(|(path, _)| path == target);
    let looked = match handed {
        Some((_, m)) => Ok(Some(m)),
        None => act.host.lstat(target),
    };
    let meta = match looked {
        Ok(m) => m,
        Err(e) => {
            crate::error!("Cannot stat '{shown}': {e}");
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
                crate::error!("Cannot stat '{shown}': {e}");
                v.failed();
                return;
            }
        },
        m => m,
    };
    let wants_create = creates_first(p) || (p.scalar("content").is_some() && !create_refused(p));
    let meta = match meta {
        Some(m) => Some(m),
        None if wants_create => {
            let content = content_at_creation(act, p, is_dir_promise, v);
            create_with(act, p, target, is_dir_promise, content, v)
        }
        None => None,
    };
    let existed = meta.is_some();
    let Some(meta) = meta else {
        if watch.is_some() && !v.warned {
            crate::error!("Promised to monitor '{shown}' for changes, but file does not exist");
            v.failed();
        }
        if v.failed || v.warned {
            return;
        }
        let edits = p.attrs.contains_key("edit_line")
            || p.attrs.contains_key("edit_template")
            || p.attrs.contains_key("edit_template_string")
            || p.attrs.contains_key("edit_xml");
        if !edits {
            return;
        }
        if create_refused(p) {
            // cf-agent renders nothing into a file it may not make.
            crate::debug!("Cannot render file '{shown}': file does not exist");
        } else if p.attrs.contains_key("edit_xml") && !p.attrs.contains_key("edit_line") {
            crate::error!("File '{shown}' was marked for editing but could not be opened");
            v.failed();
        } else {
            // A template makes the file it renders into; an edit_line
            // bundle finds it missing.
            edit::edit_file(act, p, target, false, v);
        }
        return;
    };
    if let Some(command) = p.scalar("transformer") {
        transform::transform(act, &shown, command, v);
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
            && !v.warned
            && !body.is_default()
        {
            v.kept_step();
        }
    }
    if let Some(body) = p.body("acl") {
        acl::apply_acl(act, p, &shown, target, &meta, body, v);
    }
    // cf-agent checks a file it found once before it changes its content
    // and, when it is a regular file, once more after (below); an entry of
    // a search once.
    if let Some(w) = &watch
        && (existed || reach == Reach::Searched)
    {
        changes::check_leaf(act, p, w, target, &meta, v);
    }
    if meta.kind == FileKind::File {
        if let Some(content) = p.scalar("content") {
            let just_created = v.would_create;
            set_content(act, &shown, target, content, just_created, v);
        }
        if p.attrs.contains_key("edit_line")
            || p.attrs.contains_key("edit_template")
            || p.attrs.contains_key("edit_template_string")
        {
            edit::edit_file(act, p, target, true, v);
        }
        if p.attrs.contains_key("edit_xml") {
            xml::edit_xml(act, p, target, v);
        }
    } else if matches!(meta.kind, FileKind::Fifo | FileKind::Other)
        && p.attrs.contains_key("edit_line")
    {
        // cf-agent tries to edit a device or FIFO too, and fails: it is
        // not a plain file.
        edit::edit_file(act, p, target, true, v);
    }
    if p.flag("touch") == Some(true) {
        let change = Change::new("touch", &shown)
            .done(format!("Touched (updated time stamps) for path '{shown}'"))
            .should(format!("Should update time stamps for '{shown}'"));
        let made = act.change(change, |h| h.touch(target));
        v.settle(made, |e| crate::error!("Could not touch '{shown}': {e}"));
    }
    // cf-agent verifies a regular file's attributes once more after all
    // its changes; an ACL it set may have changed the mode's group bits
    // (the mask), which the permissions then change back, and so on.
    if let Some(body) = p.body("acl")
        && let Ok(Some(now)) = act.host.stat(target)
        && now.kind == FileKind::File
    {
        if let Some(perms) = p.body("perms") {
            apply_perms(act, &shown, target, &now, perms, v);
        }
        let now = act.host.stat(target).ok().flatten().unwrap_or(now);
        acl::apply_acl(act, p, &shown, target, &now, body, v);
    }
    if let Some(w) = &watch
        && reach != Reach::Searched
        && let Ok(Some(now)) = act.host.stat(target)
        && now.kind == FileKind::File
    {
        changes::check_leaf(act, p, w, target, &now, v);
    }
}

/// `rename`: a new name, disabling (a suffix and a mode), or rotation.
/// `again`: the file's second check, where only a rotation (which
/// happens once a run) has anything to say.
fn rename(
    act: &mut ActContext<'_>,
    shown: &str,
    target: &Path,
    body: &ResolvedBody,
    again: bool,
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
        let change = Change::new("rotate", shown)
            .after(n.to_string())
            .done(format!("Rotated file '{shown}' in {n} fifo"))
            .should(format!("Should rotate file '{shown}' in {n} fifo"));
        let made = act.change(change, |h| {
            if again {
                return Ok(());
            }
            for i in (1..n).rev() {
                let from = PathBuf::from(format!("{shown}.{i}"));
                let to = PathBuf::from(format!("{shown}.{}", i + 1));
                if h.lstat(&from).ok().flatten().is_some() {
                    let _ = h.rename(&from, &to);
                }
            }
            h.rename(target, &PathBuf::from(format!("{shown}.1")))?;
            let _ = h.create_empty(target, meta.mode);
            Ok::<(), std::io::Error>(())
        });
        v.settle(made, |e| crate::error!("Could not rotate '{shown}': {e}"));
        return;
    }
    if again {
        return;
    }
    let disable = body
        .scalar("disable")
        .and_then(crate::values::number::parse_bool)
        == Some(true);
    let newname = match body.scalar("newname") {
        Some(n) if n.starts_with('/') => PathBuf::from(n),
        // Beside the promiser as written, as cf-agent names it.
        Some(n) => match shown.rsplit_once('/') {
            Some((dir, _)) if !dir.is_empty() => PathBuf::from(format!("{dir}/{n}")),
            _ => target.parent().unwrap_or(Path::new("/")).join(n),
        },
        None if disable => PathBuf::from(format!(
            "{shown}{}",
            body.scalar("disable_suffix").unwrap_or(".cfdisabled")
        )),
        None => return,
    };
    let disabling = disable && body.scalar("newname").is_none();
    let mut mode = meta.mode;
    let kind = if meta.kind == FileKind::Dir {
        "directory"
    } else {
        "file"
    };
    if disabling {
        // cf-agent's order and words: the warning, the mode (disable_mode,
        // or the mode it has), then the rename.
        crate::warn!("File object '{shown}' exists, contrary to promise");
        let spec = body
            .scalar("disable_mode")
            .and_then(|m| ModeSpec::parse(m).ok());
        if let Some(spec) = &spec {
            mode = spec.apply(meta.mode);
        }
        let change = Change::new("permissions", shown)
            .before(format!("{:04o}", meta.mode))
            .after(format!("{mode:04o}"))
            .done(format!(
                "Changed permissions of '{shown}' to 'mode {mode:04o}'"
            ));
        let made = act.change(change, |h| match spec {
            Some(_) => h.chmod(target, mode),
            None => Ok(()),
        });
        if let Applied::Failed(e) = made {
            crate::error!("Could not change permissions of '{shown}': {e}");
            v.failed();
            return;
        }
    }
    let change = Change::new("rename", shown).after(newname.display().to_string());
    let change = if disabling {
        change
            .done(format!(
                "Disabled file '{shown}' by renaming to '{}' with mode {mode:04o}",
                newname.display()
            ))
            .should(format!("Should rename '{kind}' '{shown}'"))
    } else {
        change
            .done(format!("Renamed file '{shown}' to '{}'", newname.display()))
            .should(format!(
                "Should rename file '{shown}' to '{}'",
                newname.display()
            ))
    };
    let made = act.change(change, |h| h.rename(target, &newname));
    if v.settle(made, |e| crate::error!("Could not rename '{shown}': {e}"))
        .is_some()
        && let Some(c) = act.host.changes_chroot()
    {
        c.record_rename(shown, &newname.display().to_string());
    }
}

/// The name cf-agent gives an entry its depth search met: the promiser as
/// written (`/dir/.` keeps its dot), then the entry's path below it.
fn searched_name(p: &ExpandedPromise, base: &Path, found: &Path) -> String {
    match found.strip_prefix(base) {
        Ok(rel) => format!("{}/{}", p.promiser.trim_end_matches('/'), rel.display()),
        Err(_) => found.display().to_string(),
    }
}

/// Under `--simulate`: what the report that ends the run shows of the
/// promise (its renames are told apart).
fn record_in_chroot(act: &ActContext<'_>, p: &ExpandedPromise, outcome: Outcome) {
    let Some(c) = act.host.changes_chroot() else {
        return;
    };
    if p.body("rename").is_some() {
        return;
    }
    // Without a depth search, cf-agent names `/dir/.` as `/dir`.
    let path = match p.promiser.strip_suffix("/.") {
        Some(dir) if p.body("depth_search").is_none() && !dir.is_empty() => dir,
        _ => p.promiser.as_str(),
    };
    match outcome {
        Outcome::Repaired => c.record_changed(path),
        Outcome::Kept => c.record_evaluated(path),
        _ => {}
    }
}

fn finish(act: &mut ActContext<'_>, p: &ExpandedPromise, mut v: Verdict) -> Outcome {
    if let Some(st) = v.immutable.take() {
        fsattrs::end(act, st, &mut v);
    }
    if !v.no_action_said && promises_nothing(p) {
        // cf-agent names `X/.` as X, but for a search.
        let shown = match p.promiser.strip_suffix("/.") {
            Some(dir) if p.body("depth_search").is_none() => dir,
            _ => &p.promiser,
        };
        warn_no_action(shown);
    }
    if v.failed {
        crate::error!(
            "Errors encountered when actuating files promise '{}'",
            p.promiser
        );
    } else if v.warned {
        crate::warn!(
            "Warnings encountered when actuating files promise '{}'",
            p.promiser
        );
    }
    let outcome = v.outcome();
    record_in_chroot(act, p, outcome);
    let reported = v.outcomes();
    if reported.len() > 1 {
        act.reported_outcomes = Some(reported);
    }
    outcome
}

fn warn_no_action(path: &str) {
    crate::warn!("No action was requested for file '{path}'. Maybe a typo in the policy?");
}

/// Whether a files promise has none of the attributes cf-agent 3.21
/// counts as an action (its `AttrHasNoAction`): such a promise is most
/// likely a typo, and cf-agent warns. `create` and `touch` count only
/// when they say `true` or `yes`, an `acl` body only with `aces`.
fn promises_nothing(p: &ExpandedPromise) -> bool {
    const ACTIONS: [&str; 13] = [
        "transformer",
        "rename",
        "delete",
        "copy_from",
        "link_from",
        "perms",
        "changes",
        "edit_line",
        "edit_xml",
        "edit_template",
        "edit_template_string",
        "content",
        "fsattrs",
    ];
    let set = |name: &str| matches!(p.scalar(name), Some("true" | "yes"));
    !(ACTIONS.iter().any(|a| p.attrs.contains_key(*a))
        || set("create")
        || set("touch")
        || p.body("acl")
            .is_some_and(|acl| !acl.list("aces").is_empty()))
}

/// Whether a perms body's mode gives a directory `x` wherever it has `r`:
/// `rxdirs`, false unless set (cf-agent 3.21's default).
fn rxdirs(body: Option<&ResolvedBody>) -> bool {
    body.and_then(|b| b.scalar("rxdirs"))
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false)
}

/// The mode a new file or directory gets: the perms body's, else cf-agent's default.
fn creation_mode(p: &ExpandedPromise, is_dir: bool, dir_default: u32) -> u32 {
    let default = if is_dir {
        dir_default
    } else {
        DEFAULT_FILE_MODE
    };
    match p
        .body("perms")
        .and_then(|b| b.scalar("mode"))
        .map(ModeSpec::parse)
    {
        // cf-agent makes a file with what the mode sets, and a directory
        // with its default mode changed as promised.
        Some(Ok(spec)) if is_dir => {
            let m = spec.apply(default);
            if rxdirs(p.body("perms")) {
                rx_for_dirs(m)
            } else {
                m
            }
        }
        Some(Ok(spec)) => spec.creation_mode(),
        _ => default,
    }
}

fn create(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    is_dir: bool,
    v: &mut Verdict,
) -> Option<Meta> {
    create_with(act, p, target, is_dir, None, v)
}

/// The content a missing file may be created with at once, rather than
/// created empty and then rewritten (two files made, one thrown away):
/// when nothing of the promise looks at the file between its creation and
/// its content (a transformer, an ACL, a copy or link, a search, an
/// immutable bit), and the change is made, not only said. The end is
/// the same file, with the same words said.
fn content_at_creation<'p>(
    act: &ActContext<'_>,
    p: &'p ExpandedPromise,
    is_dir: bool,
    v: &Verdict,
) -> Option<&'p str> {
    let content = p.scalar("content")?;
    let alone = !is_dir
        && act.changes.mode() == crate::report::change::Mode::Apply
        && v.immutable.is_none()
        && p.scalar("file_type") != Some("fifo")
        && [
            "transformer",
            "acl",
            "copy_from",
            "link_from",
            "depth_search",
        ]
        .iter()
        .all(|a| !p.attrs.contains_key(*a))
        && !search::is_regex_promiser(p);
    alone.then_some(content)
}

/// [`create`]; a regular file gets `content` at once when given (see
/// [`content_at_creation`]).
fn create_with(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    is_dir: bool,
    content: Option<&str>,
    v: &mut Verdict,
) -> Option<Meta> {
    let mode = creation_mode(p, is_dir, dir_mode(act));
    // A regex promiser names each file it matched; others as written.
    let shown = if search::is_regex_promiser(p) {
        target.display().to_string()
    } else {
        p.promiser.clone()
    };
    let fifo = p.scalar("file_type") == Some("fifo");
    if !is_dir {
        // cf-agent names each missing parent directory, outermost first.
        let mut missing = Vec::new();
        let mut dir = target.parent();
        while let Some(d) = dir
            && act.host.lstat(d).ok().flatten().is_none()
        {
            missing.push(d);
            dir = d.parent();
        }
        if let (Some(parent), false) = (target.parent(), missing.is_empty()) {
            let mut change = Change::new("create_parents", &shown)
                .after(parent.display().to_string())
                .done(format!("Created directory for '{shown}'"));
            for d in missing.iter().rev() {
                change = change.should(format!(
                    "Should make directory '{}' for '{shown}'",
                    d.display()
                ));
            }
            let dmode = dir_mode(act);
            let made = act.change(change, |h| h.mkdir_all(parent, dmode));
            if let Applied::Failed(e) = made {
                crate::error!("Could not create directories for '{shown}': {e}");
                v.failed();
                return None;
            }
        }
    }
    let change = Change::new("create", &shown).after(format!("{mode:04o}"));
    let change = if is_dir {
        change
            .done(format!("Created directory '{shown}'"))
            .should(format!("Should create directory '{shown}'"))
    } else {
        change
            .done(format!("Created file '{shown}', mode {mode:04o}"))
            .should(format!("Should create file '{shown}', mode '{mode:04o}'"))
    };
    let made = act.change(change, |h| {
        if is_dir {
            h.mkdir_all(target, mode).map(|_| ())
        } else if fifo {
            h.create_fifo(target, mode)
        } else if let Some(c) = content {
            h.create_with_content(target, mode, c.as_bytes())
        } else {
            h.create_empty(target, mode)
        }
    });
    match made {
        Applied::Made(()) => {
            v.repaired();
            v.content_made = content.is_some() && !is_dir && !fifo;
            act.host.lstat(target).ok().flatten()
        }
        Applied::Withheld {
            outcome,
            as_if_made,
        } => {
            v.settle(
                Applied::<(), ()>::Withheld {
                    outcome,
                    as_if_made,
                },
                |_| {},
            );
            // A dry run goes on as if the file were there (empty), so that
            // its content and edits show as the real run's would.
            if is_dir || !as_if_made || fifo {
                return None;
            }
            v.would_create = true;
            act.host.simulate_file(target, b"", mode);
            act.host.lstat(target).ok().flatten()
        }
        Applied::Failed(e) => {
            crate::error!("Error creating '{shown}': {e}");
            v.failed();
            None
        }
    }
}

/// Sets `target`'s permission bits from `was` to `want`, reported in
/// cf-agent's words (a perms body's mode, a copy's preserved mode).
pub(super) fn change_mode(
    act: &mut ActContext<'_>,
    shown: &str,
    target: &Path,
    was: u32,
    want: u32,
    v: &mut Verdict,
) {
    let change = Change::new("permissions", shown)
        .before(format!("{was:04o}"))
        .after(format!("{want:04o}"))
        .done(format!(
            "Object '{shown}' had permissions {was:04o}, changed it to {want:04o}"
        ))
        .should(format!(
            "Should change permissions of '{shown}' from {was:04o} to {want:04o}"
        ))
        .without_suffix();
    let made = act.change(change, |h| h.chmod(target, want));
    v.settle(made, |e| {
        crate::error!("Could not change permissions of '{shown}': {e}")
    });
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
                if meta.kind == FileKind::Dir && rxdirs(Some(body)) {
                    want = rx_for_dirs(want);
                }
                if want != meta.mode {
                    change_mode(act, shown, target, meta.mode, want, v);
                }
            }
            Err(e) => {
                crate::error!(
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
    let mut change = Change::new("owner", shown)
        .before(format!("{}:{}", meta.uid, meta.gid))
        .after(format!(
            "{}:{}",
            want_uid.unwrap_or(meta.uid),
            want_gid.unwrap_or(meta.gid)
        ))
        .should(format!(
            "Should change the owner or group of '{shown}', but only warning promised"
        ))
        .without_suffix();
    if let Some(u) = want_uid {
        change = change.done(format!("Owner of '{shown}' was {}, set to {u}", meta.uid));
    }
    if let Some(g) = want_gid {
        change = change.done(format!("Group of '{shown}' was {}, set to {g}", meta.gid));
    }
    let made = act.change(change, |h| {
        if !can_chown() {
            return Err(format!(
                "Cannot change the owner or group of '{shown}': only root may"
            ));
        }
        h.chown(target, want_uid, want_gid)
            .map_err(|e| format!("Could not change the owner or group of '{shown}': {e}"))
    });
    v.settle(made, |e| crate::error!("{e}"));
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
                crate::error!("Unknown {what} '{n}' in perms of '{}'", shown);
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
    just_created: bool,
    v: &mut Verdict,
) {
    if v.content_made {
        // Written when the file was made: said now, as cf-agent says it.
        v.content_made = false;
        let change = Change::new("content", shown)
            .after(content)
            .done(format!("Updated file '{shown}' with content '{content}'"));
        let change = act.changes.with_content(change, b"", content.as_bytes());
        let made = act.change(change, |_| Ok::<(), std::io::Error>(()));
        v.settle(made, |_| {});
        return;
    }
    let current = match act.host.read(target) {
        Ok(c) => c,
        Err(e) => {
            crate::error!("Could not read '{}': {e}", shown);
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
    let change = Change::new("content", shown)
        .after(content)
        .done(format!("Updated file '{shown}' with content '{content}'"));
    let mut change = act
        .changes
        .with_content(change, &current, content.as_bytes());
    if !just_created {
        change = change.should(format!(
            "Should update file '{shown}' with content '{content}'"
        ));
    }
    let made = act.change(change, |h| h.write_atomic(target, content.as_bytes(), mode));
    if let Applied::Withheld {
        as_if_made: true, ..
    } = made
    {
        act.host.simulate_file(target, content.as_bytes(), mode);
    }
    v.settle(made, |e| crate::error!("Could not write '{shown}': {e}"));
}

fn delete(
    act: &mut ActContext<'_>,
    shown: &str,
    target: &Path,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let meta = match act.host.lstat(target) {
        Ok(Some(m)) => m,
        Ok(None) => return,
        Err(e) => {
            crate::error!("Cannot stat '{}': {e}", shown);
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
    let kind = if is_dir { "directory" } else { "file" };
    let change = Change::new("delete", shown)
        .done(if is_dir {
            format!("Deleted directory '{shown}'")
        } else {
            format!("Deleted file '{shown}'")
        })
        .should(format!("Should delete {kind} '{shown}'"));
    let made = act.change(change, |h| {
        if is_dir {
            h.remove_dir(target)
        } else {
            h.remove_file(target)
        }
    });
    // A directory that is not empty is never deleted: cf-agent skips it
    // without failing the promise.
    if let Applied::Failed(e) = &made
        && is_dir
        && matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST))
    {
        crate::debug!("Delete directory '{shown}' not empty, skipping");
        return;
    }
    v.settle(made, |e| crate::error!("Could not delete '{shown}': {e}"));
}

/// A copy_from body's `compare`, else agent control's `defaultcopytype`,
/// else `mtime` (cf-agent's libpromises/attributes.c GetCopyConstraints).
fn compare_of(act: &ActContext<'_>, body: &ResolvedBody) -> String {
    body.scalar("compare")
        .map(str::to_string)
        .or_else(|| act.ctx.agent_control().defaultcopytype.clone())
        .unwrap_or_else(|| "mtime".to_string())
}

/// Common control's `fips_mode`: cf-agent reads every files promise's
/// change hash (md5 unless a changes body names another) and says md5 is
/// not approved; the promise goes on (libpromises/attributes.c
/// GetChangeMgtConstraints).
fn fips_check(act: &ActContext<'_>, p: &ExpandedPromise) {
    let fips = act
        .ctx
        .common_control("fips_mode")
        .and_then(crate::values::Value::as_scalar)
        .and_then(crate::values::number::parse_bool);
    if fips != Some(true) {
        return;
    }
    let hash = p.body("changes").and_then(|b| b.scalar("hash"));
    if matches!(hash, None | Some("md5")) {
        crate::error!("FIPS mode is enabled, and md5 is not an approved algorithm");
        crate::error!("{}", p.reference());
    }
}
