//! Every option that `cf-agent --help` and `cf-promises --help` of 3.21
//! list is accepted by our binary called by that name, with the same
//! observable effect: each option has a scenario below, run once with the
//! real binary and once with ours (a link named like it), and a look at
//! the result (a report printed, a file written, an exit code) that must
//! agree. The options are read from the real `--help`, so an option the
//! table misses fails the test.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A policy every scenario can use: a report, a variable, a class and a
/// second bundle.
const POLICY: &str = r#"
bundle agent main
{
  vars:
      "v" string => "x";
  classes:
      "my_class" expression => "any";
  reports:
      "hello $(v)";
      "workdir $(sys.workdir)";
    d_defined::
      "D is on";
}
bundle agent other
{
  reports:
      "in other";
}
"#;

/// A policy that creates a file (a change, for -n, -I and --simulate).
const CREATE: &str = r#"
bundle agent main
{
  files:
      "$(this.promise_dirname)/created"
        create => "true";
}
"#;

/// A policy that changes files every way the simulate modes report: a
/// file made, one edited, one deleted, one renamed, one kept.
const SIMULATE: &str = r#"
bundle agent main
{
  files:
      "$(this.promise_dirname)/created"
        create => "true";
      "$(this.promise_dirname)/edited"
        edit_line => add("new line");
      "$(this.promise_dirname)/gone"
        delete => rm;
      "$(this.promise_dirname)/renamed"
        rename => to("renamed-to");
      "$(this.promise_dirname)/kept"
        create => "true";
}
bundle edit_line add(l) { insert_lines: "$(l)"; }
body delete rm { dirlinks => "delete"; rmdirs => "true"; }
body rename to(n) { newname => "$(n)"; }
"#;
const SIMULATE_FILES: &[(&str, &str)] = &[
    ("p.cf", SIMULATE),
    ("edited", "old line\n"),
    ("gone", "x"),
    ("renamed", "r"),
    ("kept", ""),
];

/// What a simulated run printed, its paths, process id and times made
/// alike, and what became of the real files (nothing).
fn simulated(out: &Captured, side: &Side) -> String {
    let pid = regex::Regex::new(r"[0-9]+\.changes").unwrap();
    let text = format!("{}{}", out.stdout, out.stderr)
        .replace(&*side.workdir.display().to_string(), "WORKDIR")
        .replace(&*side.dir.display().to_string(), "DIR");
    let text: Vec<String> = text
        .lines()
        // cf-agent 3.21 fails to give its own modules directory an owner
        // in the chroot, an error of its own.
        .filter(|l| !l.contains("'WORKDIR/modules/.'"))
        .map(|l| {
            if l.starts_with("Modify: ") || l.starts_with("Change: ") || l.starts_with("Access: 2")
            {
                l.split(':').next().unwrap_or("").to_string()
            } else {
                pid.replace_all(l, "PID.changes").into_owned()
            }
        })
        .collect();
    let real: Vec<String> = ["created", "edited", "gone", "renamed", "renamed-to", "kept"]
        .iter()
        .map(|f| format!("{f}: {:?}", std::fs::read_to_string(side.dir.join(f)).ok()))
        .collect();
    format!(
        "{}\n--- the real files\n{}\nexit {:?}",
        text.join("\n"),
        real.join("\n"),
        out.code
    )
}

/// A policy with an unresolved body reference: cf-promises' full check
/// refuses it.
const BAD_BODY: &str = r#"
body common control { bundlesequence => { "main" }; }
bundle agent main
{
  files:
      "/tmp/x" perms => no_such_body;
}
"#;

/// Augments for `--ignore-preferred-augments`.
const DEF: &str = r#"{ "vars": { "which": "plain" } }"#;
const DEF_PREFERRED: &str = r#"{ "vars": { "which": "preferred" } }"#;
const WHICH: &str = r#"
bundle agent main
{
  reports:
      "which $(def.which)";
}
"#;

/// One side of a scenario: the program (real or ours) and its own
/// directories.
struct Side {
    program: PathBuf,
    dir: PathBuf,
    workdir: PathBuf,
}

