//! Augments, one case per rule of the augments reference (seed 001), each
//! checked against what `cf-promises` shows.
//!
//! A case is a directory under tests/augments/: `def.json`,
//! `def_preferred.json`, further included files and `promises.cf` (a bare
//! `main` when absent) are copied into a private policy directory, which
//! is also the working directory; `host_specific.json` goes to the work
//! directory's `data/`; `args` holds extra flags (`-D class`,
//! `--ignore-preferred-augments`). The rows of `--show-vars` and
//! `--show-classes` that augments or policy defined (tagged
//! `source=augments_file`, `source=cmdb` or `source=promise`) are compared,
//! with the temporary directory written `<tmp>` and the host's
//! `sys.flavor` written `<flavor>`. `expected` records what cf-promises
//! printed, for machines without it (`UPDATE_EXPECTED=1` rewrites it).
//!
//! Our side runs at the library level (augments, then loading and
//! pre-evaluation) and prints with the same table printer as
//! `agent --show-vars`, seeding the handful of `sys` variables and hard
//! classes the cases use, because discovery and the pipeline's augments
//! stage are not wired yet.

use crate::common::*;
use convergent::augments::{AugmentsInput, apply};
use convergent::eval::EvalContext;
use convergent::eval::classes::ClassInfo;
use convergent::eval::preeval::load_and_preevaluate;
use convergent::eval::vars::Variable;
use convergent::load::PolicySet;
use convergent::show::tables::{classes_table, vars_table};
use convergent::values::canon::canonify_class;
use convergent::values::{DataType, Origin, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCES: [&str; 3] = ["source=augments_file", "source=cmdb", "source=promise"];
/// The flavor we pretend to have when cf-promises cannot tell us the host's.
const FALLBACK_FLAVOR: &str = "testflavor_1";

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/augments")
}

/// Copies a case into `case` (and `host_specific.json` into `wd/data`).
/// `FLAVOR` in a file name becomes the host's `sys.flavor`.
fn stage(src: &Path, case: &Path, wd: &Path, flavor: &str) {
    std::fs::create_dir_all(case).expect("create case dir");
    std::fs::create_dir_all(wd.join("data")).expect("create workdir");
    for entry in std::fs::read_dir(src).expect("read case") {
        let entry = entry.expect("dir entry");
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if path.is_dir() {
            stage(&path, &case.join(&name), wd, flavor);
            continue;
        }
        match name.as_str() {
            "expected" | "args" => {}
            "host_specific.json" => {
                std::fs::copy(&path, wd.join("data/host_specific.json")).expect("copy");
            }
            _ => {
                std::fs::copy(&path, case.join(name.replace("FLAVOR", flavor))).expect("copy");
            }
        }
    }
    let entry = case.join("promises.cf");
    if !entry.exists() {
        std::fs::write(entry, "bundle agent main\n{\n}\n").expect("write promises.cf");
    }
}

