//! The agent's own files, and plain reads, outside the policy's [`Host`].
//!
//! Promise types change the files a policy names through a
//! [`Host`](super::Host), which can be rooted, journaled and dry-run. The
//! functions here serve everything else the agent touches, which it can
//! trust for one of three reasons:
//!
//! - they are ours: the work directory's state (the state database, the
//!   run lock, the undo journal, the record for `--why`) lives in
//!   directories we create 0700, so nobody else can plant a link there;
//! - the administrator named them: the policy files and augments given to
//!   us, a `--report-file`, the files a policy's functions read;
//! - they are the system's own read-only views (`/proc`, `/sys`).
//!
//! What the agent writes for itself is private: directories 0700 and
//! files 0600, as cf-agent makes them, because the state and the reports
//! hold expanded command lines and the prior content of files the policy
//! rewrote, which may be secret.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub use std::fs::Metadata;
pub use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

/// The mode of the directories the agent makes for itself.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of the files the agent writes for itself.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

// ---------------------------------------------------------------- start

/// Opens `/dev/null` on any of the standard descriptors (0, 1, 2) that is
/// closed, as Rust's own start-up does for a program with `fn main`: else
/// the first file the agent opens takes that number, and what it prints
/// (or a child's output) lands in that file.
pub fn ensure_standard_descriptors() {
    for fd in 0..=2 {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1
            && io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
        if closed {
            // The lowest free number is the closed one. SAFETY: a C string
            // constant and flags; the descriptor is kept for the process's life.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
}

// ---------------------------------------------------------------- reads

/// The whole content of a regular file. Anything else (a device such as
/// `/dev/zero`, a FIFO) is refused: it may never end, or never answer.
/// Where the networking files of `/proc` are read from: below the
/// directory `CFENGINE_TEST_OVERRIDE_PROCDIR` names when it is set, as
/// cf-agent reads them (its acceptance tests point it at a fake tree,
/// 00_basics/environment/proc-net.cf), else the real `/proc`.
pub fn proc_override() -> Option<PathBuf> {
    std::env::var_os("CFENGINE_TEST_OVERRIDE_PROCDIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// A `/proc` path below [`proc_override`], when it is set.
pub fn relocated_proc(path: &str) -> PathBuf {
    match proc_override() {
        Some(dir) => dir.join(path.trim_start_matches('/')),
        None => PathBuf::from(path),
    }
}

pub fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    read_upto(path, None)
}

/// At most `max` bytes of a file (`None`: all of a regular file). With a
/// bound, a device or FIFO is read too (`readfile("/dev/urandom", 16)`),
/// never past the bound and never waiting for a writer.
pub fn read_upto(path: impl AsRef<Path>, max: Option<u64>) -> io::Result<Vec<u8>> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    let regular = meta.is_file();
    if !regular && max.is_none() {
        return Err(not_regular());
    }
    // Sized from the file's length (one byte more for the read that sees
    // the end): a buffer grown by doubling holds up to twice the file.
    // Capped, so a length that lies costs no more than reading does.
    const HINT_CAP: u64 = 64 << 20;
    // A file of length 0 is mostly one of /proc's, made as it is read:
    // a page's room reads it in one call, where growing from nothing
    // probes it in many small reads (discovery reads a dozen).
    const GENERATED_HINT: u64 = 4096;
    let hint = if regular {
        let len = if meta.len() == 0 {
            GENERATED_HINT
        } else {
            meta.len()
        };
        len.min(max.unwrap_or(u64::MAX)).min(HINT_CAP)
    } else {
        0
    };
    let mut data = Vec::with_capacity(usize::try_from(hint).unwrap_or(0).saturating_add(1));
    f.take(max.unwrap_or(u64::MAX)).read_to_end(&mut data)?;
    Ok(data)
}

/// The whole content of one of the kernel's generated files (`/proc`,
/// `/sys`), which are always regular and report no useful length: read
/// into a page's room without the `fstat` [`read`] makes to check and size
/// (discovery reads a dozen of them at every start).
pub fn read_generated(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let mut data = Vec::with_capacity(4097);
    // Through `Take`: File's own read_to_end would ask lseek for a size
    // hint the buffer has already.
    (&mut f).take(u64::MAX).read_to_end(&mut data)?;
    Ok(data)
}

/// The error for a file that is read whole but is not a regular file.
pub fn not_regular() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
}

/// The whole content of a regular file, which must be UTF-8.
pub fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Opens a file for reading only (for a caller that must tell a file that
/// cannot be opened from one that cannot be read).
pub fn open(path: impl AsRef<Path>) -> io::Result<impl Read> {
    File::open(path)
}

/// The real user id of this process.
pub fn real_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `stat`: follows symbolic links.
pub fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    fs::metadata(path)
}

/// `lstat`: a symbolic link itself.
pub fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    fs::symlink_metadata(path)
}

