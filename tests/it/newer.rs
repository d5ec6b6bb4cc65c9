//! Policy written for CFEngine 3.22 to 3.28: the policies of tests/newer/
//! (each checks itself, see its README), the validator's verdict on the
//! newer attributes we do not support (refused, with the version named),
//! and, when `CFE_ACCEPTANCE_328_DIR` names the tests/acceptance directory
//! of a cfengine/core 3.28.0 checkout (with its examples/ beside it, as
//! `git archive 3.28.0 tests/acceptance examples` lays them out), the
//! acceptance tests of tests/newer/acceptance-3.28.txt run as
//! scripts/acceptance.py runs them; without it that part is skipped and
//! says so.

use crate::common::*;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn header_values(text: &str, key: &str) -> Vec<String> {
    let prefix = format!("# {key}: ");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

/// Runs a policy of tests/newer/ (as its headers say) with the work
/// directory `wd`; what did not hold, if anything.
fn run_newer_policy(f: &Path, wd: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let text = std::fs::read_to_string(f).expect("read policy");
    let runs: usize = header_values(&text, "runs")
        .first()
        .map_or(1, |v| v.parse().expect("runs: N"));
    let passes: usize = header_values(&text, "passes")
        .first()
        .map(|v| v.parse().expect("passes: N"))
        .expect("each policy says how many PASS lines it prints");
    let mut out = None;
    for _ in 0..runs {
        out = Some(run(Command::new(agent_bin())
            .args(["-K", "-w"])
            .arg(wd)
            .arg("-f")
            .arg(f)));
    }
    let out = out.expect("one run at least");
    let all = format!("{}{}", out.stdout, out.stderr);
    let name = f.file_name().unwrap().to_string_lossy().to_string();
    let got = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("R: PASS "))
        .count();
    if got != passes || all.contains("FAIL") {
        problems.push(format!("{name}: {got} of {passes} PASS lines:\n{all}"));
    }
    for e in header_values(&text, "expect") {
        if !all.contains(&e) {
            problems.push(format!("{name}: the output lacks '{e}':\n{all}"));
        }
    }
    problems
}

#[test]
fn newer_policies_pass_under_our_agent() {
    let mut problems = Vec::new();
    for f in cf_files(&root().join("tests/newer")) {
        let tmp = tempfile::tempdir().unwrap();
        problems.extend(run_newer_policy(&f, &tmp.path().join("wd")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

fn chattr(flag: &str, p: &Path) -> bool {
    Command::new("chattr")
        .arg(flag)
        .arg(p)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether `chattr +i` works in `dir` (as root, on a file system with
/// inode flags): where it does not, the tests of the immutable bit are
/// skipped.
fn immutable_bit_works(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, "").unwrap();
    let works = chattr("+i", &probe);
    assert!(chattr("-i", &probe) || !works);
    std::fs::remove_file(&probe).unwrap();
    works
}

/// CFEngine 3.27's `body fsattrs { immutable }` (tests/newer/immutable/),
/// where the immutable bit can be set: as root, on a file system with
/// inode flags. Everything is made mutable again after the run.
#[test]
fn fsattrs_immutable_sets_clears_and_overrides_the_bit() {
    let tmp = tempfile::tempdir().unwrap();
    if !immutable_bit_works(tmp.path()) {
        eprintln!("skipped: chattr +i does not work here (not root, or no inode flags)");
        return;
    }
    let wd = tmp.path().join("wd");
    let problems = run_newer_policy(&root().join("tests/newer/immutable/fsattrs.cf"), &wd);
    let _ = Command::new("chattr").arg("-R").arg("-i").arg(&wd).output();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// What CFEngine added after 3.21 is accepted where 3.28 accepts it: the
/// validator knows each newer attribute and body type (one we did not do
/// would be refused where it is written, naming its version, through
/// `schema::newer::NewerAttr::implemented`; none is left).
#[test]
fn newer_attributes_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        r#"body common control { bundlesequence => { "main" }; evaluation_order => "classic"; }
body agent control { default_directory_create_mode => "0755"; evaluation_order => "top_down"; }
body fsattrs locked { immutable => "true"; }
bundle agent main
{
  files:
      "/tmp/x" fsattrs => locked, edit_line => e;
  classes:
      "c" cancel => "true";
      "d" expression => "any", persistence => "5", timer_policy => "absolute";
}
bundle edit_line e
{
  replace_patterns:
      "a" replace_with => v, allow_non_convergent => "true";
}
body replace_with v { replace_value => "b"; }
"#,
    );
    let out = run(Command::new(agent_bin()).arg("--syntax-only").arg(&policy));
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(text.matches("error:").count(), 0, "{text}");
    assert_eq!(out.code, Some(0), "{text}");
}

#[test]
fn acceptance_tests_of_cfengine_3_28_pass() {
    let Some(suite) = std::env::var_os("CFE_ACCEPTANCE_328_DIR") else {
        eprintln!(
            "skipped: CFE_ACCEPTANCE_328_DIR does not name CFEngine 3.28.0's tests/acceptance"
        );
        return;
    };
    let list = std::fs::read_to_string(root().join("tests/newer/acceptance-3.28.txt"))
        .expect("acceptance-3.28.txt");
    let out_dir = tempfile::tempdir().unwrap();
    // The unsafe/ tests (the immutable bit's) run where the bit can be set
    // (in /tmp, which the runner's namespace makes private); else they are
    // left out, and this says so.
    let probe_dir = tempfile::tempdir_in("/tmp").unwrap();
    let unsafe_ok = immutable_bit_works(probe_dir.path());
    if !unsafe_ok {
        eprintln!("the unsafe/ tests are skipped: chattr +i does not work in /tmp here");
    }
    let tests: Vec<&str> = list
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| unsafe_ok || !l.contains("/unsafe/"))
        .collect();
    let listed = out_dir.path().join("list.txt");
    std::fs::write(&listed, tests.join("\n") + "\n").unwrap();
    let out = run(Command::new("python3")
        .arg(root().join("scripts/acceptance.py"))
        .arg("--suite")
        .arg(&suite)
        .arg("--agent")
        .arg(agent_bin())
        .arg("--list")
        .arg(&listed)
        .arg("--out")
        .arg(out_dir.path().join("out"))
        .args(unsafe_ok.then_some("--unsafe"))
        .arg("-q")
        .args(&tests));
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains(&format!("acceptance: {} passed, 0 failed", tests.len())),
        "{text}"
    );
}

/// cf-agent 3.24's `--no-augments` and `--no-host-specific-data`: the
/// run goes without def.json, or without host_specific.json.
#[test]
fn no_augments_and_no_host_specific_data_skip_their_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        r#"body common control { bundlesequence => { "main" }; }
bundle agent main
{
  reports:
      "def: $(def.from_def)";
      "host: $(data:variables.from_host)";
}
"#,
    );
    std::fs::write(
        tmp.path().join("def.json"),
        r#"{ "vars": { "from_def": "yes" } }"#,
    )
    .unwrap();
    let wd = tmp.path().join("wd");
    std::fs::create_dir_all(wd.join("data")).unwrap();
    std::fs::write(
        wd.join("data/host_specific.json"),
        r#"{ "vars": { "from_host": "yes" } }"#,
    )
    .unwrap();
    let go = |extra: &[&str]| {
        let out = run(Command::new(agent_bin())
            .args(["-K", "-w"])
            .arg(&wd)
            .args(extra)
            .arg("-f")
            .arg(&policy));
        out.stdout
    };
    let all = go(&[]);
    assert!(
        all.contains("R: def: yes") && all.contains("R: host: yes"),
        "{all}"
    );
    let no_def = go(&["--no-augments"]);
    assert!(
        no_def.contains("R: def: $(def.from_def)") && no_def.contains("R: host: yes"),
        "{no_def}"
    );
    let no_host = go(&["--no-host-specific-data"]);
    assert!(
        no_host.contains("R: def: yes") && no_host.contains("R: host: $(data:variables.from_host)"),
        "{no_host}"
    );
}

