//! File-system operations: metadata, reads, and writes that are atomic
//! (write beside, fsync, rename) and keep mode, owner and extended
//! attributes. Every method that changes a path first tells the host's
//! change journal, if it has one (see [`super::ChangeJournal`]).

use super::Host;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
    fn from_std(m: &fs::Metadata) -> Meta {
        let ft = m.file_type();
        use std::os::unix::fs::FileTypeExt;
        let kind = if ft.is_symlink() {
            FileKind::Symlink
        } else if ft.is_dir() {
            FileKind::Dir
        } else if ft.is_file() {
            FileKind::File
        } else if ft.is_fifo() {
            FileKind::Fifo
        } else {
            FileKind::Other
        };
        Meta {
            kind,
            mode: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            mtime: m.mtime(),
            ctime: m.ctime(),
            atime: m.atime(),
            ino: m.ino(),
            dev: m.dev(),
            nlink: m.nlink(),
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

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether we may change ownership (only root can give files away).
pub fn can_chown() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Host {
    /// `lstat`: the link itself for symlinks. `None` when nothing is there.
    pub fn lstat(&self, p: &Path) -> io::Result<Option<Meta>> {
        let m = not_found_is_none(fs::symlink_metadata(self.map(p)))?;
        Ok(self.with_simulated(p, m.as_ref().map(Meta::from_std)))
    }

    /// `stat`: follows symlinks. `None` when nothing (or a dangling link) is there.
    pub fn stat(&self, p: &Path) -> io::Result<Option<Meta>> {
        let m = not_found_is_none(fs::metadata(self.map(p)))?;
        Ok(self.with_simulated(p, m.as_ref().map(Meta::from_std)))
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
                // SAFETY: geteuid and getegid have no preconditions.
                uid: unsafe { libc::geteuid() },
                gid: unsafe { libc::getegid() },
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

    pub fn read(&self, p: &Path) -> io::Result<Vec<u8>> {
        if let Some((data, _)) = self.simulated(p) {
            return Ok(data);
        }
        fs::read(self.map(p))
    }

    pub fn read_link(&self, p: &Path) -> io::Result<PathBuf> {
        fs::read_link(self.map(p))
    }

    /// Entries of a directory (names only), sorted.
    pub fn read_dir(&self, p: &Path) -> io::Result<Vec<String>> {
        let mut v: Vec<String> = fs::read_dir(self.map(p))?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        Ok(v)
    }

    /// Creates an empty file that must not exist yet, with exactly `mode`.
    pub fn create_empty(&self, p: &Path, mode: u32) -> io::Result<()> {
        self.before_change(p)?;
        let real = self.map(p);
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&real)?;
        // The umask may have cleared bits; set the mode we promised.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()
    }

    /// Creates a FIFO with `mode`.
    pub fn create_fifo(&self, p: &Path, mode: u32) -> io::Result<()> {
        self.before_change(p)?;
        let c = cstr(&self.map(p))?;
        // SAFETY: c is a valid NUL-terminated path.
        check(unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) })?;
        self.chmod(p, mode)
    }

    /// Creates a directory and its missing parents, each with `mode`.
    /// Returns the directories it created, outermost first.
    pub fn mkdir_all(&self, p: &Path, mode: u32) -> io::Result<Vec<PathBuf>> {
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
            match fs::create_dir(self.map(d)) {
                Ok(()) => fs::set_permissions(self.map(d), fs::Permissions::from_mode(mode))?,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(missing)
    }

    pub fn chmod(&self, p: &Path, mode: u32) -> io::Result<()> {
        self.before_change(p)?;
        fs::set_permissions(self.map(p), fs::Permissions::from_mode(mode))
    }

    /// Changes owner and group without following a final symlink.
    pub fn lchown(&self, p: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        self.before_change(p)?;
        std::os::unix::fs::lchown(self.map(p), uid, gid)
    }

    pub fn remove_file(&self, p: &Path) -> io::Result<()> {
        self.before_change(p)?;
        fs::remove_file(self.map(p))
    }

    pub fn remove_dir(&self, p: &Path) -> io::Result<()> {
        self.before_change(p)?;
        fs::remove_dir(self.map(p))
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.before_change(from)?;
        self.before_change(to)?;
        fs::rename(self.map(from), self.map(to))
    }

    /// Creates a symlink at `link` whose target is `target` as written
    /// (not mapped: a link's text is what the policy says).
    pub fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        self.before_change(link)?;
        std::os::unix::fs::symlink(target, self.map(link))
    }

    pub fn hard_link(&self, existing: &Path, link: &Path) -> io::Result<()> {
        self.before_change(link)?;
        fs::hard_link(self.map(existing), self.map(link))
    }

    /// Sets access and modification times to now.
    pub fn touch(&self, p: &Path) -> io::Result<()> {
        let c = cstr(&self.map(p))?;
        // SAFETY: a null times pointer means "now"; c is a valid path.
        check(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), std::ptr::null(), 0) })
    }

    /// Replaces a file's content atomically: a new file beside the target
    /// gets the data, the mode (and owner, group and extended attributes of
    /// the file it replaces, when there is one), is synced, and is renamed
    /// over the target; then the directory is synced. A crash at any moment
    /// leaves the old file or the new one, never a mix.
    pub fn write_atomic(&self, p: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        self.before_change(p)?;
        let real = self.map(p);
        let dir = real
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let old = fs::metadata(&real).ok();
        let tmp = dir.join(format!(".{name}.convergent-{}", std::process::id()));
        let result = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(data)?;
            if let Some(m) = &old {
                if can_chown() {
                    std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()))?;
                }
                copy_xattrs(&real, &tmp);
            }
            f.set_permissions(fs::Permissions::from_mode(mode))?;
            f.sync_all()?;
            drop(f);
            fs::rename(&tmp, &real)?;
            File::open(&dir)?.sync_all()
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Copies a file's bytes to a new name atomically (for backups).
    pub fn copy_atomic(&self, from: &Path, to: &Path, mode: u32) -> io::Result<()> {
        let data = self.read(from)?;
        self.write_atomic(to, &data, mode)
    }
}

