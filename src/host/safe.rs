//! The safe walk: every path the policy names is opened one component at a
//! time with `openat` and `O_NOFOLLOW`, from a root we trust, as cf-agent's
//! `safe_open` does. A symlink met on the way is followed only when cf-agent
//! would follow it: the link is owned by root or by the agent's effective
//! uid, or its owner and group both equal those of what it points to. So a
//! user who owns a directory the agent works in cannot redirect it, by a
//! link planted in advance or swapped in during the run, to a file the user
//! does not own.
//!
//! The walk ends at a [`Located`]: the directory that holds the last
//! component, as an open descriptor, and the component's name. Every
//! operation then works on that pair (`*at` calls) or on a descriptor opened
//! from it, so what was checked is what is changed.
//!
//! The syscalls come from `rustix`: safe wrappers over the raw calls with
//! owned descriptors (no `unsafe` of ours), maintained by the Bytecode
//! Alliance and already in our tree through `tempfile`. `cap-std` sandboxes
//! a directory too, but it refuses every link that leaves it and knows
//! nothing of cf-agent's ownership rule, which policies rely on (a
//! root-owned `/etc/resolv.conf` link is edited through).

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::Arc;

/// More links than this in one walk is a loop, as for the kernel.
const MAX_LINKS: u32 = 40;

/// The directory holding a path's last component, opened safely, and that
/// component's name in it (`.` when the path names a directory with no
/// last name, such as `/`).
#[derive(Debug)]
pub struct Located {
    pub dir: Arc<OwnedFd>,
    pub name: OsString,
}

/// Whether the last component is followed when it is a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Final {
    /// The link itself (lstat, unlink, rename, lchown, readlink).
    Keep,
    /// What it points to, when cf-agent would follow it (stat, read, edit,
    /// chmod).
    Follow,
}

pub(crate) fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// Opens a trusted directory by its real path (the root of the walk).
fn open_root(root: &Path) -> io::Result<OwnedFd> {
    rustix::fs::openat(
        CWD,
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)
}

fn open_subdir(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)
}

pub(crate) fn lstat_at(dir: &OwnedFd, name: &OsStr) -> io::Result<Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)
}

/// The error cf-agent gives for a link it will not follow.
fn refused(link: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "Cannot follow symlink '{}'; it is not owned by root or the user running this process, \
             and the target owner and/or group differs from that of the symlink itself",
            link.display()
        ),
    )
}

fn is_symlink(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Symlink
}

fn is_dir(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Directory
}

/// Resolves `path` below the trusted directory `root` (`/` on the real
/// system, the test tree on a rooted host): `..` never climbs above it and
/// an absolute link target starts again from it. A relative `path` is taken
/// from the current directory on the real system.
///
/// Also says whether the directory found is the one the path's parent
/// names (it is not when the last component was a link that was followed).
pub fn locate(root: Option<&Path>, path: &Path, last: Final) -> io::Result<(Located, bool)> {
    let (anchor, path) = match root {
        Some(r) => (r.to_path_buf(), path.to_path_buf()),
        None if path.is_absolute() => (Path::new("/").to_path_buf(), path.to_path_buf()),
        None => (
            Path::new("/").to_path_buf(),
            std::env::current_dir()?.join(path),
        ),
    };
    let root_fd = Arc::new(open_root(&anchor)?);
    let mut walk = Walk {
        stack: vec![root_fd],
        links: 0,
        shown: path.clone(),
        followed_last: false,
    };
    let queue = components(path.as_os_str());
    let found = walk.run(queue, last)?;
    Ok((found, !walk.followed_last))
}

/// The names of a path (or a link's text), `.` dropped, `..` kept; whether
/// it was absolute is told by the first entry being empty.
fn components(p: &OsStr) -> VecDeque<OsString> {
    let path = Path::new(p);
    let mut out = VecDeque::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => out.push_back(OsString::new()),
            Component::CurDir => {}
            Component::ParentDir => out.push_back(OsString::from("..")),
            Component::Normal(n) => out.push_back(n.to_os_string()),
        }
    }
    out
}

