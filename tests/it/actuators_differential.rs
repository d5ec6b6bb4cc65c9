//! Differential tests of the actuators that act on the live system:
//! commands, processes, services, users and storage. Each `.cf` file in
//! tests/actuators/<type>/ is one scenario; both agents run it on the same
//! prepared state (we are root on a disposable machine, as in CI), one
//! after the other, each with a fresh setup and a cleanup that runs however
//! the test ends.
//!
//! Placeholders in the policy and in the header commands: `@TAG@` is a
//! number unique to this test process (for names of test users, services,
//! sleepers), `@ROOT@` a private directory per agent, `@DIR@` the scenario
//! directory (for fixtures), `@LIB@` the standard library's stdlib.cf: ours
//! (policies/lib) for our agent, the MPF's for cf-agent, so that a services
//! scenario shows that our `standard_services` does what the MPF's does.
//!
//! Header keys:
//! * `# setup: CMD` (repeatable) runs through `/bin/sh -c` before each
//!   agent's runs; `# cleanup: CMD` (repeatable) after them, also when the
//!   test fails;
//! * `# sleepers: N ARGS` starts N `/bin/sleep ARGS` processes before each
//!   agent's runs; they are killed by their pids afterwards;
//! * `# observe: CMD` (repeatable) prints the end state after each run;
//! * `# args: ...` extra flags for both agents;
//! * `# dry-run: ours-only REASON` where cf-agent's `-n` says something
//!   else on purpose (README "Where we differ"): our dry run is then
//!   checked alone;
//! * `# compare: ours-only REASON` where cf-agent 3.21 has a bug that a
//!   later CFEngine fixed and we do not copy: our runs are checked alone
//!   (dry run, second run), and the scenario has no `.expected`;
//! * `# converges: no` where the promise acts on every run by nature
//!   (`restart`, a command): the second run is still compared.
//!
//! What is compared: for a dry run (`-n`) and two real runs (`-K -I`), the
//! log lines (pids, the ps line cf-agent prints for a process, and the
//! placeholders normalised), the soft classes the run defined, and the
//! observed state. Ours must also leave the state untouched under
//! `--dry-run`, report some change under it whenever the real run changes
//! something, and (unless `converges: no`) leave the state after the
//! second run as the first did, with nothing repaired. cf-agent's results
//! are recorded in `.expected` beside each scenario (`UPDATE_EXPECTED=1`
//! with cf-agent installed), for machines without CFEngine.
//!
//! `ACTUATOR_SCENARIO=substring` runs only the matching scenarios.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const MPF_LIB: &str = "/usr/share/cfengine3/masterfiles/lib/stdlib.cf";

/// A number unique to this test process: no two concurrent test binaries
/// share test users, services or sleepers.
fn tag() -> String {
    format!("{}", 10_000 + std::process::id() % 90_000)
}

struct Scenario {
    name: String,
    dir: PathBuf,
    policy: String,
}

impl Scenario {
    fn headers(&self, key: &str) -> Vec<String> {
        headers(&self.policy, key)
    }

    fn subst(&self, s: &str, root: &Path) -> String {
        s.replace("@TAG@", &tag())
            .replace("@ROOT@", &root.to_string_lossy())
            .replace("@DIR@", &self.dir.to_string_lossy())
    }
}

/// What one agent's runs of a scenario set up, undone on drop: sleepers
/// killed by their pids, cleanup commands run.
struct Prepared {
    sleepers: Vec<Child>,
    cleanup: Vec<String>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        for c in &mut self.sleepers {
            let _ = c.kill();
            let _ = c.wait();
        }
        for cmd in &self.cleanup {
            let _ = Command::new("/bin/sh").arg("-c").arg(cmd).output();
        }
    }
}

fn sh(cmd: &str) -> Captured {
    run(Command::new("/bin/sh").arg("-c").arg(cmd))
}

