//! `-v` tells what the agent did as cf-agent 3.21's verbose mode tells it:
//! for each policy below, the account of the run (the bundles entered and
//! left, each pass over variables and classes, each promise shown with its
//! handle or id, promiser, bundle, guard, condition and stack path, each
//! skip and why, the variables computed and classes defined, outcomes) is
//! the same sequence of lines, once normalised.
//!
//! Each policy is copied into a temporary directory and run with
//! `-K -v` in a private work directory; our account is snapshotted with
//! insta. Where cf-agent is installed it runs the same copy, and its
//! account must equal ours (so the snapshots are cf-agent's account too).
//!
//! The normaliser keeps only the lines of that account (see [`KEPT`]);
//! everything else either agent prints under `-v` is left out on purpose:
//! cf-agent's own setup (its work directory, keys, the environment it
//! discovers, the policy it validates and parses, the hard classes), its
//! lock and accounting bookkeeping, and the actuators' detailed lines,
//! which are ours in our words. It also writes the temporary directory as
//! `$ROOT` (and as a class name, `_ROOT`), and the iteration's mangled
//! names that cf-agent shows in a skip line (`$(ns#var)`) as written.
//!
//! Policies from CFEngine's acceptance suite run only when
//! `CFE_ACCEPTANCE_DIR` names it; they run from a copy in the temporary
//! directory (so the suite's own path never shows), with `TEMP` pointing
//! into it too.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The lines of the account, by how they start (after ` verbose: `).
const KEPT: &[&str] = &[
    "B: BEGIN bundle",
    "B: END bundle",
    "V: BEGIN variables",
    "C: BEGIN classes",
    "P: BEGIN promise",
    "P:    Promiser/affected object:",
    "P:    Part of bundle:",
    "P:    From parameterized bundle:",
    "P:    Base context class:",
    "P:    \"if\" class",
    "P:    \"unless\" class",
    "P:    Stack path:",
    "P:    Comment:",
    "Skipping promise '",
    "V:     Computing value of",
    "C:     +  ",
    "V:     +  Private parameter",
    "A: Promise ",
    "P: END ",
];

/// The policies compared: a file of this repository, or of the
/// acceptance suite (`acc:` before its path in the suite).
const CASES: &[&str] = &[
    "examples/hello.cf",
    "examples/graph/promises.cf",
    "tests/agent/guards_if_unless.cf",
    "tests/agent/guard_quoted_variable.cf",
    "tests/agent/if_unresolved_variable.cf",
    "tests/agent/depends_on_unmet.cf",
    "tests/agent/depends_on_vars_classes.cf",
    "tests/agent/defaults_promise.cf",
    "tests/agent/files_auto_define.cf",
    "tests/agent/methods_useresult_nested.cf",
    "tests/agent/params_and_useresult.cf",
    "tests/agent/methods_args_list_ref.cf",
    "tests/agent/methods_args_data.cf",
    "tests/agent/reports_return_value_not_printed.cf",
    "tests/agent/ordering_promise_types_written_backwards.cf",
    "tests/agent/unless_unresolved_on_vars_classes_methods.cf",
    // Edit bundles: each promise of each of their passes, their variables
    // and classes too, their parameters.
    "tests/agent/ordering_edit_line_types.cf",
    "tests/agent/edit_bundle_verbose_parts.cf",
    "tests/agent/edit_line_literal_selectors.cf",
    "tests/agent/edit_xml_order_and_classes.cf",
    "tests/agent/edit_xml_operations.cf",
    "tests/agent/template_data_json_string.cf",
    "acc:00_basics/03_bodies/cf_null_in_bundlesequence.cf",
    "acc:01_vars/03_lists/extend_list.cf",
    "acc:21_methods/reachable/bundle_promiser_call_by_arg_defined.cf",
    // The test framework's own bundles (default.cf.sub, dcs.cf.sub) around
    // edit bundles, quoted guards joined with `ifvarclass`, an `unless`
    // that never resolves.
    "acc:10_files/07_delete_lines/002.cf",
    "acc:10_files/08_field_edits/001.cf",
    "acc:10_files/09_insert_lines/001.cf",
    "acc:10_files/11_xml_edits/build_xpath_001.cf",
    "acc:02_classes/01_basic/variable_class_expressions_with_if.cf",
    "acc:31_tickets/CFE-2367/2/test.cf",
];

/// The account of one run's output.
fn account(out: &str, root: &Path) -> String {
    let root = root.display().to_string();
    let canon: String = root
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut lines = Vec::new();
    let mut started = false;
    for l in out.lines() {
        if l.contains("Begin policy/promise evaluation") {
            started = true;
            continue;
        }
        let Some(t) = l.strip_prefix(" verbose: ") else {
            continue;
        };
        if !started || !KEPT.iter().any(|k| t.starts_with(k)) {
            continue;
        }
        let mut t = t.replace(&root, "$ROOT").replace(&canon, "_ROOT");
        if t.starts_with("Skipping promise") {
            t = unmangle(&t);
        }
        lines.push(t);
    }
    lines.join("\n") + "\n"
}

