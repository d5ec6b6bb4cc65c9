//! One agent at a time per work directory: an exclusive `flock` on
//! WORKDIR/state/agent.lock. The kernel drops the lock when the holder
//! exits or is killed, so a crashed run never blocks the next one.

use crate::host::clock::now_secs;
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
        Self::acquire_expiring(workdir, wait, None)
    }

    /// Takes the lock as [`RunLock::acquire`] does; with `expire_after`, a
    /// holder that has run longer than that is stopped, with its process
    /// group, as cf-execd stops an agent past `agent_expireafter`: asked
    /// to terminate, then killed when it has not gone within `wait`.
    pub fn acquire_expiring(
        workdir: &Path,
        wait: Duration,
        expire_after: Option<Duration>,
    ) -> Result<RunLock, RunLockError> {
        let dir = super::StateStore::dir(workdir);
        let path = dir.join("agent.lock");
        let io_err = |source| RunLockError::Io {
            path: path.display().to_string(),
            source,
        };
        local::create_private_dir(&dir).map_err(io_err)?;
        let mut file = local::open_lock_file(&path).map_err(io_err)?;
        let start = Instant::now();
        let mut stopping: Option<(i32, Instant)> = None;
        while !file.try_lock().map_err(io_err)? {
            let holder = Holder::parse(&file.holder());
            if holder.pid.is_some_and(crate::host::procs::is_ancestor) {
                return Ok(RunLock { _file: None });
            }
            if let (Some(limit), Some(pid), Some(started)) =
                (expire_after, holder.pid, holder.started)
            {
                let age = now_secs().saturating_sub(started);
                match stopping {
                    None if age > limit.as_secs() as i64 => {
                        crate::error!(
                            "The agent run of pid {pid} has run {age} seconds, longer than \
                             agent_expireafter ({} minutes): stopping it and its process group",
                            limit.as_secs() / 60
                        );
                        let _ = crate::host::procs::signal_group(pid, libc::SIGTERM);
                        stopping = Some((pid, Instant::now()));
                    }
                    Some((p, since)) if p == pid && since.elapsed() >= wait => {
                        let _ = crate::host::procs::signal_group(pid, libc::SIGKILL);
                    }
                    _ => {}
                }
            }
            let waited = match stopping {
                Some((_, since)) => since.elapsed() >= wait * 2,
                None => start.elapsed() >= wait,
            };
            if waited {
                return Err(RunLockError::Busy {
                    pid: holder.pid.map(|p| p.to_string()).unwrap_or_default(),
                    workdir: workdir.display().to_string(),
                    waited: start.elapsed().as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Record who holds it and since when, for the message the next
        // agent prints and for agent_expireafter.
        file.set_holder(&format!("{} {}", std::process::id(), now_secs()));
        Ok(RunLock { _file: Some(file) })
    }
}

/// What the lock file says of its holder: `PID START` (seconds since the
/// epoch); an older agent wrote the pid alone.
struct Holder {
    pid: Option<i32>,
    started: Option<i64>,
}

impl Holder {
    fn parse(text: &str) -> Holder {
        let mut words = text.split_whitespace();
        Holder {
            pid: words.next().and_then(|w| w.parse().ok()),
            started: words.next().and_then(|w| w.parse().ok()),
        }
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
