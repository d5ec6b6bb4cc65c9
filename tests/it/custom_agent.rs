//! Custom promise types where cf-agent cannot be the reference: a module
//! that hangs (cf-agent waits for it forever; we kill it after
//! `--module-timeout` seconds and go on), a module that will not exit, a
//! log level no one knows (cf-agent aborts), and a promise type no block
//! defines (compared with cf-agent on standard output only, since our
//! validation warns about it on standard error).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The modules of these tests live in the test's own directory, so that
/// their path marks every process they start; whatever still runs with
/// that path on its command line when the guard goes is killed, even if
/// the test failed.
struct ProcessGuard {
    marker: String,
}

impl ProcessGuard {
    /// Processes whose command line mentions the marker.
    fn survivors(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&self.marker) {
                pids.push(pid);
            }
        }
        pids
    }

    /// Waits a little for killed processes to be reaped, then says which
    /// are left.
    fn survivors_after_a_moment(&self) -> Vec<i32> {
        for _ in 0..100 {
            if self.survivors().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.survivors()
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        for pid in self.survivors() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// Writes a bash module into `dir`, with a guard for the processes it
/// starts.
fn module(dir: &Path, name: &str, script: &str) -> (PathBuf, ProcessGuard) {
    let p = dir.join(name);
    std::fs::write(&p, script).expect("write module");
    let guard = ProcessGuard {
        marker: p.to_string_lossy().into_owned(),
    };
    (p, guard)
}

/// A module of the line protocol that validates every promise, and runs
/// `on_evaluate` and `on_terminate` (bash, with `$promiser` set) to answer
/// the other requests.
fn line_module(
    dir: &Path,
    name: &str,
    on_evaluate: &str,
    on_terminate: &str,
) -> (PathBuf, ProcessGuard) {
    let script = format!(
        r#"read -r _h; read -r _e
echo "{name} 1.0.0 v1 line_based action_policy"; echo ""
op="" promiser=""
while IFS= read -r line; do
  case "$line" in operation=*) op=${{line#operation=}} ;; promiser=*) promiser=${{line#promiser=}} ;; esac
  [ -n "$line" ] && continue
  case "$op" in
    validate_promise) echo "result=valid" ;;
    evaluate_promise) {on_evaluate} ;;
    terminate) {on_terminate}; echo "result=success"; echo ""; exit 0 ;;
  esac
  echo ""
done
"#
    );
    module(dir, name, &script)
}

/// A command that sleeps in a child whose command line names the module,
/// so that the guard sees it.
const SLEEP_IN_A_CHILD: &str = r#"bash -c 'sleep 1000; : "$0"' "$0""#;

/// The run's lines, with the test's directory written `@TMP@`.
fn lines(out: &Captured, tmp: &Path) -> String {
    out.stdout.replace(tmp.to_string_lossy().as_ref(), "@TMP@")
}

#[test]
fn a_module_that_hangs_is_killed_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Promises whose promiser starts with "keep" are kept; on any other
    // the module never answers.
    let (hangs, guard) = line_module(
        tmp.path(),
        "hangs.sh",
        &format!(
            r#"case "$promiser" in keep*) echo "result=kept" ;; *) {SLEEP_IN_A_CHILD} ;; esac"#
        ),
        ":",
    );
    let content = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/custom/modules/content.sh");
    let out_file = tmp.path().join("after.conf");
    let policy = write_policy(
        tmp.path(),
        &format!(
            r#"promise agent hangs {{ interpreter => "/bin/bash"; path => "{}"; }}
promise agent file_content {{ interpreter => "/bin/bash"; path => "{}"; }}
body classes outcome(p) {{ promise_kept => {{ "$(p)_kept" }}; repair_timeout => {{ "$(p)_timeout" }}; repair_failed => {{ "$(p)_failed" }}; }}
bundle agent main
{{
  hangs:
      "keep first" classes => outcome("keep");
      "stuck" classes => outcome("stuck");
      "after" classes => outcome("after");
  file_content:
      "{}" content => "written", classes => outcome("content");
  vars:
      "seen" slist => sort(classesmatching("(keep|stuck|after|content)_.*"), "lex");
  reports:
      "class: $(seen)";
}}
"#,
            hangs.display(),
            content.display(),
            out_file.display()
        ),
    );
    eprintln!("not compared with cf-agent: it waits forever for a module that does not answer");
    let started = Instant::now();
    let out = agent_inform(&tmp.path().join("wd"), &policy, &["--module-timeout", "2"]);
    let took = started.elapsed();
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(took < Duration::from_secs(30), "the run took {took:?}");
    assert_eq!(
        lines(&out, tmp.path()),
        "   error: Promise module '@TMP@/hangs.sh' gave no answer to 'evaluate_promise' within 2 \
         seconds, so it was killed (hangs promise with promiser 'stuck', @TMP@/p.cf:8)\n   \
         error: Promise module '@TMP@/hangs.sh' was stopped earlier in this run (it gave no \
         answer to 'evaluate_promise' for the hangs promise with promiser 'stuck' within 2 \
         seconds); the hangs promise with promiser 'after' is not evaluated (@TMP@/p.cf:9)\n    \
         info: Wrote 'written' to '@TMP@/after.conf'\n\
         R: class: after_conf_changed\n\
         R: class: after_conf_content_written\n\
         R: class: after_failed\n\
         R: class: keep_kept\n\
         R: class: stuck_timeout\n",
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "written\n");
    assert_eq!(
        guard.survivors_after_a_moment(),
        Vec::<i32>::new(),
        "the hung module or its child survived the run"
    );
}