/// `$(ns#var)` written `$(ns.var)`.
fn unmangle(t: &str) -> String {
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find("$(") {
        out.push_str(&rest[..i + 2]);
        rest = &rest[i + 2..];
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if rest[name_end..].starts_with('#') {
            out.push_str(&rest[..name_end]);
            out.push('.');
            rest = &rest[name_end + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Where a case's policy is run from, and the policy; `None` when it is
/// an acceptance test and the suite is not at hand.
fn place(case: &str, root: &Path) -> Option<(PathBuf, PathBuf)> {
    if let Some(rel) = case.strip_prefix("acc:") {
        // Copied, not run in place: the suite's own path shows in the
        // account (stack paths, promisers cut at a fixed width), and it is
        // not the same on every machine. The framework's files at the
        // top, and the test's category whole (tests reach siblings).
        let suite = PathBuf::from(std::env::var_os("CFE_ACCEPTANCE_DIR")?);
        let copy = root.join("acc");
        std::fs::create_dir_all(&copy).expect("create the suite's copy");
        for e in std::fs::read_dir(&suite).expect("read the suite").flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                std::fs::copy(e.path(), copy.join(e.file_name())).expect("copy a suite file");
            }
        }
        let category = rel.split('/').next().expect("a category");
        copy_tree(&suite.join(category), &copy.join(category));
        let policy = copy.join(rel);
        let dir = policy.parent()?.to_path_buf();
        return Some((dir, policy));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = repo.join(case);
    let from = src.parent().expect("a policy's directory");
    let dir = root.join("src");
    copy_tree(from, &dir);
    let policy = dir.join(src.file_name().expect("a policy's name"));
    Some((dir, policy))
}

/// One agent's account of a case, run in its own temporary directory
/// (both directories' names are as long, so cf-agent's 30-byte cut of a
/// promiser in `P: END` falls at the same place).
fn run_case(case: &str, cf_agent: bool) -> Option<String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let (dir, policy) = place(case, root)?;
    let stdout = run_verbose(cf_agent, root, &dir, &["-D", "AUTO"], &policy);
    Some(account(&stdout, root))
}

/// One agent run with `-K -v` on `policy` from `dir`, its work directory
/// and TEMP under `root`; what it printed.
fn run_verbose(cf_agent: bool, root: &Path, dir: &Path, args: &[&str], policy: &Path) -> String {
    std::fs::create_dir_all(root.join("tmp")).expect("create TEMP");
    let mut cmd = if cf_agent {
        Command::new("cf-agent")
    } else {
        Command::new(agent_bin())
    };
    cmd.arg("-w")
        .arg(cf_workdir(root))
        .current_dir(dir)
        .env("TEMP", root.join("tmp"))
        .args(["-K", "-v"])
        .args(args)
        .arg("-f")
        .arg(policy);
    run(&mut cmd).stdout
}

#[test]
fn verbose_accounts_are_cf_agents() {
    let reference = have("cf-agent");
    let mut problems = Vec::new();
    for case in CASES {
        let Some(ours) = run_case(case, false) else {
            eprintln!("{case}: skipped, CFE_ACCEPTANCE_DIR does not name the acceptance suite");
            continue;
        };
        let name = case
            .trim_start_matches("acc:")
            .trim_end_matches(".cf")
            .replace('/', "__");
        insta::assert_snapshot!(format!("verbose_{name}"), ours);
        if reference {
            let theirs = run_case(case, true).expect("the case ran for us");
            if theirs != ours {
                let diff = similar::TextDiff::from_lines(&theirs, &ours)
                    .unified_diff()
                    .header("cf-agent", "agent")
                    .to_string();
                problems.push(format!(
                    "{case}: our -v account differs from cf-agent's\n{diff}"
                ));
            }
        } else {
            eprintln!("{case}: cf-agent is not installed; compared with the snapshot only");
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Where Debian's cfengine3 installs the Masterfiles Policy Framework.
const MPF: &str = "/var/lib/cfengine3/masterfiles";

/// Lines of the MPF's account that come in the order of cf-agent's hash
/// tables: the iterations over a list `getindices` made of a classic array
/// (the MPF's `cpuinfo[...]`, over `readstringarrayidx`'s rows), which we
/// list by key. A run of consecutive such lines is compared as a set.
const HASH_ORDERED: &[&str] = &["V:     Computing value of 'cpuinfo["];

/// Each run of consecutive lines starting with one of [`HASH_ORDERED`],
/// sorted.
fn hash_order_as_sets(account: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    for l in account.lines() {
        if HASH_ORDERED.iter().any(|p| l.starts_with(p)) {
            run.push(l);
            continue;
        }
        run.sort_unstable();
        out.append(&mut run);
        out.push(l);
    }
    run.sort_unstable();
    out.append(&mut run);
    out.join("\n") + "\n"
}

/// One agent's account of a run of the stock MPF, copied into a temporary
/// directory with its own work directory.
fn mpf_account(cf_agent: bool) -> String {
    // A name without capitals: the MPF's setuid inventory finds its log
    // only under a work directory whose path is all lower case (cf-agent
    // opens the log at the path lowercased), and a random name with
    // capitals for one agent but not the other made the accounts differ.
    let tmp = tempfile::Builder::new()
        .prefix(&format!(
            "mpf-verbose-{}-{}",
            std::process::id(),
            // Of one length: cf-agent cuts long paths in some lines.
            if cf_agent { "a" } else { "b" }
        ))
        .rand_bytes(0)
        .tempdir()
        .expect("tempdir");
    let root = tmp.path();
    let mf = root.join("mf");
    copy_tree(Path::new(MPF), &mf);
    let stdout = run_verbose(cf_agent, root, &mf, &[], &mf.join("promises.cf"));
    hash_order_as_sets(&account(&stdout, root))
}

/// The MPF as installed, run under both agents: the same account, but for
/// the order of the iterations listed in [`HASH_ORDERED`]. No snapshot is
/// kept: the MPF's inventory tells the host (its kernel, processors,
/// addresses), so the account is this host's only.
#[test]
fn mpf_verbose_account_is_cf_agents() {
    if !Path::new(MPF).join("promises.cf").exists() {
        eprintln!("skipped: the MPF is not installed at {MPF}");
        return;
    }
    if !have("cf-agent") || !have("cf-promises") {
        eprintln!("skipped: cf-agent 3.21 is not installed to compare with");
        return;
    }
    // cf-agent runs only a policy cf-promises accepts (else it would fall
    // back to its failsafe policy).
    let check = run(Command::new("cf-promises")
        .arg("-f")
        .arg(Path::new(MPF).join("promises.cf")));
    if check.code != Some(0) {
        eprintln!("skipped: cf-promises rejects the installed MPF: {check:?}");
        return;
    }
    let ours = mpf_account(false);
    let theirs = mpf_account(true);
    assert!(
        ours.lines().count() > 1000,
        "our account of the MPF is short:\n{ours}"
    );
    if theirs != ours {
        let diff = similar::TextDiff::from_lines(&theirs, &ours)
            .unified_diff()
            .header("cf-agent", "agent")
            .to_string();
        panic!("the MPF: our -v account differs from cf-agent's\n{diff}");
    }
}

#[test]
fn unmangles_iteration_names() {
    assert_eq!(
        unmangle("if => canonify(\"x_$(default#tests)\") $(a.b) $(c)"),
        "if => canonify(\"x_$(default.tests)\") $(a.b) $(c)"
    );
}

/// `-d` adds, in words, what a policy's developer needs beyond `-v`: the
/// values variables get, the promisers an iteration expands to and the
/// function calls with their arguments and results.
#[test]
fn debug_tells_values_expansions_and_calls() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(
        tmp.path(),
        r#"bundle agent main
{
  vars:
      "l" slist => { "a", "b" };
      "n" int => string_length("abc");
  reports:
      "item $(l)" if => isvariable("n");
}
"#,
    );
    let out = run(Command::new(agent_bin())
        .arg("-w")
        .arg(tmp.path().join("wd"))
        .args(["-K", "-d", "-f"])
        .arg(&policy));
    for want in [
        "   debug: V: 'l' => 'a, b'",
        "   debug: V: 'n' => '3'",
        "   debug: Function call string_length(\"abc\") gave \"3\"",
        "   debug: Expanded promiser 'item $(l)' to 'item b' (iteration 2)",
        "   debug: Function call isvariable(\"n\") gave \"any\"",
        " verbose: P: BEGIN promise 'promise_p_cf_7' of type \"reports\" (pass 1)",
    ] {
        assert!(
            out.stdout.lines().any(|l| l == want),
            "no {want:?} in\n{}",
            out.stdout
        );
    }
}

/// A promise whose promiser holds a reference that never resolves is not
/// acted on (cf-agent acts on the text as written, see README): under -v
/// the last pass says so in the shape of cf-agent's skip lines, once.
#[test]
fn a_promiser_that_never_resolves_is_told_under_verbose() {
    let tmp = tempfile::tempdir().expect("tmp");
    let target = tmp.path().join("x_$(nosuch)");
    let policy = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n  files:\n      \"{}\"\n        create => \"true\";\n}}\n",
            target.display()
        ),
    );
    let out = run(Command::new(agent_bin())
        .args(["-K", "-v", "-w"])
        .arg(tmp.path().join("work"))
        .arg("-f")
        .arg(&policy));
    let line = format!(
        " verbose: Skipping promise '{}' because its promiser refers to variables that did not resolve: nosuch",
        target.display()
    );
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(all.lines().filter(|l| *l == line).count(), 1, "{all}");
    assert!(!target.exists());
}
