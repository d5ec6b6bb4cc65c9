//! `commands`: run a program (never through a shell unless the contain
//! body asks), quote its output as cf-agent does, and judge the outcome
//! by its return code.

use super::{ActContext, Actuator};
use crate::report::change::{Change, Decision};

use crate::eval::expanded::ExpandedPromise;

use crate::eval::bodies::ResolvedBody;

use crate::report::Outcome;

use crate::host::exec::{CommandSpec, split_command_line};
use crate::values::Value;
use crate::values::number::parse_bool;
use std::time::Duration;

pub struct Commands;

/// How the contain body asks the command to be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShellType {
    None,
    Sh,
    PowerShell,
}

fn shell_type(contain: Option<&ResolvedBody>) -> ShellType {
    match contain.and_then(|c| c.scalar("useshell")) {
        Some("useshell" | "true" | "yes" | "on") => ShellType::Sh,
        Some("powershell") => ShellType::PowerShell,
        _ => ShellType::None,
    }
}

/// The command line as cf-agent shows it and runs it through a shell: the
/// promiser, then `args`, then each `arglist` item, joined by spaces.
fn command_line(p: &ExpandedPromise) -> String {
    let mut line = p.promiser.clone();
    if let Some(args) = p.scalar("args") {
        line.push(' ');
        line.push_str(args);
    }
    if let Some(Value::List(list)) = p.value("arglist") {
        for a in list {
            line.push(' ');
            line.push_str(a);
        }
    }
    line
}

/// The words of the command without a shell: the promiser and `args` split
/// as cf-agent splits them, each `arglist` item one word as it stands.
fn command_words(p: &ExpandedPromise) -> Vec<String> {
    let mut argv = split_command_line(&p.promiser);
    if let Some(args) = p.scalar("args") {
        argv.extend(split_command_line(args));
    }
    if let Some(Value::List(list)) = p.value("arglist") {
        argv.extend(list.iter().cloned());
    }
    argv
}

/// The 15 characters cf-agent labels quoted output with: those ending ten
/// characters before the end of the program's name, or the first 15.
fn quote_label(line: &str) -> String {
    let end_of_program = line.find(' ').unwrap_or(line.len());
    let start = end_of_program.saturating_sub(10);
    let start = if end_of_program >= 10 { start } else { 0 };
    line.get(start..).unwrap_or(line).chars().take(15).collect()
}

