//! Hierarchical properties (issue 9, part 1): the global layer, groups
//! ordered by `parent` and `overrides`, the host layer from
//! host_specific.json, deep merging, the errors that stop a run (an
//! ambiguous order, a cycle), and `--explain`. Each test writes real files
//! in a temporary tree and runs the binary.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A policy directory with def.json, a work directory with
/// host_specific.json, and a policy that prints what it is given.
struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new(def_json: &str, host_specific: Option<&str>, policy: &str) -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("def.json"), def_json).unwrap();
        std::fs::write(tmp.path().join("p.cf"), policy).unwrap();
        if let Some(h) = host_specific {
            std::fs::create_dir_all(tmp.path().join("wd/data")).unwrap();
            std::fs::write(tmp.path().join("wd/data/host_specific.json"), h).unwrap();
        }
        Tree { tmp }
    }

    fn path(&self) -> &Path {
        self.tmp.path()
    }

    fn agent(&self, args: &[&str]) -> Captured {
        let out = run(Command::new(agent_bin())
            .arg("-w")
            .arg(self.path().join("wd"))
            .arg("-f")
            .arg(self.path().join("p.cf"))
            .args(args));
        scrubbed(out, self.path())
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }
}

const REPORT_DNS: &str = r#"bundle agent main
{
  reports:
      "search=$(properties.dns[search]) timeout=$(properties.dns[options][timeout]) server=$(properties.dns[servers])";
}
"#;

const HIERARCHY: &str = r#"{
  "properties": {
    "global": { "dns": { "servers": ["10.0.0.1", "10.0.0.2"], "search": "example.com",
                         "options": { "timeout": 2, "attempts": 3 } } },
    "groups": {
      "debian":   { "condition": "is_debian",
                    "properties": { "dns": { "options": { "timeout": 5 } } } },
      "debian10": { "condition": "is_debian10", "parent": "debian",
                    "properties": { "dns": { "search": "deb10.example.com" } } },
      "dc1":      { "condition": "in_dc1", "overrides": ["debian10"],
                    "properties": { "dns": { "servers": ["10.1.0.1"], "search": "dc1.example.com" } } },
      "nobody":   { "condition": "!any", "properties": { "dns": { "search": "never" } } }
    }
  }
}"#;

