//! The immutable bit of a regular file (Linux's `FS_IMMUTABLE_FL`, what
//! `chattr +i` sets), for `body fsattrs { immutable => ... }` of files
//! promises (CFEngine 3.27). It is read and changed on the file's open
//! descriptor (`FS_IOC_GETFLAGS` / `FS_IOC_SETFLAGS`), the descriptor
//! opened from the safe walk's directory, never through a link.
//!
//! While a files promise with `immutable => "true"` acts on a file that was
//! immutable when the promise began, the host overrides the bit (see
//! [`Host::set_override_immutable`]): a change to an immutable file (its
//! content replaced, its mode, times or ACL changed, the file renamed or
//! removed) clears the bit just before and sets it again just after, on
//! what then stands at that name, as cf-agent 3.28 does. A removed file
//! stays removed, a renamed one is mutable at its new name.

use super::Host;
use super::safe::{Final, Located};
use rustix::fs::{FileType, IFlags, OFlags};
use rustix::io::Errno;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Why the immutable bit could not be read or changed, in cf-agent's words
/// (libntech's `FSAttrsErrorCodeToString`).
#[derive(Debug, thiserror::Error)]
pub enum FsAttrsError {
    #[error("File does not exist")]
    Missing,
    /// Not a regular file, or a file system without inode flags.
    #[error("Operation is not supported")]
    NotSupported,
    #[error("Unexpected failure")]
    Failure(#[source] io::Error),
}

impl FsAttrsError {
    /// Whether cf-agent takes it as a failure (an error line) rather than
    /// as something the platform or the file does not have.
    pub fn is_failure(&self) -> bool {
        matches!(self, FsAttrsError::Failure(_))
    }
}

fn from_errno(e: Errno) -> FsAttrsError {
    match e {
        // What a file system without inode flags answers.
        Errno::NOTTY => FsAttrsError::NotSupported,
        Errno::NOENT => FsAttrsError::Missing,
        e => FsAttrsError::Failure(super::safe::errno(e)),
    }
}

fn flags_of(fd: impl AsFd) -> Result<IFlags, FsAttrsError> {
    rustix::fs::ioctl_getflags(fd).map_err(from_errno)
}

/// Sets or clears the bit on an open file, keeping its other flags.
fn set_on_fd(fd: impl AsFd, on: bool) -> Result<(), FsAttrsError> {
    let fd = fd.as_fd();
    let flags = flags_of(fd)?;
    let want = if on {
        flags | IFlags::IMMUTABLE
    } else {
        flags - IFlags::IMMUTABLE
    };
    if want == flags {
        return Ok(());
    }
    crate::trace!(
        "{} immutable bit in inode flags",
        if on { "Setting" } else { "Clearing" }
    );
    rustix::fs::ioctl_setflags(fd, want).map_err(from_errno)
}

/// What clearing the bit for one change did: whether the bit is to be set
/// again after it.
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub(super) struct Unlocked {
    /// The file was immutable and its bit was cleared.
    pub(super) cleared: bool,
    /// The bit could be read (cf-agent sets it again on a rename's
    /// destination only when its source's could be read).
    pub(super) readable: bool,
}

/// Opens the regular file of a located entry to read or change its flags;
/// anything else (a directory, a link, a FIFO that could block) is not
/// supported, as in cf-agent.
fn open_regular(l: &Located) -> Result<std::os::fd::OwnedFd, FsAttrsError> {
    match l.lstat() {
        Ok(None) => return Err(FsAttrsError::Missing),
        Ok(Some(st)) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => {
            return Err(FsAttrsError::NotSupported);
        }
        Ok(Some(_)) => {}
        Err(e) => return Err(FsAttrsError::Failure(e)),
    }
    l.open(OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => FsAttrsError::Missing,
            _ => FsAttrsError::Failure(e),
        })
}