/// Extended attributes of `from` onto `to`, best effort (file systems
/// without xattr support simply have none).
fn copy_xattrs(from: &Path, to: &Path) {
    let (Ok(f), Ok(t)) = (cstr(from), cstr(to)) else {
        return;
    };
    // SAFETY: valid paths; a null buffer asks for the needed size.
    let size = unsafe { libc::llistxattr(f.as_ptr(), std::ptr::null_mut(), 0) };
    if size <= 0 {
        return;
    }
    let mut names = vec![0u8; size as usize];
    // SAFETY: the buffer has `size` bytes.
    let size = unsafe { libc::llistxattr(f.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
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
        // SAFETY: valid path and attribute name; null buffer asks the size.
        let len = unsafe { libc::lgetxattr(f.as_ptr(), cname.as_ptr(), std::ptr::null_mut(), 0) };
        if len < 0 {
            continue;
        }
        let mut value = vec![0u8; len as usize];
        // SAFETY: the buffer has `len` bytes.
        let len = unsafe {
            libc::lgetxattr(
                f.as_ptr(),
                cname.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if len < 0 {
            continue;
        }
        // SAFETY: valid path, name and value buffer of `len` bytes.
        unsafe {
            libc::lsetxattr(
                t.as_ptr(),
                cname.as_ptr(),
                value.as_ptr().cast(),
                len as usize,
                0,
            );
        }
    }
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
    fn mkdir_all_reports_what_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        let h = Host::rooted(tmp.path());
        let made = h.mkdir_all(Path::new("/a/b/c"), 0o700).unwrap();
        assert_eq!(made.len(), 3);
        assert_eq!(h.stat(Path::new("/a/b")).unwrap().unwrap().mode, 0o700);
        assert!(h.mkdir_all(Path::new("/a/b/c"), 0o700).unwrap().is_empty());
        assert!(h.lstat(Path::new("/nope")).unwrap().is_none());
    }
}
