//! `processes`: find processes by a regex on their command line (narrowed
//! by `process_select`), check their count, signal them, or define a class
//! when none runs.

use super::{ActContext, Actuator, ExpandedPromise, Outcome, ResolvedBody};
use crate::eval::Value;
use crate::eval::classes::{ClassInfo, canonify_class};
use crate::eval::value::Origin;
use crate::host::procs::{ProcessInfo, signal_number};

pub struct Processes;

impl Actuator for Processes {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let re = match act.ctx.regexes.get(&p.promiser) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("processes promise: {e}");
                return Outcome::Failed;
            }
        };
        let me = std::process::id() as i32;
        let mut found: Vec<ProcessInfo> = act
            .host
            .processes()
            .into_iter()
            .filter(|pr| pr.pid != me && re.is_match(&pr.command))
            .collect();
        if let Some(sel) = p.body("process_select") {
            let now = crate::pipeline::now_secs();
            found.retain(|pr| selected(act, sel, pr, now));
        }
        let mut outcome = Outcome::Kept;
        if let Some(count) = p.body("process_count") {
            let (lo, hi) = range(count.scalar("match_range").unwrap_or("0,999999999"));
            let n = found.len() as i64;
            let (attr, inside) = if lo <= n && n <= hi {
                ("in_range_define", true)
            } else {
                ("out_of_range_define", false)
            };
            for c in count.list(attr) {
                act.ctx.define_class(
                    &canonify_class(&c),
                    false,
                    ClassInfo::soft(Origin::Agent, Vec::new()),
                );
            }
            if !inside {
                tracing::info!(
                    "Process count for '{}' was out of promised range ({n} found)",
                    p.promiser
                );
            }
            // Counting is all a process_count promise does.
            return outcome;
        }
        if found.is_empty() {
            if let Some(Value::Scalar(class)) = p.value("restart_class") {
                act.ctx.define_class(
                    &canonify_class(class),
                    false,
                    ClassInfo::soft(Origin::Agent, Vec::new()),
                );
                tracing::info!("Making a one-time restart promise for '{}'", p.promiser);
                outcome = Outcome::Repaired;
            }
            return outcome;
        }
        if let Some(stop) = p.scalar("process_stop") {
            if act.dry_run {
                tracing::warn!("Should run '{stop}' to stop '{}'", p.promiser);
                return Outcome::Warned;
            }
            let argv = crate::host::exec::split_command_line(stop);
            let spec = crate::host::exec::CommandSpec {
                argv,
                ..Default::default()
            };
            return match act.host.run(&spec) {
                Ok(r) if r.code == Some(0) => {
                    tracing::info!("Ran '{stop}' to stop '{}'", p.promiser);
                    Outcome::Repaired
                }
                Ok(r) => {
                    tracing::error!("Stop command '{stop}' returned {:?}", r.code);
                    Outcome::Failed
                }
                Err(e) => {
                    tracing::error!("Could not run stop command '{stop}': {e}");
                    Outcome::Failed
                }
            };
        }
        let signals = match p.value("signals") {
            Some(Value::List(l)) => l.clone(),
            Some(Value::Scalar(s)) => vec![s.clone()],
            _ => Vec::new(),
        };
        for sig in &signals {
            let Some(num) = signal_number(sig) else {
                tracing::error!(
                    "Unknown signal '{sig}' in processes promise '{}'",
                    p.promiser
                );
                outcome = Outcome::Failed;
                continue;
            };
            for pr in &found {
                if act.dry_run {
                    tracing::warn!(
                        "Should signal '{sig}' ({num}) to process {} ({})",
                        pr.pid,
                        pr.command
                    );
                    outcome = outcome.worst(Outcome::Warned);
                    continue;
                }
                match act.host.signal(pr.pid, num) {
                    Ok(()) => {
                        tracing::info!(
                            "Signalled '{sig}' ({num}) to process {} ({})",
                            pr.pid,
                            pr.command
                        );
                        if outcome == Outcome::Kept {
                            outcome = Outcome::Repaired;
                        }
                    }
                    Err(e) => {
                        tracing::error!("Could not signal '{sig}' to process {}: {e}", pr.pid);
                        outcome = Outcome::Failed;
                    }
                }
            }
        }
        outcome
    }
}

/// `"a,b"` as irange() prints it.
fn range(s: &str) -> (i64, i64) {
    let mut parts = s
        .split(',')
        .map(|x| crate::eval::promises::parse_int(x.trim()).ok());
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

/// Whether a process passes `process_select`; the criteria given combine
/// with `process_result` (default: all of them).
fn selected(act: &mut ActContext<'_>, body: &ResolvedBody, pr: &ProcessInfo, now: i64) -> bool {
    let mut results: Vec<(&str, bool)> = Vec::new();
    let owners = body.list("process_owner");
    if !owners.is_empty() {
        let ok = owners
            .iter()
            .any(|o| super::files::perms::uid_of(o) == Some(pr.uid));
        results.push(("process_owner", ok));
    }
    for (attr, v) in [
        ("pid", pr.pid as i64),
        ("ppid", pr.ppid as i64),
        ("pgid", pr.pgid as i64),
        ("priority", pr.nice),
        ("threads", pr.threads),
        ("rsize", pr.rsize_kb as i64),
        ("vsize", pr.vsize_kb as i64),
        ("ttime_range", pr.ttime_secs as i64),
        ("stime_range", now - pr.stime),
    ] {
        if let Some(ok) = in_range(body, attr, v) {
            results.push((attr, ok));
        }
    }
    if let Some(pattern) = body.scalar("command") {
        let ok = act
            .ctx
            .regexes
            .get(pattern)
            .is_ok_and(|r| r.is_full_match(&pr.command));
        results.push(("command", ok));
    }
    if let Some(pattern) = body.scalar("status") {
        let ok = act
            .ctx
            .regexes
            .get(pattern)
            .is_ok_and(|r| r.is_full_match(&pr.status));
        results.push(("status", ok));
    }
    match body.scalar("process_result") {
        Some(expr) => crate::syntax::classexpr::ClassExpr::parse(expr)
            .map(|e| e.eval(&mut |n| results.iter().any(|(k, v)| *k == n && *v)))
            .unwrap_or(false),
        None => results.iter().all(|(_, v)| *v),
    }
}
