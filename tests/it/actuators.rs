//! commands, processes, users and services acting on the real system
//! (CI runs as root on a disposable machine): each scenario runs twice to
//! show the second run changes nothing, under --dry-run to show nothing
//! changes, and where cf-agent can do the same, side by side with it.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The -I lines that describe changes, without the lines that only one of
/// the agents prints about itself.
fn change_lines(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.contains("Setting workdir") && !l.contains("Summary:"))
        .map(|l| without_location(l).to_string())
        .collect()
}

#[test]
fn commands_match_cf_agent_and_never_use_a_shell_unasked() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("injected");
    let p = write_policy(
        tmp.path(),
        &format!(
            r#"body common control {{ bundlesequence => {{ "main" }}; }}
bundle agent main
{{
  vars: "danger" string => "; touch {marker}";
  commands:
      "/bin/echo hello $(danger)";
      "/bin/sh -c 'exit 3'" classes => rc("three");
      "echo shell | tr a-z A-Z" contain => sh;
      "/bin/echo" args => "=myvar=hi", module => "true";
  reports:
      "myvar=$(echo.myvar)";
    three_failed::
      "three failed";
}}
body contain sh {{ useshell => "useshell"; }}
body classes rc(p) {{ promise_kept => {{ "$(p)_ok" }}; repair_failed => {{ "$(p)_failed" }}; }}
"#,
            marker = marker.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(
        !marker.exists(),
        "a variable became a shell command: {out:?}"
    );
    assert!(out.stdout.contains("R: myvar=hi"), "{out:?}");
    assert!(out.stdout.contains("R: three failed"), "{out:?}");
    if have("cf-agent") {
        let wd = cf_workdir(tmp.path());
        let theirs = run(Command::new("cf-agent")
            .args(["-K", "-I", "-w"])
            .arg(&wd)
            .arg("-f")
            .arg(&p));
        assert_eq!(change_lines(&out.stdout), change_lines(&theirs.stdout));
    } else {
        eprintln!("skipped the cf-agent comparison: cf-agent not installed");
    }
}

#[test]
fn a_hanging_command_times_out_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_policy(
        tmp.path(),
        r#"bundle agent main
{
  commands:
      "/bin/sleep 30" contain => short, classes => rc("slow");
  reports:
    slow_timeout::
      "timed out";
    any::
      "still running";
}
body contain short { exec_timeout => "1"; }
body classes rc(p) { repair_failed => { "$(p)_timeout" }; }
"#,
    );
    let start = std::time::Instant::now();
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(start.elapsed() < Duration::from_secs(15), "{out:?}");
    assert!(out.stdout.contains("R: timed out"), "{out:?}");
    assert!(out.stdout.contains("R: still running"), "{out:?}");
    // cf-agent's words and outcome: a killed command failed.
    assert!(
        out.stdout
            .contains("Finished script '/bin/sleep 30' - failed (abnormal termination)"),
        "{out:?}"
    );
}

/// Runs our agent (`-K -I`) and waits at most `limit` for it: a run that
/// hangs is killed and fails the test instead of hanging it.
fn agent_within(workdir: &Path, policy: &Path, limit: Duration) -> Captured {
    let mut child = Command::new(agent_bin())
        .args(["-K", "-I", "-w"])
        .arg(workdir)
        .arg("-f")
        .arg(policy)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the agent was still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    Captured {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

/// Issue 15: a command that starts a process in a session of its own
/// (`setsid`) which keeps the output pipe open. cf-agent 3.21 kills the
/// command at exec_timeout but reads on until that process exits, and so
/// did we: the run, and its lock, lasted as long as the process. Now the
/// wait ends at exec_timeout: the first command is killed and failed, the
/// second, which exited at once, is judged by its status.
#[test]
fn exec_timeout_ends_the_wait_for_output_a_setsid_grandchild_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let pids = tmp.path().join("pids");
    let p = write_policy(
        tmp.path(),
        &format!(
            r#"bundle agent main
{{
  commands:
      "/bin/sh -c 'setsid sleep 120 & echo $! >>{pids}; echo started; sleep 120'" contain => short, classes => rc("held");
      "/bin/sh -c 'setsid sleep 120 & echo $! >>{pids}; echo exited'" contain => short, classes => rc("quick");
  reports:
    held_timeout::
      "held timed out";
    quick_ok::
      "quick exited in time";
    any::
      "still running";
}}
body contain short {{ exec_timeout => "2"; }}
body classes rc(p) {{ promise_repaired => {{ "$(p)_ok" }}; repair_failed => {{ "$(p)_timeout" }}; }}
"#,
            pids = pids.display()
        ),
    );
    let out = agent_within(&tmp.path().join("wd"), &p, Duration::from_secs(60));
    for pid in std::fs::read_to_string(&pids).unwrap_or_default().lines() {
        let _ = Command::new("/bin/kill").args(["-9", pid]).status();
    }
    assert!(out.stdout.contains("R: held timed out"), "{out:?}");
    assert!(out.stdout.contains("R: quick exited in time"), "{out:?}");
    assert!(out.stdout.contains("R: still running"), "{out:?}");
    assert!(out.stdout.contains(": started"), "{out:?}");
    assert!(out.stdout.contains(": exited"), "{out:?}");
}

/// Where we differ from cf-agent on purpose: cf-agent runs a command whose
/// exec_owner does not exist as uid 4294967294; we refuse it, saying where.
#[test]
fn an_unknown_exec_owner_fails_alone_and_located() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    let p = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n  commands:\n      \"/usr/bin/touch {}\" contain => owner;\n  reports:\n      \"after\";\n}}\nbody contain owner {{ exec_owner => \"cvg_no_such_user\"; }}\n",
            marker.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(!marker.exists(), "{out:?}");
    assert!(
        out.stdout.contains("unknown exec_owner 'cvg_no_such_user'")
            && out.stdout.contains(&format!("{}:4", p.display())),
        "{out:?}"
    );
    assert!(out.stdout.contains("R: after"), "{out:?}");
}

