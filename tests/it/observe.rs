//! Issue 28: a run observed through what sites already run — exit codes
//! (one test per row of README's table), `--metrics-file` for
//! node_exporter, the system log, `promise_summary.log`, dry runs that
//! change nothing (package lists included), and safe defaults.

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// Runs our agent with `-K -w WD` and `extra` on a policy text.
fn agent(dir: &Path, policy: &str, extra: &[&str]) -> Captured {
    let p = write_policy(dir, policy);
    run(Command::new(agent_bin())
        .arg("-K")
        .arg("-w")
        .arg(dir.join("wd"))
        .args(extra)
        .arg("-f")
        .arg(p))
}

const KEPT: &str = "bundle agent main { reports: \"hello\"; }\n";
const NOT_KEPT: &str = "bundle agent main { commands: \"/bin/false\"; }\n";

fn repaired(dir: &Path) -> String {
    format!(
        "bundle agent main {{ files: \"{}/made\" create => \"true\"; }}\n",
        dir.display()
    )
}

fn both(dir: &Path) -> String {
    format!(
        "bundle agent main {{ files: \"{}/made\" create => \"true\"; commands: \"/bin/false\"; }}\n",
        dir.display()
    )
}

/// An `error:` inside an edit bundle: the file promise itself is not
/// counted not kept by cf-agent's rules, but the run had an error.
fn edit_error(dir: &Path) -> String {
    format!(
        "bundle agent main {{ files: \"{}/no/such/dir/f\" edit_line => el; }}\nbundle edit_line el {{ insert_lines: \"x\"; }}\n",
        dir.display()
    )
}

/// A transaction whose bundle fails is undone.
fn rolled_back(dir: &Path) -> String {
    let conf = dir.join("conf");
    std::fs::write(&conf, "old\n").unwrap();
    format!(
        "bundle agent main\n{{\n  meta:\n      \"tags\" slist => {{ \"transaction\" }};\n  files:\n      \"{}\" content => \"new\";\n  commands:\n      \"/bin/false\";\n}}\n",
        conf.display()
    )
}

/// A package inventory refresh that fails: an error outside any promise.
fn inventory_error(dir: &Path) -> String {
    let wd = dir.join("wd");
    let modules = wd.join("modules/packages");
    std::fs::create_dir_all(&modules).unwrap();
    let m = modules.join("broken_pm");
    std::fs::write(
        &m,
        "#!/bin/sh\ncat >/dev/null\ncase $1 in\n  supports-api-version) echo 1 ;;\n  list-installed) echo ErrorMessage=cannot list ;;\n  *) exit 1 ;;\nesac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o755)).unwrap();
    "body common control { package_inventory => { \"broken_pm\" }; }\n\
     body package_module broken_pm { query_installed_ifelapsed => \"0\"; query_updates_ifelapsed => \"0\"; }\n\
     bundle agent main { reports: \"hello\"; }\n"
        .to_string()
}

fn code(dir: &Path, policy: &str, extra: &[&str]) -> Option<i32> {
    let out = agent(dir, policy, extra);
    out.code
}

// README, "Exit codes": one test per row.

#[test]
fn exit_0_the_policy_ran_whatever_its_promises_did() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(code(tmp.path(), KEPT, &[]), Some(0));
    assert_eq!(code(tmp.path(), NOT_KEPT, &[]), Some(0));
    let p = edit_error(tmp.path());
    assert_eq!(code(tmp.path(), &p, &[]), Some(0));
}

#[test]
fn exit_1_the_policy_does_not_load() {
    let tmp = tempfile::tempdir().unwrap();
    let out = agent(tmp.path(), "bundle agent main { reports: \"x\" }\n", &[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let out = agent(
        tmp.path(),
        "bundle agent main { reports: \"x\" }\n",
        &["--detailed-exitcodes"],
    );
    assert_eq!(out.code, Some(1), "{out:?}");
}

#[test]
fn exit_2_bad_command_line() {
    let out = run(Command::new(agent_bin()).arg("--no-such-flag"));
    assert_eq!(out.code, Some(2), "{out:?}");
}

#[test]
fn exit_6_abortclasses() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = "body agent control { abortclasses => { \"stop_.*\" }; }\n\
                  bundle agent main { classes: \"stop_now\" expression => \"any\"; reports: \"x\"; }\n";
    assert_eq!(code(tmp.path(), policy, &[]), Some(6));
}

#[test]
fn detailed_0_everything_kept() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(code(tmp.path(), KEPT, &["--detailed-exitcodes"]), Some(0));
}

