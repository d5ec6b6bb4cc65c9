//! Issue 15: no crash on any input. Nesting deeper than the agent's limit
//! (128 levels: `convergent::syntax::MAX_NESTING`) is a located error, not
//! a stack overflow; a command line that is not UTF-8, or an empty work
//! directory, is a clear error, not a panic or a silent default; a
//! mustache error names its template line. The deep inputs are made here,
//! far deeper than any stack allows, so that an overflow would abort.

use crate::common::*;
use std::process::Command;

const DEEP: usize = 100_000;

/// Runs the agent on `policy` (written into a fresh directory) and checks
/// it ended by itself (not by a signal, as a stack overflow ends it).
fn run_policy(policy: &str) -> Captured {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_policy(tmp.path(), policy);
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(
        out.code.is_some(),
        "killed by a signal: {}",
        tail(&out.stderr)
    );
    out
}

fn tail(s: &str) -> &str {
    &s[s.len().saturating_sub(2000)..]
}

/// What the agent printed, with the very long source lines cut short.
fn both(out: &Captured) -> String {
    format!("{}{}", out.stdout, out.stderr)
}

#[test]
fn function_calls_nested_too_deeply_are_a_located_error() {
    let n = 20_000;
    let out = run_policy(&format!(
        "bundle agent main\n{{\n vars:\n  \"x\" string => {}\"a\"{};\n}}\n",
        "concat(".repeat(n),
        ")".repeat(n)
    ));
    assert_eq!(out.code, Some(1), "{}", tail(&out.stderr));
    let text = both(&out);
    // The 129th call's '(' on line 4, after `  "x" string => ` and 128 calls.
    let col = 17 + 128 * "concat(".len() + "concat".len();
    assert!(
        text.contains(&format!(
            "p.cf:4:{col}: error: nested too deeply: expected at most 128 levels of function calls and lists, found more"
        )),
        "{}",
        tail(&text)
    );
}

#[test]
fn calls_nested_up_to_the_limit_run() {
    let n = 128;
    let out = run_policy(&format!(
        "bundle agent main\n{{\n vars:\n  \"x\" string => {}\"a\"{};\n reports:\n  \"$(x)\";\n}}\n",
        "concat(".repeat(n),
        ")".repeat(n)
    ));
    assert_eq!(out.code, Some(0), "{}", tail(&both(&out)));
    assert!(out.stdout.contains("R: a"), "{}", out.stdout);
}

#[test]
fn lists_nested_too_deeply_are_one_located_error() {
    let out = run_policy(&format!(
        "bundle agent main\n{{\n vars:\n  \"x\" slist => {}\"a\"{};\n}}\n",
        "{".repeat(DEEP),
        "}".repeat(DEEP)
    ));
    assert_eq!(out.code, Some(1));
    let text = both(&out);
    // One located error, then cf-agent's closing line for a policy with
    // errors.
    assert_eq!(text.matches("error:").count(), 2, "{}", tail(&text));
    assert!(text.contains("error: There are syntax errors in policy files"));
    assert!(
        text.contains("p.cf:4:17: error: lists cannot be nested"),
        "{}",
        tail(&text)
    );
}

#[test]
fn variable_references_nested_too_deeply_are_a_located_error() {
    // 20,000 levels overflow the stack: before the limit, expansion
    // recursed per level (and took quadratic time on the way down).
    let n = 20_000;
    let out = run_policy(&format!(
        "bundle agent main\n{{\n vars:\n  \"x\" string => \"{}a{}\";\n reports:\n  \"$(x)\";\n}}\n",
        "$(".repeat(n),
        ")".repeat(n)
    ));
    assert_eq!(out.code, Some(1));
    let col = 18 + 2 * 128;
    assert!(
        both(&out).contains(&format!(
            "p.cf:4:{col}: error: variable references nested too deeply: expected at most 128 levels"
        )),
        "{}",
        tail(&both(&out))
    );
}

/// A value read at run time is expanded again when it holds references;
/// one nested too deeply stays as it is.
#[test]
fn deep_references_read_at_run_time_stay_unexpanded() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 20_000;
    let data = tmp.path().join("refs.txt");
    std::fs::write(&data, format!("{}a{}", "$(".repeat(n), ")".repeat(n))).unwrap();
    let p = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n vars:\n  \"x\" string => readfile(\"{}\", \"0\");\n reports:\n  \"$(x)\";\n  \"done\";\n}}\n",
            data.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert_eq!(out.code, Some(0), "{}", tail(&both(&out)));
    assert!(out.stdout.contains("R: done"), "{}", tail(&out.stdout));
}

#[test]
fn class_expressions_nested_too_deeply_are_located_errors() {
    let parens = |open: &str| format!("{}any{}", open.repeat(DEEP), ")".repeat(DEEP));
    // A guard and an `if`: the validator's error, with line and column.
    let out = run_policy(&format!(
        "bundle agent main\n{{\n reports:\n  {}::\n  \"hi\";\n  \"ho\" if => \"{}\";\n}}\n",
        parens("("),
        parens("!(")
    ));
    assert_eq!(out.code, Some(1));
    let text = both(&out);
    for at in ["p.cf:4:3", "p.cf:6:14"] {
        assert!(
            text.contains(&format!(
                "{at}: error: class expression nested too deeply: expected at most 128 levels of '(' and '!'"
            )),
            "{at}: {}",
            tail(&text)
        );
    }
    // An expression evaluated at run time: the promise fails, located.
    let out = run_policy(&format!(
        "bundle agent main\n{{\n classes:\n  \"c\" expression => \"{}\";\n reports:\n  \"done\";\n}}\n",
        parens("(")
    ));
    let text = both(&out);
    assert!(
        text.contains("class expression nested too deeply") && text.contains("p.cf:4)"),
        "{}",
        tail(&text)
    );
    assert!(out.stdout.contains("R: done"), "{}", tail(&text));
}

