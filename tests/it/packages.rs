//! `packages` promises through package modules, as cf-agent 3.21 runs them.
//!
//! The hermetic scenarios use `tests/packages/test_pm`, a package module in
//! sh whose "installed" packages are a file beside it. Each scenario runs
//! under `--dry-run` (nothing changes, every change is reported), then twice
//! (the second run changes nothing), with our agent and, when it is
//! installed, with cf-agent on the same scenario: the `-I` lines, the
//! outcome classes (reported), every call the agent made of the module and
//! the module's packages after each run must be the same. Without cf-agent,
//! ours is compared with cf-agent's output recorded in
//! `tests/packages/expected/` (`UPDATE_EXPECTED=1` records it again).
//!
//! `real_packages_through_apt_and_dpkg` builds two versions of a tiny .deb
//! and installs it by file, upgrades it from a local apt repository named
//! through `options`, and removes it, through our own module
//! `policies/modules/packages/apt_get`, checking each step with dpkg-query;
//! with our agent, then with cf-agent on the same steps.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const TEST_MODULE: &str = "tests/packages/test_pm";
const APT_MODULE: &str = "policies/modules/packages/apt_get";

/// The package module body most scenarios use.
macro_rules! test_pm_body {
    () => {
        r#"
body package_module test_pm
{
  query_installed_ifelapsed => "60";
  query_updates_ifelapsed => "1440";
}
"#
    };
}

struct Scenario {
    name: &'static str,
    /// Attributes added to body common control.
    control: &'static str,
    /// The module's packages before the first run ("name version arch").
    installed: &'static str,
    /// What the module can install.
    repo: &'static str,
    /// Package files in the scenario's directory (`@BASE@` in the policy).
    files: &'static [(&'static str, &'static str)],
    /// More package modules in the work directory: name and script.
    modules: &'static [(&'static str, &'static str)],
    /// The policy after body common control; `@WD@` is the work directory.
    policy: &'static str,
    /// The tags of `classes => c("tag")` in the policy, whose outcome
    /// classes are reported.
    tags: &'static [&'static str],
    /// Run with `-K` (else the locks hold from one run to the next).
    no_lock: bool,
}

