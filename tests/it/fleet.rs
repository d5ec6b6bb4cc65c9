//! A host of a CFEngine fleet, against Debian's cf-serverd 3.21 serving
//! the stock Masterfiles Policy Framework as its `masterfiles` from a
//! private work directory on 127.0.0.1 (a spare port, killed by its pid
//! when the test ends). The host's work directory gets what bootstrapping
//! leaves (`policy_server.dat`, keys, the hub's key trusted) and the MPF's
//! update policy; then the MPF's own `update.cf` runs, by us and by
//! cf-agent 3.21 from the same hub, and their inputs must be the same,
//! file for file and mode for mode. Without cf-serverd, cf-agent or the
//! MPF the tests say "skipped".

use crate::common;
use crate::remote::{Serverd, skipped, spare_port};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const MPF: &str = "/usr/share/cfengine3/masterfiles";

/// What the update policy needs to run: `update.cf` and its inputs.
const UPDATE_FILES: &[&str] = &[
    "update.cf",
    "standalone_self_upgrade.cf",
    "controls/update_def.cf",
    "controls/update_def_inputs.cf",
    "cfe_internal/update/cfe_internal_dc_workflow.cf",
    "cfe_internal/update/cfe_internal_update_from_repository.cf",
    "cfe_internal/update/lib.cf",
    "cfe_internal/update/systemd_units.cf",
    "cfe_internal/update/update_bins.cf",
    "cfe_internal/update/update_policy.cf",
    "cfe_internal/update/update_processes.cf",
    "cfe_internal/update/windows_unattended_upgrade.cf",
];

fn mpf_skipped(what: &str) -> bool {
    if skipped(what) {
        return true;
    }
    if !Path::new(MPF).join("update.cf").is_file() || !common::have("cf-promises") {
        eprintln!("skipped: {what}: the MPF ({MPF}) or cf-promises is not installed");
        return true;
    }
    false
}

fn cmd_ok(cmd: &mut Command) -> common::Captured {
    let out = common::run(cmd);
    assert_eq!(out.code, Some(0), "{cmd:?}: {out:?}");
    out
}

/// A hub: cf-serverd on a private work directory whose `masterfiles` is
/// a copy of the MPF, stamped by cf-promises as a hub stamps it, served
/// under the `masterfiles` shortcut as the MPF's own server policy does.
pub(crate) struct Hub {
    pub(crate) workdir: PathBuf,
    pub(crate) server: Serverd,
    pub(crate) port: u16,
}

impl Hub {
    pub(crate) fn start(dir: &Path) -> Hub {
        let wd = dir.join("hub");
        std::fs::create_dir_all(&wd).unwrap();
        cmd_ok(Command::new("cf-key").env("CFENGINE_TEST_OVERRIDE_WORKDIR", &wd));
        cmd_ok(
            Command::new("cp")
                .arg("-a")
                .arg(MPF)
                .arg(wd.join("masterfiles")),
        );
        Hub::stamp(&wd);
        let port = spare_port();
        let masterfiles = wd.join("masterfiles");
        std::fs::create_dir_all(wd.join("modules")).unwrap();
        let policy = format!(
            r#"body common control {{ bundlesequence => {{ "main" }}; }}
bundle agent main {{ }}
body server control
{{
  port => "{port}";
  allowconnects => {{ "127.0.0.0/8" }};
  allowallconnects => {{ "127.0.0.0/8" }};
  trustkeysfrom => {{ "127.0.0.0/8" }};
  allowusers => {{ "root" }};
}}
bundle server access_rules
{{
  access:
    "{m}/"
      shortcut => "masterfiles",
      admit_ips => {{ "127.0.0.0/8" }};
    "{modules}/"
      shortcut => "modules",
      admit_ips => {{ "127.0.0.0/8" }};
}}
"#,
            m = masterfiles.display(),
            modules = wd.join("modules").display()
        );
        let server = Serverd::start_policy(&wd, &policy, port);
        Hub {
            workdir: wd,
            server,
            port,
        }
    }

    /// A new `cf_promises_validated` in masterfiles, as the hub writes
    /// one when it validated a new policy.
    fn stamp(wd: &Path) {
        cmd_ok(
            Command::new("cf-promises")
                .env("CFENGINE_TEST_OVERRIDE_WORKDIR", wd)
                .arg("-T")
                .arg(wd.join("masterfiles")),
        );
    }

    pub(crate) fn masterfiles(&self) -> PathBuf {
        self.workdir.join("masterfiles")
    }