/// Whether something is there, following symbolic links (a dangling
/// link is not), as `Path::exists`.
pub fn exists(path: impl AsRef<Path>) -> bool {
    fs::metadata(path).is_ok()
}

/// Whether a regular file is there, following symbolic links.
pub fn is_file(path: impl AsRef<Path>) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether a directory is there, following symbolic links.
pub fn is_dir(path: impl AsRef<Path>) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// The text of a symbolic link.
pub fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    fs::read_link(path)
}

/// The path with every symbolic link and `.`/`..` resolved.
pub fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    fs::canonicalize(path)
}

/// The names in a small directory (`.` and `..` left out), read with
/// getdents64 into a buffer on the stack: no `fstat` and no 32 KiB heap
/// buffer as `opendir` makes, for a directory of a few entries.
pub fn small_dir_names(path: impl AsRef<Path>) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let dir = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(path)?;
    let mut names = Vec::new();
    let mut buf = [0u64; 512];
    loop {
        // SAFETY: the kernel writes at most `size_of_val(&buf)` bytes of
        // linux_dirent64 records into `buf`, which lives across the call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(names);
        }
        // SAFETY: `buf` is plain memory; viewing its first `n` bytes as
        // bytes is sound.
        let bytes = unsafe {
            std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), usize::try_from(n).unwrap_or(0))
        };
        let mut at = 0;
        // Each record: d_ino (8), d_off (8), d_reclen (2), d_type (1),
        // then the name up to a NUL.
        while at + 19 <= bytes.len() {
            let reclen = usize::from(u16::from_ne_bytes([bytes[at + 16], bytes[at + 17]]));
            if reclen == 0 || at + reclen > bytes.len() {
                break;
            }
            let name = &bytes[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
            }
            at += reclen;
        }
    }
}

/// The entries of a directory, in the order the file system gives them
/// (an entry that cannot be read is left out).
pub fn list_dir(path: impl AsRef<Path>) -> io::Result<Vec<PathBuf>> {
    Ok(fs::read_dir(path)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect())
}

// ---------------------------------------------------------------- writes

/// Whether a directory or file we found belongs to the user we run as;
/// only those we tighten (a work directory pointed at someone else's tree
/// is left as it is).
fn ours(m: &Metadata) -> bool {
    // SAFETY: geteuid has no preconditions.
    m.uid() == unsafe { libc::geteuid() }
}

/// Creates one directory 0700; fails with `AlreadyExists` when something
/// is there (so a caller can pick a fresh name).
pub fn create_private_dir_new(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(PRIVATE_DIR_MODE).create(path)?;
    // The umask may have taken bits away; it never adds any, but say the
    // mode exactly.
    fs::set_permissions(path, fs::Permissions::from_mode(PRIVATE_DIR_MODE))
}

/// Makes a directory 0700 for the agent's own use. Its missing parents are
/// made as `mkdir -p` makes them, except its own parent, which is 0700 too
/// when we make it: the state directory's parent is the work directory.
/// An existing directory of ours that others may enter is tightened to
/// 0700; one that belongs to someone else is left alone.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
        && fs::symlink_metadata(parent).is_err()
    {
        if let Some(grand) = parent.parent()
            && !grand.as_os_str().is_empty()
        {
            fs::create_dir_all(grand)?;
        }
        match create_private_dir_new(parent) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    match create_private_dir_new(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => return other,
    }
    let m = fs::metadata(path)?;
    if !m.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("'{}' exists and is not a directory", path.display()),
        ));
    }
    if ours(&m) && m.mode() & 0o077 != 0 {
        fs::set_permissions(
            path,
            fs::Permissions::from_mode(m.mode() & 0o7000 | PRIVATE_DIR_MODE),
        )?;
    }
    Ok(())
}

/// Makes sure a file of ours exists and is 0600: creates it empty when it
/// is missing, and tightens it when we own it and others may read it (an
/// older agent made its state 0644). For files another program fills,
/// such as the SQLite database, which keeps the mode it finds.
pub fn ensure_private_file(path: &Path) -> io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    tighten_file(&f)
}

/// Tightens a file we already have open, when we own it, to 0600.
fn tighten_file(f: &File) -> io::Result<()> {
    let m = f.metadata()?;
    if ours(&m) && m.mode() & 0o077 != 0 {
        f.set_permissions(fs::Permissions::from_mode(PRIVATE_FILE_MODE))?;
    }
    Ok(())
}