/// What a scenario has unless it says otherwise.
const PLAIN: Scenario = Scenario {
    name: "",
    control: "",
    installed: "",
    repo: "",
    files: &[],
    modules: &[],
    policy: "",
    tags: &[],
    no_lock: true,
};

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "install_from_the_repository",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\nbar 1.0 amd64\n",
        policy: concat!(
            test_pm_body!(),
            r#"
bundle agent main
{
  packages:
      "foo" policy => "present", package_module => test_pm, version => "1.0", classes => c("foo");
      "bar" policy => "present", package_module => test_pm, classes => c("bar");
      "zzz" policy => "absent", package_module => test_pm, classes => c("zzz");
}
"#
        ),
        tags: &["foo", "bar", "zzz"],
        ..PLAIN
    },
    Scenario {
        name: "latest_absent_and_a_package_file",
        installed: "bar 1.0 amd64\nfoo 1.0 amd64\n",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\nbar 1.0 amd64\n",
        files: &[("baz.pkg", "Name=baz\nVersion=3.1\nArchitecture=amd64\n")],
        policy: concat!(
            test_pm_body!(),
            r#"
bundle agent main
{
  packages:
      "foo" policy => "present", package_module => test_pm, version => "latest", classes => c("foo");
      "bar" policy => "absent", package_module => test_pm, classes => c("bar");
      "@BASE@/baz.pkg" policy => "present", package_module => test_pm, classes => c("baz");
}
"#
        ),
        tags: &["foo", "bar", "baz"],
        ..PLAIN
    },
    Scenario {
        name: "versions_and_architectures",
        installed: "foo 2.0 amd64\nqux 1.0 i386\n",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\nqux 1.0 i386\nqux 2.0 i386\nqux 1.0 amd64\n",
        policy: concat!(
            test_pm_body!(),
            r#"
bundle agent main
{
  packages:
      "foo" policy => "present", package_module => test_pm, version => "1.0", classes => c("downgrade");
      "qux" policy => "present", package_module => test_pm, architecture => "amd64", classes => c("amd64");
      "qux" policy => "present", package_module => test_pm, architecture => "i386", version => "latest", classes => c("i386");
      "foo" policy => "absent", package_module => test_pm, architecture => "i386", classes => c("other_arch");
      "foo" policy => "absent", package_module => test_pm, version => "9.9", classes => c("other_version");
}
"#
        ),
        tags: &["downgrade", "amd64", "i386", "other_arch", "other_version"],
        ..PLAIN
    },
    Scenario {
        name: "module_errors",
        installed: "foo 2.0 amd64\n",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\n",
        files: &[("baz.pkg", "Name=baz\nVersion=3.1\nArchitecture=amd64\n")],
        modules: &[
            ("garbage_pm", "#!/bin/sh\necho hello\necho world\n"),
            (
                "failing_pm",
                "#!/bin/sh\ncat >/dev/null\ncase $1 in\n  supports-api-version) echo 1 ;;\n  get-package-data) echo PackageType=repo; echo Name=x ;;\n  *) exit 1 ;;\nesac\n",
            ),
            (
                "chatty_pm",
                "#!/bin/sh\ncat >/dev/null\ncase $1 in\n  supports-api-version) echo 1 ;;\n  get-package-data) echo PackageType=repo; echo Name=x ;;\n  list-installed) printf 'Name=x\\nVersion=1\\nArchitecture=amd64\\nwhat is this\\n' ;;\nesac\n",
            ),
        ],
        policy: concat!(
            test_pm_body!(),
            r#"
body package_module missing_pm { query_installed_ifelapsed => "60"; query_updates_ifelapsed => "1440"; }
body package_module garbage_pm { query_installed_ifelapsed => "60"; query_updates_ifelapsed => "1440"; }
body package_module failing_pm { query_installed_ifelapsed => "60"; query_updates_ifelapsed => "1440"; }
body package_module chatty_pm { query_installed_ifelapsed => "60"; query_updates_ifelapsed => "1440"; }
bundle agent main
{
  packages:
      "broken-one" policy => "present", package_module => test_pm, classes => c("refused");
      "nothere" policy => "present", package_module => test_pm, classes => c("unknown");
      "garbage-x" policy => "present", package_module => test_pm, classes => c("garbage_data");
      "foo" policy => "present", package_module => missing_pm, classes => c("missing_module");
      "foo" policy => "present", package_module => garbage_pm, classes => c("garbage_module");
      "x" policy => "present", package_module => failing_pm, classes => c("failing_module");
      "x" policy => "present", package_module => chatty_pm, classes => c("chatty_module");
      "@BASE@/baz.pkg" policy => "present", package_module => test_pm, version => "9", classes => c("wrong_version");
      "foo" policy => "absent", package_module => test_pm, version => "latest", classes => c("absent_latest");
      "@BASE@/nofile.pkg" policy => "present", package_module => test_pm, classes => c("no_file");
  reports:
      "the run went on";
}
"#
        ),
        tags: &[
            "refused",
            "unknown",
            "garbage_data",
            "missing_module",
            "garbage_module",
            "failing_module",
            "chatty_module",
            "wrong_version",
            "absent_latest",
            "no_file",
        ],
        ..PLAIN
    },
    Scenario {
        name: "default_module_options_and_interpreter",
        control: "package_module => test_pm;",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\nbar 1.0 amd64\n",
        policy: r#"
body package_module test_pm
{
  query_installed_ifelapsed => "60";
  query_updates_ifelapsed => "1440";
  default_options => { "d1=x", "d2=y" };
}
body package_module via_sh
{
  module_path => "@WD@/modules/packages/test_pm";
  interpreter => "/bin/sh -e";
  query_installed_ifelapsed => "0";
  query_updates_ifelapsed => "0";
  default_options => { "dflt=1" };
}
bundle agent main
{
  packages:
      "foo" policy => "present", version => "1.0", classes => c("default_module");
      "bar" policy => "present", options => { "o1=z" }, classes => c("own_options");
      "foo" policy => "present", package_module => via_sh, options => { "o=1" }, classes => c("interpreter");
      "foo" policy => "absent", architecture => "i386", classes => c("absent_arch");
}
"#,
        tags: &[
            "default_module",
            "own_options",
            "interpreter",
            "absent_arch",
        ],
        ..PLAIN
    },
    Scenario {
        name: "inventory_for_packagesmatching",
        control: r#"package_module => test_pm; package_inventory => { "test_pm" };"#,
        installed: "bar 1.0 amd64\n",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\nbar 1.0 amd64\nbar 1.1 amd64\n",
        policy: concat!(
            test_pm_body!(),
            r#"
bundle agent main
{
  vars:
      "inst" data => packagesmatching("foo|bar", ".*", ".*", ".*");
      "upd" data => packageupdatesmatching(".*", ".*", ".*", "test_pm");
      "inst_s" string => format("%S", inst);
      "upd_s" string => format("%S", upd);
  packages:
      "foo" policy => "present", version => "1.0", classes => c("foo");
  reports:
      "installed: $(inst_s)";
      "updates: $(upd_s)";
}
"#
        ),
        tags: &["foo"],
        ..PLAIN
    },
    Scenario {
        name: "warn_only",
        installed: "bar 1.0 amd64\n",
        repo: "newpkg 1.0 amd64\nbar 1.0 amd64\n",
        policy: concat!(
            test_pm_body!(),
            r#"
bundle agent main
{
  packages:
      "newpkg" policy => "present", package_module => test_pm, action => warn, classes => c("install");
      "bar" policy => "absent", package_module => test_pm, action => warn, classes => c("remove");
}
body action warn { action_policy => "warn"; }
"#
        ),
        tags: &["install", "remove"],
        ..PLAIN
    },
    Scenario {
        name: "cache_locks_hold_between_runs",
        installed: "foo 1.0 amd64\n",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\n",
        policy: concat!(
            test_pm_body!(),
            r#"
bundle agent main
{
  packages:
      "foo" policy => "present", package_module => test_pm, version => "latest", action => always, classes => c("foo");
}
body action always { ifelapsed => "0"; }
"#
        ),
        tags: &["foo"],
        no_lock: false,
        ..PLAIN
    },
    Scenario {
        // A body named otherwise runs the program its module_path names;
        // its caches go by the body's name.
        name: "module_path_names_the_program",
        installed: "bar 1.0 amd64\n",
        repo: "foo 1.0 amd64\nbar 1.0 amd64\n",
        policy: r#"
body package_module elsewhere
{
  query_installed_ifelapsed => "60";
  query_updates_ifelapsed => "1440";
  module_path => "@WD@/modules/packages/test_pm";
}
bundle agent main
{
  packages:
      "foo" policy => "present", package_module => elsewhere, classes => c("foo");
      "bar" policy => "absent", package_module => elsewhere, classes => c("bar");
}
"#,
        tags: &["foo", "bar"],
        ..PLAIN
    },
];

