//! One agent at a time per work directory: an exclusive `flock` on
//! WORKDIR/state/agent.lock. The kernel drops the lock when the holder
//! exits or is killed, so a crashed run never blocks the next one.

use crate::host::local::{self, LockFile};
use std::path::Path;
use std::time::{Duration, Instant};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RunLockError {
    #[error(
        "another agent (pid {pid}) is running on work directory '{workdir}'; gave up after waiting {waited}s"
    )]
    Busy {
        pid: String,
        workdir: String,
        waited: u64,
    },
    #[error("cannot open the run lock '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Held for the whole run; released on drop (or by the kernel on exit).
/// An agent started by the agent that holds it (a `commands` promise
/// running `$(sys.cf_agent) -f other.cf` on the same work directory, as
/// CFEngine's own tests and real policies do) runs under its parent's
/// lock instead of waiting for a parent that waits for it: cf-agent has no
/// whole-run lock at all, and a child must never be blocked by its parent.
#[derive(Debug)]
pub struct RunLock {
    _file: Option<LockFile>,
}

impl RunLock {
    /// Takes the lock, waiting up to `wait` for another agent to finish.
    pub fn acquire(workdir: &Path, wait: Duration) -> Result<RunLock, RunLockError> {
        let dir = super::StateStore::dir(workdir);
        let path = dir.join("agent.lock");
        let io_err = |source| RunLockError::Io {
            path: path.display().to_string(),
            source,
        };
        local::create_private_dir(&dir).map_err(io_err)?;
        let mut file = local::open_lock_file(&path).map_err(io_err)?;
        let start = Instant::now();
        while !file.try_lock().map_err(io_err)? {
            let holder = file.holder();
            if holder
                .trim()
                .parse::<i32>()
                .is_ok_and(crate::host::procs::is_ancestor)
            {
                return Ok(RunLock { _file: None });
            }
            if start.elapsed() >= wait {
                return Err(RunLockError::Busy {
                    pid: file.holder().trim().to_string(),
                    workdir: workdir.display().to_string(),
                    waited: start.elapsed().as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Record who holds it, for the message the next agent prints.
        file.set_holder(&std::process::id().to_string());
        Ok(RunLock { _file: Some(file) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_in_same_process_times_out() {
        let tmp = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(tmp.path(), Duration::ZERO).unwrap();
        let second = RunLock::acquire(tmp.path(), Duration::from_millis(200));
        assert!(
            matches!(second, Err(RunLockError::Busy { .. })),
            "{second:?}"
        );
        drop(first);
        assert!(RunLock::acquire(tmp.path(), Duration::ZERO).is_ok());
    }
}