/// cf-agent 3.24's `--skip-bootstrap-service-start` is accepted (our
/// bootstrap starts no service): the run goes on as without it.
#[test]
fn skip_bootstrap_service_start_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        r#"body common control { bundlesequence => { "main" }; }
bundle agent main
{
  reports:
      "ran";
}
"#,
    );
    let out = run(Command::new(agent_bin())
        .args(["-K", "--skip-bootstrap-service-start", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "R: ran\n", "{out:?}");
}

/// cf-agent 3.27's `-p`/`--profile`: after the run, a JSON array with the
/// time of each bundle and promise, in cf-agent's shape; `-p FORMAT` is
/// still the policy output format.
#[test]
fn profile_prints_the_time_of_bundles_and_promises() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        r#"body common control { bundlesequence => { "main" }; }
bundle agent main
{
  methods:
      "m" usebundle => sub;
}
bundle agent sub
{
  reports:
      "in sub";
}
"#,
    );
    for flag in ["-p", "--profile"] {
        let out = run(Command::new(agent_bin())
            .args(["-K", "-w"])
            .arg(tmp.path().join("wd"))
            .arg(flag)
            .arg("-f")
            .arg(&policy));
        assert_eq!(out.code, Some(0), "{out:?}");
        let (report, json) = out.stdout.split_once('\n').expect("two parts");
        assert_eq!(report, "R: in sub");
        let events: serde_json::Value = serde_json::from_str(json).expect("JSON");
        let events = events.as_array().expect("an array");
        let find = |component: &str, name: &str| {
            events
                .iter()
                .find(|e| e["component"] == component && (e["name"] == name || e["type"] == name))
                .unwrap_or_else(|| panic!("no {component} {name}: {events:?}"))
        };
        let main = find("bundle", "main");
        let sub = find("bundle", "sub");
        let reports = find("promise", "reports");
        let source = policy.canonicalize().unwrap().display().to_string();
        assert_eq!(main["source"], source.as_str());
        assert_eq!(main["namespace"], "default");
        assert_eq!(main["type"], "agent");
        assert_eq!(
            main["id"],
            format!("{source}:2/bundle_agent_default:main").as_str()
        );
        assert_eq!(reports["offset"]["line"], 10);
        assert_eq!(
            reports["callstack"],
            format!(
                "{source}:2/bundle_agent_default:main;{source}:5/promise_methods;\
                 {source}:7/bundle_agent_default:sub;{source}:10/promise_reports"
            )
            .as_str()
        );
        let ns = |e: &serde_json::Value| e["elapsed"].as_u64().expect("elapsed");
        assert!(ns(main) >= ns(sub) && ns(sub) >= ns(reports), "{events:?}");
        // A bundle is recorded when it ends, after its promises.
        let at = |e: &serde_json::Value| events.iter().position(|x| x == e).unwrap();
        assert!(at(reports) < at(sub) && at(sub) < at(main));
    }
    let out = run(Command::new(agent_bin())
        .arg("-w")
        .arg(tmp.path().join("wd"))
        .args(["-p", "json", "-f"])
        .arg(&policy));
    assert!(out.stdout.contains("\"bundles\""), "{out:?}");
}
