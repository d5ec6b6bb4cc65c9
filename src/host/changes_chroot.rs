//! cf-agent's `--simulate` modes: files promises make their changes in a
//! scratch copy of the system, the changes chroot
//! (`WORKDIR/state/PID.changes`), and the run ends with a report of what
//! it would have changed: a unified diff per file (`diff`), or each file as
//! it would be (`manifest`, and with `manifest-full` also the files the
//! run found as promised).
//!
//! The copy is made lazily: the first time a path is reached through the
//! [`Host`](super::Host), it is mirrored from the real system (its missing
//! parents with their modes and owners, a directory with everything below
//! it, a symlink as it is written). From then on that path is the copy's
//! alone: what the run deletes there stays deleted.

use std::collections::HashSet;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// The report a simulated run ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimulateMode {
    Diff,
    Manifest,
    ManifestFull,
}

impl SimulateMode {
    /// The mode `--simulate` names (any case, as cf-agent takes it).
    pub fn from_flag(s: &str) -> Option<SimulateMode> {
        match s.to_ascii_lowercase().as_str() {
            "diff" => Some(SimulateMode::Diff),
            "manifest" => Some(SimulateMode::Manifest),
            "manifest-full" => Some(SimulateMode::ManifestFull),
            _ => None,
        }
    }
}

/// What the run did to files, in the order it did it, by the paths the
/// policy named.
#[derive(Debug, Default)]
struct Records {
    changed: Vec<String>,
    kept: Vec<String>,
    renames: Vec<(String, String)>,
}

/// What of the system the copy has taken in.
#[derive(Debug, Default)]
struct Mirrored {
    /// Paths mirrored on their own: from then on, the copy's.
    own: HashSet<PathBuf>,
    /// Directories mirrored with everything below them.
    full: HashSet<PathBuf>,
}

/// The scratch copy a simulated run changes instead of the system.
#[derive(Debug)]
pub struct ChangesChroot {
    /// The copy's root on this machine.
    dir: PathBuf,
    pub mode: SimulateMode,
    /// Policy paths already mirrored.
    mirrored: Mutex<Mirrored>,
    records: Mutex<Records>,
}

/// `path` without `.` components and with `..` taken back, lexically.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

