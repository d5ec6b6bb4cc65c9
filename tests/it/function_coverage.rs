//! The function coverage table, docs/functions.md, is generated here from
//! the registry and the schema's table of CFEngine's functions (3.21's and
//! those added up to 3.28)
//! (generated from cf-promises' syntax description): every function, whether we
//! implement it, say it is not supported, or miss it, and the
//! differential test policies that call it. The test fails when the
//! checked-in table differs, so it cannot go stale; regenerate it with
//! `UPDATE_DOCS=1 cargo test --test it function_coverage`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (name, category) of every CFEngine function, from the schema.
fn cfengine_functions() -> Vec<(String, String)> {
    convergent::schema::functions()
        .iter()
        .map(|f| {
            (
                f.name.to_string(),
                format!("{:?}", f.category).to_lowercase(),
            )
        })
        .collect()
}

/// Where the differential test policies live.
/// (tests/newer holds self-checking policies of the functions CFEngine
/// added after 3.21, which cf-promises 3.21 cannot run.)
const TEST_DIRS: &[&str] = &[
    "tests/functions",
    "tests/functions_b",
    "tests/agent",
    "tests/newer",
];

/// Every differential test policy, by relative path, with its text.
fn test_policies() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for d in TEST_DIRS {
        let dir = root().join(d);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "cf"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let rel = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
            out.push((rel, text));
        }
    }
    out
}

/// Whether the policy text calls `name(` (not as part of a longer name).
fn calls(text: &str, name: &str) -> bool {
    let pat = format!("{name}(");
    text.match_indices(&pat).any(|(i, _)| {
        text[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
    })
}

/// Where we knowingly answer differently from cf-promises 3.21.
const NOTES: &[(&str, &str)] = &[
    (
        "callstack_callers",
        "bundle and promise frames, outermost first, numbered as cf-agent; no promise-type or iteration frames, no embedded syntax tree",
    ),
    (
        "classesmatching",
        "sorted (cf-agent lists classes in hash order)",
    ),
    (
        "rrange",
        "no attribute of CFEngine 3.21 takes an rrange, so no run can show its value; a unit test in src/functions/lists.rs checks the text",
    ),
    (
        "hostswithgroup",
        "cf-agent asks the Enterprise hub; we fail: there is no hub",
    ),
    (
        "url_get",
        "plain http:// only, no TLS or redirects (the reference build has no libcurl and always fails)",
    ),
    (
        "usemodule",
        "^persistence is accepted but classes last for this run only",
    ),
    (
        "hubknowledge",
        "cf-promises answers a placeholder; we fail: there is no hub",
    ),
    (
        "remotescalar",
        "cf-promises answers a placeholder; we fail: there is no hub",
    ),
    (
        "peers",
        "cf-promises reads the peer file; we fail: peer groups belong to cf-serverd",
    ),
    (
        "peerleader",
        "cf-promises reads the peer file; we fail: peer groups belong to cf-serverd",
    ),
    (
        "peerleaders",
        "cf-promises reads the peer file; we fail: peer groups belong to cf-serverd",
    ),
    (
        "selectservers",
        "cf-promises probes servers; we fail: there is no hub-style setup",
    ),
    (
        "hostsseen",
        "fails without a word: no host in a lastseen database (as cf-agent 3.21 with none)",
    ),
    (
        "packagesmatching",
        "reads the work directory's installed-packages cache (host::packages; empty until package promises write it)",
    ),
    (
        "packageupdatesmatching",
        "reads the work directory's package-updates cache (host::packages; empty until package promises write it)",
    ),
];

fn render() -> String {
    let functions = cfengine_functions();
    let policies = test_policies();
    let unsupported = convergent::functions::not_supported();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut rows = String::new();
    for (name, category) in &functions {
        let status = if unsupported.contains(&name.as_str()) {
            "not supported"
        } else if convergent::functions::lookup(name).is_some() {
            "implemented"
        } else {
            "missing"
        };
        *counts.entry(status).or_default() += 1;
        let tests: Vec<String> = policies
            .iter()
            .filter(|(_, t)| calls(t, name))
            .map(|(p, _)| format!("`{p}`"))
            .collect();
        let own = NOTES
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| *t)
            .unwrap_or("");
        let changed = convergent::schema::newer::CHANGED_FUNCTIONS
            .iter()
            .any(|(f, _)| f.name == name);
        let since = convergent::schema::function_since(name).map(|v| {
            if changed {
                format!("arguments as in CFEngine {v}")
            } else {
                format!("added in CFEngine {v}")
            }
        });
        let note = match since {
            Some(v) if own.is_empty() => v,
            Some(v) => format!("{v}; {own}"),
            None => own.to_string(),
        };
        let _ = writeln!(
            rows,
            "| `{name}` | {category} | {status} | {} | {note} |",
            if tests.is_empty() {
                "—".to_string()
            } else {
                tests.join(", ")
            }
        );
    }
    let mut out = String::new();
    out.push_str("# Built-in functions\n\n");
    out.push_str(
        "Generated by `tests/it/function_coverage.rs` from the function registry and the \
         schema's table of the 200 functions of CFEngine 3.28 (3.21's 186, and the 14 added \
         since, with the version that added them); do not edit by hand. \
         Regenerate with `UPDATE_DOCS=1 cargo test --test it function_coverage`.\n\n",
    );
    out.push_str(
        "A function is *implemented*, *not supported* (it needs a CFEngine Enterprise hub, \
         LDAP, cf-serverd peers or Windows, and fails with a message saying so), or \
         *missing*. The tests column lists the differential test policies (run against \
         cf-promises) that call it, and for a function added after 3.21 the self-checking \
         policies of tests/newer/ (cf-promises 3.21 cannot run those).\n\n",
    );
    let _ = writeln!(
        out,
        "Implemented: {}. Not supported: {}. Missing: {}.\n",
        counts.get("implemented").unwrap_or(&0),
        counts.get("not supported").unwrap_or(&0),
        counts.get("missing").unwrap_or(&0)
    );
    out.push_str("| function | category | status | differential tests | notes |\n");
    out.push_str("| --- | --- | --- | --- | --- |\n");
    out.push_str(&rows);
    out
}

