//! Differential tests of everything `--show-vars` and `--show-classes`
//! show: each policy in tests/functions/ (pure functions),
//! tests/functions_b/ (files, system, time, introspection, versions,
//! network, module protocol) and tests/differential/ (the evaluation core:
//! values, namespaces and scopes, expansion and iteration, classes,
//! pre-evaluation) is pre-evaluated by `agent` and by `cf-promises` with
//! `--show-vars` and `--show-classes`, each with a private work directory,
//! against one fixture tree this test builds in a temporary directory. The
//! rows must be the same. The reference's rows are recorded beside each
//! policy (`.expected`) for machines without CFEngine (`UPDATE_EXPECTED=1`
//! rewrites them from the reference).
//!
//! The policy names the fixture as `$(fixture.dir)` and its own directory
//! (where its data files are) as `$(fixture.cases)`: the test prepends a
//! `fixture` common bundle to a copy of the policy, and writes the
//! fixture's path as `$FX` and the temporary directory that holds the
//! copy as `$TMP` in what it compares.
//!
//! Header keys, each on its own `# key: value` line:
//! - `vars: REGEX`: the variables compared (default: those of the bundles
//!   `test` and `fn_*`, `^default:(test\.|fn_)`)
//! - `classes: REGEX`: the classes compared (default `^t_`)
//! - `volatile: NAME SHAPE -- reason`: the value of row NAME differs
//!   between runs or machines; both sides must fully match the regex
//!   SHAPE, and the value is then masked (may repeat)
//! - `unordered: NAME -- reason`: a list whose order is a hash order;
//!   its items are sorted on both sides (may repeat)
//! - `module: FILE`: modules/FILE beside the policy is installed as a
//!   module in both work directories (may repeat)
//! - `package: installed|updates NAME,VERSION,ARCH,METHOD`: a line of the
//!   package inventory caches of both work directories (may repeat)
//! - `tcp-server: yes`: a loopback TCP server answers `echo:` and what it
//!   was sent; its port is `$(fixture.port)`
//! - `files: DIR`: the files of DIR beside the policy (inputs, `def.json`)
//!   are copied beside the copy of the policy, so that relative inputs and
//!   augments are found as cf-promises finds them

use crate::common::*;
use std::fs::FileTimes;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn write(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("create fixture dir");
    }
    std::fs::write(path, text).expect("write fixture file");
}

fn set_times(path: &Path, accessed: u64, modified: u64) {
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open fixture file");
    f.set_times(
        FileTimes::new()
            .set_accessed(at(accessed))
            .set_modified(at(modified)),
    )
    .expect("set fixture times");
}

