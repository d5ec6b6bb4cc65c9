//! Our standard library (policies/lib/*.cf): every body and bundle is
//! exercised by a case here or by a case of the differential harness
//! (tests/stdlib/cases, run with `scripts/stdlib_harness.py --ours-lib`). Each case is a small policy using library
//! names on a private tree; it runs twice with our agent and our library.
//! Where the MPF defines the same names (its lib/ is installed with
//! cf-agent), the same case also runs with cf-agent and the MPF's library,
//! and the trees after each run and the `R:` lines must be the same: our
//! library does what MPF users expect of those names. Names the MPF lacks
//! are checked by the `R:` lines the case expects. The second run must
//! leave the tree as the first left it.
//!
//! `STDLIB_CASE=substring` runs only the matching cases.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const MPF_LIB: &str = "/usr/share/cfengine3/masterfiles/lib/stdlib.cf";

struct Case {
    name: &'static str,
    /// The library names the case exercises.
    covers: &'static [&'static str],
    /// Files of the initial tree: path, content, mode.
    before: &'static [(&'static str, &'static str, u32)],
    /// Paths (files or directories) made ten days old before the runs.
    old: &'static [&'static str],
    /// The policy after the control body; `@ROOT@` is the tree,
    /// `@MODULES@` our `policies/modules`.
    policy: &'static str,
    /// Whether every name it uses is also in the MPF (then cf-agent with
    /// the MPF's library is the reference).
    mpf: bool,
    /// `R:` lines the first run must print (checked for ours).
    reports: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "perms",
        covers: &["m", "mog", "og", "owner", "system_owned"],
        before: &[
            ("a", "a\n", 0o644),
            ("b", "b\n", 0o644),
            ("c", "c\n", 0o644),
            ("d", "d\n", 0o600),
            ("e", "e\n", 0o666),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/a" perms => m("600");
  "@ROOT@/b" perms => mog("640", "nobody", "nogroup");
  "@ROOT@/c" perms => og("nobody", "nogroup");
  "@ROOT@/d" perms => owner("nobody");
  "@ROOT@/e" perms => system_owned("0444");
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "copies",
        covers: &["local_cp", "local_dcp", "no_backup_cp"],
        before: &[
            ("src/one", "one\n", 0o644),
            ("src/two", "two\n", 0o640),
            ("src/three", "three\n", 0o644),
            ("dst/three", "old three\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/dst/one" copy_from => local_cp("@ROOT@/src/one");
  "@ROOT@/dst/two" copy_from => local_dcp("@ROOT@/src/two");
  "@ROOT@/dst/three" copy_from => no_backup_cp("@ROOT@/src/three");
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "sync_copy",
        covers: &["sync_cp", "recurse"],
        before: &[
            ("src/a", "a\n", 0o600),
            ("src/sub/b", "b\n", 0o644),
            ("dst/extra", "gone\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/dst" copy_from => sync_cp("@ROOT@/src", "localhost"), depth_search => recurse("inf");
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "searches",
        covers: &["recurse_with_base", "recurse_ignore", "plain", "dirs"],
        before: &[
            ("t1/a", "a\n", 0o644),
            ("t1/sub/b", "b\n", 0o644),
            ("t2/a", "a\n", 0o644),
            ("t2/skip/b", "b\n", 0o644),
            ("t2/keep/c", "c\n", 0o644),
            ("t3/sub/x", "x\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/t1" perms => m("700"), depth_search => recurse_with_base("inf"), file_select => dirs;
  "@ROOT@/t2" perms => m("600"), depth_search => recurse_ignore("inf", @(main.skip)), file_select => plain;
  "@ROOT@/t3" perms => m("640"), depth_search => recurse("inf"), file_select => plain;
vars:
  "skip" slist => { "skip" };
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "tidy_old_files",
        covers: &["tidy", "days_old", "by_name"],
        before: &[
            ("logs/old.log", "old\n", 0o644),
            ("logs/new.log", "new\n", 0o644),
            ("logs/old.txt", "keep\n", 0o644),
            ("tmp/x1", "x\n", 0o644),
            ("tmp/y1", "y\n", 0o644),
        ],
        old: &["logs/old.log", "logs/old.txt"],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/logs" delete => tidy, depth_search => recurse("inf"), file_select => days_old("3");
  "@ROOT@/tmp" delete => tidy, depth_search => recurse("inf"), file_select => by_name(@(main.names));
vars:
  "names" slist => { "x.*" };
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "edit_defaults",
        covers: &["empty", "no_backup", "std_defs", "insert_lines"],
        before: &[
            ("a", "old\n", 0o644),
            ("b", "b\n", 0o644),
            ("c", "c\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/a" edit_line => insert_lines("new"), edit_defaults => empty;
  "@ROOT@/b" edit_line => insert_lines(@(main.more)), edit_defaults => no_backup;
  "@ROOT@/c" edit_line => insert_lines("c2"), edit_defaults => std_defs;
vars:
  "more" slist => { "b2", "b3" };
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "links_and_renames",
        covers: &["ln_s", "to", "disable"],
        before: &[
            ("target", "t\n", 0o644),
            ("moveme", "m\n", 0o644),
            ("offme", "o\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/link" link_from => ln_s("@ROOT@/target");
  "@ROOT@/moveme" rename => to("@ROOT@/moved");
  "@ROOT@/offme" rename => disable;
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "locations",
        covers: &["start", "before", "after"],
        before: &[("f", "a\nmid\nz\n", 0o644)],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/f" edit_line => places, edit_defaults => no_backup;
}
bundle edit_line places {
insert_lines:
  "first" location => start;
  "before mid" location => before("mid");
  "after mid" location => after("mid");
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "replacements",
        covers: &["value", "comment", "uncomment", "col"],
        before: &[
            ("f", "colour=red\nshade=red\n", 0o644),
            ("g", "keep\ndrop\n#  back\n", 0o644),
            ("h", "root:x:0\nuser:y:1\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/f" edit_line => repl, edit_defaults => no_backup;
  "@ROOT@/g" edit_line => comm, edit_defaults => no_backup;
  "@ROOT@/h" edit_line => fields, edit_defaults => no_backup;
}
bundle edit_line repl {
replace_patterns:
  "red" replace_with => value("blue");
}
bundle edit_line comm {
replace_patterns:
  "^(drop)$" replace_with => comment("#");
  "^#\s*(back)$" replace_with => uncomment;
}
bundle edit_line fields {
field_edits:
  "user:.*" edit_field => col(":", "2", "z", "set");
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "ini_section",
        covers: &["INI_section"],
        before: &[("f", "[a]\nx=1\n[b]\nx=1\ny=2\n", 0o644)],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/f" edit_line => ini, edit_defaults => no_backup;
}
bundle edit_line ini {
delete_lines:
  "x=.*" select_region => INI_section("b");
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "line_bundles",
        covers: &[
            "lines_present",
            "append_if_no_line",
            "delete_lines_matching",
            "comment_lines_matching",
            "uncomment_lines_matching",
            "replace_or_add",
        ],
        before: &[
            ("a", "one\n", 0o644),
            ("b", "one\n", 0o644),
            ("c", "keep\ndebug=1\ndebug=2\n", 0o644),
            ("d", "PermitRootLogin yes\nPort 22\n", 0o644),
            ("e", "# Port 22\nx\n", 0o644),
            ("f", "PasswordAuthentication yes\nother\n", 0o644),
            ("g", "other\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/a" edit_line => lines_present("two"), edit_defaults => no_backup;
  "@ROOT@/b" edit_line => append_if_no_line("one"), edit_defaults => no_backup;
  "@ROOT@/c" edit_line => delete_lines_matching("debug=.*"), edit_defaults => no_backup;
  "@ROOT@/d" edit_line => comment_lines_matching("PermitRootLogin.*", "#"), edit_defaults => no_backup;
  "@ROOT@/e" edit_line => uncomment_lines_matching("Port 22", "#"), edit_defaults => no_backup;
  "@ROOT@/f" edit_line => replace_or_add("PasswordAuthentication.*", "PasswordAuthentication no"), edit_defaults => no_backup;
  "@ROOT@/g" edit_line => replace_or_add("PasswordAuthentication.*", "PasswordAuthentication no"), edit_defaults => no_backup;
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "variable_values",
        covers: &["set_variable_values", "set_line_based"],
        before: &[
            ("kv", "a=1\nb = 2\n", 0o644),
            ("sp", "Port 22\n# comment\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
vars:
  "v[a]" string => "10";
  "v[c]" string => "3";
  "s[Port]" string => "2222";
  "s[Banner]" string => "none";
files:
  "@ROOT@/kv" edit_line => set_variable_values("main.v"), edit_defaults => no_backup;
  "@ROOT@/sp" edit_line => set_line_based("main.s", " ", "\s+", ".*", "\s*#\s*"), edit_defaults => no_backup;
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "outcome_classes",
        covers: &[
            "if_repaired",
            "if_ok",
            "if_notkept",
            "if_else",
            "always",
            "results",
            "scoped_classes_generic",
        ],
        before: &[("kept", "x\n", 0o600), ("fixed", "x\n", 0o644)],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/fixed" perms => m("600"), classes => if_repaired("was_repaired");
  "@ROOT@/kept" perms => m("600"), classes => if_ok("kept_ok");
  "@ROOT@/missing" edit_line => insert_lines("x"), classes => if_notkept("not_kept");
  "@ROOT@/kept" perms => m("600"), classes => if_else("yes", "no");
  "@ROOT@/missing" edit_line => insert_lines("y"), classes => always("anyway");
  "@ROOT@/kept" perms => m("600"), classes => results("namespace", "res");
  "@ROOT@/missing" edit_line => insert_lines("z"), classes => scoped_classes_generic("namespace", "gen");
reports:
  was_repaired:: "was_repaired";
  kept_ok:: "kept_ok";
  not_kept:: "not_kept";
  yes:: "yes";
  no:: "no";
  anyway:: "anyway";
  res_reached.res_kept:: "res_kept";
  gen_reached.gen_not_kept:: "gen_not_kept";
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "actions",
        covers: &["if_elapsed", "immediate", "warn_only"],
        before: &[
            ("a", "a\n", 0o644),
            ("b", "b\n", 0o644),
            ("c", "c\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/a" perms => m("600"), action => if_elapsed("60");
  "@ROOT@/b" perms => m("600"), action => immediate;
  "@ROOT@/c" perms => m("600"), action => warn_only;
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "contain",
        covers: &[
            "in_shell",
            "in_shell_and_silent",
            "silent",
            "in_dir",
            "in_dir_shell",
            "setuid",
        ],
        before: &[("pub/.keep", "", 0o644)],
        old: &[],
        policy: r##"
bundle agent main {
commands:
  "/bin/echo shell > @ROOT@/o1" contain => in_shell;
  "/bin/echo quiet; /bin/echo q > @ROOT@/o2" contain => in_shell_and_silent;
  "/bin/echo not shown" contain => silent;
  "/usr/bin/touch o3" contain => in_dir("@ROOT@");
  "/bin/echo dir > o4" contain => in_dir_shell("@ROOT@");
  "/usr/bin/touch @ROOT@/pub/o5" contain => setuid("nobody");
}
"##,
        mpf: true,
        reports: &[],
    },
    Case {
        name: "ours_only",
        covers: &["if_kept", "between", "set_section", "timeout"],
        before: &[
            ("k", "x\n", 0o600),
            ("r", "a\nBEGIN\nold1\nold2\nEND\nz\n", 0o644),
            ("s", "top\n# start\nstale\n# end\n", 0o644),
        ],
        old: &[],
        policy: r##"
bundle agent main {
files:
  "@ROOT@/k" perms => m("600"), classes => if_kept("was_kept");
  "@ROOT@/r" edit_line => clear_region, edit_defaults => no_backup;
  "@ROOT@/s" edit_line => set_section("# start", "# end", "fresh"), edit_defaults => no_backup;
commands:
  "/bin/sleep 20" contain => timeout("1"), classes => if_notkept("timed_out");
reports:
  was_kept:: "was_kept";
  timed_out:: "timed_out";
}
bundle edit_line clear_region {
delete_lines:
  ".*" select_region => between("BEGIN", "END");
}
"##,
        mpf: false,
        reports: &["R: was_kept", "R: timed_out"],
    },
    Case {
        name: "standard_services",
        covers: &["standard_services", "kept_successful_command"],
        before: &[],
        old: &[],
        policy: r##"
bundle agent main {
methods:
  "svc" usebundle => standard_services("convergent-no-such-service", "stop");
commands:
  "/bin/true" classes => kept_successful_command;
reports:
  "checked";
}
"##,
        mpf: true,
        reports: &["R: checked"],
    },
    Case {
        // Without systemd (as on the test machines) the unit is not
        // loaded, and nothing runs.
        name: "systemd_services",
        covers: &["systemd_services"],
        before: &[],
        old: &[],
        policy: r##"
bundle agent main {
methods:
  "svc" usebundle => systemd_services("convergent-no-such-service", "stop");
reports:
  "checked";
}
"##,
        mpf: true,
        reports: &["R: checked"],
    },
    Case {
        name: "package_module",
        covers: &["package_module_knowledge", "apt_get"],
        before: &[],
        old: &[],
        // The MPF's apt_get body runs its Python module through
        // cfengine-selected-python; ours is a shell script.
        policy: r##"
bundle agent main {
files:
  "$(sys.workdir)/modules/packages/apt_get"
    copy_from => local_cp("@MODULES@/packages/apt_get"), perms => m("755");
packages:
  "convergent-no-such-package" policy => "absent", package_module => apt_get,
    classes => if_ok("absent");
reports:
  "default: $(package_module_knowledge.platform_default)";
  absent::
    "not installed";
}
"##,
        mpf: false,
        reports: &["R: default: apt_get", "R: not installed"],
    },
];

fn lib_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/lib")
}

/// The names our library defines: (kind, name), e.g. ("body perms", "m").
fn library_names() -> Vec<String> {
    let mut names = Vec::new();
    for f in cf_files(&lib_dir()) {
        let text = std::fs::read_to_string(&f).expect("read library file");
        for l in text.lines() {
            let mut w = l.split_whitespace();
            let (Some(kind @ ("body" | "bundle")), Some(_), Some(name)) =
                (w.next(), w.next(), w.next())
            else {
                continue;
            };
            let name = name.split('(').next().unwrap_or_default();
            // Control bodies are plumbing, not names that policies use.
            if kind == "body" && name == "control" {
                continue;
            }
            names.push(name.to_string());
        }
    }
    names
}

fn prepare(case: &Case, base: &Path, lib: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let root = base.join("root");
    std::fs::create_dir_all(&root).expect("root");
    for (rel, content, mode) in case.before {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, content).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).expect("chmod");
    }
    if root.join("pub").is_dir() {
        std::fs::set_permissions(root.join("pub"), std::fs::Permissions::from_mode(0o1777))
            .expect("chmod pub");
    }
    let ten_days_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(10 * 86400);
    for rel in case.old {
        let f = std::fs::File::options()
            .write(true)
            .open(root.join(rel))
            .expect("open old file");
        f.set_modified(ten_days_ago).expect("set mtime");
    }
    let policy = base.join("policy.cf");
    let text = format!(
        "body common control {{ inputs => {{ \"{}\" }}; bundlesequence => {{ \"main\" }}; }}\n{}",
        lib.display(),
        case.policy
            .replace("@ROOT@", &root.to_string_lossy())
            .replace(
                "@MODULES@",
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("policies/modules")
                    .to_string_lossy()
            )
    );
    std::fs::write(&policy, text).expect("write policy");
    (root, policy)
}

/// Two runs: per run the `R:` lines and the tree.
fn two_runs(root: &Path, run_once: &mut dyn FnMut() -> Captured) -> Vec<(String, String)> {
    (0..2)
        .map(|_| {
            let out = run_once();
            let reports: String = out
                .stdout
                .lines()
                .chain(out.stderr.lines())
                .filter(|l| l.starts_with("R: "))
                .map(|l| format!("{l}\n"))
                .collect();
            (reports, tree_listing(root, false))
        })
        .collect()
}

fn run_case(case: &Case, with_mpf: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let ours_base = tmp.path().join("ours");
    let (root, policy) = prepare(case, &ours_base, &lib_dir().join("stdlib.cf"));
    let wd = ours_base.join("wd");
    let ours = two_runs(&root, &mut || {
        run(Command::new(agent_bin())
            .args(["-K", "-w"])
            .arg(&wd)
            .arg("-f")
            .arg(&policy))
    });
    if ours[0].1 != ours[1].1 {
        problems.push(format!(
            "{}: our second run changed the tree\n--- after run 1\n{}--- after run 2\n{}",
            case.name, ours[0].1, ours[1].1
        ));
    }
    for r in case.reports {
        if !ours[0].0.lines().any(|l| l == *r) {
            problems.push(format!(
                "{}: expected the report '{r}'; ours printed\n{}",
                case.name, ours[0].0
            ));
        }
    }
    if case.mpf && with_mpf {
        let cf_base = tmp.path().join("cf");
        let (cf_root, cf_policy) = prepare(case, &cf_base, Path::new(MPF_LIB));
        let cf_wd = cf_workdir(&cf_base);
        let theirs = two_runs(&cf_root, &mut || {
            run(Command::new("cf-agent")
                .args(["-K", "-w"])
                .arg(&cf_wd)
                .arg("-f")
                .arg(&cf_policy))
        });
        for (n, (o, t)) in ours.iter().zip(&theirs).enumerate() {
            let o_tree = o.1.replace(root.to_string_lossy().as_ref(), "@ROOT@");
            let t_tree = t.1.replace(cf_root.to_string_lossy().as_ref(), "@ROOT@");
            if o.0 != t.0 || o_tree != t_tree {
                problems.push(format!(
                    "{}: run {} differs from cf-agent with the MPF's library\n--- ours\n{}{}--- cf-agent\n{}{}",
                    case.name,
                    n + 1,
                    o.0,
                    o_tree,
                    t.0,
                    t_tree
                ));
            }
        }
    }
    problems
}

/// The names the cases of the differential harness (tests/stdlib/cases,
/// scripts/stdlib_harness.py) exercise, from their `# covers:` lines
/// (`TYPE:NAME` where two kinds share a name).
fn harness_covers() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stdlib/cases");
    let mut out = BTreeSet::new();
    for f in cf_files(&dir) {
        let text = std::fs::read_to_string(&f).expect("read case");
        for l in text.lines().take_while(|l| l.starts_with('#')) {
            if let Some(names) = l.strip_prefix("# covers:") {
                out.extend(
                    names
                        .split_whitespace()
                        .map(|n| n.rsplit(':').next().unwrap_or(n).to_string()),
                );
            }
        }
    }
    out
}

#[test]
fn every_library_name_has_a_case() {
    let harness = harness_covers();
    let covered: BTreeSet<&str> = CASES
        .iter()
        .flat_map(|c| c.covers.iter().copied())
        .chain(harness.iter().map(String::as_str))
        .collect();
    let missing: Vec<String> = library_names()
        .into_iter()
        .filter(|n| !covered.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "library names without a case: {missing:?}"
    );
    for c in CASES {
        for n in c.covers {
            assert!(
                c.policy.contains(&format!("{n}("))
                    || c.policy.contains(&format!("$({n}."))
                    || c.policy.contains(&format!("=> {n};"))
                    || c.policy.contains(&format!("=> {n},")),
                "case {} claims to cover {n} but does not use it",
                c.name
            );
        }
    }
}

#[test]
fn library_cases() {
    let with_mpf = have("cf-agent") && Path::new(MPF_LIB).is_file();
    if !with_mpf {
        eprintln!("cf-agent or the MPF not installed; checking the expected reports only");
    }
    let filter = std::env::var("STDLIB_CASE").ok();
    let cases: Vec<&Case> = CASES
        .iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .collect();
    let problems = problems_in_parallel(&cases, 3, |c| run_case(c, with_mpf));
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}
