//! Differential tests of whole agent runs: each policy in tests/agent/ is
//! run by `agent -K` and by `cf-agent -K` (each with a private work
//! directory); the `R:` lines must be the same lines in the same order,
//! and so must the classes the policy defined (`--show-evaluated-classes`
//! rows tagged `source=promise`). The reference's output is recorded
//! beside each policy (`.expected`) for machines without CFEngine.
//!
//! Header keys: `# args: ...` extra flags for both agents (e.g. `-D x`).

mod common;

use common::*;
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

fn run_case(policy: &Path, with_reference: bool) -> Vec<String> {
    let text = std::fs::read_to_string(policy).expect("read policy");
    let args: Vec<String> = header(&text, "args")
        .map(|a| a.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = policy.parent().expect("policy dir");
    let name = policy
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    let run_with = |tool: &Path, workdir: &Path| {
        run(Command::new(tool)
            .current_dir(dir)
            .args(["-K", "--show-evaluated-classes", "-w"])
            .arg(workdir)
            .args(&args)
            .arg("-f")
            .arg(format!("./{name}")))
    };
    let ours = run_with(&agent_bin(), &tmp.path().join("ours"));
    let reference = with_reference
        .then(|| observe(&run_with(Path::new("cf-agent"), &cf_workdir(tmp.path())).stdout));
    let expected = policy.with_extension("expected");
    check_expected(&expected, &observe(&ours.stdout), reference.as_deref())
}

#[test]
fn agent_runs_match_cf_agent() {
    check_corpus(&["agent"], "cf-agent", run_case);
}
