//! Differential tests of the validator: each policy in tests/validate/ is
//! checked by ours answering as `cf-promises` and, when it is installed, by
//! `cf-promises`, each without `-c`; both
//! must give the verdict recorded in the policy's header.
//!
//! Header keys:
//! - `# verdict: accept` or `# verdict: reject` — what cf-promises 3.21
//!   says (exit code 0 or not);
//! - `# ours: TEXT` — a piece of the diagnostic our agent must print (an
//!   error for rejected policies, a warning for accepted ones);
//! - `# flags: ARGS` — flags given to both before `-f` (`-c` for the full
//!   check CI pipelines and the MPF's update policy run, `-c -b main`).
//!
//! A second test runs `agent --syntax-only` over the masterfiles policy
//! framework installed with CFEngine, which must pass cleanly.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/validate")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Accept,
    Reject,
}

impl Verdict {
    fn from_exit(code: Option<i32>) -> Verdict {
        if code == Some(0) {
            Verdict::Accept
        } else {
            Verdict::Reject
        }
    }
}

fn recorded_verdict(policy: &Path, text: &str) -> Verdict {
    match header(text, "verdict").as_deref() {
        Some("accept") => Verdict::Accept,
        Some("reject") => Verdict::Reject,
        other => panic!(
            "{}: the header must say '# verdict: accept' or '# verdict: reject', not {other:?}",
            policy.display()
        ),
    }
}

