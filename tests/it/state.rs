//! Cron safety: promise locks (`ifelapsed`), the one-agent-per-workdir
//! lock, and a state store that survives a kill.

use crate::common::*;
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

/// Another agent holds the work directory (a sibling, not an ancestor:
/// an ancestor's lock is its child's, see the nested test below).
#[test]
fn a_busy_workdir_is_refused_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    let mark = tmp.path().join("mark");
    let holder_policy = tmp.path().join("holder.cf");
    std::fs::write(
        &holder_policy,
        format!(
            "body common control {{ bundlesequence => {{ \"main\" }}; }}\nbundle agent main\n{{\n  commands:\n      \"/bin/sh -c 'touch {mark}; sleep 3'\" contain => shell;\n}}\nbody contain shell {{ useshell => \"useshell\"; }}\n",
            mark = mark.display()
        ),
    )
    .unwrap();
    let holder = Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&holder_policy)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let begun = std::time::Instant::now();
    while !mark.exists() {
        assert!(
            begun.elapsed() < Duration::from_secs(20),
            "the holder never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let policy = write_policy(tmp.path(), REPORT);
    let out = run(Command::new(agent_bin())
        .args(["-K", "--wait-for-lock", "0", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(!out.stdout.contains("R: hello"));
    assert!(
        out.stdout
            .contains(&format!("another agent (pid {}) is running", holder.id())),
        "{out:?}"
    );
    holder.wait_with_output().unwrap();
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

/// Two agents started together on one work directory with a policy that
/// takes a while (a command sleeping): they run one after the other, never
/// interleaved, and a third that will not wait is turned away with the
/// reason.
#[test]
fn two_agents_on_one_workdir_run_one_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");
    let policy = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n  commands:\n      \"/bin/sh -c 'echo start >> {log}; sleep 2; echo end >> {log}'\" contain => shell;\n  reports:\n      \"done\";\n}}\nbody contain shell {{ useshell => \"useshell\"; }}\n",
            log = log.display()
        ),
    );
    let wd = tmp.path().join("wd");
    let start = |wait: &str| {
        Command::new(agent_bin())
            .args(["-K", "--wait-for-lock", wait, "-w"])
            .arg(&wd)
            .arg("-f")
            .arg(&policy)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = start("60");
    let second = start("60");
    // Wait until one of them is inside its command.
    let begun = std::time::Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("start")) {
        assert!(
            begun.elapsed() < Duration::from_secs(20),
            "no agent started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let impatient = run(Command::new(agent_bin())
        .args(["-K", "--wait-for-lock", "0", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(impatient.code, Some(1), "{impatient:?}");
    assert!(!impatient.stdout.contains("R: done"), "{impatient:?}");
    assert!(
        impatient.stdout.contains("another agent (pid ")
            && impatient.stdout.contains("is running on work directory"),
        "{impatient:?}"
    );
    for child in [first, second] {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(stdout.contains("R: done"), "{stdout}");
    }
    // Each run's command ran from start to end before the other began.
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "start\nend\nstart\nend\n"
    );
}

/// The permission bits of a path.
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .mode()
        & 0o7777
}

/// Issue 14: what the agent keeps for itself is private, as cf-agent's
/// is: the work and state directories 0700, the state database, the run
/// lock and the record for `--why` 0600.
#[test]
fn the_workdir_and_its_state_are_private() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(tmp.path(), REPORT);
    let wd = tmp.path().join("wd");
    let out = run(Command::new(agent_bin())
        .arg("-w")
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(mode_of(&wd), 0o700, "work directory");
    assert_eq!(mode_of(&wd.join("state")), 0o700, "state directory");
    for f in ["convergent.db", "agent.lock"] {
        assert_eq!(mode_of(&wd.join("state").join(f)), 0o600, "{f}");
    }
    // Every file the run left in the state directory (the why record,
    // SQLite's side files) is private.
    for e in std::fs::read_dir(wd.join("state")).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            assert_eq!(mode_of(&p), 0o600, "{}", p.display());
        }
    }
}

/// An older agent left the state directory and database readable by all;
/// the next run tightens them.
#[test]
fn an_existing_open_state_is_tightened() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(tmp.path(), REPORT);
    let wd = tmp.path().join("wd");
    run(Command::new(agent_bin())
        .arg("-w")
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    let state = wd.join("state");
    let db = state.join("convergent.db");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    run(Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(mode_of(&state), 0o700);
    assert_eq!(mode_of(&db), 0o600);
}

/// The report file holds expanded command lines: 0600, even when it
/// replaces a file others could read.
#[test]
fn the_report_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(tmp.path(), REPORT);
    let wd = tmp.path().join("wd");
    let report = tmp.path().join("report.jsonl");
    std::fs::write(&report, "old\n").unwrap();
    std::fs::set_permissions(&report, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(Command::new(agent_bin())
        .arg("-w")
        .arg(&wd)
        .arg("-f")
        .arg(&policy)
        .arg("--report-file")
        .arg(&report));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        std::fs::read_to_string(&report)
            .unwrap()
            .contains("run_end"),
        "the report was written"
    );
    assert_eq!(mode_of(&report), 0o600);
}

/// An agent started by the running agent on the same work directory (a
/// commands promise running the agent again, as CFEngine's acceptance
/// suite and real policies do) runs under its parent's lock instead of
/// waiting for a parent that waits for it (issue 16, difference 4).
#[test]
fn a_nested_agent_is_not_blocked_by_its_parent() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = tmp.path().join("inner.cf");
    std::fs::write(
        &inner,
        "body common control { bundlesequence => { \"main\" }; }\nbundle agent main { reports: \"inner ran\"; }\n",
    )
    .unwrap();
    let wd = tmp.path().join("wd");
    let policy = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n  commands:\n      \"{bin} -K --wait-for-lock 0 -w {wd} -f {inner}\";\n}}\n",
            bin = agent_bin().display(),
            wd = wd.display(),
            inner = inner.display()
        ),
    );
    let out = run(Command::new(agent_bin())
        .args(["-K", "-I", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("R: inner ran"), "{out:?}");
    assert!(!out.stdout.contains("another agent"), "{out:?}");
}

/// CFEngine's name for a work directory chosen from outside (its
/// acceptance suite sets it for every test) is the work directory when -w
/// is not given, with the sys paths that follow from it (issue 16,
/// difference 1).
#[test]
fn the_cfengine_workdir_override_is_the_work_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("override");
    let policy = write_policy(
        tmp.path(),
        "bundle agent main { reports: \"$(sys.workdir) $(sys.statedir) $(sys.inputdir) $(sys.bindir)\"; }\n",
    );
    let out = run(Command::new(agent_bin())
        .env("CFENGINE_TEST_OVERRIDE_WORKDIR", &wd)
        .arg("-K")
        .arg("-f")
        .arg(&policy));
    let w = wd.display();
    assert_eq!(
        out.stdout,
        format!("R: {w} {w}/state {w}/inputs {w}/bin\n"),
        "{out:?}"
    );
    assert!(wd.join("state").is_dir());
}

