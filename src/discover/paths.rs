//! The work directory and the directories derived from it, the paths of
//! the CFEngine components, and the policy entry file.

use super::Collector;
use super::root::Root;
use crate::values::canon::canonify;
use std::path::{Component, Path, PathBuf};

/// Where things live for one work directory (`sys.workdir`,
/// `sys.inputdir`, `sys.statedir`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub workdir: PathBuf,
    pub inputdir: PathBuf,
    pub masterdir: PathBuf,
    pub statedir: PathBuf,
    pub logdir: PathBuf,
    pub piddir: PathBuf,
    pub bindir: PathBuf,
}

/// The work directory of Debian's cfengine3 package, which moves logs,
/// pid files and binaries to the FHS places.
const DEBIAN_WORKDIR: &str = "/var/lib/cfengine3";

impl Layout {
    /// CFEngine's layout for a work directory: inputs, masterfiles and state
    /// inside it; logs, pid files and binaries inside it too, except for the
    /// Debian package's work directory, whose build put them in
    /// `/var/log/cfengine3`, `/var/run/cfengine3` and `/usr/bin`.
    pub fn for_workdir(workdir: &Path) -> Layout {
        let w = workdir.to_path_buf();
        let (logdir, piddir, bindir) = if w == Path::new(DEBIAN_WORKDIR) {
            (
                PathBuf::from("/var/log/cfengine3"),
                PathBuf::from("/var/run/cfengine3"),
                PathBuf::from("/usr/bin"),
            )
        } else {
            (w.clone(), w.clone(), w.join("bin"))
        };
        Layout {
            inputdir: w.join("inputs"),
            masterdir: w.join("masterfiles"),
            statedir: w.join("state"),
            logdir,
            piddir,
            bindir,
            workdir: w,
        }
    }
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The directory variables and Linux's fixed system file locations.
pub(crate) fn dir_vars(c: &mut Collector, l: &Layout) {
    c.sys("workdir", s(&l.workdir), "source=agent");
    // CFEngine 3.26's (crate::schema::newer::NEWER_SYS_VARS).
    c.sys("moduledir", s(&l.workdir.join("modules")), "source=agent");
    c.sys("fstab", "/etc/fstab", "source=agent");
    c.sys("resolv", "/etc/resolv.conf", "source=agent");
    c.sys("maildir", "/var/spool/mail", "source=agent");
    c.sys("exports", "/etc/exports", "source=agent");
    c.sys("logdir", s(&l.logdir), "source=agent");
    c.sys("piddir", s(&l.piddir), "source=agent");
    c.sys("statedir", s(&l.statedir), "source=agent");
    c.sys("masterdir", s(&l.masterdir), "source=agent");
    c.sys("inputdir", s(&l.inputdir), "source=agent");
    c.sys("keydir", s(&l.workdir.join("ppkeys")), "source=agent");
    c.sys("bindir", s(&l.bindir), "source=agent");
    c.sys(
        "default_policy_path",
        s(&l.inputdir.join("promises.cf")),
        "source=agent",
    );
    c.sys(
        "failsafe_policy_path",
        s(&l.inputdir.join("failsafe.cf")),
        "source=agent",
    );
    c.sys(
        "update_policy_path",
        s(&l.inputdir.join("update.cf")),
        "source=agent",
    );
}

/// The CFEngine components cf-agent looks for in its bin directory; each
/// one found becomes `sys.cf_<name>`, its path in double quotes.
const COMPONENTS: [&str; 16] = [
    "cf-twin",
    "cf-agent",
    "cf-serverd",
    "cf-monitord",
    "cf-know",
    "cf-report",
    "cf-key",
    "cf-runagent",
    "cf-execd",
    "cf-hub",
    "cf-reactor",
    "cf-promises",
    "cf-upgrade",
    "cf-net",
    "cf-check",
    "cf-secret",
];

/// As cf-agent 3.21 defines them: only the components the bin directory
/// holds, and `sys.cf_twin` as the bin directory's `cf-agent` when it has
/// no `cf-twin`. Our own binary is no stand-in: a work directory that
/// runs policy calling `$(sys.cf_agent)` links `bin/cf-agent` to it, as
/// the package does.
pub(crate) fn component_vars(c: &mut Collector, root: &Root, l: &Layout) {
    let tags = "cfe_internal,source=agent";
    let quoted = |p: &Path| format!("\"{}\"", p.to_string_lossy());
    // WORKDIR/bin holds a few files: one listing beats sixteen probes
    // that mostly fail. /usr/bin (Debian's) holds thousands: probe it.
    let found: Vec<bool> = if l.bindir == l.workdir.join("bin") {
        root.present_in(&s(&l.bindir), &COMPONENTS)
    } else {
        COMPONENTS
            .iter()
            .map(|name| root.exists(&s(&l.bindir.join(name))))
            .collect()
    };
    for (name, _) in COMPONENTS.iter().zip(&found).filter(|(_, f)| **f) {
        c.sys(&canonify(name), quoted(&l.bindir.join(name)), tags);
    }
    // No twin: the agent stands in for it.
    if !found[0] && found[1] {
        c.sys("cf_twin", quoted(&l.bindir.join("cf-agent")), tags);
    }
}

/// Removes `.` and folds `..` without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in p.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `sys.policy_entry_filename`, `_dirname` and `_basename`: the entry file
/// as an absolute path.
pub(crate) fn policy_entry_vars(c: &mut Collector, entry: &Path) {
    let abs = if entry.is_absolute() {
        normalize(entry)
    } else {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        normalize(&cwd.join(entry))
    };
    let dirname = abs.parent().map(s).unwrap_or_else(|| "/".to_string());
    let basename = abs
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    c.sys("policy_entry_filename", s(&abs), "source=agent");
    c.sys("policy_entry_dirname", dirname, "source=agent");
    c.sys("policy_entry_basename", basename, "source=agent");
}
