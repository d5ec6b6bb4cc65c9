//! `changes` bodies: file integrity monitoring as cf-agent 3.21 does it.
//! A file's digest (`hash`) and stat fields are kept in the state store
//! (see [`crate::state::FileStat`]); a depth search also keeps, per
//! directory, the names it selected there. What differs from the records
//! is said and appended to `file_changes.log` in the state directory, one
//! line per event: `time,promise id,path,N|R|C|S,message` (new file,
//! removed, content changed, stat changed). `update_hashes` (default: the
//! agent control's `hashupdates`, else no) says whether a changed digest
//! replaces the record; when it does not, the promise fails each time it
//! finds the change. `report_changes` picks content, stats or both (none
//! by default: only new and removed files of a search are told).
//! `report_diffs` is an Enterprise feature: cf-agent 3.21's community
//! build says so at verbose level and does nothing more, and so do we.

use super::Verdict;
use crate::eval::bodies::ResolvedBody;
use crate::eval::expanded::ExpandedPromise;
use crate::host::fs::{FileKind, Meta};
use crate::promises::{ActContext, Applied};
use crate::report::change::Change;
use crate::report::log::NOTICE_TARGET;
use crate::state::FileStat;
use std::path::Path;

/// How long cf-agent keeps `checksum_alerts` defined unless agent
/// control's `checksum_alert_time` says: CF_PERSISTENCE minutes.
const ALERT_MINUTES: i64 = 10;

/// A `changes` body, read once per promise.
#[derive(Debug, Clone)]
pub(super) struct Watch {
    /// The hash methods to compare, in order (`best` is md5 then sha1).
    methods: Vec<&'static str>,
    content: bool,
    stats: bool,
    update: bool,
    report_diffs: bool,
}

impl Watch {
    pub(super) fn of(act: &ActContext<'_>, p: &ExpandedPromise) -> Option<Watch> {
        let body: &ResolvedBody = p.body("changes")?;
        let methods = match body.scalar("hash") {
            Some("best") => vec!["md5", "sha1"],
            Some(m @ ("sha1" | "sha256" | "sha384" | "sha512")) => vec![static_name(m)],
            // cf-agent's CF_DEFAULT_DIGEST.
            _ => vec!["md5"],
        };
        let report = body.scalar("report_changes").unwrap_or("none");
        let flag = |name: &str| {
            body.scalar(name)
                .and_then(crate::values::number::parse_bool)
        };
        Some(Watch {
            methods,
            content: matches!(report, "content" | "all"),
            stats: matches!(report, "stats" | "all"),
            update: flag("update_hashes").unwrap_or(act.ctx.agent_control().hashupdates),
            report_diffs: flag("report_diffs").unwrap_or(false),
        })
    }

    pub(super) fn report_diffs(&self) -> bool {
        self.report_diffs
    }
}

fn static_name(m: &str) -> &'static str {
    match m {
        "sha1" => "sha1",
        "sha256" => "sha256",
        "sha384" => "sha384",
        _ => "sha512",
    }
}

/// cf-agent's id of a promise in the log: its handle, else
/// `promise_<file name canonified>_<line>`.
fn promise_id(p: &ExpandedPromise) -> String {
    use crate::values::canon::canonify;
    match &p.handle {
        Some(h) => canonify(h),
        None => {
            let base = Path::new(&*p.file)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("promise_{}_{}", canonify(&base), p.line)
        }
    }
}

/// The log line of one event, as cf-agent's `FileChangesLogChange`.
fn log_event(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    path: &str,
    kind: char,
    msg: &str,
) -> bool {
    let Some(dir) = act.state.as_deref().map(|s| s.state_dir().to_path_buf()) else {
        return false;
    };
    let log = dir.join("file_changes.log");
    if let Ok(Some(m)) = act.host.stat(&log)
        && m.mode & 0o022 != 0
    {
        crate::error!(
            "File '{}' (owner {}) was writable by others (security exception)",
            log.display(),
            m.uid
        );
    }
    let line = format!("{},{},{path},{kind},{msg}\n", act.now, promise_id(p));
    match act.host.append(&log, line.as_bytes()) {
        Ok(()) => true,
        Err(e) => {
            crate::error!("Could not write to the hash change log. (fopen: {e})");
            false
        }
    }
}