impl Host {
    fn locate_for_attrs(&self, p: &Path) -> Result<Located, FsAttrsError> {
        self.locate(p, Final::Keep).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => FsAttrsError::Missing,
            _ => FsAttrsError::Failure(e),
        })
    }

    /// Whether the regular file at `p` (never followed through a link) is
    /// immutable.
    pub fn immutable(&self, p: &Path) -> Result<bool, FsAttrsError> {
        let l = self.locate_for_attrs(p)?;
        let fd = open_regular(&l)?;
        Ok(flags_of(&fd)?.contains(IFlags::IMMUTABLE))
    }

    /// Sets (`on`) or clears the immutable bit of the regular file at `p`.
    pub fn set_immutable(&self, p: &Path, on: bool) -> Result<(), FsAttrsError> {
        self.before_change(p).map_err(FsAttrsError::Failure)?;
        let l = self.locate_for_attrs(p)?;
        let fd = open_regular(&l)?;
        set_on_fd(&fd, on)
    }

    /// Whether changes override the immutable bit (see the module's
    /// documentation): on for the files promise that asks for it, off
    /// otherwise.
    pub fn set_override_immutable(&self, on: bool) {
        self.override_immutable.store(on, Ordering::Relaxed);
    }

    pub fn overrides_immutable(&self) -> bool {
        self.override_immutable.load(Ordering::Relaxed)
    }

    /// Runs `f`, a change to `p` made outside the host (a transformer's
    /// command), with `p`'s immutable bit cleared under an override and
    /// set again after, if `p` is still there.
    pub fn overriding_immutable<R>(&self, p: &Path, f: impl FnOnce(&Host) -> R) -> R {
        if !self.overrides_immutable() {
            return f(self);
        }
        let Ok(l) = self.locate(p, Final::Keep) else {
            return f(self);
        };
        let u = self.unlock(&l, p);
        let r = f(self);
        self.relock(&l, p, u);
        r
    }

    /// Before a change to the entry `l` (shown as `p`), under an override:
    /// clears its immutable bit if set (cf-agent's
    /// `TemporarilyClearImmutableBit`, and its log lines). Without an
    /// override, nothing.
    pub(super) fn unlock(&self, l: &Located, p: &Path) -> Unlocked {
        if !self.overrides_immutable() {
            return Unlocked::default();
        }
        let shown = p.display();
        let was = open_regular(l).and_then(|fd| Ok((flags_of(&fd)?, fd)));
        match was {
            Ok((flags, fd)) if flags.contains(IFlags::IMMUTABLE) => match set_on_fd(&fd, false) {
                Ok(()) => {
                    crate::debug!("Temporarily cleared immutable bit for file '{shown}'");
                    Unlocked {
                        cleared: true,
                        readable: true,
                    }
                }
                Err(e) => {
                    if e.is_failure() {
                        crate::error!(
                            "Failed to temporarily clear immutable bit for file '{shown}': {e}"
                        );
                    } else {
                        crate::debug!(
                            "Could not temporarily clear immutable bit for file '{shown}': {e}"
                        );
                    }
                    Unlocked::default()
                }
            },
            Ok(_) => {
                crate::trace!("The immutable bit is not set on file '{shown}'");
                Unlocked {
                    cleared: false,
                    readable: true,
                }
            }
            Err(e) => {
                if e.is_failure() {
                    crate::error!("Failed to get immutable bit from file '{shown}': {e}");
                } else {
                    crate::debug!("Failed to get immutable bit from file '{shown}': {e}");
                }
                Unlocked::default()
            }
        }
    }

    /// After the change: sets the bit [`Host::unlock`] cleared again, on
    /// the file now at `l` (cf-agent's `ResetTemporarilyClearedImmutableBit`).
    pub(super) fn relock(&self, l: &Located, p: &Path, u: Unlocked) {
        if !u.cleared {
            return;
        }
        let done = open_regular(l).and_then(|fd| set_on_fd(&fd, true));
        relocked(p, done);
    }

    /// [`Host::relock`] on the open descriptor of the file that replaced
    /// the one unlocked.
    pub(super) fn relock_fd(&self, fd: impl AsFd, p: &Path, u: Unlocked) {
        if u.cleared {
            relocked(p, set_on_fd(fd, true));
        }
    }
}

fn relocked(p: &Path, done: Result<(), FsAttrsError>) {
    let shown = p.display();
    match done {
        Ok(()) => {
            crate::debug!("Reset immutable bit after temporarily clearing it from file '{shown}'")
        }
        Err(e) if e.is_failure() => crate::error!(
            "Failed to reset immutable bit after temporarily clearing it from file '{shown}': {e}"
        ),
        Err(e) => crate::debug!(
            "Failed to reset immutable bit after temporarily clearing it from file '{shown}': {e}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_non_regular_files_say_so() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::real();
        let missing = tmp.path().join("none");
        assert!(matches!(
            host.immutable(&missing),
            Err(FsAttrsError::Missing)
        ));
        assert!(matches!(
            host.immutable(tmp.path()),
            Err(FsAttrsError::NotSupported)
        ));
        let f = tmp.path().join("f");
        std::fs::write(&f, "x").unwrap();
        // A regular file reads (false), or its file system has no flags.
        match host.immutable(&f) {
            Ok(on) => assert!(!on),
            Err(e) => assert!(matches!(e, FsAttrsError::NotSupported), "{e:?}"),
        }
    }

    #[test]
    fn without_an_override_nothing_is_unlocked() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("f");
        std::fs::write(&f, "x").unwrap();
        let host = Host::real();
        let l = host.locate(&f, Final::Keep).unwrap();
        let u = host.unlock(&l, &f);
        assert!(!u.cleared && !u.readable);
    }
}
