//! File-system operations: metadata, reads, and writes that are atomic
//! (write beside, fsync, rename) and keep mode, owner and extended
//! attributes. Every method that changes a path first tells the host's
//! change journal, if it has one (see [`super::ChangeJournal`]).

use super::Host;
use super::safe::{self, Final, Located};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    Other,
}

/// What we need to know of a file, from `lstat` or `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: FileKind,
    /// Permission bits including setuid, setgid and sticky (`mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime: i64,
    pub ctime: i64,
    pub atime: i64,
    pub ino: u64,
    pub dev: u64,
    pub nlink: u64,
}

impl Meta {
    // `struct stat`'s field types differ between architectures.
    #[allow(clippy::useless_conversion)]
    fn from_stat(st: &rustix::fs::Stat) -> Meta {
        use rustix::fs::FileType;
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => FileKind::Symlink,
            FileType::Directory => FileKind::Dir,
            FileType::RegularFile => FileKind::File,
            FileType::Fifo => FileKind::Fifo,
            _ => FileKind::Other,
        };
        Meta {
            kind,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: i64::from(st.st_mtime),
            ctime: i64::from(st.st_ctime),
            atime: i64::from(st.st_atime),
            ino: u64::from(st.st_ino),
            dev: u64::from(st.st_dev),
            nlink: u64::from(st.st_nlink),
        }
    }
}

/// What an edit saw of the file it read, and an exclusive `flock` on it
/// held until the edit is written (see [`Host::read_for_edit`]).
#[derive(Debug)]
pub struct Stamp {
    seen: Seen,
    /// The file read, open: its `flock` is held while it is.
    lock: std::os::fd::OwnedFd,
}

/// A file's identity, size and times, to tell whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, u64),
    ctime: (i64, u64),
}

/// How long an edit waits for another one of the same file (another
/// agent's); then it goes on unlocked, and the check before its rename
/// still keeps the other's change.
const EDIT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Takes an exclusive `flock` on `fd`, waiting at most [`EDIT_LOCK_WAIT`].
fn lock_bounded(fd: &std::os::fd::OwnedFd) {
    use rustix::fs::FlockOperation;
    let start = std::time::Instant::now();
    loop {
        match rustix::fs::flock(fd, FlockOperation::NonBlockingLockExclusive) {
            Err(rustix::io::Errno::WOULDBLOCK) if start.elapsed() < EDIT_LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            _ => return,
        }
    }
}

impl Seen {
    #[allow(clippy::useless_conversion)]
    fn of(st: &rustix::fs::Stat) -> Seen {
        Seen {
            dev: u64::from(st.st_dev),
            ino: u64::from(st.st_ino),
            size: i64::from(st.st_size),
            mtime: (i64::from(st.st_mtime), u64::from(st.st_mtime_nsec)),
            ctime: (i64::from(st.st_ctime), u64::from(st.st_ctime_nsec)),
        }
    }
}

fn not_found_is_none<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The real user id of this process (who runs the agent).
pub fn real_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Whether we may change ownership (only root can give files away).
pub fn can_chown() -> bool {
    rustix::process::geteuid().is_root()
}

fn uid_gid(
    uid: Option<u32>,
    gid: Option<u32>,
) -> (Option<rustix::fs::Uid>, Option<rustix::fs::Gid>) {
    (
        uid.map(rustix::fs::Uid::from_raw),
        gid.map(rustix::fs::Gid::from_raw),
    )
}

/// Directories whose renames are not yet synced: a file's data is synced
/// before it is renamed into place, so after a crash its name holds the
/// old file or the new one, whole; the directory entry itself is synced
/// once per directory, when the run ends ([`Host::sync_pending_dirs`]) or
/// when too many are waiting, instead of once per file (a tree copy of
/// the MPF paid one journal flush per file for it, 0.7 s of 1.4 s).
#[derive(Debug, Default)]
pub struct PendingDirs(Mutex<HashMap<(u64, u64), OwnedFd>>);

/// How many directories may wait for their sync.
const MAX_PENDING_DIRS: usize = 256;

impl PendingDirs {
    fn add(&self, l: &safe::Located) -> io::Result<()> {
        // The walk's descriptor tells which directory; one that can be
        // synced is opened once per directory.
        let st = rustix::fs::fstat(&*l.dir).map_err(safe::errno)?;
        let key = safe::identity(&st);
        let full = {
            let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let std::collections::hash_map::Entry::Vacant(e) = m.entry(key) {
                e.insert(l.dir_for_sync()?);
            }
            m.len() >= MAX_PENDING_DIRS
        };
        if full { self.sync() } else { Ok(()) }
    }

    /// Syncs what is waiting, the directories side by side
    /// ([`fsync_all`]).
    fn sync(&self) -> io::Result<()> {
        let all: Vec<OwnedFd> = {
            let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
            m.drain().map(|(_, fd)| fd).collect()
        };
        fsync_all(&all)
    }
}

