//! Helpers shared by the integration tests: running our binary and the
//! CFEngine reference side by side, and checked-in expectations for
//! machines without CFEngine.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// useradd, userdel and the agents' users promises lock /etc/passwd: one
/// test at a time changes the user database. Hold it with [`serial`] for as
/// long as a test adds, changes or removes users (safe_access,
/// actuators and actuators_differential do, and all run in this process).
pub static USERS: Mutex<()> = Mutex::new(());

/// Takes a lock that serialises tests, also after a test that held it
/// failed.
pub fn serial(m: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn agent_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agent"))
}

/// Writes a policy as `p.cf` in a directory.
pub fn write_policy(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("p.cf");
    std::fs::write(&p, text).expect("write policy");
    p
}

/// One run of our agent with inform output (`-K -I`), in a work directory.
pub fn agent_inform(workdir: &Path, policy: &Path, extra: &[&str]) -> Captured {
    run(Command::new(agent_bin())
        .args(["-K", "-I", "-w"])
        .arg(workdir)
        .args(extra)
        .arg("-f")
        .arg(policy))
}

/// The captured result of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
}

pub fn run(cmd: &mut Command) -> Captured {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let captured = Captured {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    };
    check_events(cmd, &captured);
    captured
}

/// docs/events.schema.json, compiled once.
fn event_schema() -> &'static jsonschema::Validator {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/events.schema.json");
        let text = std::fs::read_to_string(&path).expect("read docs/events.schema.json");
        let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
        jsonschema::draft202012::new(&schema).expect("the schema is a valid JSON schema")
    })
}

/// How many events the tests have checked against the schema.
pub static EVENTS_CHECKED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Checks JSON event lines against docs/events.schema.json, panicking on
/// the first that does not fit; returns how many there were.
pub fn validate_events(text: &str) -> usize {
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("event line {line:?} is not JSON: {e}"));
        let errors: Vec<String> = event_schema()
            .iter_errors(&v)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "event {line} does not fit docs/events.schema.json: {errors:#?}"
        );
        n += 1;
    }
    EVENTS_CHECKED.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    n
}

/// Every run of our agent with `--json` or `--report-file`, in any test:
/// each event it wrote must fit the schema.
fn check_events(cmd: &Command, out: &Captured) {
    if Path::new(cmd.get_program()) != agent_bin() {
        return;
    }
    let args: Vec<&std::ffi::OsStr> = cmd.get_args().collect();
    if args.iter().any(|a| *a == "--json") {
        validate_events(&out.stdout);
    }
    if let Some(i) = args.iter().position(|a| *a == "--report-file")
        && let Some(path) = args.get(i + 1)
    {
        let path = match cmd.get_current_dir() {
            Some(dir) => dir.join(path),
            None => PathBuf::from(path),
        };
        if let Ok(text) = std::fs::read_to_string(&path) {
            validate_events(&text);
        }
    }
}

/// Whether the tests run as root (as CI does, on a disposable machine).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether a CFEngine binary is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("-V")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// A private work directory for cf-agent, with the `bin/cf-promises` link
/// it needs for its pre-check.
pub fn cf_workdir(root: &Path) -> PathBuf {
    let wd = root.join("cfwd");
    std::fs::create_dir_all(wd.join("bin")).expect("create cf workdir");
    let link = wd.join("bin/cf-promises");
    if !link.exists() {
        let target = which("cf-promises").unwrap_or_else(|| PathBuf::from("/usr/bin/cf-promises"));
        std::os::unix::fs::symlink(target, &link).expect("link cf-promises");
    }
    wd
}

pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    })
}

/// Reads a `# key: value` line from the header comment of a policy.
pub fn header(text: &str, key: &str) -> Option<String> {
    headers(text, key).into_iter().next()
}

/// All values of a header key that may repeat, in order.
pub fn headers(text: &str, key: &str) -> Vec<String> {
    let prefix = format!("# {key}:");
    text.lines()
        .take_while(|l| l.starts_with('#') || l.trim().is_empty())
        .filter_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().to_string()))
        .collect()
}

/// All `.cf` files directly under a directory, sorted.
pub fn cf_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "cf"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs a differential corpus: `run_case(policy, with_reference)` for every
/// `.cf` file of the directories `tests/<dir>`, with the reference when
/// `tool` is installed (else against the recorded expectations), and fails
/// with every problem the cases report.
pub fn check_corpus(dirs: &[&str], tool: &str, run_case: impl Fn(&Path, bool) -> Vec<String>) {
    let with_reference = have(tool);
    if !with_reference {
        eprintln!("skipped: {tool} not installed; comparing with the recorded outputs instead");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut cases = Vec::new();
    for dir in dirs {
        let found = cf_files(&root.join(dir));
        assert!(found.len() >= 5, "expected the test corpus in tests/{dir}");
        cases.extend(found);
    }
    let problems: Vec<String> = cases
        .iter()
        .flat_map(|c| run_case(c, with_reference))
        .collect();
    assert!(
        problems.is_empty(),
        "{} problems in {} cases:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n\n")
    );
}

