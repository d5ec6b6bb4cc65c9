//! What the package ships besides the binary: the manual page and the
//! completions come from the same flag definitions as `--help`, and the
//! units run the agent as the README says. (`scripts/check-package`, run by
//! CI, builds, installs, runs and removes the package itself.)

use crate::common::{agent_bin, run};
use std::process::Command;

#[test]
fn the_manual_page_lists_every_flag_help_lists() {
    let man = run(Command::new(agent_bin()).arg("--man-page"));
    assert_eq!(man.code, Some(0), "{man:?}");
    assert!(man.stdout.contains(".TH agent 1"), "{}", man.stdout);
    assert!(
        man.stdout.contains("Exit codes"),
        "no exit codes in the page"
    );
    let help = run(Command::new(agent_bin()).arg("--help"));
    let longs: Vec<&str> = help
        .stdout
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-'))
        .map(|w| w.split(['=', '[']).next().unwrap())
        .collect();
    assert!(longs.len() > 20, "{longs:?}");
    for flag in longs {
        // roff escapes each dash.
        let escaped = flag.replace('-', "\\-");
        assert!(
            man.stdout.contains(&escaped),
            "{flag} is not in the manual page"
        );
    }
}

#[test]
fn completions_know_the_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(Command::new(agent_bin()).args(["--completions", shell]));
        assert_eq!(out.code, Some(0), "{shell}: {out:?}");
        assert!(out.stdout.contains("scheduled"), "{shell}: {}", out.stdout);
        assert!(out.stdout.contains("bundlesequence"), "{shell}");
    }
    let bad = run(Command::new(agent_bin()).args(["--completions", "cmd.exe"]));
    assert_eq!(bad.code, Some(2), "{bad:?}");
}

#[test]
fn the_units_run_the_scheduled_agent() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let service = std::fs::read_to_string(root.join("dist/systemd/convergent.service")).unwrap();
    assert!(service.contains("ExecStart=/usr/bin/agent --scheduled"));
    let timer = std::fs::read_to_string(root.join("dist/systemd/convergent.timer")).unwrap();
    assert!(timer.contains("OnCalendar=*:0/5"));
    let cron = std::fs::read_to_string(root.join("dist/cron/convergent")).unwrap();
    assert!(cron.contains("/usr/bin/agent --scheduled"));
}

/// The agent loads only the C library at start: the math library (libm)
/// is loaded when `eval` first needs it, the unwinder is linked in, and
/// libcrypt is loaded for a password check. Each library loaded at start
/// costs every run of the agent ~50 µs (see `functions::math::libm`).
#[test]
fn the_agent_starts_with_the_c_library_alone() {
    let Ok(out) = Command::new("readelf").arg("-d").arg(agent_bin()).output() else {
        eprintln!("skipped: readelf (binutils) is not installed");
        return;
    };
    let dynamic = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    if cfg!(not(feature = "bundled-sqlite")) {
        eprintln!("skipped: the system's SQLite is linked: {needed:?}");
        return;
    }
    assert!(
        needed
            .iter()
            .all(|n| n.starts_with("libc.so") || n.starts_with("ld-linux")),
        "libraries loaded at start: {needed:?}"
    );
}
