//! Issue 24, class 8: functions given missing, empty or invalid input,
//! compared with cf-promises 3.21 ("skipped" without it). For each case
//! both print `--show-vars` of a bundle holding that one call: the rows
//! must be the same, and so must whether an `error:` line is printed at
//! all (the wording is ours, and cf-promises repeats it in each pass).

use crate::common::*;
use std::process::Command;

/// One vars promise each; `quiet` says whether cf-promises is silent.
const CASES: [(&str, bool); 53] = [
    // A CSV or env file that cannot be opened: no word.
    (r#""a" data => readcsv("/nonexistent/x.csv", 100);"#, true),
    (r#""a" data => readenvfile("/nonexistent/x.env");"#, true),
    (
        r#""a" data => readdata("/nonexistent/x.csv", "auto");"#,
        true,
    ),
    (r#""a" data => readdata("/nonexistent/x", "ENV");"#, true),
    // One that opens but cannot be read is an error.
    (r#""a" data => readcsv("/tmp", 100);"#, false),
    // JSON and YAML say so when the file is missing.
    (
        r#""a" data => readjson("/nonexistent/x.json", 100);"#,
        false,
    ),
    (
        r#""a" data => readdata("/nonexistent/x.json", "auto");"#,
        false,
    ),
    // An empty string has no last node: undefined, without a word.
    (r#""a" string => lastnode("", "/");"#, true),
    (r#""a" string => lastnode("a/b", "/");"#, true),
    // A separator matching nothing cuts empty pieces off the front and
    // leaves the rest whole: {"", "", "abc"}.
    (r#""a" slist => string_split("abc", "", "3");"#, true),
    (r#""a" slist => string_split("", "", "3");"#, true),
    (r#""a" slist => string_split("a,b", ",*", "5");"#, true),
    // No host seen (cf-agent's lastseen database holds none here): fails
    // without a word. CFEngine's examples/hostsseen.cf.
    (r#""a" slist => hostsseen("24", "lastseen", "name");"#, true),
    // cf-promises never talks to the network, and says nothing of it.
    // CFEngine's examples/readtcp.cf.
    (
        r#""a" string => readtcp("127.0.0.1", "1", "GET /", 20);"#,
        true,
    ),
    // The name of a plain string where a list or container is wanted (and
    // no classic array beside it): fails without a word. The acceptance
    // suite's mergedata.cf, mapdata.cf, maparray.cf, findfiles_up.cf.
    (r#""s" string => "x"; "a" data => mergedata("s");"#, true),
    // A string inside a data container is an error there (the suite's
    // CFE-2704-0.cf).
    (
        r#""d" data => '{"k": "v"}'; "a" data => mergedata("[]", "d[k]");"#,
        false,
    ),
    (
        r#""s" string => "x"; "a" slist => maplist("$(this)", "s");"#,
        true,
    ),
    (
        r#""s" string => "x"; "a" slist => filter("x", "s", "false", "false", 9);"#,
        true,
    ), // A file countlinesmatching cannot read counts 0 lines, with an error
    // (the suite's countlinesmatching_returns_0_on_inaccessable_file.cf).
    (
        r#""a" int => countlinesmatching("x", "/nonexistent/x");"#,
        false,
    ), // nth of a key a container lacks, or of one holding a container: no
    // word (the suite's wrap_container_fncalls.cf).
    (r#""a" string => nth('{"x": 1}', "y");"#, true),
    (r#""a" string => nth('{"x": [1]}', "x");"#, true),
    // Inline JSON that does not parse is read as the name of a variable,
    // which none has: the call fails without a word.
    (r#""a" data => data_expand('{"a": 1');"#, true),
    (r#""a" data => mergedata('[1,');"#, true),
    // A mustache section over a string fails the call with a warning, an
    // inverted one too, and one inside a section that does not show; a
    // closing tag that closes nothing is a warning; a named container in
    // a variable tag fails without a word.
    (
        r#""a" string => string_mustache("{{^t}}{{#s}}x{{/s}}{{/t}}", '{"t": true, "s": "v"}');"#,
        true,
    ),
    (r#""a" string => string_mustache("[{{/x}}]", '{}');"#, true),
    (
        r#""a" string => string_mustache("[{{o}}]", '{"o": {"k": 1}}');"#,
        true,
    ),
    // An inverted section over an empty list shows even inside a section
    // that does not.
    (
        r#""a" string => string_mustache("[{{#f}}{{^e}}in{{/e}}{{/f}}]", '{"f": false, "e": []}');"#,
        true,
    ),
    // A class expression ifelse cannot read is an error, and not defined:
    // the call goes on to the next pair.
    (r#""a" string => ifelse("any linux", "yes", "no");"#, false),
    (r#""a" string => ifelse("any |", "yes", "no");"#, false),
    // A literal argument the template refuses is only checked when the
    // call is made: beside a reference that never resolves, never.
    (r#""a" data => readdata("$(nope)", "bogus");"#, true),
    (r#""a" string => readfile("$(nope)", "abc");"#, true),
    // A real read from text still naming a variable is an error in each
    // pass that meets it, even when the variable comes later; an integer
    // waits without a word.
    (r#""a" real => "$(nope)";"#, false),
    (r#""a" real => "$(x)"; "x" string => "1.5";"#, false),
    (r#""a" int => "$(nope)";"#, true),
    // int() reads as C's scanner does (`inf`, `nan`, hexadecimal), and
    // what does not fit a long is the smallest one, as the C cast gives.
    (r#""a" int => int("inf");"#, true),
    (r#""a" int => int("99999999999999999999");"#, true),
    (r#""a" int => int("0x10");"#, true),
    // A pattern that does not compile: regextract is false and
    // data_regextract fails, without a word; splitstring says so and
    // gives the string whole; string_split says so and fails.
    (r#""a" string => regextract("(", "abc", "b");"#, true),
    (r#""a" data => data_regextract("(", "abc");"#, true),
    (r#""a" slist => splitstring("a,b,c", "(", 10);"#, false),
    (r#""a" slist => string_split("a,b", "(", 10);"#, false),
    // string_split with no piece allowed fails without a word.
    (r#""a" slist => string_split("a,b", ",", 0);"#, true),
    // mergedata of nothing is an error.
    (r#""a" data => mergedata();"#, false),
    (r#""a" int => int("nan");"#, true),
    // A strftime format that gives no text fails without a word.
    (r#""a" string => strftime("gmtime", "", 0);"#, true),
    // YAML text whose document is a scalar is an error, as JSON's is.
    (r#""a" data => parseyaml("x");"#, false),
    (r#""a" data => parseyaml("42");"#, false),
    // readcsv's byte limit keeps whole records (with their CRLF) within
    // it, and none when the first goes beyond; a bare newline ends none.
    // Made, a class function gives a string variable its class.
    (r#""a" string => isgreaterthan("2", "1");"#, true),
    (r#""a" data => readcsv("$TMP/crlf.csv", 4);"#, true),
    (r#""a" data => readcsv("$TMP/crlf.csv", 7);"#, true),
    (r#""a" data => readcsv("$TMP/lf.csv", 1000);"#, true),
    // A comment pattern that does not compile is an error, and the file is
    // read with nothing removed.
    (
        r#""a" slist => readstringlist("$TMP/lf.csv", "[", "\n", 10, 100);"#,
        false,
    ),
    (
        r#""a" int => readstringarray("arr", "$TMP/lf.csv", "[", ",", 10, 100);"#,
        false,
    ),
];

fn observe(program: &str, policy: &std::path::Path) -> (Vec<String>, bool) {
    let r = run(Command::new(program)
        .arg("--show-vars=default:main\\.")
        .arg("-f")
        .arg(policy));
    let all = format!("{}{}", r.stdout, r.stderr);
    let rows = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("default:main."))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    (rows, all.contains("error:"))
}

#[test]
fn function_failures_are_as_loud_as_in_cf_promises() {
    if !have("cf-promises") {
        println!("skipped: cf-promises not installed");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    // Files the cases read, as `$TMP/NAME`.
    std::fs::write(tmp.path().join("crlf.csv"), "a,b\r\nc,d").expect("write");
    std::fs::write(tmp.path().join("lf.csv"), "a,b\nc,d\n").expect("write");
    let dir = tmp.path().to_str().expect("utf-8 path");
    let mut problems = Vec::new();
    for (case, quiet) in CASES {
        let case = case.replace("$TMP", dir);
        let policy = write_policy(
            tmp.path(),
            &format!("bundle agent main\n{{\n  vars:\n      {case}\n}}\n"),
        );
        let theirs = observe("cf-promises", &policy);
        let ours = observe(agent_bin().to_str().expect("utf-8 path"), &policy);
        assert_eq!(
            theirs.1, !quiet,
            "{case}: cf-promises is not as this test says"
        );
        if ours != theirs {
            problems.push(format!("{case}\n  ours:   {ours:?}\n  theirs: {theirs:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `ifelse` with an even number of arguments: cf-promises 3.21 stops with
/// a fatal error ("even number of arguments") and exits 1; ours refuses the
/// policy in its check, so the agent does not run it either. The real
/// cf-agent is not run on it, as cf-promises rejects it.
#[test]
fn ifelse_with_an_even_argument_count_is_rejected_as_by_cf_promises() {
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  vars:\n      \"x\" string => ifelse(\"any\", \"a\");\n  reports:\n      \"x=$(x)\";\n}\n",
        "odd number of arguments",
        "R: x=",
        "even number of arguments",
    );
}

/// A call whose arguments do not fit once the list a nested call returns
/// is spread (`canonify(reverse(list))`, the acceptance suite's
/// wrap_invalid_container_fncalls.x.cf) stops cf-promises ("Bad
/// arguments", exit 1) in any bundle, called or not; ours refuses the
/// policy as a whole, in its check and in a run. The real cf-agent is not
/// run on it, as cf-promises rejects it.
#[test]
fn bad_arguments_in_a_bundle_nobody_calls_refuse_the_policy() {
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  reports:\n      \"ran\";\n}\n\
         bundle agent other\n{\n  vars:\n      \"l\" slist => { \"a\", \"b\" };\n      \"c\" string => canonify(reverse(l));\n}\n",
        "canonify",
        "R: ran",
        "Bad arguments",
    );
}

/// A literal argument the function's template refuses (a word that is not
/// one of an option's, a word where an integer goes, a relative path where
/// an absolute one goes) stops cf-promises 3.21 when it makes the call
/// ("Fatal CFEngine error: In function 'hash', error in variable 'bogus',
/// 'Selection is out of bounds'"), in any bundle, once the call's other
/// arguments resolve; ours refuses the policy too, in its check and in a
/// run. The real cf-agent is not run on it, as cf-promises rejects it.
#[test]
fn a_literal_argument_the_template_refuses_stops_the_policy() {
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  vars:\n      \"a\" string => hash(\"x\", \"bogus\");\n  reports:\n      \"ran\";\n}\n",
        "'bogus' is not one of the allowed values",
        "R: ran",
        "Selection is out of bounds",
    );
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  reports:\n      \"ran\";\n}\n\
         bundle agent other\n{\n  vars:\n      \"x\" string => \"/etc/hostname\";\n      \"a\" string => readfile(\"$(x)\", \"abc\");\n}\n",
        "the function's template refuses the argument 'abc'",
        "R: ran",
        "Cannot parse value as integer",
    );
    // A field of an integer array that is no integer stops it too
    // ("Could not convert token to int").
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  vars:\n      \"a\" int => parseintarray(\"arr\", \"a=1\", \"#\", \"=\", 10, 100);\n  reports:\n      \"ran\";\n}\n",
        "'a' is not an integer",
        "R: ran",
        "Could not convert token to int",
    );
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  vars:\n      \"a\" string => readfile(\"relative\", 10);\n  reports:\n      \"ran\";\n}\n",
        "'relative' is not an absolute path",
        "R: ran",
        "Filename is not an absolute path",
    );
}

/// A class function given to a string variable passes the parser, but
/// when the call is not made (an argument still waits, even for a
/// variable defined further down, or the call fails) cf-promises 3.21
/// stops: "variable declared type 'string' but function 'fileexists'
/// returns type 'context'". Made, it is the class's value. The real
/// cf-agent is not run on it, as cf-promises rejects it.
#[test]
fn a_class_function_not_called_for_a_string_variable_stops_the_policy() {
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  vars:\n      \"a\" string => fileexists(\"$(nope)\");\n  reports:\n      \"ran\";\n}\n",
        "function 'fileexists' returns context",
        "R: ran",
        "returns type 'context'",
    );
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  vars:\n      \"a\" string => isgreaterthan(\"$(x)\", \"1\");\n      \"x\" string => \"5\";\n  reports:\n      \"ran\";\n}\n",
        "function 'isgreaterthan' returns context",
        "R: ran",
        "returns type 'context'",
    );
    refused_by_check_run_and_cf_promises(
        "bundle agent main\n{\n  vars:\n      \"a\" string => every(\".*\", \"nope\");\n  reports:\n      \"ran\";\n}\n",
        "function 'every' returns context",
        "R: ran",
        "returns type 'context'",
    );
}

/// `policy` is refused by our check (exit 1, `ours_says` on stderr) and by
/// a run (exit 1, no `report`), as cf-promises refuses it (exit 1, saying
/// `theirs_says`); the real cf-agent is not run on what cf-promises rejects.
fn refused_by_check_run_and_cf_promises(
    policy: &str,
    ours_says: &str,
    report: &str,
    theirs_says: &str,
) {
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = write_policy(tmp.path(), policy);
    let ours = run(Command::new(agent_bin()).arg("-c").arg("-f").arg(&policy));
    assert_eq!(ours.code, Some(1), "{ours:?}");
    assert!(ours.stderr.contains(ours_says), "{ours:?}");
    let work = tmp.path().join("work");
    let ran = run(Command::new(agent_bin())
        .arg("-K")
        .arg("-w")
        .arg(&work)
        .arg("-f")
        .arg(&policy));
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(!ran.stdout.contains(report), "{ran:?}");
    if !have("cf-promises") {
        println!("skipped: cf-promises not installed");
        return;
    }
    let theirs = run(Command::new("cf-promises").arg("-f").arg(&policy));
    assert_eq!(theirs.code, Some(1), "{theirs:?}");
    assert!(
        format!("{}{}", theirs.stdout, theirs.stderr).contains(theirs_says),
        "{theirs:?}"
    );
}
