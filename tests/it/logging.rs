//! `-l`: every log line starts with the local time as cf-agent writes it
//! (`2026-11-24T07:02:54+0000     info: ...`); report lines do not.

use crate::common::*;
use std::process::Command;

fn check_lines(out: &str, who: &str) {
    let stamped = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} +info: ").unwrap();
    let created = out
        .lines()
        .find(|l| l.contains("Created file"))
        .unwrap_or_else(|| panic!("{who}: no creation line in {out:?}"));
    assert!(stamped.is_match(created), "{who}: {created:?}");
    assert!(out.lines().any(|l| l == "R: hello"), "{who}: {out:?}");
}

/// A policy that creates `made` in `dir` (one log line) and reports
/// `hello`; returns the file it creates and the policy.
fn creating_policy(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let target = dir.join("made");
    let policy = write_policy(
        dir,
        &format!(
            "body common control {{ bundlesequence => {{ \"main\" }}; }}\nbundle agent main {{ files: \"{}\" create => \"true\"; reports: \"hello\"; }}\n",
            target.display()
        ),
    );
    (target, policy)
}

#[test]
fn timestamps_prefix_log_lines_not_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, policy) = creating_policy(tmp.path());
    let ours = agent_inform(&tmp.path().join("wd"), &policy, &["-l"]);
    check_lines(&ours.stdout, "ours");
    if have("cf-agent") {
        std::fs::remove_file(&target).unwrap();
        let theirs = cf_agent_inform(tmp.path(), &policy, &["-l"]);
        check_lines(&theirs.stdout, "cf-agent");
    } else {
        eprintln!("skipped the cf-agent comparison: cf-agent not installed");
    }
}

/// `--color=always` colours each log line by level (info green) and
/// resets after its newline, as cf-agent; `-C` alone means `auto`, which
/// is no colour when the output is not a terminal (here, a pipe).
#[test]
fn colour_by_level_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, policy) = creating_policy(tmp.path());
    let coloured = |out: &str| {
        out.contains("\x1b[32m    info: Created file") && out.contains("\n\x1b[0mR: hello")
    };
    let ours = agent_inform(&tmp.path().join("wd"), &policy, &["--color=always"]);
    assert!(coloured(&ours.stdout), "{ours:?}");
    std::fs::remove_file(&target).unwrap();
    let auto = agent_inform(&tmp.path().join("wd"), &policy, &["-C"]);
    assert!(!auto.stdout.contains('\x1b'), "{auto:?}");
    if have("cf-agent") {
        std::fs::remove_file(&target).unwrap();
        let theirs = cf_agent_inform(tmp.path(), &policy, &["--color=always"]);
        assert!(coloured(&theirs.stdout), "{theirs:?}");
    } else {
        eprintln!("skipped the cf-agent comparison: cf-agent not installed");
    }
}

/// Agent control's `inform => "true"` prints what -I prints, as cf-agent's
/// does; without it a plain run prints only the report.
#[test]
fn agent_control_inform_raises_the_level() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("made");
    let text = |inform: &str| {
        format!(
            "body common control {{ bundlesequence => {{ \"main\" }}; }}\nbody agent control {{ inform => \"{inform}\"; }}\nbundle agent main {{ files: \"{}\" create => \"true\"; reports: \"hello\"; }}\n",
            target.display()
        )
    };
    for (inform, shown) in [("false", false), ("true", true)] {
        let _ = std::fs::remove_file(&target);
        let policy = write_policy(tmp.path(), &text(inform));
        let out = run(std::process::Command::new(agent_bin())
            .arg("-w")
            .arg(tmp.path().join("wd"))
            .args(["-K", "-f"])
            .arg(&policy));
        assert_eq!(
            out.stdout.contains("info: Created file"),
            shown,
            "inform {inform}: {}",
            out.stdout
        );
        assert!(out.stdout.contains("R: hello"), "{}", out.stdout);
    }
}

