//! Differential tests of `files` promises (edits, templates, creation,
//! permissions): each directory in tests/files/ is one scenario with
//!
//! * `policy.cf`: the policy, where `@ROOT@` stands for the scenario's
//!   private root directory (the runner substitutes it);
//! * `before/` (optional): the tree the root starts as;
//! * `expected.txt`: what cf-agent 3.21 did, recorded from cf-agent only
//!   (`UPDATE_EXPECTED=1` with cf-agent installed), so machines without
//!   CFEngine still compare.
//!
//! Header keys of `policy.cf`: `# args: ...` extra flags for both agents;
//! `# chmod: MODE PATH` (repeatable) sets a mode in the copied `before/`
//! tree, since git keeps no modes but the executable bit; `# converges: no`
//! for a scenario where cf-agent itself changes the file on every run
//! (`preserve_all_lines`, say): there both runs are still compared with
//! cf-agent's, but the second need not be a no-op.
//!
//! Each agent runs `-KI` twice on its own copy. What is compared: the `-I`
//! lines of both runs (without cf-agent's "Setting workdir" and our
//! summary; root paths written `@ROOT@`) and the tree after each run
//! (content, mode, owner, file type, symlink targets). The second run must
//! leave the tree as the first left it. Ours also runs `--dry-run` on a
//! fresh copy first, which must not change anything on disk, modification
//! times included.
//!
//! `FILES_SCENARIO=substring` runs only the matching scenarios.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Scenario {
    name: String,
    dir: PathBuf,
    policy: String,
    args: Vec<String>,
    chmods: Vec<(u32, String)>,
    converges: bool,
}

impl Scenario {
    fn load(dir: &Path) -> Scenario {
        let policy = std::fs::read_to_string(dir.join("policy.cf")).expect("read policy.cf");
        let args = header(&policy, "args")
            .map(|a| a.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let chmods = policy
            .lines()
            .take_while(|l| l.starts_with('#') || l.trim().is_empty())
            .filter_map(|l| l.strip_prefix("# chmod:"))
            .map(|rest| {
                let mut it = rest.split_whitespace();
                let mode = u32::from_str_radix(it.next().expect("chmod mode"), 8).expect("octal");
                (mode, it.next().expect("chmod path").to_string())
            })
            .collect();
        let converges = header(&policy, "converges").is_none_or(|v| v != "no");
        Scenario {
            converges,
            name: dir
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned(),
            dir: dir.to_path_buf(),
            policy,
            args,
            chmods,
        }
    }

    /// A fresh copy of the scenario under `base`: the root tree and the
    /// policy naming it. Returns (root, policy file).
    fn prepare(&self, base: &Path) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let root = base.join("root");
        copy_tree(&self.dir.join("before"), &root);
        for (mode, rel) in &self.chmods {
            std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(*mode))
                .expect("chmod from header");
        }
        let policy = base.join("policy.cf");
        std::fs::write(
            &policy,
            self.policy.replace("@ROOT@", &root.to_string_lossy()),
        )
        .expect("write policy");
        (root, policy)
    }
}

/// The observable result of two runs.
struct Observed {
    text: String,
    /// Whether the second run left the tree as the first did.
    converged: bool,
}

fn two_runs(root: &Path, base: &Path, run: &mut dyn FnMut() -> Captured) -> Observed {
    let mut text = String::new();
    let mut trees = Vec::new();
    for n in 1..=2 {
        let out = run();
        let tree = tree_listing(root, false);
        text.push_str(&format!("## run {n}: -I lines\n"));
        text.push_str(&inform_lines(
            &format!("{}{}", out.stdout, out.stderr),
            root,
            base,
        ));
        text.push_str(&format!("## run {n}: tree\n{tree}"));
        trees.push(tree);
    }
    Observed {
        text,
        converged: trees[0] == trees[1],
    }
}

fn run_scenario(s: &Scenario, with_reference: bool) -> Vec<String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();

    // Ours, dry-run first: nothing on disk may change.
    let dry = tmp.path().join("dry");
    let (root, policy) = s.prepare(&dry);
    let before = tree_listing(&root, true);
    let out = run(Command::new(agent_bin())
        .args(["-KI", "--dry-run", "-w"])
        .arg(dry.join("wd"))
        .args(&s.args)
        .arg("-f")
        .arg(&policy));
    let after = tree_listing(&root, true);
    if before != after {
        problems.push(format!(
            "{}: --dry-run changed the tree\n--- before\n{before}--- after\n{after}--- output\n{}{}",
            s.name, out.stdout, out.stderr
        ));
    }

    let base = tmp.path().join("ours");
    let (root, policy) = s.prepare(&base);
    let ours = two_runs(&root, &base, &mut || {
        run(Command::new(agent_bin())
            .args(["-KI", "-w"])
            .arg(base.join("wd"))
            .args(&s.args)
            .arg("-f")
            .arg(&policy))
    });
    if s.converges && !ours.converged {
        problems.push(format!(
            "{}: our second run changed the tree\n{}",
            s.name, ours.text
        ));
    }

    let reference = with_reference.then(|| {
        let base = tmp.path().join("cf");
        let (root, policy) = s.prepare(&base);
        let wd = cf_workdir(&base);
        let theirs = two_runs(&root, &base, &mut || {
            run(Command::new("cf-agent")
                .args(["-KI", "-w"])
                .arg(&wd)
                .args(&s.args)
                .arg("-f")
                .arg(&policy))
        });
        if s.converges && !theirs.converged {
            problems.push(format!(
                "{}: cf-agent's second run changed the tree; the scenario should converge\n{}",
                s.name, theirs.text
            ));
        }
        theirs.text
    });
    problems.extend(check_expected(
        &s.dir.join("expected.txt"),
        &ours.text,
        reference.as_deref(),
    ));
    problems
}

#[test]
fn files_scenarios_match_cf_agent() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/files");
    let with_reference = have("cf-agent");
    if !with_reference {
        eprintln!("cf-agent not installed; comparing with the recorded results instead");
    }
    let filter = std::env::var("FILES_SCENARIO").ok();
    let mut scenarios: Vec<Scenario> = std::fs::read_dir(&dir)
        .expect("tests/files")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("policy.cf").is_file())
        .filter(|p| {
            filter
                .as_deref()
                .is_none_or(|f| p.to_string_lossy().contains(f))
        })
        .map(|p| Scenario::load(&p))
        .collect();
    scenarios.sort_by(|a, b| a.name.cmp(&b.name));
    if filter.is_none() {
        assert!(
            scenarios.len() >= 80,
            "expected the files scenarios in {}, found {}",
            dir.display(),
            scenarios.len()
        );
    }
    // A few at a time: each run is mostly process start-up and waiting.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let problems = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(s) = scenarios.get(i) else { break };
                    let p = run_scenario(s, with_reference);
                    problems.lock().expect("lock").extend(p);
                }
            });
        }
    });
    let problems = problems.into_inner().expect("lock");
    assert!(
        problems.is_empty(),
        "{} problems in {} scenarios:\n{}",
        problems.len(),
        scenarios.len(),
        problems.join("\n\n")
    );
}