impl ChangesChroot {
    /// Makes the (empty) copy at `dir`, private to the agent.
    pub fn create(dir: PathBuf, mode: SimulateMode) -> io::Result<ChangesChroot> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(ChangesChroot {
            dir,
            mode,
            mirrored: Mutex::new(Mirrored::default()),
            records: Mutex::new(Records::default()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The copy's path for an absolute policy path.
    pub fn inside(&self, policy_path: &Path) -> PathBuf {
        let mut out = self.dir.clone();
        for c in lexical(policy_path).components() {
            if let Component::Normal(n) = c {
                out.push(n);
            }
        }
        out
    }

    /// Mirrors what is at `policy_path` (a directory without its
    /// entries) into the copy, unless it was mirrored before, on its own
    /// or with a directory above it. What cannot be read is left out: the
    /// promise then meets its absence.
    pub fn mirror(&self, policy_path: &Path) {
        if !policy_path.is_absolute() {
            return;
        }
        let path = lexical(policy_path);
        {
            let Ok(done) = self.mirrored.lock() else {
                return;
            };
            if done.own.contains(&path) || path.ancestors().skip(1).any(|a| done.full.contains(a)) {
                return;
            }
        }
        self.take_node(&path);
    }

    /// Copies the node at `path` into the copy, which owns it from then on.
    fn take_node(&self, path: &Path) {
        if let Ok(mut done) = self.mirrored.lock() {
            done.own.insert(path.to_path_buf());
        }
        if let Err(e) = self.mirror_parents(path).and_then(|_| self.copy_node(path)) {
            crate::debug!(
                "Could not mirror '{}' into the changes chroot: {e}",
                path.display()
            );
        }
    }

    /// Mirrors `policy_path` with everything below it (a directory the
    /// run lists or promises), except what was mirrored on its own
    /// before: what the run deleted stays deleted.
    pub fn mirror_all(&self, policy_path: &Path) {
        if !policy_path.is_absolute() {
            return;
        }
        let path = lexical(policy_path);
        self.mirror(&path);
        {
            let Ok(mut done) = self.mirrored.lock() else {
                return;
            };
            if path.ancestors().any(|a| done.full.contains(a)) {
                return;
            }
            done.full.insert(path.clone());
        }
        self.take_entries(&path);
    }

    /// Copies the entries of the directory `dir`, and theirs, except
    /// those the copy owns already.
    fn take_entries(&self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let child = dir.join(entry.file_name());
            // The copy itself may lie below what it mirrors (the work
            // directory's state, below a policy's directory).
            if child == self.dir {
                continue;
            }
            let own = self
                .mirrored
                .lock()
                .is_ok_and(|done| done.own.contains(&child));
            if own {
                continue;
            }
            self.take_node(&child);
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if let Ok(mut done) = self.mirrored.lock() {
                    done.full.insert(child.clone());
                }
                self.take_entries(&child);
            }
        }
    }

    /// Makes the directories above `path` in the copy, each with the mode
    /// and owner of the real one.
    fn mirror_parents(&self, path: &Path) -> io::Result<()> {
        let mut missing: Vec<&Path> = path
            .ancestors()
            .skip(1)
            .take_while(|a| a.parent().is_some())
            .filter(|a| std::fs::symlink_metadata(self.inside(a)).is_err())
            .collect();
        missing.reverse();
        for d in missing {
            let inside = self.inside(d);
            match std::fs::DirBuilder::new().mode(0o700).create(&inside) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            if let Ok(real) = std::fs::metadata(d) {
                copy_attributes(&real, &inside);
            }
        }
        Ok(())
    }

    /// Copies what is at `path` on the system into the copy: a file's
    /// content, a symlink as written (and what it points to), a directory
    /// (empty).
    fn copy_node(&self, path: &Path) -> io::Result<()> {
        let inside = self.inside(path);
        if std::fs::symlink_metadata(&inside).is_ok() {
            return Ok(());
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return Ok(());
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(path)?;
            std::os::unix::fs::symlink(&target, &inside)?;
            let followed = if target.is_absolute() {
                target
            } else {
                path.parent().unwrap_or(Path::new("/")).join(target)
            };
            self.mirror(&followed);
            return Ok(());
        }
        if kind.is_dir() {
            std::fs::DirBuilder::new().mode(0o700).create(&inside)?;
        } else if kind.is_file() {
            std::fs::copy(path, &inside)?;
        } else {
            // Devices, FIFOs and sockets are not copied.
            return Ok(());
        }
        copy_attributes(&meta, &inside);
        Ok(())
    }

    /// Whether the copy has something at `policy_path`, without mirroring
    /// it.
    pub fn has(&self, policy_path: &Path) -> bool {
        std::fs::symlink_metadata(self.inside(policy_path)).is_ok()
    }

    /// The files promise of `path` changed it (renames are told apart).
    pub fn record_changed(&self, path: &str) {
        if let Ok(mut r) = self.records.lock() {
            r.changed.push(path.to_string());
        }
    }

    /// The run looked at `path` (`manifest-full` shows those it did not
    /// change too).
    pub fn record_evaluated(&self, path: &str) {
        if self.mode != SimulateMode::ManifestFull {
            return;
        }
        if let Ok(mut r) = self.records.lock() {
            r.kept.push(path.to_string());
        }
    }

    pub fn record_rename(&self, from: &str, to: &str) {
        if let Ok(mut r) = self.records.lock() {
            r.renames.push((from.to_string(), to.to_string()));
        }
    }

    /// Writes the report of the run's mode to `out`. Files are compared by
    /// the `diff` of `bindir`, as cf-agent compares them, else by the one
    /// on the `PATH`.
    pub fn report(&self, out: &mut dyn Write, bindir: &Path) -> io::Result<()> {
        let ours = bindir.join("diff");
        let diff = if ours.is_file() {
            ours.as_path()
        } else {
            Path::new("diff")
        };
        let records = std::mem::take(&mut *self.records.lock().map_err(|_| poisoned())?);
        for (from, to) in &records.renames {
            delimiter(out)?;
            writeln!(out, "'{to}' is the new name of '{from}'")?;
        }
        let mut shown: HashSet<&str> = HashSet::new();
        for path in &records.changed {
            if !shown.insert(path) {
                continue;
            }
            match self.mode {
                SimulateMode::Diff => self.diff_file(out, path, diff)?,
                _ => self.manifest(out, path)?,
            }
        }
        if self.mode == SimulateMode::ManifestFull {
            for path in &records.kept {
                if shown.insert(path) {
                    self.manifest(out, path)?;
                }
            }
        }
        out.flush()
    }

    /// A file as the run left it in the copy.
    fn manifest(&self, out: &mut dyn Write, path: &str) -> io::Result<()> {
        delimiter(out)?;
        let inside = self.inside(Path::new(path));
        let Ok(meta) = std::fs::symlink_metadata(&inside) else {
            return writeln!(out, "'{path}' no longer exists");
        };
        writeln!(out, "'{path}' is a {}", kind_name(&meta))?;
        stat_info(out, &meta)?;
        details(out, &inside, &meta)
    }

    /// A changed file as a unified diff against the system's, a new one as
    /// a manifest.
    fn diff_file(&self, out: &mut dyn Write, path: &str, diff: &Path) -> io::Result<()> {
        let Ok(orig) = std::fs::symlink_metadata(path) else {
            return self.manifest(out, path);
        };
        delimiter(out)?;
        let inside = self.inside(Path::new(path));
        let Ok(now) = std::fs::symlink_metadata(&inside) else {
            return writeln!(out, "'{path}' no longer exists");
        };
        if orig.file_type() != now.file_type() {
            writeln!(
                out,
                "'{path}' changed type from {} to {}",
                kind_name(&orig),
                kind_name(&now)
            )?;
            stat_info(out, &now)?;
            return details(out, &inside, &now);
        }
        if now.is_file() || now.is_dir() {
            let result = std::process::Command::new(diff)
                .arg("-u")
                .arg(format!("--label=original {path}"))
                .arg(format!("--label=changed  {path}"))
                .arg(path)
                .arg(&inside)
                .stdin(std::process::Stdio::null())
                .output()?;
            out.write_all(&result.stdout)?;
            if result.status.code() == Some(2) {
                crate::error!("'diff -u {path} {}' failed", inside.display());
            }
            return Ok(());
        }
        writeln!(out, "'{path}' is a {}", kind_name(&now))?;
        stat_info(out, &now)?;
        details(out, &inside, &now)
    }

    /// Removes the copy (at the end of the run).
    pub fn remove(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            crate::error!(
                "Could not remove the changes chroot '{}': {e}",
                self.dir.display()
            );
        }
    }
}