/// A change to the integrity records, made unless dry-running.
fn internal(
    act: &mut ActContext<'_>,
    v: &mut Verdict,
    what: &str,
    shown: &str,
    should: String,
) -> bool {
    let change = Change::new(what, shown).should(should);
    let made = act.change(change, |_| Ok::<(), ()>(()));
    let is_made = matches!(made, Applied::Made(()));
    if !is_made {
        // Withheld under a dry run: the promise is warned, as cf-agent's.
        v.settle(made, |_| {});
    }
    is_made
}

/// A new entry of a watched directory, told before the entry is checked.
pub(super) fn log_new_file(act: &mut ActContext<'_>, p: &ExpandedPromise, path: &str) {
    crate::info!(target: NOTICE_TARGET, "New file '{path}' found");
    log_event(act, p, path, 'N', "New file found");
}

/// The integrity and stat checks of one file (cf-agent's part of
/// `VerifyFileLeaf`).
pub(super) fn check_leaf(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    w: &Watch,
    path: &Path,
    meta: &Meta,
    v: &mut Verdict,
) {
    if act.state.is_none() {
        crate::error!("Unable to open the hash database!");
        v.failed();
        return;
    }
    // cf-agent verifies the file's attributes here, and reports the ones
    // it finds as promised kept whatever else the promise did.
    v.kept_step();
    let shown = path.display().to_string();
    if meta.kind == FileKind::File && w.content {
        integrity(act, p, w, path, &shown, v);
    }
    if w.stats {
        stats(act, p, w, &shown, meta, v);
    }
}

fn integrity(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    w: &Watch,
    path: &Path,
    shown: &str,
    v: &mut Verdict,
) {
    let data = match act.host.read(path) {
        Ok(d) => d,
        Err(e) => {
            crate::error!("Cannot read '{shown}' to hash it: {e}");
            v.failed();
            return;
        }
    };
    // As cf-agent: once one method finds a change, the next is not asked.
    let mut changed = false;
    for method in &w.methods {
        if !changed {
            changed = check_hash(act, w, method, &data, shown, v);
        }
    }
    if changed
        && internal(
            act,
            v,
            "integrity",
            shown,
            format!("Should record integrity changes in '{shown}'"),
        )
    {
        let info = crate::eval::classes::ClassInfo::soft(
            crate::values::value::Origin::Agent,
            vec!["source=promise".into()],
        );
        act.ctx.define_class("checksum_alerts", false, info);
        let minutes = act
            .ctx
            .agent_control()
            .checksum_alert_time
            .map_or(ALERT_MINUTES, |m| m as i64);
        act.ctx
            .persist_class("checksum_alerts", minutes, vec!["source=promise".into()]);
        if log_event(act, p, shown, 'C', "Content changed") {
            crate::info!("Recorded integrity changes in '{shown}'");
            v.repaired();
        } else {
            crate::error!("Failed to record integrity changes in '{shown}'");
            v.failed();
        }
    }
    if w.report_diffs {
        crate::debug!("Logging file differences requires version Nova or above");
    }
}