#[test]
fn validator_verdicts_match_cf_promises() {
    let policies = cf_files(&corpus_dir());
    assert!(
        policies.len() >= 40,
        "the corpus should hold at least 40 policies, found {}",
        policies.len()
    );
    let reference = have("cf-promises");
    if !reference {
        println!("skipped: cf-promises not installed (checking recorded verdicts only)");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // Ours answers as cf-promises through a link of that name, so that
    // both give cf-promises' own check (without -c, which checks more).
    let ours_promises = tmp.path().join("cf-promises");
    std::os::unix::fs::symlink(agent_bin(), &ours_promises).expect("link cf-promises");
    let mut problems = Vec::new();
    for policy in &policies {
        let text = std::fs::read_to_string(policy).expect("read policy");
        let want = recorded_verdict(policy, &text);
        let name = policy
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let flags: Vec<String> = header(&text, "flags")
            .map(|f| f.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let ours = run(Command::new(&ours_promises)
            .current_dir(corpus_dir())
            .arg("-w")
            .arg(tmp.path().join("ours"))
            .args(&flags)
            .arg("-f")
            .arg(format!("./{name}")));
        let got = Verdict::from_exit(ours.code);
        if got != want {
            problems.push(format!(
                "{name}: we say {got:?}, the recorded verdict is {want:?}\n{}",
                ours.stderr
            ));
        }
        if let Some(piece) = header(&text, "ours") {
            let kind = match want {
                Verdict::Accept => "warning:",
                Verdict::Reject => "error:",
            };
            let found = ours
                .stderr
                .lines()
                .any(|l| l.contains(kind) && l.contains(&piece));
            if !found {
                problems.push(format!(
                    "{name}: no {kind} line containing {piece:?}\n{}",
                    ours.stderr
                ));
            }
        }
        // Promises that fail when evaluated (`   error: ...` lines) do not
        // make a policy rejected: cf-promises prints such errors too, and
        // still accepts it.
        let diagnosed = ours
            .stderr
            .lines()
            .any(|l| l.contains("error:") && !l.trim_start().starts_with("error:"));
        if want == Verdict::Accept && diagnosed {
            problems.push(format!(
                "{name}: accepted, but with errors\n{}",
                ours.stderr
            ));
        }
        if reference {
            let wd = cf_workdir(tmp.path());
            let theirs = run(Command::new("cf-promises")
                .current_dir(corpus_dir())
                .arg("-w")
                .arg(&wd)
                .args(&flags)
                .arg("-f")
                .arg(format!("./{name}")));
            let theirs_verdict = Verdict::from_exit(theirs.code);
            if theirs_verdict != want {
                problems.push(format!(
                    "{name}: cf-promises says {theirs_verdict:?}, the recorded verdict is {want:?}\n{}",
                    theirs.stderr
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// `file:line` of each diagnostic line of one kind in a tool's output.
fn locations(stderr: &str, kind: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains(&format!(": {kind}: ")))
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let file = parts.next()?.trim().trim_start_matches("./");
            let line = parts.next()?;
            Some(format!("{file}:{line}"))
        })
        .collect()
}

#[test]
fn masterfiles_pass_syntax_only() {
    let root = Path::new("/var/lib/cfengine3/masterfiles");
    if !root.is_dir() {
        println!("skipped: {} not found", root.display());
        return;
    }
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read masterfiles").flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "cf") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(
        !files.is_empty(),
        "no policy files under {}",
        root.display()
    );
    let ours = run(Command::new(agent_bin()).arg("--syntax-only").args(&files));
    assert_eq!(
        ours.code,
        Some(0),
        "agent --syntax-only rejects masterfiles:\n{}",
        ours.stderr
    );
    assert!(
        locations(&ours.stderr, "error").is_empty(),
        "errors on masterfiles:\n{}",
        ours.stderr
    );
    // A warning is only allowed where cf-promises warns too.
    let warned = locations(&ours.stderr, "warning");
    if warned.is_empty() {
        return;
    }
    assert!(
        have("cf-promises"),
        "warnings on masterfiles, and no cf-promises to compare with:\n{}",
        ours.stderr
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let wd = cf_workdir(tmp.path());
    for at in warned {
        let file = at.rsplit_once(':').map_or(at.as_str(), |(f, _)| f);
        let theirs = run(Command::new("cf-promises")
            .arg("-w")
            .arg(&wd)
            .arg("-f")
            .arg(file));
        assert!(
            locations(&theirs.stderr, "warning").contains(&at),
            "we warn at {at} and cf-promises does not:\n{}",
            ours.stderr
        );
    }
}

/// An input whose text was loaded already (the same library through a
/// link, or copied under another name) is skipped, as cf-promises skips
/// it; the same names with other text are still defined twice.
#[test]
fn an_input_with_the_text_of_a_loaded_one_is_skipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let lib = "body package_method yum {}\nbundle agent libb { }\n";
    std::fs::write(dir.join("real.cf"), lib).unwrap();
    std::fs::write(dir.join("copy.cf"), lib).unwrap();
    std::os::unix::fs::symlink("real.cf", dir.join("link.cf")).unwrap();
    std::fs::write(
        dir.join("other.cf"),
        "body package_method yum { package_changes => \"bulk\"; }\nbundle agent libb { }\n",
    )
    .unwrap();
    let cases = [("copy.cf", true), ("link.cf", true), ("other.cf", false)];
    for (second, accepted) in cases {
        let main = format!("main-{second}");
        std::fs::write(
            dir.join(&main),
            format!("body common control {{ inputs => {{ \"real.cf\", \"{second}\" }}; }}\nbundle agent main {{ }}\n"),
        )
        .unwrap();
        let mut tools = vec![agent_bin()];
        tools.extend(which("cf-promises"));
        for tool in tools {
            let out = run(Command::new(&tool)
                .current_dir(dir)
                .arg("-w")
                .arg(dir.join("work"))
                .args(["-c", "-f"])
                .arg(format!("./{main}")));
            assert_eq!(
                out.code == Some(0),
                accepted,
                "{} with {second}: {}{}",
                tool.display(),
                out.stdout,
                out.stderr
            );
        }
    }
}

/// An input that cannot be read is the first error, as cf-promises
/// reports it, and what follows from it (the bodies that file would have
/// defined) is not reported as missing.
#[test]
fn a_missing_input_is_reported_before_what_follows_from_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::write(
        dir.join("main.cf"),
        "body common control { inputs => { \"lib.cf\" }; }\n\
         bundle agent main { files: \"/tmp/x\" perms => from_lib; }\n",
    )
    .unwrap();
    let promises = dir.join("cf-promises");
    std::os::unix::fs::symlink(agent_bin(), &promises).expect("link cf-promises");
    let mut tools = vec![promises];
    tools.extend(which("cf-promises"));
    for tool in tools {
        let out = run(Command::new(&tool)
            .current_dir(dir)
            .arg("-w")
            .arg(dir.join("work"))
            .args(["-c", "-f", "./main.cf"]));
        // cf-promises writes its errors to stdout, ours to stderr.
        let said = format!("{}{}", out.stdout, out.stderr);
        assert_ne!(out.code, Some(0), "{}: {said}", tool.display());
        let first = said
            .lines()
            .find(|l| l.contains("error:"))
            .unwrap_or_default();
        assert!(
            first.contains("lib.cf"),
            "{}: the first error should name the missing input:\n{}",
            tool.display(),
            said
        );
        assert!(
            !said.contains("Undefined body"),
            "{}: a body of the missing input is reported missing:\n{}",
            tool.display(),
            said
        );
    }
}
