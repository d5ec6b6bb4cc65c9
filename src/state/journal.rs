//! The undo journal of a transactional bundle: before the first change to
//! each path, its prior state (content, mode, owner, or absence) is
//! written to WORKDIR/state/journal/<id>/ and synced, and only then is the
//! change made. A failed transaction replays the journal backwards; a
//! journal that is still there when an agent starts belongs to a run that
//! was killed, and is replayed backwards before anything else.
//!
//! Layout of one journal directory:
//! - `header.json`: the bundle, the pid and the start time;
//! - `entries.jsonl`: one JSON object per recorded path, appended and
//!   synced before the change it announces (a torn last line is ignored:
//!   its change never happened);
//! - `N.data`: the prior content of a regular file, synced before the
//!   entry that names it.

use crate::host::fs::{FileKind, can_chown};
use crate::host::local::{self, PrivateAppend};
use crate::host::{ChangeJournal, Host};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Who started a journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub bundle: String,
    pub namespace: String,
    pub pid: u32,
    /// Seconds since the epoch.
    pub started: i64,
}

/// A path's state before the transaction first changed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Prior {
    Absent,
    File {
        mode: u32,
        uid: u32,
        gid: u32,
        /// The file in the journal directory holding the content.
        data: String,
    },
    Dir {
        mode: u32,
        uid: u32,
        gid: u32,
    },
    Symlink {
        target: String,
    },
    /// A FIFO, device or socket: noted, but not restorable.
    Special,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub prior: Prior,
}

/// What undoing a journal did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Undo {
    pub header: Option<Header>,
    /// One line per path put back, in the order undone (newest first).
    pub restored: Vec<String>,
    /// Paths that could not be put back, with why.
    pub failed: Vec<String>,
}

#[derive(Debug)]
struct Inner {
    entries: PrivateAppend,
    next_data: usize,
    recorded: HashSet<PathBuf>,
}

/// An open journal; hand it to [`Host::with_journal`].
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    inner: Mutex<Inner>,
}

/// Where journals live under a state directory.
pub fn journals_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("journal")
}

