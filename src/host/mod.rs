//! The one narrow layer that touches the system. Promise types never call
//! `std::fs` or spawn processes themselves; they go through a `Host`, which
//! can be rooted in a temporary directory so that tests (and users trying
//! a policy) act on a private tree while the policy names real paths.

pub mod acl;
pub mod changes_chroot;
pub mod clock;
pub mod coprocess;
pub mod disk;
pub mod exec;
pub mod fs;
pub mod fsattrs;
pub mod local;
pub mod netif;
pub mod out;
pub mod packages;
mod pipes;
pub mod plain;
pub mod procs;
pub mod safe;
pub mod syslog;

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Told before every change to the file system that goes through a
/// [`Host`], with the path on this machine, so that the change can be
/// undone (the undo journal of transactional bundles). An error refuses
/// the change.
pub trait ChangeJournal: std::fmt::Debug + Send + Sync {
    fn before_change(&self, real_path: &Path) -> std::io::Result<()>;
}

/// Access to the system, optionally below a root directory.
#[derive(Debug, Clone, Default)]
pub struct Host {
    root: Option<PathBuf>,
    journal: Option<Arc<dyn ChangeJournal>>,
    /// Under a dry run: what the run would have written, so that later
    /// promises see it (see [`Host::simulate_file`]).
    overlay: Option<Arc<Mutex<Overlay>>>,
    /// Directories (device, inode) already rid of the temporary files that
    /// killed runs left, so that each is read once per run.
    cleaned_dirs: Arc<Mutex<HashSet<(u64, u64)>>>,
    /// Directories the safe walk reached this run.
    dirs: Arc<Mutex<safe::DirCache>>,
    /// The directory cf-agent's process would be in, as a policy path: a
    /// files promise without a depth search enters its file's directory
    /// and stays there (see [`Host::enter_dir`]). `None`: ours.
    cwd: Arc<Mutex<Option<PathBuf>>>,
    /// Directories a rename landed a file in this run, not yet synced
    /// (see [`Host::sync_pending_dirs`]).
    pending_dirs: Arc<fs::PendingDirs>,
    /// Under `--simulate`: the scratch copy files are changed in (the
    /// host is rooted there, and mirrors what it reaches first).
    chroot: Option<Arc<changes_chroot::ChangesChroot>>,
    /// Whether changes clear an immutable bit before and set it again
    /// after (see [`fsattrs`]).
    override_immutable: Arc<std::sync::atomic::AtomicBool>,
}

/// The files a dry run would have created or rewritten, by policy path:
/// content and mode. Nothing here ever reaches the disk.
#[derive(Debug, Default)]
pub struct Overlay {
    files: HashMap<PathBuf, (Vec<u8>, u32)>,
}

impl Host {
    /// The real system.
    pub fn real() -> Host {
        Host::default()
    }

    /// Every absolute path the policy names is taken below `root`.
    pub fn rooted(root: impl Into<PathBuf>) -> Host {
        Host {
            root: Some(root.into()),
            ..Host::default()
        }
    }

    /// A host that changes files in `chroot`, a copy of the system made
    /// as the run reaches its paths (see [`changes_chroot`]).
    pub fn in_changes_chroot(chroot: Arc<changes_chroot::ChangesChroot>) -> Host {
        Host {
            root: Some(chroot.dir().to_path_buf()),
            chroot: Some(chroot),
            ..Host::default()
        }
    }

    /// Under `--simulate`, takes `policy_path` into the changes chroot
    /// with everything below it, as cf-agent does for each files promise
    /// before it acts; otherwise does nothing.
    pub fn mirror_promised(&self, policy_path: &Path) {
        if let Some(c) = &self.chroot {
            c.mirror_all(policy_path);
        }
    }

    /// The changes chroot this host works in, under `--simulate`.
    pub fn changes_chroot(&self) -> Option<&changes_chroot::ChangesChroot> {
        self.chroot.as_deref()
    }

    /// The same host for a dry run: it changes nothing on disk, but
    /// remembers what [`Host::simulate_file`] is told, and reads and stats
    /// see it, so a dry run's edits build on its earlier ones as a real
    /// run's do.
    pub fn with_dry_run_overlay(&self) -> Host {
        Host {
            overlay: Some(Arc::new(Mutex::new(Overlay::default()))),
            ..self.clone()
        }
    }

