//! Pipes to child processes: writing without dying of SIGPIPE, waiting with
//! a deadline. Shared by one-shot commands (`exec`) and long-lived helpers
//! (`coprocess`).

use std::time::Instant;

/// Writes to a pipe whose reader may be gone without being killed by
/// SIGPIPE (the agent keeps its default action, to die quietly when its
/// own output is closed): the signal is blocked for this thread during the
/// write, and one it raised is taken off before it is unblocked. The
/// writer sees a broken pipe error (or a short write) instead.
pub(crate) fn write_without_sigpipe(fd: i32, data: &[u8]) -> std::io::Result<usize> {
    // SAFETY: the signal set is initialised by sigemptyset before use; the
    // write is given a valid buffer and its length; the mask is restored.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old);
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = std::io::Error::last_os_error();
        // Linux raises SIGPIPE also for a write that got part of its data
        // through before the reader went, so a pending one is taken off
        // whatever the write returned.
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut pending: libc::sigset_t = std::mem::zeroed();
        if libc::sigpending(&mut pending) == 0 && libc::sigismember(&pending, libc::SIGPIPE) == 1 {
            libc::sigtimedwait(&pipe, std::ptr::null_mut(), &zero);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if n < 0 { Err(err) } else { Ok(n as usize) }
    }
}

/// A descriptor that turns readable when process `pid` (a child of ours,
/// not yet reaped) exits: Linux's pidfd, close-on-exec. `None` where the
/// kernel has none (before 5.3); the caller then polls.
pub(crate) fn pidfd_open(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a plain system call taking two integers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Waits until `fd` is ready for `events` or `deadline` passes; false on
/// timeout. Errors and hang-ups count as ready: the read or write that
/// follows reports them.
pub(crate) fn wait_ready(fd: i32, events: libc::c_short, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n > 0 {
            return true;
        }
        if n == 0 {
            return false;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return true;
        }
    }
}