#[test]
fn detailed_2_something_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    let p = repaired(tmp.path());
    assert_eq!(code(tmp.path(), &p, &["--detailed-exitcodes"]), Some(2));
    // A dry run's would-be repair counts as one.
    let again = tempfile::tempdir().unwrap();
    let p = repaired(again.path());
    assert_eq!(
        code(again.path(), &p, &["--detailed-exitcodes", "--dry-run"]),
        Some(2)
    );
    assert!(!again.path().join("made").exists());
}

#[test]
fn detailed_4_a_promise_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(
        code(tmp.path(), NOT_KEPT, &["--detailed-exitcodes"]),
        Some(4)
    );
}

#[test]
fn detailed_4_an_error_inside_an_edit_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let p = edit_error(tmp.path());
    let out = agent(tmp.path(), &p, &["--detailed-exitcodes"]);
    assert!(out.stdout.contains("error:"), "{out:?}");
    assert_eq!(out.code, Some(4), "{out:?}");
}

#[test]
fn detailed_4_an_error_outside_promises() {
    let tmp = tempfile::tempdir().unwrap();
    let p = inventory_error(tmp.path());
    let out = agent(tmp.path(), &p, &["--detailed-exitcodes"]);
    assert!(out.stdout.contains("error:"), "{out:?}");
    assert_eq!(out.code, Some(4), "{out:?}");
}

#[test]
fn detailed_4_a_rolled_back_transaction() {
    let tmp = tempfile::tempdir().unwrap();
    let p = rolled_back(tmp.path());
    let out = agent(tmp.path(), &p, &["--detailed-exitcodes"]);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("conf")).unwrap(),
        "old\n"
    );
    // The content was repaired, then undone: not kept is what stays.
    assert_eq!(out.code.map(|c| c & 4), Some(4), "{out:?}");
}

#[test]
fn detailed_6_repaired_and_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let p = both(tmp.path());
    assert_eq!(code(tmp.path(), &p, &["--detailed-exitcodes"]), Some(6));
}

/// The metrics file parses as Prometheus' text format, with the rules of
/// node_exporter's textfile collector: each family once with HELP and
/// TYPE, no time stamps; and it is replaced, not appended to.
#[test]
fn metrics_file_is_a_node_exporter_textfile() {
    let tmp = tempfile::tempdir().unwrap();
    let metrics = tmp.path().join("convergent.prom");
    let p = both(tmp.path());
    let out = agent(
        tmp.path(),
        &p,
        &["--metrics-file", metrics.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = std::fs::read_to_string(&metrics).unwrap();
    let check = |text: &str| {
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text format");
        let mut families = std::collections::BTreeSet::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap().to_string();
                assert!(families.insert(name.clone()), "{name} twice");
                assert!(
                    text.contains(&format!("# HELP {name} ")),
                    "{name} has no HELP"
                );
            } else if !l.starts_with('#') {
                // name{labels} value, and no third field (a time stamp).
                let after_labels = l.rsplit('}').next().unwrap();
                let fields = after_labels.split_whitespace().count();
                assert!(fields <= 2, "a sample with a time stamp: {l}");
            }
        }
        assert!(
            scrape
                .samples
                .iter()
                .all(|s| s.metric.starts_with("convergent_"))
        );
        scrape
    };
    let scrape = check(&text);
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .unwrap_or_else(|| panic!("no {name} {label:?} in {text}"));
        match s.value {
            prometheus_parse::Value::Gauge(v) => v,
            ref other => panic!("{name} is not a gauge: {other:?}"),
        }
    };
    assert_eq!(
        value("convergent_promises", Some(("outcome", "repaired"))),
        1.0
    );
    assert_eq!(
        value("convergent_promises", Some(("outcome", "not_kept"))),
        1.0
    );
    assert_eq!(value("convergent_promises", Some(("outcome", "kept"))), 0.0);
    assert!(value("convergent_errors", None) >= 1.0);
    assert!(value("convergent_run_duration_seconds", None) > 0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as f64;
    let last = value("convergent_last_run_timestamp_seconds", None);
    assert!((now - last).abs() < 600.0, "{last} vs {now}");
    assert_eq!(value("convergent_last_run_success", None), 1.0);
    // node_exporter runs as its own user: the file is readable by all.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&metrics).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    // A policy that does not load still writes it, failed.
    let out = agent(
        tmp.path(),
        "bundle agent main { reports: \"x\" }\n",
        &["--metrics-file", metrics.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(1), "{out:?}");
    let text = std::fs::read_to_string(&metrics).unwrap();
    let scrape = check(&text);
    let success = scrape
        .samples
        .iter()
        .find(|s| s.metric == "convergent_last_run_success")
        .unwrap();
    assert!(matches!(success.value, prometheus_parse::Value::Gauge(v) if v == 0.0));
    // Nothing left beside it (the temporary file was renamed).
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("convergent.prom"))
        .collect();
    assert_eq!(names, ["convergent.prom"]);
}

