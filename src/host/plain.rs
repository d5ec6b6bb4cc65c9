//! What the policy's functions see of the files it names (`fileexists`,
//! `readfile`, `findfiles`, `lsdir`, `filestat`...): plain `stat`, `open`,
//! `opendir`, `glob` and `statvfs` calls, as cf-agent's functions make
//! them with the C library (no safe walk: they refuse no link), on the
//! path the [`Host`] maps the policy's path to. So a rooted host roots the
//! functions as it roots the promises.
//!
//! A relative path is taken from the directory a files promise entered
//! last, as cf-agent's process stays there (see [`Host::enter_dir`]).
//!
//! A dry run's simulated files are not seen here: cf-agent's functions
//! read the disk under `-n`, where nothing was written. A link below the
//! root whose target is absolute is followed on this machine, as the C
//! library follows it.

use super::Host;
use super::local;
use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use std::fs::Metadata;
pub use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

/// The plain view of a host's files (see the module's text).
#[derive(Debug, Clone, Copy)]
pub struct Plain<'a> {
    host: &'a Host,
}

/// The characters `glob` gives a meaning to, escaped in the root that is
/// put before a pattern.
const GLOB_SPECIAL: &[char] = &['*', '?', '[', ']', '\\'];

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

impl Host {
    /// The files as the policy's functions see them.
    pub fn plain(&self) -> Plain<'_> {
        Plain { host: self }
    }
}

