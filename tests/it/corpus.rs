//! The broken-policy corpus: every file in tests/corpus/invalid/ holds one
//! mistake and records its line (`# error-line: N`); every file in
//! tests/corpus/valid/ is tricky but legal.
//!
//! For each file, `agent --syntax-only` must give the verdict cf-promises
//! gives (when cf-promises is installed), and for a broken file our first
//! error must be on the recorded line.
//!
//! The broken files cover lexer, parser and validation mistakes alike.
//! tests/corpus/needs-validation/ holds mistakes cf-promises rejects that
//! our validator does not find yet (each file says why); this test does
//! not read it: move a file to invalid/ when the validator finds it.

use crate::common::{cf_files, have, header};
use std::path::{Path, PathBuf};
use std::process::Command;

const AGENT: &str = env!("CARGO_BIN_EXE_agent");

fn corpus_files(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(dir);
    let files = cf_files(&dir);
    assert!(!files.is_empty(), "no policies in {}", dir.display());
    files
}

struct Verdict {
    ok: bool,
    /// Line of the first `file:line:col: error:` diagnostic.
    first_error_line: Option<usize>,
    stderr: String,
}

fn ours(path: &Path) -> Verdict {
    let out = Command::new(AGENT)
        .arg("--syntax-only")
        .arg(path)
        .output()
        .expect("run agent");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}: agent exited with {:?} (a crash?)\n{stderr}",
        path.display(),
        out.status
    );
    let prefix = format!("{}:", path.display());
    let first_error_line = stderr.lines().find_map(|l| {
        let rest = l.strip_prefix(&prefix)?;
        let mut parts = rest.splitn(3, ':');
        let line = parts.next()?.parse().ok()?;
        let _col = parts.next()?;
        parts.next()?.starts_with(" error:").then_some(line)
    });
    Verdict {
        ok: out.status.success(),
        first_error_line,
        stderr,
    }
}

/// cf-promises' verdict, run as `cf-promises -f ./FILE` from the file's
/// directory (a bare name would be looked up in its work directory).
fn theirs(path: &Path) -> bool {
    let dir = path.parent().expect("corpus file has a directory");
    let name = path.file_name().expect("file name");
    Command::new("cf-promises")
        .arg("-f")
        .arg(Path::new(".").join(name))
        .current_dir(dir)
        .output()
        .expect("run cf-promises")
        .status
        .success()
}

#[test]
fn corpus_verdicts_and_error_lines() {
    let invalid = corpus_files("invalid");
    let valid = corpus_files("valid");
    assert!(
        invalid.len() >= 70,
        "only {} broken policies",
        invalid.len()
    );
    assert!(valid.len() >= 30, "only {} valid policies", valid.len());
    let oracle = have("cf-promises");
    if !oracle {
        println!("skipped: cf-promises not installed (verdicts are not compared)");
    }

    let mut failures = Vec::new();
    for (path, expect_ok) in valid
        .iter()
        .map(|p| (p, true))
        .chain(invalid.iter().map(|p| (p, false)))
    {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let text = std::fs::read_to_string(path).expect("read corpus file");
        let v = ours(path);
        if v.ok != expect_ok {
            failures.push(format!(
                "{name}: expected {}, agent says {}\n{}",
                if expect_ok { "valid" } else { "invalid" },
                if v.ok { "valid" } else { "invalid" },
                v.stderr
            ));
            continue;
        }
        if oracle && theirs(path) != v.ok {
            failures.push(format!(
                "{name}: cf-promises disagrees (cf-promises says {})\n{}",
                if v.ok { "invalid" } else { "valid" },
                v.stderr
            ));
            continue;
        }
        if !expect_ok {
            let Some(line) = header(&text, "error-line").and_then(|l| l.parse::<usize>().ok())
            else {
                failures.push(format!("{name}: no '# error-line: N' header"));
                continue;
            };
            if v.first_error_line != Some(line) {
                failures.push(format!(
                    "{name}: first error on line {:?}, the mistake is on line {line}\n{}",
                    v.first_error_line, v.stderr
                ));
            }
        }
    }
    println!(
        "{} valid and {} broken policies checked{}",
        valid.len(),
        invalid.len(),
        if oracle { " against cf-promises" } else { "" }
    );
    assert!(
        failures.is_empty(),
        "{} corpus failures:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A broken file must be broken in one place: one mistake, one error.
#[test]
fn one_mistake_gives_one_error() {
    let mut failures = Vec::new();
    for path in corpus_files("invalid") {
        let v = ours(&path);
        let errors = v.stderr.lines().filter(|l| l.contains(": error: ")).count();
        if errors != 1 {
            failures.push(format!("{}: {errors} errors\n{}", path.display(), v.stderr));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every file of the corpus says what it is about in its first line.
#[test]
fn corpus_files_describe_themselves() {
    for path in corpus_files("invalid")
        .into_iter()
        .chain(corpus_files("needs-validation"))
    {
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(header(&text, "mistake").is_some(), "{}", path.display());
        assert!(header(&text, "error-line").is_some(), "{}", path.display());
    }
    for path in corpus_files("valid") {
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(header(&text, "legal").is_some(), "{}", path.display());
    }
}