impl Journal {
    /// Starts a journal for one transaction, durably, before any change.
    pub fn begin(state_dir: &Path, header: &Header) -> io::Result<Journal> {
        let root = journals_dir(state_dir);
        // Private: the journal keeps the prior content of files the policy
        // rewrites, and a killed run leaves it on disk.
        local::create_private_dir(&root)?;
        let safe: String = header
            .bundle
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let mut n = 0;
        let dir = loop {
            let d = root.join(format!("{}-{}-{n}-{safe}", header.started, header.pid));
            match local::create_private_dir_new(&d) {
                Ok(()) => break d,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => return Err(e),
            }
        };
        local::write_private(
            &dir.join("header.json"),
            serde_json::to_string(header).unwrap_or_default().as_bytes(),
        )?;
        let entries = local::open_append_private(&dir.join("entries.jsonl"))?;
        local::sync_dir(&dir)?;
        local::sync_dir(&root)?;
        Ok(Journal {
            dir,
            inner: Mutex::new(Inner {
                entries,
                next_data: 0,
                recorded: HashSet::new(),
            }),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many paths were recorded.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|i| i.recorded.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The transaction succeeded: forget the journal.
    pub fn commit(&self) -> io::Result<()> {
        remove_journal(&self.dir)
    }

    /// The transaction failed: put every recorded path back, newest first,
    /// and forget the journal.
    pub fn rollback(&self) -> Undo {
        undo_dir(&self.dir)
    }
}

impl ChangeJournal for Journal {
    fn before_change(&self, real_path: &Path) -> io::Result<()> {
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| io::Error::other("the undo journal is poisoned"))?;
        if inner.recorded.contains(real_path) {
            return Ok(());
        }
        let host = Host::real();
        let prior = match host.lstat(real_path)? {
            None => Prior::Absent,
            Some(m) => match m.kind {
                FileKind::File => {
                    let data = format!("{}.data", inner.next_data);
                    inner.next_data += 1;
                    let content = host.read(real_path)?;
                    // write_private syncs the file and the directory.
                    local::write_private(&self.dir.join(&data), &content)?;
                    Prior::File {
                        mode: m.mode,
                        uid: m.uid,
                        gid: m.gid,
                        data,
                    }
                }
                FileKind::Dir => Prior::Dir {
                    mode: m.mode,
                    uid: m.uid,
                    gid: m.gid,
                },
                FileKind::Symlink => Prior::Symlink {
                    target: host.read_link(real_path)?.display().to_string(),
                },
                FileKind::Fifo | FileKind::Other => Prior::Special,
            },
        };
        let entry = Entry {
            path: real_path.display().to_string(),
            prior,
        };
        let mut line = serde_json::to_string(&entry).map_err(io::Error::other)?;
        line.push('\n');
        inner.entries.append_synced(line.as_bytes())?;
        inner.recorded.insert(real_path.to_path_buf());
        Ok(())
    }
}

fn remove_journal(dir: &Path) -> io::Result<()> {
    local::remove_private_tree(dir)?;
    if let Some(parent) = dir.parent() {
        local::sync_dir(parent)?;
    }
    Ok(())
}

/// Reads a journal directory: its header and every complete entry.
fn read_dir_entries(dir: &Path) -> (Option<Header>, Vec<Entry>) {
    let header = local::read_to_string(dir.join("header.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let text = local::read_to_string(dir.join("entries.jsonl")).unwrap_or_default();
    // A line without its newline was being written when the run died; the
    // change it announced was never made.
    let entries = text
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .filter_map(|l| serde_json::from_str(l.trim_end()).ok())
        .collect();
    (header, entries)
}

/// Puts back every path of a journal directory, newest first, then
/// removes the directory.
fn undo_dir(dir: &Path) -> Undo {
    let (header, entries) = read_dir_entries(dir);
    let mut undo = Undo {
        header,
        ..Undo::default()
    };
    for e in entries.iter().rev() {
        let path = Path::new(&e.path);
        match restore(dir, path, &e.prior) {
            Ok(line) => undo.restored.push(line),
            Err(err) => undo.failed.push(format!("{}: {err}", e.path)),
        }
    }
    if let Err(e) = remove_journal(dir) {
        undo.failed.push(format!(
            "cannot remove the journal '{}': {e}",
            dir.display()
        ));
    }
    undo
}

/// Removes whatever is at `path` (a file, a link, an empty directory).
fn clear(host: &Host, path: &Path) -> io::Result<()> {
    match host.lstat(path)? {
        None => Ok(()),
        Some(m) if m.kind == FileKind::Dir => host.remove_dir(path),
        Some(_) => host.remove_file(path),
    }
}

fn restore(dir: &Path, path: &Path, prior: &Prior) -> io::Result<String> {
    // A host without a journal: undoing is not itself journaled.
    let host = Host::real();
    let shown = path.display();
    match prior {
        Prior::Absent => {
            if host.lstat(path)?.is_none() {
                return Ok(format!("{shown}: still absent"));
            }
            clear(&host, path)?;
            Ok(format!("removed {shown} (it did not exist before)"))
        }
        Prior::File {
            mode,
            uid,
            gid,
            data,
        } => {
            let content = local::read(dir.join(data))?;
            if host.lstat(path)?.is_some_and(|m| m.kind != FileKind::File) {
                clear(&host, path)?;
            }
            host.write_atomic(path, &content, *mode)?;
            if can_chown() {
                host.lchown(path, Some(*uid), Some(*gid))?;
            }
            Ok(format!(
                "restored {shown} (its content, mode {mode:04o} and owner)"
            ))
        }
        Prior::Dir { mode, uid, gid } => {
            match host.lstat(path)? {
                Some(m) if m.kind == FileKind::Dir => {}
                Some(_) => {
                    host.remove_file(path)?;
                    host.mkdir_all(path, *mode)?;
                }
                None => {
                    host.mkdir_all(path, *mode)?;
                }
            }
            host.chmod(path, *mode)?;
            if can_chown() {
                host.lchown(path, Some(*uid), Some(*gid))?;
            }
            Ok(format!(
                "restored the directory {shown} (mode {mode:04o} and owner)"
            ))
        }
        Prior::Symlink { target } => {
            clear(&host, path)?;
            host.symlink(Path::new(target), path)?;
            Ok(format!("restored the symlink {shown} -> {target}"))
        }
        Prior::Special => Err(io::Error::other(
            "it was a special file (FIFO, device or socket), which cannot be restored",
        )),
    }
}

/// Undoes every journal left in the state directory by runs that were
/// killed. Call it holding the run lock, before anything else.
pub fn recover(state_dir: &Path) -> Vec<Undo> {
    let root = journals_dir(state_dir);
    let mut dirs: Vec<PathBuf> = match local::list_dir(&root) {
        Ok(paths) => paths.into_iter().filter(|p| local::is_dir(p)).collect(),
        Err(_) => return Vec::new(),
    };
    // Newest first: a later transaction was made on top of an earlier one.
    dirs.sort();
    dirs.reverse();
    dirs.iter().map(|d| undo_dir(d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, OpenOptions};
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    fn header() -> Header {
        Header {
            bundle: "b".into(),
            namespace: "default".into(),
            pid: 1,
            started: 2,
        }
    }

    #[test]
    fn rollback_restores_content_mode_absence_and_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let f = tmp.path().join("f.conf");
        fs::write(&f, "old\n").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        let j = std::sync::Arc::new(Journal::begin(&state, &header()).unwrap());
        let host = Host::real().with_journal(Some(j.clone()));
        host.write_atomic(&f, b"new\n", 0o600).unwrap();
        host.write_atomic(&f, b"newer\n", 0o600).unwrap();
        let made = host.mkdir_all(&tmp.path().join("d/e"), 0o700).unwrap();
        assert_eq!(made.len(), 2);
        host.write_atomic(&tmp.path().join("d/e/x"), b"x", 0o600)
            .unwrap();
        assert_eq!(j.len(), 4, "each path once");
        drop(host);
        let undo = j.rollback();
        assert!(undo.failed.is_empty(), "{undo:?}");
        assert_eq!(undo.restored.len(), 4, "{undo:?}");
        assert_eq!(fs::read_to_string(&f).unwrap(), "old\n");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
            0o640
        );
        assert!(!tmp.path().join("d").exists());
        // The journal is gone.
        assert_eq!(fs::read_dir(journals_dir(&state)).unwrap().count(), 0);
    }

    #[test]
    fn symlinks_and_replaced_directories_come_back() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink("target-a", &link).unwrap();
        let dir = tmp.path().join("dir");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o751)).unwrap();
        let j = std::sync::Arc::new(Journal::begin(&state, &header()).unwrap());
        let host = Host::real().with_journal(Some(j.clone()));
        host.remove_file(&link).unwrap();
        host.symlink(Path::new("target-b"), &link).unwrap();
        host.remove_dir(&dir).unwrap();
        host.write_atomic(&dir, b"now a file", 0o600).unwrap();
        let undo = j.rollback();
        assert!(undo.failed.is_empty(), "{undo:?}");
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("target-a"));
        let m = fs::symlink_metadata(&dir).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.permissions().mode() & 0o7777, 0o751);
    }

    /// Issue 14: the journal keeps the prior content of files the policy
    /// rewrites, which may be secret; a kill leaves it on disk. Everything
    /// in it is private: directories 0700, files 0600.
    #[test]
    fn the_journal_and_its_saved_copies_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let f = tmp.path().join("secret");
        fs::write(&f, "password\n").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        let j = std::sync::Arc::new(Journal::begin(&state, &header()).unwrap());
        let host = Host::real().with_journal(Some(j.clone()));
        host.write_atomic(&f, b"changed\n", 0o600).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&journals_dir(&state)), 0o700);
        assert_eq!(mode(j.dir()), 0o700);
        let names: Vec<_> = fs::read_dir(j.dir())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        for p in names {
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
        drop(host);
        j.rollback();
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_recovery_undoes_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let f = tmp.path().join("f");
        fs::write(&f, "before").unwrap();
        let j = std::sync::Arc::new(Journal::begin(&state, &header()).unwrap());
        let host = Host::real().with_journal(Some(j.clone()));
        host.write_atomic(&f, b"after", 0o644).unwrap();
        // The run dies while announcing a second change.
        let mut entries = OpenOptions::new()
            .append(true)
            .open(j.dir().join("entries.jsonl"))
            .unwrap();
        entries.write_all(b"{\"path\":\"/nowhere\",\"pri").unwrap();
        let undo = recover(&state);
        assert_eq!(undo.len(), 1);
        assert_eq!(undo[0].header, Some(header()));
        assert_eq!(undo[0].restored.len(), 1, "{undo:?}");
        assert_eq!(fs::read_to_string(&f).unwrap(), "before");
        assert!(recover(&state).is_empty());
    }
}