/// The whole policy of a scenario, for one work directory.
fn policy_text(s: &Scenario, base: &Path, wd: &Path) -> String {
    let tags: Vec<String> = s.tags.iter().map(|t| format!("\"{t}\"")).collect();
    format!(
        r#"body common control {{ bundlesequence => {{ "main", "outcomes" }}; {control} }}
{policy}
bundle agent outcomes
{{
  vars:
      "t" slist => {{ {tags} }};
  reports:
      "$(t) kept" if => "$(t)_kept";
      "$(t) repaired" if => "$(t)_repaired";
      "$(t) failed" if => "$(t)_failed";
}}
body classes c(p)
{{
  promise_kept => {{ "$(p)_kept" }};
  promise_repaired => {{ "$(p)_repaired" }};
  repair_failed => {{ "$(p)_failed" }};
}}
"#,
        control = s.control,
        policy = s
            .policy
            .replace("@BASE@", &base.display().to_string())
            .replace("@WD@", &wd.display().to_string()),
        tags = tags.join(", ")
    )
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Puts an executable into a work directory's package modules.
fn install_module(wd: &Path, name: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = wd.join("modules/packages");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Agent {
    Ours,
    CfAgent,
}

/// One run of an agent on a policy, with `-I` (and `-K`, a dry run).
fn run_agent(agent: Agent, wd: &Path, policy: &Path, no_lock: bool, dry_run: bool) -> Captured {
    let mut cmd = match agent {
        Agent::Ours => Command::new(agent_bin()),
        Agent::CfAgent => Command::new("cf-agent"),
    };
    if no_lock {
        cmd.arg("-K");
    }
    if dry_run {
        cmd.arg(if agent == Agent::Ours {
            "--dry-run"
        } else {
            "-n"
        });
    }
    run(cmd.arg("-I").arg("-w").arg(wd).arg("-f").arg(policy))
}

/// The lines of a run as the two agents are compared: paths as `@WD@`
/// and `@BASE@`; our location of a failed promise (which cf-agent does not
/// print) taken off; under a dry run, cf-agent's words for a report it
/// would print made the report itself (we print reports in a dry run).
fn comparable(out: &str, wd: &Path, base: &Path) -> String {
    let located = regex::Regex::new(r" \(in a packages promise at [^)]*:\d+\)$").unwrap();
    inform_lines(out, wd, base)
        .replace("@ROOT@", "@WD@")
        .lines()
        .map(|l| {
            let l = located.replace(l, "");
            match l.strip_prefix(" warning: Need to repair reports promise: ") {
                Some(r) => format!("R: {r}"),
                None => l.into_owned(),
            }
        })
        .map(|l| l + "\n")
        .collect()
}

/// Takes (and empties) the module's record of calls, with the paths
/// written as in [`comparable`].
fn take_calls(wd: &Path, base: &Path) -> String {
    let log = wd.join("modules/packages/test_pm.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    text.replace(&wd.display().to_string(), "@WD@")
        .replace(&base.display().to_string(), "@BASE@")
}

fn installed(wd: &Path) -> String {
    std::fs::read_to_string(wd.join("modules/packages/test_pm.installed")).unwrap_or_default()
}

/// Runs a scenario with one agent: the dry run, then two runs. Returns
/// the record that is compared, and the problems found on the way.
fn run_scenario(s: &Scenario, base: &Path, wd: &Path, agent: Agent) -> (String, Vec<String>) {
    let mut problems = Vec::new();
    let module = std::fs::read_to_string(repo_root().join(TEST_MODULE)).unwrap();
    install_module(wd, "test_pm", &module);
    for (name, script) in s.modules {
        install_module(wd, name, script);
    }
    let mdir = wd.join("modules/packages");
    std::fs::write(mdir.join("test_pm.installed"), s.installed).unwrap();
    std::fs::write(mdir.join("test_pm.repo"), s.repo).unwrap();
    let policy = wd.join("p.cf");
    std::fs::write(&policy, policy_text(s, base, wd)).unwrap();
    let who = match agent {
        Agent::Ours => "ours",
        Agent::CfAgent => "cf-agent",
    };
    let mut record = String::new();
    let dry = run_agent(agent, wd, &policy, s.no_lock, true);
    let dry_lines = comparable(&dry.stdout, wd, base);
    record.push_str(&format!("=== dry run\n{dry_lines}"));
    let mut dry_calls = take_calls(wd, base);
    if agent == Agent::CfAgent {
        // Where we differ on purpose (issue 28): a dry run never fetches
        // the repositories' lists (apt_get's list-updates runs apt-get
        // update), so ours asks for list-updates-local where cf-agent -n
        // asks for list-updates. The record holds our word for both.
        dry_calls = dry_calls
            .lines()
            .map(|l| {
                if l == "list-updates" {
                    "list-updates-local"
                } else {
                    l
                }
            })
            .map(|l| format!("{l}\n"))
            .collect();
    }
    record.push_str(&format!("=== calls of the dry run\n{dry_calls}"));
    if installed(wd) != s.installed {
        problems.push(format!(
            "{}: {who}: the dry run changed the packages:\n{}",
            s.name,
            installed(wd)
        ));
    }
    let mut after = Vec::new();
    for i in 1..=2 {
        let out = run_agent(agent, wd, &policy, s.no_lock, false);
        let lines = comparable(&out.stdout, wd, base);
        // Our errors of a failed promise say where the promise is.
        let unlocated = out.stdout.lines().find(|l| {
            (l.starts_with("   error: Error ") || l.contains("contacting package module"))
                && !l.contains(&format!("(in a packages promise at {}:", policy.display()))
        });
        if let (Agent::Ours, Some(l)) = (agent, unlocated) {
            problems.push(format!("{}: an error without its location: {l}", s.name));
        }
        record.push_str(&format!("=== run {i}\n{lines}"));
        let calls = take_calls(wd, base);
        record.push_str(&format!("=== calls of run {i}\n{calls}"));
        record.push_str(&format!("=== packages after run {i}\n{}", installed(wd)));
        after.push(installed(wd));
        if i == 1 {
            // Every change the run made was announced by the dry run.
            for made in lines
                .lines()
                .filter_map(|l| l.strip_prefix("    info: Successfully "))
            {
                let what = made.split_once(' ').map_or(made, |(_, w)| w);
                let what = what.trim_start_matches("package ").trim_matches('\'');
                if !dry_lines
                    .lines()
                    .any(|d| d.starts_with(" warning: Should ") && d.contains(what))
                {
                    problems.push(format!(
                        "{}: {who}: the dry run did not announce '{made}':\n{dry_lines}",
                        s.name
                    ));
                }
            }
        } else {
            // The second run changes nothing; only promises that failed
            // may ask the module to try again.
            let changing = ["repo-install", "file-install", "remove"];
            if lines.contains("info: Successfully")
                || (!lines.contains("error: ") && calls.lines().any(|c| changing.contains(&c)))
                || after[0] != after[1]
            {
                problems.push(format!(
                    "{}: {who}: the second run was not a no-op:\n{lines}{calls}",
                    s.name
                ));
            }
        }
    }
    (record, problems)
}

#[test]
fn scenarios_match_cf_agent() {
    let with_cf = have("cf-agent");
    if !with_cf {
        eprintln!("skipped: cf-agent not installed; comparing with the recorded outputs instead");
    }
    let only = std::env::var("PACKAGES_CASE").ok();
    let mut problems = Vec::new();
    for s in SCENARIOS {
        if only.as_deref().is_some_and(|o| !s.name.contains(o)) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        for (name, content) in s.files {
            std::fs::write(base.join(name), content).unwrap();
        }
        let (ours, mut p) = run_scenario(s, base, &base.join("wd"), Agent::Ours);
        problems.append(&mut p);
        let theirs = with_cf.then(|| {
            let (theirs, mut p) = run_scenario(s, base, &cf_workdir(base), Agent::CfAgent);
            problems.append(&mut p);
            theirs
        });
        let expected = repo_root().join(format!("tests/packages/expected/{}.txt", s.name));
        problems.extend(check_expected(&expected, &ours, theirs.as_deref()));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A bad promise fails alone, says where it is, and the run goes on.
#[test]
fn bad_promises_fail_alone_with_their_location() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    let module = std::fs::read_to_string(repo_root().join(TEST_MODULE)).unwrap();
    install_module(&wd, "test_pm", &module);
    install_module(&wd, "garbage_pm", "#!/bin/sh\necho hello\necho world\n");
    let p = write_policy(
        tmp.path(),
        concat!(
            test_pm_body!(),
            r#"
body package_module missing_pm { query_installed_ifelapsed => "60"; query_updates_ifelapsed => "1440"; }
body package_module garbage_pm { query_installed_ifelapsed => "60"; query_updates_ifelapsed => "1440"; }
body package_module bad_minutes { query_installed_ifelapsed => "$(g.minutes)"; }
bundle common g { vars: "minutes" string => "often"; }
body package_method old { package_list_command => "/bin/true"; }
bundle agent main
{
  packages:
      "nopolicy" package_module => test_pm, version => "1";
      "nomodule" policy => "present";
      "oldstyle" package_method => old, package_policy => "add";
      "mixed" package_method => old, policy => "present";
      "minutes" policy => "present", package_module => bad_minutes;
      "missing" policy => "present", package_module => missing_pm;
      "garbage" policy => "present", package_module => garbage_pm;
      "good" policy => "absent", package_module => test_pm, classes => kept("good");
  reports:
    good_kept::
      "the good promise was kept";
}
body classes kept(p) { promise_kept => { "$(p)_kept" }; }
"#
        ),
    );
    let out = agent_inform(&wd, &p, &[]);
    let text = std::fs::read_to_string(&p).unwrap();
    let path = p.display().to_string();
    for (promiser, words) in [
        ("nopolicy", "New package promise failed sanity check."),
        ("nomodule", "New package promise failed sanity check."),
        (
            "oldstyle",
            // The old package promise's sanity check, in cf-agent's words.
            "You must supply a method for determining the name of existing packages e.g. use the standard library generic package_method",
        ),
        (
            "mixed",
            "Mixed old and new package promise attributes inside one package promise.",
        ),
        ("minutes", "New package promise failed sanity check."),
        (
            "missing",
            "Some error occurred while contacting package module for promise 'missing'",
        ),
        (
            "garbage",
            "Some error occurred while contacting package module for promise 'garbage'",
        ),
    ] {
        let line = 1 + text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("\"{promiser}\"")))
            .unwrap();
        let located = format!("(in a packages promise at {path}:{line})");
        assert!(
            out.stdout
                .lines()
                .any(|l| l.starts_with("   error: ") && l.contains(words) && l.ends_with(&located)),
            "no error '{words}' {located}:\n{}",
            out.stdout
        );
    }
    for cause in [
        "Package promise 'nopolicy' has no policy (\"present\" or \"absent\")",
        "Can not find package module body in policy.",
        "Invalid or missing arguments in package_module body 'bad_minutes':  query_installed_ifelapsed = -678 query_updates_ifelapsed = 0",
        "Cannot find package module at location",
        "Unsupported package module wrapper API version: -1",
    ] {
        assert!(out.stdout.contains(cause), "no '{cause}':\n{}", out.stdout);
    }
    assert!(
        out.stdout.contains("R: the good promise was kept"),
        "{}",
        out.stdout
    );
    assert_eq!(out.code, Some(0), "{out:?}");
}

// ---- the real package manager ---------------------------------------------

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Purges the test package, whatever happens to the test.
struct PackageGuard(String);

impl Drop for PackageGuard {
    fn drop(&mut self) {
        purge(&self.0);
    }
}

fn purge(name: &str) {
    let _ = Command::new("dpkg").args(["--purge", name]).output();
}

/// The version dpkg has installed of a package, if any.
fn dpkg_version(name: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${db:Status-Abbrev}${Version}", name])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_prefix("ii ").map(|v| v.trim().to_string())
}

/// Builds `NAME_VERSION_all.deb` in `dir` with dpkg-deb.
fn build_deb(dir: &Path, name: &str, version: &str) -> PathBuf {
    let root = dir.join(format!("{name}-{version}"));
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(root.join(format!("usr/share/{name}"))).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: convergent tests <root@localhost>\nDescription: a package the convergent tests install and remove\n"
        ),
    )
    .unwrap();
    std::fs::write(root.join(format!("usr/share/{name}/version")), version).unwrap();
    let deb = dir.join(format!("{name}_{version}_all.deb"));
    let out = run(Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(&root)
        .arg(&deb));
    assert_eq!(out.code, Some(0), "dpkg-deb failed: {out:?}");
    deb
}