/// One method's digest against the record; whether it changed (or, as
/// cf-agent answers, would have been recorded under a dry run).
fn check_hash(
    act: &mut ActContext<'_>,
    w: &Watch,
    method: &'static str,
    data: &[u8],
    shown: &str,
    v: &mut Verdict,
) -> bool {
    let Some(digest) = crate::functions::digest(method, data) else {
        return false;
    };
    let recorded = match act.state.as_deref().map(|s| s.file_hash(shown, method)) {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            crate::error!("Unable to open the hash database! {e}");
            v.failed();
            return false;
        }
        None => return false,
    };
    let found = recorded.is_some();
    if recorded.as_deref() == Some(&digest[..]) {
        crate::debug!("File hash for {shown} is correct");
        return false;
    }
    if found {
        crate::info!("Hash '{method}' for '{shown}' changed!");
    }
    if !internal(
        act,
        v,
        "hash",
        shown,
        format!("Should record change of hash for file '{shown}'"),
    ) {
        return true;
    }
    if !found || w.update {
        let prefix = if method == "md5" { "MD5" } else { "SHA" };
        let action = if found { "Updated" } else { "Stored" };
        crate::info!(
            "{action} {method} hash for '{shown}' ({prefix}={})",
            crate::functions::hex(&digest)
        );
        v.repaired();
        if let Some(Err(e)) = act
            .state
            .as_deref()
            .map(|s| s.set_file_hash(shown, method, &digest))
        {
            crate::error!("{e}");
        }
        found
    } else {
        crate::error!("Hash for file '{shown}' changed, but not updating the records");
        v.failed();
        true
    }
}

fn file_stat(meta: &Meta) -> FileStat {
    let kind_bits = match meta.kind {
        FileKind::File => 0o100000,
        FileKind::Dir => 0o040000,
        FileKind::Symlink => 0o120000,
        FileKind::Fifo => 0o010000,
        FileKind::Other => 0,
    };
    FileStat {
        mode: kind_bits | meta.mode,
        uid: meta.uid,
        gid: meta.gid,
        dev: meta.dev,
        ino: meta.ino,
        mtime: meta.mtime,
    }
}

fn stats(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    w: &Watch,
    shown: &str,
    meta: &Meta,
    v: &mut Verdict,
) {
    let now = file_stat(meta);
    let recorded = match act.state.as_deref().map(|s| s.file_stat(shown)) {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            crate::error!("Could not open changes database: {e}");
            v.failed();
            return;
        }
        None => return,
    };
    let write = |act: &mut ActContext<'_>| {
        act.state
            .as_deref()
            .map(|s| s.set_file_stat(shown, &now))
            .unwrap_or(Ok(()))
    };
    let Some(was) = recorded else {
        if internal(
            act,
            v,
            "stat",
            shown,
            format!("Should write stat information for '{shown}' to database"),
        ) {
            match write(act) {
                Ok(()) => {
                    crate::info!("Wrote stat information for '{shown}' to database");
                    v.repaired();
                }
                Err(e) => {
                    crate::error!(
                        "Could not write stat information for '{shown}' to database: {e}"
                    );
                    v.failed();
                }
            }
        }
        return;
    };
    if was == now {
        crate::debug!("No stat information change for '{shown}'");
        return;
    }
    let mut events: Vec<(String, String, &str)> = Vec::new();
    if was.mode != now.mode {
        events.push((
            format!(
                "Permissions for '{shown}' changed {:04o} -> {:04o}",
                was.mode, now.mode
            ),
            format!("Permission: {:04o} -> {:04o}", was.mode, now.mode),
            "permissions",
        ));
    }
    if was.uid != now.uid {
        events.push((
            format!("Owner for '{shown}' changed {} -> {}", was.uid, now.uid),
            format!("Owner: {} -> {}", was.uid, now.uid),
            "ownership",
        ));
    }
    if was.gid != now.gid {
        events.push((
            format!("Group for '{shown}' changed {} -> {}", was.gid, now.gid),
            format!("Group: {} -> {}", was.gid, now.gid),
            "group",
        ));
    }
    if was.dev != now.dev {
        events.push((
            format!("Device for '{shown}' changed {} -> {}", was.dev, now.dev),
            format!("Device: {} -> {}", was.dev, now.dev),
            "device",
        ));
    }
    for (notice, msg, what) in events {
        crate::info!(target: NOTICE_TARGET, "{notice}");
        record_stat_event(act, p, shown, &msg, what, v);
    }
    // An inode change is told and not logged, as cf-agent does.
    if was.ino != now.ino {
        crate::info!(target: NOTICE_TARGET, "inode for '{shown}' changed {} -> {}", was.ino, now.ino);
    }
    if was.mtime != now.mtime {
        let from = ctime(was.mtime);
        let to = ctime(now.mtime);
        crate::info!(target: NOTICE_TARGET, "Last modified time for '{shown}' changed '{from}' -> '{to}'");
        record_stat_event(
            act,
            p,
            shown,
            &format!("Modified time: {from} -> {to}"),
            "mtime",
            v,
        );
    }
    if w.update
        && internal(
            act,
            v,
            "stat",
            shown,
            format!("Should write stat information for '{shown}' to database"),
        )
    {
        match write(act) {
            Ok(()) => {
                crate::info!("Wrote stat information changes for '{shown}' to database");
                v.repaired();
            }
            Err(e) => {
                crate::error!("Failed to write stat information for '{shown}' to database: {e}");
                v.failed();
            }
        }
    }
}

