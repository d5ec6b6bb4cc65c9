//! Parser throughput (not a test): `cargo bench --bench parse [-- FILE...]`.
//!
//! Parses, in release mode,
//! - every `.cf` file of the Masterfiles Policy Framework when it is
//!   installed (/var/lib/cfengine3/masterfiles),
//! - a ~5 MB synthetic policy shaped like the `parse-big` workload of the
//!   performance harness (many agent bundles with meta, vars, classes,
//!   files with bodies, commands, methods, reports and comments),
//! - any files named on the command line (e.g. gen.py's parse-big policy),
//!
//! and prints the median time and MB/s of each. With cf-promises on PATH it
//! also times `cf-promises -f` once on the synthetic policy for a ratio;
//! cf-promises also validates and pre-evaluates, so the ratio says how much
//! of its time a parse like ours would be, not that the two do equal work.

use convergent::syntax::lexer::lex;
use convergent::syntax::parse;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const MPF: &str = "/var/lib/cfengine3/masterfiles";
const TARGET_BYTES: usize = 5 * 1024 * 1024;

fn main() {
    // `cargo bench` passes `--bench`; `--no-cf-promises` skips the ratio;
    // anything else is a policy file.
    let skip_cf = std::env::args().any(|a| a == "--no-cf-promises");
    let extra: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();

    let mut mpf = Vec::new();
    collect_cf(Path::new(MPF), &mut mpf);
    mpf.sort();
    if mpf.is_empty() {
        println!("skipped: no MPF in {MPF}");
    } else {
        let texts: Vec<(String, String)> = mpf
            .iter()
            .map(|p| (p.display().to_string(), read(p)))
            .collect();
        bench(&format!("MPF ({} files)", texts.len()), &texts);
    }

    let synthetic = synthetic_policy(TARGET_BYTES);
    let synthetic_set = vec![("synthetic.cf".to_string(), synthetic.clone())];
    let ours = bench("synthetic parse-big", &synthetic_set);
    lex_only("synthetic parse-big, lexer alone", &synthetic);

    for p in &extra {
        bench(
            &p.display().to_string(),
            &[(p.display().to_string(), read(p))],
        );
    }

    if skip_cf {
        return;
    }
    if let Some(theirs) = time_cf_promises(&synthetic) {
        println!(
            "cf-promises -f on the synthetic policy: {:.3} s once; ours {:.4} s: {:.0}x faster",
            theirs.as_secs_f64(),
            ours.as_secs_f64(),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    } else {
        println!("skipped: cf-promises not installed (no ratio)");
    }
}

fn read(p: &Path) -> String {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

fn collect_cf(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_cf(&p, out);
        } else if p.extension().is_some_and(|x| x == "cf") {
            out.push(p);
        }
    }
}

/// Parses every text, repeatedly for about two seconds (at least 5 and at
/// most 200 rounds); prints and returns the median round.
fn bench(label: &str, texts: &[(String, String)]) -> Duration {
    let bytes: usize = texts.iter().map(|(_, t)| t.len()).sum();
    let mut errors = 0;
    for (path, text) in texts {
        errors += parse(path, text)
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .count();
    }
    let mut rounds = Vec::new();
    let start = Instant::now();
    while rounds.len() < 5 || (start.elapsed() < Duration::from_secs(2) && rounds.len() < 200) {
        // Dropping the trees is not part of parsing; keep it out of the time.
        let mut trees = Vec::with_capacity(texts.len());
        let t = Instant::now();
        for (path, text) in texts {
            trees.push(std::hint::black_box(parse(path, text)));
        }
        rounds.push(t.elapsed());
        drop(trees);
    }
    rounds.sort();
    let median = rounds[rounds.len() / 2];
    let mb = bytes as f64 / 1e6;
    println!(
        "{label}: {mb:.2} MB, {} rounds, median {:.4} s (min {:.4} s), {:.0} MB/s{}",
        rounds.len(),
        median.as_secs_f64(),
        rounds[0].as_secs_f64(),
        mb / median.as_secs_f64(),
        if errors > 0 {
            format!(" ({errors} errors in the input!)")
        } else {
            String::new()
        }
    );
    median
}

/// The lexer's share of the time.
fn lex_only(label: &str, text: &str) {
    let mut rounds: Vec<Duration> = (0..20)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(lex(text));
            t.elapsed()
        })
        .collect();
    rounds.sort();
    let median = rounds[rounds.len() / 2];
    println!(
        "{label}: median {:.4} s, {:.0} MB/s",
        median.as_secs_f64(),
        text.len() as f64 / 1e6 / median.as_secs_f64()
    );
}

