//! Host name, fully qualified name and domain, as cf-agent derives them:
//! the node name, and the canonical name `gethostbyname` returns for it.
//!
//! We answer the name lookup from `/etc/hosts` only (the `files` source of
//! nsswitch). cf-agent would go on to DNS when the host is not listed
//! there; we do not, so that discovery never waits on the network. On a
//! host whose name is only known to DNS, `sys.fqhost` is then the bare node
//! name.

use super::Collector;
use super::root::Root;
use std::net::Ipv4Addr;

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
pub(crate) fn discover_names(c: &mut Collector, root: &Root, raw_nodename: &str) -> Names {
    let nodename = raw_nodename.to_lowercase();
    let hosts = root.read("/etc/hosts").unwrap_or_default();
    let dnsname = hosts_lookup(&hosts, raw_nodename)
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

    let aliases = hosts_lookup(&hosts, &fqname).map(|(_, a)| a);
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