impl Actuator for Commands {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let contain = p.body("contain");
        let flag = |attr: &str| {
            contain
                .and_then(|c| c.scalar(attr))
                .and_then(parse_bool)
                .unwrap_or(false)
        };
        let (no_output, preview) = (flag("no_output"), flag("preview"));
        if no_output && preview {
            crate::error!(
                "no_output and preview are mutually exclusive (broken promise) in the commands promise '{}' ({}:{})",
                p.promiser,
                p.file,
                p.line
            );
            return Outcome::Failed;
        }
        let shell = shell_type(contain);
        let line = command_line(p);
        let argv = command_words(p);
        let program = argv.first().cloned().unwrap_or_default();
        // cf-agent checks the program whenever it is named by an absolute
        // path or no shell will look it up.
        if (program.starts_with('/') || shell == ShellType::None)
            && let Err(e) = crate::host::exec::check_executable(&program)
        {
            e.say(&program);
            crate::error!(
                "'{}' promises to be executable but isn't{}",
                p.promiser,
                p.located_when_verbose()
            );
            return Outcome::Failed;
        }
        let spec = match spec_from(contain, argv, line.clone(), shell == ShellType::Sh) {
            Ok(s) => s,
            Err(e) => {
                crate::error!("Command '{line}' ({}:{}): {e}", p.file, p.line);
                return Outcome::Failed;
            }
        };
        let inform = p.flag("inform").unwrap_or(true);
        // Without inform, the lines around the execution are verbose only.
        let say = |msg: &str| {
            if inform {
                crate::info!("{msg}");
            } else {
                crate::debug!("{msg}");
            }
        };
        let mut banner = spec.timeout.map_or("no timeout".to_string(), |t| {
            format!("timeout={}s", t.as_secs())
        });
        if let Some(uid) = spec.uid {
            banner.push_str(&format!(",uid={uid}"));
        }
        if let Some(gid) = spec.gid {
            banner.push_str(&format!(",gid={gid}"));
        }
        say(&format!("Executing '{banner}' ... '{line}'"));
        // cf-agent's words: -n says it "would execute", a promise with
        // action_policy warn that the command "needs to be executed"; a
        // `preview` command runs under -n.
        let mut change = Change::new("run", &line)
            .should(format!("Would execute script '{line}'"))
            .dry_run_words_win()
            .without_suffix()
            .should_when_warning(format!(
                "Command '{line}' needs to be executed, but only warning was promised"
            ));
        if preview {
            change = change.previewed();
        }
        if let Decision::Withheld { outcome, .. } = act.changes.plan(&change) {
            return outcome;
        }
        if shell == ShellType::PowerShell {
            crate::error!("Powershell is only supported on Windows");
            return Outcome::Failed;
        }
        let background = p
            .body("action")
            .and_then(|a| a.scalar("background"))
            .and_then(parse_bool)
            .unwrap_or(false);
        if background {
            return run_in_background(act, p, &spec, line, inform);
        }
        let result = match act.host.run(&spec) {
            Ok(r) => r,
            Err(e) => {
                crate::error!("Couldn't open pipe to command '{line}'. (cf_popen: {e})");
                return Outcome::Failed;
            }
        };
        let code = result
            .code
            .map_or_else(|| "a signal".to_string(), |c| c.to_string());
        act.changes.record(
            change.after(format!("returned {code}")),
            format!("Ran '{line}': returned {code}"),
        );
        let text = result.output_text();
        // A line holding `cfengine-die` ends what is read of the output.
        let lines: Vec<&str> = text
            .lines()
            .take_while(|l| !l.contains("cfengine-die"))
            .collect();
        let outcome = if result.timed_out || result.code.is_none() {
            crate::error!(
                "Finished script '{}' - failed (abnormal termination){}",
                p.promiser,
                p.located_when_verbose()
            );
            Outcome::Failed
        } else {
            let judged = judge(
                p.body("classes"),
                result.code.unwrap_or(-1),
                &p.promiser,
                &p.located_when_verbose(),
            );
            let worst = judged.iter().copied().reduce(Outcome::worst);
            if judged.len() > 1 {
                // Each list the code is in sets its own outcome classes.
                act.reported_outcomes = Some(judged);
            }
            worst.unwrap_or(Outcome::Failed)
        };
        let module = p.flag("module").unwrap_or(false);
        // cf-agent quotes a command's output unless `no_output` says not
        // to, which for a module it does unless told otherwise.
        let quiet = contain
            .and_then(|c| c.scalar("no_output"))
            .and_then(parse_bool)
            .unwrap_or(module);
        if module {
            let scope = module_scope(&program);
            let r = act.ctx.apply_module_output(&scope, &lines.join("\n"));
            if !quiet {
                for l in r.other_lines {
                    crate::info!("M '{line}': {l}");
                }
            }
        }
        if !quiet {
            quote_output(&line, &lines);
        }
        say(&format!("Completed execution of '{line}'"));
        outcome
    }
}

/// The output is quoted after the verdict, in one message, as cf-agent
/// buffers it; empty lines are left out.
fn quote_output(line: &str, lines: &[&str]) {
    let label = quote_label(line);
    let quoted: Vec<String> = lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| format!("Q: \"...{label}\": {l}"))
        .collect();
    if !quoted.is_empty() {
        crate::info!(target: crate::report::log::NOTICE_TARGET, "{}", quoted.join("\n"));
        crate::info!(
            "Last {} quoted lines were generated by promiser '{line}'",
            quoted.len()
        );
    }
}

/// An action body's `background`: cf-agent forks, and its child runs the
/// command, judges and quotes it (the classes and module variables it
/// defines die with the child), while the promise itself is kept at once,
/// reporting nothing, and the run goes on; the run waits for every such command at its end.
fn run_in_background(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    spec: &CommandSpec,
    line: String,
    inform: bool,
) -> Outcome {
    crate::debug!("Backgrounding job '{line}'");
    let module = p.flag("module").unwrap_or(false);
    let quiet = p
        .body("contain")
        .and_then(|c| c.scalar("no_output"))
        .and_then(parse_bool)
        .unwrap_or(module);
    let classes = p.body("classes").cloned();
    let (promiser, located) = (p.promiser.clone(), p.located_when_verbose());
    let say = move |msg: &str| {
        if inform {
            crate::info!("{msg}");
        } else {
            crate::debug!("{msg}");
        }
    };
    act.host.run_in_background(spec, {
        let line = line.clone();
        move |result| {
            match result {
                Err(e) => {
                    crate::error!("Couldn't open pipe to command '{line}'. (cf_popen: {e})")
                }
                Ok(r) if r.timed_out || r.code.is_none() => crate::error!(
                    "Finished script '{promiser}' - failed (abnormal termination){located}"
                ),
                Ok(r) => {
                    judge(classes.as_ref(), r.code.unwrap_or(-1), &promiser, &located);
                    if !quiet {
                        let text = r.output_text();
                        let lines: Vec<&str> = text
                            .lines()
                            .take_while(|l| !l.contains("cfengine-die"))
                            .collect();
                        quote_output(&line, &lines);
                    }
                    say(&format!("Completed execution of '{line}'"));
                }
            }
            crate::debug!("Backgrounded command '{line}' is done - exiting");
        }
    });
    // The parent's own words, as it goes on without waiting; it reports
    // no outcome, so no class of the classes body is defined.
    say(&format!("Completed execution of '{line}'"));
    act.reported_outcomes = Some(Vec::new());
    Outcome::Kept
}

