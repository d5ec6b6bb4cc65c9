//! A killed agent never leaves a half-written file: the agent rewrites a
//! large file (about 50 MB) and is killed with SIGKILL at moments spread
//! over the run, again and again; after each kill the file must hold
//! exactly its old content or exactly its new one.

use crate::common::agent_bin;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const LINES: usize = 1_200_000;
const ATTEMPTS: u32 = 12;

fn old_content() -> Vec<u8> {
    let mut v = Vec::with_capacity(LINES * 45);
    for i in 0..LINES {
        v.extend_from_slice(format!("line {i:07} some filler text for size ....\n").as_bytes());
    }
    v
}

fn policy(target: &Path) -> String {
    format!(
        r#"body edit_defaults big {{ max_file_size => "0"; edit_backup => "false"; }}
bundle agent main {{
files:
  "{}" edit_line => e, edit_defaults => big;
}}
bundle edit_line e {{
insert_lines:
  "the end";
}}
"#,
        target.display()
    )
}

fn spawn(policy: &Path, wd: &Path) -> std::process::Child {
    Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(wd)
        .arg("-f")
        .arg(policy)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the agent")
}

#[test]
fn killed_while_rewriting_a_large_file_leaves_old_or_new_content() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let target = tmp.path().join("big.txt");
    let old = old_content();
    let mut new = old.clone();
    new.extend_from_slice(b"the end\n");
    let policy_file = tmp.path().join("policy.cf");
    std::fs::write(&policy_file, policy(&target)).expect("write policy");
    let wd = tmp.path().join("wd");

    // One undisturbed run: it makes the new content, and its duration
    // spreads the kills over the whole run.
    std::fs::write(&target, &old).expect("write old content");
    let start = Instant::now();
    let status = spawn(&policy_file, &wd).wait().expect("wait");
    let full = start.elapsed();
    assert!(status.success(), "the undisturbed run failed: {status}");
    assert!(
        std::fs::read(&target).expect("read") == new,
        "the undisturbed run did not make the new content"
    );

    let (mut killed_running, mut saw_old, mut saw_new) = (0, 0, 0);
    for attempt in 0..ATTEMPTS {
        std::fs::write(&target, &old).expect("restore old content");
        let mut child = spawn(&policy_file, &wd);
        std::thread::sleep(full.mul_f64(f64::from(attempt) / f64::from(ATTEMPTS - 1)));
        if child.try_wait().expect("try_wait").is_none() {
            killed_running += 1;
        }
        // SIGKILL: no handler, no clean-up.
        let _ = child.kill();
        let _ = child.wait();
        let now = std::fs::read(&target).expect("read after kill");
        if now == old {
            saw_old += 1;
        } else if now == new {
            saw_new += 1;
        } else {
            panic!(
                "attempt {attempt}: after the kill the file is neither old nor new \
                 ({} bytes; old {}, new {})",
                now.len(),
                old.len(),
                new.len()
            );
        }
        // A kill may leave the temporary file beside the target; it is
        // never the target itself.
        for e in std::fs::read_dir(tmp.path()).expect("read dir").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".big.txt.") {
                std::fs::remove_file(e.path()).expect("remove leftover");
            }
        }
    }
    eprintln!(
        "{ATTEMPTS} kills ({killed_running} while running): old content {saw_old} times, new {saw_new}"
    );
    assert!(
        killed_running > 0,
        "every run had finished before its kill; nothing was tested"
    );
}