    /// Under a dry run, records that the run would now have `data` in the
    /// file at `policy_path` with `mode`; otherwise does nothing.
    pub fn simulate_file(&self, policy_path: &Path, data: &[u8], mode: u32) {
        if let Some(o) = &self.overlay
            && let Ok(mut o) = o.lock()
        {
            o.files
                .insert(policy_path.to_path_buf(), (data.to_vec(), mode));
        }
    }

    /// What a dry run would have in the file at `policy_path`.
    fn simulated(&self, policy_path: &Path) -> Option<(Vec<u8>, u32)> {
        let o = self.overlay.as_ref()?.lock().ok()?;
        o.files.get(policy_path).cloned()
    }

    /// The same host, telling `journal` before each file-system change
    /// (`None`: telling nobody).
    pub fn with_journal(&self, journal: Option<Arc<dyn ChangeJournal>>) -> Host {
        Host {
            journal,
            ..self.clone()
        }
    }

    /// Records the prior state of what a walk reached (the target of a
    /// link it followed, which `before_change` of the link's path does not
    /// cover) with the journal, if any.
    fn before_change_located(&self, l: &safe::Located) -> std::io::Result<()> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        use std::os::fd::AsRawFd;
        let dir = std::fs::read_link(format!("/proc/self/fd/{}", l.dir.as_raw_fd()))?;
        j.before_change(&dir.join(&l.name))
    }

    /// Records the prior state of `policy_path` with the journal, if any.
    fn before_change(&self, policy_path: &Path) -> std::io::Result<()> {
        match &self.journal {
            Some(j) => j.before_change(&self.map(policy_path)),
            None => Ok(()),
        }
    }

    /// Enters a directory as cf-agent's files promises do (`chdir` into
    /// the directory of the file, which stays the process's working
    /// directory after the promise): relative paths the policy's functions
    /// name, and commands run without a `chdir` of their own, start there.
    /// A directory that is not there is not entered (the chdir fails; the
    /// last one entered stays).
    pub fn enter_dir(&self, policy_dir: &Path) {
        if !policy_dir.is_absolute() {
            return;
        }
        let real = self.map(policy_dir);
        let known = self.dirs.lock().is_ok_and(|c| c.known_dir(&real));
        if !known && !local::is_dir(&real) {
            return;
        }
        if let Ok(mut cwd) = self.cwd.lock() {
            *cwd = Some(policy_dir.to_path_buf());
        }
    }

    /// The directory entered last (see [`Host::enter_dir`]), as a policy
    /// path.
    pub fn entered_dir(&self) -> Option<PathBuf> {
        self.cwd.lock().ok()?.clone()
    }

    /// A path the policy names, relative ones taken from the directory
    /// entered last (else from ours).
    pub fn absolute(&self, policy_path: &Path) -> PathBuf {
        match self.entered_dir() {
            Some(d) if policy_path.is_relative() => d.join(policy_path),
            _ => policy_path.to_path_buf(),
        }
    }

    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The path on this machine for a path the policy names.
    pub fn map(&self, policy_path: &Path) -> PathBuf {
        match &self.root {
            None => policy_path.to_path_buf(),
            Some(root) => {
                let mut out = root.clone();
                for c in policy_path.components() {
                    match c {
                        Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
                        Component::ParentDir => {
                            // Never climb above the root.
                            if out != *root {
                                out.pop();
                            }
                        }
                        Component::Normal(n) => out.push(n),
                    }
                }
                out
            }
        }
    }
}

/// The reason of an I/O error in the words of C's `strerror`, as
/// cf-agent prints it ("No such file or directory", without Rust's
/// " (os error 2)").
pub fn strerror(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => {
            let s = e.to_string();
            s.split(" (os error").next().unwrap_or(&s).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooted_paths_stay_inside() {
        let h = Host::rooted("/tmp/r");
        assert_eq!(
            h.map(Path::new("/etc/motd")),
            PathBuf::from("/tmp/r/etc/motd")
        );
        assert_eq!(h.map(Path::new("/../../etc")), PathBuf::from("/tmp/r/etc"));
        assert_eq!(Host::real().map(Path::new("/etc")), PathBuf::from("/etc"));
    }
}