fn spec_from(
    contain: Option<&ResolvedBody>,
    argv: Vec<String>,
    line: String,
    shell: bool,
) -> Result<CommandSpec, String> {
    // cf-agent runs commands with umask 077 unless the contain body says
    // otherwise: what they create is private to its owner.
    let mut spec = CommandSpec {
        // The shell reads the line itself, quotes and all.
        argv: if shell { vec![line] } else { argv },
        shell,
        umask: Some(0o077),
        ..CommandSpec::default()
    };
    let Some(c) = contain else { return Ok(spec) };
    if let Some(owner) = c.scalar("exec_owner") {
        spec.uid = Some(
            super::files::perms::uid_of(owner)
                .ok_or_else(|| format!("unknown exec_owner '{owner}'"))?,
        );
    }
    if let Some(group) = c.scalar("exec_group") {
        spec.gid = Some(
            super::files::perms::gid_of(group)
                .ok_or_else(|| format!("unknown exec_group '{group}'"))?,
        );
    }
    if let Some(t) = c.scalar("exec_timeout") {
        let secs = crate::values::number::parse_int(t).map_err(|e| format!("exec_timeout: {e}"))?;
        spec.timeout = Some(Duration::from_secs(secs.max(1) as u64));
    }
    if let Some(u) = c.scalar("umask") {
        spec.umask =
            Some(u32::from_str_radix(u, 8).map_err(|_| format!("umask '{u}' is not octal"))?);
    }
    spec.chdir = c.scalar("chdir").map(str::to_string);
    spec.chroot = c.scalar("chroot").map(str::to_string);
    Ok(spec)
}

/// The outcomes from the return code, as cf-agent 3.21 judges it: when the
/// classes body lists return codes, the code is kept, repaired and failed
/// as each list holds it (a code in several lists has every one of their
/// outcomes, 00_basics/03_bodies/120.cf) and any other code failed;
/// otherwise 0 is repaired and anything else failed.
pub(crate) fn judge(
    classes: Option<&ResolvedBody>,
    code: i32,
    promiser: &str,
    located: &str,
) -> Vec<Outcome> {
    let listed = |attr: &str| -> Option<bool> {
        let codes = classes.map(|c| c.list(attr)).unwrap_or_default();
        (!codes.is_empty()).then(|| codes.iter().any(|x| x.trim().parse::<i32>() == Ok(code)))
    };
    let kept = listed("kept_returncodes");
    let repaired = listed("repaired_returncodes");
    let failed = listed("failed_returncodes");
    if kept.is_none() && repaired.is_none() && failed.is_none() {
        if code == 0 {
            return vec![Outcome::Repaired];
        }
        crate::error!(
            "Finished command related to promiser '{promiser}' -- an error occurred, returned {code}{located}"
        );
        return vec![Outcome::Failed];
    }
    let prefix = format!("Command related to promiser '{promiser}' returned code '{code}'");
    let mut outcomes = Vec::new();
    if kept == Some(true) {
        crate::info!("{prefix} defined as promise kept");
        outcomes.push(Outcome::Kept);
    }
    if repaired == Some(true) {
        crate::info!("{prefix} defined as promise repaired");
        outcomes.push(Outcome::Repaired);
    }
    if failed == Some(true) {
        crate::error!("{prefix} defined as promise failed{located}");
        outcomes.push(Outcome::Failed);
    }
    if outcomes.is_empty() {
        crate::info!(
            "{prefix} not defined as promise kept, not kept or repaired; setting to failed"
        );
        outcomes.push(Outcome::Failed);
    }
    outcomes
}

/// Module variables land in a scope named after the command's file name.
fn module_scope(program: &str) -> String {
    let base = program.rsplit('/').next().unwrap_or(program);
    crate::values::canon::canonify(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_like_cf_agent() {
        assert_eq!(quote_label("/usr/bin/id -un"), "usr/bin/id -un");
        assert_eq!(quote_label("/bin/echo hello ; x"), "/bin/echo hello");
        assert_eq!(quote_label("echo shell | tr a-z"), "echo shell | tr");
        assert_eq!(quote_label("/bin/pwd"), "/bin/pwd");
    }
}