/// Compares our output with the reference. With the reference installed
/// the expectation file must also equal the reference's output (so it
/// cannot go stale; `UPDATE_EXPECTED=1` rewrites it); without it, ours is
/// compared with the file. Returns a description of each mismatch.
pub fn check_expected(expected_file: &Path, ours: &str, reference: Option<&str>) -> Vec<String> {
    let mut problems = Vec::new();
    let recorded = std::fs::read_to_string(expected_file).ok();
    match reference {
        Some(theirs) => {
            if std::env::var_os("UPDATE_EXPECTED").is_some() {
                std::fs::write(expected_file, theirs).expect("write expected file");
            } else if recorded.as_deref() != Some(theirs) {
                problems.push(format!(
                    "{}: the recorded expectation differs from what the reference prints now \
                     (run with UPDATE_EXPECTED=1 to record it)\n--- recorded\n{}\n--- reference\n{}",
                    expected_file.display(),
                    recorded.unwrap_or_default(),
                    theirs
                ));
            }
            if ours != theirs {
                problems.push(format!(
                    "{}: differs from the reference\n--- ours\n{ours}\n--- reference\n{theirs}",
                    expected_file.display()
                ));
            }
        }
        None => match recorded {
            Some(r) if r == ours => {}
            Some(r) => problems.push(format!(
                "{}: differs from the recorded reference output\n--- ours\n{ours}\n--- recorded\n{r}",
                expected_file.display()
            )),
            None => problems.push(format!("{}: no recorded expectation", expected_file.display())),
        },
    }
    problems
}

/// Copies a directory tree (files with their modes, directories,
/// symlinks as links) into `dst`, which is created.
pub fn copy_tree(src: &Path, dst: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dst).expect("create copy root");
    let Ok(rd) = std::fs::read_dir(src) else {
        return;
    };
    for e in rd.filter_map(Result::ok) {
        let from = e.path();
        let to = dst.join(e.file_name());
        let meta = std::fs::symlink_metadata(&from).expect("lstat while copying");
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&from).expect("readlink");
            std::os::unix::fs::symlink(target, &to).expect("symlink");
        } else if meta.is_dir() {
            copy_tree(&from, &to);
            std::fs::set_permissions(&to, meta.permissions()).expect("chmod dir");
        } else {
            std::fs::copy(&from, &to).expect("copy file");
            let mode = meta.permissions().mode() & 0o7777;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))
                .expect("chmod file");
        }
    }
}

/// What a tree holds, one entry a line, sorted by path: type, mode,
/// owner, the symlink target or the file's content (escaped, line by
/// line). With `mtimes`, modification times too (to prove nothing was
/// touched). `.cf-before-edit` names with cf-agent's time stamp are
/// normalised, since the clock differs between runs.
pub fn tree_listing(root: &Path, mtimes: bool) -> String {
    use std::os::unix::fs::MetadataExt;
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>, mtimes: bool) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("below root")
                .to_string_lossy()
                .into_owned();
            let rel = normalise_backup_name(&rel);
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            let ft = m.file_type();
            let kind = if ft.is_symlink() {
                "link"
            } else if ft.is_dir() {
                "dir"
            } else if ft.is_file() {
                "file"
            } else {
                "other"
            };
            let mut line = format!(
                "{kind} {:04o} {}:{} {rel}",
                m.mode() & 0o7777,
                m.uid(),
                m.gid()
            );
            if mtimes {
                line.push_str(&format!(" mtime={}.{:09}", m.mtime(), m.mtime_nsec()));
            }
            if ft.is_symlink() {
                // An absolute target below the root is written `@ROOT@/...`,
                // as file contents are.
                let t = std::fs::read_link(&p).expect("readlink");
                let t = t
                    .to_string_lossy()
                    .replace(root.to_string_lossy().as_ref(), "@ROOT@");
                line.push_str(&format!(" -> {t}"));
            } else if ft.is_file() {
                let bytes = std::fs::read(&p).expect("read file");
                let text = String::from_utf8_lossy(&bytes)
                    .replace(root.to_string_lossy().as_ref(), "@ROOT@");
                if text.is_empty() {
                    line.push_str(" (empty)");
                }
                for l in text.split_inclusive('\n') {
                    let (body, nl) = match l.strip_suffix('\n') {
                        Some(b) => (b, ""),
                        None => (l, " (no newline at end)"),
                    };
                    line.push_str(&format!("\n  |{}{nl}", body.escape_debug()));
                }
            }
            out.push((rel, line));
            if ft.is_dir() {
                walk(root, &p, out, mtimes);
            }
        }
    }
    let mut entries = Vec::new();
    walk(root, root, &mut entries, mtimes);
    entries.sort();
    let mut s = String::new();
    for (_, l) in entries {
        s.push_str(&l);
        s.push('\n');
    }
    s
}

