//! Transactional bundles (issue 9, part 2): a bundle tagged `transaction`
//! is all-or-nothing for the files it changes. These tests run the binary
//! on real files in a temporary tree: a failed validation command undoes
//! every change, a successful bundle keeps them, a run killed in the middle
//! is undone by the next one before anything else, and priorities order
//! adjacent transactions.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("etc/nginx")).unwrap();
        let conf = tmp.path().join("etc/nginx/nginx.conf");
        std::fs::write(&conf, "worker_processes 2;\n").unwrap();
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o640)).unwrap();
        Tree { tmp }
    }

    fn root(&self) -> &Path {
        self.tmp.path()
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Writes the policy with `@ROOT@` replaced by the tree's root.
    fn policy(&self, text: &str) -> PathBuf {
        let p = self.p("p.cf");
        let root = self.root().display().to_string();
        std::fs::write(&p, text.replace("@ROOT@", &root)).unwrap();
        p
    }

    fn agent(&self, args: &[&str]) -> Captured {
        let out = run(Command::new(agent_bin())
            .arg("-w")
            .arg(self.p("wd"))
            .arg("-f")
            .arg(self.p("p.cf"))
            .args(args));
        scrubbed(out, self.root())
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.p(rel)).unwrap()
    }

    fn mode(&self, rel: &str) -> u32 {
        std::fs::metadata(self.p(rel)).unwrap().permissions().mode() & 0o7777
    }

    fn journals(&self) -> usize {
        std::fs::read_dir(self.p("wd/state/journal"))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

/// nginx.conf is rewritten and a site file created; then `validate`
/// decides (it greps the new configuration for `broken`), and `reload`
/// runs only after it.
const WEB: &str = r#"body common control
{
      bundlesequence => { "web", "other" };
}

bundle agent web
{
  meta:
      "tags" slist => { "transaction" };
  files:
      "@ROOT@/etc/nginx/nginx.conf"
        content => "$(def.conf)",
        perms => m("600");
      "@ROOT@/etc/nginx/sites/new.conf"
        create => "true",
        content => "server {}$(const.n)";
  commands:
      "/bin/sh -c 'if grep -q broken @ROOT@/etc/nginx/nginx.conf; then exit 1; fi'"
        handle => "validate";
      "/bin/sh -c 'echo reloaded > @ROOT@/reloaded'"
        handle => "reload";
}

bundle agent other
{
  files:
      "@ROOT@/other.conf" create => "true";
}

body perms m(mode)
{
      mode => "$(mode)";
}
"#;

fn def_json(t: &Tree, conf: &str) {
    std::fs::write(
        t.p("def.json"),
        serde_json::json!({"vars": {"conf": conf}}).to_string(),
    )
    .unwrap();
}

#[test]
fn a_failed_validation_rolls_back_every_change_of_the_bundle() {
    let t = Tree::new();
    t.policy(WEB);
    def_json(&t, "worker_processes 16;\nbroken;\n");
    let out = t.agent(&["-K", "--detailed-exitcodes"]);
    assert_eq!(out.code, Some(6), "repaired and not kept: {out:?}");
    // Content and mode are back, the new file and its directory are gone.
    assert_eq!(t.read("etc/nginx/nginx.conf"), "worker_processes 2;\n");
    assert_eq!(t.mode("etc/nginx/nginx.conf"), 0o640);
    assert!(!t.p("etc/nginx/sites").exists());
    // The reload after the failed validation never ran.
    assert!(!t.p("reloaded").exists());
    // Another bundle goes on.
    assert!(t.p("other.conf").exists());
    assert_eq!(t.journals(), 0);
    let said: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains("Transaction") || l.contains("Rolled back"))
        .collect();
    assert_eq!(
        said,
        vec![
            "   error: Transaction 'default:web' failed: the commands promise '/bin/sh -c 'if grep -q broken [TMP]/etc/nginx/nginx.conf; then exit 1; fi'' ([TMP]/p.cf:18) was not kept (failed); undoing its changes to 3 path(s)",
            "  notice: Rolled back (default:web): removed [TMP]/etc/nginx/sites/new.conf (it did not exist before)",
            "  notice: Rolled back (default:web): removed [TMP]/etc/nginx/sites (it did not exist before)",
            "  notice: Rolled back (default:web): restored [TMP]/etc/nginx/nginx.conf (its content, mode 0640 and owner)",
        ],
        "{out:?}"
    );
    // --why tells the skipped reload what happened.
    let why = t.agent(&["--why", "reload"]);
    assert!(
        why.stdout.contains(
            "skipped: the transaction 'default:web' was abandoned after the commands promise"
        ),
        "{why:?}"
    );
}

