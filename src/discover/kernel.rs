//! What `uname` tells cf-agent: kernel name, node name, release, version
//! and machine, read from `/proc/sys/kernel` (the same strings the kernel
//! hands to uname(2)), and the classes and variables derived from them.

use super::Collector;
use super::root::Root;
use crate::values::canon::canonify;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Uname {
    /// Lowercased, as cf-agent keeps it (`linux`).
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    /// Lowercased (`x86_64`).
    pub machine: String,
}

impl Uname {
    pub(crate) fn read(root: &Root) -> Uname {
        if root.is_host() {
            return Uname::of_kernel();
        }
        let field = |name: &str| {
            root.read(&format!("/proc/sys/kernel/{name}"))
                .map(|s| s.trim_end_matches('\n').to_string())
        };
        Uname {
            sysname: field("ostype")
                .unwrap_or_else(|| std::env::consts::OS.to_string())
                .to_lowercase(),
            nodename: field("hostname").unwrap_or_default(),
            release: field("osrelease").unwrap_or_default(),
            version: field("version").unwrap_or_default(),
            // /proc/sys/kernel/arch exists since Linux 6.1; before that the
            // architecture we were built for is what uname would say.
            machine: field("arch")
                .unwrap_or_else(|| std::env::consts::ARCH.to_string())
                .to_lowercase(),
        }
    }

    /// The same five strings from uname(2): one call where the files of
    /// `/proc/sys/kernel` take five opens and ten reads.
    fn of_kernel() -> Uname {
        let u = rustix::system::uname();
        let text = |s: &std::ffi::CStr| s.to_string_lossy().into_owned();
        Uname {
            sysname: text(u.sysname()).to_lowercase(),
            nodename: text(u.nodename()),
            release: text(u.release()),
            version: text(u.version()),
            machine: text(u.machine()).to_lowercase(),
        }
    }
}

/// The platform class (`linux`) and `sys.class`.
pub(crate) fn class_and_arch(c: &mut Collector, u: &Uname) {
    // cf-agent matches the kernel name against its platform table; of its
    // entries only `linux` can match on the hosts we run on.
    if u.sysname == "linux" {
        c.class(
            "linux",
            "inventory,attribute_name=none,source=agent,derived-from=sys.class",
        );
        c.sys(
            "class",
            "linux",
            "inventory,source=agent,attribute_name=Kernel",
        );
    }
}

/// `sys.os`, `sys.release`, `sys.version`, `sys.arch` and the fixed system
/// file locations of Linux.
pub(crate) fn uname_vars(c: &mut Collector, u: &Uname) {
    c.sys("os", u.sysname.clone(), "source=agent");
    c.sys(
        "release",
        u.release.clone(),
        "inventory,source=agent,attribute_name=Kernel Release",
    );
    c.sys("version", u.version.clone(), "source=agent");
    c.sys(
        "arch",
        u.machine.clone(),
        "inventory,source=agent,attribute_name=Architecture",
    );
}

/// The word-size, kernel and architecture classes, `sys.long_arch`,
/// `sys.ostype` and the compile-time platform class.
pub(crate) fn arch_classes(c: &mut Collector, u: &Uname) {
    c.class(&format!("{}_bit", usize::BITS), "source=agent");
    c.class(
        &format!("{}_{}", u.sysname, u.release),
        "inventory,attribute_name=none,source=agent,derived-from=sys.sysname,derived-from=sys.release",
    );
    c.class(&u.machine, "source=agent,derived-from=sys.machine");
    c.class(
        &format!("{}_{}", u.sysname, u.machine),
        "source=agent,derived-from=sys.sysname,derived-from=sys.machine",
    );
    c.class(
        &format!("{}_{}_{}", u.sysname, u.machine, u.release),
        "source=agent,derived-from=sys.sysname,derived-from=sys.machine,derived-from=sys.release",
    );

    let long_arch = canonify(&format!(
        "{}_{}_{}_{}",
        u.sysname, u.machine, u.release, u.version
    ));
    c.sys("long_arch", long_arch.clone(), "source=agent");
    c.class(&long_arch, "source=agent,derived-from=sys.long_arch");

    let ostype = canonify(&format!("{}_{}", u.sysname, u.machine));
    c.sys("ostype", ostype.clone(), "source=agent");
    c.class(
        &ostype,
        "inventory,attribute_name=none,source=agent,derived-from=sys.ostype",
    );

    c.class(
        &format!("compiled_on_{}", canonify(compiled_on())),
        "source=agent",
    );
}

/// The GNU triplet's system part cf-agent was configured for
/// (`linux-gnu`), here the target we were compiled for.
fn compiled_on() -> &'static str {
    if cfg!(all(target_os = "linux", target_env = "musl")) {
        "linux-musl"
    } else if cfg!(target_os = "linux") {
        "linux-gnu"
    } else {
        std::env::consts::OS
    }
}
