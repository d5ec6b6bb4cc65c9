//! The dependency graph and `--why` (issue 9, part 3): `depends_on`
//! cycles refuse the policy before anything runs, `--graph` prints the
//! promises and what links them as DOT, and `--why` answers from the last
//! run (or dry run) why a promise ran, was skipped or failed.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new(policy: &str) -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().display().to_string();
        std::fs::write(tmp.path().join("p.cf"), policy.replace("@ROOT@", &root)).unwrap();
        Tree { tmp }
    }

    fn root(&self) -> &Path {
        self.tmp.path()
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Runs the agent on the tree's policy and work directory.
    fn agent(&self, args: &[&str]) -> Captured {
        self.agent_with(args, true)
    }

    /// `--why` needs no policy.
    fn why(&self, query: &str) -> Captured {
        self.agent_with(&["--why", query], false)
    }

    fn agent_with(&self, args: &[&str], policy: bool) -> Captured {
        let mut cmd = Command::new(agent_bin());
        cmd.arg("-w").arg(self.p("wd"));
        if policy {
            cmd.arg("-f").arg(self.p("p.cf"));
        }
        scrubbed(run(cmd.args(args)), self.root())
    }
}

const CYCLE: &str = r#"bundle agent main
{
  files:
      "@ROOT@/first" create => "true", handle => "first";
      "@ROOT@/a" create => "true", handle => "a", depends_on => { "first", "c", "e" };
      "@ROOT@/b" create => "true", handle => "b", depends_on => { "a" };
      "@ROOT@/c" create => "true", handle => "c", depends_on => { "b" };
      "@ROOT@/d" create => "true", handle => "d", depends_on => { "b", "e" };
      "@ROOT@/e" create => "true", handle => "e", depends_on => { "d" };
}
"#;

