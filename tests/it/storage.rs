//! storage promises: free-space checks on volumes, and unmounting (NFS
//! mounts themselves need a server this machine does not have; a failed
//! mount fails alone).

use crate::common::*;
use std::process::Command;

#[test]
fn volume_free_space() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("p.cf");
    std::fs::write(
        &p,
        r#"bundle agent main
{
  storage:
      "/" volume => free("1%"), classes => r("small");
      "/" volume => free("101%"), classes => r("huge");
  reports:
    small_ok:: "1% free";
    huge_failed:: "not 101% free";
}
body volume free(f) { freespace => "$(f)"; }
body classes r(p) { promise_kept => { "$(p)_ok" }; repair_failed => { "$(p)_failed" }; }
"#,
    )
    .unwrap();
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(out.stdout.contains("R: 1% free"), "{out:?}");
    assert!(out.stdout.contains("R: not 101% free"), "{out:?}");
    assert!(
        out.stdout
            .contains("Free disk space is under 101% for volume containing '/'"),
        "{out:?}"
    );
}

#[test]
fn unmount_and_failed_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("/bin/mount")
        .args(["-t", "tmpfs", "none"])
        .arg(&mnt)
        .status();
    if !mounted.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("/bin/umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.clone());
    let p = tmp.path().join("p.cf");
    std::fs::write(
        &p,
        format!(
            r#"bundle agent main
{{
  storage:
      "{mnt}" mount => gone;
      "{mnt}-nfs" mount => nfs("127.0.0.1", "/export");
  reports:
      "after";
}}
body mount gone {{ unmount => "true"; }}
body mount nfs(server, src) {{ mount_type => "nfs"; mount_source => "$(src)"; mount_server => "$(server)"; mount_options => {{ "soft", "timeo=1", "retrans=0" }}; }}
"#,
            mnt = mnt.display()
        ),
    )
    .unwrap();
    let dry = agent_inform(&tmp.path().join("wd"), &p, &["--dry-run"]);
    assert!(dry.stdout.contains("Should run '/bin/umount"), "{dry:?}");
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(
        out.stdout
            .contains(&format!("Unmounting '{}' to keep promise", mnt.display())),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("R: after"),
        "the failed mount fails alone: {out:?}"
    );
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains(&mnt.display().to_string()));
}
