//! Host name, fully qualified name and domain, as cf-agent derives them:
//! the node name, and the canonical name `gethostbyname` returns for it.
//!
//! The lookup goes through the C library's resolver by default, exactly as
//! cf-agent's does (nsswitch: `/etc/hosts`, then DNS...), so it can wait on
//! DNS as cf-agent can. [`NameLookup::HostsFile`] answers from the root's
//! `/etc/hosts` alone, for tests on a fake tree.

use super::Collector;
use super::root::Root;
use std::ffi::{CStr, CString, c_char, c_int};
use std::net::Ipv4Addr;

/// How the host's own name is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameLookup {
    /// The C library's `gethostbyname_r`, as cf-agent.
    System,
    /// The IPv4 entries of `/etc/hosts` below the discovery root.
    HostsFile,
}

unsafe extern "C" {
    // glibc and musl; not bound by the libc crate.
    fn gethostbyname_r(
        name: *const c_char,
        ret: *mut libc::hostent,
        buf: *mut c_char,
        buflen: libc::size_t,
        result: *mut *mut libc::hostent,
        h_errnop: *mut c_int,
    ) -> c_int;
}

/// Canonical name and aliases from the C library's resolver.
fn system_lookup(name: &str) -> Option<(String, Vec<String>)> {
    let cname = CString::new(name).ok()?;
    // Not zeroed: the resolver writes what it returns, and zeroing would
    // touch (and fault in) four pages of which a lookup uses a few bytes.
    let mut buf: Vec<c_char> = Vec::with_capacity(16 * 1024);
    loop {
        // SAFETY: every pointer is valid for the call (`buf` for writes of
        // its capacity); the resolver writes the entry into `ret` and its
        // strings into `buf`, which outlive the reads below, and the reads
        // are of what it wrote. A null `result` means not found.
        unsafe {
            let mut ret: libc::hostent = std::mem::zeroed();
            let mut result: *mut libc::hostent = std::ptr::null_mut();
            let mut herr: c_int = 0;
            let rc = gethostbyname_r(
                cname.as_ptr(),
                &mut ret,
                buf.as_mut_ptr(),
                buf.capacity(),
                &mut result,
                &mut herr,
            );
            if rc == libc::ERANGE && buf.capacity() < 1 << 20 {
                buf.reserve_exact(buf.capacity() * 4);
                continue;
            }
            if rc != 0 || result.is_null() || (*result).h_name.is_null() {
                return None;
            }
            let canonical = CStr::from_ptr((*result).h_name)
                .to_string_lossy()
                .into_owned();
            let mut aliases = Vec::new();
            let mut p = (*result).h_aliases;
            while !p.is_null() && !(*p).is_null() {
                aliases.push(CStr::from_ptr(*p).to_string_lossy().into_owned());
                p = p.add(1);
            }
            return Some((canonical, aliases));
        }
    }
}

fn lookup(how: NameLookup, root: &Root, name: &str) -> Option<(String, Vec<String>)> {
    match how {
        NameLookup::System => system_lookup(name),
        NameLookup::HostsFile => hosts_lookup(&root.read("/etc/hosts").unwrap_or_default(), name),
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Names {
    pub fqname: String,
    pub uqname: String,
    pub domain: String,
    /// Other names of the fully qualified name's hosts entry.
    pub aliases: Option<Vec<String>>,
}

/// One IPv4 `/etc/hosts` entry that names `name`: its canonical name and
/// aliases. (gethostbyname only returns IPv4 entries.)
pub(crate) fn hosts_lookup(hosts: &str, name: &str) -> Option<(String, Vec<String>)> {
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let Some(addr) = fields.next() else { continue };
        if addr.parse::<Ipv4Addr>().is_err() {
            continue;
        }
        let names: Vec<&str> = fields.collect();
        if names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            let canonical = names[0].to_string();
            let aliases = names[1..].iter().map(|s| s.to_string()).collect();
            return Some((canonical, aliases));
        }
    }
    None
}

/// Splits the node name and the DNS name into fully qualified name, short
/// name and domain the way cf-agent does.
pub(crate) fn calculate_domain_name(nodename: &str, dnsname: &str) -> (String, String, String) {
    let fqname = if dnsname.contains('.') {
        dnsname.to_string()
    } else {
        nodename.to_string()
    };
    if let Some(rest) = fqname.strip_prefix(nodename)
        && let Some(domain) = rest.strip_prefix('.')
    {
        return (fqname.clone(), nodename.to_string(), domain.to_string());
    }
    match nodename.split_once('.') {
        Some((uq, domain)) => (fqname, uq.to_string(), domain.to_string()),
        None => (fqname, nodename.to_string(), String::new()),
    }
}

/// Defines the host name classes and `sys.host`, `sys.uqhost`,
/// `sys.fqhost`, `sys.domain`.
pub(crate) fn discover_names(
    c: &mut Collector,
    root: &Root,
    how: NameLookup,
    raw_nodename: &str,
) -> Names {
    let nodename = raw_nodename.to_lowercase();
    let first = lookup(how, root, raw_nodename);
    let dnsname = first
        .as_ref()
        .map(|(n, _)| n.to_lowercase())
        .unwrap_or_default();
    let (fqname, uqname, domain) = calculate_domain_name(&nodename, &dnsname);

    // a.b.c defines a.b.c, b.c and c.
    let mut rest = fqname.as_str();
    loop {
        c.class(
            rest,
            "inventory,attribute_name=none,source=agent,derived-from=sys.fqhost",
        );
        match rest.split_once('.') {
            Some((_, tail)) => rest = tail,
            None => break,
        }
    }
    c.class(&uqname, "source=agent,derived-from=sys.uqhost");
    c.class(&domain, "source=agent,derived-from=sys.domain");

    c.sys(
        "host",
        nodename.clone(),
        "inventory,source=agent,attribute_name=none",
    );
    c.sys(
        "uqhost",
        uqname.clone(),
        "inventory,source=agent,attribute_name=none",
    );
    c.sys(
        "fqhost",
        fqname.clone(),
        "inventory,source=agent,attribute_name=Host name",
    );
    c.sys("domain", domain.clone(), "source=agent");

    // Most hosts' fully qualified name is the node name itself: the
    // resolver was asked that already (its files read, its sockets tried).
    let aliases = if fqname == raw_nodename {
        first
    } else {
        lookup(how, root, &fqname)
    }
    .map(|(_, a)| a);
    Names {
        fqname,
        uqname,
        domain,
        aliases,
    }
}

/// The aliases of the fully qualified name's hosts entry become classes.
pub(crate) fn alias_classes(c: &mut Collector, names: &Names) {
    for a in names.aliases.iter().flatten() {
        c.class(
            a,
            "inventory,attribute_name=none,source=agent,based-on=sys.fqhost",
        );
    }
}
