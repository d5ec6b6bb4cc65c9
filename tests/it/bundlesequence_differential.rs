//! Issue 24, class 9, compared with cf-agent 3.21 when it is installed
//! (each test says "skipped" without it):
//! - a bundle with parameters named in the bundlesequence (or by `-b`, or
//!   by `usebundle` without arguments) runs, its parameters left as
//!   written; a report whose text then looks like a reference (`@(a)`)
//!   waits for the last pass, as cf-agent's does;
//! - `sys.cf_agent` and `sys.cf_twin` are defined from the work
//!   directory's `bin` alone, as cf-agent defines them;
//! - `control_common.bundlesequence` when the sequence holds calls is
//!   compared row for row by tests/differential/bundlesequence_calls.cf.

use crate::common::*;
use std::path::Path;

/// The `R:` and `error:` lines of a run, the work directory written `WD`.
fn lines(out: &Captured, workdir: &Path) -> Vec<String> {
    format!("{}{}", out.stdout, out.stderr)
        .lines()
        .filter(|l| l.starts_with("R: ") || l.contains("error:"))
        .map(|l| l.replace(&workdir.display().to_string(), "WD"))
        .collect()
}

const PARAMS: &str = r#"
body common control { bundlesequence => { "b", c("x", "y"), "d" }; }
bundle agent b(a)
{
  vars:
      "v" string => "val $(a)";
      "l" slist => { @(a) };
      "z" slist => { "q", @(a) };
  classes:
      "isz" expression => strcmp("$(a)", "z");
  reports:
      "b a=$(a) v=$(v) l=$(l)";
      # "z=@(a)" looks like a reference: it waits for the last pass.
      "z=$(z)";
      "is z" if => "isz";
}
bundle agent c(p, q) { reports: "c $(p) $(q)"; }
bundle agent d
{
  methods:
      "without" usebundle => b;
      "with" usebundle => b("z");
  reports:
      "d $(g.gv)";
}
bundle common g(x) { vars: "gv" string => "g $(x)"; }
"#;

#[test]
fn bundles_with_parameters_run_without_arguments_as_in_cf_agent() {
    if !have("cf-agent") {
        println!("skipped: cf-agent not installed");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = write_policy(tmp.path(), PARAMS);
    let mut problems = Vec::new();
    for extra in [&[][..], &["-b", "b"], &["-b", "b,d"], &["-b", "g,d"]] {
        let ours_wd = tmp.path().join("ours");
        let ours = lines(&agent_inform(&ours_wd, &policy, extra), &ours_wd);
        let theirs = lines(&cf_agent_inform(tmp.path(), &policy, extra), tmp.path());
        assert!(!theirs.is_empty(), "cf-agent printed nothing for {extra:?}");
        if ours != theirs {
            problems.push(format!(
                "{extra:?}:\n  ours:   {ours:?}\n  theirs: {theirs:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const COMPONENTS: &str = r#"
bundle agent main
{
  classes:
      "has_agent" expression => isvariable("sys.cf_agent");
      "has_twin" expression => isvariable("sys.cf_twin");
  reports:
    has_agent::
      "agent $(sys.cf_agent)";
    !has_agent::
      "no agent";
    has_twin::
      "twin $(sys.cf_twin)";
    !has_twin::
      "no twin";
}
"#;

/// `sys.cf_agent` and `sys.cf_twin` for each content of `WORKDIR/bin`:
/// only what is there, the twin falling back to the agent.
#[test]
fn agent_and_twin_are_defined_as_cf_agent_defines_them() {
    if !have("cf-agent") {
        println!("skipped: cf-agent not installed");
        return;
    }
    let mut problems = Vec::new();
    for present in [
        &[][..],
        &["cf-agent"],
        &["cf-agent", "cf-twin"],
        &["cf-twin"],
    ] {
        let tmp = tempfile::tempdir().expect("tmp");
        let policy = write_policy(tmp.path(), COMPONENTS);
        let theirs_wd = cf_workdir(tmp.path());
        let ours_wd = tmp.path().join("ours");
        for wd in [&theirs_wd, &ours_wd] {
            std::fs::create_dir_all(wd.join("bin")).expect("bin");
            for name in present {
                std::fs::write(wd.join("bin").join(name), "").expect("component");
            }
        }
        let ours = lines(&agent_inform(&ours_wd, &policy, &[]), &ours_wd);
        let theirs = lines(&cf_agent_inform(tmp.path(), &policy, &[]), &theirs_wd);
        if ours != theirs {
            problems.push(format!(
                "bin holding {present:?}:\n  ours:   {ours:?}\n  theirs: {theirs:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
