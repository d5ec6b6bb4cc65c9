//! The fuzzer's sandbox (`pipeline::Sandbox`, issue 15): a policy run there
//! runs no program, whichever way it asks (functions, `commands`, custom
//! promise modules, `usemodule`), and its work is bounded by the budget.
//! The evaluation fuzz target is only as safe as these tests say.

use convergent::pipeline::Sandbox;
use convergent::report::MemorySink;
use convergent::report::Outcome;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// A shell script that creates `marker` when it runs.
fn toucher(path: &Path, marker: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n: > '{}'\n", marker.display())).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn sandbox_runs_no_program() {
    let dir = tempfile::tempdir().unwrap();
    let marks = dir.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let sandbox = Sandbox::new(&dir.path().join("sandbox")).unwrap();
    let m = marks.display();
    toucher(
        &dir.path().join("sandbox/work/modules/touchit"),
        &marks.join("usemodule"),
    );
    toucher(&dir.path().join("module.sh"), &marks.join("custom"));
    let touch = ["/usr/bin/touch", "/bin/touch"]
        .into_iter()
        .find(|t| Path::new(t).exists())
        .expect("touch is installed");
    let policy = format!(
        r#"
promise agent touching
{{
  interpreter => "/bin/sh";
  path => "{module}";
}}

bundle agent main
{{
  vars:
      "ok" string => canonify("ok");
      "a" string => execresult("{touch} {m}/execresult", "noshell");
      "b" data => execresult_as_data("{touch} {m}/execresult_as_data", "noshell");
      "c" string => execresult("{touch} {m}/useshell", "useshell");
      "p" data => mapdata("json_pipe", "{touch} {m}/json_pipe", '{{"a": 1}}');
      "h" string => host2ip("localhost");

  classes:
      "r" expression => returnszero("{touch} {m}/returnszero", "noshell");
      "u" expression => usemodule("touchit", "");

  commands:
      "{touch} {m}/commands";

  touching:
      "x" attr => "y";

  files:
      "/etc/$(ok)" create => "true";
      "/etc/$(a)" create => "true";
      "/etc/$(h)" create => "true";
}}
"#,
        module = dir.path().join("module.sh").display(),
    );
    let mut sink = MemorySink::default();
    let summary = sandbox
        .run(policy, Duration::from_secs(10), &mut sink)
        .expect("the policy runs");
    let ran: Vec<_> = std::fs::read_dir(&marks)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(ran.is_empty(), "programs ran in the sandbox: {ran:?}");
    let promisers: Vec<(&str, &str, Outcome)> = sink
        .events
        .iter()
        .map(|e| (&*e.promise_type, e.promiser.as_str(), e.outcome))
        .collect();
    // The run went on around what it refused: the files promise whose
    // variable came from a function that is allowed acted (as a dry run).
    assert!(promisers.iter().any(|p| p.1 == "/etc/ok"), "{promisers:?}");
    assert!(
        !promisers.iter().any(|p| p.0 == "files" && p.1 != "/etc/ok"),
        "a refused function gave a value: {promisers:?}"
    );
    for ptype in ["commands", "touching"] {
        assert!(
            promisers
                .iter()
                .any(|p| p.0 == ptype && p.2 == Outcome::Failed),
            "{ptype} was not refused: {promisers:?}\n{summary:?}"
        );
    }
    // Nothing was written below the root either: a dry run.
    assert!(!sandbox.root().join("etc/ok").exists());
}