struct Walk {
    /// The directories walked into, the trusted root first; `..` pops.
    stack: Vec<Arc<OwnedFd>>,
    links: u32,
    /// The path as the policy names it, for messages.
    shown: std::path::PathBuf,
    /// Whether the last component was a link that was followed.
    followed_last: bool,
}

impl Walk {
    fn top(&self) -> &Arc<OwnedFd> {
        self.stack.last().expect("the root is never popped")
    }

    fn at(&self, name: OsString) -> Located {
        Located {
            dir: Arc::clone(self.top()),
            name,
        }
    }

    fn run(&mut self, mut queue: VecDeque<OsString>, last: Final) -> io::Result<Located> {
        while let Some(name) = queue.pop_front() {
            if name.is_empty() || name == ".." {
                if name.is_empty() {
                    // Absolute: start again from the trusted root.
                    self.stack.truncate(1);
                } else if self.stack.len() > 1 {
                    self.stack.pop();
                }
                if queue.is_empty() {
                    return Ok(self.at(OsString::from(".")));
                }
                continue;
            }
            let is_last = queue.is_empty();
            if is_last && last == Final::Keep {
                return Ok(self.at(name));
            }
            let st = match lstat_at(self.top(), &name) {
                Ok(st) => st,
                // A missing last component is a place to create something.
                Err(e) if is_last && e.kind() == io::ErrorKind::NotFound => {
                    return Ok(self.at(name));
                }
                Err(e) => return Err(e),
            };
            if is_symlink(&st) {
                self.links += 1;
                if self.links > MAX_LINKS {
                    return Err(errno(rustix::io::Errno::LOOP));
                }
                let text = rustix::fs::readlinkat(self.top(), &name, Vec::new()).map_err(errno)?;
                let text = OsStr::from_bytes(text.as_bytes()).to_os_string();
                if !self.may_follow(&st, &text)? {
                    return Err(refused(&self.shown));
                }
                self.followed_last |= is_last;
                let mut target = components(&text);
                target.append(&mut queue);
                queue = target;
                continue;
            }
            if is_last {
                return Ok(self.at(name));
            }
            if !is_dir(&st) {
                return Err(errno(rustix::io::Errno::NOTDIR));
            }
            // O_NOFOLLOW: a link swapped in since the lstat is refused here.
            let fd = open_subdir(self.top(), &name)?;
            self.stack.push(Arc::new(fd));
        }
        Ok(self.at(OsString::from(".")))
    }