/// Agent control's `verbose => "true"` prints what -v prints, as cf-agent's
/// does: the same bundle and promise banners (`B: BEGIN bundle`, `P: BEGIN
/// promise ... (pass N)`) and info lines; with `"false"` neither agent
/// prints a verbose or an info line.
#[test]
fn agent_control_verbose_raises_the_level_like_cf_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("made");
    let text = |verbose: &str| {
        format!(
            "body common control {{ bundlesequence => {{ \"main\" }}; }}\nbody agent control {{ verbose => \"{verbose}\"; }}\nbundle agent main {{ files: \"{}\" create => \"true\"; reports: \"hello\"; }}\n",
            target.display()
        )
    };
    let shown = regex::Regex::new(r"^ *(verbose: (B: |P: BEGIN )|info: |R: )").unwrap();
    let observe = |program: &std::path::Path, wd: &std::path::Path, policy: &std::path::Path| {
        let _ = std::fs::remove_file(&target);
        let out = run(Command::new(program)
            .arg("-w")
            .arg(wd)
            .args(["-K", "-f"])
            .arg(policy));
        out.stdout
            .lines()
            .filter(|l| shown.is_match(l))
            .map(|l| l.trim().to_string())
            .collect::<Vec<_>>()
    };
    for verbose in ["false", "true"] {
        let policy = write_policy(tmp.path(), &text(verbose));
        let ours = observe(&agent_bin(), &tmp.path().join("wd"), &policy);
        let banners = ours.iter().filter(|l| l.starts_with("verbose: ")).count();
        assert_eq!(
            banners > 0,
            verbose == "true",
            "verbose {verbose}: {ours:#?}"
        );
        assert!(ours.iter().any(|l| l == "R: hello"), "{ours:#?}");
        if have("cf-agent") {
            let theirs = observe(
                std::path::Path::new("cf-agent"),
                &cf_workdir(tmp.path()),
                &policy,
            );
            assert_eq!(ours, theirs, "verbose {verbose}: ours, then cf-agent's");
        } else {
            eprintln!("skipped the cf-agent comparison: cf-agent not installed");
        }
    }
}

/// `returnszero`'s command writes to the agent's own output: without a
/// shell only at inform level (`-I`), through the shell always; as
/// cf-agent (02_classes/02_functions/silent_returnszero.cf).
#[test]
fn returnszero_output_passes_through_at_inform_level() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        "bundle agent main\n{\n  classes:\n    \"a\" expression => returnszero(\"/bin/echo noshell-said\", \"noshell\");\n    \"b\" expression => returnszero(\"/bin/echo useshell-said\", \"useshell\");\n}\n",
    );
    let check = |out: &str, inform: bool, who: &str| {
        assert_eq!(
            out.lines().any(|l| l == "noshell-said"),
            inform,
            "{who}: {out:?}"
        );
        assert!(out.lines().any(|l| l == "useshell-said"), "{who}: {out:?}");
    };
    let wd = tmp.path().join("wd");
    check(&agent_inform(&wd, &policy, &[]).stdout, true, "ours -I");
    let quiet = run(Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(&wd)
        .arg("-f")
        .arg(&policy));
    check(&quiet.stdout, false, "ours");
    if have("cf-agent") {
        check(
            &cf_agent_inform(tmp.path(), &policy, &[]).stdout,
            true,
            "cf-agent -I",
        );
        let quiet = run(Command::new("cf-agent")
            .args(["-K", "-w"])
            .arg(cf_workdir(tmp.path()))
            .arg("-f")
            .arg(&policy));
        check(&quiet.stdout, false, "cf-agent");
    }
}

/// Agent control's `inform` raises the level once the policy is read: an
/// info line of a function called before that (while the policy is
/// pre-evaluated) and in each of the three passes is printed all the same,
/// as cf-agent prints it (its example eval.cf). The level is asked for each
/// line, never cached by where the line is logged.
#[test]
fn inform_from_agent_control_shows_every_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        "body common control { bundlesequence => { run }; }\n\
         body agent control { inform => \"true\"; }\n\
         bundle agent run {\n\
           vars: \"bad\" string => eval(\"x\", \"math\", \"infix\");\n\
           reports: \"evaluated\";\n\
         }\n",
    );
    let run = |out: Captured| -> Vec<String> {
        out.stdout
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    };
    let error = "info: eval error: expression could not be parsed (input 'x')";
    let want = vec![error, "R: evaluated", error, error];
    let ours = run(crate::common::run(
        Command::new(agent_bin())
            .args(["-K", "-w"])
            .arg(tmp.path().join("wd"))
            .arg("-f")
            .arg(&policy),
    ));
    assert_eq!(ours, want);
    if have("cf-agent") {
        let theirs = run(crate::common::run(
            Command::new("cf-agent").arg("-K").arg("-f").arg(&policy),
        ));
        assert_eq!(theirs, want, "cf-agent");
    } else {
        eprintln!("skipped: cf-agent is not installed, only our output is checked");
    }
}

