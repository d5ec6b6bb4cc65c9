//! Differential tests of `acl` bodies: each policy in tests/acl/ (where
//! `@ROOT@` stands for a private root directory) is run twice with `-KI`
//! by our agent and by cf-agent 3.21, each on its own root. Compared
//! after each run: the distinct `-I` lines (cf-agent repeats a failing
//! promise's lines in a later pass, we say them once) and the POSIX ACLs
//! of the tree as `getfacl -R -p` prints them. cf-agent's observations
//! are recorded beside each policy (`.expected`) for machines without
//! CFEngine. Skipped, saying so, without getfacl (the `acl` package) or on
//! a file system without POSIX ACLs.

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// Whether `getfacl` is there and the temporary directory's file system
/// keeps POSIX ACLs.
fn acls_available(probe_dir: &Path) -> bool {
    if which("getfacl").is_none() || which("setfacl").is_none() {
        eprintln!("skipped: getfacl/setfacl not installed (the acl package)");
        return false;
    }
    let probe = probe_dir.join("probe");
    std::fs::write(&probe, "").expect("write probe");
    let ok = Command::new("setfacl")
        .args(["-m", "u:0:r"])
        .arg(&probe)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: the temporary directory's file system has no POSIX ACLs");
    }
    ok
}

/// The distinct lines of one run, in order of first appearance.
fn distinct(lines: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    lines
        .lines()
        .filter(|l| seen.insert(l.to_string()))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn observe(program: &Path, base: &Path, policy_text: &str, cf: bool) -> String {
    let root = base.join("root");
    std::fs::create_dir_all(&root).expect("create root");
    let policy = base.join("p.cf");
    std::fs::write(
        &policy,
        policy_text.replace("@ROOT@", &root.to_string_lossy()),
    )
    .expect("write policy");
    let mut out = String::new();
    for i in 1..=2 {
        let mut cmd = Command::new(program);
        cmd.args(["-K", "-I", "-w"]);
        if cf {
            cmd.arg(cf_workdir(base));
        } else {
            cmd.arg(base.join("wd"));
        }
        let r = run(cmd.arg("-f").arg(&policy));
        out.push_str(&format!("--- run {i}\n"));
        out.push_str(&distinct(&inform_lines(&r.stdout, &root, base)));
        let acls = run(Command::new("getfacl")
            .args(["-R", "-p", "."])
            .current_dir(&root));
        out.push_str("--- getfacl\n");
        out.push_str(&acls.stdout);
        out.push_str(&format!(
            "--- exit {}\n",
            r.code.map_or("signal".into(), |c| c.to_string())
        ));
    }
    out
}

fn run_case(policy: &Path, with_reference: bool) -> Vec<String> {
    let text = std::fs::read_to_string(policy).expect("read policy");
    let tmp = tempfile::tempdir().expect("tempdir");
    let ours = observe(&agent_bin(), &tmp.path().join("ours"), &text, false);
    let reference =
        with_reference.then(|| observe(Path::new("cf-agent"), &tmp.path().join("cf"), &text, true));
    check_expected(
        &policy.with_extension("expected"),
        &ours,
        reference.as_deref(),
    )
}

#[test]
fn acls_are_set_as_cf_agent_sets_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    if !acls_available(tmp.path()) {
        return;
    }
    check_corpus(&["acl"], "cf-agent", run_case);
}
