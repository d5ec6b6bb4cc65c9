//! `agent --scheduled`: body executor control's schedule, splaytime and
//! agent_expireafter, as cf-execd honours them.

use crate::common::{Captured, agent_bin, run, write_policy};
use std::process::Command;

fn scheduled(workdir: &std::path::Path, policy: &std::path::Path, extra: &[&str]) -> Captured {
    run(Command::new(agent_bin())
        .args(["-I", "--scheduled", "-w"])
        .arg(workdir)
        .args(extra)
        .arg("-f")
        .arg(policy))
}

fn policy(executor: &str) -> String {
    format!(
        "body common control {{ bundlesequence => {{ \"main\" }}; }}\n\
         body executor control {{ {executor} }}\n\
         bundle agent main {{ reports: \"ran\"; }}\n"
    )
}

/// A stand-in for another agent run: its own process group, holding the
/// work directory's run lock, recorded as started `age` seconds ago.
fn hold_run_lock(work: &std::path::Path, seconds: u32, age: u64) -> std::process::Child {
    let state = work.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let lock = state.join("agent.lock");
    let holder = Command::new("setsid")
        .arg("flock")
        .arg(&lock)
        .args(["sleep", &seconds.to_string()])
        .spawn()
        .expect("setsid flock");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - age;
    std::fs::write(&lock, format!("{} {started}", holder.id())).unwrap();
    holder
}

#[test]
fn the_run_goes_ahead_only_when_a_schedule_class_holds() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let p = write_policy(dir.path(), &policy(r#"schedule => { "go_now", "Hr99" };"#));
    let not_now = scheduled(&work, &p, &[]);
    assert_eq!(not_now.code, Some(0), "{not_now:?}");
    assert!(!not_now.stdout.contains("R: ran"), "{not_now:?}");
    assert!(
        not_now.stdout.contains("Not scheduled now") && not_now.stdout.contains("go_now, Hr99"),
        "{not_now:?}"
    );
    let now = scheduled(&work, &p, &["-D", "go_now"]);
    assert_eq!(now.code, Some(0), "{now:?}");
    assert!(now.stdout.contains("R: ran"), "{now:?}");
}

/// The slot this host sleeps before a run: the same each time, within
/// splaytime, and the one cf-execd derives from the host's name, address
/// and user.
#[test]
fn the_splay_slot_is_fixed_per_host_and_within_splaytime() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let p = write_policy(
        dir.path(),
        &policy(r#"schedule => { "any" }; splaytime => "5";"#),
    );
    let slot = |c: &Captured| -> u64 {
        let line = c
            .stdout
            .lines()
            .find(|l| l.contains("Would sleep for splaytime"))
            .unwrap_or_else(|| panic!("no splay line: {c:?}"));
        line.split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = scheduled(&work, &p, &["--dry-run"]);
    let second = scheduled(&work, &p, &["--dry-run"]);
    assert_eq!(slot(&first), slot(&second));
    assert!(slot(&first) < 300);
    let vars = run(Command::new(agent_bin())
        .args(["-w"])
        .arg(&work)
        .arg("-f")
        .arg(&p)
        .arg(r"--show-vars=sys\.(fqhost|ipv4)$"));
    let value = |name: &str| -> String {
        vars.stdout
            .lines()
            .find(|l| l.starts_with(&format!("default:sys.{name} ")))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
            .unwrap_or_default()
    };
    // SAFETY: getuid(2) cannot fail.
    let uid = unsafe { libc::getuid() };
    let identity = format!("{}+{}+{uid}", value("fqhost"), value("ipv4"));
    let expected = (300.0 * convergent::agent::schedule::splay_fraction(&identity)) as u64;
    assert_eq!(slot(&first), expected, "identity {identity}");
}

/// A run that holds the work directory's run lock for longer than
/// agent_expireafter is stopped with its process group; the scheduled run
/// then goes ahead.
#[test]
fn a_run_older_than_agent_expireafter_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let mut hung = hold_run_lock(&work, 300, 3 * 3600);
    let p = write_policy(
        dir.path(),
        &policy(r#"schedule => { "any" }; agent_expireafter => "60";"#),
    );
    let out = scheduled(&work, &p, &[]);
    let status = hung.wait().unwrap();
    assert!(
        !status.success(),
        "the hung run was not stopped: {status:?}"
    );
    assert!(
        out.stdout
            .contains("longer than agent_expireafter (60 minutes)"),
        "{out:?}"
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("R: ran"), "{out:?}");
}

/// A run younger than agent_expireafter is left alone: the scheduled run
/// gives up waiting for it.
#[test]
fn a_younger_run_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let mut busy = hold_run_lock(&work, 30, 0);
    let p = write_policy(dir.path(), &policy(r#"schedule => { "any" };"#));
    let out = scheduled(&work, &p, &["--wait-for-lock", "1"]);
    let _ = busy.kill();
    let _ = busy.wait();
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("another agent"), "{out:?}");
}

/// With `exec_command`, a scheduled run runs it as cf-execd does (the
/// MPF's runs update.cf, then the agent), instead of the policy itself.
#[test]
fn exec_command_is_what_a_scheduled_run_runs() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let p = write_policy(
        dir.path(),
        &policy(r#"schedule => { "any" }; exec_command => "/bin/echo from exec_command";"#),
    );
    let out = scheduled(&work, &p, &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("from exec_command"), "{out:?}");
    assert!(!out.stdout.contains("R: ran"), "{out:?}");
    let failing = write_policy(
        dir.path(),
        &policy(r#"schedule => { "any" }; exec_command => "/bin/false";"#),
    );
    let out = scheduled(&work, &failing, &[]);
    assert!(out.stdout.contains("ended with exit code 1"), "{out:?}");
}