/// `promise_summary.log` in the work directory, one line per run as
/// cf-agent 3.21 appends it; compared with the real cf-agent's when it is
/// installed.
#[test]
fn promise_summary_log_as_cf_agent_writes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = format!(
        "body common control {{ bundlesequence => {{ \"main\" }}; version => \"1.2.3\"; }}\n\
         bundle agent main {{\n  files: \"{}/x\" create => \"true\";\n  commands: \"/bin/false\";\n  reports: \"hi\";\n}}\n",
        tmp.path().display()
    );
    let p = write_policy(tmp.path(), &policy);
    let wd = tmp.path().join("wd");
    let ours = |extra: &[&str]| {
        run(Command::new(agent_bin())
            .args(["-K", "-w"])
            .arg(&wd)
            .args(extra)
            .arg("-f")
            .arg(&p))
    };
    ours(&[]);
    ours(&[]);
    ours(&["--dry-run"]);
    let text = std::fs::read_to_string(wd.join("promise_summary.log")).unwrap();
    // The times vary; the rest is cf-agent's.
    let shape = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| {
                let (times, rest) = l.split_once(": ").unwrap();
                let (a, b) = times.split_once(',').unwrap();
                assert!(a.parse::<i64>().unwrap() <= b.parse::<i64>().unwrap());
                rest.to_string()
            })
            .collect()
    };
    let expected = [
        "Outcome of version 1.2.3 (agent-0): Promises observed to be kept 33.33%, Promises repaired 33.33%, Promises not repaired 33.33%",
        "Outcome of version 1.2.3 (agent-0): Promises observed to be kept 66.67%, Promises repaired 0.00%, Promises not repaired 33.33%",
        // cf-agent -n counts a would-be repair (the report) as not repaired.
        "Outcome of version 1.2.3 (agent-0): Promises observed to be kept 33.33%, Promises repaired 0.00%, Promises not repaired 66.67%",
    ];
    assert_eq!(shape(&text), expected, "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(wd.join("promise_summary.log"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    if !have("cf-agent") {
        return;
    }
    // The same policy under cf-agent, in its own directory.
    let cf = tempfile::tempdir().unwrap();
    let cf_policy = policy.replace(
        &tmp.path().display().to_string(),
        &cf.path().display().to_string(),
    );
    let cp = write_policy(cf.path(), &cf_policy);
    let cwd = cf_workdir(cf.path());
    for extra in [&[][..], &[][..], &["-n"][..]] {
        run(Command::new("cf-agent")
            .env("CFENGINE_TEST_OVERRIDE_WORKDIR", &cwd)
            .arg("-K")
            .args(extra)
            .arg("-f")
            .arg(&cp));
    }
    let theirs = std::fs::read_to_string(cwd.join("promise_summary.log")).unwrap();
    assert_eq!(shape(&text), shape(&theirs));
}