fn time_cf_promises(policy: &str) -> Option<Duration> {
    let ok = Command::new("cf-promises")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        return None;
    }
    let dir = tempfile::tempdir().ok()?;
    let file = dir.path().join("synthetic.cf");
    std::fs::write(&file, policy).ok()?;
    let workdir = dir.path().join("wd");
    std::fs::create_dir_all(&workdir).ok()?;
    let t = Instant::now();
    let out = Command::new("cf-promises")
        .arg("-w")
        .arg(&workdir)
        .arg("-f")
        .arg(&file)
        .output()
        .ok()?;
    let elapsed = t.elapsed();
    if !out.status.success() {
        println!(
            "cf-promises rejected the synthetic policy:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(elapsed)
}

/// A deterministic, valid policy of at least `target` bytes: shared bodies
/// and helper bundles, then service bundles with every common section.
fn synthetic_policy(target: usize) -> String {
    let mut out = String::with_capacity(target + 4096);
    out.push_str(
        r#"# Synthetic parse benchmark: many service bundles, one trivial main.
body common control
{
      bundlesequence => { "main" };
      version => "parse-bench";
}

body perms mog(mode, user, group)
{
      mode => "$(mode)";
      owners => { "$(user)" };
      groups => { "$(group)" };
      rxdirs => "false";
}

body classes results(scope, prefix)
{
      scope => "$(scope)";
      promise_kept => { "$(prefix)_kept", "$(prefix)_reached" };
      promise_repaired => { "$(prefix)_repaired", "$(prefix)_reached" };
      repair_failed => { "$(prefix)_failed", "$(prefix)_error" };
}

body contain silent
{
      no_output => "true";
      useshell => "noshell";
}

body depth_search recurse(d)
{
      depth => "$(d)";
      xdev => "true";
}

body delete tidy
{
      dirlinks => "delete";
      rmdirs => "true";
}

body file_select days_old(days)
{
      mtime => irange(0, ago(0, 0, "$(days)", 0, 0, 0));
      file_result => "mtime";
}

bundle edit_line set_kv(v)
{
  vars:
      "k" slist => getindices("$(v)");
  delete_lines:
      "$(k)\s*=.*"
        comment => "drop the stale definition of $(k)";
  insert_lines:
      "$(k) = $($(v)[$(k)])";
}

bundle agent helper(arg)
{
  reports:
    never_defined::
      "helper called with $(arg)";
}

bundle agent main
{
  reports:
      "main ran";
}
"#,
    );
    // A small linear congruential generator keeps the text deterministic.
    let mut seed: u64 = 5;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut i = 0;
    while out.len() < target {
        let ports: Vec<String> = (0..2 + next(4))
            .map(|_| format!("\"{}\"", 1000 + next(60000)))
            .collect();
        let peers: Vec<String> = (0..3)
            .map(|_| format!("\"10.0.{}.{}\"", next(256), next(256)))
            .collect();
        let doc = format!(
            r#"{{"name": "svc{i:05}", "limits": {{"nofile": {}}}, "peers": [{}]}}"#,
            1024 + next(64512),
            peers.join(", ")
        );
        out.push_str(&format!(
            r#"
# ---------------------------------------------------------------------
# Service {i:05}: generated for the parse benchmark. Comments like this
# one are part of a realistic mix, as are long strings and lists.
bundle agent svc_{i:05}(param)
{{
  meta:
      "tags" slist => {{ "bench", "svc", "group_{g}" }};

  vars:
      "pkg" string => "package-{i:05}";
      "conf" string => "/etc/svc{i:05}/svc{i:05}.conf";
      "ports" slist => {{ {ports} }};
      "settings" data => '{doc}';
      "kv[listen]" string => "0.0.0.0:{port}";
      "kv[workers]" string => "{w}";
      "motd" string => concat("Service ", "$(pkg)", " managed, param=", "$(param)");

  classes:
      "svc_{i:05}_enabled" expression => "(linux|solaris).!windows";
      "svc_{i:05}_debug" or => {{ "debug_mode", "svc_{i:05}_verbose" }};
      "svc_{i:05}_big" and => {{ "svc_{i:05}_enabled", "!small_host" }};

  files:
    svc_{i:05}_enabled::
      "$(conf)"
        create => "true",
        perms => mog("0644", "root", "root"),
        edit_line => set_kv("$(this.bundle).kv"),
        classes => results("bundle", "svc_{i:05}_conf"),
        comment => "Keep the configuration of service {i:05} converged";

      "/var/log/svc{i:05}/."
        delete => tidy,
        file_select => days_old("{days}"),
        depth_search => recurse("inf"),
        if => "svc_{i:05}_big";

  commands:
    svc_{i:05}_conf_repaired::
      "/bin/systemctl restart svc{i:05}.service"
        contain => silent,
        handle => "svc_{i:05}_restart";

  methods:
    svc_{i:05}_debug::
      "helper_{i:05}" usebundle => helper("$(param)");

  reports:
    svc_{i:05}_debug::
      "Service $(pkg) listens on $(kv[listen]) ports $(ports) -- $(motd)";
}}
"#,
            g = i % 17,
            ports = ports.join(", "),
            port = 8000 + i % 1000,
            w = 1 + i % 16,
            days = 1 + i % 30,
        ));
        i += 1;
    }
    out
}
