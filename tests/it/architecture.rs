//! The floors of `src/` (see DESIGN.md in the shared folder, and README's
//! layout section): a module may import only from floors below its own, or
//! from a sibling on its own floor named in `SIBLINGS`. This test reads
//! every `crate::` path of every source file (unit-test modules left out:
//! a test may assemble floors, as `eval`'s tests hand the context the real
//! built-ins) and fails on one that points up, or sideways unasked.
//!
//! It reads the text, not the compiler's view, so it sees `use crate::x`,
//! `crate::x::y(...)` in code and `use crate::{x::a, y::b}`; a module
//! reached some other way (a re-export through a lower floor) is counted
//! where its path says.

use std::collections::BTreeSet;
use std::path::Path;

/// Every top-level module of `src/` and its floor, from the ground up. A
/// new module must be placed here.
const FLOORS: &[(&str, u8)] = &[
    ("log", 0),
    ("scan", 0),
    ("alloc", 0),
    ("values", 0),
    ("syntax", 0),
    ("host", 0),
    ("config", 1),
    ("load", 1),
    ("schema", 1),
    ("discover", 1),
    ("state", 1),
    ("remote", 1),
    ("eval", 2),
    ("report", 2),
    ("functions", 3),
    ("augments", 3),
    ("promises", 4),
    ("agent", 5),
    ("show", 5),
    ("pipeline", 6),
    ("bootstrap", 6),
    ("cli", 7),
    ("main", 7),
    ("lib", 7),
];

/// Imports between two modules of the same floor that are allowed, from
/// the first to the second.
const SIBLINGS: &[(&str, &str)] = &[
    // Loading a file validates it against the schema.
    ("load", "schema"),
    // The evaluator reports what it finds through the report's events.
    ("eval", "report"),
    // The renderers of --why and --graph read the scheduler's records.
    ("show", "agent"),
    // sys.key_digest names the host key as the key ring names keys.
    ("discover", "remote"),
    // Byte searches without CPU feature detection (see src/scan.rs).
    ("values", "scan"),
    ("syntax", "scan"),
];

/// Names at the crate's root (`lib.rs`) that any floor may read: the
/// version constants, and the log macros (`crate::error!`, ...), which
/// call into `log`, on the ground floor and importing nothing of ours.
const ROOT_ITEMS: &[&str] = &[
    "COMPAT_VERSION",
    "VERSION_LINE",
    "COMMIT",
    "error",
    "warn",
    "info",
    "debug",
    "trace",
];

fn floor(module: &str) -> Option<u8> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

/// The top-level module a source file belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The text without its `#[cfg(test)]` modules (each runs from its
/// attribute to the closing brace at the same indentation).
fn without_test_modules(text: &str) -> String {
    let mut out = String::new();
    let mut skip_until: Option<String> = None;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(end) = &skip_until {
            if line == end {
                skip_until = None;
            }
            continue;
        }
        if line.trim() == "#[cfg(test)]"
            && let Some(next) = lines.peek()
            && next.trim_start().starts_with("mod ")
            && next.trim_end().ends_with('{')
        {
            let indent = &line[..line.len() - line.trim_start().len()];
            skip_until = Some(format!("{indent}}}"));
            lines.next();
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The first segments of every `crate::` path in `text`, with the line.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().last();
            rest = &rest[i + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            if let Some(inner) = rest.strip_prefix('{') {
                // `use crate::{a::x, b::{y, z}}` (on one line or several).
                let group = collect_group(text, n, inner);
                out.extend(group.into_iter().map(|m| (n + 1, m)));
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push((n + 1, name));
        }
    }
    out
}

/// The first names of a `crate::{...}` group starting at `inner` on line
/// `n` (it may run over the following lines).
fn collect_group(text: &str, n: usize, inner: &str) -> Vec<String> {
    let mut body = String::from(inner);
    if !body.contains("};") {
        for l in text.lines().skip(n + 1) {
            body.push_str(l);
            if l.contains("};") {
                break;
            }
        }
    }
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    let mut at_start = true;
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                at_start = true;
                current.clear();
            }
            c if depth == 0 && at_start => {
                if c.is_alphanumeric() || c == '_' {
                    current.push(c);
                } else if !current.is_empty() {
                    names.push(std::mem::take(&mut current));
                    at_start = false;
                }
            }
            _ => {}
        }
    }
    if at_start && !current.is_empty() {
        names.push(current);
    }
    names
}