#[test]
fn a_module_that_sends_no_header_is_killed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (silent, guard) = module(
        tmp.path(),
        "silent.sh",
        "read -r _h; read -r _e; sleep 1000\n",
    );
    let policy = write_policy(
        tmp.path(),
        &format!(
            r#"promise agent silent {{ interpreter => "/bin/bash"; path => "{}"; }}
bundle agent main
{{
  silent:
      "one";
      "two";
  reports:
      "the run goes on";
}}
"#,
            silent.display()
        ),
    );
    for extra in [
        &["--module-timeout", "1"][..],
        &["--module-timeout", "1", "-n"],
    ] {
        let out = agent_inform(&tmp.path().join("wd"), &policy, extra);
        let report = if extra.contains(&"-n") {
            " warning: Need to repair reports promise: the run goes on\n"
        } else {
            "R: the run goes on\n"
        };
        assert_eq!(
            lines(&out, tmp.path()),
            format!(
                "{report}   error: Promise module '@TMP@/silent.sh' sent no header within 1 seconds, \
                 so it was killed (silent promise with promiser 'one', @TMP@/p.cf:5)\n   \
                 error: Promise module '@TMP@/silent.sh' was stopped earlier in this run (it sent \
                 no header within 1 seconds); the silent promise with promiser 'two' is not \
                 evaluated (@TMP@/p.cf:6)\n"
            ),
            "{}",
            out.stderr
        );
        assert_eq!(guard.survivors_after_a_moment(), Vec::<i32>::new());
    }
}

#[test]
fn a_module_that_does_not_exit_after_terminate_is_killed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (stubborn, guard) = line_module(
        tmp.path(),
        "stubborn.sh",
        r#"echo "result=kept""#,
        &format!(
            r#"echo "log_notice=not leaving"; echo "result=success"; echo ""; exec {SLEEP_IN_A_CHILD}"#
        ),
    );
    let policy = write_policy(
        tmp.path(),
        &format!(
            "promise agent stubborn {{ interpreter => \"/bin/bash\"; path => \"{}\"; }}\n\
             bundle agent main {{ stubborn: \"p\"; }}\n",
            stubborn.display()
        ),
    );
    let started = Instant::now();
    let out = agent_inform(&tmp.path().join("wd"), &policy, &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "  notice: not leaving\n");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(guard.survivors_after_a_moment(), Vec::<i32>::new());
}

#[test]
fn a_log_level_no_one_knows_is_reported_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (odd, _guard) = line_module(
        tmp.path(),
        "odd.sh",
        r#"echo "log_loud=hello"; echo "log_=empty"; echo "log_info=fine"; echo "result=kept""#,
        ":",
    );
    let policy = write_policy(
        tmp.path(),
        &format!(
            "promise agent odd {{ interpreter => \"/bin/bash\"; path => \"{}\"; }}\n\
             bundle agent main {{ odd: \"p\"; reports: \"after\"; }}\n",
            odd.display()
        ),
    );
    eprintln!("not compared with cf-agent: it aborts on a log level it does not know");
    let out = agent_inform(&tmp.path().join("wd"), &policy, &[]);
    assert_eq!(
        lines(&out, tmp.path()),
        "R: after\n   error: Promise module '@TMP@/odd.sh' sent a log message with an unknown \
         level: 'log_loud=hello'\n   error: Promise module '@TMP@/odd.sh' sent a log message \
         with an unknown level: 'log_=empty'\n    info: fine\n"
    );
}

#[test]
fn a_promise_type_no_block_defines_fails_in_each_pass_as_in_cf_agent() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(
        tmp.path(),
        "body classes outcome { repair_failed => { \"undeclared_failed\" }; }\n\
         bundle agent main\n{\n  undeclared:\n      \"u\" classes => outcome;\n  reports:\n      \
         \"after\";\n    undeclared_failed::\n      \"no outcome classes for it\";\n}\n",
    );
    let out = agent_inform(&tmp.path().join("wd"), &policy, &[]);
    assert_eq!(out.code, Some(0));
    // Our validation says on standard error what cf-promises does not.
    assert!(
        out.stderr
            .contains("warning: promise type 'undeclared' is not built in"),
        "{}",
        out.stderr
    );
    let expected =
        "R: after\n".to_string() + &"   error: Undefined promise type 'undeclared'\n".repeat(3);
    assert_eq!(out.stdout, expected);
    if have("cf-agent") {
        let theirs = cf_agent_inform(tmp.path(), &policy, &[]);
        let theirs: String = theirs
            .stdout
            .lines()
            .filter(|l| !l.contains("Setting workdir"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(theirs, expected);
    } else {
        eprintln!("skipped: cf-agent not installed; checked against the recorded lines only");
    }
}
