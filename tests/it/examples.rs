//! The policies in examples/ run as README says, each in a temporary work
//! directory, so that README's output cannot go stale unnoticed.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(rel)
}

fn agent(wd: &Path, args: &[&str]) -> Captured {
    let mut out = run(Command::new(agent_bin()).arg("-w").arg(wd).args(args));
    out.stdout = out.stdout.replace(&wd.display().to_string(), "WORKDIR");
    out.stdout = out
        .stdout
        .replace(env!("CARGO_MANIFEST_DIR"), "/home/me/convergent");
    out
}

#[test]
fn properties_example() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    std::fs::create_dir_all(wd.join("data")).unwrap();
    std::fs::copy(
        example("properties/workdir/data/host_specific.json"),
        wd.join("data/host_specific.json"),
    )
    .unwrap();
    let policy = example("properties/promises.cf");
    let f = policy.to_str().unwrap();
    let out = agent(&wd, &["-K", "-f", f, "-D", "role_web,frontend,dc_paris"]);
    assert_eq!(
        out.stdout,
        "R: dns: search paris.example.com, timeout 1s\nR: dns server: 10.1.0.1\n\
         R: nginx: 16 workers on port 80\nR: motd: web-17: canary host, expect changes\n",
        "{out:?}"
    );
    let out = agent(
        &wd,
        &[
            "-f",
            f,
            "-D",
            "role_web,frontend,dc_paris",
            "--explain",
            "dns",
        ],
    );
    assert!(
        out.stdout.contains(
            "  3. group 'paris' at /home/me/convergent/examples/properties/def.json:15:41, key properties.groups.paris.properties.dns\n       sets .servers = [\"10.1.0.1\"]   (overrides global: [\"10.0.0.1\",\"10.0.0.2\"])"
        ),
        "{out:?}"
    );
}

#[test]
fn transaction_example() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    let policy = example("transaction/promises.cf");
    let f = policy.to_str().unwrap();
    let out = agent(&wd, &["-K", "-f", f]);
    assert_eq!(
        out.stdout, "R: firewall: rules in place\nR: app_config: reloading with listen 8080\n",
        "{out:?}"
    );
    let out = agent(&wd, &["-K", "-f", f, "-D", "break_it"]);
    assert!(
        out.stdout.contains(
            "  notice: Rolled back (default:app_config): restored WORKDIR/example/app.conf (its content, mode 0600 and owner)"
        ),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(wd.join("example/app.conf")).unwrap(),
        "listen 8080;\n"
    );
    let why = agent(&wd, &["--why", "app_reload"]);
    assert!(
        why.stdout
            .contains("skipped: the transaction 'default:app_config' was abandoned"),
        "{why:?}"
    );
}

#[test]
fn graph_example() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("wd");
    let policy = example("graph/promises.cf");
    let f = policy.to_str().unwrap();
    let dot = agent(&wd, &["-f", f, "--graph"]);
    assert_eq!(dot.code, Some(0), "{dot:?}");
    for edge in [
        "p1 -> p2 [label=\"depends_on app_dir\"];",
        "p2 -> p4 [label=\"class app_conf_changed\", style=dashed];",
        "p5 -> b1 [label=\"usebundle\", style=bold];",
    ] {
        assert!(dot.stdout.contains(edge), "{edge}: {dot:?}");
    }
    let out = agent(&wd, &["-K", "-f", f]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let why = agent(&wd, &["--why", "install_extra"]);
    assert!(
        why.stdout.contains(
            "'WORKDIR/example/extra.conf': skipped: its class guard 'staging::' is false: class 'staging' is not defined"
        ),
        "{why:?}"
    );
}

#[test]
fn custom_promise_example() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = example("custom_promise/promises.cf");
    let f = policy.to_str().unwrap();
    // A dry run first, on a work directory of its own: it says what it
    // would do and creates nothing.
    let dry = tmp.path().join("dry");
    let out = agent(&dry, &["-KI", "-n", "-f", f]);
    let would = concat!(
        " warning: Should set 'port = 8080' in [server] of 'WORKDIR/example/app.ini', but only warning promised\n",
        " warning: Should set 'workers = 4' in [server] of 'WORKDIR/example/app.ini', but only warning promised\n",
        " warning: Should link 'WORKDIR/example/app.conf' to 'WORKDIR/example/app.ini', but only warning promised\n",
    );
    assert_eq!(out.stdout, would, "{out:?}");
    assert!(!dry.join("example").exists());
    let wd = tmp.path().join("wd");
    let first = "    info: Set 'port = 8080' in [server] of 'WORKDIR/example/app.ini'
    info: Set 'workers = 4' in [server] of 'WORKDIR/example/app.ini'
    info: Linked 'WORKDIR/example/app.conf' to 'WORKDIR/example/app.ini'
R: app.ini changed: the app would be restarted now
";
    let out = agent(&wd, &["-KI", "-f", f]);
    assert_eq!(out.stdout, first, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(wd.join("example/app.conf")).unwrap(),
        "[server]\nport = 8080\nworkers = 4\n"
    );
    let out = agent(&wd, &["-KI", "-f", f]);
    assert_eq!(out.stdout, "", "the second run changed something: {out:?}");
    // cf-agent runs the same modules the same way.
    if have("cf-agent") {
        let cf = cf_workdir(tmp.path());
        let cf_agent = |extra: &[&str]| {
            let out = run(Command::new("cf-agent")
                .args(["-KI", "-w"])
                .arg(&cf)
                .args(extra)
                .args(["-f", f]));
            out.stdout
                .lines()
                .filter(|l| !l.contains("Setting workdir"))
                .map(|l| format!("{}\n", l.replace(&cf.display().to_string(), "WORKDIR")))
                .collect::<String>()
        };
        assert_eq!(cf_agent(&["-n"]), would);
        assert_eq!(cf_agent(&[]), first);
        assert_eq!(cf_agent(&[]), "");
    } else {
        eprintln!("skipped: cf-agent not installed; checked against the recorded lines only");
    }
}
