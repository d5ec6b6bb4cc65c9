//! Differential test of host discovery against cf-promises 3.21: every
//! hard class and every `sys.`, `const.`, `def.` and `mon.` variable that
//! `cf-promises --show-classes` / `--show-vars` lists for a trivial policy
//! must be discovered by us with the same name, tags and (unless listed
//! below as volatile) value. Compared at test time on the machine running
//! the test, never against recorded values.

use convergent::discover::{DiscoverInput, Discovery, Role, discover};
use convergent::schema::newer;
use convergent::show::tables::render_value;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

/// Variables whose value changes between two runs a moment apart. Their
/// names and tags are still compared.
const VOLATILE_VARS: [(&str, &str); 4] = [
    (
        "sys.uptime",
        "minutes since boot: may tick between the two runs",
    ),
    (
        "sys.inet",
        "live packet counters (stats) and route use counts",
    ),
    (
        "sys.inet6",
        "live packet counters (stats) and route reference counts",
    ),
    (
        "sys.interfaces_data",
        "live per-interface byte and packet counters",
    ),
];
// Time classes (tag `time_based`: Hr17, Min45_50, GMT_Q4...) and sys.date,
// sys.cdate, sys.systime, sys.sysday are computed by us at cf-promises' own
// `sys.systime`, so they are compared exactly; the time classes are also
// accepted for the second before it, since cf-promises computes them at
// start-up, possibly a second earlier.

fn cf_promises() -> Option<String> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("cf-promises"))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
}

fn run(cf: &str, flag: &str, policy: &Path) -> String {
    let out = Command::new(cf)
        .arg(flag)
        .arg("-f")
        .arg(policy)
        .output()
        .expect("cf-promises runs");
    assert!(
        out.status.success(),
        "cf-promises {flag} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Class name → the rest of its line (tags; hard classes have no comment).
fn parse_classes(table: &str) -> BTreeMap<String, String> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (name, rest) = l.split_once(' ')?;
            Some((name.to_string(), rest.trim().to_string()))
        })
        .collect()
}

/// `scope.name` → the rest of the line from the value column on.
fn parse_vars(table: &str) -> BTreeMap<String, String> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (name, _) = l.split_once(' ')?;
            let short = name.strip_prefix("default:")?;
            let start = name.len().max(40) + 1;
            Some((short.to_string(), l.get(start..)?.trim_end().to_string()))
        })
        .filter(|(n, _)| {
            ["sys.", "const.", "def.", "mon."]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .collect()
}

/// The same keys at every level of objects, the same lengths of arrays.
fn same_shape(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_shape(v, w)))
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_shape(v, w))
        }
        (x, y) => std::mem::discriminant(x) == std::mem::discriminant(y),
    }
}

fn discover_at(systime: u64, workdir: &str, policy: &Path) -> Discovery {
    let mut input = DiscoverInput::new(Path::new(workdir), policy, Role::Promises);
    input.now = UNIX_EPOCH + Duration::from_secs(systime);
    discover(&input)
}

#[test]
fn discovery_matches_cf_promises() {
    let Some(cf) = cf_promises() else {
        println!("skipped: cf-promises not installed");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("main.cf");
    std::fs::write(
        &policy,
        "bundle agent main\n{\n  reports:\n      \"x\";\n}\n",
    )
    .expect("write policy");

    let cf_classes = parse_classes(&run(&cf, "--show-classes", &policy));
    let cf_vars = parse_vars(&run(&cf, "--show-vars", &policy));
    let value_of = |name: &str| {
        cf_vars
            .get(name)
            .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string())
    };
    let systime: u64 = value_of("sys.systime")
        .and_then(|s| s.parse().ok())
        .expect("cf-promises shows sys.systime");
    let workdir = value_of("sys.workdir").expect("cf-promises shows sys.workdir");

    let ours = discover_at(systime, &workdir, &policy);
    let earlier = discover_at(systime - 1, &workdir, &policy);
    let mut problems: Vec<String> = Vec::new();

    // Classes: names and tags.
    let time_set = |d: &Discovery| -> BTreeSet<String> {
        d.classes
            .iter()
            .filter(|c| c.tags.iter().any(|t| t == "time_based"))
            .map(|c| c.name.clone())
            .collect()
    };
    let cf_time: BTreeSet<String> = cf_classes
        .iter()
        .filter(|(_, t)| t.split(',').any(|t| t == "time_based"))
        .map(|(n, _)| n.clone())
        .collect();
    if cf_time != time_set(&ours) && cf_time != time_set(&earlier) {
        problems.push(format!(
            "time classes differ: cf-promises {cf_time:?}, ours {:?}",
            time_set(&ours)
        ));
    }
    for (name, tags) in cf_classes.iter().filter(|(n, _)| !cf_time.contains(*n)) {
        match ours.class(name) {
            None => problems.push(format!("class {name} missing (cf tags {tags})")),
            Some(c) if c.tags.join(",") != *tags => problems.push(format!(
                "class {name}: tags {} instead of {tags}",
                c.tags.join(",")
            )),
            Some(_) => {}
        }
    }
    // What CFEngine added after 3.21 (sys.cpusockets, N_cpusockets, ...)
    // cf-promises 3.21 cannot have.
    for c in ours.classes.iter().filter(|c| {
        !c.tags.iter().any(|t| t == "time_based") && newer::hard_class(&c.name).is_none()
    }) {
        if !cf_classes.contains_key(&c.name) {
            problems.push(format!("class {} not defined by cf-promises", c.name));
        }
    }

    // Variables: names, tags and values.
    let mut compared = 0;
    for (name, rest) in &cf_vars {
        let (scope, short) = name.split_once('.').expect("scoped name");
        let Some(var) = ours.var(scope, short) else {
            problems.push(format!("variable {name} missing (cf: {rest})"));
            continue;
        };
        let tags = var.tags.join(",");
        let Some(value_part) = rest.strip_suffix(tags.as_str()) else {
            problems.push(format!("variable {name}: our tags {tags}, cf line: {rest}"));
            continue;
        };
        let cf_value = value_part.trim_end();
        let our_value = render_value(var.value());
        let our_value = our_value.trim_end();
        if name == "sys.uptime" {
            let a: i64 = cf_value.parse().unwrap_or(-100);
            let b: i64 = our_value.parse().unwrap_or(100);
            if (a - b).abs() > 1 {
                problems.push(format!("{name}: {our_value} instead of {cf_value}"));
            }
        } else if VOLATILE_VARS.iter().any(|(v, _)| v == name) {
            let theirs: Json = serde_json::from_str(cf_value).unwrap_or(Json::Null);
            let mine: Json = serde_json::from_str(our_value).unwrap_or(Json::Bool(false));
            if !same_shape(&theirs, &mine) {
                problems.push(format!(
                    "{name}: shape differs\n  cf:   {cf_value}\n  ours: {our_value}"
                ));
            }
        } else if cf_value != our_value {
            problems.push(format!("{name}: {our_value:?} instead of {cf_value:?}"));
        }
        compared += 1;
    }
    for v in &ours.vars {
        let name = format!("{}.{}", v.scope, v.name);
        if !cf_vars.contains_key(&name) && newer::sys_var(&name).is_none() {
            problems.push(format!("variable {name} not defined by cf-promises"));
        }
    }

    println!(
        "compared {} classes and {compared} variables with cf-promises",
        cf_classes.len()
    );
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