/// An action body's `report_level => "inform"` shows that promise's info
/// lines without -I, and only that promise's, as cf-agent does.
#[test]
fn report_level_raises_one_promise_level_like_cf_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let text = |root: &std::path::Path| {
        format!(
            "body common control {{ bundlesequence => {{ \"main\" }}; }}\nbody action loud {{ report_level => \"inform\"; }}\nbundle agent main {{ files: \"{0}/loud\" create => \"true\", action => loud; \"{0}/quiet\" create => \"true\"; reports: \"hello\"; }}\n",
            root.display()
        )
    };
    let lines = |out: &str, root: &std::path::Path| -> Vec<String> {
        out.lines()
            .filter(|l| !l.contains("Setting workdir"))
            .map(|l| l.replace(&root.display().to_string(), "ROOT"))
            .collect()
    };
    let ours_root = tmp.path().join("ours");
    std::fs::create_dir_all(&ours_root).unwrap();
    let policy = write_policy(&ours_root, &text(&ours_root));
    let ours = run(Command::new(agent_bin())
        .arg("-w")
        .arg(ours_root.join("wd"))
        .args(["-K", "-f"])
        .arg(&policy));
    let ours = lines(&ours.stdout, &ours_root);
    assert_eq!(
        ours,
        ["    info: Created file 'ROOT/loud', mode 0600", "R: hello"],
        "{ours:?}"
    );
    if !have("cf-agent") {
        eprintln!("skipped the comparison: cf-agent not installed");
        return;
    }
    let cf_root = tmp.path().join("cf");
    std::fs::create_dir_all(&cf_root).unwrap();
    let policy = write_policy(&cf_root, &text(&cf_root));
    let theirs = run(Command::new("cf-agent")
        .arg("-w")
        .arg(cf_workdir(&cf_root))
        .args(["-K", "-f"])
        .arg(&policy));
    assert_eq!(ours, lines(&theirs.stdout, &cf_root));
}

/// Common control's `fips_mode => "true"`: a files promise whose change
/// hash is md5 (the default when no changes body names one) makes cf-agent
/// say md5 is not approved, and the promise still acts; one whose changes
/// body says sha256 does not.
#[test]
fn fips_mode_says_md5_is_not_approved() {
    const SAID: &str = "FIPS mode is enabled, and md5 is not an approved algorithm";
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("made");
    let text = |hash: &str| {
        format!(
            "body common control {{ bundlesequence => {{ \"main\" }}; fips_mode => \"true\"; }}\n\
             body changes h {{ hash => \"{hash}\"; report_changes => \"none\"; }}\n\
             bundle agent main {{ files: \"{}\" create => \"true\", changes => h; reports: \"hello\"; }}\n",
            target.display()
        )
    };
    for (hash, said) in [("md5", true), ("sha256", false)] {
        let policy = write_policy(tmp.path(), &text(hash));
        let _ = std::fs::remove_file(&target);
        let ours = agent_inform(&tmp.path().join("wd"), &policy, &[]);
        assert_eq!(ours.stdout.contains(SAID), said, "ours, {hash}: {ours:?}");
        assert!(ours.stdout.contains("Created file"), "ours: {ours:?}");
        if have("cf-agent") {
            let _ = std::fs::remove_file(&target);
            let theirs = cf_agent_inform(tmp.path(), &policy, &[]);
            assert_eq!(
                theirs.stdout.contains(SAID),
                said,
                "cf-agent, {hash}: {theirs:?}"
            );
            assert!(
                theirs.stdout.contains("Created file"),
                "cf-agent: {theirs:?}"
            );
        }
    }
}

