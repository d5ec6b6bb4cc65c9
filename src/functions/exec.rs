//! Running commands for `execresult`, `returnszero` and `usemodule`,
//! through the host's exec layer: cf-agent's word splitting (no shell
//! unless asked), its checks on the program, a time limit, and its
//! trimming of the output.

use crate::host::Host;
use crate::host::exec::{CommandSpec, OutputSelect, split_command_line};
use std::time::Duration;

/// How a command line is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// Split into words and executed directly.
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

/// How long a command may run before it is killed (cf-agent has no limit;
/// a hung command should not hang the agent forever).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

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

/// Splits a command line and checks that its program is an absolute path
/// to an executable file, as cf-agent does before running it without a
/// shell.
pub fn checked_words(line: &str) -> Result<Vec<String>, ExecError> {
    let words = split_command_line(line);
    let Some(prog) = words.first() else {
        return Err(ExecError::NotExecutable(line.to_string()));
    };
    if !prog.starts_with('/') {
        return Err(ExecError::NotAbsolute(line.to_string()));
    }
    use crate::host::local::{self, PermissionsExt};
    match local::metadata(prog) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(words),
        Ok(_) => Err(ExecError::NotExecutable(line.to_string())),
        Err(_) => {
            // cf-agent says so first, then the caller's own error.
            tracing::error!("Proposed executable file '{prog}' doesn't exist");
            Err(ExecError::NotExecutable(line.to_string()))
        }
    }
}

/// Runs a command line and collects the chosen output.
pub fn run(
    line: &str,
    shell: Shell,
    output: OutputSelect,
    timeout: Duration,
) -> Result<Finished, ExecError> {
    let spec = CommandSpec {
        argv: match shell {
            Shell::No => checked_words(line)?,
            Shell::Sh => vec![line.to_string()],
        },
        shell: shell == Shell::Sh,
        timeout: Some(timeout),
        output,
        ..CommandSpec::default()
    };
    let r = Host::real()
        .run(&spec)
        .map_err(|e| ExecError::Spawn(e.to_string()))?;
    if r.timed_out {
        return Err(ExecError::TimedOut(timeout));
    }
    Ok(Finished {
        code: r.code,
        output: r.output_text(),
    })
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
    fn programs_are_checked_before_running() {
        let r = run(
            "/bin/echo a 'b  c'",
            Shell::No,
            OutputSelect::Stdout,
            DEFAULT_TIMEOUT,
        )
        .unwrap();
        assert_eq!(r.output, "a b  c\n");
        assert_eq!(
            run("echo x", Shell::No, OutputSelect::Stdout, DEFAULT_TIMEOUT),
            Err(ExecError::NotAbsolute("echo x".into()))
        );
        assert!(matches!(
            run(
                "/nonexistent/x",
                Shell::No,
                OutputSelect::Stdout,
                DEFAULT_TIMEOUT
            ),
            Err(ExecError::NotExecutable(_))
        ));
        let r = run("exit 3", Shell::Sh, OutputSelect::Both, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(r.code, Some(3));
    }

    #[test]
    fn slow_commands_are_killed() {
        let r = run(
            "sleep 5",
            Shell::Sh,
            OutputSelect::Stdout,
            Duration::from_millis(200),
        );
        assert_eq!(r, Err(ExecError::TimedOut(Duration::from_millis(200))));
    }

    #[test]
    fn output_trimmed_at_the_end_only() {
        assert_eq!(trim_output("  x  \n\r\n\t"), "  x");
        assert_eq!(trim_output("a\r\nb\r\n"), "a\r\nb");
    }
}