/// `fsync`s every descriptor, several at a time: the disk's flushes of
/// concurrent syncs are shared, where one after the other each waits for
/// its own (a `syncfs` would flush what every other program wrote too).
fn fsync_all(fds: &[OwnedFd]) -> io::Result<()> {
    const THREADS: usize = 8;
    if fds.len() <= 1 {
        return fds
            .iter()
            .try_for_each(|fd| rustix::fs::fsync(fd).map_err(safe::errno));
    }
    let chunk = fds.len().div_ceil(THREADS);
    std::thread::scope(|s| {
        let workers: Vec<_> = fds
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .try_for_each(|fd| rustix::fs::fsync(fd).map_err(safe::errno))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a sync thread panicked")))
            })
            .collect::<io::Result<Vec<()>>>()
            .map(|_| ())
    })
}

impl Drop for PendingDirs {
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            crate::error!("Could not sync the directories written to: {e}");
        }
    }
}

impl Host {
    /// Syncs the directories files were renamed into since the last call,
    /// making those renames durable (see [`PendingDirs`]).
    pub fn sync_pending_dirs(&self) -> io::Result<()> {
        self.pending_dirs.sync()
    }

    /// Walks to `p` safely (see [`safe`]), or takes its directory from the
    /// walks of this run when it is still the same (see [`safe::DirCache`]).
    pub(super) fn locate(&self, p: &Path, last: Final) -> io::Result<Located> {
        self.locate_seen(p, last).map(|(l, _)| l)
    }

    /// [`Host::locate`], with the entry's `lstat` when the way there
    /// already made it (`None`: not made; `Some(None)`: nothing there), so
    /// that a caller does not make it again.
    fn locate_seen(
        &self,
        p: &Path,
        last: Final,
    ) -> io::Result<(Located, Option<Option<rustix::fs::Stat>>)> {
        if let Some(c) = &self.chroot {
            c.mirror(p);
        }
        let parent = match (p.parent(), p.file_name()) {
            (Some(d), Some(name)) if p.is_absolute() => Some((self.map(d), name)),
            _ => None,
        };
        if let Some((real_dir, name)) = &parent
            && let Some(dir) = self.dirs.lock().ok().and_then(|mut c| c.lookup(real_dir))
        {
            let found = Located {
                dir,
                name: name.to_os_string(),
            };
            if last == Final::Keep {
                return Ok((found, None));
            }
            // A link to follow at the end takes the whole walk.
            let st = found.lstat()?;
            let ends_in_link = st.is_some_and(|st| Meta::from_stat(&st).kind == FileKind::Symlink);
            if !ends_in_link {
                return Ok((found, Some(st)));
            }
        }
        let (found, in_parent) = safe::locate(self.root(), p, last)?;
        if let Some((real_dir, _)) = &parent
            && in_parent
            && let Ok(mut c) = self.dirs.lock()
        {
            c.remember(real_dir, &found.dir);
        }
        Ok((found, None))
    }

    /// Opens a settled stretch (one files promise): a directory the walks
    /// reached is checked once, not at each look at a file in it, until
    /// something may have moved it (see [`safe::DirCache`]). It ends when
    /// the guard is dropped.
    pub fn settle(&self) -> Settled {
        // Commands running beside us may move a directory at any moment.
        let settles = !super::exec::background_started();
        if settles && let Ok(mut c) = self.dirs.lock() {
            c.settle();
        }
        Settled {
            dirs: std::sync::Arc::clone(&self.dirs),
            settles,
        }
    }

    /// `lstat`: the link itself for symlinks. `None` when nothing is there.
    pub fn lstat(&self, p: &Path) -> io::Result<Option<Meta>> {
        let m = match not_found_is_none(self.locate_seen(p, Final::Keep))? {
            Some((_, Some(seen))) => seen.as_ref().map(Meta::from_stat),
            Some((l, None)) => l.lstat()?.as_ref().map(Meta::from_stat),
            None => None,
        };
        Ok(self.with_simulated(p, m))
    }

    /// `stat`: follows symlinks that cf-agent would follow (an error names
    /// one it would not). `None` when nothing (or a dangling link) is there.
    pub fn stat(&self, p: &Path) -> io::Result<Option<Meta>> {
        let m = match not_found_is_none(self.locate_seen(p, Final::Follow))? {
            Some((_, Some(seen))) => seen.as_ref().map(Meta::from_stat),
            Some((l, None)) => l.lstat()?.as_ref().map(Meta::from_stat),
            None => None,
        };
        // A dangling link is not followed to anything.
        let m = m.filter(|m| m.kind != FileKind::Symlink);
        Ok(self.with_simulated(p, m))
    }

    /// Metadata as a dry run sees it: a file it would have created, or
    /// the size and mode of its would-be content.
    fn with_simulated(&self, p: &Path, on_disk: Option<Meta>) -> Option<Meta> {
        let Some((data, mode)) = self.simulated(p) else {
            return on_disk;
        };
        let size = data.len() as u64;
        Some(match on_disk {
            Some(m) if m.kind == FileKind::File => Meta { size, mode, ..m },
            Some(m) => m,
            None => Meta {
                kind: FileKind::File,
                mode,
                uid: rustix::process::geteuid().as_raw(),
                gid: rustix::process::getegid().as_raw(),
                size,
                mtime: 0,
                ctime: 0,
                atime: 0,
                ino: 0,
                dev: 0,
                nlink: 1,
            },
        })
    }