impl Side {
    /// A fresh directory with the policy `p.cf` (and `text` extras), a
    /// work directory with `bin/cf-promises`, and the program.
    fn new(root: &Path, name: &str, tool: &str, ours: bool) -> Side {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("work/bin")).unwrap();
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let (agent, promises) = if ours {
            for t in ["cf-agent", "cf-promises"] {
                std::os::unix::fs::symlink(agent_bin(), bin.join(t)).unwrap();
            }
            (bin.join("cf-agent"), bin.join("cf-promises"))
        } else {
            (which("cf-agent").unwrap(), which("cf-promises").unwrap())
        };
        std::os::unix::fs::symlink(&promises, dir.join("work/bin/cf-promises")).unwrap();
        // cf-agent's --simulate=diff runs the diff of its bin directory.
        if let Some(diff) = which("diff") {
            std::os::unix::fs::symlink(diff, dir.join("work/bin/diff")).unwrap();
        }
        let program = if tool == "cf-agent" { agent } else { promises };
        Side {
            program,
            workdir: dir.join("work"),
            dir,
        }
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.join(name), text).unwrap();
    }

    /// Runs the program in its directory with `args` (`{w}` is the work
    /// directory, `{d}` the directory), and `-w` first unless the
    /// scenario gives its own.
    fn run(&self, args: &[&str]) -> Captured {
        let w = self.workdir.display().to_string();
        let d = self.dir.display().to_string();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{w}", &w).replace("{d}", &d))
            .collect();
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(&self.dir)
            .env_remove("CFENGINE_TEST_OVERRIDE_WORKDIR");
        if !args.iter().any(|a| a == "-w") {
            cmd.arg("-w").arg(&self.workdir);
        }
        run(cmd.args(&args))
    }
}

/// What one scenario compares: a text made from the run and the
/// directory (the lines that matter, files found, the exit code).
type Look = fn(&Captured, &Side) -> String;

struct Scenario {
    option: &'static str,
    tool: &'static str,
    files: &'static [(&'static str, &'static str)],
    /// Runs before the one looked at (same directory), for state.
    before: &'static [&'static str],
    args: &'static [&'static str],
    look: Look,
}

fn reports(out: &Captured, side: &Side) -> String {
    let w = side.workdir.display().to_string();
    let mut lines: Vec<String> = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.starts_with("R: "))
        .map(|l| l.replace(&w, "WORKDIR"))
        .collect();
    lines.sort();
    format!("{}\nexit {:?}", lines.join("\n"), out.code.map(|c| c == 0))
}

fn exit_ok(out: &Captured, _: &Side) -> String {
    format!("exit ok: {}", out.code == Some(0))
}

fn has(out: &Captured, needle: &str) -> bool {
    out.stdout.contains(needle) || out.stderr.contains(needle)
}

fn created(out: &Captured, side: &Side) -> String {
    format!(
        "created: {}, exit ok: {}",
        side.dir.join("created").exists(),
        out.code == Some(0)
    )
}

/// A bootstrap in a work directory without a key pair: both agents stop
/// before any connection (cf-agent's failsafe policy aborts at once; no
/// daemon is started), say why, and leave no policy server behind.
fn bootstrapped(out: &Captured, side: &Side) -> String {
    format!(
        "exit ok: {}, names the missing key pair: {}, policy server kept: {}",
        out.code == Some(0),
        has(out, "key pair"),
        side.workdir.join("policy_server.dat").exists()
    )
}

/// `-V`: a version line naming 3.21, no policy run.
fn versioned(out: &Captured, _: &Side) -> String {
    format!(
        "names 3.21: {}, ran the policy: {}, exit ok: {}",
        out.stdout
            .lines()
            .next()
            .is_some_and(|l| l.contains("3.21")),
        has(out, "R: "),
        out.code == Some(0)
    )
}

