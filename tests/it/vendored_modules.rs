//! The MPF's vendored package modules (other than apt_get, which
//! `packages.rs` runs against the real apt and dpkg) under both agents.
//!
//! Each module is a protocol script made for a package manager this host
//! does not have (apk, snap, pkg, pkgsrc, slackpkg, FreeBSD ports, AIX's
//! nimclient, yum, zypper). The test gives it a fake of that package
//! manager on `PATH` (or, for yum and zypper, through the
//! `CFENGINE_TEST_*_CMD` variables the modules read): shell scripts over
//! `tests/packages/fake_pm.sh`, whose "installed" packages are a file. A
//! logging wrapper records, in order, every request the agent sends the
//! module (command and input lines), every command the module runs, and the
//! module's answer and exit code. Then the same `packages:` promises
//! (install a version, upgrade to the latest, remove, install a package
//! file where the module can, a package that does not exist, one already
//! there) run twice under our agent and under cf-agent 3.21, and the
//! records must be the same: the `-I` lines, the outcome classes, the
//! protocol and the packages after each run. Without cf-agent ours is
//! compared with the record in `tests/packages/vendored/`
//! (`UPDATE_EXPECTED=1` records it again). A module whose interpreter
//! (sh, bash, python3) is missing is skipped with a note.
//!
//! Modules run as the MPF runs them: the shell modules directly (by their
//! `#!` line), yum and zypper through the package module body's
//! `interpreter`. msiexec is for Windows and is not run. Where a module
//! runs a program by its full path (nimclient's /usr/sbin/nimclient for an
//! install), the fake cannot stand in and the promise fails, alike under
//! both agents.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const VENDORED: &str = "/usr/share/cfengine3/masterfiles/modules/packages/vendored";

struct Module {
    name: &'static str,
    /// The interpreter the module needs.
    interpreter: &'static str,
    /// Whether the package module body names the interpreter (as the MPF's
    /// bodies for yum and zypper do) instead of the module running by its
    /// `#!` line.
    body_interpreter: bool,
    /// The installed packages and the repository ("name version arch").
    installed: &'static str,
    repo: &'static str,
    /// Versions in the module's spelling: the one promised, the newest.
    v1: &'static str,
    /// A package file the module can install (its name, its content), or
    /// none.
    file: Option<(&'static str, &'static str)>,
    /// Options the promises pass the module.
    options: &'static str,
    /// Fake commands: name and body (after the common header).
    fakes: &'static [(&'static str, &'static str)],
}

