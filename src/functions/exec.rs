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

/// Whether a command line names its program by an absolute path, as
/// cf-agent asks it of `execresult` and `returnszero`: after any opening
/// double quotes, a slash.
fn is_absolute_command(line: &str) -> bool {
    line.trim_start_matches('"').starts_with('/')
}

/// The program of a command line as cf-agent takes it to check it: up to
/// the closing quote when the line starts with a double quote, else up to
/// the first blank.
fn program_of(line: &str) -> &str {
    match line.strip_prefix('"') {
        Some(rest) => rest.split('"').next().unwrap_or(rest),
        None => line.split(' ').next().unwrap_or(line),
    }
}

/// Checks a program as cf-agent does before running it (it exists, is
/// not world-writable and we may execute it), saying why not as it does.
fn check_program(host: &Host, line: &str, program: &str) -> Result<(), ExecError> {
    match host.check_program(program) {
        Ok(()) => Ok(()),
        Err(e) => {
            e.say(program);
            Err(ExecError::NotExecutable(line.to_string()))
        }
    }
}

/// Splits a command line into words and checks that its program is an
/// absolute path to a program we may run (for `usemodule`, which names its
/// module quoted).
pub fn checked_words(host: &Host, line: &str) -> Result<Vec<String>, ExecError> {
    let words = split_command_line(line);
    let Some(prog) = words.first() else {
        return Err(ExecError::NotExecutable(line.to_string()));
    };
    if !prog.starts_with('/') {
        return Err(ExecError::NotAbsolute(line.to_string()));
    }
    check_program(host, line, prog)?;
    Ok(words)
}

/// Runs a command line for `execresult` and `returnszero` and collects the
/// chosen output. As in cf-agent, a line that starts with an absolute path
/// has its program checked first, shell or not; without a shell, any other
/// line is refused.
pub fn run(
    host: &Host,
    line: &str,
    shell: Shell,
    output: OutputSelect,
    timeout: Duration,
) -> Result<Finished, ExecError> {
    if is_absolute_command(line) {
        check_program(host, line, program_of(line))?;
    } else if shell == Shell::No {
        return Err(ExecError::NotAbsolute(line.to_string()));
    }
    let argv = match shell {
        Shell::No => split_command_line(line),
        Shell::Sh => vec![line.to_string()],
    };
    run_argv(host, argv, shell, output, timeout)
}

/// Runs words already checked (or a shell line) and collects the output.
pub fn run_argv(
    host: &Host,
    argv: Vec<String>,
    shell: Shell,
    output: OutputSelect,
    timeout: Duration,
) -> Result<Finished, ExecError> {
    let spec = CommandSpec {
        argv,
        shell: shell == Shell::Sh,
        timeout: Some(timeout),
        output,
        ..CommandSpec::default()
    };
    finish(host, &spec, timeout)
}

/// Runs a command line without a shell, `input` on its standard input,
/// and collects its standard output (its standard error goes where the
/// agent's goes). The program is looked up in `PATH` when it has no slash,
/// as cf-agent's full-duplex pipe does (`mapdata`'s `json_pipe`).
pub fn pipe(
    host: &Host,
    line: &str,
    input: Vec<u8>,
    timeout: Duration,
) -> Result<Finished, ExecError> {
    let spec = CommandSpec {
        argv: split_command_line(line),
        timeout: Some(timeout),
        output: OutputSelect::StdoutPassStderr,
        stdin: input,
        ..CommandSpec::default()
    };
    finish(host, &spec, timeout)
}

/// Runs `spec` and collects how it ended.
fn finish(host: &Host, spec: &CommandSpec, timeout: Duration) -> Result<Finished, ExecError> {
    let r = host
        .run(spec)
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
        let h = Host::real();
        let r = run(
            &h,
            "/bin/echo a 'b  c'",
            Shell::No,
            OutputSelect::Stdout,
            DEFAULT_TIMEOUT,
        )
        .unwrap();
        assert_eq!(r.output, "a b  c\n");
        assert_eq!(
            run(
                &h,
                "echo x",
                Shell::No,
                OutputSelect::Stdout,
                DEFAULT_TIMEOUT
            ),
            Err(ExecError::NotAbsolute("echo x".into()))
        );
        assert!(matches!(
            run(
                &h,
                "/nonexistent/x",
                Shell::No,
                OutputSelect::Stdout,
                DEFAULT_TIMEOUT
            ),
            Err(ExecError::NotExecutable(_))
        ));
        let r = run(&h, "exit 3", Shell::Sh, OutputSelect::Both, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(r.code, Some(3));
    }

    /// cf-agent checks the program of a line that starts with an absolute
    /// path even when a shell runs it (01_vars/02_functions/execresult.cf);
    /// a line that does not is left to the shell.
    #[test]
    fn absolute_programs_are_checked_with_a_shell_too() {
        let h = Host::real();
        let out = OutputSelect::Both;
        assert_eq!(
            run(&h, "/xbin/nosuchprogram", Shell::Sh, out, DEFAULT_TIMEOUT),
            Err(ExecError::NotExecutable("/xbin/nosuchprogram".into()))
        );
        let r = run(&h, "nosuchprogram_x", Shell::Sh, out, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(r.code, Some(127));
        let r = run(&h, "\"/bin/echo\" a", Shell::No, out, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(r.output, "a\n");
        assert_eq!(program_of("\"/bin/x y\" z"), "/bin/x y");
        assert_eq!(program_of("/bin/x y"), "/bin/x");
    }

    #[test]
    fn slow_commands_are_killed() {
        let r = run(
            &Host::real(),
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
