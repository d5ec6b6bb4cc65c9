//! `--why`'s answer, from the why-records the last run kept (see
//! `agent::why`).

use crate::agent::why::{PromiseRecord, Status, WhyLog};

/// `--why`'s answer for the promises a query found.
pub fn render(log: &WhyLog, query: &str, found: &[&PromiseRecord]) -> String {
    let mut out = String::new();
    let run = if log.dry_run { "dry run" } else { "run" };
    for p in found {
        let handle = p
            .handle
            .as_ref()
            .map(|h| format!(", handle '{h}'"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{} promise '{}' in bundle {}:{} ({}:{}{handle}), in the last {run} of {}:\n",
            p.promise_type, p.promiser, p.namespace, p.bundle, p.file, p.line, log.policy
        ));
        for it in &p.iterations {
            match &it.status {
                Status::Ran { outcome, changes } => {
                    let verb = match &**outcome {
                        "kept" => "ran; it was already as promised (kept)".to_string(),
                        "repaired" => "ran and repaired".to_string(),
                        "warned" => "ran; it would have changed something (warned: dry run or \
                             action_policy => \"warn\")"
                            .to_string(),
                        other => format!("ran and failed ({other})"),
                    };
                    out.push_str(&format!("  '{}': {verb}\n", it.promiser));
                    for c in changes {
                        out.push_str(&format!("      {c}\n"));
                    }
                }
                Status::Skipped { reason } => {
                    out.push_str(&format!("  '{}': skipped: {reason}\n", it.promiser));
                }
            }
        }
    }
    if found.is_empty() {
        out.push_str(&format!(
            "no promise matching '{query}' was reached in the last {run} of {} (its bundle did not \
             run, or the handle or FILE:LINE is not a promise's; vars, classes and meta promises \
             are not recorded)\n",
            log.policy
        ));
    }
    out
}