#[test]
fn mustache_sections_nested_too_deeply_are_an_error_naming_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let template = tmp.path().join("t.mustache");
    std::fs::write(
        &template,
        format!("top\n{}x{}\n", "{{#a}}".repeat(DEEP), "{{/a}}".repeat(DEEP)),
    )
    .unwrap();
    let target = tmp.path().join("out.txt");
    let p = write_policy(
        tmp.path(),
        &format!(
            r#"bundle agent main
{{
 vars:
  "d" data => '{{"a": true}}';
  "s" string => string_mustache("{{{{#a}}}}{}{{{{/a}}}}", d);
 files:
  "{}"
   create => "true",
   edit_template => "{}",
   template_method => "mustache",
   template_data => @(d);
 reports:
  "done";
}}
"#,
            "{{#a}}".repeat(DEEP),
            target.display(),
            template.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    assert!(out.code.is_some(), "{}", tail(&out.stderr));
    let text = both(&out);
    assert!(
        text.contains(&format!(
            "Error rendering mustache template '{}': line 2: sections nested too deeply: expected at most 128 levels",
            template.display()
        )),
        "{}",
        tail(&text)
    );
    assert!(
        text.contains("function 'string_mustache'")
            && text.contains("line 1: sections nested too deeply"),
        "{}",
        tail(&text)
    );
    assert!(out.stdout.contains("R: done"), "{}", tail(&text));
}

#[test]
fn a_mustache_error_names_the_template_line() {
    let tmp = tempfile::tempdir().unwrap();
    let template = tmp.path().join("t.mustache");
    std::fs::write(&template, "one\n{{#a}}\ntwo\n").unwrap();
    let target = tmp.path().join("out.txt");
    let p = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n files:\n  \"{}\"\n   create => \"true\",\n   edit_template => \"{}\",\n   template_method => \"mustache\";\n}}\n",
            target.display(),
            template.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    let text = both(&out);
    assert!(
        text.contains(&format!(
            "Error rendering mustache template '{}': line 2: section 'a' is not closed",
            template.display()
        )),
        "{text}"
    );
}

fn agent(args: &[&std::ffi::OsStr]) -> Captured {
    let tmp = tempfile::tempdir().unwrap();
    run(Command::new(agent_bin()).current_dir(tmp.path()).args(args))
}

#[test]
fn arguments_that_are_not_utf8_are_a_clear_error() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bad_file = OsStr::from_bytes(b"./\xff.cf");
    let out = agent(&[OsStr::new("-K"), OsStr::new("-f"), bad_file]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("error: argument 3 (after -f) is not valid UTF-8: './\u{fffd}.cf'"),
        "{out:?}"
    );
    let out = agent(&[OsStr::new("-D"), OsStr::from_bytes(b"\xff")]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("error: argument 2 (after -D) is not valid UTF-8"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("panicked"), "{out:?}");
}

#[test]
fn an_empty_work_directory_is_refused() {
    let out = agent(&[
        std::ffi::OsStr::new("-w"),
        std::ffi::OsStr::new(""),
        std::ffi::OsStr::new("-V"),
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(
            "error: invalid value '' for -w/--workdir: expected a directory name, found an empty one"
        ),
        "{out:?}"
    );
}

/// An invalid regular expression in an edit_line promise is named where
/// the promise is written, before the agent's own error for it (which
/// names only the pattern).
#[test]
fn an_invalid_regex_in_an_edit_line_promise_is_located() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("t.txt");
    std::fs::write(&target, "x\n").unwrap();
    let p = write_policy(
        tmp.path(),
        &format!(
            "bundle agent main\n{{\n files:\n  \"{}\"\n   edit_line => e;\n}}\nbundle edit_line e\n{{\n delete_lines:\n  \"a(b\";\n}}\n",
            target.display()
        ),
    );
    let out = agent_inform(&tmp.path().join("wd"), &p, &[]);
    let text = both(&out);
    assert!(
        text.contains("p.cf:10:3: warning: invalid regular expression 'a(b'"),
        "{text}"
    );
    // And the promise that fails at run time says where it is written.
    assert!(
        text.contains("(in a delete_lines promise at ") && text.contains("p.cf:10)"),
        "{text}"
    );
}

/// Found by the evaluation fuzz campaign (fuzz/findings/eval-expansion-slow.cf):
/// a variable whose value names itself with its bundle (`$(conf.x)`) was
/// not seen as referring to itself, so each pass expanded it again; with
/// two such references the value doubled each time and the run took
/// minutes and gigabytes. Every spelling of the variable is now refused
/// as cf-agent refuses `$(x)`.
#[test]
fn a_variable_naming_itself_with_its_bundle_refers_to_itself() {
    let out = run_policy(
        r#"bundle common conf
{
  vars:
      "l" slist => { "42", "$(conf.l)d $(conf.l)" };
      "a" string => "$(conf.b)$(conf.b)";
      "b" string => "$(default:conf.a)$(default:conf.a)";
}
bundle agent main
{
  reports:
      "done";
}
"#,
    );
    let text = both(&out);
    for v in ["l", "b"] {
        assert!(
            text.contains(&format!("variable '{v}' refers to itself")),
            "{v}: {}",
            tail(&text)
        );
    }
    assert!(text.contains("R: done"), "{}", tail(&text));
}