fn scenarios() -> Vec<Scenario> {
    let p: &'static [(&str, &str)] = &[("p.cf", POLICY)];
    let c: &'static [(&str, &str)] = &[("p.cf", CREATE)];
    let aug: &'static [(&str, &str)] = &[
        ("p.cf", WHICH),
        ("def.json", DEF),
        ("def_preferred.json", DEF_PREFERRED),
    ];
    let s = |option, tool, files, args, look| Scenario {
        option,
        tool,
        files,
        before: &[],
        args,
        look,
    };
    vec![
        // cf-agent
        s(
            "bundlesequence",
            "cf-agent",
            p,
            &["-K", "-f", "./p.cf", "-b", "other"],
            reports,
        ),
        s(
            "workdir",
            "cf-agent",
            p,
            &["-K", "-w", "{w}", "-f", "./p.cf"],
            reports,
        ),
        s(
            "debug",
            "cf-agent",
            p,
            &["-K", "-d", "-f", "./p.cf"],
            |o, _| format!("debug lines: {}", has(o, "debug:")),
        ),
        s(
            "define",
            "cf-agent",
            p,
            &["-K", "-D", "d_defined", "-f", "./p.cf"],
            reports,
        ),
        s("self-diagnostics", "cf-agent", p, &["-x"], |o, s| {
            let w = s.workdir.display().to_string();
            format!(
                "names the workdir: {}, bootstrapped: {}",
                has(
                    o,
                    &format!("self-diagnostics for agent using workdir '{w}'")
                ),
                has(o, "Check that agent is bootstrapped: Not bootstrapped")
            )
        }),
        s(
            "dry-run",
            "cf-agent",
            c,
            &["-K", "-n", "-f", "./p.cf"],
            created,
        ),
        s("file", "cf-agent", p, &["-K", "-f", "./p.cf"], reports),
        s("help", "cf-agent", p, &["--help"], |o, _| {
            format!("{} {}", has(o, "--file"), o.code == Some(0))
        }),
        s(
            "inform",
            "cf-agent",
            c,
            &["-K", "-I", "-f", "./p.cf"],
            |o, s| format!("{} info: {}", created(o, s), has(o, "info: ")),
        ),
        s(
            "log-level",
            "cf-agent",
            p,
            &["-K", "-g", "verbose", "-f", "./p.cf"],
            |o, _| format!("verbose lines: {}", has(o, "verbose: ")),
        ),
        s(
            "negate",
            "cf-agent",
            p,
            &["-K", "-N", "my_class", "-f", "./p.cf"],
            reports,
        ),
        Scenario {
            option: "no-lock",
            tool: "cf-agent",
            files: &[("p.cf", "bundle agent main { commands: \"/bin/echo ran\"; }")],
            before: &["-K", "-f", "./p.cf"],
            args: &["-f", "./p.cf"],
            // Without -K the second run finds the lock: nothing runs.
            look: |o, _| format!("ran again: {}", has(o, "ran")),
        },
        s(
            "verbose",
            "cf-agent",
            p,
            &["-K", "-v", "-f", "./p.cf"],
            |o, _| format!("verbose lines: {}", has(o, "verbose: ")),
        ),
        s("version", "cf-agent", p, &["-V", "-f", "./p.cf"], versioned),
        s(
            "bootstrap",
            "cf-agent",
            p,
            &["-B", "192.0.2.1:5999"],
            bootstrapped,
        ),
        s(
            "trust-server",
            "cf-agent",
            p,
            &["-B", "192.0.2.1:5999", "--trust-server=no"],
            bootstrapped,
        ),
        s(
            "skip-bootstrap-policy-run",
            "cf-agent",
            p,
            &["-B", "192.0.2.1:5999", "--skip-bootstrap-policy-run"],
            bootstrapped,
        ),
        s(
            "timing-output",
            "cf-agent",
            p,
            &["-K", "-v", "-t", "-f", "./p.cf"],
            |o, _| {
                format!(
                    "timing lines: {}",
                    o.stdout.lines().any(|l| l.contains("verbose: T: "))
                )
            },
        ),
        s(
            "color",
            "cf-agent",
            c,
            &["-K", "-I", "--color=always", "-f", "./p.cf"],
            |o, _| format!("escapes: {}", has(o, "\u{1b}[")),
        ),
        s(
            "no-extensions",
            "cf-agent",
            p,
            &["-K", "-E", "-f", "./p.cf"],
            reports,
        ),
        s(
            "timestamp",
            "cf-agent",
            c,
            &["-K", "-I", "-l", "-f", "./p.cf"],
            |o, _| {
                let stamped = o.stdout.lines().any(|l| {
                    l.contains("info:")
                        && l.len() > 20
                        && l.as_bytes()[4] == b'-'
                        && l.as_bytes()[10] == b'T'
                });
                format!("stamped: {stamped}")
            },
        ),
        s(
            "ignore-preferred-augments",
            "cf-agent",
            aug,
            &["-K", "--ignore-preferred-augments", "-f", "./p.cf"],
            reports,
        ),
        s(
            "log-modules",
            "cf-agent",
            p,
            &["--log-modules=help"],
            |o, _| format!("{} {}", has(o, "evalctx"), o.code == Some(0)),
        ),
        s(
            "show-evaluated-classes",
            "cf-agent",
            p,
            &["-K", "--show-evaluated-classes=^my_class$", "-f", "./p.cf"],
            |o, _| format!("{}", o.stdout.lines().any(|l| l.starts_with("my_class "))),
        ),
        s(
            "show-evaluated-vars",
            "cf-agent",
            p,
            &["-K", "--show-evaluated-vars=main.v$", "-f", "./p.cf"],
            |o, _| {
                format!(
                    "{}",
                    o.stdout.lines().any(|l| l.starts_with("default:main.v "))
                )
            },
        ),
        s(
            "skip-db-check",
            "cf-agent",
            p,
            &["-K", "--skip-db-check", "-f", "./p.cf"],
            reports,
        ),
        s(
            "simulate",
            "cf-agent",
            SIMULATE_FILES,
            &["-K", "--simulate=diff", "-f", "./p.cf"],
            simulated,
        ),
        s(
            "simulate",
            "cf-agent",
            SIMULATE_FILES,
            &["-K", "--simulate=manifest", "-f", "./p.cf"],
            simulated,
        ),
        s(
            "simulate",
            "cf-agent",
            SIMULATE_FILES,
            &["-K", "--simulate=manifest-full", "-f", "./p.cf"],
            simulated,
        ),
        // cf-promises
        s(
            "workdir",
            "cf-promises",
            p,
            &["-w", "{w}", "--show-vars=sys.workdir$", "-f", "./p.cf"],
            |o, s| format!("{}", o.stdout.contains(&*s.workdir.display().to_string())),
        ),
        s(
            "eval-functions",
            "cf-promises",
            &[(
                "p.cf",
                "bundle agent main { vars: \"y\" string => concat(\"a\", \"b\"); }",
            )],
            &["--eval-functions=no", "--show-vars=main.y$", "-f", "./p.cf"],
            |o, _| format!("y shown: {}", o.stdout.contains("default:main.y")),
        ),
        s(
            "show-classes",
            "cf-promises",
            p,
            &["--show-classes=^my_class$", "-f", "./p.cf"],
            |o, _| format!("{}", o.stdout.lines().any(|l| l.starts_with("my_class "))),
        ),
        s(
            "show-vars",
            "cf-promises",
            p,
            &["--show-vars=main.v$", "-f", "./p.cf"],
            |o, _| {
                format!(
                    "{}",
                    o.stdout.lines().any(|l| l.starts_with("default:main.v "))
                )
            },
        ),
        s("help", "cf-promises", p, &["--help"], |o, _| {
            format!("{} {}", has(o, "--full-check"), o.code == Some(0))
        }),
        s(
            "bundlesequence",
            "cf-promises",
            p,
            &["-b", "no_such_bundle", "-f", "./p.cf"],
            exit_ok,
        ),
        s(
            "debug",
            "cf-promises",
            p,
            &["-d", "-f", "./p.cf"],
            |o, _| format!("debug lines: {}", has(o, "debug:")),
        ),
        s(
            "verbose",
            "cf-promises",
            p,
            &["-v", "-f", "./p.cf"],
            |o, _| format!("verbose lines: {}", has(o, "verbose: ")),
        ),
        s(
            "log-level",
            "cf-promises",
            p,
            &["-g", "verbose", "-f", "./p.cf"],
            |o, _| format!("verbose lines: {}", has(o, "verbose: ")),
        ),
        s(
            "dry-run",
            "cf-promises",
            p,
            &["-n", "-f", "./p.cf"],
            exit_ok,
        ),
        s("version", "cf-promises", p, &["-V"], versioned),
        s(
            "file",
            "cf-promises",
            &[("p.cf", BAD_BODY)],
            &["-c", "-f", "./p.cf"],
            exit_ok,
        ),
        s(
            "define",
            "cf-promises",
            p,
            &["-D", "from_d", "--show-classes=^from_d$", "-f", "./p.cf"],
            |o, _| format!("{}", o.stdout.lines().any(|l| l.starts_with("from_d "))),
        ),
        s(
            "negate",
            "cf-promises",
            p,
            &[
                "-N",
                "my_class",
                "--show-classes=^my_class$",
                "-f",
                "./p.cf",
            ],
            // The class negated is not defined (without -N it is listed).
            |o, _| {
                format!(
                    "my_class listed: {}, exit ok: {}",
                    o.stdout.lines().any(|l| l.starts_with("my_class ")),
                    o.code == Some(0)
                )
            },
        ),
        s("inform", "cf-promises", p, &["-I", "-f", "./p.cf"], exit_ok),
        s("diagnostic", "cf-promises", p, &["-x"], |o, _| {
            format!("{} {}", has(o, "retired"), o.code == Some(0))
        }),
        s(
            "policy-output-format",
            "cf-promises",
            p,
            &["-p", "json", "-f", "./p.cf"],
            |o, _| {
                let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or_default();
                format!("bundles: {}", j["bundles"].as_array().map_or(0, Vec::len))
            },
        ),
        s(
            "syntax-description",
            "cf-promises",
            p,
            &["-s", "json"],
            |o, _| {
                let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or_default();
                let keys = |k: &str| {
                    j[k].as_object()
                        .map(|m| m.keys().cloned().collect::<Vec<_>>().join(","))
                        .unwrap_or_default()
                };
                format!(
                    "bundle types {}\nfunctions {}",
                    keys("bundleTypes"),
                    j["functions"].as_object().map_or(0, |m| m.len())
                )
            },
        ),
        s(
            "full-check",
            "cf-promises",
            &[("p.cf", BAD_BODY)],
            &["--full-check", "-f", "./p.cf"],
            exit_ok,
        ),
        s(
            "warn",
            "cf-promises",
            p,
            &["-W", "no_such_warning", "-f", "./p.cf"],
            exit_ok,
        ),
        s(
            "color",
            "cf-promises",
            &[("p.cf", BAD_BODY)],
            &["-c", "--color=always", "-f", "./p.cf"],
            |o, _| format!("escapes: {}", has(o, "\u{1b}[")),
        ),
        s(
            "tag-release",
            "cf-promises",
            &[("t/promises.cf", POLICY)],
            &["-T", "{d}/t"],
            |o, s| {
                let id = std::fs::read_to_string(s.dir.join("t/cf_promises_release_id"))
                    .unwrap_or_default();
                let validated = std::fs::read_to_string(s.dir.join("t/cf_promises_validated"))
                    .unwrap_or_default();
                let v: serde_json::Value = serde_json::from_str(&validated).unwrap_or_default();
                format!(
                    "{id}\nvalidated has a timestamp: {}\nexit ok: {}",
                    v["timestamp"].is_u64(),
                    o.code == Some(0)
                )
            },
        ),
        s(
            "timestamp",
            "cf-promises",
            p,
            &["-l", "-v", "-f", "./p.cf"],
            |o, _| {
                let stamped = o.stdout.lines().chain(o.stderr.lines()).any(|l| {
                    l.contains("verbose:")
                        && l.len() > 20
                        && l.as_bytes()[4] == b'-'
                        && l.as_bytes()[10] == b'T'
                });
                format!("stamped: {stamped}")
            },
        ),
        s(
            "ignore-preferred-augments",
            "cf-promises",
            aug,
            &[
                "--ignore-preferred-augments",
                "--show-vars=def.which$",
                "-f",
                "./p.cf",
            ],
            |o, _| format!("plain: {}", o.stdout.contains("plain")),
        ),
        s(
            "log-modules",
            "cf-promises",
            p,
            &["--log-modules=help"],
            |o, _| format!("{} {}", has(o, "evalctx"), o.code == Some(0)),
        ),
    ]
}