    /// The content of a file, read through the descriptor the safe walk
    /// opened (so a link swapped in after a check is never read).
    /// Only a regular file is read (a device such as /dev/zero may never
    /// end, a FIFO never answer).
    pub fn read(&self, p: &Path) -> io::Result<Vec<u8>> {
        if let Some((data, _)) = self.simulated(p) {
            return Ok(data);
        }
        let l = self.locate(p, Final::Follow)?;
        let fd = l.open(OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK)?;
        let st = rustix::fs::fstat(&fd).map_err(safe::errno)?;
        if Meta::from_stat(&st).kind != FileKind::File {
            return Err(super::local::not_regular());
        }
        read_sized(&mut File::from(fd), st.st_size)
    }

    /// Opens a regular file for reading through the safe walk.
    fn open_regular(&self, p: &Path) -> io::Result<File> {
        let l = self.locate(p, Final::Follow)?;
        let f = File::from(l.open(OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK)?);
        if !f.metadata()?.is_file() {
            return Err(super::local::not_regular());
        }
        Ok(f)
    }

    /// Whether two regular files hold the same bytes, read side by side in
    /// blocks (a copy's `compare => "digest"` on files of any size).
    pub fn same_content(&self, a: &Path, b: &Path) -> io::Result<bool> {
        if self.simulated(a).is_some() || self.simulated(b).is_some() {
            return Ok(self.read(a)? == self.read(b)?);
        }
        let (mut fa, mut fb) = (self.open_regular(a)?, self.open_regular(b)?);
        if fa.metadata()?.len() != fb.metadata()?.len() {
            return Ok(false);
        }
        let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
        loop {
            let n = read_full(&mut fa, &mut ba)?;
            let m = read_full(&mut fb, &mut bb)?;
            if n != m || ba[..n] != bb[..m] {
                return Ok(false);
            }
            if n == 0 {
                return Ok(true);
            }
        }
    }

    /// The content of a file for an edit that will write it back with
    /// [`Host::write_atomic_unless_changed`]: read under an exclusive
    /// `flock`, held by the [`Stamp`] until the edit is written, so that two
    /// agents editing one file take turns and the second edits the first's
    /// result (the lock is taken on the file the path names once locked: a
    /// file replaced meanwhile is opened again).
    pub fn read_for_edit(&self, p: &Path) -> io::Result<(Vec<u8>, Option<Stamp>)> {
        if let Some((data, _)) = self.simulated(p) {
            return Ok((data, None));
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let l = self.locate(p, Final::Follow)?;
            let fd = l.open(OFlags::RDONLY | OFlags::NOCTTY)?;
            lock_bounded(&fd);
            let st = rustix::fs::fstat(&fd).map_err(safe::errno)?;
            let now = l.lstat()?.map(|n| Seen::of(&n));
            let seen = Seen::of(&st);
            let same = now.is_some_and(|n| (n.dev, n.ino) == (seen.dev, seen.ino));
            if !same && tries < 5 {
                continue;
            }
            let mut f = File::from(fd);
            let data = read_sized(&mut f, st.st_size)?;
            let stamp = Stamp {
                seen,
                lock: f.into(),
            };
            return Ok((data, Some(stamp)));
        }
    }

    pub fn read_link(&self, p: &Path) -> io::Result<PathBuf> {
        let l = self.locate(p, Final::Keep)?;
        let text = rustix::fs::readlinkat(&l.dir, &l.name, Vec::new()).map_err(safe::errno)?;
        Ok(PathBuf::from(OsStr::from_bytes(text.as_bytes())))
    }