/// The rows of one or more tables that augments or policy defined, each as
/// `column | column | ...`, sorted, with host details made neutral.
fn rows(table: &str, tmp: &Path, flavor: &str) -> Vec<String> {
    let tmp = tmp.display().to_string();
    let mut out: Vec<String> = table
        .lines()
        .filter(|l| SOURCES.iter().any(|s| l.contains(s)))
        .map(|l| {
            let l = l.replace(&tmp, "<tmp>").replace(flavor, "<flavor>");
            l.trim()
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect();
    out.sort();
    out
}

fn render(vars: &[String], classes: &[String]) -> String {
    let mut s = String::from("--- vars\n");
    for r in vars {
        s.push_str(r);
        s.push('\n');
    }
    s.push_str("--- classes\n");
    for r in classes {
        s.push_str(r);
        s.push('\n');
    }
    s
}

/// The host's `sys.flavor`, as cf-promises reports it.
fn host_flavor() -> Option<String> {
    let tmp = tempfile::tempdir().ok()?;
    std::fs::write(tmp.path().join("p.cf"), "bundle agent main\n{\n}\n").ok()?;
    let out = run(Command::new("cf-promises")
        .current_dir(tmp.path())
        .args(["--show-vars=^default:sys\\.flavor$", "-f", "./p.cf", "-w"])
        .arg(tmp.path().join("wd")));
    out.stdout
        .lines()
        .find(|l| l.starts_with("default:sys.flavor "))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(str::to_string)
}

fn reference(case: &Path, wd: &Path, args: &[String]) -> Result<(String, String), String> {
    let mut tables = Vec::new();
    for flag in ["--show-vars", "--show-classes"] {
        let out = run(Command::new("cf-promises")
            .current_dir(case)
            .arg(flag)
            .arg("-f")
            .arg("./promises.cf")
            .arg("-w")
            .arg(wd)
            .args(args));
        if out.code != Some(0) {
            return Err(format!(
                "cf-promises {flag} failed ({:?}): {}",
                out.code, out.stderr
            ));
        }
        tables.push(out.stdout);
    }
    Ok((tables.remove(0), tables.remove(0)))
}

fn seed(ctx: &mut EvalContext, case: &Path, wd: &Path, flavor: &str) {
    let entry = case.join("promises.cf");
    let sys = [
        ("workdir", wd.display().to_string()),
        ("inputdir", wd.join("inputs").display().to_string()),
        ("policy_entry_dirname", case.display().to_string()),
        ("policy_entry_filename", entry.display().to_string()),
        ("policy_entry_basename", "promises.cf".to_string()),
        ("os", "linux".to_string()),
        ("flavor", flavor.to_string()),
    ];
    for (name, value) in sys {
        let var = Variable::new(Value::str(value), DataType::String, Origin::Agent)
            .with_tags(vec!["source=agent".to_string()]);
        ctx.vars.put("default", "sys", name, var);
    }
    let dollar = Variable::new(Value::str("$"), DataType::String, Origin::Agent)
        .with_tags(vec!["source=agent".to_string()]);
    ctx.vars.put("default", "const", "dollar", dollar);
    for class in ["any", "cfengine", "cfengine_3", "linux"] {
        ctx.classes.define(
            class,
            ClassInfo {
                hard: true,
                ..ClassInfo::soft(
                    Origin::Agent,
                    vec!["source=agent".to_string(), "hardclass".to_string()],
                )
            },
        );
    }
}

fn ours(case: &Path, wd: &Path, args: &[String], flavor: &str) -> (String, String) {
    let mut ctx = EvalContext::default().with_builtins(convergent::functions::BUILTINS);
    seed(&mut ctx, case, wd, flavor);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-D"
            && let Some(class) = it.next()
        {
            ctx.classes.define(
                &canonify_class(class),
                ClassInfo::soft(Origin::CommandLine, vec!["source=environment".into()]),
            );
        }
    }
    let input = AugmentsInput {
        entry_dir: case.to_path_buf(),
        workdir: wd.to_path_buf(),
        ignore_preferred: args.iter().any(|a| a == "--ignore-preferred-augments"),
        no_def: false,
        no_host_specific: false,
        cwd: case.to_path_buf(),
    };
    let report = apply(&mut ctx, &input);
    for e in &report.errors {
        eprintln!("   error: {e}");
    }
    let mut policy = PolicySet::default();
    load_and_preevaluate(&mut ctx, &mut policy, &case.join("promises.cf"))
        .expect("load promises.cf");
    (vars_table(&ctx, None), classes_table(&ctx, None))
}

fn run_rule(name: &str) {
    let src = cases_dir().join(name);
    assert!(src.is_dir(), "no case directory {}", src.display());
    let args: Vec<String> = std::fs::read_to_string(src.join("args"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical tmp");
    let case = root.join("case");
    let wd = root.join("wd");

    let with_reference = have("cf-promises");
    let flavor = with_reference
        .then(host_flavor)
        .flatten()
        .unwrap_or_else(|| FALLBACK_FLAVOR.to_string());
    let theirs = if with_reference {
        stage(&src, &case, &wd, &flavor);
        let (v, c) = reference(&case, &wd, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        // A fresh copy for us: cf-promises writes into its work directory.
        std::fs::remove_dir_all(&root).expect("clean");
        Some(render(&rows(&v, &root, &flavor), &rows(&c, &root, &flavor)))
    } else {
        eprintln!("skipped: cf-promises not installed; comparing with the recorded rows");
        None
    };
    stage(&src, &case, &wd, &flavor);
    let (v, c) = ours(&case, &wd, &args, &flavor);
    let ours = render(&rows(&v, &root, &flavor), &rows(&c, &root, &flavor));
    let problems = check_expected(&src.join("expected"), &ours, theirs.as_deref());
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

macro_rules! rules {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_rule(stringify!($name));
            }
        )*

        /// Every case directory has its test above.
        #[test]
        fn every_case_directory_is_a_test() {
            let known = [$(stringify!($name)),*];
            let mut missing = Vec::new();
            for e in std::fs::read_dir(cases_dir()).expect("tests/augments") {
                let name = e.expect("entry").file_name().to_string_lossy().to_string();
                if !known.contains(&name.as_str()) {
                    missing.push(name);
                }
            }
            assert!(missing.is_empty(), "case directories without a test: {missing:?}");
        }
    };
}

rules!(
    augments_key_bad_files_skipped,
    augments_key_depth_first,
    augments_key_later_file_wins,
    augments_key_relative_to_working_directory,
    classes_dict_form,
    classes_first_definition_wins,
    classes_names_namespaced_canonified,
    classes_regex_anchored_expressions_need_colons,
    classes_see_earlier_classes_only,
    classes_seed_example,
    def_preferred_replaces_def,
    expansion_order_within_a_file,
    host_specific_default_scope,
    host_specific_no_references,
    host_specific_not_overridden_by_augments,
    host_specific_policy_wins,
    host_specific_variables_bare_values,
    host_specific_variables_over_vars,
    ignore_preferred_augments,
    inputs_key,
    inputs_key_in_later_file,
    inputs_key_over_host_specific,
    later_file_replaces_tags_and_comment,
    lenient_json_like_cfengine,
    malformed_def_json_is_skipped,
    policy_wins_over_augments,
    sys_expansion,
    variables_comment_tags_targets,
    variables_win_over_vars,
    vars_augments_inputs,
    vars_default_bundle_and_targets,
    vars_from_def_json_visible_later,
    vars_json_types,
);