/// What points the wrong way in the tree under `src`.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    crate::common::rust_files(src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut unknown = BTreeSet::new();
    for file in &files {
        let from = module_of(src, file);
        let Some(from_floor) = floor(&from) else {
            unknown.insert(from.clone());
            continue;
        };
        let text = without_test_modules(&std::fs::read_to_string(file).unwrap());
        for (line, to) in crate_paths(&text) {
            if to == from || to == "self" || ROOT_ITEMS.contains(&to.as_str()) {
                continue;
            }
            let Some(to_floor) = floor(&to) else {
                unknown.insert(to.clone());
                continue;
            };
            let rel = file.strip_prefix(src.parent().unwrap()).unwrap().display();
            if to_floor > from_floor {
                bad.push(format!(
                    "{rel}:{line}: {from} (floor {from_floor}) imports {to} (floor {to_floor}), \
                     which is above it"
                ));
            } else if to_floor == from_floor && !SIBLINGS.contains(&(from.as_str(), to.as_str())) {
                bad.push(format!(
                    "{rel}:{line}: {from} imports {to}, on its own floor ({from_floor}), \
                     which SIBLINGS does not allow"
                ));
            }
        }
    }
    for m in unknown {
        bad.push(format!(
            "module '{m}' has no floor: place it in FLOORS (tests/it/architecture.rs) and in \
             README's layout"
        ));
    }
    bad
}

#[test]
fn imports_point_only_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = violations(&src);
    assert!(
        bad.is_empty(),
        "imports against the floors:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_reader_sees_every_spelling_and_skips_unit_tests() {
    let text = "use crate::values::Value;\n\
                use crate::{eval::X, agent::{self, Y}};\n\
                use crate::{\n    report::Z,\n    show::W,\n};\n\
                fn f() { crate::promises::actuator(\"x\"); } // crate::cli in a comment\n\
                #[cfg(test)]\n\
                mod tests {\n    use crate::pipeline::X;\n}\n\
                fn g() { let _ = crate::host::clock::now_secs(); }\n";
    let names: Vec<String> = crate_paths(&without_test_modules(text))
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert_eq!(
        names,
        [
            "values", "eval", "agent", "report", "show", "promises", "host"
        ]
    );
}

#[test]
fn an_upward_import_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("values")).unwrap();
    std::fs::create_dir_all(src.join("eval")).unwrap();
    std::fs::write(src.join("values/mod.rs"), "use crate::eval::EvalContext;\n").unwrap();
    std::fs::write(src.join("eval/mod.rs"), "use crate::values::Value;\n").unwrap();
    assert_eq!(
        violations(&src),
        ["src/values/mod.rs:1: values (floor 0) imports eval (floor 2), which is above it"]
    );
}

/// Actuators see the evaluation through `promises::port` only: no file of
/// `src/promises/` but the port names the evaluator or asks the port for
/// the scheduler's handle (unit-test modules left out).
#[test]
fn actuators_reach_the_evaluation_only_through_the_port() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/promises");
    let mut files = Vec::new();
    crate::common::rust_files(&dir, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("port.rs")) {
        let text = without_test_modules(&std::fs::read_to_string(file).unwrap());
        for (n, line) in text.lines().enumerate() {
            if line.contains("EvalContext") || line.contains(".scheduler()") {
                bad.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "actuators past the port:\n{}",
        bad.join("\n")
    );
}