fn poisoned() -> io::Error {
    io::Error::other("the changes chroot's records are poisoned")
}

/// Mode and owner of `from` given to the copy's `to` (best effort: as a
/// user, a file of root's stays the user's).
fn copy_attributes(from: &std::fs::Metadata, to: &Path) {
    let _ = std::os::unix::fs::lchown(to, Some(from.uid()), Some(from.gid()));
    if !from.file_type().is_symlink() {
        let _ = std::fs::set_permissions(to, std::fs::Permissions::from_mode(from.mode() & 0o7777));
    }
}

/// The line between two files of the report, as wide as the terminal
/// (`COLUMNS`, at least 80) less five.
fn delimiter(out: &mut dyn Write) -> io::Result<()> {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<i64>().ok())
        .unwrap_or(0)
        .max(80);
    writeln!(out, "{}", "=".repeat((columns - 5) as usize))
}

fn kind_name(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_file() {
        "regular file"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_fifo() {
        "FIFO/pipe"
    } else if t.is_socket() {
        "socket"
    } else {
        "unknown"
    }
}

/// `ls -l`'s letters for the permission bits.
fn mode_letters(mode: u32) -> String {
    let bit = |m: u32, c: char| if mode & m != 0 { c } else { '-' };
    let special = |x: u32, s: u32, set: char, unset: char| match (mode & s != 0, mode & x != 0) {
        (true, true) => set,
        (true, false) => unset,
        (false, true) => 'x',
        (false, false) => '-',
    };
    [
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(0o100, 0o4000, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(0o010, 0o2000, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(0o001, 0o1000, 't', 'T'),
    ]
    .iter()
    .collect()
}

fn stat_info(out: &mut dyn Write, meta: &std::fs::Metadata) -> io::Result<()> {
    writeln!(out, "Size: {}", meta.size())?;
    let mode = meta.mode() & 0o7777;
    write!(out, "Access: ({mode:04o}/{})  ", mode_letters(mode))?;
    writeln!(
        out,
        "Uid: ({}/{})   Gid: ({}/{})",
        meta.uid(),
        super::procs::user_name(meta.uid()),
        meta.gid(),
        super::procs::group_name(meta.gid())
    )?;
    let stamp = |t: i64| super::clock::local_text(t, "%Y-%m-%d %H:%M:%S %z").unwrap_or_default();
    writeln!(out, "Access: {}", stamp(meta.atime()))?;
    writeln!(out, "Modify: {}", stamp(meta.mtime()))?;
    writeln!(out, "Change: {}", stamp(meta.ctime()))
}

/// A file's content, a directory's entries or a link's target.
fn details(out: &mut dyn Write, inside: &Path, meta: &std::fs::Metadata) -> io::Result<()> {
    let t = meta.file_type();
    if t.is_file() {
        writeln!(out)?;
        let data = match std::fs::read(inside) {
            Ok(d) => d,
            Err(e) => {
                crate::error!("Failed to open file for reading: {}", super::strerror(&e));
                return Ok(());
            }
        };
        writeln!(out, "Contents of the file:")?;
        if !data.is_ascii() {
            return writeln!(out, "File contains non-ASCII data");
        }
        out.write_all(&data)?;
        if !data.is_empty() && !data.ends_with(b"\n") {
            writeln!(out, "\n\\no newline at the end of file")?;
        }
    } else if t.is_symlink() {
        writeln!(out)?;
        match std::fs::read_link(inside) {
            Ok(target) => writeln!(out, "Target: '{}'", target.display())?,
            Err(_) => writeln!(out, "Invalid target")?,
        }
    } else if t.is_dir() {
        writeln!(out)?;
        let entries = match std::fs::read_dir(inside) {
            Ok(e) => e,
            Err(e) => {
                crate::error!("Failed to open the directory: {}", super::strerror(&e));
                return Ok(());
            }
        };
        writeln!(out, "Directory contents:")?;
        for e in entries.flatten() {
            out.write_all(e.file_name().as_bytes())?;
            writeln!(out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_ls_writes_them() {
        assert_eq!(mode_letters(0o600), "rw-------");
        assert_eq!(mode_letters(0o4755), "rwsr-xr-x");
        assert_eq!(mode_letters(0o1644), "rw-r--r-T");
        assert_eq!(mode_letters(0o777), "rwxrwxrwx");
    }

    #[test]
    fn a_path_mirrored_is_the_copys() {
        let real = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let file = real.path().join("d/f");
        std::fs::create_dir(real.path().join("d")).unwrap();
        std::fs::write(&file, "x").unwrap();
        std::fs::write(real.path().join("d/g"), "y").unwrap();
        let c = ChangesChroot::create(scratch.path().join("c"), SimulateMode::Diff).unwrap();
        c.mirror_all(&real.path().join("d/."));
        let inside = c.inside(&file);
        assert_eq!(std::fs::read(&inside).unwrap(), b"x");
        std::fs::remove_file(&inside).unwrap();
        // Deleted in the copy, it stays deleted there.
        c.mirror(&file);
        assert!(!inside.exists());
        assert!(file.exists());
        // A directory is mirrored empty, its entries when listed, but not
        // those deleted after being mirrored on their own.
        let c = ChangesChroot::create(scratch.path().join("c2"), SimulateMode::Diff).unwrap();
        c.mirror(&file);
        std::fs::remove_file(c.inside(&file)).unwrap();
        c.mirror(&real.path().join("d"));
        assert!(!c.has(&real.path().join("d/g")));
        c.mirror_all(&real.path().join("d"));
        assert!(!c.inside(&file).exists());
        assert_eq!(
            std::fs::read(c.inside(&real.path().join("d/g"))).unwrap(),
            b"y"
        );
    }
}
