//! Differential tests of whole agent runs: each policy in tests/agent/ is
//! run by `agent -K` and by `cf-agent -K` (each with a private work
//! directory); the `R:` lines must be the same lines in the same order,
//! and so must the classes the policy defined (`--show-evaluated-classes`
//! rows tagged `source=promise`). The reference's output is recorded
//! beside each policy (`.expected`) for machines without CFEngine.
//!
//! Every run's exit code is compared too.
//!
//! Header keys: `# args: ...` extra flags for both agents (e.g. `-D x`);
//! `# runs: FLAGS ; FLAGS ...` runs each agent once per entry in one work
//! directory, with that entry's flags and without the `-K` every other
//! case gets, so that promise locks and persistent classes carry over.

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// The report lines and the soft classes (the rows of the evaluated
/// classes table that are not hard classes) of one run.
fn observe(out: &str) -> String {
    let mut lines: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with("R: "))
        .map(str::to_string)
        .collect();
    let mut classes: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Class name"))
        .skip(1)
        .filter(|l| !l.starts_with("R: ") && !l.contains("hardclass"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    classes.sort_unstable();
    lines.push("--- classes".into());
    lines.extend(classes.iter().map(|c| c.to_string()));
    lines.join("\n") + "\n"
}

/// One agent's runs of a case: the extra flags of each run.
fn runs_of(text: &str) -> Vec<Vec<String>> {
    let words = |a: &str| a.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    match header(text, "runs") {
        Some(runs) => runs.split(';').map(words).collect(),
        None => {
            let mut args = vec!["-K".to_string()];
            args.extend(header(text, "args").map(|a| words(&a)).unwrap_or_default());
            vec![args]
        }
    }
}

/// Runs one agent over a case, each run in the same work directory, and
/// renders what the runs printed and how each exited.
fn observe_runs(program: &Path, wd: &Path, dir: &Path, name: &str, runs: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, args) in runs.iter().enumerate() {
        let r = run(Command::new(program)
            .current_dir(dir)
            .args(["--show-evaluated-classes", "-w"])
            .arg(wd)
            .args(args)
            .arg("-f")
            .arg(format!("./{name}")));
        if runs.len() > 1 {
            out.push_str(&format!("--- run {}\n", i + 1));
        }
        out.push_str(&observe(&r.stdout));
        out.push_str(&format!(
            "--- exit {}\n",
            r.code.map_or("signal".into(), |c| c.to_string())
        ));
    }
    out
}

fn run_case(policy: &Path, with_reference: bool) -> Vec<String> {
    let text = std::fs::read_to_string(policy).expect("read policy");
    let runs = runs_of(&text);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = policy.parent().expect("policy dir");
    let name = policy
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    let ours = observe_runs(&agent_bin(), &tmp.path().join("ours"), dir, &name, &runs);
    let reference = with_reference.then(|| {
        let wd = cf_workdir(tmp.path());
        observe_runs(Path::new("cf-agent"), &wd, dir, &name, &runs)
    });
    let expected = policy.with_extension("expected");
    check_expected(&expected, &ours, reference.as_deref())
}

#[test]
fn agent_runs_match_cf_agent() {
    check_corpus(&["agent"], "cf-agent", run_case);
}