#[test]
fn dry_run_runs_no_command() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    let p = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main {{ commands: \"/usr/bin/touch {}\"; }}\n",
            marker.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &["--dry-run"]);
    assert!(!marker.exists());
    assert!(out.stdout.contains("Would execute script"), "{out:?}");
}

struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper(tag: &str) -> Sleeper {
    Sleeper(
        Command::new("/bin/sleep")
            .arg(tag)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn processes_are_counted_and_signalled() {
    let tmp = tempfile::tempdir().unwrap();
    // Unique durations, so only our sleepers match.
    let tag = format!("{}", 4_000_000 + std::process::id() % 100_000);
    let mut s1 = sleeper(&tag);
    let mut s2 = sleeper(&tag);
    std::thread::sleep(Duration::from_millis(100));
    let count = write_policy(
        tmp.path(),
        &format!(
            r#"bundle agent main
{{
  processes:
      "sleep {tag}" process_count => two;
      "sleep no-such-{tag}" restart_class => "absent_one";
  reports:
    two_in::
      "two running";
    absent_one::
      "restart class set";
}}
body process_count two {{ match_range => "2,2"; in_range_define => {{ "two_in" }}; out_of_range_define => {{ "two_out" }}; }}
"#
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &count, &[]);
    assert!(out.stdout.contains("R: two running"), "{out:?}");
    assert!(out.stdout.contains("R: restart class set"), "{out:?}");
    let kill = tmp.path().join("kill.cf");
    std::fs::write(
        &kill,
        format!("bundle agent main {{ processes: \"sleep {tag}\" signals => {{ \"term\" }}; }}\n"),
    )
    .unwrap();
    let dry = agent_inform(&tmp.path().join("wd"), &kill, &["--dry-run"]);
    assert!(
        dry.stdout.contains("Need to keep signal promise 'term'"),
        "{dry:?}"
    );
    assert!(
        s1.0.try_wait().unwrap().is_none(),
        "dry-run must not signal"
    );
    let out = agent_inform(&tmp.path().join("wd"), &kill, &[]);
    assert!(out.stdout.contains("Signalled 'term' (15)"), "{out:?}");
    assert!(s1.0.wait().unwrap().signal_is(libc::SIGTERM));
    assert!(s2.0.wait().unwrap().signal_is(libc::SIGTERM));
    let again = agent_inform(&tmp.path().join("wd"), &kill, &[]);
    assert!(
        !again.stdout.contains("Signalled"),
        "second run must be a no-op: {again:?}"
    );
}

trait SignalIs {
    fn signal_is(&self, sig: i32) -> bool;
}

impl SignalIs for std::process::ExitStatus {
    fn signal_is(&self, sig: i32) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.signal() == Some(sig)
    }
}

/// Removes a test account however the test ends.
struct UserGuard(String);

impl Drop for UserGuard {
    fn drop(&mut self) {
        let _ = Command::new("/usr/sbin/userdel").arg(&self.0).output();
        let _ = Command::new("/usr/sbin/groupdel").arg(&self.0).output();
    }
}

fn shadow_hash(name: &str) -> Option<String> {
    std::fs::read_to_string("/etc/shadow")
        .ok()?
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .and_then(|l| l.split(':').nth(1).map(str::to_string))
}

/// Where we differ from cf-agent on purpose: an account useradd made
/// without a password has the hash `!`, which cf-agent reads as locked
/// and "unlocks" into an empty password (a login without one). We leave
/// it alone: `present` is kept.
#[test]
fn an_account_without_a_password_is_not_unlocked_into_an_empty_one() {
    if !is_root() || !Path::new("/usr/sbin/useradd").exists() {
        eprintln!("skipped: needs root and useradd");
        return;
    }
    // Not `cvg` and a number: actuators_differential, which runs in this
    // same process, names its users so, from the same pid (see its `tag`).
    let name = format!("cvga{}", std::process::id() % 100_000);
    // Before the guard, so that the user is removed while it is held.
    let _users = serial(&USERS);
    let _guard = UserGuard(name.clone());
    let made = Command::new("/usr/sbin/useradd")
        .args(["-M", &name])
        .status()
        .unwrap();
    assert!(made.success());
    assert_eq!(shadow_hash(&name).as_deref(), Some("!"));
    let tmp = tempfile::tempdir().unwrap();
    let present = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main {{ users: \"{name}\" policy => \"present\", classes => c; }}\n\
             body classes c {{ promise_kept => {{ \"was_kept\" }}; }}\n\
             bundle agent report {{ reports:\n was_kept:: \"kept\"; }}\n\
             body common control {{ bundlesequence => {{ \"main\", \"report\" }}; }}\n"
        ),
    );
    for _ in 0..2 {
        let out = agent_inform(&tmp.path().join("wd"), &present, &[]);
        assert!(out.stdout.contains("R: kept"), "{out:?}");
        assert!(!out.stdout.contains("Modified user"), "{out:?}");
        assert_eq!(shadow_hash(&name).as_deref(), Some("!"));
    }
}

#[test]
fn an_invalid_user_name_fails_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_policy(
        tmp.path(),
        "bundle agent main { users: \"bad name;rm\" policy => \"present\"; reports: \"after\"; }\n",
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(
        out.stdout
            .contains("'bad name;rm' is not a valid user name"),
        "{out:?}"
    );
    assert!(out.stdout.contains("R: after"), "{out:?}");
}

#[test]
fn services_through_init_scripts() {
    if Path::new("/run/systemd/system").exists() {
        eprintln!("systemd runs here; the init-script path is not what this host uses");
    } else {
        eprintln!("skipped: no systemd; testing the init-script path instead");
    }
    if !is_root() {
        eprintln!("skipped: needs root to write /etc/init.d");
        return;
    }
    // Not `cvgsvc` and a number, actuators_differential's services (as above).
    let name = format!("cvgsvca{}", std::process::id() % 100_000);
    let script = PathBuf::from(format!("/etc/init.d/{name}"));
    let pidfile = format!("/tmp/{name}.pid");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n start) sleep 1000 >/dev/null 2>&1 & echo $! > {pidfile} ;;\n stop) [ -f {pidfile} ] && kill $(cat {pidfile}); rm -f {pidfile} ;;\n restart) $0 stop; $0 start ;;\n reload) exit 0 ;;\n status) [ -f {pidfile} ] && kill -0 $(cat {pidfile}) 2>/dev/null ;;\nesac\n"
        ),
    )
    .unwrap();
    Command::new("/bin/chmod")
        .arg("755")
        .arg(&script)
        .status()
        .unwrap();
    struct Cleanup(PathBuf, String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new(&self.0).arg("stop").output();
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_file(&self.1);
        }
    }
    let _c = Cleanup(script.clone(), pidfile.clone());
    if Path::new("/run/systemd/system").exists() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    let start = write_policy(
        tmp.path(),
        &format!("bundle agent main {{ services: \"{name}\" service_policy => \"start\"; }}\n"),
    );
    let dry = agent_inform(&wd, &start, &["--dry-run"]);
    assert!(dry.stdout.contains("Should run"), "{dry:?}");
    assert!(!Path::new(&pidfile).exists());
    let out = agent_inform(&wd, &start, &[]);
    assert!(
        out.stdout
            .contains(&format!("Executed '/etc/init.d/{name} start'")),
        "{out:?}"
    );
    assert!(Path::new(&pidfile).exists());
    let again = agent_inform(&wd, &start, &[]);
    assert!(!again.stdout.contains("Executed"), "{again:?}");
    let stop = tmp.path().join("stop.cf");
    std::fs::write(
        &stop,
        format!("bundle agent main {{ services: \"{name}\" service_policy => \"stop\"; }}\n"),
    )
    .unwrap();
    let out = agent_inform(&wd, &stop, &[]);
    assert!(out.stdout.contains("stop'"), "{out:?}");
    assert!(!Path::new(&pidfile).exists());
}