#[test]
fn a_transaction_whose_promises_are_kept_keeps_its_changes() {
    let t = Tree::new();
    t.policy(WEB);
    def_json(&t, "worker_processes 16;\n");
    let out = t.agent(&["-K"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("Rolled back"), "{out:?}");
    assert_eq!(t.read("etc/nginx/nginx.conf"), "worker_processes 16;\n");
    assert_eq!(t.mode("etc/nginx/nginx.conf"), 0o600);
    assert_eq!(t.read("etc/nginx/sites/new.conf"), "server {}\n");
    assert_eq!(t.read("reloaded"), "reloaded\n");
    assert_eq!(t.journals(), 0, "a committed journal is removed");
}

#[test]
fn a_dry_run_changes_nothing_and_journals_nothing() {
    let t = Tree::new();
    t.policy(WEB);
    def_json(&t, "worker_processes 16;\nbroken;\n");
    let out = t.agent(&["-K", "-n"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(t.read("etc/nginx/nginx.conf"), "worker_processes 2;\n");
    assert!(!t.p("wd/state/journal").exists() || t.journals() == 0);
}

/// Polls until `f` holds or the time is up.
fn wait_for(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_journal_left_by_a_killed_run_is_rolled_back_at_the_next_start() {
    let t = Tree::new();
    t.policy(
        r#"bundle agent main
{
  meta:
      "tags" slist => { "transaction" };
  files:
      "@ROOT@/etc/nginx/nginx.conf" content => "half-done$(const.n)";
      "@ROOT@/etc/nginx/extra.conf" create => "true";
  commands:
      "/bin/sh -c 'echo $$ > @ROOT@/sleeper.pid; exec sleep 60'";
}

bundle agent after
{
  reports:
      "after ran";
}
"#,
    );
    let mut child = Command::new(agent_bin())
        .arg("-K")
        .arg("-w")
        .arg(t.p("wd"))
        .arg("-f")
        .arg(t.p("p.cf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The files are changed and the command is running: kill the agent.
    wait_for("the sleeper", || {
        std::fs::read_to_string(t.p("sleeper.pid")).is_ok_and(|s| s.ends_with('\n'))
    });
    assert_eq!(t.read("etc/nginx/nginx.conf"), "half-done\n");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let sleeper: i32 = t.read("sleeper.pid").trim().parse().unwrap();
    // SAFETY: kill(2) on the pid of the sleep this test started.
    unsafe {
        libc::kill(sleeper, libc::SIGKILL);
    }
    assert_eq!(t.journals(), 1, "the killed run left its journal");

    let out = t.agent(&["-K", "-b", "after"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].starts_with(
            " warning: Recovered an unfinished transaction 'default:main': the run that started it (pid "
        ) && lines[0].ends_with(
            "was killed before the transaction ended; undoing its changes to 2 path(s)"
        ),
        "the recovery comes first: {out:?}"
    );
    assert_eq!(
        &lines[1..],
        &[
            " warning: Rolled back (default:main): removed [TMP]/etc/nginx/extra.conf (it did not exist before)",
            " warning: Rolled back (default:main): restored [TMP]/etc/nginx/nginx.conf (its content, mode 0640 and owner)",
            "R: after ran",
        ],
        "{out:?}"
    );
    assert_eq!(t.read("etc/nginx/nginx.conf"), "worker_processes 2;\n");
    assert!(!t.p("etc/nginx/extra.conf").exists());
    assert_eq!(t.journals(), 0);
    // Only once.
    let again = t.agent(&["-K", "-b", "after"]);
    assert_eq!(again.stdout, "R: after ran\n", "{again:?}");
}

#[test]
fn priorities_order_adjacent_transactions_and_nothing_else() {
    let t = Tree::new();
    let bundle = |name: &str, tags: &str| {
        format!(
            "bundle agent {name}\n{{\n  meta:\n      \"tags\" slist => {{ {tags} }};\n  reports:\n      \"{name}\";\n}}\n"
        )
    };
    let mut policy = String::from(
        "body common control\n{\n      bundlesequence => { \"t30\", \"t10\", \"plain\", \"t20\", \"t5\", \"t_none\", \"caller\" };\n}\n",
    );
    policy.push_str(&bundle("t30", r#""transaction", "priority=30""#));
    policy.push_str(&bundle("t10", r#""transaction", "priority=10""#));
    policy.push_str(&bundle("t20", r#""transaction", "priority=20""#));
    policy.push_str(&bundle("t5", r#""transaction", "priority=5""#));
    policy.push_str(&bundle("t_none", r#""transaction""#));
    policy.push_str(&bundle("plain", r#""priority=1""#));
    policy.push_str(
        "bundle agent caller\n{\n  methods:\n      \"a\" usebundle => m30;\n      \"b\" usebundle => m10;\n}\n",
    );
    policy.push_str(&bundle("m30", r#""transaction", "priority=30""#));
    policy.push_str(&bundle("m10", r#""transaction", "priority=10""#));
    t.policy(&policy);
    let out = t.agent(&["-K"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    // t30 and t10 are adjacent: 10 first. plain is not a transaction and
    // keeps its place; t20 and t5 are adjacent; t_none has no priority.
    assert_eq!(
        out.stdout, "R: t10\nR: t30\nR: plain\nR: t5\nR: t20\nR: t_none\nR: m10\nR: m30\n",
        "{out:?}"
    );
}

#[test]
fn cf_promises_accepts_transaction_tags() {
    if !have("cf-promises") {
        eprintln!("cf-promises is not installed; nothing to compare");
        return;
    }
    let t = Tree::new();
    let p = t.policy(WEB);
    def_json(&t, "x");
    let out = run(Command::new("cf-promises").arg("-f").arg(&p));
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// A promiser that is a trusted symlink is changed through (issue 14): the
/// journal records the file the link points to, so a failed transaction
/// puts that file back, not only the link.
#[test]
fn a_rollback_restores_the_file_behind_a_symlinked_promiser() {
    let t = Tree::new();
    std::os::unix::fs::symlink(t.p("etc/nginx/nginx.conf"), t.p("etc/nginx.conf")).unwrap();
    t.policy(
        r#"body common control { bundlesequence => { "web" }; }
bundle agent web
{
  meta:
      "tags" slist => { "transaction" };
  files:
      "@ROOT@/etc/nginx.conf" content => "broken;$(const.n)", perms => m("600");
  commands:
      "/bin/false" handle => "validate";
}
body perms m(mode) { mode => "$(mode)"; }
"#,
    );
    let out = t.agent(&["-K"]);
    assert!(out.stdout.contains("Rolled back"), "{out:?}");
    assert_eq!(
        t.read("etc/nginx/nginx.conf"),
        "worker_processes 2;\n",
        "{out:?}"
    );
    assert_eq!(t.mode("etc/nginx/nginx.conf"), 0o640);
    assert!(
        std::fs::symlink_metadata(t.p("etc/nginx.conf")).is_ok_and(|m| m.file_type().is_symlink())
    );
}