/// `name_1700000000_Mon_Jan__1_00_00_00_2024.cf-before-edit` (cf-agent's
/// `edit_backup => "timestamp"`) with the time taken out.
pub fn normalise_backup_name(rel: &str) -> String {
    let re = regex::Regex::new(
        r"_\d{6,}_[A-Z][a-z]{2}_[A-Z][a-z]{2}_+\d{1,2}_\d\d_\d\d_\d\d_\d{4}\.cf-before-edit",
    )
    .expect("valid pattern");
    re.replace_all(rel, "_@TIME@.cf-before-edit").into_owned()
}

/// The log lines of one `-I` run that say what happened: without the
/// lines that differ between implementations by design (cf-agent's
/// "Setting workdir", our run summary), with `root` written `@ROOT@` and
/// the rest of the private directory (the policy's, say) `@BASE@`.
pub fn inform_lines(out: &str, root: &Path, base: &Path) -> String {
    let root = root.to_string_lossy();
    let base = base.to_string_lossy();
    let mut s = String::new();
    for l in out.lines() {
        if l.contains("info: Setting workdir to") || l.contains("info: Summary: ") {
            continue;
        }
        let l = without_location(l);
        let l = l
            .replace(root.as_ref(), "@ROOT@")
            .replace(base.as_ref(), "@BASE@");
        s.push_str(&normalise_backup_name(&l));
        s.push('\n');
    }
    s
}

/// A log line without the ` (in a TYPE promise at FILE:LINE)` that ends
/// our error lines where cf-agent names no place (it does under `-v`).
pub fn without_location(line: &str) -> &str {
    match line.rfind(" (in a") {
        Some(i) if line.ends_with(')') && line[i..].contains(" promise at ") => &line[..i],
        _ => line,
    }
}

/// The output with every occurrence of a temporary directory replaced by
/// `[TMP]`, so that snapshots and expected lines do not depend on it.
pub fn scrubbed(mut out: Captured, root: &Path) -> Captured {
    let root = root.display().to_string();
    out.stdout = out.stdout.replace(&root, "[TMP]");
    out.stderr = out.stderr.replace(&root, "[TMP]");
    out
}

/// Runs `job` on every item, `threads` at a time (the runs are mostly
/// process start-up and waiting), and gathers the problems each reports.
pub fn problems_in_parallel<T: Sync>(
    items: &[T],
    threads: usize,
    job: impl Fn(&T) -> Vec<String> + Sync,
) -> Vec<String> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let problems = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(item) = items.get(i) else { break };
                    let p = job(item);
                    problems.lock().expect("lock").extend(p);
                }
            });
        }
    });
    problems.into_inner().expect("lock")
}

/// One run of cf-agent with inform output (`-K -I`), in a private work
/// directory below `root` (see [`cf_workdir`]).
pub fn cf_agent_inform(root: &Path, policy: &Path, extra: &[&str]) -> Captured {
    run(Command::new("cf-agent")
        .args(["-K", "-I", "-w"])
        .arg(cf_workdir(root))
        .args(extra)
        .arg("-f")
        .arg(policy))
}

/// The scenario directories of `tests/<dir>` (those holding a
/// `policy.cf`), sorted by name. When the environment variable `filter_var`
/// is set, only those whose path contains its value; otherwise there must
/// be at least `min` of them.
pub fn scenario_dirs(dir: &str, filter_var: &str, min: usize) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    let filter = std::env::var(filter_var).ok();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("policy.cf").is_file())
        .filter(|p| {
            filter
                .as_deref()
                .is_none_or(|f| p.to_string_lossy().contains(f))
        })
        .collect();
    dirs.sort();
    if filter.is_none() {
        assert!(
            dirs.len() >= min,
            "expected at least {min} scenarios in {}, found {}",
            root.display(),
            dirs.len()
        );
    }
    dirs
}

/// Every `.rs` file below `dir`, for the tests that read the source.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
