//! Differential tests of the built-in functions: each policy in
//! tests/functions/ is pre-evaluated by `agent --show-vars` and by
//! `cf-promises --show-vars` (each with a private work directory), and the
//! variable tables must have the same rows. The reference's table is
//! recorded beside each policy (`.expected`) for machines without CFEngine.
//!
//! Only variables of the policy's own bundles are compared: the filter is
//! `default:fn_` unless the header says otherwise (`# vars: REGEX`).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// Rows whose value differs by nature between runs or by choice; their
/// value is masked on both sides (the row must still exist on both).
const VOLATILE: &[(&str, &str, &str)] = &[
    (
        "math.cf",
        "default:fn_math.random",
        "randomint() is random by design",
    ),
    (
        "math.cf",
        "default:fn_math.random_in_range",
        "randomint() is random by design",
    ),
];

/// The table with trailing blanks removed and volatile values masked.
fn observe(file: &str, out: &str) -> String {
    let mut lines = Vec::new();
    // Only the table: the reference also prints its errors on stdout.
    for l in out
        .lines()
        .filter(|l| l.starts_with("Variable name") || l.contains(':'))
    {
        if l.trim_start().starts_with("error:") || l.trim_start().starts_with("warning:") {
            continue;
        }
        let name = l.split_whitespace().next().unwrap_or("");
        if VOLATILE.iter().any(|(f, v, _)| *f == file && *v == name) {
            lines.push(format!("{name} <volatile>"));
        } else {
            lines.push(l.trim_end().to_string());
        }
    }
    lines.join("\n") + "\n"
}

fn run_case(policy: &Path, with_reference: bool) -> Vec<String> {
    let text = std::fs::read_to_string(policy).expect("read policy");
    let filter = header(&text, "vars").unwrap_or_else(|| "default:fn_".to_string());
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = policy.parent().expect("policy dir");
    let name = policy
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    let ours = run(Command::new(agent_bin())
        .current_dir(dir)
        .arg(format!("--show-vars={filter}"))
        .arg("-w")
        .arg(tmp.path().join("ours"))
        .arg("-f")
        .arg(format!("./{name}")));
    let reference = with_reference.then(|| {
        let wd = cf_workdir(tmp.path());
        let r = run(Command::new("cf-promises")
            .current_dir(dir)
            .arg(format!("--show-vars={filter}"))
            .arg("-w")
            .arg(&wd)
            .arg("-f")
            .arg(format!("./{name}")));
        observe(&name, &r.stdout)
    });
    let expected = policy.with_extension("expected");
    check_expected(
        &expected,
        &observe(&name, &ours.stdout),
        reference.as_deref(),
    )
}

#[test]
fn functions_match_cf_promises() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/functions");
    let with_reference = have("cf-promises");
    if !with_reference {
        eprintln!(
            "skipped: cf-promises not installed; comparing with the recorded outputs instead"
        );
    }
    let cases = cf_files(&dir);
    assert!(
        cases.len() >= 5,
        "expected the function test corpus in {}",
        dir.display()
    );
    let problems: Vec<String> = cases
        .iter()
        .flat_map(|c| run_case(c, with_reference))
        .collect();
    assert!(
        problems.is_empty(),
        "{} of {} cases differ:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n\n")
    );
}