    /// Entries of a directory (names only), sorted.
    pub fn read_dir(&self, p: &Path) -> io::Result<Vec<String>> {
        if let Some(c) = &self.chroot {
            c.mirror_all(p);
        }
        let l = self.locate(p, Final::Follow)?;
        let fd = l.open(OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut dir = rustix::fs::Dir::read_from(&fd).map_err(safe::errno)?;
        let mut v = Vec::new();
        while let Some(e) = dir.read() {
            let e = e.map_err(safe::errno)?;
            let name = e.file_name().to_bytes();
            if name != b"." && name != b".." {
                v.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        v.sort();
        Ok(v)
    }

    /// Creates an empty file that must not exist yet, with exactly `mode`.
    pub fn create_empty(&self, p: &Path, mode: u32) -> io::Result<()> {
        self.before_change(p)?;
        let l = self.locate(p, Final::Keep)?;
        let fd = l.open_new(mode)?;
        // The umask may have cleared bits; set the mode we promised.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(safe::errno)?;
        rustix::fs::fsync(&fd).map_err(safe::errno)
    }

    /// Creates a file that must not exist yet, with exactly `mode` and
    /// `data` in it: written to a file without a name (`O_TMPFILE`), then
    /// linked at its name, which fails when something is there. Nobody
    /// sees the file before it is whole. Where the file system has no
    /// `O_TMPFILE`, or `/proc` is missing, it is created exclusively and
    /// filled.
    pub fn create_with_content(&self, p: &Path, mode: u32, data: &[u8]) -> io::Result<()> {
        self.before_change(p)?;
        let l = self.locate(p, Final::Keep)?;
        let unnamed = rustix::fs::openat(
            &*l.dir,
            ".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        );
        if let Ok(fd) = unnamed {
            let mut f = File::from(fd);
            f.write_all(data)?;
            rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(safe::errno)?;
            f.sync_all()?;
            let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
            match rustix::fs::linkat(
                rustix::fs::CWD,
                proc_path.as_str(),
                &*l.dir,
                &l.name,
                AtFlags::SYMLINK_FOLLOW,
            ) {
                Ok(()) => return self.pending_dirs.add(&l),
                Err(rustix::io::Errno::EXIST) => {
                    return Err(safe::errno(rustix::io::Errno::EXIST));
                }
                // No /proc: the named way below.
                Err(_) => {}
            }
        }
        let mut f = File::from(l.open_new(mode)?);
        rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(safe::errno)?;
        f.write_all(data)?;
        f.sync_all()?;
        self.pending_dirs.add(&l)
    }

    /// Creates a FIFO with `mode`.
    pub fn create_fifo(&self, p: &Path, mode: u32) -> io::Result<()> {
        self.before_change(p)?;
        let l = self.locate(p, Final::Keep)?;
        rustix::fs::mkfifoat(&l.dir, &l.name, Mode::from_raw_mode(mode)).map_err(safe::errno)?;
        l.chmod(mode)
    }

    /// Creates a directory and its missing parents, each with `mode`.
    /// Returns the directories it created, outermost first.
    pub fn mkdir_all(&self, p: &Path, mode: u32) -> io::Result<Vec<PathBuf>> {
        let _moves = safe::MayMove;
        let mut missing = Vec::new();
        let mut cur = Some(p);
        while let Some(c) = cur {
            if self.stat(c)?.is_some() {
                break;
            }
            missing.push(c.to_path_buf());
            cur = c.parent();
        }
        missing.reverse();
        for d in &missing {
            self.before_change(d)?;
            let l = self.locate(d, Final::Follow)?;
            match rustix::fs::mkdirat(&l.dir, &l.name, Mode::from_raw_mode(mode)) {
                Ok(()) => l.chmod(mode)?,
                Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(safe::errno(e)),
            }
        }
        Ok(missing)
    }

    /// Sets the mode of `p`, or of what a link there points to when
    /// cf-agent would follow it.
    pub fn chmod(&self, p: &Path, mode: u32) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(p)?;
        let l = self.locate(p, Final::Follow)?;
        self.before_change_located(&l)?;
        let u = self.unlock(&l, p);
        let done = l.chmod(mode);
        self.relock(&l, p, u);
        done
    }

    /// Changes owner and group without following a final symlink.
    pub fn lchown(&self, p: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(p)?;
        let l = self.locate(p, Final::Keep)?;
        let (u, g) = uid_gid(uid, gid);
        rustix::fs::chownat(&l.dir, &l.name, u, g, AtFlags::SYMLINK_NOFOLLOW).map_err(safe::errno)
    }

    /// Changes owner and group of `p`, or of what a link there points to
    /// when cf-agent would follow it.
    pub fn chown(&self, p: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(p)?;
        let l = self.locate(p, Final::Follow)?;
        self.before_change_located(&l)?;
        let (u, g) = uid_gid(uid, gid);
        rustix::fs::chownat(&l.dir, &l.name, u, g, AtFlags::SYMLINK_NOFOLLOW).map_err(safe::errno)
    }

    pub fn remove_file(&self, p: &Path) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(p)?;
        let l = self.locate(p, Final::Keep)?;
        // Under an override, a removed file stays removed.
        let _ = self.unlock(&l, p);
        rustix::fs::unlinkat(&l.dir, &l.name, AtFlags::empty()).map_err(safe::errno)
    }

    pub fn remove_dir(&self, p: &Path) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(p)?;
        let l = self.locate(p, Final::Keep)?;
        rustix::fs::unlinkat(&l.dir, &l.name, AtFlags::REMOVEDIR).map_err(safe::errno)
    }

    /// Removes a directory and everything below it, never following a
    /// link inside it.
    pub fn remove_dir_all(&self, p: &Path) -> io::Result<()> {
        for name in self.read_dir(p)? {
            let child = p.join(&name);
            match self.lstat(&child)? {
                Some(m) if m.kind == FileKind::Dir => self.remove_dir_all(&child)?,
                Some(_) => self.remove_file(&child)?,
                None => {}
            }
        }
        self.remove_dir(p)
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(from)?;
        self.before_change(to)?;
        let f = self.locate(from, Final::Keep)?;
        let t = self.locate(to, Final::Keep)?;
        // Under an override, as cf-agent: the file renamed is mutable at
        // its new name, unless the file it replaced there was immutable.
        let replaced = self.unlock(&t, to);
        let moved = self.unlock(&f, from);
        rustix::fs::renameat(&f.dir, &f.name, &t.dir, &t.name).map_err(safe::errno)?;
        if moved.readable {
            self.relock(&t, to, replaced);
        }
        Ok(())
    }

    /// Creates a symlink at `link` whose target is `target` as written
    /// (not mapped: a link's text is what the policy says).
    pub fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(link)?;
        let l = self.locate(link, Final::Keep)?;
        rustix::fs::symlinkat(target, &l.dir, &l.name).map_err(safe::errno)
    }

