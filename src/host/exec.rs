//! Running commands: without a shell unless asked, as another user or
//! group, with a umask, working directory, chroot and a timeout that kills
//! the whole process group.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to run one command.
#[derive(Debug, Clone, Default)]
pub struct CommandSpec {
    /// The program and its arguments (no shell).
    pub argv: Vec<String>,
    /// Run `argv` joined as one command line through `/bin/sh -c` instead.
    pub shell: bool,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub umask: Option<u32>,
    pub chdir: Option<String>,
    pub chroot: Option<String>,
    pub timeout: Option<Duration>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Data for the command's standard input (closed when empty).
    pub stdin: Vec<u8>,
    /// Which outputs are collected (the others go to /dev/null).
    pub output: OutputSelect,
}

/// Which of a command's outputs `run` collects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputSelect {
    /// Standard output and standard error, interleaved as written.
    #[default]
    Both,
    Stdout,
    Stderr,
    /// Standard output; standard error goes where the agent's own goes, as
    /// cf-agent lets a package module's diagnostics through.
    StdoutPassStderr,
    /// Nothing: both outputs go where the agent's own go, as cf-agent lets
    /// `returnszero`'s command write.
    Inherit,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandResult {
    /// The exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Standard output and standard error, interleaved as written.
    pub output: Vec<u8>,
    pub timed_out: bool,
}

impl CommandResult {
    pub fn output_text(&self) -> String {
        String::from_utf8_lossy(&self.output).into_owned()
    }
}

/// Splits a command line into words as cf-agent does without a shell
/// (its `ArgSplitCommand`): whitespace separates words, and a word that
/// starts with a double quote, a single quote or a backtick runs to the
/// next same quote, which is dropped. There are no escapes, and quotes
/// inside a word are kept (`a"b c"` is `a"b` and `c"`; `"a b"'c'` is two
/// words).
pub fn split_command_line(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else { break };
        let mut word = String::new();
        if c == '"' || c == '\'' || c == '`' {
            chars.next();
            for d in chars.by_ref() {
                if d == c {
                    break;
                }
                word.push(d);
            }
        } else {
            while let Some(&d) = chars.peek() {
                if d.is_whitespace() {
                    break;
                }
                word.push(d);
                chars.next();
            }
        }
        words.push(word);
    }
    words
}

/// Environment variables every command of the run gets (agent control's
/// `childlibpath`, which cf-agent sets in its own environment).
static RUN_ENV: std::sync::RwLock<Vec<(String, String)>> = std::sync::RwLock::new(Vec::new());

/// Gives `key=value` to every command started from now on (a variable set
/// again takes its new value).
pub fn set_run_env(key: &str, value: &str) {
    let mut env = RUN_ENV.write().unwrap_or_else(|e| e.into_inner());
    env.retain(|(k, _)| k != key);
    env.push((key.to_string(), value.to_string()));
}

/// The value [`set_run_env`] gave `key`, if any: what the agent's own
/// environment holds for it from then on (`getenv`).
pub fn run_env(key: &str) -> Option<String> {
    RUN_ENV
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

/// The process a spec describes, not yet started: its program (or the
/// shell), environment, working directory, user and group, and what runs
/// between fork and exec (a new session, so that a timeout can kill the
/// whole group; the umask; the chroot). Standard streams are the caller's
/// business.
pub(crate) fn command_for(spec: &CommandSpec) -> std::io::Result<Command> {
    // What the command does to the file system is not ours to know.
    super::safe::forget_checks();
    let mut cmd = if spec.shell {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(spec.argv.join(" "));
        c
    } else {
        let Some((prog, args)) = spec.argv.split_first() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "empty command",
            ));
        };
        let mut c = Command::new(prog);
        c.args(args);
        c
    };
    for (k, v) in RUN_ENV.read().unwrap_or_else(|e| e.into_inner()).iter() {
        cmd.env(k, v);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    // The working directory (inside a chroot, after entering it) is taken
    // before the user and group change, as cf-agent does: a directory only
    // root may reach still works for a command run as another user.
    let (uid, gid) = (spec.uid, spec.gid);
    let umask = spec.umask;
    let chroot = spec
        .chroot
        .clone()
        .map(|c| std::ffi::CString::new(c).unwrap_or_default());
    let dir = match (&spec.chroot, &spec.chdir) {
        (Some(_), d) => Some(d.clone().unwrap_or_else(|| "/".into())),
        (None, d) => d.clone(),
    }
    .map(|d| std::ffi::CString::new(d).unwrap_or_default());
    // SAFETY: only async-signal-safe calls (setsid, umask, chroot, chdir,
    // setgid, setgroups, setuid) run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            if let Some(m) = umask {
                libc::umask(m as libc::mode_t);
            }
            if let Some(root) = &chroot
                && libc::chroot(root.as_ptr()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(d) = &dir
                && libc::chdir(d.as_ptr()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(g) = gid
                && libc::setgid(g) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(u) = uid {
                // Drop root's supplementary groups (as Command::uid does);
                // refused when not root, which is then no loss.
                libc::setgroups(0, std::ptr::null());
                if libc::setuid(u) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(cmd)
}

/// What [`Host::access`] asks of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Execute,
    Read,
}

/// Why a program cannot be run, as cf-agent checks it before it runs a
/// command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotExecutable {
    Missing,
    /// Anyone could have changed it: cf-agent refuses it.
    WorldWritable,
    /// No execute bit for us (root needs the owner's).
    NoPermission,
}

