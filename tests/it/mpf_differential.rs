//! The Masterfiles Policy Framework that Debian's cfengine3 installs,
//! pre-evaluated by `agent` and by `cf-promises` 3.21: `--show-vars` and
//! `--show-classes` must agree row for row, but for the rows listed below,
//! each with the reason. Both run with the same kind of work directory (a
//! `bin/` holding `cf-promises` and `cf-agent`, as an installed CFEngine
//! has), written `$WD` in what is compared.
//!
//! The MPF depends on the host, so there is no recorded expectation: the
//! test says plainly when it is skipped because cf-promises or the MPF is
//! not installed.

use crate::common::*;
use convergent::schema::newer;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const MPF: &str = "/var/lib/cfengine3/masterfiles/promises.cf";

/// Rows whose values change from one moment to the next; both sides must
/// have them, their values are not compared. (Rows tagged `time_based`
/// are masked the same way: `sys.date`, `sys.systime`, `sys.uptime`, ...)
const VOLATILE: &[(&str, &str)] = &[
    (
        "default:cfe_autorun_inventory_timezone._now",
        "the time of the run, in seconds",
    ),
    (
        "default:testing_generic_report.timestamp",
        "the time of the run",
    ),
    (
        "default:postgresql_conf_recommendations.mem_info_data",
        "the live /proc/meminfo counters",
    ),
    (
        "default:sys.inet",
        "live packet counters and route use counts",
    ),
    (
        "default:sys.inet6",
        "live packet counters and route reference counts",
    ),
    (
        "default:sys.interfaces_data",
        "live packet counters (other tests' loopback traffic moves them between the two runs)",
    ),
];

/// Lists whose items are compared as sets. `control_common.inputs` is
/// built from classic arrays (`getvalues`) while the policy is loaded:
/// their order is cf-promises' variable-table order at that moment, when
/// its table holds another number of variables than ours does at that
/// point (every other list built from a classic array compares in order).
const HASH_ORDER: &[&str] = &["default:control_common.inputs"];

/// Rows where we knowingly differ, not compared.
const KNOWN: &[(&str, &str)] = &[
    (
        "default:host_info_report_cfengine.interface_ips",
        "cf-agent 3.21's maparray over the classic array sys.ipv4 pairs `lo` with the scalar \
         sys.ipv4 (192.0.2.2 here) instead of sys.ipv4[lo] (127.0.0.1); we give sys.ipv4[lo]",
    ),
    (
        "default:host_info_report_cfengine.interface_info_unsorted",
        "built from interface_ips (above)",
    ),
    (
        "default:host_info_report_cfengine.interface_info",
        "built from interface_ips (above)",
    ),
    (
        "default:host_info_report_software.packages",
        "cf-promises keeps the first `package_inventory` it resolves, taken before \
         package_module_knowledge is defined, so it holds an unresolved reference and \
         packagesmatching() fails (\"No valid package module inventory found\"); we read the \
         apt_get module's inventory the final value names",
    ),
];

/// The sys variables and hard classes CFEngine added after 3.21, which
/// cf-promises 3.21 cannot have (`sys.cpusockets`, `1_cpusocket`, ...).
fn is_newer(name: &str) -> bool {
    let short = name.strip_prefix("default:").unwrap_or(name);
    newer::sys_var(name).is_some() || newer::hard_class(short).is_some()
}

/// A row with the entries for newer sys variables taken out of the data
/// it shows (the MPF's inventory collects every variable tagged
/// `inventory`, `"default:sys.cpusockets":"1"` among them).
fn without_newer_entries(row: &str) -> String {
    let mut row = row.to_string();
    for (name, _) in newer::SYS_VARS {
        let key = format!("\"default:sys.{name}\":");
        let Some(at) = row.find(&key) else { continue };
        // The value ends at the first ',' or '}' outside strings and
        // brackets.
        let mut depth = 0i32;
        let mut in_str = false;
        let mut escaped = false;
        let mut end = row.len();
        for (i, ch) in row[at + key.len()..].char_indices() {
            match ch {
                _ if escaped => escaped = false,
                '\\' if in_str => escaped = true,
                '"' => in_str = !in_str,
                _ if in_str => {}
                '[' | '{' => depth += 1,
                ']' | '}' if depth > 0 => depth -= 1,
                ',' | '}' if depth == 0 => {
                    end = at + key.len() + i;
                    break;
                }
                _ => {}
            }
        }
        if row[end..].starts_with(',') {
            row.replace_range(at..=end, "");
        } else if row[..at].ends_with(',') {
            row.replace_range(at - 1..end, "");
        } else {
            row.replace_range(at..end, "");
        }
    }
    row
}

/// A row with the values of time-based variables that it shows masked
/// (the MPF's inventory collects `"default:sys.uptime":"182"`, which
/// moves on when the two runs fall on each side of a minute).
fn without_time_based_entries(row: &str, time_based: &[String]) -> String {
    let mut row = row.to_string();
    for name in time_based {
        let key = format!("\"{name}\":\"");
        let Some(at) = row.find(&key) else { continue };
        let start = at + key.len();
        if let Some(len) = row[start..].find('"') {
            row.replace_range(start..start + len, "(time based)");
        }
    }
    row
}

/// Table rows by name: the text after the name with blanks collapsed.
/// Lines that do not start a row (comments running over several lines)
/// belong to the row before them.
fn rows(table: &str, is_vars: bool, wd: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    for line in table.lines().skip(1) {
        let line = line.replace(wd, "$WD");
        let starts_row = !line.starts_with(' ')
            && !line.is_empty()
            && (!is_vars || line.split(' ').next().is_some_and(|n| n.contains(':')));
        let text = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if starts_row {
            let (name, rest) = text.split_once(' ').unwrap_or((&text, ""));
            last = Some(name.to_string());
            out.insert(name.to_string(), rest.to_string());
        } else if let Some(prev) = &last
            && let Some(v) = out.get_mut(prev)
        {
            v.push(' ');
            v.push_str(&text);
        }
    }
    out
}