    pub fn hard_link(&self, existing: &Path, link: &Path) -> io::Result<()> {
        let _moves = safe::MayMove;
        self.before_change(link)?;
        let e = self.locate(existing, Final::Keep)?;
        let l = self.locate(link, Final::Keep)?;
        rustix::fs::linkat(&e.dir, &e.name, &l.dir, &l.name, AtFlags::empty()).map_err(safe::errno)
    }

    /// Sets access and modification times to now.
    pub fn touch(&self, p: &Path) -> io::Result<()> {
        let l = self.locate(p, Final::Follow)?;
        let u = self.unlock(&l, p);
        let done = self.touch_located(&l);
        self.relock(&l, p, u);
        done
    }

    fn touch_located(&self, l: &Located) -> io::Result<()> {
        let now = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_NOW,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_NOW,
            },
        };
        rustix::fs::utimensat(&l.dir, &l.name, &now, AtFlags::SYMLINK_NOFOLLOW).map_err(safe::errno)
    }

    /// Replaces a file's content atomically: a new file beside the target
    /// gets the data, the mode (and owner, group and extended attributes of
    /// the file it replaces, when there is one), is synced, and is renamed
    /// over the target; then the directory is synced. A crash at any moment
    /// leaves the old file or the new one, never a mix.
    ///
    /// The new file is created exclusively (`O_EXCL`, `O_NOFOLLOW`) under a
    /// name nobody can predict, and its owner and mode are set through its
    /// descriptor; a link at the target that cf-agent would follow is
    /// written through (the file it points to is replaced), one it would
    /// not is refused.
    pub fn write_atomic(&self, p: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        self.write_atomic_unless_changed(p, data, mode, None)
    }

    /// [`Host::write_atomic`], refusing when the file is no longer what
    /// `read` saw (another writer changed it since): that writer's change
    /// is kept, and the error says so.
    pub fn write_atomic_unless_changed(
        &self,
        p: &Path,
        data: &[u8],
        mode: u32,
        read: Option<&Stamp>,
    ) -> io::Result<()> {
        self.replace_with(p, mode, read, |f| f.write_all(data))
    }

    /// Replaces a file's content atomically (as [`Host::write_atomic`])
    /// with what `fill` writes, streamed: a download of any size goes to
    /// the new file beside the target as it arrives. When `fill` fails, the
    /// new file is dropped and the target is left as it was; its error is
    /// returned as [`Streamed::Fill`].
    pub fn write_atomic_streamed<E>(
        &self,
        p: &Path,
        mode: u32,
        fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
    ) -> Result<(), Streamed<E>> {
        self.write_streamed(p, mode, true, fill)
    }

    /// [`Host::write_atomic_streamed`] without syncing the file's data: for
    /// files staged under a temporary name, all made durable at once by
    /// [`Host::sync_files`] before anything renames them into place.
    pub fn write_staged<E>(
        &self,
        p: &Path,
        mode: u32,
        fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
    ) -> Result<(), Streamed<E>> {
        self.write_streamed(p, mode, false, fill)
    }

    /// Makes the staged files `paths` durable, side by side (see
    /// [`Host::write_staged`]).
    pub fn sync_files(&self, paths: &[PathBuf]) -> io::Result<()> {
        let fds = paths
            .iter()
            .map(|p| {
                let l = self.locate(p, Final::Keep)?;
                l.open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK)
            })
            .collect::<io::Result<Vec<_>>>()?;
        fsync_all(&fds)
    }

    fn write_streamed<E>(
        &self,
        p: &Path,
        mode: u32,
        sync: bool,
        fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
    ) -> Result<(), Streamed<E>> {
        let mut failure = None;
        let written = self.replace_with_sync(p, mode, None, sync, |f| {
            fill(f).map_err(|e| {
                failure = Some(e);
                io::Error::other("the content could not be had")
            })
        });
        match (written, failure) {
            (_, Some(e)) => Err(Streamed::Fill(e)),
            (Err(e), None) => Err(Streamed::Io(e)),
            (Ok(()), None) => Ok(()),
        }
    }

    /// Copies a regular file's bytes to `to` atomically, streamed through
    /// the kernel (`copy_file_range`) rather than held in memory: a copy of
    /// any size costs a few pages.
    pub fn copy_atomic(&self, from: &Path, to: &Path, mode: u32) -> io::Result<()> {
        if self.simulated(from).is_some() {
            let data = self.read(from)?;
            return self.write_atomic(to, &data, mode);
        }
        let mut src = self.open_regular(from)?;
        // A sparse source (fewer blocks than its size needs) keeps its
        // holes, as cf-agent's copies do
        // (10_files/locally_copied_sparse_file_preserves_sparseness.cf).
        let meta = src.metadata()?;
        let sparse = {
            use std::os::unix::fs::MetadataExt;
            meta.blocks().saturating_mul(512) < meta.len()
        };
        self.replace_with(to, mode, None, |f| {
            if sparse {
                copy_sparse(&src, f, meta.len())
            } else {
                std::io::copy(&mut src, f).map(|_| ())
            }
        })
    }

    /// The one way a file's content is replaced: `fill` writes the new
    /// content into a file beside the target (see
    /// [`Host::write_atomic`]), which is renamed over it.
    fn replace_with(
        &self,
        p: &Path,
        mode: u32,
        read: Option<&Stamp>,
        fill: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> io::Result<()> {
        self.replace_with_sync(p, mode, read, true, fill)
    }

    /// [`Host::replace_with`]; `sync`: whether the new content is synced
    /// before the rename (not for staged files, see [`Host::write_staged`]).
    fn replace_with_sync(
        &self,
        p: &Path,
        mode: u32,
        read: Option<&Stamp>,
        sync: bool,
        fill: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> io::Result<()> {
        self.before_change(p)?;
        let l = self.locate(p, Final::Follow)?;
        self.before_change_located(&l)?;
        self.clean_stale_temps(&l.dir);
        let old = l.lstat()?;
        // Under an override, an immutable file is replaced by one that is
        // immutable too, once it stands at the name.
        let mut unlocked = None;
        // The new content is written to a file without a name (O_TMPFILE):
        // nobody can open, swap or leave behind what has no name. It gets
        // one only just before the rename. File systems without O_TMPFILE
        // get a named one, created exclusively.
        let unnamed = rustix::fs::openat(
            &*l.dir,
            ".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        );
        let (fd, mut named) = match unnamed {
            Ok(fd) => (fd, None),
            Err(_) => {
                let tmp = Located {
                    dir: std::sync::Arc::clone(&l.dir),
                    name: safe::temp_name(&l.name),
                };
                (tmp.open_new(0o600)?, Some(tmp.name))
            }
        };
        let mut f = File::from(fd);
        let result = (|| {
            fill(&mut f)?;
            if let Some(st) = &old {
                if can_chown() {
                    let (u, g) = uid_gid(Some(st.st_uid), Some(st.st_gid));
                    rustix::fs::fchown(&f, u, g).map_err(safe::errno)?;
                }
                // An edit holds the file it read open (its lock): that
                // one, which the check below says is still there.
                match read {
                    Some(stamp) => copy_xattrs(&stamp.lock, &f),
                    None => {
                        if let Ok(from) = l.open(OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY)
                        {
                            copy_xattrs(&from, &f);
                        }
                    }
                }
            }
            rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(safe::errno)?;
            if sync {
                f.sync_all()?;
            }
            if let Some(stamp) = read {
                let now = l.lstat()?.map(|st| Seen::of(&st));
                if now != Some(stamp.seen) {
                    return Err(io::Error::other(format!(
                        "'{}' changed since it was read; not overwriting the other change",
                        p.display()
                    )));
                }
            }
            let name = match &named {
                Some(n) => n.clone(),
                None => {
                    // linkat through /proc names exactly this descriptor's
                    // file (open(2) on O_TMPFILE), with no capability needed.
                    let n = safe::temp_name(&l.name);
                    let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
                    rustix::fs::linkat(
                        rustix::fs::CWD,
                        proc_path.as_str(),
                        &*l.dir,
                        &n,
                        AtFlags::SYMLINK_FOLLOW,
                    )
                    .map_err(safe::errno)?;
                    named = Some(n.clone());
                    n
                }
            };
            let u = *unlocked.insert(self.unlock(&l, p));
            rustix::fs::renameat(&*l.dir, &name, &*l.dir, &l.name).map_err(safe::errno)?;
            named = None;
            unlocked = None;
            self.relock_fd(&f, p, u);
            // Whoever owns the directory may have swapped the name in the
            // instant between; then what was renamed is not ours.
            let ours = Seen::of(&rustix::fs::fstat(&f).map_err(safe::errno)?);
            let there = l.lstat()?.map(|st| Seen::of(&st));
            if there.map(|t| (t.dev, t.ino)) != Some((ours.dev, ours.ino)) {
                return Err(io::Error::other(format!(
                    "'{}' was replaced while it was written",
                    p.display()
                )));
            }
            self.pending_dirs.add(&l)
        })();
        if let Some(n) = named {
            let _ = rustix::fs::unlinkat(&*l.dir, &n, AtFlags::empty());
        }
        // The rename failed: the file left there is immutable again.
        if let Some(u) = unlocked {
            self.relock(&l, p, u);
        }
        result
    }

    /// Appends `data` to a file, creating it (0600, as cf-agent's umask
    /// makes it) when missing; a link is followed only as cf-agent would.
    pub fn append(&self, p: &Path, data: &[u8]) -> io::Result<()> {
        self.before_change(p)?;
        let l = self.locate(p, Final::Follow)?;
        self.before_change_located(&l)?;
        let fd = rustix::fs::openat(
            &l.dir,
            &l.name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(safe::errno)?;
        File::from(fd).write_all(data)
    }

    /// Once per directory and run: removes what killed runs left there.
    fn clean_stale_temps(&self, dir: &std::os::fd::OwnedFd) {
        let Ok(st) = rustix::fs::fstat(dir) else {
            return;
        };
        let key = safe::identity(&st);
        if let Ok(mut seen) = self.cleaned_dirs.lock()
            && !seen.insert(key)
        {
            return;
        }
        let _ = safe::remove_stale_temps(dir);
    }
}

/// A settled stretch of the safe walk's cache (see [`Host::settle`]).
#[derive(Debug)]
pub struct Settled {
    dirs: std::sync::Arc<Mutex<safe::DirCache>>,
    settles: bool,
}

impl Drop for Settled {
    fn drop(&mut self) {
        if self.settles
            && let Ok(mut c) = self.dirs.lock()
        {
            c.unsettle();
        }
    }
}

/// Why [`Host::write_atomic_streamed`] failed: writing the file, or
/// what was to fill it.
#[derive(Debug)]
pub enum Streamed<E> {
    Io(io::Error),
    Fill(E),
}

impl Located {
    /// Creates the entry as a new regular file, exclusively: never through
    /// a link, never an existing file.
    fn open_new(&self, mode: u32) -> io::Result<std::os::fd::OwnedFd> {
        rustix::fs::openat(
            &self.dir,
            &self.name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(safe::errno)
    }
}

/// The rest of a file whose size `fstat` gave, in a buffer of that size
/// (one byte more, for the read that sees the end): the size is known, so
/// nothing asks the kernel for it again (`read_to_end` does, twice).
#[allow(clippy::useless_conversion)]
fn read_sized(f: &mut File, size: impl Into<i64>) -> io::Result<Vec<u8>> {
    // Capped, so that a size that lies costs no more than reading does.
    const HINT_CAP: usize = 64 << 20;
    let hint = usize::try_from(size.into()).unwrap_or(0).min(HINT_CAP);
    let mut data = vec![0u8; hint + 1];
    let mut n = 0;
    loop {
        if n == data.len() {
            data.resize(n * 2, 0);
        }
        match f.read(&mut data[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    data.truncate(n);
    Ok(data)
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Extended attributes of `from` onto `to`, through their descriptors,
/// best effort (file systems without xattr support simply have none).
fn copy_xattrs(from: &impl AsRawFd, to: &impl AsRawFd) {
    let (f, t) = (from.as_raw_fd(), to.as_raw_fd());
    // SAFETY: valid descriptors; a null buffer asks for the needed size.
    let size = unsafe { libc::flistxattr(f, std::ptr::null_mut(), 0) };
    if size <= 0 {
        return;
    }
    let mut names = vec![0u8; size as usize];
    // SAFETY: the buffer has `size` bytes.
    let size = unsafe { libc::flistxattr(f, names.as_mut_ptr().cast(), names.len()) };
    if size <= 0 {
        return;
    }
    for name in names[..size as usize]
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
    {
        let Ok(cname) = CString::new(name) else {
            continue;
        };
        // SAFETY: valid descriptor and attribute name; null buffer asks the size.
        let len = unsafe { libc::fgetxattr(f, cname.as_ptr(), std::ptr::null_mut(), 0) };
        if len < 0 {
            continue;
        }
        let mut value = vec![0u8; len as usize];
        // SAFETY: the buffer has `len` bytes.
        let len =
            unsafe { libc::fgetxattr(f, cname.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
        if len < 0 {
            continue;
        }
        // SAFETY: valid descriptor, name and value buffer of `len` bytes.
        unsafe {
            libc::fsetxattr(t, cname.as_ptr(), value.as_ptr().cast(), len as usize, 0);
        }
    }
}

/// Copies the data of `src` (of `len` bytes) to the start of the empty
/// `dst`, leaving its holes as holes: each run of data found by
/// `SEEK_DATA`/`SEEK_HOLE` is copied at its offset, and the length set
/// last. A file system that cannot tell holes gets a plain copy.
fn copy_sparse(src: &File, dst: &mut File, len: u64) -> io::Result<()> {
    use rustix::fs::{SeekFrom as RSeek, seek};
    use std::io::{Seek, SeekFrom};
    let mut pos = 0u64;
    while pos < len {
        let data = match seek(src, RSeek::Data(pos)) {
            Ok(d) => d,
            // No data after `pos`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) if pos == 0 => {
                let mut s = src;
                return io::copy(&mut s, dst).map(|_| ());
            }
            Err(e) => return Err(e.into()),
        };
        let hole = seek(src, RSeek::Hole(data))?.min(len);
        let mut s = src;
        s.seek(SeekFrom::Start(data))?;
        dst.seek(SeekFrom::Start(data))?;
        io::copy(&mut s.take(hole - data), dst)?;
        pos = hole;
    }
    dst.set_len(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_keeps_mode_and_replaces() {
        let tmp = tempfile::tempdir().unwrap();
        let h = Host::rooted(tmp.path());
        let p = Path::new("/etc/x.conf");
        h.mkdir_all(Path::new("/etc"), 0o755).unwrap();
        h.create_empty(p, 0o640).unwrap();
        assert_eq!(h.lstat(p).unwrap().unwrap().mode, 0o640);
        h.write_atomic(p, b"new\n", 0o640).unwrap();
        assert_eq!(h.read(p).unwrap(), b"new\n");
        assert_eq!(h.lstat(p).unwrap().unwrap().mode, 0o640);
        // Nothing is left beside it.
        assert_eq!(
            h.read_dir(Path::new("/etc")).unwrap(),
            vec!["x.conf".to_string()]
        );
    }

    #[test]
    fn a_sparse_file_is_copied_sparse() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let h = Host::rooted(tmp.path());
        // A MiB hole, a few bytes of data, another hole to the end.
        let src = tmp.path().join("sparse");
        {
            let f = File::create(&src).unwrap();
            f.set_len(3 << 20).unwrap();
            use std::os::unix::fs::FileExt;
            f.write_all_at(b"data", 1 << 20).unwrap();
        }
        let blocks = std::fs::metadata(&src).unwrap().blocks();
        if blocks * 512 >= 3 << 20 {
            eprintln!("skipped: this file system keeps no holes");
            return;
        }
        h.copy_atomic(Path::new("/sparse"), Path::new("/copy"), 0o600)
            .unwrap();
        let copy = tmp.path().join("copy");
        let m = std::fs::metadata(&copy).unwrap();
        assert_eq!(m.len(), 3 << 20);
        assert!(m.blocks() * 512 < 1 << 20, "{} blocks", m.blocks());
        assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&src).unwrap());
    }

    #[test]
    fn mkdir_all_reports_what_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        let h = Host::rooted(tmp.path());
        let made = h.mkdir_all(Path::new("/a/b/c"), 0o700).unwrap();
        assert_eq!(made.len(), 3);
        assert_eq!(h.stat(Path::new("/a/b")).unwrap().unwrap().mode, 0o700);
        assert!(h.mkdir_all(Path::new("/a/b/c"), 0o700).unwrap().is_empty());
        assert!(h.lstat(Path::new("/nope")).unwrap().is_none());
    }

    #[test]
    fn a_file_made_with_content_appears_whole_and_never_over_another() {
        let tmp = tempfile::tempdir().unwrap();
        let h = Host::rooted(tmp.path());
        h.mkdir_all(Path::new("/etc"), 0o755).unwrap();
        let p = Path::new("/etc/new.conf");
        h.create_with_content(p, 0o640, b"a\nb\n").unwrap();
        assert_eq!(h.read(p).unwrap(), b"a\nb\n");
        assert_eq!(h.lstat(p).unwrap().unwrap().mode, 0o640);
        let e = h.create_with_content(p, 0o600, b"other").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(h.read(p).unwrap(), b"a\nb\n");
        // Not through a link either.
        std::os::unix::fs::symlink(tmp.path().join("etc/new.conf"), tmp.path().join("etc/l"))
            .unwrap();
        assert!(
            h.create_with_content(Path::new("/etc/l"), 0o600, b"x")
                .is_err()
        );
        assert_eq!(
            h.read_dir(Path::new("/etc")).unwrap(),
            vec!["l".to_string(), "new.conf".to_string()]
        );
    }

    #[test]
    fn a_settled_stretch_walks_again_after_a_directory_moved() {
        let tmp = tempfile::tempdir().unwrap();
        let h = Host::rooted(tmp.path());
        h.mkdir_all(Path::new("/d"), 0o755).unwrap();
        h.create_with_content(Path::new("/d/f"), 0o644, b"first")
            .unwrap();
        let _settled = h.settle();
        assert_eq!(h.read(Path::new("/d/f")).unwrap(), b"first");
        // Our own move of the directory: the next look walks again.
        h.rename(Path::new("/d"), Path::new("/old")).unwrap();
        h.mkdir_all(Path::new("/d"), 0o755).unwrap();
        assert!(h.lstat(Path::new("/d/f")).unwrap().is_none());
        h.create_with_content(Path::new("/d/f"), 0o644, b"second")
            .unwrap();
        assert_eq!(h.read(Path::new("/old/f")).unwrap(), b"first");
        // Moved by another program (a command, which forgets the checks
        // as it starts): the next look walks again.
        std::fs::rename(tmp.path().join("d"), tmp.path().join("d2")).unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        crate::host::safe::forget_checks();
        assert!(h.lstat(Path::new("/d/f")).unwrap().is_none());
    }
}