/// An action body's `expireafter`: an agent killed while a commands promise
/// runs leaves its lock, and the next run skips the promise ("already
/// running") until `expireafter` minutes after it began; with 0 the lock
/// has expired ("Lock expired after 0/0 minutes") and the promise acts, as
/// cf-agent's. Agent control's `expireafter` is the default.
#[test]
fn expireafter_ends_the_lock_of_a_killed_agent() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let policy = |action: &str, control: &str| {
        format!(
            "body common control {{ bundlesequence => {{ \"main\" }}; }}\n\
             body agent control {{ {control} }}\n\
             body action a {{ ifelapsed => \"0\"; {action} }}\n\
             body classes outcome {{ promise_repaired => {{ \"slept\" }}; }}\n\
             bundle agent main {{ commands: \"/bin/sleep 6\" action => a, classes => outcome; \
             reports: \"done\" action => a; }}\n"
        )
    };
    // Runs `program` on `policy` in `wd`, killed (with its command) after
    // two seconds; then once more to the end.
    let second_run = |program: &std::path::Path, wd: &std::path::Path, policy: &std::path::Path| {
        let mut first = std::process::Command::new(program)
            .arg("-w")
            .arg(wd)
            .arg("-f")
            .arg(policy)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_secs(2));
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(-(first.id() as i32), libc::SIGKILL) };
        let _ = first.wait();
        run(std::process::Command::new(program)
            .args(["-I", "--show-evaluated-classes=slept", "-w"])
            .arg(wd)
            .arg("-f")
            .arg(policy))
    };
    let cases = [
        ("expireafter => \"0\";", "", true),
        ("", "expireafter => \"0\";", true),
        ("expireafter => \"120\";", "", false),
    ];
    for (i, (action, control, acts)) in cases.into_iter().enumerate() {
        let case = tmp.path().join(format!("case{i}"));
        std::fs::create_dir_all(&case).unwrap();
        let p = write_policy(&case, &policy(action, control));
        let check = |out: &Captured, who: &str| {
            assert!(out.stdout.contains("R: done"), "{who}: {out:?}");
            let slept = out.stdout.lines().any(|l| l.starts_with("slept"));
            assert_eq!(slept, acts, "{who}, {action}{control}: {out:?}");
            assert_eq!(
                out.stdout.contains("Lock expired after 0/0 minutes"),
                acts,
                "{who}: {out:?}"
            );
        };
        check(&second_run(&agent_bin(), &case.join("wd"), &p), "ours");
        if have("cf-agent") {
            check(
                &second_run(std::path::Path::new("cf-agent"), &cf_workdir(&case), &p),
                "cf-agent",
            );
        }
    }
}

/// A report's `lastseen`: cf-agent 3.21 reads it and does nothing with it
/// but complain when the report also returns a value to its method (other
/// than 0, it is one constraint too many: an error in each of the three
/// passes, the value returned all the same). Ours prints the same lines.
#[test]
fn reports_lastseen_with_a_return_value_is_one_constraint_too_many() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        r#"body common control { bundlesequence => { "main" }; }
bundle agent main
{
  methods:
      "m" usebundle => sub, useresult => "r";
  reports:
      "plain" lastseen => "2";
      "got $(r[a]) $(r[b])";
}
bundle agent sub
{
  reports:
      "zero" bundle_return_value_index => "a", lastseen => "0";
      "three" bundle_return_value_index => "b", lastseen => "3";
}
"#,
    );
    let lines = |out: Captured| -> Vec<String> {
        out.stdout
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| l.starts_with("error:") || l.starts_with("R: "))
            .collect()
    };
    let error = "error: bundle_return_value promise for 'three' in bundle 'sub' with too many constraints (ignored)";
    let want = vec![error, error, error, "R: plain", "R: got zero three"];
    let ours = lines(run(Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy)));
    assert_eq!(ours, want);
    if have("cf-agent") {
        let theirs = lines(run(Command::new("cf-agent")
            .args(["-K", "-w"])
            .arg(cf_workdir(tmp.path()))
            .arg("-f")
            .arg(&policy)));
        assert_eq!(theirs, want, "cf-agent");
    } else {
        eprintln!("skipped: cf-agent is not installed, only our output is checked");
    }
}