fn record_stat_event(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    shown: &str,
    msg: &str,
    what: &str,
    v: &mut Verdict,
) {
    if !internal(
        act,
        v,
        "stat",
        shown,
        format!("Should record {what} changes in '{shown}'"),
    ) {
        return;
    }
    if log_event(act, p, shown, 'S', msg) {
        crate::info!("Recorded {what} changes in '{shown}'");
        v.repaired();
    } else {
        crate::error!("Failed to record {what} changes in '{shown}'");
        v.failed();
    }
}

/// `ctime(3)` without its newline, local time.
fn ctime(t: i64) -> String {
    crate::host::clock::local_text(t, "%a %b %e %H:%M:%S %Y").unwrap_or_else(|| t.to_string())
}

/// The names a watched directory held at the last search, to tell new
/// entries as they are met.
pub(super) fn recorded_listing(act: &ActContext<'_>, dir: &Path) -> Vec<String> {
    act.state
        .as_deref()
        .and_then(|s| s.dir_listing(&dir.display().to_string()).ok())
        .unwrap_or_default()
}

/// After a directory was searched: the recorded entries it no longer has
/// are told removed and forgotten, and (with `update_hashes`) its
/// selected names become the record.
pub(super) fn check_directory(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    w: &Watch,
    dir: &Path,
    mut selected: Vec<String>,
    v: &mut Verdict,
) {
    let name = dir.display().to_string();
    let recorded = recorded_listing(act, dir);
    selected.sort();
    selected.dedup();
    if selected.iter().any(|s| recorded.binary_search(s).is_err()) {
        v.repaired();
    }
    for gone in recorded
        .iter()
        .filter(|r| selected.binary_search(r).is_err())
    {
        let path = format!("{name}/{gone}");
        crate::info!(target: NOTICE_TARGET, "File '{path}' no longer exists");
        if internal(
            act,
            v,
            "removal",
            &path,
            format!("Should record removal of '{path}'"),
        ) {
            if log_event(act, p, &path, 'R', "File removed") {
                crate::info!("Removal of '{path}' recorded");
                v.repaired();
            } else {
                crate::error!("Failed to record removal of '{path}'");
                v.failed();
            }
        }
        if let Some(Err(e)) = act.state.as_deref().map(|s| s.forget_file(&path)) {
            crate::error!("{e}");
        }
    }
    if !internal(
        act,
        v,
        "listing",
        &name,
        format!("Should record directory listing for '{name}'"),
    ) {
        return;
    }
    if !w.update {
        // cf-agent words a listing it was told not to record as a failure.
        crate::info!("Failed to record directory listing for '{name}'");
        v.failed();
        return;
    }
    match act
        .state
        .as_deref()
        .map(|s| s.set_dir_listing(&name, &selected))
    {
        Some(Ok(true)) => {
            crate::info!("Recorded directory listing for '{name}'");
            v.repaired();
        }
        Some(Ok(false)) => crate::debug!("No changes in directory list"),
        Some(Err(e)) => {
            crate::error!("{e}");
            v.failed();
        }
        None => {}
    }
}
