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
//! cf-agent's, but the second need not be a no-op; `# dry-run: compare`
//! also compares the `-n -I` lines of a run on a fresh copy, each distinct
//! line once (cf-agent repeats a warning in every pass, we say it once);
//! `# order: any` sorts each run's `-I` lines before comparing, for a
//! search over directories of several entries, which cf-agent reads in
//! the file system's order (a hash on ext4, so it differs between
//! machines) and we in name order.
//!
//! Each agent runs `-KI` twice on its own copy. What is compared: the `-I`
//! lines of both runs (without cf-agent's "Setting workdir" and our
//! summary; root paths written `@ROOT@`) and the tree after each run
//! (content, mode, owner, file type, symlink targets). The second run must
//! leave the tree as the first left it. Ours also runs `--dry-run --diff`
//! on a fresh copy first, which must not change anything on disk,
//! modification times included, and whose diffs must be exactly the
//! changes of content our first real run makes (backups aside).
//!
//! `FILES_SCENARIO=substring` runs only the matching scenarios.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Scenario {
    name: String,
    dir: PathBuf,
    policy: String,
    args: Vec<String>,
    chmods: Vec<(u32, String)>,
    converges: bool,
    compare_dry_run: bool,
    any_order: bool,
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
        let compare_dry_run = header(&policy, "dry-run").is_some_and(|v| v == "compare");
        let any_order = header(&policy, "order").is_some_and(|v| v == "any");
        Scenario {
            any_order,
            converges,
            compare_dry_run,
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

    /// The extra flags of a dry run: `-n` and the scenario's own.
    fn dry_run_args(&self) -> Vec<&str> {
        std::iter::once("-n")
            .chain(self.args.iter().map(String::as_str))
            .collect()
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
    /// The regular files after the first run.
    first_run_contents: BTreeMap<String, Vec<u8>>,
}

/// The content of every regular file below `root`, by relative path.
fn file_contents(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                walk(root, &p, out);
            } else if m.is_file() {
                let rel = p.strip_prefix(root).expect("below root");
                let data = std::fs::read(&p).expect("read file");
                out.insert(rel.to_string_lossy().into_owned(), data);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The unified diff, as `--diff` prints it, of each file whose content a
/// run changed or created (backups aside: they are copies the run makes,
/// not changes it promises), by the path printed (`@ROOT@/...`).
fn changes_as_diffs(
    root: &Path,
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (rel, new) in after {
        if rel.contains(".cf-before-edit") {
            continue;
        }
        let old = before.get(rel).map(Vec::as_slice).unwrap_or_default();
        if old == new.as_slice() {
            continue;
        }
        let shown = root.join(rel).to_string_lossy().into_owned();
        let text = match (std::str::from_utf8(old), std::str::from_utf8(new)) {
            (Ok(o), Ok(n)) => similar::TextDiff::from_lines(o, n)
                .unified_diff()
                .context_radius(3)
                .header(&shown, &shown)
                .to_string(),
            _ => format!(
                "Binary file {shown} differs ({} bytes -> {} bytes)\n",
                old.len(),
                new.len()
            ),
        };
        if text.is_empty() {
            continue;
        }
        let key = format!("@ROOT@/{rel}");
        out.insert(key, text.replace(root.to_string_lossy().as_ref(), "@ROOT@"));
    }
    out
}

/// The unified diffs in an agent's output (between its log lines), by the
/// path they name, with `root` written `@ROOT@`. A hunk is read by the
/// line counts in its header, since log lines may look like context lines.
fn printed_diffs(out: &str, root: &Path) -> BTreeMap<String, String> {
    let root = root.to_string_lossy();
    let lines: Vec<&str> = out.lines().collect();
    let mut diffs: BTreeMap<String, String> = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if let Some(rest) = l.strip_prefix("Binary file ") {
            let path = rest.split(" differs").next().unwrap_or_default();
            let entry = diffs
                .entry(path.replace(root.as_ref(), "@ROOT@"))
                .or_default();
            entry.push_str(&format!("{}\n", l.replace(root.as_ref(), "@ROOT@")));
            i += 1;
            continue;
        }
        let (Some(old), Some(_)) = (
            l.strip_prefix("--- "),
            lines.get(i + 1).and_then(|n| n.strip_prefix("+++ ")),
        ) else {
            i += 1;
            continue;
        };
        let key = old.replace(root.as_ref(), "@ROOT@");
        let mut text = format!("{}\n{}\n", lines[i], lines[i + 1]);
        i += 2;
        while let Some(h) = lines.get(i).and_then(|h| h.strip_prefix("@@ -")) {
            // `-start,count +start,count`; a count of one may be left out.
            let count = |r: &str| r.split(',').nth(1).map_or(1, |n| n.parse().unwrap_or(0));
            let mut ranges = h.split(' ');
            let mut old_n: usize = ranges.next().map_or(0, count);
            let mut new_n: usize = ranges
                .next()
                .and_then(|r| r.strip_prefix('+'))
                .map_or(0, count);
            text.push_str(lines[i]);
            text.push('\n');
            i += 1;
            while (old_n > 0 || new_n > 0 || lines.get(i).is_some_and(|l| l.starts_with('\\')))
                && i < lines.len()
            {
                let l = lines[i];
                match l.chars().next() {
                    Some(' ') => {
                        old_n = old_n.saturating_sub(1);
                        new_n = new_n.saturating_sub(1);
                    }
                    Some('-') => old_n = old_n.saturating_sub(1),
                    Some('+') => new_n = new_n.saturating_sub(1),
                    _ => {}
                }
                text.push_str(l);
                text.push('\n');
                i += 1;
            }
        }
        diffs
            .entry(key)
            .or_default()
            .push_str(&text.replace(root.as_ref(), "@ROOT@"));
    }
    diffs
}

fn two_runs(
    root: &Path,
    base: &Path,
    any_order: bool,
    run: &mut dyn FnMut() -> Captured,
) -> Observed {
    let mut text = String::new();
    let mut trees = Vec::new();
    let mut first_run_contents = BTreeMap::new();
    for n in 1..=2 {
        let out = run();
        if n == 1 {
            first_run_contents = file_contents(root);
        }
        let tree = tree_listing(root, false);
        text.push_str(&format!("## run {n}: -I lines\n"));
        let lines = inform_lines(&format!("{}{}", out.stdout, out.stderr), root, base);
        if any_order {
            let mut sorted: Vec<&str> = lines.lines().collect();
            sorted.sort_unstable();
            sorted.iter().for_each(|l| {
                text.push_str(l);
                text.push('\n');
            });
        } else {
            text.push_str(&lines);
        }
        text.push_str(&format!("## run {n}: tree\n{tree}"));
        trees.push(tree);
    }
    Observed {
        text,
        converged: trees[0] == trees[1],
        first_run_contents,
    }
}

/// The distinct `-I` lines of a dry run on a fresh copy of the scenario,
/// in the order first printed, under a heading for the expected text.
fn dry_run_lines(s: &Scenario, base: &Path, run: &dyn Fn(&Path, &Path) -> Captured) -> String {
    let (root, policy) = s.prepare(base);
    let out = run(base, &policy);
    let lines = inform_lines(&format!("{}{}", out.stdout, out.stderr), &root, base);
    let mut seen = std::collections::HashSet::new();
    let mut text = String::from("## dry run: -I lines\n");
    for l in lines.lines().filter(|l| seen.insert(l.to_string())) {
        text.push_str(l);
        text.push('\n');
    }
    text
}

fn run_scenario(s: &Scenario, with_reference: bool) -> Vec<String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();

    // Ours, dry-run first: nothing on disk may change, and the diffs it
    // prints must be the change the real run makes below.
    let dry = tmp.path().join("dry");
    let (dry_root, policy) = s.prepare(&dry);
    let before = tree_listing(&dry_root, true);
    let out = run(Command::new(agent_bin())
        .args(["-KI", "--dry-run", "--diff", "-w"])
        .arg(dry.join("wd"))
        .args(&s.args)
        .arg("-f")
        .arg(&policy));
    let after = tree_listing(&dry_root, true);
    if before != after {
        problems.push(format!(
            "{}: --dry-run changed the tree\n--- before\n{before}--- after\n{after}--- output\n{}{}",
            s.name, out.stdout, out.stderr
        ));
    }
    let dry_diffs = printed_diffs(&out.stdout, &dry_root);

    let base = tmp.path().join("ours");
    let (root, policy) = s.prepare(&base);
    let contents_before = file_contents(&root);
    let ours = two_runs(&root, &base, s.any_order, &mut || {
        run(Command::new(agent_bin())
            .args(["-KI", "-w"])
            .arg(base.join("wd"))
            .args(&s.args)
            .arg("-f")
            .arg(&policy))
    });
    let real_diffs = changes_as_diffs(&root, &contents_before, &ours.first_run_contents);
    if dry_diffs != real_diffs {
        problems.push(format!(
            "{}: the diffs of --dry-run --diff differ from the real run's change\n--- dry run printed\n{}--- the real run changed\n{}--- dry-run output\n{}",
            s.name,
            dry_diffs.values().cloned().collect::<String>(),
            real_diffs.values().cloned().collect::<String>(),
            out.stdout
        ));
    }
    let mut ours_text = ours.text.clone();
    if s.compare_dry_run {
        ours_text.push_str(&dry_run_lines(
            s,
            &tmp.path().join("ours-n"),
            &|base, policy| agent_inform(&base.join("wd"), policy, &s.dry_run_args()),
        ));
    }
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
        let theirs = two_runs(&root, &base, s.any_order, &mut || {
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
        let mut text = theirs.text;
        if s.compare_dry_run {
            text.push_str(&dry_run_lines(
                s,
                &tmp.path().join("cf-n"),
                &|base, policy| cf_agent_inform(base, policy, &s.dry_run_args()),
            ));
        }
        text
    });
    problems.extend(check_expected(
        &s.dir.join("expected.txt"),
        &ours_text,
        reference.as_deref(),
    ));
    problems
}

#[test]
fn files_scenarios_match_cf_agent() {
    let with_reference = have("cf-agent");
    if !with_reference {
        eprintln!("cf-agent not installed; comparing with the recorded results instead");
    }
    let scenarios: Vec<Scenario> = scenario_dirs("files", "FILES_SCENARIO", 80)
        .iter()
        .map(|p| Scenario::load(p))
        .collect();
    let problems = problems_in_parallel(&scenarios, 4, |s| run_scenario(s, with_reference));
    assert!(
        problems.is_empty(),
        "{} problems in {} scenarios:\n{}",
        problems.len(),
        scenarios.len(),
        problems.join("\n\n")
    );
}
