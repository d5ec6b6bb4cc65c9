//! Long-lived helper processes spoken to through their standard input and
//! output, a line at a time (custom promise modules): started once, sent
//! requests, read with a time limit so that a helper that hangs cannot hang
//! the run, and stopped with their whole process group.

use super::exec::{CommandSpec, command_for};
use super::pipes::{wait_ready, write_without_sigpipe};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

/// One line read from a coprocess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadLine {
    /// A line without its newline; `newline` says whether it ended with
    /// one (the last output of a process may not).
    Line { text: String, newline: bool },
    /// The process closed its output (it exited, most likely).
    Eof,
    /// Nothing came within the time limit.
    TimedOut,
}

/// A running helper process with pipes to its standard input and output;
/// its standard error is the agent's.
#[derive(Debug)]
pub struct Coprocess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    /// Bytes read but not yet returned as lines.
    pending: Vec<u8>,
    eof: bool,
}

impl super::Host {
    /// Starts a helper process. Like commands, it runs on the real system
    /// even in a rooted host, in a session of its own (so that it can be
    /// killed with everything it started), with the spec's umask.
    pub fn start_coprocess(&self, spec: &CommandSpec) -> std::io::Result<Coprocess> {
        let mut cmd = command_for(spec)?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // Its standard error is ours: what we printed goes first.
        super::out::flush();
        let mut child = cmd.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the process has no pipes"));
        };
        // Writes must not block forever on a helper that stopped reading.
        set_nonblocking(stdin.as_raw_fd())?;
        Ok(Coprocess {
            child,
            stdin: Some(stdin),
            stdout,
            pending: Vec::new(),
            eof: false,
        })
    }

    /// Whether the file exists (following links), as access(2) says.
    pub fn path_exists(&self, path: &str) -> bool {
        access(path, libc::F_OK)
    }

    /// Whether this process may execute the file, as access(2) says.
    pub fn is_executable(&self, path: &str) -> bool {
        access(path, libc::X_OK)
    }
}

fn access(path: &str, mode: libc::c_int) -> bool {
    let Ok(c) = std::ffi::CString::new(path) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

fn set_nonblocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Coprocess {
    /// The process id (also its process group's).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Writes all of `data` to the process's input, waiting at most
    /// `timeout` for it to make room. A process that exited gives a broken
    /// pipe error.
    pub fn send(&mut self, data: &[u8], timeout: Duration) -> std::io::Result<()> {
        let deadline = Instant::now() + timeout;
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        let mut rest = data;
        while !rest.is_empty() {
            match write_without_sigpipe(stdin.as_raw_fd(), rest) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if !wait_ready(stdin.as_raw_fd(), libc::POLLOUT, deadline) {
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads the next line of the process's output, waiting at most
    /// `timeout` for more of it to come.
    pub fn read_line(&mut self, timeout: Duration) -> std::io::Result<ReadLine> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
                let rest = self.pending.split_off(pos + 1);
                let mut line = std::mem::replace(&mut self.pending, rest);
                line.pop();
                return Ok(ReadLine::Line {
                    text: String::from_utf8_lossy(&line).into_owned(),
                    newline: true,
                });
            }
            if self.eof {
                if self.pending.is_empty() {
                    return Ok(ReadLine::Eof);
                }
                let line = std::mem::take(&mut self.pending);
                return Ok(ReadLine::Line {
                    text: String::from_utf8_lossy(&line).into_owned(),
                    newline: false,
                });
            }
            if !wait_ready(self.stdout.as_raw_fd(), libc::POLLIN, deadline) {
                return Ok(ReadLine::TimedOut);
            }
            let mut buf = [0u8; 8192];
            match self.stdout.read(&mut buf) {
                Ok(0) => self.eof = true,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Closes the process's input and waits up to `grace` for it to exit,
    /// then kills its process group. Returns how it ended, when it did by
    /// itself.
    pub fn finish(mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => {
                    self.kill();
                    return None;
                }
            }
        }
    }

    /// Kills the process and everything it started (its process group),
    /// and reaps it.
    pub fn kill(&mut self) {
        self.stdin = None;
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id() as i32;
            // SAFETY: signalling the process group our child leads.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = self.child.wait();
        }
    }
}

impl Drop for Coprocess {
    /// A helper is never left running when its handle goes: whatever
    /// path the run took, the process group is killed.
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Host;

    fn shell(script: &str) -> Coprocess {
        Host::real()
            .start_coprocess(&CommandSpec {
                argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
                ..CommandSpec::default()
            })
            .expect("start")
    }

    #[test]
    fn lines_both_ways() {
        let mut p = shell("while read -r l; do echo \"got $l\"; done");
        let t = Duration::from_secs(5);
        p.send(b"a\nb\n", t).unwrap();
        for want in ["got a", "got b"] {
            assert_eq!(
                p.read_line(t).unwrap(),
                ReadLine::Line {
                    text: want.into(),
                    newline: true
                }
            );
        }
        assert!(p.finish(t).is_some_and(|s| s.success()));
    }

    #[test]
    fn a_last_line_without_newline_then_eof() {
        let mut p = shell("printf 'x\\ny'");
        let t = Duration::from_secs(5);
        assert!(matches!(
            p.read_line(t).unwrap(),
            ReadLine::Line { newline: true, .. }
        ));
        assert_eq!(
            p.read_line(t).unwrap(),
            ReadLine::Line {
                text: "y".into(),
                newline: false
            }
        );
        assert_eq!(p.read_line(t).unwrap(), ReadLine::Eof);
    }

    #[test]
    fn a_silent_process_times_out_and_is_killed_with_its_children() {
        let mut p = shell("sleep 30 & sleep 30; echo late");
        let start = Instant::now();
        assert_eq!(
            p.read_line(Duration::from_millis(200)).unwrap(),
            ReadLine::TimedOut
        );
        let pgid = p.id() as i32;
        p.kill();
        assert!(start.elapsed() < Duration::from_secs(5));
        // An orphaned child may take a moment to be reaped once killed.
        let gone = (0..200).any(|_| {
            // SAFETY: signal 0 only asks whether the group still exists.
            let alive = unsafe { libc::kill(-pgid, 0) } == 0;
            std::thread::sleep(Duration::from_millis(10));
            !alive
        });
        assert!(gone, "the process group survived");
    }

    #[test]
    fn writing_to_an_exited_process_is_an_error_not_a_signal() {
        let mut p = shell("exit 0");
        let t = Duration::from_secs(5);
        assert_eq!(p.read_line(t).unwrap(), ReadLine::Eof);
        // The pipe may take a moment to report the reader gone.
        let mut failed = false;
        for _ in 0..100 {
            if p.send(b"hello\n", t).is_err() {
                failed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(failed);
    }
}
