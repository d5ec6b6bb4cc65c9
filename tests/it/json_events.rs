//! The `--json` event stream is a contract for log shippers and fleet
//! dashboards. This test holds its own copy of the schema and reads the
//! real output with unknown fields denied, so any change to the shape
//! fails here first.

use crate::common::*;
use serde::Deserialize;
use std::process::Command;

#[derive(Debug, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
#[allow(dead_code)]
enum Event {
    RunStart {
        time: i64,
        version: String,
        policy: String,
        workdir: String,
        dry_run: bool,
    },
    Report {
        text: String,
    },
    Promise {
        bundle: String,
        namespace: String,
        promise_type: String,
        promiser: String,
        handle: Option<String>,
        file: String,
        line: usize,
        outcome: String,
        changes: Vec<Change>,
        duration_ms: f64,
    },
    /// Added with transactional bundles (issue 9, part 2): a transaction
    /// that failed, or one a killed run left and this run undid first.
    Rollback {
        bundle: String,
        namespace: String,
        reason: String,
        restored: Vec<String>,
        failed: Vec<String>,
        recovered: bool,
    },
    RunEnd {
        kept: usize,
        repaired: usize,
        not_kept: usize,
        duration_ms: f64,
    },
}

/// What a promise changed, or would have (issue 19: records, not log lines).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Change {
    what: String,
    path: String,
    before: Option<String>,
    after: Option<String>,
    applied: bool,
    message: String,
}

fn events(text: &str) -> Vec<Event> {
    text.lines()
        .map(|l| {
            // Through a Value: the crate builds serde_json with
            // arbitrary_precision, which a tagged enum cannot read directly.
            serde_json::from_str::<serde_json::Value>(l)
                .and_then(serde_json::from_value)
                .unwrap_or_else(|e| panic!("line {l:?} does not fit the schema: {e}"))
        })
        .collect()
}

#[test]
fn json_events_follow_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("made.txt");
    let policy = tmp.path().join("p.cf");
    std::fs::write(
        &policy,
        format!(
            "bundle agent main\n{{\n  files:\n      \"{}\" create => \"true\", handle => \"mk\";\n  reports:\n      \"hello\";\n}}\n",
            target.display()
        ),
    )
    .unwrap();
    let report_file = tmp.path().join("report.jsonl");
    let out = run(Command::new(agent_bin())
        .args(["-K", "--json", "--report-file"])
        .arg(&report_file)
        .arg("-w")
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(0), "{out:?}");
    let evs = events(&out.stdout);
    assert!(
        matches!(evs.first(), Some(Event::RunStart { dry_run: false, .. })),
        "{evs:?}"
    );
    let promise = evs
        .iter()
        .find_map(|e| match e {
            Event::Promise {
                promise_type,
                outcome,
                changes,
                handle,
                line,
                ..
            } if promise_type == "files" => {
                Some((outcome.clone(), changes.clone(), handle.clone(), *line))
            }
            _ => None,
        })
        .expect("a files promise event");
    assert_eq!(promise.0, "repaired");
    assert_eq!(promise.2.as_deref(), Some("mk"));
    assert_eq!(promise.3, 4);
    assert!(
        promise
            .1
            .iter()
            .any(|c| c.what == "create" && c.applied && c.message.starts_with("Created file")),
        "{promise:?}"
    );
    assert!(
        evs.iter()
            .any(|e| matches!(e, Event::Report { text } if text == "hello"))
    );
    assert!(
        matches!(
            evs.last(),
            Some(Event::RunEnd {
                repaired: 1,
                kept: 1,
                not_kept: 0,
                ..
            })
        ),
        "{evs:?}"
    );
    // The report file holds the same events.
    let file = std::fs::read_to_string(&report_file).unwrap();
    assert_eq!(events(&file).len(), evs.len());
}

#[test]
fn dry_run_json_with_detailed_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("never.txt");
    let policy = tmp.path().join("p.cf");
    std::fs::write(
        &policy,
        format!(
            "bundle agent main {{ files: \"{}\" create => \"true\"; }}\n",
            target.display()
        ),
    )
    .unwrap();
    let out = run(Command::new(agent_bin())
        .args(["-K", "--dry-run", "--json", "--detailed-exitcodes", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert!(!target.exists());
    assert_eq!(out.code, Some(2), "a change that would be made: {out:?}");
    let evs = events(&out.stdout);
    assert!(
        evs.iter()
            .any(|e| matches!(e, Event::Promise { outcome, .. } if outcome == "warned"))
    );
    assert!(
        out.stderr.contains("Should create file"),
        "logs go to stderr: {out:?}"
    );
}

#[test]
fn a_failed_transaction_is_a_rollback_event() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("conf");
    std::fs::write(&target, "old\n").unwrap();
    let policy = tmp.path().join("p.cf");
    std::fs::write(
        &policy,
        format!(
            "bundle agent main\n{{\n  meta:\n      \"tags\" slist => {{ \"transaction\" }};\n  files:\n      \"{}\" content => \"new\";\n  commands:\n      \"/bin/false\";\n}}\n",
            target.display()
        ),
    )
    .unwrap();
    let out = run(Command::new(agent_bin())
        .args(["-K", "--json", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old\n");
    let evs = events(&out.stdout);
    let rollback = evs
        .iter()
        .find_map(|e| match e {
            Event::Rollback {
                bundle,
                reason,
                restored,
                failed,
                recovered,
                ..
            } => Some((bundle, reason, restored, failed, *recovered)),
            _ => None,
        })
        .expect("a rollback event");
    assert_eq!(rollback.0, "main");
    assert!(rollback.1.contains("'/bin/false'"), "{rollback:?}");
    assert_eq!(rollback.2.len(), 1, "{rollback:?}");
    assert!(rollback.3.is_empty() && !rollback.4, "{rollback:?}");
    // The rollback comes before the end of the run.
    assert!(matches!(evs.last(), Some(Event::RunEnd { .. })), "{evs:?}");
}
