//! The MPF's standard library under our agent (issue 29): a fast subset
//! of the cases of tests/stdlib/cases/, run by scripts/stdlib_harness.py
//! under cf-agent 3.21 with the MPF's lib and under our agent with the
//! same lib (and a second subset with our policies/lib in place of the
//! MPF's, `--ours-lib`); reports, classes, errors and files must agree. Skipped, and
//! said so, without python3, cf-agent or the MPF. The whole set (and the
//! status table docs/stdlib-status.md) comes from running the script by
//! hand: `python3 scripts/stdlib_harness.py --table docs/stdlib-status.md`.

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// Cases that guard fixes made through the harness, quick to run.
const FAST: &[&str] = &[
    "set_line_based",
    "edit_ini",
    "edit_lines_more",
    "file_selects",
    "links_renames",
    "contain_bodies",
    "sync_copy",
    "bundles_misc",
    "processes_days_older_than",
    "symlink_promiser_select",
    "misc_agent_bundles",
    "hub_bundles",
    "edit_defaults_more",
];

/// Cases run with our policies/lib in place of the MPF's (`--ours-lib`):
/// one or more for each library file of ours that has landed whole.
const FAST_OURS: &[&str] = &[
    "set_line_based",
    "edit_values",
    "edit_lines_more",
    "file_bundles",
    "files_common",
    "classes_bodies",
    "contain_bodies",
    "commands_daemonize",
    "edit_xml_bundles",
    "testing_bundles",
];

#[test]
fn mpf_library_agrees_with_cf_agent() {
    run_harness(FAST, false);
}

#[test]
fn our_library_agrees_with_cf_agent_and_the_mpf() {
    run_harness(FAST_OURS, true);
}

fn run_harness(cases: &[&str], ours_lib: bool) {
    if !have("python3") || !have("cf-agent") || !have("cf-promises") {
        eprintln!("skipped: python3, cf-agent or cf-promises is not installed");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/stdlib_harness.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script).arg("--agent").arg(agent_bin());
    if ours_lib {
        cmd.arg("--ours-lib");
    }
    for c in cases {
        cmd.args(["--case", c]);
    }
    let out = cmd.output().expect("run the harness");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(77) {
        eprintln!("{stdout}");
        return;
    }
    assert!(
        out.status.success(),
        "the harness found differences:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for c in cases {
        assert!(
            stdout.lines().any(|l| l == format!("agree    {c}")),
            "case {c} did not run:\n{stdout}"
        );
    }
}