/// Tightens an existing file of ours to 0600; nothing there is fine.
pub fn tighten_private_file(path: &Path) -> io::Result<()> {
    match File::open(path) {
        Ok(f) => tighten_file(&f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sixteen random bytes in hex: a run's id in its events.
pub fn run_id() -> String {
    random_suffix() + &random_suffix()
}

/// This host's node name, as uname(2) gives it ("" if it cannot say).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for buf.len() bytes; gethostname writes at most
    // that many and we stop at the first NUL (or the end).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Eight random bytes in hex, for names nobody can guess ahead of us.
fn random_suffix() -> String {
    let mut buf = [0u8; 8];
    // SAFETY: buf is valid for buf.len() bytes.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        // No entropy (very early boot): the time and pid still differ
        // between runs, and O_EXCL refuses anything already there.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        buf = ((t as u64) ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a file of ours, 0600, so that a kill at any moment leaves the
/// old content or the new, never a mix or nothing: the data goes to a new
/// file beside it (created with `O_EXCL` under a name nobody can guess,
/// so no one can have put a link there), is synced, and is renamed over
/// the target; then the directory is synced.
pub fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic(path, data, PRIVATE_FILE_MODE)
}

/// [`write_private`] with the content streamed by `fill` (buffered), so a
/// large record is never held whole in memory beside what it is made of.
pub fn write_private_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    write_atomic_with(path, PRIVATE_FILE_MODE, fill)
}

/// Writes a file of ours as [`write_private`] does, with `mode` (0644 for
/// a file another program reads: node_exporter's textfile collector runs
/// as its own user).
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    write_atomic_with(path, mode, |w| w.write_all(data))
}

/// [`write_atomic`] with the content streamed by `fill`.
fn write_atomic_with(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp, f) = loop {
        let tmp = dir.join(format!(".{name}.convergent-{}", random_suffix()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        let mut w = io::BufWriter::new(f);
        fill(&mut w)?;
        let f = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(&dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A file of ours opened for appending, 0600, each append synced.
#[derive(Debug)]
pub struct PrivateAppend(File);

impl PrivateAppend {
    /// Appends `data` and waits until it is on disk.
    pub fn append_synced(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.write_all(data)?;
        self.0.sync_data()
    }
}

/// Opens a file of ours for appending, creating it 0600 (and synced, so
/// that it survives a crash right after); a file already there has
/// nothing new to sync.
pub fn open_append_private(path: &Path) -> io::Result<PrivateAppend> {
    let existing = OpenOptions::new().append(true).open(path);
    let f = match existing {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .mode(PRIVATE_FILE_MODE)
                .open(path)?;
            f.sync_all()?;
            f
        }
        Err(e) => return Err(e),
    };
    tighten_file(&f)?;
    Ok(PrivateAppend(f))
}

/// Syncs a directory, so that names created or renamed in it survive a
/// crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Removes one file of ours (a key the administrator asked to forget).
pub fn remove_file(path: &Path) -> io::Result<()> {
    fs::remove_file(path)
}

/// Removes a directory of ours and everything in it.
pub fn remove_private_tree(path: &Path) -> io::Result<()> {
    fs::remove_dir_all(path)
}

// ---------------------------------------------------------------- the run lock

/// A lock file of ours (the one-agent-per-work-directory lock): an
/// exclusive `flock`, which the kernel drops when the holder exits or is
/// killed, and the holder's pid as content.
#[derive(Debug)]
pub struct LockFile(File);

/// Opens (creating it 0600) a lock file without taking the lock.
pub fn open_lock_file(path: &Path) -> io::Result<LockFile> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    tighten_file(&f)?;
    Ok(LockFile(f))
}

impl LockFile {
    /// Takes the lock if it is free: `Ok(false)` when someone holds it.
    pub fn try_lock(&self) -> io::Result<bool> {
        match self.0.try_lock() {
            Ok(()) => Ok(true),
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    /// What the holder wrote (its pid), best effort.
    pub fn holder(&mut self) -> String {
        let mut text = String::new();
        let _ = self.0.rewind();
        let _ = self.0.read_to_string(&mut text);
        text
    }

    /// Replaces the content with `text` (our pid), best effort.
    pub fn set_holder(&mut self, text: &str) {
        let _ = self.0.set_len(0);
        let _ = self.0.rewind();
        let _ = self.0.write_all(text.as_bytes());
        let _ = self.0.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn private_dirs_are_made_and_tightened_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("a/wd/state");
        create_private_dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&tmp.path().join("a/wd")), 0o700);
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
    }

    #[test]
    fn private_writes_are_0600_and_leave_nothing_beside() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("report.jsonl");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&f, b"new").unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "new");
        assert_eq!(mode(&f), 0o600);
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn appends_and_ensured_files_are_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("entries");
        let mut f = open_append_private(&a).unwrap();
        f.append_synced(b"x\n").unwrap();
        f.append_synced(b"y\n").unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "x\ny\n");
        assert_eq!(mode(&a), 0o600);
        let db = tmp.path().join("db");
        fs::write(&db, "keep").unwrap();
        fs::set_permissions(&db, fs::Permissions::from_mode(0o644)).unwrap();
        ensure_private_file(&db).unwrap();
        assert_eq!(mode(&db), 0o600);
        assert_eq!(fs::read_to_string(&db).unwrap(), "keep");
    }
}