/// The items of a rendered list row (`{"a","b"} tags`), sorted, with the
/// rest of the row.
fn as_set(row: &str) -> String {
    let Some(end) = row
        .find("} ")
        .map(|i| i + 1)
        .or(row.ends_with('}').then_some(row.len()))
    else {
        return row.to_string();
    };
    let (list, rest) = row.split_at(end);
    let inner = list.trim_start_matches('{').trim_end_matches('}');
    let mut items: Vec<&str> = inner.split("\",\"").map(|i| i.trim_matches('"')).collect();
    items.sort_unstable();
    format!("{{{}}}{rest}", items.join(","))
}

fn show(tool: &Path, flag: &str, wd: &Path) -> String {
    let out = run(Command::new(tool)
        .env("TZ", "UTC")
        .arg(flag)
        .arg("-w")
        .arg(wd)
        .arg("-f")
        .arg(MPF));
    assert_eq!(
        out.code,
        Some(0),
        "{} {flag} failed: {out:?}",
        tool.display()
    );
    assert!(
        !out.stdout.is_empty(),
        "{} {flag} printed nothing",
        tool.display()
    );
    out.stdout
}

fn workdir(root: &Path, name: &str, cf_promises: &Path) -> std::path::PathBuf {
    let wd = root.join(name);
    std::fs::create_dir_all(wd.join("bin")).expect("bin dir");
    std::os::unix::fs::symlink(cf_promises, wd.join("bin/cf-promises")).expect("link");
    let cf_agent = which("cf-agent").unwrap_or_else(|| "/usr/bin/cf-agent".into());
    std::os::unix::fs::symlink(cf_agent, wd.join("bin/cf-agent")).expect("link");
    wd
}

#[test]
fn mpf_tables_match_cf_promises() {
    let Some(cf) = which("cf-promises") else {
        eprintln!("skipped: cf-promises not installed");
        return;
    };
    if !Path::new(MPF).exists() {
        eprintln!("skipped: the MPF is not installed at {MPF}");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let theirs_wd = workdir(tmp.path(), "cf", &cf);
    let ours_wd = workdir(tmp.path(), "ours", &cf);
    let mut problems = Vec::new();
    let mut compared = 0;
    for (flag, is_vars) in [("--show-vars", true), ("--show-classes", false)] {
        let ours = rows(
            &show(&agent_bin(), flag, &ours_wd),
            is_vars,
            &ours_wd.display().to_string(),
        );
        let theirs = rows(
            &show(&cf, flag, &theirs_wd),
            is_vars,
            &theirs_wd.display().to_string(),
        );
        let time_based: Vec<String> = theirs
            .iter()
            .filter(|(_, row)| row.contains("time_based"))
            .map(|(name, _)| name.clone())
            .collect();
        for name in theirs
            .keys()
            .chain(ours.keys().filter(|k| !theirs.contains_key(*k)))
        {
            if KNOWN.iter().any(|(n, _)| n == name) || is_newer(name) {
                continue;
            }
            let (Some(t), Some(o)) = (theirs.get(name), ours.get(name)) else {
                let side = if theirs.contains_key(name) {
                    "cf-promises only"
                } else {
                    "ours only"
                };
                problems.push(format!("{flag}: {name}: {side}"));
                continue;
            };
            compared += 1;
            if VOLATILE.iter().any(|(n, _)| n == name) || t.contains("time_based") {
                continue;
            }
            let o = without_time_based_entries(&without_newer_entries(o), &time_based);
            let t = &without_time_based_entries(t, &time_based);
            let (t, o) = if HASH_ORDER.contains(&name.as_str()) {
                (as_set(t), as_set(&o))
            } else {
                (t.clone(), o)
            };
            if t != o {
                problems.push(format!(
                    "{flag}: {name}\n  cf-promises: {t}\n  ours:        {o}"
                ));
            }
        }
    }
    assert!(compared > 800, "only {compared} rows were compared");
    assert!(
        problems.is_empty(),
        "{} differences in {compared} rows:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn newer_entries_leave_the_data_shown() {
    assert_eq!(
        without_newer_entries(r#"{"default:sys.cpus":"2","default:sys.cpusockets":"1","x":1} t"#),
        r#"{"default:sys.cpus":"2","x":1} t"#
    );
    assert_eq!(
        without_newer_entries(r#"{"a":1,"default:sys.cfengine_roles":["Client","x,}"]} t"#),
        r#"{"a":1} t"#
    );
}

#[test]
fn time_based_entries_are_masked_in_the_data_shown() {
    let names = ["default:sys.uptime".to_string()];
    assert_eq!(
        without_time_based_entries(r#"{"default:sys.uptime":"182","x":"1"} t"#, &names),
        without_time_based_entries(r#"{"default:sys.uptime":"183","x":"1"} t"#, &names)
    );
    assert_ne!(
        without_time_based_entries(r#"{"default:sys.uptime":"182","x":"1"} t"#, &names),
        without_time_based_entries(r#"{"default:sys.uptime":"182","x":"2"} t"#, &names)
    );
}

#[test]
fn list_rows_compare_as_sets() {
    assert_eq!(
        as_set(r#"{"b","a"} source=promise"#),
        r#"{a,b} source=promise"#
    );
    assert_eq!(as_set(r#"{"b","a"}"#), r#"{a,b}"#);
    assert_eq!(as_set("plain source=promise"), "plain source=promise");
}