/// The long options a `--help` lists (`  --name  , -x value - ...`).
fn help_options(tool: &Path) -> Vec<String> {
    let out = run(Command::new(tool).arg("--help"));
    out.stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split([' ', ',']).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_option_of_the_real_help_has_the_same_effect() {
    let (Some(agent), Some(promises)) = (which("cf-agent"), which("cf-promises")) else {
        println!("skipped: CFEngine is not installed, nothing to compare the options with");
        return;
    };
    let all = scenarios();
    let mut missing = Vec::new();
    for (tool, path) in [("cf-agent", &agent), ("cf-promises", &promises)] {
        for option in help_options(path) {
            if !all.iter().any(|s| s.tool == tool && s.option == option) {
                missing.push(format!("{tool} --{option}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "options without a scenario: {missing:?}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    for (i, sc) in all.iter().enumerate() {
        let mut looks = Vec::new();
        for ours in [false, true] {
            let name = format!("{i}-{}", if ours { "ours" } else { "theirs" });
            let side = Side::new(tmp.path(), &name, sc.tool, ours);
            for (f, text) in sc.files {
                if let Some(parent) = Path::new(f).parent() {
                    std::fs::create_dir_all(side.dir.join(parent)).unwrap();
                }
                side.write(f, text);
            }
            if !sc.before.is_empty() {
                side.run(sc.before);
            }
            let out = side.run(sc.args);
            looks.push(((sc.look)(&out, &side), out));
        }
        if looks[0].0 != looks[1].0 {
            problems.push(format!(
                "{} --{} {:?}\n--- cfengine\n{}\n--- ours\n{}\n--- our output\n{}{}",
                sc.tool,
                sc.option,
                sc.args,
                looks[0].0,
                looks[1].0,
                looks[1].1.stdout,
                looks[1].1.stderr
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