#[test]
fn coverage_table_is_current() {
    let path = root().join("docs/functions.md");
    let fresh = render();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(root().join("docs")).expect("create docs/");
        std::fs::write(&path, &fresh).expect("write docs/functions.md");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == fresh,
        "docs/functions.md is out of date with the function registry or the tests; \
         regenerate it with `UPDATE_DOCS=1 cargo test --test it function_coverage`"
    );
}

#[test]
fn every_registered_function_is_a_cfengine_function() {
    let known: Vec<String> = cfengine_functions().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        known.len(),
        200,
        "the list should hold CFEngine 3.28's 200 functions (3.21's 186 and 14 added since)"
    );
    let extra: Vec<&str> = convergent::functions::implemented()
        .into_iter()
        .filter(|n| !known.iter().any(|k| k == n))
        .collect();
    assert!(
        extra.is_empty(),
        "functions CFEngine does not have: {extra:?}"
    );
}

/// What the registry says of a function agrees with the schema: the
/// functions cf-agent computes once per run are cached here too (and no
/// others), and a function with a fixed parameter list takes exactly that
/// many arguments.
#[test]
fn registry_agrees_with_the_schema() {
    let unsupported = convergent::functions::not_supported();
    let mut wrong = Vec::new();
    for f in convergent::schema::functions() {
        let Some(spec) = convergent::functions::lookup(f.name) else {
            continue;
        };
        if unsupported.contains(&f.name) {
            continue;
        }
        if spec.cached != f.cached {
            wrong.push(format!(
                "{}: cached is {}, the schema says {}",
                f.name, spec.cached, f.cached
            ));
        }
        let n = f.params.len();
        if !f.variadic && (spec.min_args != n || spec.max_args != Some(n)) {
            wrong.push(format!(
                "{}: takes {}..{:?} arguments, the schema says {n}",
                f.name, spec.min_args, spec.max_args
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn call_detection() {
    assert!(calls("x => now();", "now"));
    assert!(!calls("x => knows_now();", "now"));
    assert!(calls("now()", "now"));
    assert!(!calls("a => now;", "now"));
}