impl NotExecutable {
    /// Says why not, in cf-agent's words (nothing for a missing permission,
    /// which the caller words).
    pub fn say(self, program: &str) {
        match self {
            NotExecutable::Missing => {
                crate::error!("Proposed executable file '{program}' doesn't exist")
            }
            NotExecutable::WorldWritable => {
                crate::error!(
                    "SECURITY ALERT: promised executable '{program}' is world writable! "
                );
                crate::error!(
                    "SECURITY ALERT: CFEngine will not execute this - requires human inspection"
                );
            }
            NotExecutable::NoPermission => {}
        }
    }
}

/// Checks that a program exists, is not world-writable and is executable
/// by us, by cf-agent's rules (root needs the owner's execute bit). The
/// program is on this machine even in a rooted host: commands run here.
pub fn check_executable(program: &str) -> Result<(), NotExecutable> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(program).map_err(|_| NotExecutable::Missing)?;
    let mode = meta.mode();
    if mode & 0o002 != 0 {
        return Err(NotExecutable::WorldWritable);
    }
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let ok = if uid == 0 || uid == meta.uid() {
        mode & 0o100 != 0
    } else if gid == meta.gid() {
        mode & 0o010 != 0
    } else {
        mode & 0o001 != 0
    };
    if ok {
        Ok(())
    } else {
        Err(NotExecutable::NoPermission)
    }
}

impl super::Host {
    /// Checks a program by cf-agent's rules before it runs (see
    /// [`check_executable`]); the program is one of this machine, never
    /// taken below the host's root (commands run on the real system).
    pub fn check_program(&self, program: &str) -> Result<(), NotExecutable> {
        check_executable(program)
    }

    /// Whether the program at `path` (its links followed) is the very
    /// file this process runs: same device, same inode as
    /// `/proc/self/exe`. A program rebuilt or installed since is another
    /// file, and so is any other program of that name.
    pub fn is_this_program(&self, path: &std::path::Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(path), std::fs::metadata("/proc/self/exe")) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    /// The `stat` of a program on this machine (never taken below the
    /// host's root: commands run on the real system).
    pub fn program_metadata(
        &self,
        program: &std::path::Path,
    ) -> std::io::Result<std::fs::Metadata> {
        std::fs::metadata(program)
    }

    /// Whether this process may run (or read) the program at `path`, as
    /// `access(2)` says; the path is one of this machine, never taken
    /// below the host's root (programs run on the real system).
    pub fn access(&self, path: &std::path::Path, what: Access) -> std::io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte")
        })?;
        let mode = match what {
            Access::Execute => libc::X_OK,
            Access::Read => libc::R_OK,
        };
        // SAFETY: `c` is a valid NUL-terminated string for the call.
        if unsafe { libc::access(c.as_ptr(), mode) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Runs a command to completion (or its timeout) and returns its
    /// output. In a rooted host the command still runs on the real system:
    /// commands are the policy's own business.
    pub fn run(&self, spec: &CommandSpec) -> std::io::Result<CommandResult> {
        let _moves = super::safe::MayMove;
        run_in(spec, self.command_dir(spec))
    }

    /// Starts a command and returns at once, as cf-agent forks for a
    /// promise whose action body says `background`: `done` gets its result
    /// on a thread of its own once it ends, and [`wait_for_background`]
    /// waits for every such command (cf-agent waits for its children at
    /// the end of the run).
    pub fn run_in_background(
        &self,
        spec: &CommandSpec,
        done: impl FnOnce(std::io::Result<CommandResult>) + Send + 'static,
    ) {
        let dir = self.command_dir(spec);
        let spec = spec.clone();
        let handle = std::thread::spawn(move || done(run_in(&spec, dir)));
        BACKGROUND
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(handle);
    }

    /// Without a directory of its own, a command starts where cf-agent's
    /// process is: in the directory a files promise entered last.
    fn command_dir(&self, spec: &CommandSpec) -> Option<std::path::PathBuf> {
        if spec.chdir.is_some() || spec.chroot.is_some() {
            return None;
        }
        let real = self.map(&self.entered_dir()?);
        real.is_dir().then_some(real)
    }
}