fn prepare(s: &Scenario, root: &Path) -> Prepared {
    std::fs::create_dir_all(root).expect("create root");
    let mut p = Prepared {
        sleepers: Vec::new(),
        cleanup: s
            .headers("cleanup")
            .iter()
            .map(|c| s.subst(c, root))
            .collect(),
    };
    // Leftovers of an earlier, interrupted test go first.
    for cmd in &p.cleanup {
        sh(cmd);
    }
    for cmd in s.headers("setup") {
        let out = sh(&s.subst(&cmd, root));
        assert_eq!(
            out.code,
            Some(0),
            "{}: setup '{cmd}' failed: {out:?}",
            s.name
        );
    }
    for spec in s.headers("sleepers") {
        let spec = s.subst(&spec, root);
        let (n, args) = spec.split_once(' ').expect("sleepers: N ARGS");
        for _ in 0..n.parse::<usize>().expect("sleeper count") {
            let child = Command::new("/bin/sleep")
                .args(args.split_whitespace())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start a sleeper");
            p.sleepers.push(child);
        }
    }
    if !p.sleepers.is_empty() {
        // Let them exec, so that their command lines are in the table.
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    p
}

/// The state the scenario's observe commands print.
fn observe_state(s: &Scenario, root: &Path) -> String {
    let mut out = String::new();
    for cmd in s.headers("observe") {
        let r = sh(&s.subst(&cmd, root));
        out.push_str(&r.stdout);
    }
    out
}

/// One run's output, normalised: log lines, then the soft classes.
fn normalise(out: &str, root: &Path, base: &Path, pids: &[u32]) -> String {
    let mut lines = Vec::new();
    let mut classes = Vec::new();
    let mut in_table = false;
    for l in out.lines() {
        if l.starts_with("Class name") {
            in_table = true;
            continue;
        }
        if in_table {
            // Classes whose names start with `_` are a library's own (the
            // MPF's `_stdlib_path_exists_*`): not what the scenario promised.
            if !l.starts_with("R: ")
                && !l.starts_with('_')
                && !l.contains("hardclass")
                && !l.contains("source=agent")
                && let Some(c) = l.split_whitespace().next()
            {
                classes.push(c.to_string());
            }
            continue;
        }
        lines.push(l.to_string());
    }
    let mut text = inform_lines(&lines.join("\n"), root, base).replace(&tag(), "@TAG@");
    for pid in pids {
        let re = regex::Regex::new(&format!(r"\b{pid}\b")).expect("pid pattern");
        text = re.replace_all(&text, "@PID@").into_owned();
    }
    // cf-agent names a process by its whole `ps` line, whose times and
    // sizes change from run to run: all but the user, the pid and the
    // command line are masked.
    let ps = regex::Regex::new(
        r"([a-z_][a-z0-9_-]*) +@PID@ +\d+ +\d+ +[\d.]+ +[\d.]+ +\d+ +-?\d+ +\d+ +\S+ +\d+ +\S+ +\S+ +\S+ +",
    )
    .expect("ps pattern");
    text = ps.replace_all(&text, "$1 @PID@ @PS@ ").into_owned();
    // How much space is free depends on the machine.
    let free = regex::Regex::new(r"(\d+)% free|\((\d+) kB free\)").expect("free pattern");
    text = free
        .replace_all(&text, |c: &regex::Captures| {
            if c.get(1).is_some() {
                "N% free".to_string()
            } else {
                "(N kB free)".to_string()
            }
        })
        .into_owned();
    classes.sort();
    text.push_str("-- classes\n");
    for c in classes {
        text.push_str(&c.replace(&tag(), "@TAG@"));
        text.push('\n');
    }
    text
}

/// Runs one agent over the scenario: a dry run, then two real runs, each
/// on freshly prepared state for the dry run and the same state for the
/// two real runs. Returns the observed text and our own checks' problems.
fn observe_agent(s: &Scenario, program: &Path, base: &Path, ours: bool) -> (String, Vec<String>) {
    let mut problems = Vec::new();
    let root = base.join("root");
    let wd = if ours {
        base.join("wd")
    } else {
        cf_workdir(base)
    };
    let policy = base.join("policy.cf");
    std::fs::create_dir_all(base).expect("create base");
    let lib = if ours {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/lib/stdlib.cf")
    } else {
        PathBuf::from(MPF_LIB)
    };
    let text = s
        .subst(&s.policy, &root)
        .replace("@LIB@", &lib.to_string_lossy());
    std::fs::write(&policy, text).expect("write policy");
    let extra: Vec<String> = header(&s.policy, "args")
        .map(|a| a.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let agent = |flags: &[&str]| {
        run(Command::new(program)
            .args(flags)
            .args(["--show-evaluated-classes", "-w"])
            .arg(&wd)
            .args(&extra)
            .arg("-f")
            .arg(&policy))
    };
    let mut text = String::new();

    let dry_ours_only = header(&s.policy, "dry-run").is_some_and(|v| v.starts_with("ours-only"));
    let (dry, state_before) = {
        let prep = prepare(s, &root);
        let pids: Vec<u32> = prep.sleepers.iter().map(Child::id).collect();
        let before = observe_state(s, &root);
        let out = agent(&["-K", "-I", "-n"]);
        let after = observe_state(s, &root);
        if ours && before != after {
            problems.push(format!(
                "{}: --dry-run changed the state\n--- before\n{before}--- after\n{after}--- output\n{}{}",
                s.name, out.stdout, out.stderr
            ));
        }
        let dry = normalise(&format!("{}{}", out.stdout, out.stderr), &root, base, &pids);
        let before = before
            .replace(root.to_string_lossy().as_ref(), "@ROOT@")
            .replace(&tag(), "@TAG@");
        (dry, before)
    };
    if !dry_ours_only {
        // Reports under a dry run print as in a real run with us; cf-agent
        // only warns that it would print them (README, "Where we differ").
        text.push_str("## dry run\n");
        // cf-agent -n also calls each users promise it would act on a
        // failure ("Failed to create user"); it fails nothing.
        let user_failure =
            regex::Regex::new(r"error: Failed to (create|modify|remove) user").expect("pattern");
        for l in dry.lines() {
            if !l.starts_with("R: ")
                && !l.contains("Need to repair reports promise")
                && !user_failure.is_match(l)
            {
                text.push_str(l);
                text.push('\n');
            }
        }
    }

    let prep = prepare(s, &root);
    let pids: Vec<u32> = prep.sleepers.iter().map(Child::id).collect();
    let mut states = Vec::new();
    let mut runs = Vec::new();
    for n in 1..=2 {
        let out = agent(&["-K", "-I"]);
        let state = observe_state(s, &root)
            .replace(root.to_string_lossy().as_ref(), "@ROOT@")
            .replace(&tag(), "@TAG@");
        let log = normalise(&format!("{}{}", out.stdout, out.stderr), &root, base, &pids);
        text.push_str(&format!("## run {n}\n{log}-- state\n{state}"));
        states.push(state);
        runs.push(log);
    }
    drop(prep);
    // A dry run must say what it would change: when the real run changed
    // the observed state, the dry run warns (cf-agent says some of it as
    // errors: "Need to keep signal promise ...").
    if ours
        && states[0] != state_before
        && !dry
            .lines()
            .any(|l| l.starts_with(" warning:") || l.starts_with("   error: Need to"))
    {
        problems.push(format!(
            "{}: the dry run reported no change it would make\n{dry}",
            s.name
        ));
    }
    let converges = header(&s.policy, "converges").is_none_or(|v| !v.starts_with("no"));
    if ours && converges {
        if states[0] != states[1] {
            problems.push(format!(
                "{}: our second run changed the state\n{text}",
                s.name
            ));
        }
        if runs[1].lines().any(|l| l.ends_with("_repaired")) {
            problems.push(format!(
                "{}: our second run repaired something\n{text}",
                s.name
            ));
        }
    }
    (text, problems)
}

fn run_case(policy: &Path, with_reference: bool) -> Vec<String> {
    let text = std::fs::read_to_string(policy).expect("read scenario");
    let s = Scenario {
        name: policy
            .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/actuators"))
            .unwrap_or(policy)
            .to_string_lossy()
            .into_owned(),
        dir: policy.parent().expect("dir").to_path_buf(),
        policy: text,
    };
    if let Ok(f) = std::env::var("ACTUATOR_SCENARIO")
        && !s.name.contains(&f)
    {
        return Vec::new();
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // Both bases have names of the same length, so that output that
    // truncates a path truncates it alike.
    let (ours, mut problems) = observe_agent(&s, &agent_bin(), &tmp.path().join("ours"), true);
    if header(&s.policy, "compare").is_some_and(|v| v.starts_with("ours-only")) {
        return problems;
    }
    let reference = with_reference.then(|| {
        let (theirs, _) = observe_agent(&s, Path::new("cf-agent"), &tmp.path().join("cfag"), false);
        theirs
    });
    problems.extend(check_expected(
        &policy.with_extension("expected"),
        &ours,
        reference.as_deref(),
    ));
    problems
}

#[test]
fn commands_match_cf_agent() {
    check_corpus(&["actuators/commands"], "cf-agent", run_case);
}

#[test]
fn processes_match_cf_agent() {
    check_corpus(&["actuators/processes"], "cf-agent", run_case);
}

#[test]
fn users_match_cf_agent() {
    if !is_root() {
        eprintln!("skipped: the users scenarios need root");
        return;
    }
    let _users = serial(&USERS);
    check_corpus(&["actuators/users"], "cf-agent", run_case);
}

#[test]
fn services_match_cf_agent() {
    if Path::new("/run/systemd/system").exists() {
        eprintln!("systemd runs here: the scenarios test the init-script path regardless");
    } else {
        eprintln!("skipped: no systemd; the init-script path is tested instead");
    }
    if !is_root() {
        eprintln!("skipped: the services scenarios need root");
        return;
    }
    check_corpus(&["actuators/services"], "cf-agent", run_case);
}

#[test]
fn storage_matches_cf_agent() {
    check_corpus(&["actuators/storage"], "cf-agent", run_case);
}
