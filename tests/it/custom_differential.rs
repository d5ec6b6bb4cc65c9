//! Differential tests of custom promise types: each directory in
//! tests/custom/ (but `modules/`) is one scenario with
//!
//! * `policy.cf`: the policy, where `@ROOT@` stands for the scenario's
//!   private root directory and `@MODULES@` for tests/custom/modules, the
//!   promise modules (in Python and bash, speaking the protocol
//!   themselves);
//! * `before/` (optional): the tree the root starts as;
//! * `expected.txt`: what cf-agent 3.21 did, recorded from cf-agent only
//!   (`UPDATE_EXPECTED=1` with cf-agent installed), so machines without
//!   CFEngine still compare.
//!
//! Each agent runs on its own copy: first `-KIn` (a dry run: nothing on
//! disk may change, modification times included), then `-KI` twice (the
//! second run must leave the tree as the first did). What is compared: the
//! `-I` lines of the three runs (paths written `@ROOT@`, `@BASE@` and
//! `@MODULES@`; cf-agent's "Setting workdir" and our summary left out) and
//! the tree after each real run.
//!
//! `CUSTOM_SCENARIO=substring` runs only the matching scenarios.

use crate::common::*;
use std::path::{Path, PathBuf};

fn modules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/custom/modules")
}

struct Scenario {
    name: String,
    dir: PathBuf,
    policy: String,
}

impl Scenario {
    /// A fresh copy of the scenario under `base`: the root tree and the
    /// policy naming it. Returns (root, policy file).
    fn prepare(&self, base: &Path) -> (PathBuf, PathBuf) {
        let root = base.join("root");
        copy_tree(&self.dir.join("before"), &root);
        let policy = base.join("policy.cf");
        let text = self
            .policy
            .replace("@ROOT@", &root.to_string_lossy())
            .replace("@MODULES@", &modules_dir().to_string_lossy());
        std::fs::write(&policy, text).expect("write policy");
        (root, policy)
    }
}

/// The lines of one run, with the machine's paths written as placeholders.
fn lines_of(out: &Captured, root: &Path, base: &Path) -> String {
    inform_lines(&format!("{}{}", out.stdout, out.stderr), root, base)
        .replace(modules_dir().to_string_lossy().as_ref(), "@MODULES@")
}

/// What one agent did in a scenario: the dry run, then two real runs.
/// Problems of its own (a dry run that changed something, a second run
/// that was not a no-op) go to `problems`.
fn observe(
    s: &Scenario,
    who: &str,
    base: &Path,
    problems: &mut Vec<String>,
    run_agent: &dyn Fn(&Path, &Path, &[&str]) -> Captured,
) -> String {
    let mut text = String::new();

    let dry = base.join("dry");
    let (root, policy) = s.prepare(&dry);
    let before = tree_listing(&root, true);
    let out = run_agent(&dry.join("wd"), &policy, &["-n"]);
    let after = tree_listing(&root, true);
    if before != after {
        problems.push(format!(
            "{}: {who}'s --dry-run changed the tree\n--- before\n{before}--- after\n{after}",
            s.name
        ));
    }
    text.push_str("## dry run (-n): -I lines\n");
    text.push_str(&lines_of(&out, &root, &dry));

    let real = base.join("real");
    let (root, policy) = s.prepare(&real);
    let mut trees = Vec::new();
    for n in 1..=2 {
        let out = run_agent(&real.join("wd"), &policy, &[]);
        let tree = tree_listing(&root, false);
        text.push_str(&format!("## run {n}: -I lines\n"));
        text.push_str(&lines_of(&out, &root, &real));
        text.push_str(&format!("## run {n}: tree\n{tree}"));
        trees.push(tree);
    }
    if trees[0] != trees[1] {
        problems.push(format!(
            "{}: {who}'s second run changed the tree\n{text}",
            s.name
        ));
    }
    text
}

fn ours(wd: &Path, policy: &Path, extra: &[&str]) -> Captured {
    agent_inform(wd, policy, extra)
}

fn cf_agent(wd: &Path, policy: &Path, extra: &[&str]) -> Captured {
    cf_agent_inform(
        wd.parent().expect("work directory in a base"),
        policy,
        extra,
    )
}

fn run_scenario(s: &Scenario, with_reference: bool) -> Vec<String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();
    let ours_text = observe(
        s,
        "our agent",
        &tmp.path().join("ours"),
        &mut problems,
        &ours,
    );
    let reference = with_reference.then(|| {
        observe(
            s,
            "cf-agent",
            &tmp.path().join("cf"),
            &mut problems,
            &cf_agent,
        )
    });
    problems.extend(check_expected(
        &s.dir.join("expected.txt"),
        &ours_text,
        reference.as_deref(),
    ));
    problems
}

#[test]
fn custom_promise_scenarios_match_cf_agent() {
    let with_reference = have("cf-agent");
    if !with_reference {
        eprintln!("skipped: cf-agent not installed; comparing with the recorded results instead");
    }
    let scenarios: Vec<Scenario> = scenario_dirs("custom", "CUSTOM_SCENARIO", 8)
        .into_iter()
        .map(|p| Scenario {
            name: p.file_name().expect("name").to_string_lossy().into_owned(),
            policy: std::fs::read_to_string(p.join("policy.cf")).expect("read policy.cf"),
            dir: p,
        })
        .collect();
    let problems = problems_in_parallel(&scenarios, 2, |s| run_scenario(s, with_reference));
    assert!(
        problems.is_empty(),
        "{} problems in {} scenarios:\n{}",
        problems.len(),
        scenarios.len(),
        problems.join("\n\n")
    );
}