/// The commands started in the background, not yet waited for.
static BACKGROUND: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

/// Whether commands started in the background may still be running (they
/// may move directories at any moment).
pub fn background_started() -> bool {
    !BACKGROUND
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_empty()
}

/// Waits until every command started in the background has ended and its
/// result was handled (see [`super::Host::run_in_background`]).
pub fn wait_for_background() {
    loop {
        let next = BACKGROUND.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match next {
            Some(h) => {
                if h.join().is_err() {
                    crate::error!("A command run in the background ended its watcher abnormally");
                }
            }
            None => break,
        }
    }
}

/// Runs a command to completion (or its timeout), in `dir` when given.
fn run_in(spec: &CommandSpec, dir: Option<std::path::PathBuf>) -> std::io::Result<CommandResult> {
    let mut cmd = command_for(spec)?;
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let (reader, writer) = std::io::pipe()?;
    match spec.output {
        OutputSelect::Both => cmd.stdout(writer.try_clone()?).stderr(writer),
        OutputSelect::Stdout => cmd.stdout(writer).stderr(Stdio::null()),
        OutputSelect::Stderr => cmd.stdout(Stdio::null()).stderr(writer),
        OutputSelect::StdoutPassStderr => cmd.stdout(writer).stderr(Stdio::inherit()),
        OutputSelect::Inherit => {
            drop(writer);
            cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit())
        }
    };
    cmd.stdin(if spec.stdin.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    });
    // It may write to our output (or its error): what we printed goes first.
    super::out::flush();
    let mut child = cmd.spawn()?;
    drop(cmd);
    if let Some(input) = child.stdin.take() {
        let data = spec.stdin.clone();
        // A command that exits without reading its input must not take
        // the agent down with SIGPIPE: the write sees a broken pipe.
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let mut rest = &data[..];
            while !rest.is_empty() {
                match super::pipes::write_without_sigpipe(input.as_raw_fd(), rest) {
                    Ok(0) => break,
                    Ok(n) => rest = &rest[n..],
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
    }
    let (status, output, timed_out) = collect(child, reader, spec.timeout, AFTER_EXIT_GRACE)?;
    Ok(CommandResult {
        code: status.code(),
        signal: status.signal(),
        output,
        timed_out,
    })
}

/// How long the output is still read after the command itself exited
/// (never past its time limit). What it started in the background may
/// hold the pipe open: cf-agent 3.21 reads until the last holder exits,
/// time limit or not, so a daemon started without redirecting its output
/// (`setsid food &`) keeps it waiting, and the run lock held, for as long
/// as the daemon lives. We read what comes within this grace and go on.
pub const AFTER_EXIT_GRACE: Duration = Duration::from_secs(10);

/// The most read from the pipe once the wait is over (Linux pipes hold
/// 64 KiB unless enlarged, 1 MiB at most without privileges).
const DRAIN_LIMIT: usize = 1 << 20;

/// Reads the command's output while waiting for it to exit, never past
/// `timeout` (from now): at the deadline a command still running is killed
/// with its process group and reported timed out, and the pipe is given up
/// even if a process in another session (`setsid`) still holds it open;
/// what was written until then is kept. Once the command exited, the pipe
/// is read for `after_exit` more at most. A command that exited in time is
/// judged by its own status, whatever its descendants do.
fn collect(
    mut child: std::process::Child,
    mut reader: std::io::PipeReader,
    timeout: Option<Duration>,
    after_exit: Duration,
) -> std::io::Result<(std::process::ExitStatus, Vec<u8>, bool)> {
    use std::os::fd::AsRawFd;
    let pid = child.id() as i32;
    let start = Instant::now();
    let deadline = timeout.map(|t| start + t);
    let fd = reader.as_raw_fd();
    let exited = super::pipes::pidfd_open(pid);
    let mut output = Vec::new();
    let mut buf = [0u8; 8192];
    let mut eof = false;
    let mut status = None;
    let mut read_until = deadline;
    // One read of what is there (or of end of file), waiting until `until`
    // at most; false when nothing came.
    let mut read_some = |until: Instant, output: &mut Vec<u8>, eof: &mut bool| loop {
        if !super::pipes::wait_ready(fd, libc::POLLIN, until) {
            return false;
        }
        match reader.read(&mut buf) {
            Ok(0) => {
                *eof = true;
                return true;
            }
            Ok(n) => {
                output.extend_from_slice(&buf[..n]);
                return true;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                *eof = true;
                return true;
            }
        }
    };
    loop {
        if status.is_none() {
            status = child.try_wait()?;
            if status.is_some() {
                let grace = Instant::now() + after_exit;
                read_until = Some(read_until.map_or(grace, |d| d.min(grace)));
            }
        }
        if eof && status.is_some() {
            break;
        }
        let now = Instant::now();
        if read_until.is_some_and(|d| now >= d) {
            break;
        }
        // Look at the child again soon; never sleep past the deadline.
        let mut step = now + Duration::from_millis(if status.is_some() { 100 } else { 5 });
        if let Some(d) = read_until {
            step = step.min(d);
        }
        if eof {
            // Nothing more to read: wait for the exit itself, woken by it
            // where the kernel gives a pidfd (a poll every 5 ms cost a
            // short command up to 5 ms, the policy's pre-check too).
            match &exited {
                Some(p) => {
                    let until = read_until.unwrap_or(now + Duration::from_secs(3600));
                    super::pipes::wait_ready(p.as_raw_fd(), libc::POLLIN, until);
                }
                None => std::thread::sleep(step.saturating_duration_since(now)),
            }
        } else {
            read_some(step, &mut output, &mut eof);
        }
    }
    let timed_out = status.is_none();
    let status = match status {
        Some(s) => s,
        None => {
            // SAFETY: signalling our own child's process group.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            child.wait()?
        }
    };
    // Keep what is already in the pipe (the group may have written it just
    // before it died), without waiting for more, and no more than a full
    // pipe's worth: a process in another session may keep writing.
    let drained_from = output.len();
    while !eof
        && output.len() - drained_from < DRAIN_LIMIT
        && read_some(Instant::now(), &mut output, &mut eof)
    {}
    if !eof {
        crate::debug!(
            "process {pid} {}; its output is still held open by a process it started, which is no longer read",
            if timed_out {
                "was killed at its time limit"
            } else {
                "exited"
            }
        );
    }
    Ok((status, output, timed_out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Host;

    #[test]
    fn splits_like_cf_agent() {
        assert_eq!(
            split_command_line("/bin/sh -c 'exit 3'"),
            vec!["/bin/sh", "-c", "exit 3"]
        );
        assert_eq!(split_command_line("a \"b c\" d"), vec!["a", "b c", "d"]);
        assert_eq!(
            split_command_line("echo ; rm -rf /"),
            vec!["echo", ";", "rm", "-rf", "/"]
        );
        assert_eq!(split_command_line("  "), Vec::<String>::new());
        assert_eq!(
            split_command_line("/bin/echo  a   'b c'  \"d\""),
            vec!["/bin/echo", "a", "b c", "d"]
        );
        assert_eq!(split_command_line("x \"a b\"'c'"), vec!["x", "a b", "c"]);
        assert_eq!(split_command_line("x a\\ b"), vec!["x", "a\\", "b"]);
        assert_eq!(split_command_line("x a\"b c\""), vec!["x", "a\"b", "c\""]);
        assert_eq!(split_command_line("x 'open"), vec!["x", "open"]);
    }

    #[test]
    fn one_output_or_both() {
        let run = |output| {
            Host::real()
                .run(&CommandSpec {
                    argv: vec!["echo out; echo err >&2".into()],
                    shell: true,
                    output,
                    ..CommandSpec::default()
                })
                .unwrap()
                .output_text()
        };
        assert_eq!(run(OutputSelect::Both), "out\nerr\n");
        assert_eq!(run(OutputSelect::Stdout), "out\n");
        assert_eq!(run(OutputSelect::Stderr), "err\n");
    }

    #[test]
    fn runs_without_a_shell() {
        let r = Host::real()
            .run(&CommandSpec {
                argv: vec!["/bin/echo".into(), "a;".into(), "$HOME".into()],
                ..CommandSpec::default()
            })
            .unwrap();
        assert_eq!(r.output_text(), "a; $HOME\n");
        assert_eq!(r.code, Some(0));
    }

    #[test]
    fn timeouts_kill_the_group() {
        let start = Instant::now();
        let r = Host::real()
            .run(&CommandSpec {
                argv: vec!["sleep 30; echo late".into()],
                shell: true,
                timeout: Some(Duration::from_millis(200)),
                ..CommandSpec::default()
            })
            .unwrap();
        assert!(r.timed_out);
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(r.output_text(), "");
    }

    /// The scripts below start `setsid sleep 20` (a process in a session of
    /// its own, out of reach of the group kill, holding the output pipe)
    /// and print its pid first; this ends it and returns the other lines.
    fn end_holder(output: &str) -> Vec<String> {
        let mut lines = output.lines();
        let pid: i32 = lines.next().and_then(|l| l.parse().ok()).expect("pid");
        // SAFETY: ending the test's own background process.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        lines.map(str::to_string).collect()
    }

    fn shell(script: &str, timeout: Option<Duration>) -> (CommandResult, Duration) {
        let start = Instant::now();
        let r = Host::real()
            .run(&CommandSpec {
                argv: vec![script.into()],
                shell: true,
                timeout,
                ..CommandSpec::default()
            })
            .unwrap();
        (r, start.elapsed())
    }

    /// Issue 15: the timeout killed the group, then waited for the end of
    /// the output, which a `setsid` grandchild held open for 20 s (or
    /// forever), and the run lock with it.
    #[test]
    fn a_timeout_ends_the_wait_though_a_setsid_grandchild_holds_the_output() {
        let (r, took) = shell(
            "setsid sleep 20 & echo $!; echo hi; sleep 20",
            Some(Duration::from_millis(500)),
        );
        let rest = end_holder(&r.output_text());
        assert!(took < Duration::from_secs(5), "took {took:?}");
        assert!(r.timed_out);
        assert_eq!(rest, ["hi"]);
    }

    /// Issue 15: a command that exited in time is judged by its status,
    /// without waiting past its time limit for a grandchild's end of file.
    #[test]
    fn a_command_that_exited_is_not_waited_for_past_its_limit_by_its_grandchild() {
        let (r, took) = shell(
            "setsid sleep 20 & echo $!; echo hi; exit 3",
            Some(Duration::from_secs(1)),
        );
        let rest = end_holder(&r.output_text());
        assert!(took < Duration::from_secs(5), "took {took:?}");
        assert!(!r.timed_out);
        assert_eq!((r.code, rest), (Some(3), vec!["hi".to_string()]));
    }

    /// Without a time limit the output is read for a grace after the
    /// command exited; what background processes write within it is kept,
    /// as cf-agent keeps it.
    #[test]
    fn without_a_limit_the_output_is_read_for_a_grace_after_the_exit() {
        let (r, took) = shell("(sleep 0.3; echo late) & echo now", None);
        assert!(took < Duration::from_secs(5), "took {took:?}");
        assert_eq!((r.code, r.output_text().as_str()), (Some(0), "now\nlate\n"));

        let cmd = || {
            let mut cmd = command_for(&CommandSpec {
                argv: vec!["setsid sleep 20 & echo $!; echo hi".into()],
                shell: true,
                ..CommandSpec::default()
            })
            .unwrap();
            let (reader, writer) = std::io::pipe().unwrap();
            cmd.stdout(writer).stdin(Stdio::null());
            (cmd.spawn().unwrap(), reader)
        };
        let start = Instant::now();
        let (child, reader) = cmd();
        let (status, output, timed_out) =
            collect(child, reader, None, Duration::from_millis(300)).unwrap();
        let rest = end_holder(&String::from_utf8_lossy(&output));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(status.success() && !timed_out);
        assert_eq!(rest, ["hi"]);
    }
}
