//! Snapshot tests from self-describing inputs (DESIGN.md, habit 9): every
//! `.cf` file under tests/cases/ says in its header comment how to run the
//! real `agent` binary on it and what to capture:
//!
//! ```text
//! # args: --syntax-only {file}
//! # capture: stdout, stderr, exit
//! ```
//!
//! `{file}` becomes `./NAME` and the agent runs in the case's directory;
//! `{tmp}` becomes a fresh empty directory (for `-w`). In the output, the
//! case's directory and that temporary directory read `{dir}` and `{tmp}`,
//! so snapshots do not depend on the checkout. `capture` names any of `stdout`,
//! `stderr` and `exit` (the default is all three). Each case has one
//! snapshot in tests/cases/snapshots/, named after its path; review new
//! or changed ones with `cargo insta review`.

use crate::common::{header, run};
use std::path::{Path, PathBuf};
use std::process::Command;

fn cases_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases")
}

/// Every `.cf` file below `dir`, except in snapshot directories.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "snapshots") {
                collect(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "cf") {
            out.push(p);
        }
    }
}

/// Runs one case and renders what its header asks to capture.
fn run_case(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read case");
    let args =
        header(&text, "args").unwrap_or_else(|| panic!("{}: no '# args:' header", path.display()));
    let capture = header(&text, "capture").unwrap_or_else(|| "stdout, stderr, exit".into());
    let parts: Vec<&str> = capture.split(',').map(str::trim).collect();
    for p in &parts {
        assert!(
            matches!(*p, "stdout" | "stderr" | "exit"),
            "{}: unknown capture '{p}'",
            path.display()
        );
    }
    let tmp = tempfile::tempdir().expect("temporary directory");
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let argv: Vec<String> = args
        .split_whitespace()
        .map(|a| {
            a.replace("{file}", &format!("./{name}"))
                .replace("{tmp}", &tmp.path().display().to_string())
        })
        .collect();
    let dir = path.parent().expect("case directory");
    let out = run(Command::new(env!("CARGO_BIN_EXE_agent"))
        .args(&argv)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE"));
    // Absolute paths differ between checkouts and machines.
    let tmp_path = tmp.path().display().to_string();
    let dir_path = dir.display().to_string();
    let stable = |s: &str| s.replace(&tmp_path, "{tmp}").replace(&dir_path, "{dir}");
    let mut snap = format!("$ agent {}\n", args);
    for p in parts {
        match p {
            "exit" => match out.code {
                Some(code) => snap.push_str(&format!("--- exit: {code}\n")),
                None => snap.push_str("--- exit: killed by a signal\n"),
            },
            "stdout" => snap.push_str(&format!("--- stdout\n{}", stable(&out.stdout))),
            _ => snap.push_str(&format!("--- stderr\n{}", stable(&out.stderr))),
        }
        if !snap.ends_with('\n') {
            snap.push_str("\n--- (no newline at the end)\n");
        }
    }
    snap
}

#[test]
fn cases() {
    let root = cases_root();
    let mut files = Vec::new();
    collect(&root, &mut files);
    assert!(!files.is_empty(), "no cases under {}", root.display());
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(root.join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    // Every case runs even when an earlier one fails, so that one review
    // sees all changed snapshots.
    let mut failed = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(&root).expect("case below root");
        let name = rel
            .with_extension("")
            .to_string_lossy()
            .replace(std::path::MAIN_SEPARATOR, "__");
        settings.set_input_file(path);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            settings.bind(|| insta::assert_snapshot!(name.clone(), run_case(path)));
        }));
        if result.is_err() {
            failed.push(rel.display().to_string());
        }
    }
    println!("{} snapshot cases", files.len());
    assert!(failed.is_empty(), "snapshots differ: {failed:?}");
}