/// The script that runs a program with `/dev/log` being the socket given:
/// in a private mount namespace, a fresh /dev holding the real one's
/// common nodes and the socket (bound over an empty file), so that
/// cf-agent's syslog(3) reaches the test and nothing of the machine's
/// /dev changes. Arguments: a scratch directory, the socket, the program
/// and its arguments.
const WITH_DEV_LOG: &str = r#"T=$0; SOCK=$1; shift 1
mkdir -p "$T/olddev" && mount --rbind /dev "$T/olddev" && mount -t tmpfs none /dev || exit 90
for n in null zero full random urandom tty; do
  [ -e "$T/olddev/$n" ] && touch "/dev/$n" && mount --bind "$T/olddev/$n" "/dev/$n"
done
for d in pts shm; do
  [ -d "$T/olddev/$d" ] && mkdir "/dev/$d" && mount --rbind "$T/olddev/$d" "/dev/$d"
done
ln -s /proc/self/fd /dev/fd
touch /dev/log && mount --bind "$SOCK" /dev/log || exit 91
exec "$@""#;

/// Common control's `system_log_level`: which lines reach the system log.
/// Both agents run with `/dev/log` a socket of the test's (see
/// [`WITH_DEV_LOG`]; root only); what each sent, priority and message
/// (the time, name and pid left out), must be the same, at "info" (the
/// info line and the report) and at "error" (only the report: cf-agent
/// sends every report to the system log itself, whatever the level).
#[test]
fn system_log_level_sends_what_cf_agent_sends() {
    use std::os::unix::net::UnixDatagram;
    let private_mounts = || {
        Command::new("unshare")
            .args(["-m", "true"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !is_root() || !private_mounts() {
        eprintln!(
            "skipped: system_log_level_sends_what_cf_agent_sends needs root and a private mount namespace (unshare -m)"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("made");
    let sent = |program: &std::path::Path,
                wd: &std::path::Path,
                level: &str|
     -> Option<Vec<String>> {
        let _ = std::fs::remove_file(&target);
        let dir = tempfile::tempdir_in(tmp.path()).unwrap();
        let policy = write_policy(
            dir.path(),
            &format!(
                "body common control {{ bundlesequence => {{ \"main\" }}; system_log_level => \"{level}\"; }}\nbundle agent main {{ files: \"{}\" create => \"true\"; reports: \"hello\"; }}\n",
                target.display()
            ),
        );
        let sock_path = dir.path().join("log.sock");
        let sock = UnixDatagram::bind(&sock_path).unwrap();
        let out = run(Command::new("unshare")
            .args(["-m", "sh", "-c", WITH_DEV_LOG])
            .arg(dir.path())
            .arg(&sock_path)
            .arg(program)
            .arg("-K")
            .arg("-w")
            .arg(wd)
            .arg("-f")
            .arg(&policy));
        if matches!(out.code, Some(90 | 91)) {
            eprintln!("skipped: no private /dev could be made: {out:?}");
            return None;
        }
        assert!(out.stdout.contains("R: hello"), "{out:?}");
        // syslog(3) sends each line before the program goes on: all are
        // queued by now.
        sock.set_nonblocking(true).unwrap();
        let prefix =
            regex::Regex::new(r"^(<\d+>)[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [^:]+: ").unwrap();
        let mut lines = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = sock.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).trim_end().to_string();
            lines.push(prefix.replace(&text, "$1").into_owned());
        }
        Some(lines)
    };
    for level in ["info", "error"] {
        let Some(ours) = sent(&agent_bin(), &tmp.path().join("wd"), level) else {
            return;
        };
        if level == "info" {
            assert_eq!(
                ours,
                vec![
                    format!(
                        "<14>CFEngine(agent)  Created file '{}', mode 0600",
                        target.display()
                    ),
                    "<13>CFEngine(agent)  R: hello".to_string()
                ],
                "ours"
            );
        } else {
            assert_eq!(
                ours,
                vec!["<13>CFEngine(agent)  R: hello".to_string()],
                "ours"
            );
        }
        if have("cf-agent") {
            let theirs = sent(
                std::path::Path::new("cf-agent"),
                &cf_workdir(tmp.path()),
                level,
            )
            .expect("a private /dev");
            assert_eq!(
                ours, theirs,
                "system_log_level {level}: ours, then cf-agent's"
            );
        } else {
            eprintln!("skipped the cf-agent comparison: cf-agent not installed");
        }
    }
}
