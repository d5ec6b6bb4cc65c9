//! The one narrow layer that touches the system. Promise types never call
//! `std::fs` or spawn processes themselves; they go through a `Host`, which
//! can be rooted in a temporary directory so that tests (and users trying
//! a policy) act on a private tree while the policy names real paths.

pub mod exec;
pub mod fs;
pub mod packages;
pub mod procs;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

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
            journal: None,
        }
    }

    /// The same host, telling `journal` before each file-system change
    /// (`None`: telling nobody).
    pub fn with_journal(&self, journal: Option<Arc<dyn ChangeJournal>>) -> Host {
        Host {
            root: self.root.clone(),
            journal,
        }
    }

    /// Records the prior state of `policy_path` with the journal, if any.
    fn before_change(&self, policy_path: &Path) -> std::io::Result<()> {
        match &self.journal {
            Some(j) => j.before_change(&self.map(policy_path)),
            None => Ok(()),
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
