//! Cron safety: promise locks (`ifelapsed`), the one-agent-per-workdir
//! lock, and a state store that survives a kill.

mod common;

use common::*;
use convergent::state::RunLock;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const REPORT: &str = "bundle agent main { reports: \"hello\"; }\n";

#[test]
fn a_second_run_within_ifelapsed_skips_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(tmp.path(), REPORT);
    let wd = tmp.path().join("wd");
    let first = run(Command::new(agent_bin())
        .arg("-w")
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(first.stdout, "R: hello\n");
    let second = run(Command::new(agent_bin())
        .args(["-I", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert!(!second.stdout.contains("R: hello"), "{second:?}");
    assert!(
        second
            .stdout
            .contains("Skipping reports promise 'hello' in bundle 'main'")
            && second.stdout.contains("minute(s) left"),
        "{second:?}"
    );
    let forced = run(Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(forced.stdout, "R: hello\n");
}

#[test]
fn ifelapsed_zero_never_skips() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        "bundle agent main { reports: \"hello\" action => now; }\nbody action now { ifelapsed => \"0\"; }\n",
    );
    let wd = tmp.path().join("wd");
    for _ in 0..2 {
        let out = run(Command::new(agent_bin())
            .arg("-w")
            .arg(&wd)
            .arg("-f")
            .arg(&policy));
        assert_eq!(out.stdout, "R: hello\n");
    }
}

#[test]
fn a_busy_workdir_is_refused_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(tmp.path(), REPORT);
    let wd = tmp.path().join("wd");
    let held = RunLock::acquire(&wd, Duration::ZERO).unwrap();
    let out = run(Command::new(agent_bin())
        .args(["-K", "--wait-for-lock", "0", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(!out.stdout.contains("R: hello"));
    assert!(
        out.stdout.contains(&format!(
            "another agent (pid {}) is running",
            std::process::id()
        )),
        "{out:?}"
    );
    drop(held);
    let out = run(Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.stdout, "R: hello\n");
}

#[test]
fn a_killed_run_leaves_a_usable_state_store() {
    let tmp = tempfile::tempdir().unwrap();
    // Enough promises that the run is still going when it is killed.
    let mut text = String::from("bundle agent main\n{\n  reports:\n");
    for i in 0..60_000 {
        text.push_str(&format!("    \"line {i}\";\n"));
    }
    text.push_str("}\n");
    let policy = write_policy(tmp.path(), &text);
    let wd = tmp.path().join("wd");
    // Leave lock records behind first, so there is state to keep intact.
    let small = tmp.path().join("small.cf");
    std::fs::write(&small, REPORT).unwrap();
    run(Command::new(agent_bin())
        .arg("-w")
        .arg(&wd)
        .arg("-f")
        .arg(&small));
    let mut child = Command::new(agent_bin())
        .arg("-w")
        .arg(&wd)
        .arg("-f")
        .arg(&policy)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    // The next run starts at once (the kernel released the run lock) and the
    // earlier lock record is still honoured.
    let out = run(Command::new(agent_bin())
        .args(["-I", "--wait-for-lock", "0", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&small));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("Skipping reports promise 'hello'"),
        "{out:?}"
    );
    let db = rusqlite_check(&wd.join("state/convergent.db"));
    assert_eq!(db, "ok");
}

/// SQLite's own verdict on the database file.
fn rusqlite_check(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
        .unwrap()
}

#[test]
fn detailed_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(tmp.path(), REPORT);
    let wd = tmp.path().join("wd");
    let out = run(Command::new(agent_bin())
        .args(["-K", "--detailed-exitcodes", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(0), "a report is kept: {out:?}");
    let missing = run(Command::new(agent_bin())
        .args(["-K", "--detailed-exitcodes", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(tmp.path().join("nope.cf")));
    assert_eq!(missing.code, Some(1), "{missing:?}");
}