    pub(crate) fn public_key(&self) -> PathBuf {
        self.workdir.join("ppkeys/localhost.pub")
    }
}

/// A host's work directory as bootstrapping leaves it, with the MPF's
/// update policy in its inputs.
fn host_workdir(dir: &Path, name: &str, hub: &Hub) -> PathBuf {
    let wd = dir.join(name);
    std::fs::create_dir_all(wd.join("bin")).unwrap();
    std::os::unix::fs::symlink(
        common::which("cf-promises").unwrap_or_else(|| PathBuf::from("/usr/bin/cf-promises")),
        wd.join("bin/cf-promises"),
    )
    .unwrap();
    cmd_ok(Command::new("cf-key").env("CFENGINE_TEST_OVERRIDE_WORKDIR", &wd));
    let trust = format!("127.0.0.1:{}", hub.public_key().display());
    cmd_ok(
        Command::new("cf-key")
            .env("CFENGINE_TEST_OVERRIDE_WORKDIR", &wd)
            .args(["-t", &trust]),
    );
    std::fs::write(
        wd.join("policy_server.dat"),
        format!("127.0.0.1:{}\n", hub.port),
    )
    .unwrap();
    for f in UPDATE_FILES {
        let to = wd.join("inputs").join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(Path::new(MPF).join(f), &to).unwrap();
    }
    wd
}