#[test]
fn groups_merge_from_general_to_specific_and_the_host_wins() {
    let t = Tree::new(
        HIERARCHY,
        Some(r#"{"vars": {"properties.dns": {"options": {"attempts": 9}}}}"#),
        REPORT_DNS,
    );
    let out = t.agent(&["-K", "-D", "is_debian,is_debian10,in_dc1"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    // dc1 overrides debian10, which refines debian; the host's own attempts
    // win over the global ones, and objects merge key by key.
    assert_eq!(
        out.stdout, "R: search=dc1.example.com timeout=5 server=10.1.0.1\n",
        "{out:?}"
    );
    let vars = t.agent(&[
        "-D",
        "is_debian,is_debian10,in_dc1",
        "--show-vars=properties",
    ]);
    assert!(
        vars.stdout.contains(
            r#"{"options":{"attempts":9,"timeout":5},"search":"dc1.example.com","servers":["10.1.0.1"]}"#
        ),
        "{vars:?}"
    );
    assert!(
        vars.stdout
            .contains("source=properties,property_layers=global>debian>debian10>dc1>host"),
        "{vars:?}"
    );
}

#[test]
fn only_the_groups_of_this_host_count() {
    let t = Tree::new(HIERARCHY, None, REPORT_DNS);
    let out = t.agent(&["-K", "-D", "is_debian"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout,
        "R: search=example.com timeout=5 server=10.0.0.1\nR: search=example.com timeout=5 server=10.0.0.2\n"
    );
    // Without any group, the global layer alone.
    let out = t.agent(&["-K"]);
    assert!(
        out.stdout.contains("search=example.com timeout=2"),
        "{out:?}"
    );
}

#[test]
fn arrays_and_scalars_are_replaced_not_merged() {
    let t = Tree::new(
        r#"{"properties": {"global": {"p": {"list": [1, 2], "s": "a", "o": {"x": 1}}},
            "groups": {"g": {"condition": "any", "properties": {"p": {"list": [3], "o": "flat"}}}}}}"#,
        None,
        "bundle agent main { reports: \"x\"; }\n",
    );
    let out = t.agent(&["--show-vars=properties.p"]);
    assert!(
        out.stdout.contains(r#"{"list":[3],"o":"flat","s":"a"}"#),
        "{out:?}"
    );
}

#[test]
fn ambiguous_order_is_an_error_naming_the_property_both_groups_and_the_fix() {
    // debian10 and dc1 both set dns and nothing orders them.
    let unordered = HIERARCHY.replace(r#""overrides": ["debian10"],"#, "");
    let t = Tree::new(&unordered, None, REPORT_DNS);
    let out = t.agent(&["-K", "-D", "is_debian,is_debian10,in_dc1"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.stdout, "", "nothing may run: {out:?}");
    insta::assert_snapshot!("ambiguous_property_order", out.stderr);
    // A host in only one of the two branches is not ambiguous.
    let out = t.agent(&["-K", "-D", "is_debian,is_debian10"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("search=deb10.example.com"), "{out:?}");
}

#[test]
fn a_cycle_of_groups_is_an_error_that_prints_the_cycle() {
    let t = Tree::new(
        r#"{"properties": {"groups": {
            "a": {"condition": "any", "parent": "c", "properties": {"x": 1}},
            "b": {"condition": "any", "parent": "a"},
            "c": {"condition": "!any", "overrides": ["b"]},
            "d": {"condition": "any", "parent": "a"}}}}"#,
        None,
        "bundle agent main { reports: \"x\"; }\n",
    );
    let out = t.agent(&["-c"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    insta::assert_snapshot!("property_group_cycle", out.stderr);
}

#[test]
fn unknown_groups_and_bad_shapes_are_errors() {
    let t = Tree::new(
        r#"{"properties": {"groups": {
            "a": {"condition": "any", "parent": "nope"},
            "b": {"properties": {}},
            "c": {"condition": "any", "colour": "red"}}, "extra": 1}}"#,
        None,
        "bundle agent main { reports: \"x\"; }\n",
    );
    let out = t.agent(&["-c"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    for needle in [
        "[TMP]/def.json:2:49: the group 'a' names an unknown group 'nope' in its \"parent\"",
        "the group 'b' has no \"condition\"",
        "unknown key 'colour' in the group 'c'",
        "unknown key 'extra' in \"properties\"",
    ] {
        assert!(out.stderr.contains(needle), "{needle}\n{out:?}");
    }
}

#[test]
fn explain_shows_every_layer_what_it_overrode_and_the_final_value() {
    let t = Tree::new(
        HIERARCHY,
        Some(r#"{"vars": {"properties.dns": {"options": {"attempts": 9}}}}"#),
        REPORT_DNS,
    );
    let out = t.agent(&["-D", "is_debian,is_debian10,in_dc1", "--explain", "dns"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    insta::assert_snapshot!("explain_property", out.stdout);
}

#[test]
fn explain_ordinary_variables_through_augments_and_policy() {
    let t = Tree::new(
        r#"{"vars": {"port": "8080"}}"#,
        None,
        r#"bundle common g
{
  vars:
      "port" string => "$(def.port)";
      "mode" string => "first";
      "mode" string => "second", policy => "free";
}
bundle agent main
{
  reports:
      "$(g.port) $(g.mode)";
}
"#,
    );
    // def.port comes from def.json; the policy redefines g.mode.
    let out = t.agent(&["--explain", "g.mode"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    insta::assert_snapshot!("explain_policy_variable", out.stdout);
    let out = t.agent(&["--explain", "def.port"]);
    assert!(
        out.stdout
            .contains("augments file [TMP]/def.json, key \"vars\""),
        "{out:?}"
    );
    let out = t.agent(&["--explain", "no_such.thing"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("names no property"), "{out:?}");
}

#[test]
fn cf_promises_accepts_a_policy_with_properties() {
    if !have("cf-promises") {
        eprintln!("cf-promises is not installed; nothing to compare");
        return;
    }
    let t = Tree::new(
        HIERARCHY,
        Some(r#"{"vars": {"properties.dns": {"options": {"attempts": 9}}}}"#),
        REPORT_DNS,
    );
    let out = run(Command::new("cf-promises")
        .arg("-f")
        .arg(t.file("p.cf"))
        .arg("-w")
        .arg(t.file("wd")));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stderr.contains("error"), "{out:?}");
}
