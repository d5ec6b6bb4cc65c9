//! The `--json` event stream is a contract for log shippers and fleet
//! dashboards. Its schema is docs/events.schema.json, against which every
//! event any integration test sees is checked (common::run). This test
//! also holds its own copy of the shape and reads the real output with
//! unknown fields denied, so any change to it fails here first.

use crate::common::*;
use serde::Deserialize;
use std::process::Command;

#[derive(Debug, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
#[allow(dead_code)]
enum Event {
    RunStart {
        version: String,
        commit: String,
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
    /// Added with issue 28: an `error:` line of the run, in
    /// OpenTelemetry's log field names.
    Error {
        severity_text: String,
        severity_number: u8,
        body: String,
    },
    RunEnd {
        status: String,
        kept: usize,
        repaired: usize,
        not_kept: usize,
        errors: usize,
        rollbacks: usize,
        exit_code: u8,
        duration_ms: f64,
    },
}

/// What every event carries besides its own fields (issue 28).
#[derive(Debug, Clone, PartialEq)]
struct Envelope {
    schema_version: u64,
    time_unix_nano: u64,
    run_id: String,
    hostname: String,
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
    enveloped(text).into_iter().map(|(_, e)| e).collect()
}

/// Each event with its envelope, which must be there.
fn enveloped(text: &str) -> Vec<(Envelope, Event)> {
    text.lines()
        .map(|l| {
            // Through a Value: the crate builds serde_json with
            // arbitrary_precision, which a tagged enum cannot read directly.
            let mut v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?} is not JSON: {e}"));
            let obj = v.as_object_mut().expect("an object");
            let mut take = |k: &str| {
                obj.remove(k)
                    .unwrap_or_else(|| panic!("line {l:?} has no {k}"))
            };
            let envelope = Envelope {
                schema_version: take("schema_version").as_u64().unwrap(),
                time_unix_nano: take("time_unix_nano").as_u64().unwrap(),
                run_id: take("run_id").as_str().unwrap().to_string(),
                hostname: take("hostname").as_str().unwrap().to_string(),
            };
            let e = serde_json::from_value(v)
                .unwrap_or_else(|e| panic!("line {l:?} does not fit the schema: {e}"));
            (envelope, e)
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
                errors: 0,
                exit_code: 0,
                ..
            })
        ),
        "{evs:?}"
    );
    // The report file holds the same events.
    let file = std::fs::read_to_string(&report_file).unwrap();
    assert_eq!(events(&file).len(), evs.len());
    // One envelope for the run: the schema's version, one run id, the
    // host's name, times that do not go back.
    let env = enveloped(&out.stdout);
    let first = &env[0].0;
    assert_eq!(first.schema_version, 1);
    assert_eq!(first.run_id.len(), 32, "{first:?}");
    assert!(!first.hostname.is_empty(), "{first:?}");
    for pair in env.windows(2) {
        assert_eq!(pair[1].0.run_id, first.run_id);
        assert_eq!(pair[1].0.hostname, first.hostname);
        assert!(pair[1].0.time_unix_nano >= pair[0].0.time_unix_nano);
    }
    // Another run, another id.
    let again = run(Command::new(agent_bin())
        .args(["-K", "--json", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert_ne!(enveloped(&again.stdout)[0].0.run_id, first.run_id);
}

/// A policy that does not load: its errors are events, the run still ends
/// with run_end, and the report file is written (issue 28).
#[test]
fn a_policy_that_does_not_load_ends_its_run() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = tmp.path().join("p.cf");
    std::fs::write(&policy, "bundle agent main {\n  reports:\n    \"x\"\n}\n").unwrap();
    let report_file = tmp.path().join("report.jsonl");
    let out = run(Command::new(agent_bin())
        .args(["-K", "--json", "--report-file"])
        .arg(&report_file)
        .arg("-w")
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(1), "{out:?}");
    let evs = events(&out.stdout);
    assert!(
        matches!(evs.first(), Some(Event::RunStart { .. })),
        "{evs:?}"
    );
    let errors: Vec<&String> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Error {
                body,
                severity_text,
                severity_number: 17,
            } if severity_text == "ERROR" => Some(body),
            _ => None,
        })
        .collect();
    assert!(!errors.is_empty(), "{evs:?}");
    assert!(
        matches!(
            evs.last(),
            Some(Event::RunEnd { status, exit_code: 1, errors: n, .. })
                if status == "error" && *n == errors.len()
        ),
        "{evs:?}"
    );
    let file = std::fs::read_to_string(&report_file).expect("the report file is written");
    assert_eq!(events(&file).len(), evs.len());
    // Without --json too.
    let plain_report = tmp.path().join("plain.jsonl");
    let out = run(Command::new(agent_bin())
        .args(["-K", "--report-file"])
        .arg(&plain_report)
        .arg("-w")
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(1), "{out:?}");
    let evs = events(&std::fs::read_to_string(&plain_report).unwrap());
    assert!(matches!(evs.last(), Some(Event::RunEnd { .. })), "{evs:?}");
}

/// An `error:` outside any promise is an error event before run_end.
#[test]
fn errors_of_the_run_are_events() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("missing-dir/f");
    let policy = tmp.path().join("p.cf");
    std::fs::write(
        &policy,
        format!(
            "bundle agent main\n{{\n  files:\n      \"{}\" edit_line => el;\n}}\nbundle edit_line el {{ insert_lines: \"x\"; }}\n",
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
    let evs = events(&out.stdout);
    let n = evs
        .iter()
        .filter(|e| matches!(e, Event::Error { .. }))
        .count();
    assert!(n >= 1, "{evs:?}");
    assert!(
        matches!(evs.last(), Some(Event::RunEnd { errors, .. }) if *errors == n),
        "{evs:?}"
    );
}

/// Every event the tests above saw fit docs/events.schema.json (checked
/// in common::run); this one checks a run of each kind of event at least.
#[test]
fn the_schema_file_describes_every_event() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("conf");
    std::fs::write(&target, "old\n").unwrap();
    let policy = tmp.path().join("p.cf");
    std::fs::write(
        &policy,
        format!(
            "body common control {{ bundlesequence => {{ \"r\", \"main\" }}; }}\nbundle agent r {{ reports: \"r\"; }}\nbundle agent main\n{{\n  meta:\n      \"tags\" slist => {{ \"transaction\" }};\n  files:\n      \"{}\" content => \"new\";\n  commands:\n      \"/bin/false\";\n}}\n",
            target.display()
        ),
    )
    .unwrap();
    let out = run(Command::new(agent_bin())
        .args(["-K", "--json", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    let n = validate_events(&out.stdout);
    let kinds: std::collections::BTreeSet<String> = out
        .stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["event"].as_str().unwrap().to_string()
        })
        .collect();
    for k in [
        "run_start",
        "report",
        "promise",
        "rollback",
        "error",
        "run_end",
    ] {
        assert!(kinds.contains(k), "no {k} event among {kinds:?}: {out:?}");
    }
    assert!(n >= 6);
    // And the schema refuses what it does not describe.
    let bad = r#"{"schema_version":1,"time_unix_nano":1,"run_id":"00000000000000000000000000000000","hostname":"h","event":"run_end","kept":1}"#;
    let caught = std::panic::catch_unwind(|| validate_events(bad));
    assert!(caught.is_err(), "a run_end without its counts passed");
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
