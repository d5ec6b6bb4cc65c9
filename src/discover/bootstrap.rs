//! What bootstrapping leaves in the work directory, as cf-agent reads it
//! before any policy: `policy_server.dat` names the policy server
//! (`sys.policy_hub`, `sys.policy_hub_port`), and `state/am_policy_hub`
//! marks this host as the policy server (classes `am_policy_hub` and
//! `policy_server`, 00_basics/def.json/policy_server_classes.cf).

use super::Collector;
use super::host::NameLookup;
use super::paths::Layout;
use super::root::Root;
use crate::values::{DataType, Value};
use std::net::{IpAddr, ToSocketAddrs};

/// cf-serverd's port, the policy server's unless `policy_server.dat` says.
const DEFAULT_PORT: &str = "5308";

pub(crate) fn bootstrap_state(c: &mut Collector, root: &Root, layout: &Layout, how: NameLookup) {
    let dat = layout.workdir.join("policy_server.dat");
    let mut bootstrapped = false;
    if let Some(server) = root.read(&dat.to_string_lossy()) {
        let server = server.trim();
        if !server.is_empty() {
            bootstrapped = true;
            let (host, port) = split_host_port(server);
            let ip = match host.parse::<IpAddr>() {
                Ok(_) => Some(host.to_string()),
                Err(_) => resolve(root, how, host),
            };
            if let Some(ip) = ip {
                c.var(
                    "sys",
                    "policy_hub",
                    Value::str(ip),
                    DataType::String,
                    "source=bootstrap",
                );
            }
            let port = port.filter(|p| !p.is_empty()).unwrap_or(DEFAULT_PORT);
            c.var(
                "sys",
                "policy_hub_port",
                Value::str(port),
                DataType::String,
                "source=bootstrap",
            );
        }
    }
    let marker = layout.statedir.join("am_policy_hub");
    if root.exists(&marker.to_string_lossy()) {
        c.class(
            "am_policy_hub",
            "source=bootstrap,deprecated,alias=policy_server",
        );
        c.class(
            "policy_server",
            "inventory,attribute_name=CFEngine roles,source=bootstrap",
        );
    }
    if bootstrapped {
        roles(c, root, layout);
    }
}

/// CFEngine 3.24's `sys.cfengine_roles` of a bootstrapped host, with
/// `cfengine_client` or `cfengine_reporting_hub`: a client, a policy
/// server, a reporting hub (a `cf-hub` in the bin directory) or both
/// (crate::schema::newer::NEWER_SYS_VARS).
fn roles(c: &mut Collector, root: &Root, layout: &Layout) {
    let hub = root.exists(&layout.bindir.join("cf-hub").to_string_lossy());
    let server = c.has_class("policy_server");
    let names: &[&str] = match (server, hub) {
        (false, false) => {
            c.class("cfengine_client", "report");
            &["Client"]
        }
        (true, false) => &["Policy server"],
        (false, true) => &["Reporting hub"],
        (true, true) => &["Policy server", "Reporting hub"],
    };
    if hub {
        c.class("cfengine_reporting_hub", "report");
    }
    c.var(
        "sys",
        "cfengine_roles",
        Value::List(names.iter().map(|n| n.to_string()).collect()),
        DataType::Slist,
        "inventory,attribute_name=CFEngine roles",
    );
}

/// `host`, `host:port`, `[v6]:port` or a bare IPv6 address.
pub fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        return (host, after.strip_prefix(':'));
    }
    match s.split_once(':') {
        Some((host, port)) if !port.contains(':') => (host, Some(port)),
        _ => (s, None),
    }
}

/// The first address the resolver gives for a host name; from the root's
/// `/etc/hosts` only when discovery works on a fake tree.
fn resolve(root: &Root, how: NameLookup, host: &str) -> Option<String> {
    match how {
        NameLookup::System => (host, 0)
            .to_socket_addrs()
            .ok()?
            .next()
            .map(|a| a.ip().to_string()),
        NameLookup::HostsFile => {
            let hosts = root.read("/etc/hosts")?;
            hosts.lines().find_map(|line| {
                let line = line.split('#').next().unwrap_or("");
                let mut fields = line.split_whitespace();
                let addr = fields.next()?;
                fields
                    .any(|n| n.eq_ignore_ascii_case(host))
                    .then(|| addr.to_string())
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_as_cf_agent_splits_them() {
        assert_eq!(split_host_port("192.0.2.9"), ("192.0.2.9", None));
        assert_eq!(
            split_host_port("192.0.2.9:1234"),
            ("192.0.2.9", Some("1234"))
        );
        assert_eq!(
            split_host_port("hub.example:99"),
            ("hub.example", Some("99"))
        );
        assert_eq!(split_host_port("[fd00::1]:5308"), ("fd00::1", Some("5308")));
        assert_eq!(split_host_port("fd00::1"), ("fd00::1", None));
    }
}
