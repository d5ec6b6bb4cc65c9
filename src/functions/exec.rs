//! Running commands for `execresult`, `returnszero` and `usemodule`: argument
//! splitting as cf-agent does it (no shell unless asked), a time limit, and
//! output captured from stdout, stderr or both interleaved.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Which output a command's result keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    Stdout,
    Stderr,
    Both,
}

/// How a command line is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// Split into words (quotes group) and executed directly.
    No,
    /// Given to `/bin/sh -c`.
    Sh,
}

/// A finished command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub output: String,
}

/// How long a command may run before it is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Splits a command line into words as cf-agent does: whitespace separates
/// words, and a word that starts with a double quote, a single quote or a
/// backtick runs to the matching quote (the quotes are dropped). There are
/// no escapes.
pub fn split_command(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
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
        out.push(word);
    }
    out
}

/// Why a command could not be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecError {
    NotAbsolute(String),
    NotExecutable(String),
    Spawn(String),
    TimedOut(Duration),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::NotAbsolute(c) => write!(f, "'{c}' does not have an absolute path"),
            ExecError::NotExecutable(c) => {
                write!(f, "'{c}' is assumed to be executable but isn't")
            }
            ExecError::Spawn(m) => write!(f, "cannot run the command: {m}"),
            ExecError::TimedOut(d) => write!(f, "killed after {} seconds", d.as_secs()),
        }
    }
}

/// Checks that the program of a command line (its first word) is an
/// absolute path to an executable file.
pub fn check_program(line: &str) -> Result<Vec<String>, ExecError> {
    let words = split_command(line);
    let Some(prog) = words.first() else {
        return Err(ExecError::NotExecutable(line.to_string()));
    };
    if !prog.starts_with('/') {
        return Err(ExecError::NotAbsolute(line.to_string()));
    }
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(prog) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(words),
        _ => Err(ExecError::NotExecutable(line.to_string())),
    }
}

/// Runs a command line and collects its output, killing it (and its
/// process group) after `timeout`.
pub fn run(
    line: &str,
    shell: Shell,
    capture: Capture,
    timeout: Duration,
) -> Result<Finished, ExecError> {
    let mut cmd = match shell {
        Shell::No => {
            let words = check_program(line)?;
            let mut c = Command::new(&words[0]);
            c.args(&words[1..]);
            c
        }
        Shell::Sh => {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(line);
            c
        }
    };
    let (reader, writer) = std::io::pipe().map_err(|e| ExecError::Spawn(e.to_string()))?;
    let (out, err): (Stdio, Stdio) = match capture {
        Capture::Stdout => (writer.into(), Stdio::null()),
        Capture::Stderr => (Stdio::null(), writer.into()),
        Capture::Both => {
            let w2 = writer
                .try_clone()
                .map_err(|e| ExecError::Spawn(e.to_string()))?;
            (writer.into(), w2.into())
        }
    };
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| ExecError::Spawn(e.to_string()))?;
    // The parent's copies of the write end are gone with `cmd`; reading
    // ends when every child holding it has exited or closed it.
    drop(cmd);
    let reader_thread = std::thread::spawn(move || {
        let mut r = reader;
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(ExecError::Spawn(e.to_string())),
        }
        if start.elapsed() >= timeout {
            // SAFETY: killing the process group we created for the child.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
            return Err(ExecError::TimedOut(timeout));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Background processes the command left behind may keep the pipe
    // open; do not wait for them past the time limit.
    let buf = wait_reader(reader_thread, timeout.saturating_sub(start.elapsed()));
    Ok(Finished {
        code: status.code(),
        output: String::from_utf8_lossy(&buf).into_owned(),
    })
}

fn wait_reader(h: std::thread::JoinHandle<Vec<u8>>, limit: Duration) -> Vec<u8> {
    let start = Instant::now();
    while !h.is_finished() {
        if start.elapsed() >= limit {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    h.join().unwrap_or_default()
}

/// The output as `execresult` returns it: trailing white space (newlines,
/// carriage returns, blanks) removed, leading kept.
pub fn trim_output(s: &str) -> &str {
    s.trim_end_matches(|c: char| c.is_ascii_whitespace() || c == '\u{b}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_cf_agent() {
        assert_eq!(
            split_command("/bin/echo  a   'b c'  \"d\""),
            vec!["/bin/echo", "a", "b c", "d"]
        );
        assert_eq!(split_command("x \"a b\"'c'"), vec!["x", "a b", "c"]);
        assert_eq!(split_command("x a\\ b"), vec!["x", "a\\", "b"]);
        assert_eq!(split_command("  "), Vec::<String>::new());
        assert_eq!(split_command("x 'open"), vec!["x", "open"]);
    }

    #[test]
    fn runs_with_and_without_shell() {
        let r = run(
            "/bin/echo a 'b  c'",
            Shell::No,
            Capture::Stdout,
            DEFAULT_TIMEOUT,
        )
        .unwrap();
        assert_eq!(r.output, "a b  c\n");
        assert_eq!(r.code, Some(0));
        let r = run(
            "echo out; echo err >&2; exit 3",
            Shell::Sh,
            Capture::Both,
            DEFAULT_TIMEOUT,
        )
        .unwrap();
        assert_eq!(r.output, "out\nerr\n");
        assert_eq!(r.code, Some(3));
        let r = run("echo err >&2", Shell::Sh, Capture::Stderr, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(r.output, "err\n");
        assert_eq!(
            run("echo x", Shell::No, Capture::Stdout, DEFAULT_TIMEOUT),
            Err(ExecError::NotAbsolute("echo x".into()))
        );
        assert!(matches!(
            run(
                "/nonexistent/x",
                Shell::No,
                Capture::Stdout,
                DEFAULT_TIMEOUT
            ),
            Err(ExecError::NotExecutable(_))
        ));
    }

    #[test]
    fn slow_commands_are_killed() {
        let t = Instant::now();
        let r = run(
            "sleep 5",
            Shell::Sh,
            Capture::Stdout,
            Duration::from_millis(200),
        );
        assert_eq!(r, Err(ExecError::TimedOut(Duration::from_millis(200))));
        assert!(t.elapsed() < Duration::from_secs(4));
    }

    #[test]
    fn output_trimmed_at_the_end_only() {
        assert_eq!(trim_output("  x  \n\r\n\t"), "  x");
        assert_eq!(trim_output("a\r\nb\r\n"), "a\r\nb");
    }
}
