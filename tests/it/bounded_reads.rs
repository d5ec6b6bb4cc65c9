//! Issue 15: no unbounded read. A function reads what it was asked for, a
//! device or FIFO is never read whole, and a copy streams (a file of any
//! size costs a few pages, not its size in memory).

use crate::common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the agent, killed after `limit` (a regression must fail, not hang
/// the suite or fill the memory).
fn bounded(args: &[&std::ffi::OsStr], limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(agent_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent ran past {limit:?}: an unbounded read");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn functions_read_only_what_they_are_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(
        dir.path(),
        r#"body common control { bundlesequence => { "main" }; }
bundle agent main
{
  vars:
      "zeros" string => readfile("/dev/zero", "100");
      "random" string => readfile("/dev/urandom", "64");
      "whole" string => readfile("/dev/zero");
      "json" data => readjson("/dev/zero");
  reports:
      "zeros: $(zeros) (none: a C string ends at the first NUL)";
      "whole is defined" if => isvariable("whole");
      "json is defined" if => isvariable("json");
}
"#,
    );
    let wd = dir.path().join("wd");
    let (code, out) = bounded(
        &[
            "-K".as_ref(),
            "-w".as_ref(),
            wd.as_os_str(),
            "-f".as_ref(),
            policy.as_os_str(),
        ],
        Duration::from_secs(5),
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("R: zeros:  (none"), "{out}");
    // Without a bound a device is refused, not read for ever.
    assert!(!out.contains("whole is defined"), "{out}");
    assert!(!out.contains("json is defined"), "{out}");
    assert!(out.contains("not a regular file"), "{out}");
}

#[test]
fn a_policy_that_is_a_device_is_refused() {
    let (code, out) = bounded(
        &["--syntax-only".as_ref(), "/dev/zero".as_ref()],
        Duration::from_secs(5),
    );
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("not a regular file"), "{out}");
}

/// The largest resident set of the children this process has waited for,
/// in KiB.
fn children_max_rss_kib() -> i64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    u.ru_maxrss
}

/// Set in the process of its own that runs
/// [`a_copy_streams_instead_of_holding_the_file`].
const ALONE: &str = "CVG_BOUNDED_READS_ALONE";

#[test]
fn a_copy_streams_instead_of_holding_the_file() {
    // Linux counts in a child's largest resident set the peak of the
    // process it was started from (up to its exec). In the one test binary
    // that is the peak of every test run so far (files of 50 MB held
    // twice...), so this test runs in a small process of its own, this
    // binary again with only this test, as when it was a binary of its own.
    if std::env::var_os(ALONE).is_none() {
        let name = "bounded_reads::a_copy_streams_instead_of_holding_the_file";
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads=1", "--nocapture"])
            .env(ALONE, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("test result: ok. 1 passed"),
            "{name} in a process of its own:\n{text}"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.img");
    let dst = dir.path().join("copy.img");
    // 256 MiB, sparse: it costs the disk nothing.
    let f = std::fs::File::create(&src).unwrap();
    f.set_len(256 << 20).unwrap();
    drop(f);
    let policy = write_policy(
        dir.path(),
        &format!(
            r#"body common control {{ bundlesequence => {{ "main" }}; }}
bundle agent main {{ files: "{}" copy_from => cp("{}"); }}
body copy_from cp(s) {{ source => "$(s)"; compare => "digest"; }}
"#,
            dst.display(),
            src.display()
        ),
    );
    let wd = dir.path().join("wd");
    for _ in 0..2 {
        let (code, out) = bounded(
            &[
                "-K".as_ref(),
                "-w".as_ref(),
                wd.as_os_str(),
                "-f".as_ref(),
                policy.as_os_str(),
            ],
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{out}");
    }
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 256 << 20);
    // The copy and the digest comparison of the second run both stream.
    let rss = children_max_rss_kib();
    assert!(
        rss < 64 * 1024,
        "the agent held {rss} KiB for a 256 MiB copy"
    );
}
