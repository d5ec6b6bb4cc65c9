//! What a run leaves for monitoring: `--metrics-file`, a Prometheus text
//! file for node_exporter's textfile collector, and the line cf-agent
//! appends to `promise_summary.log` in its work directory.

use super::Counts;
use std::fmt::Write;

/// One run, as monitoring sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetrics {
    pub counts: Counts,
    pub errors: usize,
    pub rollbacks: usize,
    pub duration_secs: f64,
    /// When the run ended, seconds since the epoch.
    pub end_secs: i64,
    pub exit_code: u8,
    /// The policy loaded and ran (not aborted, no load failure).
    pub success: bool,
    pub dry_run: bool,
}

/// A label value with `\`, `"` and newlines escaped, as the text format
/// wants them.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics in Prometheus' text exposition format, each family once
/// with its HELP and TYPE and no time stamps (node_exporter's textfile
/// collector refuses samples that carry one).
pub fn prometheus_text(m: &RunMetrics, version: &str, commit: &str) -> String {
    let mut out = String::new();
    let mut family = |name: &str, help: &str, samples: &[(&str, String)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    family(
        "convergent_promises",
        "Promises of the last run, by outcome (a dry run's would-be repairs count as repaired).",
        &[
            ("{outcome=\"kept\"}", m.counts.kept.to_string()),
            ("{outcome=\"repaired\"}", m.counts.repaired.to_string()),
            ("{outcome=\"not_kept\"}", m.counts.not_kept.to_string()),
        ],
    );
    family(
        "convergent_errors",
        "Error lines the last run logged.",
        &[("", m.errors.to_string())],
    );
    family(
        "convergent_rollbacks",
        "Transactions the last run undid.",
        &[("", m.rollbacks.to_string())],
    );
    family(
        "convergent_run_duration_seconds",
        "How long the last run took.",
        &[("", format!("{:.6}", m.duration_secs))],
    );
    family(
        "convergent_last_run_timestamp_seconds",
        "When the last run ended, seconds since the epoch.",
        &[("", m.end_secs.to_string())],
    );
    family(
        "convergent_last_run_exit_code",
        "The exit code of the last run.",
        &[("", m.exit_code.to_string())],
    );
    family(
        "convergent_last_run_success",
        "1 if the last run's policy loaded and ran to its end, else 0.",
        &[("", u8::from(m.success).to_string())],
    );
    family(
        "convergent_last_run_dry_run",
        "1 if the last run was a dry run (it changed nothing).",
        &[("", u8::from(m.dry_run).to_string())],
    );
    family(
        "convergent_build_info",
        "The agent that ran: its version and commit.",
        &[(
            &format!(
                "{{version=\"{}\",commit=\"{}\"}}",
                label(version),
                label(commit)
            ),
            "1".to_string(),
        )],
    );
    out
}

/// The line cf-agent 3.21 appends to WORKDIR/promise_summary.log after a
/// run: start and end times, the policy's version (body common control's
/// `version`), and the shares of promises kept, repaired and not repaired
/// (where a dry run's would-be repairs are counted). None for a run that
/// saw no promise, which cf-agent does not log either.
pub fn promise_summary_line(
    start_secs: i64,
    end_secs: i64,
    policy_version: Option<&str>,
    c: &Counts,
) -> Option<String> {
    let total = c.total();
    if total == 0 {
        return None;
    }
    let pct = |n: usize| 100.0 * n as f64 / total as f64;
    let repaired = c.repaired - c.warned;
    let not_repaired = c.not_kept + c.warned;
    Some(format!(
        "{start_secs},{end_secs}: Outcome of version {} (agent-0): Promises observed to be kept \
         {:.2}%, Promises repaired {:.2}%, Promises not repaired {:.2}%\n",
        policy_version.unwrap_or("(not specified)"),
        pct(c.kept),
        pct(repaired),
        pct(not_repaired)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_is_cf_agents() {
        let c = Counts {
            kept: 1,
            repaired: 1,
            not_kept: 1,
            warned: 0,
        };
        assert_eq!(
            promise_summary_line(1795739434, 1795739435, Some("1.2.3"), &c).unwrap(),
            "1795739434,1795739435: Outcome of version 1.2.3 (agent-0): Promises observed to be \
             kept 33.33%, Promises repaired 33.33%, Promises not repaired 33.33%\n"
        );
        // A dry run's would-be repairs are not repairs to cf-agent.
        let dry = Counts {
            kept: 1,
            repaired: 1,
            not_kept: 1,
            warned: 1,
        };
        assert!(promise_summary_line(1, 2, None, &dry).unwrap().ends_with(
            "version (not specified) (agent-0): Promises observed to be kept \
                            33.33%, Promises repaired 0.00%, Promises not repaired 66.67%\n"
        ));
        assert_eq!(promise_summary_line(1, 2, None, &Counts::default()), None);
    }
}