/// The fixture tree every case may use. Its contents and times are fixed so
/// that the recorded expectations hold on any machine.
fn build_fixture(fx: &Path) {
    write(&fx.join("a.txt"), "line1\n# comment\nline3 x\n\nlast");
    write(&fx.join("exe"), "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(fx.join("exe"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    write(&fx.join("ro.txt"), "read only\n");
    std::fs::set_permissions(fx.join("ro.txt"), std::fs::Permissions::from_mode(0o444))
        .expect("chmod");
    write(&fx.join("suid"), "x");
    std::fs::set_permissions(fx.join("suid"), std::fs::Permissions::from_mode(0o4751))
        .expect("chmod");
    write(&fx.join("hashme"), "abc");
    write(&fx.join("nul.bin"), "argv0\0--flag\0");
    write(&fx.join("ünï cödé.txt"), "unicode\n");
    write(&fx.join(".hidden"), "");
    std::os::unix::fs::symlink("a.txt", fx.join("link")).expect("symlink");
    std::os::unix::fs::symlink("/nonexistent/target", fx.join("dangling")).expect("symlink");
    std::os::unix::fs::symlink("link", fx.join("link2")).expect("symlink");
    std::fs::create_dir_all(fx.join("empty")).expect("mkdir");
    write(&fx.join("sub/x.txt"), "x\n");
    write(&fx.join("sub/y.cf"), "y\n");
    write(&fx.join("deep/f.txt"), "");
    write(&fx.join("deep/1/2/3/4/5/f.txt"), "");
    write(&fx.join("deep/1/2/3/4/5/6/7/f.txt"), "");
    write(&fx.join("up/a/marker"), "");
    write(&fx.join("up/a/b/c/f.txt"), "");
    write(&fx.join("up/a/b/marker"), "");
    write(
        &fx.join("proto.txt"),
        "=fromfile=1\n+t_proto_class\n^context=ctx2\n=z=2\n@l= { \"q\", 'r s' }\n%d={\"k\":[1,2]}\njust output\n",
    );
    // Timestamps: old and new files for the comparisons. Nothing reads
    // these, so their access times stay as set.
    write(&fx.join("old"), "old\n");
    write(&fx.join("new"), "new\n");
    set_times(&fx.join("old"), 1_000_000_000, 1_000_000_000);
    set_times(&fx.join("new"), 1_600_000_000, 1_600_000_000);
    set_times(&fx.join("a.txt"), 1_577_836_800, 1_577_836_800);
}

/// The policy as run: a `fixture` bundle naming the fixture, the case's
/// directory and the TCP server's port, then the case.
fn case_policy(text: &str, fx: &Path, cases: &Path, port: u16) -> String {
    format!(
        "bundle common fixture {{ vars: \"dir\" string => \"{}\"; \"cases\" string => \"{}\"; \"port\" string => \"{port}\"; }}\n{text}",
        fx.display(),
        cases.display()
    )
}

/// A loopback server for `readtcp`: for each connection, reads what comes
/// within a moment and answers `echo:` and that. It lives as long as the
/// test process.
fn start_tcp_server() -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("local addr").port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).unwrap_or(0);
            let mut answer = b"echo:".to_vec();
            answer.extend_from_slice(&buf[..n]);
            let _ = s.write_all(&answer);
        }
    });
    port
}

/// Writes the package inventory caches the header asks for (CRLF lines,
/// as cf-agent reads them).
fn install_packages(workdir: &Path, packages: &[String]) {
    for (which, file) in [
        ("installed", "software_packages.csv"),
        ("updates", "software_patches_avail.csv"),
    ] {
        let lines: String = packages
            .iter()
            .filter_map(|p| p.strip_prefix(which))
            .map(|l| format!("{}\r\n", l.trim()))
            .collect();
        if !lines.is_empty() {
            std::fs::create_dir_all(workdir.join("state")).expect("state dir");
            std::fs::write(workdir.join("state").join(file), lines).expect("write inventory");
        }
    }
}

