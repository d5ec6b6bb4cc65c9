//! Policy files that their group or others may write are refused by the
//! agent, as cf-agent 3.21 refuses them: before the file is read, with
//! `File PATH (owner UID) is writable by others (security exception)`,
//! exit status 1, nothing run (not even the failsafe policy). Whoever may
//! write such a file could otherwise have the agent run their commands,
//! as root when it runs as root. cf-promises does not check, nor do we
//! when we stand in for it (`--show-vars`, `-c`).
//!
//! Each case is compared with cf-agent when it is installed.

use crate::common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A policy whose run would leave `marker` behind and report a line,
/// read through an input `lib.cf` beside it.
fn write_case(dir: &Path, marker: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let entry = dir.join("entry.cf");
    let lib = dir.join("lib.cf");
    std::fs::write(
        &entry,
        "body common control\n{\n  bundlesequence => { \"main\" };\n  inputs => { \"lib.cf\" };\n}\n",
    )
    .expect("write entry");
    std::fs::write(
        &lib,
        format!(
            "bundle agent main\n{{\n  files:\n      \"{}\" create => \"true\";\n  reports:\n      \"ran\";\n}}\n",
            marker.display()
        ),
    )
    .expect("write lib");
    chmod(&entry, 0o644);
    chmod(&lib, 0o644);
    (entry, lib)
}

/// What one agent did: its exit code, whether it wrote the marker, and
/// the refusal line it printed (if any).
fn outcome(
    program: &str,
    workdir: &Path,
    entry: &Path,
    marker: &Path,
) -> (Option<i32>, bool, Option<String>) {
    let _ = std::fs::remove_file(marker);
    let r = run(Command::new(program)
        .args(["-K", "-w"])
        .arg(workdir)
        .arg("-f")
        .arg(entry));
    let line = format!("{}{}", r.stdout, r.stderr)
        .lines()
        .find(|l| l.contains("writable by others"))
        .map(|l| l.trim().to_string());
    (r.code, marker.exists(), line)
}

#[test]
fn policy_writable_by_group_or_others_is_refused_as_cf_agent_refuses_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("policy");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let marker = tmp.path().join("marker");
    let (entry, lib) = write_case(&dir, &marker);
    let uid = std::fs::metadata(&entry).expect("stat").uid();
    let ours_wd = tmp.path().join("ours");
    let reference = which("cf-agent").map(|_| cf_workdir(tmp.path()));
    // (what is made writable, its mode, the file refused)
    let cases: [(&Path, u32, Option<&Path>); 5] = [
        (&entry, 0o644, None),
        (&entry, 0o666, Some(&entry)),
        (&entry, 0o664, Some(&entry)),
        (&lib, 0o646, Some(&lib)),
        (&lib, 0o620, Some(&lib)),
    ];
    let mut problems = Vec::new();
    for (file, mode, refused) in cases {
        chmod(&entry, 0o644);
        chmod(&lib, 0o644);
        chmod(file, mode);
        let what = format!("{} at {mode:o}", file.display());
        let ours = outcome(
            agent_bin().to_str().expect("utf-8"),
            &ours_wd,
            &entry,
            &marker,
        );
        let want = match refused {
            Some(f) => (
                Some(1),
                false,
                Some(format!(
                    "error: File {} (owner {uid}) is writable by others (security exception)",
                    f.display()
                )),
            ),
            None => (Some(0), true, None),
        };
        if ours != want {
            problems.push(format!("{what}: ours {ours:?}, want {want:?}"));
        }
        if let Some(wd) = &reference {
            let theirs = outcome("cf-agent", wd, &entry, &marker);
            if theirs != want {
                problems.push(format!("{what}: cf-agent {theirs:?}, want {want:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_is_the_agents_not_cf_promises() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let marker = tmp.path().join("marker");
    let (entry, _) = write_case(tmp.path(), &marker);
    chmod(&entry, 0o666);
    let r = run(Command::new(agent_bin())
        .args(["-c", "-w"])
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&entry));
    assert_eq!(r.code, Some(0), "{r:?}");
    if which("cf-promises").is_some() {
        let theirs = run(Command::new("cf-promises").arg("-c").arg("-f").arg(&entry));
        assert_eq!(theirs.code, Some(0), "{theirs:?}");
    }
}