/// A policy from outside the work directory's inputs is checked first by
/// the `cf-promises` of the bin directory, as cf-agent checks it: what the
/// check evaluates runs then too (an `execresult` runs once in the check
/// and once in the run; CFEngine's lock tests rely on it). A check that
/// fails stops the run; without a `cf-promises` there, the policy is only
/// validated in-process.
#[test]
fn a_policy_outside_inputs_is_checked_by_cf_promises_first() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("marker");
    let policy = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n  vars:\n      \"x\" string => execresult(\"/bin/echo ran >> {m}\", \"useshell\");\n  reports:\n      \"done\";\n}}\n",
            m = marker.display()
        ),
    );
    let runs = |wd: &Path| {
        let _ = std::fs::remove_file(&marker);
        let out = run(Command::new(agent_bin())
            .env("CFENGINE_TEST_OVERRIDE_WORKDIR", wd)
            .arg("-K")
            .arg("-f")
            .arg(&policy));
        let n = std::fs::read_to_string(&marker)
            .unwrap_or_default()
            .lines()
            .count();
        (out, n)
    };
    // No cf-promises in the bin directory: one evaluation.
    let plain = tmp.path().join("plain");
    let (out, n) = runs(&plain);
    assert_eq!((out.code, n), (Some(0), 1), "{out:?}");
    // Ours as cf-promises: the check evaluates the policy too.
    let checked = tmp.path().join("checked");
    std::fs::create_dir_all(checked.join("bin")).unwrap();
    std::os::unix::fs::symlink(agent_bin(), checked.join("bin/cf-promises")).unwrap();
    let (out, n) = runs(&checked);
    assert_eq!((out.code, n), (Some(0), 2), "{out:?}");
    assert!(out.stdout.contains("R: done"), "{out:?}");
    // That check is made in the agent's own process (the same file);
    // another copy of the program is started instead, with the same
    // outcome and the same output.
    let copied = tmp.path().join("copied");
    std::fs::create_dir_all(copied.join("bin")).unwrap();
    std::fs::copy(agent_bin(), copied.join("bin/cf-promises")).unwrap();
    let (copy_out, n) = runs(&copied);
    assert_eq!((copy_out.code, n), (Some(0), 2), "{copy_out:?}");
    assert_eq!(
        (&copy_out.stdout, &copy_out.stderr),
        (&out.stdout, &out.stderr)
    );
    // A check that fails: nothing runs.
    let refused = tmp.path().join("refused");
    std::fs::create_dir_all(refused.join("bin")).unwrap();
    let fake = refused.join("bin/cf-promises");
    std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (out, n) = runs(&refused);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert_eq!(n, 0, "{out:?}");
    assert!(!out.stdout.contains("R: done"), "{out:?}");
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("Policy failed validation with command"),
        "{out:?}"
    );
    // A policy the check refuses, checked in the agent's process or by a
    // copy of the program: its errors said once, the same way, and
    // nothing run.
    std::fs::create_dir_all(tmp.path().join("broken")).unwrap();
    let broken = write_policy(
        &tmp.path().join("broken"),
        "bundle agent main\n{\n  reports:\n      \"x\" if => ;\n}\n",
    );
    let outs: Vec<_> = [&checked, &copied]
        .iter()
        .map(|wd| {
            let out = run(Command::new(agent_bin())
                .env("CFENGINE_TEST_OVERRIDE_WORKDIR", wd)
                .arg("-K")
                .arg("-f")
                .arg(&broken));
            assert_eq!(out.code, Some(1), "{out:?}");
            assert_eq!(out.stderr.matches("expected a value").count(), 1, "{out:?}");
            (
                out.stdout.replace(&wd.display().to_string(), "WD"),
                out.stderr,
            )
        })
        .collect();
    assert_eq!(outs[0], outs[1]);
}