    /// cf-agent's rule: a link owned by root or by us is followed; another
    /// user's link only when its owner and group are those of its target.
    fn may_follow(&self, link: &Stat, text: &OsStr) -> io::Result<bool> {
        let euid = rustix::process::geteuid().as_raw();
        if link.st_uid == 0 || link.st_uid == euid {
            return Ok(true);
        }
        // Resolve the target from here with the same rule; a target that
        // cannot be reached safely is not followed either.
        let mut sub = Walk {
            stack: self.stack.clone(),
            links: self.links,
            shown: self.shown.clone(),
            followed_last: false,
        };
        let target = match sub.run(components(text), Final::Follow) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        match lstat_at(&target.dir, &target.name) {
            Ok(t) => Ok(t.st_uid == link.st_uid && t.st_gid == link.st_gid),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The directories that walks of this run reached, by real path, each
/// with its identity (device, inode) when it was reached. A later path in
/// the same directory skips the walk when its parent still names that very
/// directory: the kernel's `stat` of the parent (one call) gives the same
/// identity. That is as safe as the walk itself, because what is then used
/// is the descriptor the walk opened, a directory it was allowed to reach;
/// a directory moved, removed or replaced by a link since gives another
/// identity and is walked again. An open descriptor keeps its inode, so an
/// identity is never reused while it is cached.
///
/// Within a settled stretch (a files promise, see [`DirCache::settle`])
/// a directory checked once is not checked again: a promise looks at its
/// file several times (lstat, stat, read, write), and each check walked
/// the whole path in the kernel. Whatever of ours may move a directory
/// ends the trust: a change other than a regular file's content, and any
/// command started ([`forget_checks`]). Another process may move one at
/// any moment, checked or not: what is then used is still the directory
/// the walk safely reached, as it is when the move comes just after the
/// check.
#[derive(Debug, Default)]
pub struct DirCache {
    dirs: std::collections::HashMap<std::path::PathBuf, CachedDir>,
    /// How many settled stretches are open (they nest).
    settled: usize,
}

#[derive(Debug)]
struct CachedDir {
    fd: Arc<OwnedFd>,
    id: (u64, u64),
    /// The [`CHECKS`] generation in which the path was last seen to name
    /// this directory.
    checked: u64,
}

/// Bumped whenever a directory may have moved; a check made in an
/// earlier generation is made again.
static CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Says that directories may have moved since they were checked (a
/// command started, a directory made, removed, renamed, a link made).
pub fn forget_checks() {
    CHECKS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// Held over a change that may move a directory: when it ends (however
/// it ends), the checks made before and during it are forgotten.
pub struct MayMove;

impl Drop for MayMove {
    fn drop(&mut self) {
        forget_checks();
    }
}

fn generation() -> u64 {
    CHECKS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Descriptors held at most (well under the usual limit of 1024).
const DIR_CACHE_MAX: usize = 128;

#[allow(clippy::useless_conversion)]
pub(crate) fn identity(st: &Stat) -> (u64, u64) {
    (u64::from(st.st_dev), u64::from(st.st_ino))
}

impl DirCache {
    /// The directory the walk reached for `real_dir`, if it still is what
    /// that path names.
    pub fn lookup(&mut self, real_dir: &Path) -> Option<Arc<OwnedFd>> {
        let settled = self.settled > 0;
        let entry = self.dirs.get_mut(real_dir)?;
        let now_gen = generation();
        if settled && entry.checked == now_gen {
            return Some(Arc::clone(&entry.fd));
        }
        let now = rustix::fs::stat(real_dir).ok()?;
        if identity(&now) != entry.id {
            return None;
        }
        entry.checked = now_gen;
        Some(Arc::clone(&entry.fd))
    }

    /// Whether `real_dir` was seen to be a directory this settled stretch
    /// (so that nothing need look again).
    pub fn known_dir(&self, real_dir: &Path) -> bool {
        self.settled > 0
            && self
                .dirs
                .get(real_dir)
                .is_some_and(|e| e.checked == generation())
    }

    pub fn remember(&mut self, real_dir: &Path, fd: &Arc<OwnedFd>) {
        let Ok(st) = rustix::fs::fstat(fd) else {
            return;
        };
        if self.dirs.len() >= DIR_CACHE_MAX {
            self.dirs.clear();
        }
        self.dirs.insert(
            real_dir.to_path_buf(),
            CachedDir {
                fd: Arc::clone(fd),
                id: identity(&st),
                checked: generation(),
            },
        );
    }

    /// Opens a settled stretch: until [`DirCache::unsettle`], a directory
    /// is checked once per generation. A check made in an earlier
    /// stretch still holds when nothing of ours may have moved a
    /// directory since (the files promises of one directory, one after
    /// the other, check it once).
    pub fn settle(&mut self) {
        self.settled += 1;
    }

    pub fn unsettle(&mut self) {
        self.settled = self.settled.saturating_sub(1);
    }
}

impl Located {
    /// `lstat` of the entry; `None` when nothing is there.
    pub fn lstat(&self) -> io::Result<Option<Stat>> {
        match lstat_at(&self.dir, &self.name) {
            Ok(st) => Ok(Some(st)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens the entry itself (never a link) with `flags` added to
    /// `O_NOFOLLOW | O_CLOEXEC`.
    pub fn open(&self, flags: OFlags) -> io::Result<OwnedFd> {
        rustix::fs::openat(
            &self.dir,
            &self.name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)
    }

    /// A descriptor of the directory itself that can be synced (the walk's
    /// are `O_PATH`).
    pub fn dir_for_sync(&self) -> io::Result<OwnedFd> {
        rustix::fs::openat(
            &self.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)
    }

    /// Sets the mode of the entry (never through a link): through the
    /// descriptor, so that an entry swapped since it was checked is not
    /// the one changed.
    pub fn chmod(&self, mode: u32) -> io::Result<()> {
        let fd = self.open(OFlags::PATH)?;
        chmod_fd(&fd, mode)
    }
}

/// `fchmod` for any descriptor, also an `O_PATH` one: Linux has no
/// `fchmod` on those, so the change goes through `/proc/self/fd`, which
/// names exactly the inode the descriptor holds (glibc's own way for
/// `fchmodat(..., AT_SYMLINK_NOFOLLOW)`). A link is refused.
pub fn chmod_fd(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    let st = rustix::fs::fstat(fd).map_err(errno)?;
    if is_symlink(&st) {
        return Err(errno(rustix::io::Errno::LOOP));
    }
    let mode = Mode::from_raw_mode(mode);
    match rustix::fs::fchmod(fd, mode) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::BADF) => {}
        Err(e) => return Err(errno(e)),
    }
    let proc_path = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    rustix::fs::chmodat(CWD, proc_path.as_str(), mode, AtFlags::empty()).map_err(errno)
}

/// A name for a temporary file beside `name` that nobody can predict: the
/// pid (so that a later run knows whether its writer is alive) and 64
/// random bits.
pub fn temp_name(name: &OsStr) -> OsString {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            // Without the kernel's randomness, the clock's nanoseconds; the
            // name is still created exclusively, so a guess only fails.
            Err(_) => {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0);
                bytes = t.to_le_bytes();
                break;
            }
        }
    }
    let mut out = OsString::from(".");
    out.push(name);
    out.push(format!(
        "{TEMP_MARK}{}-{:016x}",
        std::process::id(),
        u64::from_le_bytes(bytes)
    ));
    out
}

/// What marks our temporary files: `.NAME.convergent-PID-RANDOM` (and the
/// `.NAME.convergent-PID` of earlier versions).
const TEMP_MARK: &str = ".convergent-";

/// The pid of the run that made a temporary file of ours, from its name.
pub fn temp_owner_pid(name: &OsStr) -> Option<u32> {
    let s = name.to_str()?;
    if !s.starts_with('.') {
        return None;
    }
    let rest = &s[s.rfind(TEMP_MARK)? + TEMP_MARK.len()..];
    let pid = rest.split('-').next()?;
    let tail = &rest[pid.len()..];
    let well_formed =
        tail.is_empty() || (tail.len() == 17 && tail[1..].bytes().all(|b| b.is_ascii_hexdigit()));
    if !well_formed {
        return None;
    }
    pid.parse().ok()
}

/// Removes the temporary files that runs which are no longer alive left in
/// `dir` (killed between creating and renaming them). Only regular files
/// owned by us are removed; `unlinkat` never follows a link.
pub fn remove_stale_temps(dir: &OwnedFd) -> io::Result<()> {
    let me = std::process::id();
    let euid = rustix::process::geteuid().as_raw();
    let readable = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    let mut entries = rustix::fs::Dir::read_from(&readable).map_err(errno)?;
    let mut stale = Vec::new();
    while let Some(entry) = entries.read() {
        let entry = entry.map_err(errno)?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        let Some(pid) = temp_owner_pid(name) else {
            continue;
        };
        if pid == me || pid_alive(pid) {
            continue;
        }
        stale.push(name.to_os_string());
    }
    for name in stale {
        let Ok(st) = lstat_at(dir, &name) else {
            continue;
        };
        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_uid == euid {
            let _ = rustix::fs::unlinkat(dir, &name, AtFlags::empty());
        }
    }
    Ok(())
}

fn pid_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    // EPERM: alive, but another user's.
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn name_of(l: &Located) -> &str {
        l.name.to_str().unwrap()
    }

    #[test]
    fn walks_plain_paths_and_stays_below_the_root() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b")).unwrap();
        let l = locate(Some(t.path()), Path::new("/a/b/c"), Final::Follow)
            .unwrap()
            .0;
        assert_eq!(name_of(&l), "c");
        assert!(l.lstat().unwrap().is_none());
        // `..` above the root stays at the root.
        let l = locate(Some(t.path()), Path::new("/../../a"), Final::Keep)
            .unwrap()
            .0;
        assert!(l.lstat().unwrap().is_some());
    }

    #[test]
    fn absolute_link_targets_start_from_the_root() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("real")).unwrap();
        std::fs::write(t.path().join("real/f"), b"x").unwrap();
        symlink("/real", t.path().join("link")).unwrap();
        let l = locate(Some(t.path()), Path::new("/link/f"), Final::Follow)
            .unwrap()
            .0;
        assert_eq!(l.lstat().unwrap().unwrap().st_size, 1);
        // The final link itself, or what it points to.
        symlink("/real/f", t.path().join("flink")).unwrap();
        let l = locate(Some(t.path()), Path::new("/flink"), Final::Keep)
            .unwrap()
            .0;
        assert!(is_symlink(&l.lstat().unwrap().unwrap()));
        let (l, parent) = locate(Some(t.path()), Path::new("/flink"), Final::Follow).unwrap();
        assert_eq!(name_of(&l), "f");
        assert!(!parent, "the file's directory is not the link's");
    }