#[test]
fn sandbox_refuses_functions_that_run_programs_or_reach_the_network() {
    use convergent::functions::{lookup, refused_in_sandbox};
    for name in [
        "execresult",
        "execresult_as_data",
        "returnszero",
        "usemodule",
        "readtcp",
        "url_get",
        "host2ip",
        "ip2host",
        "hostinnetgroup",
        "hostsseen",
        "remotescalar",
        "remoteclassesmatching",
        "hubknowledge",
        "hostswithclass",
        "selectservers",
    ] {
        let spec = lookup(name).unwrap_or_else(|| panic!("{name} is not a function"));
        assert!(refused_in_sandbox(spec), "{name} is allowed in the sandbox");
    }
    // peers and the leaders read a host list, a file like any other.
    for name in [
        "canonify",
        "readfile",
        "findfiles",
        "regcmp",
        "getenv",
        "peers",
        "peerleaders",
    ] {
        assert!(!refused_in_sandbox(lookup(name).unwrap()), "{name}");
    }
    use convergent::agent::refused_in_sandbox as refused_type;
    for t in [
        "commands",
        "packages",
        "services",
        "users",
        "processes",
        "storage",
        "my_custom_type",
    ] {
        assert!(refused_type(t), "{t} is allowed in the sandbox");
    }
    for t in ["files", "reports", "methods", "vars", "classes"] {
        assert!(!refused_type(t), "{t}");
    }
}

#[test]
fn sandbox_bounds_a_run_by_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    // A billion combinations: unbounded, this would run for hours.
    let policy = r#"
bundle agent main
{
  vars:
      "l" slist => expandrange("[1-1000]", 1);
      "m" slist => { @(l) };
      "n" slist => { @(l) };
  files:
      "/tmp/$(l)/$(m)/$(n)" create => "true";
}
"#;
    let start = Instant::now();
    let _ = sandbox.run(
        policy.to_string(),
        Duration::from_millis(100),
        &mut MemorySink::default(),
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "a 100 ms budget took {:?}",
        start.elapsed()
    );
}

/// Functions reach files through the run's host (issue 19, item 4): on a
/// rooted host, `fileexists`, `readfile`, `findfiles`, `lsdir` and
/// `filestat` see the tree below the root, not the real system's files.
#[test]
fn sandbox_functions_see_the_rooted_tree() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    let etc = sandbox.root().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("convergent-probe.txt"), "rooted\n").unwrap();
    assert!(
        !Path::new("/etc/convergent-probe.txt").exists(),
        "the real system has the probe file"
    );
    let policy = r#"
bundle agent main
{
  vars:
      "content" string => readfile("/etc/convergent-probe.txt", 100);
      "found" string => canonify(join(",", findfiles("/etc/*.txt")));
      "listed" string => canonify(join(",", lsdir("/etc", "convergent.*", "true")));
      "size" string => filestat("/etc/convergent-probe.txt", "size");

  classes:
      "probe_seen" expression => fileexists("/etc/convergent-probe.txt");
      "passwd_seen" expression => fileexists("/etc/passwd");
      "passwd_read" expression => regline("root:.*", "/etc/passwd");

  files:
    probe_seen::
      "/out/exists" create => "true";
    passwd_seen::
      "/out/passwd-exists" create => "true";
    passwd_read::
      "/out/passwd-read" create => "true";
    any::
      "/out/content-$(content)" create => "true";
      "/out/found-$(found)" create => "true";
      "/out/listed-$(listed)" create => "true";
      "/out/size-$(size)" create => "true";
}
"#;
    let mut sink = MemorySink::default();
    sandbox
        .run(policy.to_string(), Duration::from_secs(10), &mut sink)
        .expect("the policy runs");
    let promisers: Vec<&str> = sink.events.iter().map(|e| e.promiser.as_str()).collect();
    for want in [
        "/out/exists",
        "/out/content-rooted",
        "/out/found-_etc_convergent_probe_txt",
        "/out/listed-_etc_convergent_probe_txt",
        "/out/size-7",
    ] {
        assert!(promisers.contains(&want), "{want} missing: {promisers:?}");
    }
    for unwanted in ["/out/passwd-exists", "/out/passwd-read"] {
        assert!(
            !promisers.contains(&unwanted),
            "the real /etc/passwd was seen: {promisers:?}"
        );
    }
}
