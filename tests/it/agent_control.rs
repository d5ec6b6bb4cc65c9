//! `body agent control`: `abortclasses`, `abortbundleclasses` and
//! `editfilesize`, run by our agent and, when it is installed, by
//! `cf-agent -K` on the same policy: the same report and log lines and the
//! same exit code.

use crate::common::*;
use std::path::Path;
use std::process::Command;

const ABORTS: &str = r#"
body agent control {
  abortclasses => { "stop_.*" };
  abortbundleclasses => { "skip_rest" };
}
bundle agent main {
  methods: "a" usebundle => b; "c" usebundle => c; "d" usebundle => d;
  reports: "main end";
}
bundle agent b {
  classes: "skip_rest" expression => "any";
  reports: "b report";
}
bundle agent c {
  reports: "c report";
}
bundle agent d {
  classes: "stop_now" expression => "any";
  reports: "d after";
}
"#;

/// The `R:`, error and notice lines of a run, without paths.
fn lines(out: &Captured) -> Vec<String> {
    out.stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.starts_with("R: ") || l.contains("error:") || l.contains("notice:"))
        .map(|l| l.trim().to_string())
        .collect()
}

fn run_both(dir: &Path, policy: &str) -> (Captured, Option<Captured>) {
    let file = write_policy(dir, policy);
    let ours = run(Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(dir.join("wd"))
        .arg("-f")
        .arg(&file));
    let reference = if have("cf-agent") {
        Some(run(Command::new("cf-agent")
            .args(["-K", "-w"])
            .arg(cf_workdir(dir))
            .arg("-f")
            .arg(&file)))
    } else {
        eprintln!("skipped the cf-agent comparison: cf-agent is not installed");
        None
    };
    (ours, reference)
}

#[test]
fn abort_classes_stop_the_bundle_or_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ours, reference) = run_both(dir.path(), ABORTS);
    assert_eq!(
        lines(&ours),
        [
            "error: Bundle 'b' aborted on defined class 'skip_rest'",
            "R: c report",
            "notice: cf-agent aborted on defined class 'stop_now'",
        ],
        "{ours:?}"
    );
    assert_eq!(ours.code, Some(6), "{ours:?}");
    if let Some(r) = reference {
        assert_eq!(lines(&ours), lines(&r), "cf-agent: {r:?}");
        assert_eq!(ours.code, r.code, "cf-agent: {r:?}");
    }
}

#[test]
fn editfilesize_lifts_the_edit_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big.txt");
    let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&big, &text).expect("write big file");
    let policy = format!(
        r#"
body agent control {{ editfilesize => "0"; }}
body edit_defaults nobackup {{ edit_backup => "false"; }}
bundle agent main {{
  files: "{}" edit_line => add, edit_defaults => nobackup;
}}
bundle edit_line add {{ insert_lines: "the end"; }}
"#,
        big.display()
    );
    let (ours, reference) = run_both(dir.path(), &policy);
    assert_eq!(ours.code, Some(0), "{ours:?}");
    assert!(lines(&ours).is_empty(), "{ours:?}");
    let after = std::fs::read_to_string(&big).expect("read big file");
    if let Some(r) = reference {
        // cf-agent edited the file too: ours added the line once, and
        // cf-agent's run found it there.
        assert!(lines(&r).is_empty(), "cf-agent: {r:?}");
    }
    assert_eq!(after, format!("{text}the end\n"));
}