    #[test]
    fn link_loops_end() {
        let t = tempfile::tempdir().unwrap();
        symlink("b", t.path().join("a")).unwrap();
        symlink("a", t.path().join("b")).unwrap();
        let e = locate(Some(t.path()), Path::new("/a/x"), Final::Follow).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn stale_temps_of_dead_runs_go_and_the_rest_stays() {
        let t = tempfile::tempdir().unwrap();
        // Above any pid_max: a run that is surely dead.
        let dead = t
            .path()
            .join(".f.conf.convergent-999999999-0123456789abcdef");
        let old_style = t.path().join(".f.conf.convergent-999999998");
        let ours = t.path().join(temp_name(OsStr::new("f.conf")));
        let other = t.path().join(".f.conf.convergent-999999999-notours");
        for p in [&dead, &old_style, &ours, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        // A link with a stale name is removed as a name; what it points to stays.
        let target = t.path().join("kept");
        std::fs::write(&target, b"x").unwrap();
        let link = t.path().join(".g.convergent-999999997-0123456789abcdef");
        symlink(&target, &link).unwrap();
        let dir = open_root(t.path()).unwrap();
        remove_stale_temps(&dir).unwrap();
        assert!(!dead.exists() && !old_style.exists());
        assert!(ours.exists() && other.exists() && target.exists());
        assert!(
            std::fs::symlink_metadata(&link).is_ok(),
            "only regular files are removed"
        );
    }

    #[test]
    fn temp_names_are_unpredictable_and_recognised() {
        let a = temp_name(OsStr::new("f.conf"));
        let b = temp_name(OsStr::new("f.conf"));
        assert_ne!(a, b);
        assert_eq!(temp_owner_pid(&a), Some(std::process::id()));
        assert_eq!(
            temp_owner_pid(OsStr::new(".f.conf.convergent-123")),
            Some(123)
        );
        assert_eq!(temp_owner_pid(OsStr::new("f.conf.convergent-123")), None);
        assert_eq!(temp_owner_pid(OsStr::new(".f.convergent-12-zz")), None);
    }
}