/// Every entry under `dir`: its kind and mode, and a file's bytes.
fn tree(dir: &Path) -> BTreeMap<String, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let m = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let mode = m.permissions().mode() & 0o7777;
            if m.is_dir() {
                out.insert(rel, ("dir".into(), mode, Vec::new()));
                stack.push(path);
            } else if m.is_symlink() {
                let t = std::fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    ("link".into(), 0, t.display().to_string().into_bytes()),
                );
            } else {
                out.insert(rel, ("file".into(), mode, std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn update(wd: &Path) -> common::Captured {
    common::agent_inform(wd, &wd.join("inputs/update.cf"), &[])
}

/// Copy lines in an agent's output: what it fetched or made.
fn copies(out: &common::Captured) -> Vec<&str> {
    out.stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.contains("Copied file") || l.contains("Updated"))
        .collect()
}

#[test]
fn the_stock_mpf_updates_a_host_from_a_real_cf_serverd() {
    if mpf_skipped("the_stock_mpf_updates_a_host_from_a_real_cf_serverd") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start(tmp.path());
    let ours = host_workdir(tmp.path(), "ours", &hub);

    let first = update(&ours);
    let all = format!(
        "{}{}\nserver:\n{}",
        first.stdout,
        first.stderr,
        hub.server.log_text()
    );
    assert_eq!(first.code, Some(0), "{all}");
    assert!(!first.stdout.contains("error:"), "{all}");
    assert!(!first.stderr.contains("error:"), "{all}");
    let got = tree(&ours.join("inputs"));
    assert!(got.contains_key("promises.cf"), "{all}");
    assert!(got.contains_key("cf_promises_validated"), "{all}");
    // Every file the host got is the hub's, byte for byte.
    for (rel, (kind, _, bytes)) in &got {
        if kind == "file" {
            let theirs = std::fs::read(hub.masterfiles().join(rel))
                .unwrap_or_else(|e| panic!("{rel} is not the hub's: {e}"));
            assert!(&theirs == bytes, "{rel} differs from the hub's");
        }
    }

    // cf-agent 3.21 from the same hub gets the same inputs, mode for mode.
    if common::have("cf-agent") {
        let theirs = host_workdir(tmp.path(), "theirs", &hub);
        let policy = theirs.join("inputs/update.cf");
        let check = common::run(
            Command::new("cf-promises")
                .env("CFENGINE_TEST_OVERRIDE_WORKDIR", &theirs)
                .arg("-c")
                .arg(&policy),
        );
        assert_eq!(check.code, Some(0), "{check:?}");
        let run = common::run(
            Command::new("cf-agent")
                .env("CFENGINE_TEST_OVERRIDE_WORKDIR", &theirs)
                .arg("-K")
                .arg("-f")
                .arg(&policy),
        );
        assert_eq!(run.code, Some(0), "{run:?}");
        let want = tree(&theirs.join("inputs"));
        let names = |t: &BTreeMap<String, (String, u32, Vec<u8>)>| {
            t.iter()
                .map(|(k, (kind, mode, _))| format!("{kind} {mode:o} {k}"))
                .collect::<Vec<_>>()
        };
        similar_asserts_eq(&names(&want), &names(&got));
    }

    // A second run copies nothing.
    let second = update(&ours);
    assert_eq!(second.code, Some(0), "{second:?}");
    assert!(copies(&second).is_empty(), "{second:?}");
    assert_eq!(tree(&ours.join("inputs")), got);

    // A new policy on the hub, with a new stamp, arrives on the next run.
    let main_cf = hub.masterfiles().join("services/main.cf");
    let mut text = std::fs::read_to_string(&main_cf).unwrap();
    text.push_str("\n# a change pushed to the fleet\n");
    std::fs::write(&main_cf, &text).unwrap();
    // Without a new stamp the host does not look.
    let quiet = update(&ours);
    assert!(copies(&quiet).is_empty(), "{quiet:?}");
    Hub::stamp(&hub.workdir);
    let third = update(&ours);
    assert_eq!(third.code, Some(0), "{third:?}");
    assert_eq!(
        std::fs::read_to_string(ours.join("inputs/services/main.cf")).unwrap(),
        text,
        "{third:?}"
    );
    assert_eq!(
        std::fs::read(ours.join("inputs/cf_promises_validated")).unwrap(),
        std::fs::read(hub.masterfiles().join("cf_promises_validated")).unwrap()
    );
}

/// Two listings compared line by line, the first difference shown.
fn similar_asserts_eq(want: &[String], got: &[String]) {
    if want != got {
        let only_want: Vec<_> = want.iter().filter(|w| !got.contains(w)).collect();
        let only_got: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
        panic!(
            "cf-agent's inputs and ours differ:\nonly cf-agent's: {only_want:#?}\nonly ours: {only_got:#?}"
        );
    }
}

/// A work directory with nothing but this host's key pair.
fn bare_workdir(dir: &Path, name: &str) -> PathBuf {
    let wd = dir.join(name);
    std::fs::create_dir_all(&wd).unwrap();
    cmd_ok(Command::new("cf-key").env("CFENGINE_TEST_OVERRIDE_WORKDIR", &wd));
    wd
}

fn agent(wd: &Path, args: &[&str]) -> common::Captured {
    common::run(
        Command::new(common::agent_bin())
            .args(["-K", "-I", "-w"])
            .arg(wd)
            .args(args)
            .stdin(std::process::Stdio::null()),
    )
}

fn same_file(a: &Path, b: &Path) -> bool {
    std::fs::read(a).ok().is_some() && std::fs::read(a).ok() == std::fs::read(b).ok()
}

#[test]
fn bootstrap_makes_a_client_of_the_hub() {
    if mpf_skipped("bootstrap_makes_a_client_of_the_hub") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start(tmp.path());
    // 127.0.0.2 reaches this host without being one of its interface
    // addresses: a client's bootstrap, not a hub's.
    let address = format!("127.0.0.2:{}", hub.port);

    // Refusing to trust a key never seen leaves the host as it was.
    let wd = bare_workdir(tmp.path(), "client");
    let refused = agent(&wd, &["-B", &address, "--trust-server=no"]);
    let all = format!("{refused:?}\nserver:\n{}", hub.server.log_text());
    assert_eq!(refused.code, Some(1), "{all}");
    assert!(refused.stdout.contains("Bootstrapping failed"), "{all}");
    assert!(!wd.join("policy_server.dat").exists(), "{all}");
    assert!(!wd.join("inputs/failsafe.cf").exists(), "{all}");

    // So does a hub that does not answer.
    let nobody = agent(&wd, &["-B", &format!("127.0.0.2:{}", spare_port())]);
    assert_eq!(nobody.code, Some(1), "{nobody:?}");
    assert!(!wd.join("policy_server.dat").exists(), "{nobody:?}");

    let boot = agent(&wd, &["-B", &address]);
    let all = format!("{boot:?}\nserver:\n{}", hub.server.log_text());
    assert_eq!(boot.code, Some(0), "{all}");
    assert!(
        boot.stdout.contains("Assuming role as regular client"),
        "{all}"
    );
    assert!(boot.stdout.contains("completed successfully"), "{all}");
    assert!(!boot.stdout.contains("error:"), "{all}");
    assert_eq!(
        std::fs::read_to_string(wd.join("policy_server.dat")).unwrap(),
        format!("{address}\n")
    );
    assert!(!wd.join("state/am_policy_hub").exists());
    // The hub's key is trusted, as cf-key names a trusted key.
    let digest = common::run(
        Command::new("cf-key")
            .env("CFENGINE_TEST_OVERRIDE_WORKDIR", &hub.workdir)
            .arg("-p")
            .arg(hub.public_key()),
    );
    let digest = digest.stdout.trim().to_string();
    assert!(
        wd.join(format!("ppkeys/root-{digest}.pub")).exists(),
        "{digest}: {all}"
    );
    // The hub's policy is the host's, with the failsafe policy beside it.
    for f in [
        "promises.cf",
        "update.cf",
        "lib/stdlib.cf",
        "cf_promises_validated",
    ] {
        assert!(
            same_file(&wd.join("inputs").join(f), &hub.masterfiles().join(f)),
            "{f}: {all}"
        );
    }
    assert!(wd.join("inputs/failsafe.cf").is_file());
    // What the bootstrap left names the hub as cf-promises 3.21 reads it.
    let vars = same_table(&wd, "--show-vars=sys\\.policy_hub");
    assert!(vars.contains("127.0.0.2"), "{vars}");
    assert!(vars.contains(&hub.port.to_string()), "{vars}");
    let classes = same_table(&wd, "--show-classes=^(am_policy_hub|policy_server)$");
    assert!(!classes.contains("policy_server"), "{classes}");

    // Then the MPF's own update runs against the hub it was given.
    let update = agent(&wd, &["-f", "update.cf"]);
    assert_eq!(update.code, Some(0), "{update:?}");
    assert!(!update.stdout.contains("error:"), "{update:?}");
}

#[test]
fn bootstrap_to_an_own_address_takes_the_hub_role() {
    if mpf_skipped("bootstrap_to_an_own_address_takes_the_hub_role") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wd = bare_workdir(tmp.path(), "hub");
    cmd_ok(
        Command::new("cp")
            .arg("-a")
            .arg(MPF)
            .arg(wd.join("masterfiles")),
    );
    let boot = agent(&wd, &["--bootstrap", "127.0.0.1"]);
    assert_eq!(boot.code, Some(0), "{boot:?}");
    assert!(
        boot.stdout.contains("Assuming role as policy server"),
        "{boot:?}"
    );
    assert!(wd.join("state/am_policy_hub").exists());
    assert_eq!(
        std::fs::read_to_string(wd.join("policy_server.dat")).unwrap(),
        "127.0.0.1\n"
    );
    let mut inputs = tree(&wd.join("inputs"));
    inputs.remove("failsafe.cf");
    let masterfiles = tree(&wd.join("masterfiles"));
    let names = |t: &BTreeMap<String, (String, u32, Vec<u8>)>| {
        t.iter()
            .map(|(k, (kind, _, bytes))| (k.clone(), kind.clone(), bytes.clone()))
            .collect::<Vec<_>>()
    };
    assert!(
        names(&inputs) == names(&masterfiles),
        "inputs are not masterfiles"
    );
    let classes = same_table(&wd, "--show-classes=^(am_policy_hub|policy_server)$");
    assert!(classes.contains("am_policy_hub"), "{classes}");
    assert!(classes.contains("policy_server"), "{classes}");
}

/// A table of `flag` for the work directory's update policy, the same
/// from us and from cf-promises 3.21: the rows only.
fn same_table(wd: &Path, flag: &str) -> String {
    let policy = wd.join("inputs/update.cf");
    let ours = common::run(
        Command::new(common::agent_bin())
            .arg("-w")
            .arg(wd)
            .arg("-f")
            .arg(&policy)
            .arg(flag),
    );
    assert_eq!(ours.code, Some(0), "{ours:?}");
    let rows = |out: &str| {
        out.lines()
            .skip(1)
            .map(|l| l.trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mine = rows(&ours.stdout);
    let theirs = common::run(
        Command::new("cf-promises")
            .env("CFENGINE_TEST_OVERRIDE_WORKDIR", wd)
            .arg("-f")
            .arg(&policy)
            .arg(flag),
    );
    assert_eq!(theirs.code, Some(0), "{theirs:?}");
    assert_eq!(mine, rows(&theirs.stdout), "{flag}");
    mine
}

#[test]
fn a_bad_push_falls_back_to_the_failsafe_policy_and_is_repaired() {
    if mpf_skipped("a_bad_push_falls_back_to_the_failsafe_policy_and_is_repaired") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start(tmp.path());
    let wd = bare_workdir(tmp.path(), "client");
    let boot = agent(&wd, &["-B", &format!("127.0.0.2:{}", hub.port)]);
    assert_eq!(boot.code, Some(0), "{boot:?}");
    let promises = wd.join("inputs/promises.cf");
    let theirs = hub.masterfiles().join("promises.cf");

    // promises.cf that does not pass the check: the failsafe policy runs
    // and fetches the hub's again.
    let mut text = std::fs::read_to_string(&promises).unwrap();
    text.push_str("\nbundle agent broken {\n");
    std::fs::write(&promises, &text).unwrap();
    let run = agent(&wd, &[]);
    assert!(run.stdout.contains("going to failsafe"), "{run:?}");
    assert!(run.stdout.contains("The failsafe policy runs"), "{run:?}");
    assert!(same_file(&promises, &theirs), "{run:?}");

    // promises.cf gone, and failsafe.cf with it: written again, run.
    std::fs::remove_file(&promises).unwrap();
    std::fs::remove_file(wd.join("inputs/failsafe.cf")).unwrap();
    let run = agent(&wd, &[]);
    assert!(run.stdout.contains("going to failsafe"), "{run:?}");
    assert!(wd.join("inputs/failsafe.cf").is_file(), "{run:?}");
    assert!(same_file(&promises, &theirs), "{run:?}");

    // A policy outside the inputs directory does not fall back.
    let elsewhere = tmp.path().join("elsewhere.cf");
    std::fs::write(&elsewhere, "bundle agent main {\n").unwrap();
    let run = agent(&wd, &["-f", elsewhere.to_str().unwrap()]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(!run.stdout.contains("failsafe"), "{run:?}");
}

/// Stand-ins for CFEngine's daemons in `WORKDIR/bin`: each notes in
/// `WORKDIR/started` that it was started, and exits.
fn fake_daemons(wd: &Path) {
    for d in ["cf-execd", "cf-serverd", "cf-monitord"] {
        let p = wd.join("bin").join(d);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho {d} >> '{}'\n",
                wd.join("started").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn started(wd: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(wd.join("started"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    let _ = std::fs::remove_file(wd.join("started"));
    v.sort();
    v
}

#[test]
fn the_mpf_keeps_cfengines_daemons_unless_augments_switch_it_off() {
    if mpf_skipped("the_mpf_keeps_cfengines_daemons_unless_augments_switch_it_off") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start(tmp.path());
    let ours = host_workdir(tmp.path(), "ours", &hub);
    let theirs = host_workdir(tmp.path(), "theirs", &hub);
    let cf_agent = common::have("cf-agent");
    let cf_update = |wd: &Path| {
        let run = common::run(
            Command::new("cf-agent")
                .env("CFENGINE_TEST_OVERRIDE_WORKDIR", wd)
                .arg("-K")
                .arg("-f")
                .arg(wd.join("inputs/update.cf")),
        );
        assert_eq!(run.code, Some(0), "{run:?}");
    };
    for wd in [&ours, &theirs] {
        fake_daemons(wd);
    }
    let all = vec!["cf-execd", "cf-monitord", "cf-serverd"];
    // The MPF starts the daemons installed beside the agent (on a host
    // without systemd), as it does under cf-agent.
    let first = update(&ours);
    assert_eq!(first.code, Some(0), "{first:?}");
    assert_eq!(started(&ours), all, "{first:?}");
    if cf_agent {
        cf_update(&theirs);
        assert_eq!(started(&theirs), all);
    }

    // The MPF's augments classes, pushed from the hub, switch that off.
    std::fs::write(
        hub.masterfiles().join("def.json"),
        r#"{ "classes": { "persistent_disable_cf_execd": [ "any" ],
               "persistent_disable_cf_serverd": [ "any" ],
               "persistent_disable_cf_monitord": [ "any" ] } }
"#,
    )
    .unwrap();
    Hub::stamp(&hub.workdir);
    let fetch = update(&ours);
    assert_eq!(fetch.code, Some(0), "{fetch:?}");
    assert!(ours.join("inputs/def.json").is_file(), "{fetch:?}");
    started(&ours);
    let quiet = update(&ours);
    assert_eq!(quiet.code, Some(0), "{quiet:?}");
    assert!(!quiet.stdout.contains("error:"), "{quiet:?}");
    assert_eq!(started(&ours), Vec::<String>::new(), "{quiet:?}");
    if cf_agent {
        cf_update(&theirs);
        started(&theirs);
        cf_update(&theirs);
        assert_eq!(started(&theirs), Vec::<String>::new());
    }
}