/// A run logs to the system log as cf-agent does: facility user, its
/// name and pid as the tag, `CFEngine(agent)` before each message, errors
/// as err, reports as notice, info lines only under -I, never verbose.
#[test]
fn log_lines_go_to_the_system_log() {
    use std::os::unix::net::UnixDatagram;
    let tmp = tempfile::tempdir().unwrap();
    let sock_path = tmp.path().join("log.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    let p = write_policy(
        tmp.path(),
        "bundle agent main { commands: \"/bin/false\"; reports: \"hi\"; }\n",
    );
    let received = |extra: &[&str]| -> Vec<String> {
        run(Command::new(agent_bin())
            .env("CONVERGENT_SYSLOG_SOCKET", &sock_path)
            .args(["-K", "-w"])
            .arg(tmp.path().join("wd"))
            .args(extra)
            .arg("-f")
            .arg(&p));
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = sock.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        got
    };
    let lines = received(&[]);
    let error = lines
        .iter()
        .find(|l| l.contains("/bin/false"))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(error.starts_with("<11>"), "{error}");
    assert!(error.contains(" agent["), "{error}");
    assert!(
        error.ends_with(
            "]: CFEngine(agent)  Finished command related to promiser '/bin/false' -- an error occurred, returned 1\n"
        ),
        "{error}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("<13>") && l.ends_with("CFEngine(agent)  R: hi\n")),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("<14>")), "{lines:#?}");
    let inform = received(&["-I"]);
    assert!(inform.iter().any(|l| l.starts_with("<14>")), "{inform:#?}");
    let verbose = received(&["-v"]);
    assert!(
        !verbose.iter().any(|l| l.starts_with("<15>")),
        "verbose lines stay out: {verbose:#?}"
    );
    // body common control's system_log_level: errors only (and reports).
    let p2 = write_policy(
        tmp.path(),
        "body common control { system_log_level => \"error\"; }\nbundle agent main { commands: \"/bin/false\"; reports: \"hi\"; }\n",
    );
    run(Command::new(agent_bin())
        .env("CONVERGENT_SYSLOG_SOCKET", &sock_path)
        .args(["-K", "-I", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&p2));
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = sock.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    // Errors, and the report: cf-agent sends every report itself, past
    // system_log_level (tests/it/logging.rs compares it with cf-agent).
    assert!(got.iter().any(|l| l.starts_with("<11>")), "{got:#?}");
    assert!(
        got.iter()
            .all(|l| l.starts_with("<11>") || l.ends_with("CFEngine(agent)  R: hi\n")),
        "{got:#?}"
    );
}

/// A dry run changes nothing: files, commands, and the package lists
/// (apt_get's `list-updates` runs `apt-get update`; a dry run asks for
/// `list-updates-local`).
#[test]
fn a_dry_run_changes_nothing_package_lists_included() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    let modules = wd.join("modules/packages");
    std::fs::create_dir_all(&modules).unwrap();
    let module = modules.join("apt_get");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/modules/packages/apt_get"),
        &module,
    )
    .unwrap();
    std::fs::set_permissions(&module, std::fs::Permissions::from_mode(0o755)).unwrap();
    // apt-get and dpkg-query stand-ins that write down how they were called.
    let calls = tmp.path().join("calls");
    let fake = |name: &str| {
        let p = tmp.path().join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\necho \"{name} $*\" >> '{}'\n", calls.display()),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let apt = fake("apt-get");
    let query = fake("dpkg-query");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("old"), "keep\n").unwrap();
    let policy = format!(
        "body common control {{ package_inventory => {{ \"apt_get\" }}; package_module => apt_get; }}\n\
         body package_module apt_get {{ query_installed_ifelapsed => \"0\"; query_updates_ifelapsed => \"0\"; }}\n\
         bundle agent main {{\n\
           files: \"{d}/new\" create => \"true\";\n\
                  \"{d}/old\" content => \"changed\";\n\
           commands: \"/bin/touch {d}/touched\";\n\
           packages: \"somepkg\" policy => \"present\", version => \"latest\";\n\
         }}\n",
        d = data.display()
    );
    let p = write_policy(tmp.path(), &policy);
    let snapshot = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap_or_default(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&data);
    let go = |dry: bool| {
        let mut cmd = Command::new(agent_bin());
        cmd.env("CONVERGENT_APT_GET", &apt)
            .env("CONVERGENT_DPKG_QUERY", &query)
            .args(["-K", "-w"])
            .arg(&wd);
        if dry {
            cmd.arg("--dry-run");
        }
        run(cmd.arg("-f").arg(&p))
    };
    let out = go(true);
    assert_eq!(snapshot(&data), before, "{out:?}");
    let said = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(
        !said
            .lines()
            .any(|l| l.starts_with("apt-get") && l.contains(" update")),
        "a dry run ran apt-get update: {said}\n{out:?}"
    );
    assert!(
        !said
            .lines()
            .any(|l| l.starts_with("apt-get") && l.contains("install")),
        "{said}"
    );
    // The same policy for real does refresh the lists (the test would see
    // it) and changes the files.
    let _ = std::fs::remove_file(&calls);
    let out = go(false);
    let said = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(
        said.lines()
            .any(|l| l.starts_with("apt-get") && l.contains(" update")),
        "{said}\n{out:?}"
    );
    assert_ne!(snapshot(&data), before);
}

