//! Issue 24, class 10: hosts other than Debian. Each directory of
//! tests/os_fixtures/ holds the release files of one distribution (RHEL,
//! CentOS, Rocky, Ubuntu, SLES with and without `/etc/SuSE-release`,
//! openSUSE, Alpine). In a private mount namespace (`unshare -m`) a copy
//! of this host's `/etc` without its own release files, with the
//! fixture's added, is mounted over `/etc`; there cf-promises 3.21 and our
//! agent each print `--show-classes` and `--show-vars`, and the hard
//! classes (with their tags) and the distribution's `sys` variables must
//! be the same. Nothing outside the namespace sees the mount. Needs root,
//! `unshare` and cf-promises; says "skipped" otherwise. The unit tests of
//! `src/discover/` read such trees through a fixture root instead
//! (`DiscoverInput::root`).

use crate::common::*;
use convergent::schema::newer;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The release files of this host that a fixture replaces.
const RELEASE_FILES: &str = "os-release debian_version lsb-release issue issue.net \
    redhat-release system-release fedora-release centos-release rocky-release \
    oracle-release SuSE-release alpine-release";

const SCRIPT: &str = r#"set -e
fixture=$1; out=$2; agent=$3; policy=$4; scratch=$5
mount -t tmpfs none "$scratch"
cp -a /etc/. "$scratch/"
for f in $RELEASE_FILES; do rm -f "$scratch/$f"; done
cp -a "$fixture/." "$scratch/"
mount --bind "$scratch" /etc
cf-promises --show-classes -f "$policy" > "$out/cf.classes"
cf-promises --show-vars -f "$policy" > "$out/cf.vars"
"$agent" --show-classes -f "$policy" > "$out/ours.classes"
"$agent" --show-vars -f "$policy" > "$out/ours.vars"
"#;

/// The `sys` variables the distribution decides.
const OS_VARS: [&str; 7] = [
    "default:sys.flavor",
    "default:sys.flavour",
    "default:sys.os_release",
    "default:sys.os_name_human",
    "default:sys.os_version_major",
    "default:sys.ostype",
    "default:sys.class",
];

/// Hard classes by name, with their tags; time classes, the key's class
/// (each side has its own work directory) and, for ours, the classes of
/// CFEngine after 3.21 left out.
fn classes(table: &str, ours: bool) -> BTreeMap<String, String> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .filter(|(n, t)| !t.contains("time_based") && !n.starts_with("PK_"))
        .filter(|(n, _)| !ours || newer::hard_class(n).is_none())
        .collect()
}

fn os_vars(table: &str) -> BTreeMap<String, String> {
    table
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(' ')?;
            OS_VARS.contains(&name).then(|| {
                let words: Vec<&str> = rest.split_whitespace().collect();
                (name.to_string(), words.join(" "))
            })
        })
        .collect()
}

#[test]
fn distributions_are_discovered_as_cf_promises_discovers_them() {
    if !is_root() || !have("cf-promises") || which("unshare").is_none() {
        println!("skipped: needs root, unshare and cf-promises");
        return;
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/os_fixtures");
    let mut names: Vec<_> = std::fs::read_dir(&fixtures)
        .expect("fixtures")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 8, "fixtures: {names:?}");
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = tmp.path().join("p.cf");
    std::fs::write(&policy, "bundle agent main { reports: \"x\"; }\n").expect("policy");
    let mut problems = Vec::new();
    for name in &names {
        let out = tmp.path().join(name);
        let scratch = tmp.path().join(format!("{name}-etc"));
        std::fs::create_dir_all(&out).expect("out");
        std::fs::create_dir_all(&scratch).expect("scratch");
        let r = run(Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", SCRIPT, "sh"])
            .arg(fixtures.join(name).join("etc"))
            .arg(&out)
            .arg(agent_bin())
            .arg(&policy)
            .arg(&scratch)
            .env("RELEASE_FILES", RELEASE_FILES));
        if r.code == Some(1) && r.stderr.contains("unshare failed") {
            println!("skipped: no mount namespace here ({})", r.stderr.trim());
            return;
        }
        assert_eq!(r.code, Some(0), "{name}: {r:?}");
        let read = |f: &str| std::fs::read_to_string(out.join(f)).expect("output");
        let (theirs, ours) = (
            classes(&read("cf.classes"), false),
            classes(&read("ours.classes"), true),
        );
        assert!(theirs.len() > 20, "{name}: cf-promises printed {theirs:?}");
        for (class, tags) in &theirs {
            match ours.get(class) {
                None => problems.push(format!("{name}: class {class} missing ({tags})")),
                Some(t) if t != tags => {
                    problems.push(format!("{name}: class {class}: tags {t} instead of {tags}"))
                }
                Some(_) => {}
            }
        }
        for class in ours.keys().filter(|c| !theirs.contains_key(*c)) {
            problems.push(format!("{name}: class {class} not defined by cf-promises"));
        }
        let (theirs, ours) = (os_vars(&read("cf.vars")), os_vars(&read("ours.vars")));
        if theirs != ours {
            problems.push(format!(
                "{name}: sys variables differ\n  cf:   {theirs:?}\n  ours: {ours:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