#[test]
fn a_depends_on_cycle_is_reported_once_as_the_shortest_cycle_before_anything_runs() {
    let t = Tree::new(CYCLE);
    let out = t.agent(&["-K"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(!t.p("first").exists(), "nothing may run");
    // a, b, c, d, e depend on each other: one group, reported once, by its
    // shortest cycle (d <-> e), not the longer a -> b -> c -> a.
    insta::assert_snapshot!("depends_on_cycle", out.stderr);
    let check = t.agent(&["-c"]);
    assert_eq!(check.code, Some(1), "{check:?}");
    assert_eq!(check.stderr, out.stderr);
}

#[test]
fn two_separate_cycles_are_two_errors() {
    let t = Tree::new(
        r#"bundle agent main
{
  reports:
      "x" handle => "x", depends_on => { "y" };
      "y" handle => "y", depends_on => { "x" };
      "z" handle => "z", depends_on => { "z" };
}
"#,
    );
    let out = t.agent(&["-K"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.stderr.matches("   error: ").count(), 2, "{out:?}");
    assert!(
        out.stderr
            .contains("[TMP]/p.cf:6: reports promise 'z' (handle 'z') depends on 'z'"),
        "{out:?}"
    );
}

#[test]
fn graph_prints_promises_and_their_links_as_dot() {
    let t = Tree::new(
        r#"bundle agent main
{
  classes:
      "want_web" expression => "any";
  files:
    want_web::
      "@ROOT@/conf" create => "true", handle => "conf", classes => repaired("conf_changed");
  commands:
    conf_changed::
      "/bin/true" handle => "reload", depends_on => { "conf", "ghost" };
  methods:
      "helper" usebundle => helper("x");
}

bundle agent helper(arg)
{
  reports:
      "helper $(arg)";
}

body classes repaired(c)
{
      promise_repaired => { "$(c)" };
}
"#,
    );
    let out = t.agent(&["--graph"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!t.p("conf").exists(), "--graph changes nothing");
    insta::assert_snapshot!("graph_dot", out.stdout);
    if have("dot") {
        let p = t.p("g.dot");
        std::fs::write(&p, &out.stdout).unwrap();
        let svg = run(Command::new("dot").arg("-Tsvg").arg(&p));
        assert_eq!(svg.code, Some(0), "{svg:?}");
    }
}

#[test]
fn graph_of_a_policy_with_a_cycle_shows_it_in_red_and_fails() {
    let t = Tree::new(CYCLE);
    let out = t.agent(&["--graph"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stdout
            .contains("p4 -> p5 [label=\"depends_on d\", color=red];"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("p1 -> p2 [label=\"depends_on a\"];"),
        "not on the reported cycle: {out:?}"
    );
}

const WHY: &str = r#"body common control
{
      bundlesequence => { "main" };
}

bundle agent main
{
  files:
    linux.!no_such_class::
      "@ROOT@/made" create => "true", handle => "made";
    no_such_class|other_missing::
      "@ROOT@/never" create => "true", handle => "guarded";
    any::
      "@ROOT@/$(nowhere[x])" create => "true", handle => "unresolved";
  reports:
      "unless said no" handle => "unless_true", unless => "any";
      "if said no" handle => "if_false", if => "linux.nothing_here";
      "after a failure" handle => "after_failure", depends_on => { "fails" };
      "locked" handle => "locked", action => hourly;
  commands:
      "/bin/sh -c 'echo oops >&2; exit 3'" handle => "fails";
}

body action hourly
{
      ifelapsed => "60";
}
"#;

#[test]
fn why_answers_for_each_way_a_promise_can_go() {
    let t = Tree::new(WHY);
    let out = t.agent(&["-D", "linux"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let answer = |q: &str| {
        let a = t.why(q);
        assert_eq!(a.code, Some(0), "{q}: {a:?}");
        a.stdout
    };
    let made = answer("made");
    assert!(
        made.contains(
            "files promise '[TMP]/made' in bundle default:main ([TMP]/p.cf:10, handle 'made')"
        ),
        "{made}"
    );
    assert!(made.contains("'[TMP]/made': ran and repaired"), "{made}");
    assert!(made.contains("Created file '[TMP]/made'"), "{made}");
    // FILE:LINE finds it too.
    assert_eq!(answer("p.cf:10"), made);
    assert!(answer("guarded").contains(
        "skipped: its class guard 'no_such_class|other_missing::' is false: none of its \
             alternatives holds (class 'no_such_class' is not defined; class 'other_missing' is \
             not defined)"
    ));
    assert!(
        answer("unless_true")
            .contains("skipped: unless => \"any\" is true: class 'any' is defined")
    );
    assert!(answer("if_false").contains(
        "skipped: if => \"linux.nothing_here\" is false: class 'nothing_here' is not defined"
    ));
    assert!(
        answer("unresolved")
            .contains("skipped: its promiser refers to variables that did not resolve: nowhere[x]")
    );
    let failed = answer("fails");
    assert!(failed.contains("ran and failed (failed)"), "{failed}");
    assert!(failed.contains("returned 3"), "{failed}");
    assert!(
        answer("after_failure").contains("skipped: depends_on is not met: 'fails' ended failed")
    );
    // The second run within the hour finds the lock.
    t.agent(&["-D", "linux"]);
    assert!(answer("locked").contains(
        "skipped: it ran less than 60 minute(s) ago (ifelapsed); its lock has 60 minute(s) left"
    ));
}

#[test]
fn why_after_a_dry_run_and_for_unknown_promises() {
    let t = Tree::new(WHY);
    let none = t.why("made");
    assert_eq!(none.code, Some(1), "{none:?}");
    assert!(none.stderr.contains("no run is recorded"), "{none:?}");
    let out = t.agent(&["-n", "-D", "linux"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!t.p("made").exists());
    let made = t.why("made");
    assert!(made.stdout.contains("in the last dry run"), "{made:?}");
    assert!(
        made.stdout
            .contains("'[TMP]/made': ran; it would have changed something"),
        "{made:?}"
    );
    let unknown = t.why("no_such_handle");
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    assert!(
        unknown
            .stdout
            .contains("no promise matching 'no_such_handle' was reached"),
        "{unknown:?}"
    );
}

/// A promise with more iterations than the record searches in turn (it
/// indexes them then): each iteration is listed once, however many
/// passes record it again.
#[test]
fn why_lists_each_of_many_iterations_once() {
    let t = Tree::new(
        r#"bundle agent main
{
  vars:
      "n" slist => { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
                     "10", "11", "12", "13", "14", "15", "16", "17", "18", "19",
                     "20", "21", "22", "23", "24", "25", "26", "27", "28", "29",
                     "30", "31", "32", "33", "34", "35", "36", "37", "38", "39" };
  reports:
      "item $(n)" handle => "many", if => "nothing_here";
      "one $(n)" handle => "shown";
}
"#,
    );
    let out = t.agent(&[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let many = t.why("many");
    assert_eq!(many.code, Some(0), "{many:?}");
    for i in 0..40 {
        let line = format!("'item {i}': skipped: if => \"nothing_here\" is false");
        assert_eq!(
            many.stdout.matches(&line).count(),
            1,
            "{line}\n{}",
            many.stdout
        );
    }
    assert_eq!(
        many.stdout.matches("': skipped").count(),
        40,
        "{}",
        many.stdout
    );
    let shown = t.why("shown");
    assert_eq!(
        shown.stdout.matches("': ran").count(),
        40,
        "{}",
        shown.stdout
    );
}