/// Without HOME (cron, some service managers) the work directory comes
/// from the password database; a user with neither is asked for -w, never
/// given a shared, predictable /tmp path.
#[test]
fn no_home_no_shared_tmp_path() {
    use std::os::unix::process::CommandExt;
    if !is_root() {
        // Needs to run as a user without a passwd entry.
        return;
    }
    let bare = |uid: u32| {
        let mut cmd = Command::new(agent_bin());
        cmd.env_remove("HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("CFENGINE_TEST_OVERRIDE_WORKDIR")
            .current_dir("/")
            .uid(uid)
            .gid(65534)
            .arg("-x");
        run(&mut cmd)
    };
    // A uid the password database does not know.
    let out = bare(54321);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("-w"), "{out:?}");
    assert!(!out.stdout.contains("/tmp"), "{out:?}");
    // nobody: its home from the password database.
    let out = bare(65534);
    assert!(!out.stdout.contains("/tmp"), "{out:?}");
}

/// NO_COLOR turns `--color=auto` off (no-color.org); `always` still wins.
#[test]
fn no_color_is_honoured() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_policy(
        tmp.path(),
        "bundle agent main { commands: \"/bin/false\"; }\n",
    );
    let go = |color: &str, no_color: bool| {
        let mut cmd = Command::new(agent_bin());
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        run(cmd
            .arg(format!("--color={color}"))
            .args(["-K", "-w"])
            .arg(tmp.path().join("wd"))
            .arg("-f")
            .arg(&p))
    };
    assert!(!go("auto", true).stdout.contains('\x1b'));
    assert!(go("always", true).stdout.contains("\x1b["));
    assert!(!go("never", false).stdout.contains('\x1b'));
}

/// `--version` names the commit the agent was built from.
#[test]
fn version_names_the_commit() {
    let out = run(Command::new(agent_bin()).arg("--version"));
    assert_eq!(out.code, Some(0));
    let line = out.stdout.trim();
    let commit = line
        .split("(commit ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no commit in {line:?}"));
    let from_git = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match std::env::var("CONVERGENT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
    {
        Some(c) => assert_eq!(commit, c),
        None => match from_git {
            // The binary was built from this checkout's HEAD (a commit
            // made since then rebuilds it: build.rs watches HEAD).
            Some(head) => assert_eq!(commit, head, "{line}"),
            None => assert_eq!(commit, "unknown", "{line}"),
        },
    }
}

/// README's exit code table names a test for each row, and each is here.
#[test]
fn every_exit_code_row_has_its_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let this = std::fs::read_to_string(root.join("tests/it/observe.rs")).unwrap();
    let section = readme
        .split("## Exit codes\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has an Exit codes section");
    let mut rows = 0;
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let code = cells[0].trim_start_matches("| ").trim();
        if code.parse::<u8>().is_err() {
            continue;
        }
        rows += 1;
        let tests: Vec<&str> = cells
            .last()
            .unwrap()
            .trim_end_matches(" |")
            .split(", ")
            .map(|t| t.trim_matches('`'))
            .collect();
        for t in tests {
            assert!(
                t.starts_with("exit_") || t.starts_with("detailed_"),
                "row {code}: {t:?} is not a test name"
            );
            assert!(
                this.contains(&format!("fn {t}()")),
                "row {code}: no test {t} in tests/it/observe.rs"
            );
        }
    }
    assert_eq!(rows, 8, "{section}");
}