/// Fake `pkg` of FreeBSD, used by the pkg and freebsd_ports modules.
const FAKE_PKG: &str = r#"while [ "$1" = -o ]; do shift 2; done
q() { while read -r n v a; do printf "$(printf '%s' "$1" | sed "s/%n/$n/g; s/%v/$v/g")\n"; done; }
case $1 in
  config) echo FreeBSD:13:amd64 ;;
  query) if [ "$2" = -a ]; then list | q "$3"; else head -n 1 "$3" | q "$4"; fi ;;
  version) updates | while read -r n v a o; do echo "$n-$o                <   needs updating (remote has $v)"; done ;;
  install) shift
    while [ $# -gt 0 ]; do
      case $1 in -qy) ;; -r) shift ;; /*) add_file "$1" || exit 1 ;; *) add_spec "$1" || exit 1 ;; esac
      shift
    done ;;
  delete) shift; for p; do case $p in -*) ;; *) del_spec "$p" || exit 1 ;; esac; done ;;
  info) list | while read -r n v a; do
      echo "$n-$v"; echo "Name           : $n"; echo "Version        : $v"
      echo "Architecture   : freebsd:13:x86:64"
    done ;;
  *) echo "pkg: unknown command $1" >&2; exit 1 ;;
esac
"#;

/// Fake `rpm`, used by the yum and zypper modules.
const FAKE_RPM: &str = r#"fmt=; mode=; quiet=; items=
while [ $# -gt 0 ]; do
  case $1 in
    --quiet) quiet=1 ;; --force) ;; --qf) fmt=$2; shift ;;
    -qa) mode=all ;; -qp) mode=file ;; -q) mode=one ;; -U) mode=install ;;
    *) items="$items $1" ;;
  esac
  shift
done
show() {
  while read -r n v a; do
    printf '%s\n' "$(printf '%s' "$fmt" | sed "s/%|EPOCH?{%{epoch}:}:{}|//g; s/%{name}/$n/g; s/%{version}-%{release}/$v/g; s/%{version}/${v%-*}/g; s/%{release}/${v##*-}/g; s/%{arch}/$a/g")"
  done
}
case $mode in
  all) list | show ;;
  file) for f in $items; do head -n 1 "$f" | show; done ;;
  one) rc=0
    for i in $items; do
      line=$(awk -v s="$i" '$1 == s || $1"-"$2 == s || $1"-"$2"."$3 == s' "$S/installed")
      if [ -n "$line" ]; then [ -n "$fmt" ] && echo "$line" | show
      else [ -n "$quiet" ] || echo "package $i is not installed"; rc=1; fi
    done
    exit $rc ;;
  install) for f in $items; do add_file "$f" || exit 1; done ;;
esac
"#;

const MODULES: &[Module] = &[
    Module {
        name: "apk",
        interpreter: "sh",
        body_interpreter: false,
        installed: "bar 1.0-r0 x86_64\nkept 1.0-r0 x86_64\nold 1.0-r0 x86_64\n",
        repo: "foo 1.0-r0 x86_64\nfoo 2.0-r0 x86_64\nbar 1.0-r0 x86_64\nbar 2.0-r0 x86_64\nkept 1.0-r0 x86_64\n",
        v1: "1.0-r0",
        file: Some(("baz-3.1.apk", "baz 3.1 x86_64")),
        options: "",
        fakes: &[(
            "apk",
            r#"case $1 in
  verify) case $2 in *.apk) [ -f "$2" ] ;; *) exit 1 ;; esac ;;
  list) if [ "$2" = --installed ]; then
      list | while read -r n v a; do echo "$n-$v $a {$n} (MIT) [installed]"; done
    else
      updates | while read -r n v a o; do echo "$n-$v $a {$n} (MIT) [upgradable from: $n-$o]"; done
    fi ;;
  add) shift; [ "$1" = --upgrade ] && shift
    case $1 in /*) add_file "$1" ;; *=*) add "${1%%=*}" "${1#*=}" ;; *) add "$1" ;; esac ;;
  del) del_spec "$2" ;;
  *) echo "apk: unknown command $1" >&2; exit 1 ;;
esac
"#,
        )],
    },
    Module {
        name: "snap",
        interpreter: "bash",
        body_interpreter: false,
        installed: "bar 1.0 none\nkept 1.0 none\nold 1.0 none\n",
        repo: "foo 1.0 none\nbar 1.0 none\nbar 2.0 none\nkept 1.0 none\n",
        v1: "1.0",
        file: None,
        options: "",
        fakes: &[(
            "snap",
            r#"case $1 in
  list) echo "Name  Version  Rev  Developer  Notes"
    list | while read -r n v a; do echo "$n  $v  1  dev  -"; done ;;
  install) add "$2" ;;
  remove) del_spec "$2" ;;
  *) echo "snap: unknown command $1" >&2; exit 1 ;;
esac
"#,
        )],
    },
    Module {
        name: "pkg",
        interpreter: "sh",
        body_interpreter: false,
        installed: "bar 1.0 amd64\nkept 1.0 amd64\nold 1.0 amd64\n",
        repo: "foo 1.0 amd64\nfoo 2.0 amd64\nbar 1.0 amd64\nbar 2.0 amd64\nkept 1.0 amd64\n",
        v1: "1.0",
        file: Some(("baz-3.1.txz", "baz 3.1 amd64")),
        options: r#"options => { "repository=local", "option=ASSUME_ALWAYS_YES=yes" },"#,
        fakes: &[("pkg", FAKE_PKG)],
    },
    Module {
        name: "freebsd_ports",
        interpreter: "sh",
        body_interpreter: false,
        installed: "bar 1.0 none\nkept 1.0 none\nold 1.0 none\n",
        repo: "foo 1.0 none\nfoo 2.0 none\nbar 1.0 none\nbar 2.0 none\nkept 1.0 none\nold 1.0 none\n",
        v1: "2.0",
        file: None,
        options: "",
        fakes: &[
            ("pkg", FAKE_PKG),
            (
                "whereis",
                r#"n=$2; [ -n "$(newest "$n")" ] && mkdir -p "$S/ports/$n" && echo "$S/ports/$n"
exit 0
"#,
            ),
            (
                "make",
                r#"n=$(basename "$PWD")
case $* in
  "-V PKGVERSION") newest "$n" ;;
  "deinstall reinstall") del_spec "$n" 2>/dev/null; add "$n" ;;
  deinstall) del_spec "$n" ;;
  *) echo "make: unknown target $*" >&2; exit 1 ;;
esac
"#,
            ),
            ("portsnap", "exit 0\n"),
        ],
    },
    Module {
        name: "pkgsrc",
        interpreter: "sh",
        body_interpreter: false,
        installed: "bar 1.0 x86_64\nkept 1.0 x86_64\nold 1.0 x86_64\n",
        repo: "foo 1.0 x86_64\nfoo 2.0 x86_64\nbar 1.0 x86_64\nbar 2.0 x86_64\nkept 1.0 x86_64\n",
        v1: "1.0",
        file: Some(("baz-3.1.tgz", "baz 3.1 x86_64")),
        options: "",
        fakes: &[
            (
                "pkg_info",
                r#"case $1 in
  -X) echo "MACHINE_ARCH=x86_64" ;;
  -pq) echo "@cwd $S/pkgroot" ;;
esac
"#,
            ),
            (
                "pkgin",
                r#"case "$1 $2" in
  "-p list") list | while read -r n v a; do echo "$n-$v;the $n package"; done ;;
  "-pl <") updates | while read -r n v a o; do echo "$n-$v;the $n package"; done ;;
  "-pP avail") awk '{ print $1 "-" $2 ";the " $1 " package" }' "$S/repo" ;;
  "-y in") add_spec "$3" ;;
  "-y rm") del_spec "$3" ;;
  "-f update") ;;
  *) echo "pkgin: unknown command $*" >&2; exit 1 ;;
esac
"#,
            ),
            ("pkg_add", "add_file \"$4\"\n"),
        ],
    },
    // Its list of installed packages is read with a sed of bash's $'\n'
    // quoting: under a /bin/sh that is not bash (Debian's dash) it lists
    // no versions, so every install fails, alike under both agents.
    Module {
        name: "slackpkg",
        interpreter: "sh",
        body_interpreter: false,
        installed: "bar 1.0 x86_64\nkept 1.0 x86_64\nold 1.0 x86_64\n",
        repo: "foo 1.0 x86_64\nfoo 2.0 x86_64\nbar 1.0 x86_64\nbar 2.0 x86_64\nkept 1.0 x86_64\n",
        v1: "1.0",
        file: Some(("baz-3.1-x86_64-1.txz", "baz 3.1 x86_64")),
        options: "",
        fakes: &[
            (
                "slackpkg",
                r#"while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
what=$1; shift
case $what in
  upgrade-all) echo "Looking for updates"
    updates | while read -r n v a o; do echo "$n-$v-$a-1"; done ;;
  install) for p; do add_spec "$p" || exit 1; done ;;
  remove) for p; do del_spec "$p" || exit 1; done ;;
  *) echo "slackpkg: unknown command $what" >&2; exit 1 ;;
esac
"#,
            ),
            ("installpkg", "for f; do add_file \"$f\" || exit 1; done\n"),
            // The module lists the package database, /var/log/packages.
            (
                "ls",
                r#"if [ "$*" = "-1 /var/log/packages/" ]; then
  list | while read -r n v a; do echo "$n-$v-$a-1"; done
else
  exec /bin/ls "$@"
fi
"#,
            ),
        ],
    },
    Module {
        name: "nimclient",
        interpreter: "sh",
        body_interpreter: false,
        installed: "bar 1.0 PPC\nkept 1.0 PPC\nold 1.0 PPC\n",
        repo: "foo 1.0 PPC\nbar 1.0 PPC\nbar 2.0 PPC\nkept 1.0 PPC\n",
        v1: "1.0",
        file: None,
        options: r#"options => { "lpp_source=lppaix71" },"#,
        fakes: &[
            (
                "lslpp",
                r##"echo "#Package Name:Fileset:Level:State:PTF Id:Fix State:Type:Description"
list | while read -r n v a; do echo "$n:$n:$v:::C:F:the $n package::::"; done
"##,
            ),
            ("installp", "del_spec \"$2\"\n"),
        ],
    },
    Module {
        name: "yum",
        interpreter: "python3",
        body_interpreter: true,
        installed: "bar 1.0-1 x86_64\nkept 1.0-1 x86_64\nold 1.0-1 x86_64\n",
        repo: "foo 1.0-1 x86_64\nfoo 2.0-1 x86_64\nbar 1.0-1 x86_64\nbar 2.0-1 x86_64\nkept 1.0-1 x86_64\n",
        v1: "1.0-1",
        file: Some(("baz-3.1-1.x86_64.rpm", "baz 3.1-1 x86_64")),
        options: r#"options => { "enablerepo=local" },"#,
        fakes: &[
            ("rpm", FAKE_RPM),
            (
                "yum",
                r#"while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
what=$1; shift
case $what in
  check-update) u=$(updates)
    [ -n "$u" ] || exit 0
    echo "$u" | while read -r n v a o; do echo "$n.$a    $v    local"; done
    exit 100 ;;
  install|upgrade|downgrade) for p; do add_spec "$p" || exit 1; done ;;
  remove) for p; do del_spec "$p" || exit 1; done ;;
  *) echo "yum: unknown command $what" >&2; exit 1 ;;
esac
"#,
            ),
        ],
    },
    Module {
        name: "zypper",
        interpreter: "python3",
        body_interpreter: true,
        installed: "bar 1.0-1 x86_64\nkept 1.0-1 x86_64\nold 1.0-1 x86_64\n",
        repo: "foo 1.0-1 x86_64\nfoo 2.0-1 x86_64\nbar 1.0-1 x86_64\nbar 2.0-1 x86_64\nkept 1.0-1 x86_64\n",
        v1: "1.0-1",
        file: Some(("baz-3.1-1.x86_64.rpm", "baz 3.1-1 x86_64")),
        options: "",
        fakes: &[
            ("rpm", FAKE_RPM),
            (
                "zypper",
                r#"while [ $# -gt 0 ]; do
  case $1 in --version) echo "zypper 1.14.11"; exit 0 ;; -*) shift ;; *) break ;; esac
done
what=$1; shift
case $what in
  list-updates)
    echo "S | Repository | Name | Current Version | Available Version | Arch"
    echo "--+------------+------+-----------------+-------------------+-------"
    updates | while read -r n v a o; do echo "v | local      | $n  | $o | $v | $a"; done ;;
  install|update) for p; do case $p in -*) ;; *) add_spec "$p" || exit 1 ;; esac; done ;;
  remove) for p; do del_spec "$p" || exit 1; done ;;
  *) echo "zypper: unknown command $what" >&2; exit 1 ;;
esac
"#,
            ),
        ],
    },
];

/// The wrapper that logs what the agent asks a module and what it answers;
/// `@RUN@` runs the module (its arguments follow).
const LOGGER: &str = r#"#!/bin/sh
S=@STATE@
in=$(mktemp) out=$(mktemp)
cat > "$in"
@SHIFT@
{ echo "> $*"; sed 's/^/  > /' "$in"; } >> "$S/protocol"
@RUN@ "$@" < "$in" > "$out"
rc=$?
{ sed 's/^/  < /' "$out"; echo "  exit $rc"; } >> "$S/protocol"
cat "$out"
rm -f "$in" "$out"
exit $rc
"#;

fn policy(m: &Module, base: &Path) -> String {
    let interpreter = if m.body_interpreter {
        format!("interpreter => \"{}/bin/python3-logged\";", base.display())
    } else {
        String::new()
    };
    let opts = m.options;
    let file = match m.file {
        Some((name, _)) => format!(
            r#""{}/{name}" policy => "present", package_module => {n}, {opts} classes => c("file");"#,
            base.display(),
            n = m.name
        ),
        None => String::new(),
    };
    format!(
        r#"body common control {{ bundlesequence => {{ "main", "outcomes" }}; }}
body package_module {n}
{{
  query_installed_ifelapsed => "60";
  query_updates_ifelapsed => "1440";
  {interpreter}
}}
bundle agent main
{{
  packages:
      "foo" policy => "present", package_module => {n}, version => "{v1}", {opts} classes => c("foo");
      "bar" policy => "present", package_module => {n}, version => "latest", {opts} classes => c("bar");
      "old" policy => "absent", package_module => {n}, {opts} classes => c("old");
      "kept" policy => "present", package_module => {n}, {opts} classes => c("kept");
      "nosuch" policy => "present", package_module => {n}, {opts} classes => c("nosuch");
      {file}
}}
bundle agent outcomes
{{
  vars:
      "t" slist => {{ "foo", "bar", "old", "kept", "nosuch", "file" }};
  reports:
      "$(t) kept" if => "$(t)_kept";
      "$(t) repaired" if => "$(t)_repaired";
      "$(t) failed" if => "$(t)_failed";
}}
body classes c(p)
{{
  promise_kept => {{ "$(p)_kept" }};
  promise_repaired => {{ "$(p)_repaired" }};
  repair_failed => {{ "$(p)_failed" }};
}}
"#,
        n = m.name,
        v1 = m.v1,
    )
}

fn write_exe(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Sets up the fixture of a module in `base` (fake commands in
/// `base/bin`, state in `base/state`) and the module in the work
/// directory `wd`.
fn setup(m: &Module, base: &Path, wd: &Path, python: &Path) {
    let state = base.join("state");
    let bin = base.join("bin");
    let mdir = wd.join("modules/packages");
    for d in [&state, &bin, &mdir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        repo_root.join("tests/packages/fake_pm.sh"),
        state.join("fake_pm.sh"),
    )
    .unwrap();
    std::fs::write(state.join("installed"), m.installed).unwrap();
    std::fs::write(state.join("repo"), m.repo).unwrap();
    std::fs::write(state.join("protocol"), "").unwrap();
    let st = state.display().to_string();
    for (name, body) in m.fakes {
        let text = format!("#!/bin/sh\nS={st}\n. \"$S/fake_pm.sh\"\nsay \"$@\"\n{body}");
        write_exe(&bin.join(name), &text);
    }
    if let Some((name, content)) = m.file {
        std::fs::write(base.join(name), format!("{content}\n")).unwrap();
    }
    let script =
        std::fs::read_to_string(Path::new(VENDORED).join(format!("{}.mustache", m.name))).unwrap();
    let logger = LOGGER.replace("@STATE@", &st);
    if m.body_interpreter {
        // The module as the MPF installs it; the body's interpreter logs.
        write_exe(&mdir.join(m.name), &script);
        let logger = logger
            .replace("@SHIFT@", "module=$1; shift")
            .replace("@RUN@", &format!("{} \"$module\"", python.display()));
        write_exe(&bin.join("python3-logged"), &logger);
    } else {
        // The module beside the wrapper that the agent runs.
        let real = mdir.join(format!("{}.real", m.name));
        write_exe(&real, &script);
        let logger = logger
            .replace("@SHIFT@", "")
            .replace("@RUN@", &format!("\"{}\"", real.display()));
        write_exe(&mdir.join(m.name), &logger);
    }
}

/// Runs the module's promises twice with one agent; returns the record.
fn run_module(m: &Module, base: &Path, wd: &Path, ours: bool, python: &Path) -> String {
    setup(m, base, wd, python);
    let policy_file = base.join("p.cf");
    std::fs::write(&policy_file, policy(m, base)).unwrap();
    let state = base.join("state");
    let path = format!(
        "{}:{}",
        base.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut record = String::new();
    for i in 1..=2 {
        let mut cmd = if ours {
            Command::new(agent_bin())
        } else {
            Command::new("cf-agent")
        };
        cmd.env("PATH", &path)
            .env("CFENGINE_TEST_RPM_CMD", base.join("bin/rpm"))
            .env("CFENGINE_TEST_YUM_CMD", base.join("bin/yum"))
            .env("CFENGINE_TEST_ZYPPER_CMD", base.join("bin/zypper"))
            .args(["-K", "-I", "-w"])
            .arg(wd)
            .arg("-f")
            .arg(&policy_file);
        let out = run(&mut cmd);
        let protocol = std::fs::read_to_string(state.join("protocol")).unwrap_or_default();
        std::fs::write(state.join("protocol"), "").unwrap();
        let installed = std::fs::read_to_string(state.join("installed")).unwrap_or_default();
        record.push_str(&format!(
            "=== run {i}\n{}=== protocol of run {i}\n{}=== packages after run {i}\n{installed}",
            inform_lines(&out.stdout, wd, base),
            protocol
                .replace(&wd.display().to_string(), "@ROOT@")
                .replace(&base.display().to_string(), "@BASE@")
        ));
    }
    record
}

#[test]
fn vendored_modules_run_as_under_cf_agent() {
    if !Path::new(VENDORED).is_dir() {
        eprintln!("skipped: no MPF at {VENDORED}");
        return;
    }
    let with_cf = have("cf-agent");
    if !with_cf {
        eprintln!("skipped: cf-agent not installed; comparing with the recorded outputs instead");
    }
    // The system's python3 rather than a version manager's shim, which
    // takes longer to start than the module takes to run.
    let python = Some(PathBuf::from("/usr/bin/python3"))
        .filter(|p| p.is_file())
        .or_else(|| which("python3"));
    let only = std::env::var("VENDORED_CASE").ok();
    let mut problems = Vec::new();
    for m in MODULES {
        if only.as_deref().is_some_and(|o| m.name != o) {
            continue;
        }
        let interp = match m.interpreter {
            "python3" => python.clone(),
            other => which(other),
        };
        let Some(interp) = interp else {
            eprintln!("skipped {}: no {} on this host", m.name, m.interpreter);
            continue;
        };
        let tmp = tempfile::tempdir().unwrap();
        let ours = run_module(m, tmp.path(), &tmp.path().join("wd"), true, &interp);
        let theirs = with_cf.then(|| {
            let tmp = tempfile::tempdir().unwrap();
            run_module(m, tmp.path(), &cf_workdir(tmp.path()), false, &interp)
        });
        let expected = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/packages/vendored/{}.txt", m.name));
        problems.extend(check_expected(&expected, &ours, theirs.as_deref()));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