/// One step of the real test: a policy, and the version dpkg must have
/// after it.
/// The apt-get arguments of a policy's `{ "-o", "X=Y", ... }` list.
fn apt_option_args(list: &str) -> Vec<String> {
    list.trim_matches(|c| c == '{' || c == '}' || c == ' ')
        .split(", ")
        .map(|o| o.trim_matches('"').to_string())
        .collect()
}

struct Step {
    name: &'static str,
    packages: String,
    expect: Option<&'static str>,
}

#[test]
fn real_packages_through_apt_and_dpkg() {
    let tools = ["dpkg-deb", "dpkg-query", "dpkg-scanpackages", "apt-get"];
    if !is_root() || tools.iter().any(|t| which(t).is_none()) {
        eprintln!("skipped: needs root and {}", tools.join(", "));
        return;
    }
    let name = format!("convergent-test-{}", std::process::id());
    let _guard = PackageGuard(name.clone());
    purge(&name);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let v1 = build_deb(base, &name, "1.0");
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::copy(
        build_deb(base, &name, "2.0"),
        repo.join(format!("{name}_2.0_all.deb")),
    )
    .unwrap();
    let scan = run(Command::new("dpkg-scanpackages")
        .args(["--multiversion", ".", "/dev/null"])
        .current_dir(&repo));
    assert_eq!(scan.code, Some(0), "{scan:?}");
    std::fs::write(repo.join("Packages"), &scan.stdout).unwrap();
    // apt reads only this list and keeps its state apart from the
    // machine's, through options: nothing of the machine's apt changes.
    let lists = base.join("lists");
    std::fs::create_dir_all(lists.join("partial")).unwrap();
    let sources = base.join("sources.list");
    std::fs::write(
        &sources,
        format!("deb [trusted=yes] file:{} ./\n", repo.display()),
    )
    .unwrap();
    // The body's default_options reach every call (the cache queries
    // too); a promise's options only its own calls.
    let apt_options = format!(
        r#"{{ "-o", "Dir::Etc::SourceList={}", "-o", "Dir::Etc::SourceParts={}", "-o", "Dir::State::Lists={}", "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=" }}"#,
        sources.display(),
        base.join("no-parts").display(),
        lists.display()
    );
    let steps = [
        Step {
            name: "install the package file",
            packages: format!(
                r#""{}" policy => "present", package_module => apt_get, classes => c("step");"#,
                v1.display()
            ),
            expect: Some("1.0"),
        },
        Step {
            name: "upgrade from the repository",
            packages: format!(
                r#""{name}" policy => "present", version => "latest", package_module => apt_get, classes => c("step");"#
            ),
            expect: Some("2.0"),
        },
        Step {
            name: "remove",
            packages: format!(
                r#""{name}" policy => "absent", package_module => apt_get, options => {apt_options}, classes => c("step");"#
            ),
            expect: None,
        },
    ];
    let module = std::fs::read_to_string(repo_root().join(APT_MODULE)).unwrap();
    let mut agents = vec![Agent::Ours];
    if have("cf-agent") {
        agents.push(Agent::CfAgent);
    } else {
        eprintln!("skipped the cf-agent side: cf-agent not installed");
    }
    let mut records = Vec::new();
    for agent in agents {
        purge(&name);
        let wd = match agent {
            Agent::Ours => base.join("wd"),
            Agent::CfAgent => cf_workdir(base),
        };
        install_module(&wd, "apt_get", &module);
        let mut record = String::new();
        let mut before = None;
        for step in &steps {
            let policy = wd.join("p.cf");
            std::fs::write(
                &policy,
                format!(
                    r#"body common control {{ bundlesequence => {{ "main" }}; }}
body package_module apt_get
{{
  query_installed_ifelapsed => "60";
  query_updates_ifelapsed => "1440";
  default_options => {apt_options};
}}
bundle agent main
{{
  packages:
      {}
  reports:
    step_kept:: "kept";
    step_repaired:: "repaired";
    step_failed:: "failed";
}}
body classes c(p) {{ promise_kept => {{ "$(p)_kept" }}; promise_repaired => {{ "$(p)_repaired" }}; repair_failed => {{ "$(p)_failed" }}; }}
"#,
                    step.packages
                ),
            )
            .unwrap();
            // A dry run never fetches the lists (ours asks apt_get for
            // list-updates-local, issue 28): the administrator refreshes
            // them first, as before `apt-get -s upgrade`.
            let mut update = Command::new("apt-get");
            for o in apt_option_args(&apt_options) {
                update.arg(o);
            }
            let refreshed = run(update.args(["-q", "update"]));
            assert_eq!(refreshed.code, Some(0), "{refreshed:?}");
            let dry = run_agent(agent, &wd, &policy, true, true);
            let dry_lines = comparable(&dry.stdout, &wd, base).replace(&name, "@PKG@");
            assert_eq!(
                dpkg_version(&name),
                before,
                "{}: the dry run changed the system: {dry:?}",
                step.name
            );
            assert!(
                dry_lines.contains(" warning: Should "),
                "{}: the dry run did not say what it would do:\n{dry_lines}",
                step.name
            );
            record.push_str(&format!("=== {}: dry run\n{dry_lines}", step.name));
            for i in 1..=2 {
                let out = run_agent(agent, &wd, &policy, true, false);
                let lines = comparable(&out.stdout, &wd, base).replace(&name, "@PKG@");
                let version = dpkg_version(&name);
                assert_eq!(
                    version.as_deref(),
                    step.expect,
                    "{}: run {i}: {out:?}",
                    step.name
                );
                let want = if i == 1 { "R: repaired" } else { "R: kept" };
                assert!(
                    lines.contains(want),
                    "{}: run {i} should say '{want}':\n{lines}",
                    step.name
                );
                record.push_str(&format!(
                    "=== {}: run {i}\n{lines}=== dpkg-query: {}\n",
                    step.name,
                    version.as_deref().unwrap_or("not installed")
                ));
            }
            before = step.expect.map(str::to_string);
        }
        records.push(record);
    }
    if let [ours, theirs] = records.as_slice() {
        assert_eq!(ours, theirs, "ours and cf-agent's runs differ");
    }
}