fn install_modules(workdir: &Path, modules: &[String], src: &Path) {
    let dir = workdir.join("modules");
    std::fs::create_dir_all(&dir).expect("modules dir");
    for m in modules {
        let to = dir.join(m);
        std::fs::copy(src.join(m), &to).expect("copy module");
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}

/// A header rule about one row.
struct Rule {
    name: String,
    shape: Option<regex::Regex>,
}

fn rules(text: &str, key: &str) -> Vec<Rule> {
    headers(text, key)
        .into_iter()
        .map(|h| {
            let spec = h.split(" -- ").next().unwrap_or("").trim().to_string();
            let mut parts = spec.splitn(2, ' ');
            let name = parts.next().unwrap_or("").to_string();
            let shape = parts
                .next()
                .map(|s| regex::Regex::new(&format!("^(?:{})$", s.trim())).expect("shape regex"));
            Rule { name, shape }
        })
        .collect()
}

/// Where a rendered list (`{"a","b"}`) at the start of `text` ends: after
/// the first `"}` that ends the text or is followed by a blank.
fn list_end(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("\"}") {
        let end = from + i + 2;
        if end == text.len() || text[end..].starts_with(' ') {
            return Some(end);
        }
        from = end;
    }
    None
}

/// Sorts the items of a rendered list (` {"a","b"}`).
fn sort_list(value: &str) -> String {
    let Some(inner) = value
        .trim()
        .strip_prefix('{')
        .and_then(|v| v.strip_suffix('}'))
    else {
        return value.to_string();
    };
    let mut items: Vec<&str> = inner.split("\",\"").collect();
    for i in items.iter_mut() {
        *i = i.trim_matches('"');
    }
    items.sort_unstable();
    format!(
        "{{{}}}",
        items
            .iter()
            .map(|i| format!("\"{i}\""))
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// Runs of blanks become one double blank: the tables pad columns to
/// widths that depend on the length of the fixture's path.
fn collapse(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut blanks = 0;
    for c in line.trim_end().chars() {
        if c == ' ' {
            blanks += 1;
            continue;
        }
        match blanks {
            0 => {}
            1 => out.push(' '),
            _ => out.push_str("  "),
        }
        blanks = 0;
        out.push(c);
    }
    out
}

/// The compared rows: the table rows with the fixture path written `$FX`,
/// blanks collapsed, volatile values checked and masked, unordered lists
/// sorted. Shape mismatches are reported as problems.
fn observe(out: &str, fx: &Path, text: &str, side: &str, problems: &mut Vec<String>) -> String {
    let volatile = rules(text, "volatile");
    let unordered = rules(text, "unordered");
    let fxs = fx.display().to_string();
    let tmps = fx.parent().map(|t| t.display().to_string());
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in out.lines() {
        if line.starts_with("Variable name") || line.starts_with("Class name") {
            in_table = true;
            rows.push(collapse(line));
            continue;
        }
        let t = line.trim_start();
        if !in_table || t.starts_with("error:") || t.starts_with("warning:") {
            continue;
        }
        let mut row = line.replace(&fxs, "$FX");
        if let Some(t) = &tmps {
            row = row.replace(t.as_str(), "$TMP");
        }
        let row = collapse(&row);
        let (name, rest) = row.split_once(' ').unwrap_or((row.as_str(), ""));
        let rest = rest.trim_start();
        if let Some(r) = volatile.iter().find(|r| r.name == name) {
            // The tags are the last word (volatile rows carry only
            // `source=...` tags); the value is everything before them.
            let (value, tags) = match rest.rsplit_once(' ') {
                Some((v, t)) if t.starts_with("source=") => (v.trim(), t),
                _ if rest.starts_with("source=") => ("", rest),
                _ => (rest, ""),
            };
            if let Some(shape) = &r.shape
                && !shape.is_match(value)
            {
                let shown: String = value.chars().take(200).collect();
                problems.push(format!(
                    "{side}: the volatile value of {name} does not have the expected shape: '{shown}'"
                ));
            }
            rows.push(format!("{name}  <volatile>  {tags}"));
            continue;
        }
        if unordered.iter().any(|r| r.name == name)
            && rest.starts_with('{')
            && let Some(end) = list_end(rest)
        {
            rows.push(format!(
                "{name}  {}  {}",
                sort_list(&rest[..end]),
                rest[end..].trim()
            ));
            continue;
        }
        rows.push(row);
    }
    rows.join("\n") + "\n"
}

fn run_tool(tool: &Path, workdir: &Path, policy: &Path, vars: &str, classes: &str) -> Captured {
    run(Command::new(tool)
        .env("TZ", "UTC")
        .current_dir(policy.parent().expect("policy dir"))
        .arg(format!("--show-vars={vars}"))
        .arg(format!("--show-classes={classes}"))
        .arg("-w")
        .arg(workdir)
        .arg("-f")
        .arg(policy))
}

fn run_case(case: &Path, with_reference: bool) -> Vec<String> {
    let text = std::fs::read_to_string(case).expect("read policy");
    let vars = header(&text, "vars").unwrap_or_else(|| "^default:(test\\.|fn_)".to_string());
    let classes = header(&text, "classes").unwrap_or_else(|| "^t_".to_string());
    let modules = headers(&text, "module");
    let packages = headers(&text, "package");
    let tmp = tempfile::tempdir().expect("tempdir");
    let fx = tmp.path().join("fx");
    build_fixture(&fx);
    let policy = tmp.path().join(case.file_name().expect("case name"));
    let port = if header(&text, "tcp-server").is_some() {
        start_tcp_server()
    } else {
        0
    };
    let case_dir = case.parent().expect("case dir");
    std::fs::write(&policy, case_policy(&text, &fx, case_dir, port)).expect("write policy");
    if let Some(dir) = header(&text, "files") {
        copy_tree(&case_dir.join(dir), tmp.path());
    }
    let module_src = case_dir.join("modules");

    let mut problems = Vec::new();
    let ours_wd = tmp.path().join("ours");
    // The same components in bin/ as the reference's work directory has
    // (sys.cf_promises alone): the number of variables defined decides
    // the order of a classic array's keys.
    std::fs::create_dir_all(ours_wd.join("bin")).expect("bin");
    std::os::unix::fs::symlink(agent_bin(), ours_wd.join("bin/cf-promises")).expect("link");
    install_modules(&ours_wd, &modules, &module_src);
    install_packages(&ours_wd, &packages);
    let ours = run_tool(&agent_bin(), &ours_wd, &policy, &vars, &classes);
    let ours = observe(&ours.stdout, &fx, &text, "ours", &mut problems);
    let reference = with_reference.then(|| {
        let wd = cf_workdir(tmp.path());
        install_modules(&wd, &modules, &module_src);
        install_packages(&wd, &packages);
        let cf = which("cf-promises").unwrap_or_else(|| PathBuf::from("cf-promises"));
        let r = run_tool(&cf, &wd, &policy, &vars, &classes);
        observe(&r.stdout, &fx, &text, "reference", &mut problems)
    });
    let expected = case.with_extension("expected");
    problems.extend(check_expected(&expected, &ours, reference.as_deref()));
    problems
        .into_iter()
        .map(|p| format!("{}: {p}", case.display()))
        .collect()
}

#[test]
fn functions_match_cf_promises() {
    check_corpus(&["functions", "functions_b"], "cf-promises", run_case);
}

#[test]
fn evaluation_core_matches_cf_promises() {
    check_corpus(&["differential"], "cf-promises", run_case);
}

#[test]
fn list_sorting_for_unordered_rows() {
    assert_eq!(sort_list(r#"{"b","a"}"#), r#"{"a","b"}"#);
    assert_eq!(sort_list("x"), "x");
    assert_eq!(list_end(r#"{"b","a"} source=promise"#), Some(9));
    assert_eq!(list_end(r#"{"a"}"#), Some(5));
    assert_eq!(list_end("{"), None);
}

/// `url_get` cannot be compared: the reference build has no libcurl and
/// always fails. Ours fetches from a loopback HTTP server the test runs.
#[test]
fn url_get_reads_from_a_loopback_server() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("local addr").port();
    // url_get is not a cached function: every pass of pre-evaluation
    // fetches again, so the server answers every connection.
    let (sent, requests) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 2048];
            let n = s.read(&mut buf).unwrap_or(0);
            let _ = sent.send(String::from_utf8_lossy(&buf[..n]).into_owned());
            let _ = s.write_all(
                b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello from loopback",
            );
        }
    });
    let tmp = tempfile::tempdir().expect("tempdir");
    let policy = write_policy(
        tmp.path(),
        &format!(
            "bundle common test {{ vars: \"r\" data => url_get(\"http://127.0.0.1:{port}/path?q=1\", '{{\"url.max_content\": 5}}'); }}\nbundle agent main {{ }}\n"
        ),
    );
    let out = run(Command::new(agent_bin())
        .arg("--show-vars=default:test.r")
        .arg("-w")
        .arg(tmp.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    let request = requests.try_recv().expect("url_get made no request");
    assert!(request.starts_with("GET /path?q=1 HTTP/1."), "{request:?}");
    assert!(
        out.stdout.contains(r#""content":"hello""#)
            && out.stdout.contains(r#""returncode":200"#)
            && out.stdout.contains(r#""success":true"#),
        "{out:?}"
    );
}
