//! Issue 14: only `src/host/` touches the file system. Every `std::fs`,
//! `File` or `OpenOptions` anywhere else in `src/` must be on the
//! allow-list `tests/fs_allowlist.txt`, with a reason; and every line of
//! that list must still match something, so the list only shrinks.
//!
//! The list's lines (`#` starts a comment):
//!
//! ```text
//! PATH: REASON              every use in the file
//! PATH (tests): REASON      uses inside the file's #[cfg(test)] module
//! PATH ~ TEXT: REASON       uses on lines containing TEXT (no ": " in it)
//! ```

use std::path::Path;

/// One use of the file system found in the source.
#[derive(Debug)]
struct Use {
    file: String,
    line: usize,
    text: String,
    in_tests: bool,
}

#[derive(Debug)]
enum Scope {
    File,
    Tests,
    Text(String),
}

#[derive(Debug)]
struct Allowed {
    number: usize,
    path: String,
    scope: Scope,
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `needle` occurs in `line` not preceded by an identifier
/// character (so `SourceFile::` and `refs::` are not `File::` and `fs::`).
fn word_at_start(line: &str, needle: &str, skip_after: &[&str]) -> bool {
    line.match_indices(needle).any(|(i, _)| {
        let before = &line[..i];
        !before.chars().next_back().is_some_and(ident_char)
            && !skip_after.iter().any(|s| before.ends_with(s))
    })
}

/// Whether a line of Rust names the file system outside `host`.
fn touches_fs(line: &str) -> bool {
    let code = line.trim_start();
    if code.starts_with("//") {
        return false;
    }
    code.contains("std::fs")
        || code.contains("OpenOptions")
        // `Path::exists` stats the path too (`is_file` and `is_dir` are
        // left out: `Metadata` has them as well).
        || code.contains(".exists()")
        || code.contains(".try_exists(")
        // `host::fs::Meta` is our own layer, not std's.
        || word_at_start(code, "fs::", &["host::"])
        || word_at_start(code, "File::", &[])
        || word_at_start(code, "File,", &[])
        // `use std::{fs, io}`.
        || (code.contains("std::{") && code.split(|c| !ident_char(c)).any(|w| w == "fs"))
}

fn uses(root: &Path) -> Vec<Use> {
    let mut files = Vec::new();
    crate::common::rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if rel.starts_with("src/host/") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // The test module: from a `#[cfg(test)]` followed by `mod` to the
        // end of the file (where this crate keeps its unit tests).
        let mut in_tests = false;
        let mut cfg_test = false;
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t == "#[cfg(test)]" {
                cfg_test = true;
            } else if cfg_test {
                if t.starts_with("mod ") {
                    in_tests = true;
                }
                cfg_test = false;
            }
            if touches_fs(line) {
                out.push(Use {
                    file: rel.clone(),
                    line: i + 1,
                    text: t.to_string(),
                    in_tests,
                });
            }
        }
    }
    out
}

fn allow_list(root: &Path) -> Vec<Allowed> {
    let text = std::fs::read_to_string(root.join("tests/fs_allowlist.txt")).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let Some((spec, reason)) = t.split_once(": ") else {
            panic!("tests/fs_allowlist.txt:{}: no ': reason' in {t:?}", i + 1);
        };
        assert!(
            !reason.trim().is_empty(),
            "tests/fs_allowlist.txt:{}: the reason is empty",
            i + 1
        );
        let (path, scope) = if let Some((p, text)) = spec.split_once(" ~ ") {
            (p.trim(), Scope::Text(text.trim().to_string()))
        } else if let Some(p) = spec.strip_suffix(" (tests)") {
            (p.trim(), Scope::Tests)
        } else {
            (spec.trim(), Scope::File)
        };
        out.push(Allowed {
            number: i + 1,
            path: path.to_string(),
            scope,
        });
    }
    out
}

fn allows(a: &Allowed, u: &Use) -> bool {
    a.path == u.file
        && match &a.scope {
            Scope::File => true,
            Scope::Tests => u.in_tests,
            Scope::Text(t) => u.text.contains(t.as_str()),
        }
}

#[test]
fn no_file_system_access_outside_host_but_the_allowed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = uses(root);
    let list = allow_list(root);
    let mut problems = Vec::new();
    for u in &found {
        if !list.iter().any(|a| allows(a, u)) {
            problems.push(format!(
                "{}:{}: file-system access outside src/host/ (use host::local or a Host \
                 method, or allow it with a reason in tests/fs_allowlist.txt): {}",
                u.file, u.line, u.text
            ));
        }
    }
    for a in &list {
        if !found.iter().any(|u| allows(a, u)) {
            problems.push(format!(
                "tests/fs_allowlist.txt:{}: matches nothing any more; remove the line ({} {:?})",
                a.number, a.path, a.scope
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn the_scanner_tells_std_from_lookalikes() {
    for yes in [
        "use std::fs;",
        "let f = File::open(p)?;",
        "std::os::unix::fs::symlink(a, b)",
        "fs::write(&f, \"x\")",
        "use std::{fs, io};",
        "    entries: File,",
        "OpenOptions::new()",
        "if p.join(\"x\").exists() {",
    ] {
        assert!(touches_fs(yes), "{yes}");
    }
    for no in [
        "use crate::host::fs::{FileKind, Meta};",
        "SourceFile::new(\"x\", t)",
        "crate::eval::refs::next_ref(s, 0)",
        "    name_lookup: NameLookup::HostsFile,",
        "// std::fs is not used here",
        "use std::{io, path::Path};",
    ] {
        assert!(!touches_fs(no), "{no}");
    }
}
