//! `-p json` and `-p cf` print the parsed policy byte for byte as
//! `cf-promises -p` does, on every policy of tests/validate that
//! cf-promises accepts and on the MPF's promises.cf (when installed). The
//! `-full` forms and our own `json-spans` are checked on a policy with an
//! input.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Standard output of `tool -p FORMAT -f ./NAME` run in `dir`, without
/// the error lines cf-promises prints there for what it evaluates.
fn printed(tool: &Path, dir: &Path, name: &str, format: &str) -> Option<String> {
    // A name with a slash is given as it is (an absolute path).
    let arg = if name.contains('/') {
        name.to_string()
    } else {
        format!("./{name}")
    };
    let out = run(Command::new(tool)
        .current_dir(dir)
        .args(["-p", format, "-f"])
        .arg(arg));
    if out.code != Some(0) {
        return None;
    }
    let text: Vec<&str> = out
        .stdout
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("   error: "))
        .collect();
    Some(
        text.concat()
            .replace(&format!("{}/./", dir.display()), "./"),
    )
}

#[test]
fn the_printed_policy_is_cf_promises_text() {
    let Some(cf_promises) = which("cf-promises") else {
        println!("skipped: cf-promises not installed, nothing to compare -p with");
        return;
    };
    let validate = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/validate");
    let mut cases: Vec<(PathBuf, String)> = cf_files(&validate)
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            header(&text, "verdict").as_deref() == Some("accept")
        })
        .map(|p| {
            (
                validate.clone(),
                p.file_name().unwrap().to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mpf = Path::new("/var/lib/cfengine3/masterfiles");
    if mpf.join("promises.cf").is_file() {
        cases.push((mpf.to_path_buf(), "promises.cf".into()));
    }
    let mut compared = 0;
    let mut problems = Vec::new();
    for (dir, name) in &cases {
        for format in ["json", "cf"] {
            let Some(theirs) = printed(&cf_promises, dir, name, format) else {
                continue;
            };
            compared += 1;
            let ours = printed(&agent_bin(), dir, name, format).unwrap_or_default();
            if ours != theirs {
                problems.push(format!(
                    "{name} -p {format}\n--- ours\n{ours}\n--- cf-promises\n{theirs}"
                ));
            }
        }
    }
    assert!(compared >= 40, "only {compared} outputs compared");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn full_formats_print_every_input_and_json_spans_is_ours() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        tmp.path().join("main.cf"),
        "body common control\n{\n inputs => { \"lib.cf\" };\n bundlesequence => { \"test\" };\n}\n\
         bundle agent test\n{\nvars:\n \"v\" string => \"s\";\n}\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("lib.cf"),
        "bundle common extra\n{\nvars:\n \"x\" string => \"e\";\n}\n",
    )
    .unwrap();
    let print = |format: &str| {
        let out = run(Command::new(agent_bin())
            .current_dir(tmp.path())
            .arg("-w")
            .arg(tmp.path().join("work"))
            .args(["-p", format, "-f", "./main.cf"]));
        assert_eq!(out.code, Some(0), "-p {format}: {}", out.stderr);
        out.stdout
    };
    assert_eq!(print("none"), "");
    assert!(!print("cf").contains("bundle common extra"));
    let full = print("cf-full");
    assert!(full.starts_with("bundle agent test()\n"), "{full}");
    assert!(
        full.contains(
            "bundle common extra()\n{\nvars:\n  any::\n    \"x\"        string => \"e\";\n"
        ),
        "{full}"
    );
    assert!(print("json-full").contains("\"name\": \"extra\""));
    let spans = print("json-spans");
    assert!(spans.contains("\"promiserSpan\""), "{spans}");
    if let Some(cf_promises) = which("cf-promises") {
        let absolute = format!("{}/./main.cf", tmp.path().display());
        for name in ["main.cf", absolute.as_str()] {
            for format in ["cf-full", "json-full"] {
                let theirs = printed(&cf_promises, tmp.path(), name, format).unwrap_or_default();
                let ours = printed(&agent_bin(), tmp.path(), name, format).unwrap_or_default();
                assert_eq!(ours, theirs, "-p {format} -f {name}");
            }
        }
    } else {
        println!("skipped: cf-promises not installed, -full formats checked against ours only");
    }
}
