//! Fuzz target: any bytes, read as a policy file (invalid UTF-8 replaced,
//! as the loader reads one), are loaded, validated, pre-evaluated and run
//! as the agent's bundlesequence in `convergent::pipeline::Sandbox`: a dry
//! run on a host rooted in a temporary directory, with the functions and
//! promise types that could run programs, reach the network or signal
//! processes refused, and a time budget per input.
//!
//! A policy that does not load, validate or run is an expected result. What
//! panics is a bug: a panic of ours anywhere in those stages, or a dry run
//! that changed the sandbox's tree (the root's files, the work directory).

use convergent::pipeline::Sandbox;
use convergent::report::{PromiseEvent, Sink};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one input may evaluate; AFL's hang timeout (`-t` in run.sh) is
/// well above it, so what it reports as a hang ran long between two checks
/// of the deadline.
const BUDGET: Duration = Duration::from_millis(200);

/// Throws everything away: the outcomes are not what is checked.
struct Discard;

impl Sink for Discard {
    fn report_line(&mut self, _: &str) {}
    fn promise_event(&mut self, _: &PromiseEvent) {}
}

/// Files for the policy's paths to find below the root, so that edits,
/// copies and searches have something to work on.
const SEED_FILES: &[(&str, &str)] = &[
    ("etc/motd", "Welcome\n"),
    (
        "etc/hosts",
        "127.0.0.1 localhost\n::1 localhost ip6-localhost\n",
    ),
    (
        "etc/app.conf",
        "# app\n[server]\nport = 80\nworkers=2\n\n[client]\nretries = 3\n",
    ),
    ("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"),
    ("tmp/dir/a.txt", "alpha\nbeta\ngamma\n"),
    ("tmp/dir/b.cf", "bundle agent b { reports: \"b\"; }\n"),
    ("tmp/dir/sub/c.json", "{\"k\": [1, 2, {\"x\": \"y\"}]}\n"),
];

/// Every file and directory below `dir` with what a change would alter.
fn snapshot(dir: &Path, out: &mut Vec<(PathBuf, u64, u32, i64, i64)>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            out.push((path.clone(), m.len(), m.mode(), m.mtime(), m.mtime_nsec()));
            if m.is_dir() {
                snapshot(&path, out);
            }
        }
    }
}

fn tree(dir: &Path) -> Vec<(PathBuf, u64, u32, i64, i64)> {
    let mut out = Vec::new();
    snapshot(dir, &mut out);
    out.sort();
    out
}

fn main() {
    // run.sh names the directory (and removes it). Each fork server (AFL
    // runs a second one for CmpLog) has its own sandbox, since each lays
    // its files out anew; the processes it forks take turns in it.
    let base = std::env::var_os("CONVERGENT_FUZZ_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("convergent-fuzz-eval-{}", std::process::id()));
    let sandbox = Sandbox::new(&dir).expect("cannot lay out the sandbox");
    for (path, text) in SEED_FILES {
        let p = sandbox.root().join(path);
        std::fs::create_dir_all(p.parent().expect("seed files are in directories"))
            .expect("cannot make the sandbox's directories");
        std::fs::write(&p, text).expect("cannot write the sandbox's files");
    }
    let before = tree(&dir);
    afl::fuzz!(|data: &[u8]| {
        let text = String::from_utf8_lossy(data).into_owned();
        // Errors are the policy's, and expected.
        let _ = sandbox.run(text, BUDGET, &mut Discard);
        let after = tree(&dir);
        if after != before {
            let changed: Vec<_> = after
                .iter()
                .filter(|e| !before.contains(e))
                .chain(before.iter().filter(|e| !after.contains(e)))
                .map(|e| e.0.display().to_string())
                .collect();
            panic!("the dry run changed the sandbox: {changed:?}");
        }
    });
}
