//! The schema walk: every attribute of every promise type and body type of
//! the schema has one row in src/schema/support.tsv, and the row holds:
//!
//! * `tested`: the named test exists, writes the attribute (`NAME =>`), and
//!   compares its effect with cf-agent's: a differential case under
//!   tests/ (agent, files, actuators, packages, custom, differential, acl, validate), or a
//!   suite test listed in tests/acceptance/expected-pass.txt (read from
//!   CFE_ACCEPTANCE_DIR when it is set);
//! * `refused`: the agent refuses a promise that writes it, with a located
//!   "not supported yet" error (checked by running the agent for the
//!   files promise's `copy_from` `stealth`, and by [`convergent::schema::support`]'s own
//!   lookup for every row);
//! * `other`: a body or promise type that only another component reads;
//! * `untested`: read without a test comparing it with cf-agent's: none
//!   may be;
//! * `ignored` (accepted and not read): none may be.

use crate::common::*;
use convergent::schema::support::{Owner, Support, refused, rows, support};
use std::collections::HashSet;
use std::path::Path;

/// The directories of differential cases, which compare with cf-agent.
const DIFFERENTIAL_DIRS: &[&str] = &[
    "tests/agent/",
    "tests/files/",
    "tests/actuators/",
    "tests/packages/",
    "tests/custom/",
    "tests/differential/",
    "tests/acl/",
    "tests/it/logging.rs",
    // Remote copies beside cf-agent's from one real cf-serverd
    // (copy_from_attributes_as_cf_agent_copies).
    "tests/it/remote.rs",
    // Verdicts of the validator, compared with cf-promises'.
    "tests/validate/",
    // Package module scenarios, compared with cf-agent's runs.
    "tests/it/packages.rs",
    // Policies of CFEngine 3.22 to 3.28's features, each checking itself.
    "tests/newer/",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn writes_attribute(text: &str, attr: &str) -> bool {
    let re = regex::Regex::new(&format!(r"\b{attr}\s*=>")).expect("regex");
    re.is_match(text)
}

#[test]
fn every_schema_attribute_is_tested_refused_or_named_as_work_ahead() {
    let table = rows().expect("support.tsv reads");
    let mut seen = HashSet::new();
    for ((owner, t, a), _) in &table {
        assert!(
            seen.insert((*owner, *t, *a)),
            "support.tsv has two rows for {t}.{a}"
        );
    }
    let mut schema = Vec::new();
    for pt in convergent::schema::promise_types() {
        for a in pt.attributes {
            schema.push((Owner::Promise, pt.name, a.name));
        }
    }
    for bt in convergent::schema::body_types() {
        for a in bt.attributes {
            schema.push((Owner::Body, bt.name, a.name));
        }
    }
    // The attributes CFEngine added after 3.21.
    for n in convergent::schema::newer::ATTRIBUTES {
        let (kind, t) = n.owner.split_once(':').expect("owner");
        let owner = if kind == "promise" {
            Owner::Promise
        } else {
            Owner::Body
        };
        schema.push((owner, t, n.def.name));
    }
    let schema_set: HashSet<_> = schema.iter().copied().collect();
    let mut problems = Vec::new();
    for k in &seen {
        if !schema_set.contains(k) {
            problems.push(format!(
                "{}.{} is in support.tsv but not in the schema",
                k.1, k.2
            ));
        }
    }
    let listed: HashSet<String> =
        std::fs::read_to_string(root().join("tests/acceptance/expected-pass.txt"))
            .expect("expected-pass.txt")
            .lines()
            .map(str::to_string)
            .collect();
    let suite = std::env::var("CFE_ACCEPTANCE_DIR").ok();
    let (mut untested, mut ignored) = (Vec::new(), Vec::new());
    for (owner, t, a) in schema {
        match support(owner, t, a) {
            None => problems.push(format!(
                "{t}.{a} is neither refused nor implemented: add its row to src/schema/support.tsv"
            )),
            Some(Support::Tested(test)) => {
                let text =
                    if DIFFERENTIAL_DIRS.iter().any(|d| test.starts_with(d)) {
                        std::fs::read_to_string(root().join(test)).ok()
                    } else if listed.contains(test) {
                        match &suite {
                            Some(s) => std::fs::read_to_string(Path::new(s).join(test)).ok().map(
                                |mut t| {
                                    let sub = Path::new(s).join(format!("{test}.sub"));
                                    t.push_str(&std::fs::read_to_string(sub).unwrap_or_default());
                                    t
                                },
                            ),
                            // Without the suite, being listed is what can be checked.
                            None => Some(format!("{a} =>")),
                        }
                    } else {
                        None
                    };
                match text {
                    None => problems.push(format!(
                        "{t}.{a}: its test '{test}' is neither a differential case nor a listed suite test"
                    )),
                    Some(text) if !writes_attribute(&text, a) => {
                        problems.push(format!("{t}.{a}: its test '{test}' does not write it"))
                    }
                    Some(_) => {}
                }
            }
            Some(Support::Refused(_)) => assert!(refused(owner, t, a).is_some()),
            Some(Support::OtherComponent(_)) => {}
            Some(Support::Untested) => untested.push(format!("{t}.{a}")),
            Some(Support::Ignored) => ignored.push(format!("{t}.{a}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        untested.is_empty(),
        "{} attributes are read without a test comparing them with cf-agent's: \
         name a test for each:\n{}",
        untested.len(),
        untested.join("\n")
    );
    assert!(
        ignored.is_empty(),
        "{} attributes are accepted and not read: implement or refuse them:\n{}",
        ignored.len(),
        ignored.join("\n")
    );
}

/// A refused attribute fails its promise where it is written.
#[test]
fn a_refused_attribute_fails_its_promise_with_a_located_error() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = write_policy(
        tmp.path(),
        r#"body common control { bundlesequence => { "main" }; }
body copy_from quiet { source => "/etc/hostname"; stealth => "true"; }
bundle agent main
{
  files:
      "/tmp/convergent-stealth-refused" copy_from => quiet, classes => outcome;
  reports:
    refused::
      "the promise failed";
}
body classes outcome { repair_failed => { "refused" }; }
"#,
    );
    let out = agent_inform(&tmp.path().join("wd"), &policy, &[]);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains(
            "attribute 'stealth' of copy_from body 'quiet' is not supported yet: the source's access time is not restored after a copy"
        ) && text.contains("p.cf:6")
            && text.contains("R: the promise failed"),
        "{text}"
    );
}

/// A files promise whose action body says `background` is refused where it
/// is written (cf-agent verifies it in a process of its own; commands run
/// in the background as cf-agent runs them, tests/agent/action_background_commands.cf).
#[test]
fn a_backgrounded_files_promise_is_refused() {
    refused_files_promise(
        "body action bg { background => \"true\"; }",
        "create => \"true\", action => bg",
        "attribute 'background' of action body 'bg' is not supported yet",
    );
}

#[test]
fn linkcopy_patterns_with_a_server_is_refused() {
    // A link to the source's path makes sense on the source's host only.
    refused_files_promise(
        r#"body copy_from remote { source => "/etc/hostname"; servers => { "192.0.2.1" }; linkcopy_patterns => { ".*" }; }"#,
        "copy_from => remote",
        "attribute 'linkcopy_patterns' of copy_from body 'remote' is not supported yet",
    );
}

/// A files promise with `attributes`, the body `body` defines, is refused
/// where it is written (`says`, at line 6 of the policy): the promise fails
/// and makes nothing.
fn refused_files_promise(body: &str, attributes: &str, says: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let policy = write_policy(
        tmp.path(),
        &format!(
            r#"body common control {{ bundlesequence => {{ "main" }}; }}
{body}
bundle agent main
{{
  files:
      "{}" {attributes}, classes => outcome;
  reports:
    refused::
      "the promise failed";
}}
body classes outcome {{ repair_failed => {{ "refused" }}; }}
"#,
            target.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &policy, &[]);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains(says)
            && text.contains("p.cf:6")
            && text.contains("R: the promise failed")
            && target.symlink_metadata().is_err(),
        "{text}"
    );
}