impl Plain<'_> {
    /// The path on this machine.
    fn real(&self, p: impl AsRef<Path>) -> PathBuf {
        self.host.map(&self.host.absolute(p.as_ref()))
    }

    /// `stat`: follows symbolic links.
    pub fn metadata(&self, p: impl AsRef<Path>) -> io::Result<Metadata> {
        local::metadata(self.real(p))
    }

    /// `lstat`: a symbolic link itself.
    pub fn symlink_metadata(&self, p: impl AsRef<Path>) -> io::Result<Metadata> {
        local::symlink_metadata(self.real(p))
    }

    /// Whether something is there, following links (a dangling link is
    /// not).
    pub fn exists(&self, p: impl AsRef<Path>) -> bool {
        local::exists(self.real(p))
    }

    /// The text of a symbolic link.
    pub fn read_link(&self, p: impl AsRef<Path>) -> io::Result<PathBuf> {
        local::read_link(self.real(p))
    }

    /// The whole content of a regular file.
    pub fn read(&self, p: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        local::read(self.real(p))
    }

    /// At most `max` bytes (see [`local::read_upto`]).
    pub fn read_upto(&self, p: impl AsRef<Path>, max: Option<u64>) -> io::Result<Vec<u8>> {
        local::read_upto(self.real(p), max)
    }

    /// Opens a file for reading only (to tell a file that cannot be opened
    /// from one that cannot be read).
    pub fn open(&self, p: impl AsRef<Path>) -> io::Result<impl io::Read> {
        local::open(self.real(p))
    }

    /// Whether one byte (or the end) of the file can be read: opened and
    /// read on a thread of its own, given up after `timeout` (a FIFO with
    /// no writer, a hung network mount); with none, waits as long as it
    /// takes. A thread given up on is left to finish or block alone.
    pub fn readable_within(
        &self,
        p: impl AsRef<Path>,
        timeout: Option<std::time::Duration>,
    ) -> bool {
        let real = self.real(p);
        let probe = move || {
            use io::Read as _;
            let mut buf = [0u8; 1];
            local::open(&real)
                .and_then(|mut f| f.read(&mut buf))
                .is_ok()
        };
        let Some(t) = timeout else {
            return probe();
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("isreadable".into())
            .spawn(move || {
                let _ = tx.send(probe());
            });
        spawned.is_ok() && rx.recv_timeout(t).unwrap_or(false)
    }

    /// The entries of a directory in the order `readdir` gives them, `.`
    /// and `..` included, as cf-agent lists them.
    pub fn read_dir_raw(&self, p: impl AsRef<Path>) -> io::Result<Vec<String>> {
        let cpath = c_path(&self.real(p))?;
        // SAFETY: a valid C string; the handle is closed below.
        let dir = unsafe { libc::opendir(cpath.as_ptr()) };
        if dir.is_null() {
            return Err(io::Error::last_os_error());
        }
        let mut out = Vec::new();
        loop {
            // SAFETY: `dir` is an open directory stream used by this
            // thread only.
            let ent = unsafe { libc::readdir(dir) };
            if ent.is_null() {
                break;
            }
            // SAFETY: readdir returned a valid entry whose d_name is a C
            // string.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
            out.push(name.to_string_lossy().into_owned());
        }
        // SAFETY: `dir` came from opendir and is closed once.
        unsafe { libc::closedir(dir) };
        Ok(out)
    }

    /// The paths one glob matches, as the C library expands it (sorted,
    /// no hidden files unless the pattern names them), given as the
    /// policy names them: on a rooted host an absolute pattern is taken
    /// below the root, and the root is taken off what it finds; a relative
    /// one is taken from the directory a files promise entered last, and
    /// what it finds stays relative.
    pub fn glob(&self, pattern: &str) -> Vec<String> {
        let base = if pattern.starts_with('/') {
            self.host.root().map(Path::to_path_buf)
        } else {
            self.host.entered_dir().map(|d| self.host.map(&d))
        };
        let Some(base) = base else {
            return c_glob(pattern);
        };
        let mut prefix = base.to_string_lossy().trim_end_matches('/').to_string();
        if !pattern.starts_with('/') {
            prefix.push('/');
        }
        let escaped: String = prefix
            .chars()
            .flat_map(|c| {
                let esc = GLOB_SPECIAL.contains(&c).then_some('\\');
                esc.into_iter().chain(std::iter::once(c))
            })
            .collect();
        c_glob(&format!("{escaped}{pattern}"))
            .into_iter()
            .filter_map(|f| f.strip_prefix(prefix.as_str()).map(str::to_string))
            .collect()
    }

    /// Kilobytes available to unprivileged users on the file system
    /// holding the path (`statvfs`).
    pub fn free_kilobytes(&self, p: impl AsRef<Path>) -> io::Result<u64> {
        let cpath = c_path(&self.real(p))?;
        // SAFETY: statvfs is plain data, filled by the call.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid C string and struct pointer.
        if unsafe { libc::statvfs(cpath.as_ptr(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let kb = (st.f_bavail as u128 * st.f_frsize as u128) / 1024;
        Ok(kb.min(u64::MAX as u128) as u64)
    }
}

/// Expands one glob with the C library.
fn c_glob(pattern: &str) -> Vec<String> {
    let Ok(cpat) = CString::new(pattern) else {
        return Vec::new();
    };
    // SAFETY: glob_t is plain data; zeroed is its documented initial state.
    let mut g: libc::glob_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pattern is a valid C string and `g` a valid glob_t that
    // globfree releases below.
    let rc = unsafe { libc::glob(cpat.as_ptr(), 0, None, &mut g) };
    let mut out = Vec::new();
    if rc == 0 {
        for i in 0..g.gl_pathc {
            // SAFETY: glob filled gl_pathv with gl_pathc valid C strings.
            let s = unsafe { CStr::from_ptr(*g.gl_pathv.add(i)) };
            out.push(s.to_string_lossy().into_owned());
        }
    }
    // SAFETY: `g` was initialised by glob (or zeroed, which globfree
    // accepts).
    unsafe { libc::globfree(&mut g) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rooted_view_reads_below_its_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r[1]");
        local::create_private_dir(&root.join("etc")).unwrap();
        local::write_private(&root.join("etc/motd.x"), b"rooted").unwrap();
        let h = Host::rooted(&root);
        let v = h.plain();
        assert_eq!(v.read("/etc/motd.x").unwrap(), b"rooted");
        assert!(v.exists("/etc/motd.x"));
        assert!(!Host::real().plain().exists("/etc/motd.x"));
        assert_eq!(v.glob("/etc/*.x"), vec!["/etc/motd.x".to_string()]);
        let mut names = v.read_dir_raw("/etc").unwrap();
        names.sort();
        assert_eq!(names, [".", "..", "motd.x"]);
        assert!(v.free_kilobytes("/etc").is_ok());
        // Relative patterns start where the last files promise entered.
        h.enter_dir(Path::new("/etc"));
        assert_eq!(v.glob("*.x"), vec!["motd.x".to_string()]);
        assert!(v.exists("motd.x"));
    }
}
