//! `processes`: find processes by a regex on their line in the process
//! table (narrowed by `process_select`), check their count, stop or signal
//! them, and define a class for a restart, with cf-agent 3.21's outcomes:
//! a count out of range is a repair; a promise that did not restart
//! anything is also kept (both classes are defined); signals and a stop
//! command are repairs.

use super::{ActContext, Actuator, Applied};
use crate::report::change::{Change, Decision};

use crate::eval::expanded::ExpandedPromise;

use crate::eval::bodies::ResolvedBody;

use crate::eval::classes::ClassInfo;
use crate::host::exec::{CommandSpec, NotExecutable, check_executable, split_command_line};
use crate::host::procs::{ProcessInfo, signal_number};
use crate::report::Outcome;
use crate::values::Value;
use crate::values::canon::canonify_class;
use crate::values::value::Origin;

pub struct Processes;

fn signals_of(p: &ExpandedPromise) -> Vec<String> {
    match p.value("signals") {
        Some(Value::List(l)) => l.clone(),
        Some(Value::Scalar(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// The `(min, max)` of `match_range`, if the promise counts.
fn count_range(p: &ExpandedPromise) -> Option<(i64, i64)> {
    p.body("process_count")
        .and_then(|c| c.scalar("match_range"))
        .map(range)
}

impl Actuator for Processes {
    fn speaks_each_pass(&self) -> bool {
        true
    }

    /// cf-agent checks a processes promise's constraints each time it meets
    /// it, in every pass, whether or not it acts again.
    fn check_each_pass(&self, p: &ExpandedPromise) {
        let restart = p.scalar("restart_class").is_some();
        let signals = signals_of(p);
        if restart {
            if signals.iter().any(|s| s == "term" || s == "kill") {
                crate::warn!(
                    "Promise '{}' kills then restarts - never strictly converges",
                    p.promiser
                );
                crate::info!("{}", p.reference());
            }
            if p.body("process_count").is_some() {
                crate::error!(
                    "process_count and restart_class should not be used in the same promise as this makes no sense"
                );
                crate::info!("{}", p.reference());
            }
            if count_range(p) == Some((0, 0)) {
                crate::error!(
                    "Promise constraint conflicts - '{}' processes cannot have zero count if restarted",
                    p.promiser
                );
                crate::error!("{}", p.reference());
            }
        }
        if p.body("process_select")
            .is_some_and(|s| s.scalar("process_result").is_none())
        {
            crate::error!(
                "Process select constraint body promised no result (check body definition)"
            );
            crate::error!("{}", p.reference());
        }
    }

    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let re = match act.ctx.regex(&p.promiser) {
            Ok(r) => r,
            Err(e) => {
                crate::error!(
                    "processes promise '{}' ({}:{}): {e}",
                    p.promiser,
                    p.file,
                    p.line
                );
                return Outcome::Failed;
            }
        };
        let signals = signals_of(p);
        let now = crate::host::clock::now_secs();
        let me = std::process::id() as i32;
        // As cf-agent: init only ever gets a lone HUP, pids below 4 and
        // the agent itself no signal at all; without signals they count.
        let only_hup = signals.len() == 1 && signals[0] == "hup";
        let table = act.host.processes();
        let mut found: Vec<(ProcessInfo, String)> = Vec::new();
        for pr in table {
            let line = pr.ps_line(now);
            if !re.is_match(&line) {
                continue;
            }
            if let Some(sel) = p.body("process_select")
                && !selected(act, sel, &pr)
            {
                continue;
            }
            if !signals.is_empty() && ((pr.pid == 1 && !only_hup) || pr.pid < 4) {
                continue;
            }
            if pr.pid == me && !signals.is_empty() {
                continue;
            }
            crate::debug!("Matched '{line}'");
            found.push((pr, line));
        }
        // cf-agent signals the matches newest entry first.
        found.reverse();
        let matches = found.len() as i64;

        let mut outcome = Outcome::Kept;
        if let Some((lo, hi)) = count_range(p) {
            let count = p.body("process_count").expect("counted above");
            let inside = lo <= matches && matches <= hi;
            let attr = if inside {
                "in_range_define"
            } else {
                "out_of_range_define"
            };
            for c in count.list(attr) {
                act.ctx.define_class(
                    &canonify_class(&c),
                    false,
                    ClassInfo::soft(Origin::Agent, vec!["source=promise".into()]),
                );
            }
            if inside {
                crate::debug!("Process promise for '{}' is kept", p.promiser);
                return Outcome::Kept;
            }
            crate::debug!(
                "Process count for '{}' was out of promised range ({matches} found)",
                p.promiser
            );
            outcome = Outcome::Repaired;
        }

        // A promise that only warns neither stops nor signals, silently.
        let mut killed = false;
        if matches > 0 {
            if let Some(stop) = p.scalar("process_stop") {
                match self.stop(act, p, stop) {
                    Some(o) => outcome = outcome.worst(o),
                    None => return Outcome::Failed,
                }
            }
            for (pr, line) in &found {
                for sig in &signals {
                    let Some(num) = signal_number(sig) else {
                        crate::error!(
                            "Unknown signal '{sig}' in processes promise '{}' ({}:{})",
                            p.promiser,
                            p.file,
                            p.line
                        );
                        outcome = outcome.worst(Outcome::Failed);
                        continue;
                    };
                    let change = Change::new("signal", pr.pid.to_string())
                        .after(sig.to_string())
                        .done(format!(
                            "Signalled '{sig}' ({num}) to process {} ({line})",
                            pr.pid
                        ))
                        .should(format!(
                            "Need to keep signal promise '{sig}' in process entry '{line}'"
                        ))
                        .without_suffix()
                        .withheld_as_error()
                        .silent_when_warning();
                    match act.change(change, |h| h.signal(pr.pid, num)) {
                        Applied::Made(()) => {
                            killed |= num == libc::SIGKILL || num == libc::SIGTERM;
                            outcome = outcome.worst(Outcome::Repaired);
                        }
                        Applied::Withheld { .. } => {}
                        Applied::Failed(e) => {
                            killed |= num == libc::SIGKILL || num == libc::SIGTERM;
                            crate::debug!(
                                "Couldn't send promised signal '{sig}' ({num}) to pid {} (might be dead). (kill: {e})",
                                pr.pid
                            );
                            outcome = outcome.worst(Outcome::Failed);
                        }
                    }
                }
            }
        }

        match p.scalar("restart_class") {
            Some(class) if killed || matches == 0 => {
                // A dry run defines the class as a real run; a promise that
                // only warns does not.
                let change = Change::new("restart_class", class)
                    .should_when_warning(format!(
                        "Need to keep restart promise for '{}', but only a warning is promised",
                        p.promiser
                    ))
                    .withheld_as_error()
                    .previewed();
                if let Decision::Withheld { .. } = act.changes.plan(&change) {
                    return outcome.worst(Outcome::Warned);
                }
                act.changes.made(change);
                act.ctx.define_class(
                    &canonify_class(class),
                    false,
                    ClassInfo::soft(Origin::Agent, vec!["source=promise".into()]),
                );
            }
            _ => {
                // "No restart promised": cf-agent counts that step as kept,
                // beside whatever else the promise did.
                crate::debug!("No restart promised for {}", p.promiser);
                if outcome != Outcome::Kept {
                    act.reported_outcomes = Some(vec![outcome, Outcome::Kept]);
                }
            }
        }
        outcome
    }
}

impl Processes {
    /// Runs `process_stop` (its result is not judged, as cf-agent); `None`
    /// when the promise fails because the stop command cannot run.
    fn stop(&self, act: &mut ActContext<'_>, p: &ExpandedPromise, stop: &str) -> Option<Outcome> {
        // A promise that only warns does not stop, silently.
        let change = Change::new("stop", &p.promiser)
            .after(stop)
            .should(format!(
                "Need to keep process-stop promise for '{}', but only a warning is promised",
                p.promiser
            ))
            .without_suffix()
            .withheld_as_error()
            .silent_when_warning()
            .when_warning_ends(Outcome::Kept);
        if let Decision::Withheld { outcome, .. } = act.changes.plan(&change) {
            return Some(outcome);
        }
        act.changes.made(change);
        let argv = split_command_line(stop);
        let program = argv.first().cloned().unwrap_or_default();
        if let Err(e) = check_executable(&program) {
            if e == NotExecutable::Missing {
                crate::error!("Proposed executable file '{program}' doesn't exist");
            }
            crate::error!(
                "Process promise to stop '{}' could not be kept because '{stop}' is not executable",
                p.promiser
            );
            return None;
        }
        let spec = CommandSpec {
            argv,
            ..Default::default()
        };
        match act.host.run(&spec) {
            Ok(r) if r.code == Some(0) => {
                crate::info!(
                    "Promise to stop '{}' repaired, '{stop}' returned zero",
                    p.promiser
                );
                Some(Outcome::Repaired)
            }
            Ok(r) => {
                crate::error!(
                    "Promise to stop '{}' not repaired, '{stop}' returned {}",
                    p.promiser,
                    r.code.map_or("a signal".to_string(), |c| c.to_string())
                );
                Some(Outcome::Failed)
            }
            Err(e) => {
                crate::error!("Could not run stop command '{stop}': {e}");
                Some(Outcome::Failed)
            }
        }
    }
}

/// `"a,b"` as irange() prints it.
fn range(s: &str) -> (i64, i64) {
    let mut parts = s
        .split(',')
        .map(|x| crate::values::number::parse_int(x.trim()).ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b),
        (Some(a), None) => (a, a),
        _ => (0, i64::MAX),
    }
}

fn in_range(body: &ResolvedBody, attr: &str, v: i64) -> Option<bool> {
    body.scalar(attr).map(|r| {
        let (lo, hi) = range(r);
        lo <= v && v <= hi
    })
}

/// Whether a process passes `process_select`: each criterion given is
/// tested, and `process_result` combines them by name (cf-agent defines
/// no result without one).
fn selected(act: &mut ActContext<'_>, body: &ResolvedBody, pr: &ProcessInfo) -> bool {
    let mut results: Vec<(&str, bool)> = Vec::new();
    let owners = body.list("process_owner");
    if !owners.is_empty() {
        let ok = owners
            .iter()
            .any(|o| super::files::perms::uid_of(o) == Some(pr.uid));
        results.push(("process_owner", ok));
    }
    for (attr, name, v) in [
        ("pid", "pid", pr.pid as i64),
        ("ppid", "ppid", pr.ppid as i64),
        ("pgid", "pgid", pr.pgid as i64),
        ("priority", "priority", pr.nice),
        ("threads", "threads", pr.threads),
        ("rsize", "rsize", pr.rsize_kb as i64),
        ("vsize", "vsize", pr.vsize_kb as i64),
        ("ttime_range", "ttime", pr.ttime_secs as i64),
        // cf-agent compares the start time itself, seconds since the epoch.
        ("stime_range", "stime", pr.stime),
    ] {
        if let Some(ok) = in_range(body, attr, v) {
            results.push((name, ok));
        }
    }
    let tty = pr.tty_name();
    for (attr, value) in [("command", &pr.command), ("tty", &tty)] {
        if let Some(pattern) = body.scalar(attr) {
            let ok = act.ctx.regex(pattern).is_ok_and(|r| r.is_full_match(value));
            results.push((attr, ok));
        }
    }
    // cf-agent 3.21 selects by `status` in the STAT column of its process
    // table, which its `ps` columns on Linux do not include: there a
    // `status` selects no process, whatever the pattern.
    if body.scalar("status").is_some() {
        crate::debug!(
            "process_select status: the process table has no state column on Linux, nothing is selected by it"
        );
        results.push(("status", false));
    }
    match body.scalar("process_result") {
        Some(expr) => crate::syntax::classexpr::ClassExpr::parse(expr)
            .map(|e| e.eval(&mut |n| results.iter().any(|(k, v)| *k == n && *v)))
            .unwrap_or(false),
        None => false,
    }
}