/// A module that exits without reading a request larger than a pipe holds
/// leaves the agent writing into a closed pipe: the agent must take that
/// as a failed promise, not die of SIGPIPE.
#[test]
fn a_module_that_reads_nothing_does_not_kill_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    install_module(
        &wd,
        "deaf_pm",
        "#!/bin/sh\ncase \"$1\" in\n  supports-api-version) echo 1 ;;\n  get-package-data) cat >/dev/null; echo PackageType=repo; echo Name=deafpkg ;;\n  repo-install) exit 0 ;;\n  *) cat >/dev/null ;;\nesac\n",
    );
    // Options enough for the install request to fill the pipe (64 KiB).
    let options: Vec<String> = (0..2000)
        .map(|i| format!("\"option-{i:04}-{}\"", "x".repeat(40)))
        .collect();
    let p = write_policy(
        tmp.path(),
        &format!(
            r#"body package_module deaf_pm {{ query_installed_ifelapsed => "0"; query_updates_ifelapsed => "0"; }}
bundle agent main
{{
  packages:
      "deafpkg" policy => "present", package_module => deaf_pm, options => {{ {} }};
  reports:
      "the run went on";
}}
"#,
            options.join(", ")
        ),
    );
    let out = agent_inform(&wd, &p, &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("R: the run went on"), "{out:?}");
}
