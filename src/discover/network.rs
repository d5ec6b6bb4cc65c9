//! Interfaces and addresses: the IPv4 and IPv6 address classes, `sys.ipv4`
//! and its per-interface arrays, MAC addresses and interface flags, and
//! the `/proc/net` views `sys.inet`, `sys.inet6` and `sys.interfaces_data`.
//!
//! cf-agent lists the interfaces that have an IPv4 address with the
//! SIOCGIFCONF ioctl and reads their MAC addresses with SIOCGIFHWADDR, and
//! so do we (on a test's fake root, `/sys/class/net` stands in for the
//! latter). Everything else comes from `/proc/net`. cf-agent 3.21 learns
//! IPv6 addresses, and the MAC addresses of interfaces without IPv4, by
//! running `/sbin/ifconfig -a`; we read the same facts from
//! `/proc/net/if_inet6` and the devices' hardware facts as above, but
//! only when `/sbin/ifconfig` exists, since without it cf-agent finds none
//! of them.

use super::Collector;
use super::root::Root;
use crate::host::netif::{Hardware, Interfaces};
use crate::values::canon::canonify;
use crate::values::value::{DataType, Value};
use serde_json::{Map, Value as Json, json};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::net::{Ipv4Addr, Ipv6Addr};

const IFF_UP: u32 = 0x1;
const IFF_BROADCAST: u32 = 0x2;
const IFF_DEBUG: u32 = 0x4;
const IFF_LOOPBACK: u32 = 0x8;
const IFF_POINTOPOINT: u32 = 0x10;
const IFF_NOTRAILERS: u32 = 0x20;
const IFF_RUNNING: u32 = 0x40;
const IFF_NOARP: u32 = 0x80;
const IFF_PROMISC: u32 = 0x100;
const IFF_ALLMULTI: u32 = 0x200;
const IFF_MULTICAST: u32 = 0x1000;

const INV: &str = "inventory,attribute_name=none,source=agent";
const PROC_TAGS: &str = "networking,/proc,source=agent,procfs";

/// One IPv4 address of an interface, as SIOCGIFCONF lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Iface {
    /// The interface name or address label (`eth0`, `eth0:1`).
    pub name: String,
    pub addr: Ipv4Addr,
    /// The interface flags (`IFF_UP`, `IFF_LOOPBACK`...).
    pub flags: u32,
}

/// The interface flags as cf-agent spells them (`up broadcast running
/// multicast`).
pub fn parse_iface_flags(flags: u32) -> String {
    const WORDS: [(u32, &str); 11] = [
        (IFF_UP, "up"),
        (IFF_BROADCAST, "broadcast"),
        (IFF_DEBUG, "debug"),
        (IFF_LOOPBACK, "loopback"),
        (IFF_POINTOPOINT, "pointopoint"),
        (IFF_NOTRAILERS, "notrailers"),
        (IFF_RUNNING, "running"),
        (IFF_NOARP, "noarp"),
        (IFF_PROMISC, "promisc"),
        (IFF_ALLMULTI, "allmulti"),
        (IFF_MULTICAST, "multicast"),
    ];
    WORDS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, w)| *w)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The kernel's IPv4 interface addresses, from SIOCGIFCONF as cf-agent
/// asks (on the socket `kernel` when one is open already).
pub(crate) fn kernel_ipv4(kernel: Option<&Interfaces>) -> Vec<Ipv4Iface> {
    let opened;
    let kernel = match kernel {
        Some(k) => k,
        None => match Interfaces::open() {
            Ok(k) => {
                opened = k;
                &opened
            }
            Err(_) => return Vec::new(),
        },
    };
    kernel
        .ipv4()
        .into_iter()
        .map(|a| Ipv4Iface {
            name: a.name,
            addr: a.addr,
            flags: a.flags,
        })
        .collect()
}

/// Where the link facts of a device (hardware type, MAC address) come
/// from: the kernel's SIOCGIFHWADDR on the host, which tells both in one
/// call, or `/sys/class/net` below a test's fake root.
pub(crate) struct Links<'a> {
    pub(crate) root: &'a Root,
    pub(crate) kernel: Option<&'a Interfaces>,
    /// The kernel's answers so far, by device: discovery asks for a
    /// device's type and then for its address, one ioctl for both.
    pub(crate) asked: RefCell<Vec<(String, Option<Hardware>)>>,
}

impl Links<'_> {
    fn hardware(&self, kernel: &Interfaces, device: &str) -> Option<Hardware> {
        if let Some((_, hw)) = self.asked.borrow().iter().find(|(d, _)| d == device) {
            return hw.clone();
        }
        let hw = kernel.hardware(device);
        self.asked
            .borrow_mut()
            .push((device.to_string(), hw.clone()));
        hw
    }

    /// The MAC address as cf-agent prints SIOCGIFHWADDR's: the first six
    /// bytes in lower-case hex, zeros for a device without one (tun,
    /// wireguard).
    fn mac(&self, device: &str) -> Option<String> {
        if let Some(k) = self.kernel {
            let hw = self.hardware(k, device)?;
            return Some(
                hw.addr[..6]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":"),
            );
        }
        let text = self
            .root
            .read(&format!("/sys/class/net/{device}/address"))?;
        let mut bytes: Vec<String> = text
            .trim()
            .split(':')
            .filter(|b| !b.is_empty())
            .take(6)
            .map(|b| format!("{:0>2}", b.to_lowercase()))
            .collect();
        bytes.resize(6, "00".to_string());
        Some(bytes.join(":"))
    }

    /// Whether the device is Ethernet (`ARPHRD_ETHER`).
    fn is_ether(&self, device: &str) -> bool {
        match self.kernel {
            Some(k) => self
                .hardware(k, device)
                .is_some_and(|hw| hw.kind == libc::ARPHRD_ETHER),
            None => self
                .root
                .read(&format!("/sys/class/net/{device}/type"))
                .is_some_and(|t| t.trim() == "1"),
        }
    }
}

/// Interface name patterns to skip, from `WORKDIR/inputs/ignore_interfaces.rx`.
fn ignore_patterns(root: &Root, layout: &super::Layout) -> Vec<String> {
    let path = layout.workdir.join("inputs").join("ignore_interfaces.rx");
    root.read(&path.to_string_lossy())
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn ignored(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| {
        p == name || crate::values::regex::Regex::new(p).is_ok_and(|re| re.is_full_match(name))
    })
}

/// The MAC address of a device (of `eth0` for the label `eth0:1`).
fn mac_address(links: &Links, name: &str) -> Option<String> {
    links.mac(name.split(':').next().unwrap_or(name))
}

/// Compares interface names as ifconfig sorts them: digit runs by value.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let na = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let nb = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let va: u128 = std::str::from_utf8(&a[..na])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let vb: u128 = std::str::from_utf8(&b[..nb])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                match va.cmp(&vb) {
                    Ordering::Equal => {
                        a = &a[na..];
                        b = &b[nb..];
                    }
                    o => return o,
                }
            }
            (Some(x), Some(y)) => match x.cmp(y) {
                Ordering::Equal => {
                    a = &a[1..];
                    b = &b[1..];
                }
                o => return o,
            },
        }
    }
}

/// One line of `/proc/net/if_inet6`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Inet6Addr {
    pub addr: Ipv6Addr,
    pub ifindex: u64,
    pub prefix: u64,
    pub scope: u64,
    pub raw_flags: String,
    pub name: String,
}

fn parse_ipv6_hex(s: &str) -> Option<Ipv6Addr> {
    if s.len() != 32 {
        return None;
    }
    u128::from_str_radix(s, 16).ok().map(Ipv6Addr::from)
}

pub(crate) fn parse_if_inet6(text: &str) -> Vec<Inet6Addr> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_ascii_whitespace().collect();
            if f.len() < 6 {
                return None;
            }
            Some(Inet6Addr {
                addr: parse_ipv6_hex(f[0])?,
                ifindex: u64::from_str_radix(f[1], 16).ok()?,
                prefix: u64::from_str_radix(f[2], 16).ok()?,
                scope: u64::from_str_radix(f[3], 16).ok()?,
                raw_flags: f[4].to_string(),
                name: f[5].to_string(),
            })
        })
        .collect()
}

/// An IPv6 address with every group in hex and no compression
/// (`fd00:0:0:0:0:0:0:2`), as `sys.inet6` prints them.
fn ipv6_full(a: &Ipv6Addr) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(39);
    for (i, s) in a.segments().iter().enumerate() {
        let sep = if i == 0 { "" } else { ":" };
        let _ = write!(out, "{sep}{s:x}");
    }
    out
}

/// `pairs` sorted by name into a JSON object of strings; of a name given
/// twice the last value is kept, in the first one's place. Sorting the
/// borrowed pairs and copying each text once costs a third of collecting
/// owned pairs and sorting those (discovery reads ~350 of them).
fn sorted_text_object<'a>(mut pairs: Vec<(&'a str, &'a str)>) -> Map<String, Json> {
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Map::with_capacity(pairs.len());
    for (name, value) in pairs {
        out.insert(name.to_string(), Json::String(value.to_string()));
    }
    out
}

/// The interface names of `/proc/net/dev`, in file order.
fn proc_net_dev_names(text: &str) -> Vec<String> {
    text.lines()
        .skip(2)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim().to_string()))
        .collect()
}

/// What the interface walk gathers for the `sys` lists set at its end.
#[derive(Default)]
struct InterfaceLists {
    /// The interfaces with an IPv4 address and a MAC address, for
    /// `sys.interfaces`.
    interfaces: Vec<String>,
    /// The MAC addresses found, for `sys.hardware_addresses`.
    hardware: Vec<String>,
    /// The flag words of each IPv4 address, for `sys.hardware_flags`.
    flags: Vec<String>,
    /// Every address, IPv4 then IPv6, for `sys.ip_addresses`.
    ips: Vec<String>,
    /// The canonified names whose `sys.hardware_mac` is set, so that the
    /// ifconfig walk does not set it twice.
    macs_known: Vec<String>,
}

impl InterfaceLists {
    /// Sets the `sys` lists that have at least one item.
    fn publish(self, c: &mut Collector) {
        set_list(
            c,
            "interfaces",
            self.interfaces,
            "inventory,source=agent,attribute_name=Interfaces",
        );
        set_list(
            c,
            "hardware_addresses",
            self.hardware,
            "inventory,source=agent,attribute_name=MAC addresses",
        );
        set_list(c, "hardware_flags", self.flags, "source=agent");
        set_list(c, "ip_addresses", self.ips, "source=agent");
    }
}

/// Sets `sys.<name>` to `items` unless there are none.
fn set_list(c: &mut Collector, name: &str, items: Vec<String>, tags: &str) {
    if !items.is_empty() {
        c.var("sys", name, Value::List(items), DataType::Slist, tags);
    }
}

/// The address classes and variables of the interfaces.
pub(crate) fn interfaces(
    c: &mut Collector,
    links: &Links,
    layout: &super::Layout,
    ipv4: &[Ipv4Iface],
) {
    let root = links.root;
    let patterns = ignore_patterns(root, layout);
    let mut lists = InterfaceLists::default();
    ipv4_interfaces(c, links, &patterns, ipv4, &mut lists);
    if root.exists("/sbin/ifconfig") {
        ifconfig_interfaces(c, links, &mut lists);
    }
    lists.publish(c);
}

/// The interfaces with an IPv4 address, in kernel order, less the ignored
/// ones: their names, flags, addresses and MAC addresses.
fn ipv4_interfaces(
    c: &mut Collector,
    links: &Links,
    patterns: &[String],
    ipv4: &[Ipv4Iface],
    lists: &mut InterfaceLists,
) {
    let mut last_name = String::new();
    let mut address_set = false;
    for iface in ipv4.iter().filter(|i| !i.name.is_empty()) {
        if ignored(patterns, &iface.name) {
            continue;
        }
        if iface.name != last_name {
            last_name = iface.name.clone();
            c.sys("interface", iface.name.clone(), "source=agent");
        }
        let canon = canonify(&iface.name);
        c.class(&format!("net_iface_{canon}"), "source=agent");

        let words = parse_iface_flags(iface.flags);
        if !words.is_empty() {
            c.sys(
                &format!("interface_flags[{}]", iface.name),
                words.clone(),
                "source=agent",
            );
            lists.flags.push(words);
        }

        if iface.flags & IFF_UP != 0 {
            // `sys.ipv4` is the first address up that is not loopback.
            let primary = !address_set && iface.flags & IFF_LOOPBACK == 0;
            ipv4_address(c, iface, &canon, primary);
            address_set |= primary;
            lists.ips.push(iface.addr.to_string());
        }

        // No MAC address for loopback.
        if iface.flags & IFF_LOOPBACK == 0
            && let Some(mac) = mac_address(links, &iface.name)
        {
            c.sys(
                &format!("hardware_mac[{canon}]"),
                mac.clone(),
                "source=agent",
            );
            lists.hardware.push(mac.clone());
            lists.interfaces.push(iface.name.clone());
            lists.macs_known.push(canon.clone());
            c.class(&format!("mac_{mac}"), INV);
        }
    }
}

/// The classes and `sys` variables of one IPv4 address of an interface
/// that is up; `primary` makes it `sys.ipv4` too.
fn ipv4_address(c: &mut Collector, iface: &Ipv4Iface, canon: &str, primary: bool) {
    let txt = iface.addr.to_string();
    c.class(&txt, INV);
    // ipv4_192_0_2_2, ipv4_192_0_2, ipv4_192_0, ipv4_192
    let mut ip = format!("ipv4_{txt}");
    c.class(&ip, INV);
    if primary {
        c.sys(
            "ipv4",
            txt.clone(),
            "inventory,source=agent,attribute_name=none",
        );
    }
    while let Some(dot) = ip.rfind('.') {
        ip.truncate(dot);
        c.class(&ip, INV);
    }
    c.sys(&format!("ipv4[{canon}]"), txt.clone(), "source=agent");
    let octets: Vec<&str> = txt.split('.').collect();
    for n in (1..=3).rev() {
        c.sys(
            &format!("ipv4_{n}[{canon}]"),
            octets[..n].join("."),
            "source=agent",
        );
    }
    c.sys(
        &format!("ip2iface[{txt}]"),
        iface.name.clone(),
        "source=agent",
    );
}

/// What cf-agent learns from `ifconfig -a`: the IPv6 addresses of every
/// interface, and the MAC addresses of Ethernet devices the IPv4 walk did
/// not give one.
fn ifconfig_interfaces(c: &mut Collector, links: &Links, lists: &mut InterfaceLists) {
    let root = links.root;
    let dev_names = root
        .read("/proc/net/dev")
        .map(|t| proc_net_dev_names(&t))
        .unwrap_or_default();
    let v6 = root
        .read("/proc/net/if_inet6")
        .map(|t| parse_if_inet6(&t))
        .unwrap_or_default();
    for name in &ifconfig_order(dev_names, &v6) {
        for a in v6.iter().filter(|a| &a.name == name) {
            if a.addr == Ipv6Addr::LOCALHOST {
                continue;
            }
            let txt = a.addr.to_string();
            c.class(&txt, INV);
            c.class(&format!("ipv6_{txt}"), INV);
            lists.ips.push(txt);
        }
        let canon = canonify(name);
        if links.is_ether(name)
            && !lists.macs_known.contains(&canon)
            && let Some(mac) = mac_address(links, name)
        {
            c.sys(
                &format!("hardware_mac[{canon}]"),
                mac.clone(),
                "source=agent,derived-from=ifconfig",
            );
            lists.hardware.push(mac);
            lists.macs_known.push(canon);
        }
    }
}

/// The interfaces `ifconfig -a` shows: those of `/proc/net/dev`, then any
/// other that has an IPv6 address, sorted by name as ifconfig sorts them.
fn ifconfig_order(mut names: Vec<String>, v6: &[Inet6Addr]) -> Vec<String> {
    for a in v6 {
        if !names.contains(&a.name) {
            names.push(a.name.clone());
        }
    }
    names.sort_by(|a, b| natural_cmp(a, b));
    names
}

fn hex_u64(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

fn route_flags(flags: u64, default: Option<bool>) -> Vec<&'static str> {
    const RTF_UP: u64 = 0x1;
    const RTF_GATEWAY: u64 = 0x2;
    const RTF_HOST: u64 = 0x4;
    let mut out = vec![
        if flags & RTF_UP != 0 { "up" } else { "down" },
        if flags & RTF_HOST != 0 { "host" } else { "net" },
    ];
    if let Some(d) = default {
        out.push(if d { "default" } else { "not_default" });
    }
    out.push(if flags & RTF_GATEWAY != 0 {
        "gateway"
    } else {
        "local"
    });
    out
}

/// One well-formed line of `/proc/net/route`: its fields, and those of
/// them that are addresses and flags.
struct RouteLine<'a> {
    fields: Vec<&'a str>,
    dest: Ipv4Addr,
    gateway: Ipv4Addr,
    flags: u64,
    mask: Ipv4Addr,
    metric: i64,
}

/// The well-formed lines of `/proc/net/route`, in order.
fn route_lines(text: &str) -> impl Iterator<Item = RouteLine<'_>> {
    let ipv4 = |s: &str| hex_u64(s).map(|v| Ipv4Addr::from((v as u32).swap_bytes()));
    text.lines().skip(1).filter_map(move |line| {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() < 11 {
            return None;
        }
        let (Some(dest), Some(gateway), Some(flags), Some(mask)) =
            (ipv4(f[1]), ipv4(f[2]), hex_u64(f[3]), ipv4(f[7]))
        else {
            return None;
        };
        Some(RouteLine {
            metric: f[6].parse::<i64>().unwrap_or(0),
            fields: f,
            dest,
            gateway,
            flags,
            mask,
        })
    })
}

/// The index among `lines` of the default route chosen: the first of
/// lowest metric.
fn best_default<'a>(lines: impl Iterator<Item = &'a RouteLine<'a>>) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, r) in lines.enumerate() {
        if r.dest.is_unspecified() && best.is_none_or(|(_, m)| (r.metric as u64) < m) {
            best = Some((i, r.metric as u64));
        }
    }
    best.map(|(i, _)| i)
}

/// The gateway of the default route `parse_ipv4_routes` marks active,
/// without making the routes' JSON (the class is defined at every start;
/// `sys.inet` is made only when read).
pub(crate) fn default_gateway(text: &str) -> Option<Ipv4Addr> {
    let lines: Vec<RouteLine> = route_lines(text).collect();
    best_default(lines.iter()).map(|i| lines[i].gateway)
}

/// `/proc/net/route` as `sys.inet` routes, the default route first chosen
/// by lowest metric.
pub(crate) fn parse_ipv4_routes(text: &str) -> (Vec<Json>, Option<usize>) {
    let lines: Vec<RouteLine> = route_lines(text).collect();
    let best = best_default(lines.iter());
    let int = |s: &str| s.parse::<i64>().unwrap_or(0);
    let mut routes: Vec<Json> = lines
        .iter()
        .map(|r| {
            let f = &r.fields;
            json!({
                "active_default_gateway": false,
                "dest": r.dest.to_string(),
                "flags": route_flags(r.flags, Some(r.dest.is_unspecified())),
                "gateway": r.gateway.to_string(),
                "interface": f[0],
                "irtt": int(f[10]),
                "mask": r.mask.to_string(),
                "metric": r.metric,
                "mtu": int(f[8]),
                "refcnt": int(f[4]),
                "use": int(f[5]),
                "window": int(f[9]),
            })
        })
        .collect();
    if let Some(i) = best {
        routes[i]["active_default_gateway"] = Json::Bool(true);
    }
    (routes, best)
}

/// `/proc/net/netstat` (and `/proc/net/snmp`-style) header/value line
/// pairs as `{ "TcpExt": { "SyncookiesSent": "0", ... } }`, keys sorted.
pub(crate) fn parse_netstat(text: &str) -> Map<String, Json> {
    let mut sections: Vec<(&str, Vec<(&str, &str)>)> = Vec::new();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let (Some((prefix, names)), Some((_, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        let kv = names
            .split_ascii_whitespace()
            .zip(values.split_ascii_whitespace())
            .collect();
        sections.push((prefix.trim(), kv));
    }
    sections.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Map::with_capacity(sections.len());
    for (prefix, kv) in sections {
        out.insert(prefix.to_string(), Json::Object(sorted_text_object(kv)));
    }
    out
}

/// `/proc/net/ipv6_route` as `sys.inet6` routes.
///
/// cf-agent 3.21 reports as `dest` an address that is all zeros even for
/// routes to other destinations; it matches the route's source column,
/// which is what we report, so the values agree.
pub(crate) fn parse_ipv6_routes(text: &str) -> Vec<Json> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            let src = parse_ipv6_hex(f[2])?;
            let next_hop = parse_ipv6_hex(f[4])?;
            let metric = hex_u64(f[5])? as u32 as i32;
            let flags = hex_u64(f[8])?;
            // cf-agent reads the reference count and the use count, which
            // the kernel writes in hex, as decimal digits: a line where
            // either has a letter is not read at all
            // (00_basics/environment/proc-net.cf).
            let decimal = |t: &str| {
                t.bytes()
                    .all(|b| b.is_ascii_digit())
                    .then(|| t.parse::<u64>().ok())
                    .flatten()
            };
            let (refcnt, used) = (decimal(f[6])?, decimal(f[7])?);
            Some(json!({
                "dest": ipv6_full(&src),
                "dest_prefix": f[1],
                "flags": route_flags(flags, None),
                "interface": f[9],
                "metric": metric,
                "next_hop": ipv6_full(&next_hop),
                "refcnt": refcnt,
                "source_prefix": f[3],
                "use": used,
            }))
        })
        .collect()
}

/// `/proc/net/snmp6` as `{ "Ip6InReceives": 1, ... }`, keys sorted.
pub(crate) fn parse_snmp6(text: &str) -> Map<String, Json> {
    let mut kv: Vec<(&str, i64)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let name = f.next()?;
            let value: i64 = f.next()?.parse().ok()?;
            Some((name, value))
        })
        .collect();
    kv.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Map::with_capacity(kv.len());
    for (name, value) in kv {
        out.insert(name.to_string(), Json::from(value));
    }
    out
}

/// `/proc/net/dev` as `sys.interfaces_data`.
pub(crate) fn parse_net_dev(text: &str) -> Map<String, Json> {
    const FIELDS: [&str; 16] = [
        "receive_bytes",
        "receive_packets",
        "receive_errors",
        "receive_drop",
        "receive_fifo",
        "receive_frame",
        "receive_compressed",
        "receive_multicast",
        "transmit_bytes",
        "transmit_packets",
        "transmit_errors",
        "transmit_drop",
        "transmit_fifo",
        "transmit_frame",
        "transmit_compressed",
        "transmit_multicast",
    ];
    let mut devices: Vec<(&str, Vec<(&str, &str)>)> = Vec::new();
    for line in text.lines().skip(2) {
        let Some((name, values)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let mut kv: Vec<(&str, &str)> = FIELDS
            .iter()
            .copied()
            .zip(values.split_ascii_whitespace())
            .collect();
        kv.push(("device", name));
        devices.push((name, kv));
    }
    devices.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Map::with_capacity(devices.len());
    for (name, kv) in devices {
        out.insert(name.to_string(), Json::Object(sorted_text_object(kv)));
    }
    out
}

/// `sys.inet`, `sys.inet6`, `sys.interfaces_data` and the default gateway
/// class. The class is defined now; the three containers are made from
/// the files at their first read (most policies read none of them), and
/// each is defined when one of its files exists, as when made at once.
pub(crate) fn networking(c: &mut Collector, root: &Root) {
    let route = root.read("/proc/net/route");
    if let Some(gw) = route.as_deref().and_then(default_gateway) {
        c.class(
            &format!("ipv4_gw_{gw}"),
            "inventory,networking,/proc,source=agent,attribute_name=none,procfs",
        );
    }
    let base = root.base().to_path_buf();
    if route.is_some() || root.exists("/proc/net/netstat") {
        let base = base.clone();
        c.deferred_data("sys", "inet", PROC_TAGS, move || {
            Value::data(Json::Object(inet(&Root::new(&base), route.as_deref())))
        });
    }
    let inet6_files = [
        "/proc/net/if_inet6",
        "/proc/net/ipv6_route",
        "/proc/net/snmp6",
    ];
    if inet6_files.iter().any(|f| root.exists(f)) {
        let base = base.clone();
        c.deferred_data("sys", "inet6", PROC_TAGS, move || {
            Value::data(Json::Object(inet6(&Root::new(&base))))
        });
    }
    if root.exists("/proc/net/dev") {
        c.deferred_data("sys", "interfaces_data", PROC_TAGS, move || {
            let text = Root::new(&base).read("/proc/net/dev").unwrap_or_default();
            Value::data(Json::Object(parse_net_dev(&text)))
        });
    }
}

/// `sys.inet`: IPv4 routes (of `route`, the text of `/proc/net/route` read
/// at discovery) and `/proc/net/netstat`'s counters.
fn inet(root: &Root, route: Option<&str>) -> Map<String, Json> {
    let mut inet = Map::new();
    if let Some(text) = route {
        let (routes, best) = parse_ipv4_routes(text);
        if let Some(i) = best {
            let gw = routes[i]["gateway"].as_str().unwrap_or("").to_string();
            inet.insert("default_gateway".into(), Json::String(gw));
            inet.insert("default_route".into(), routes[i].clone());
        }
        inet.insert("routes".into(), Json::Array(routes));
    }
    if let Some(text) = root.read("/proc/net/netstat") {
        inet.insert("stats".into(), Json::Object(parse_netstat(&text)));
    }
    inet
}

/// `sys.inet6`: addresses, routes and counters of `/proc/net`.
fn inet6(root: &Root) -> Map<String, Json> {
    let mut inet6 = Map::new();
    if let Some(text) = root.read("/proc/net/if_inet6") {
        let mut addrs: Vec<(String, Json)> = Vec::new();
        for a in parse_if_inet6(&text) {
            // cf-agent keys the addresses by interface, so of several
            // addresses of one interface the last one listed is kept.
            addrs.retain(|(n, _)| n != &a.name);
            addrs.push((
                a.name.clone(),
                json!({
                    "address": ipv6_full(&a.addr),
                    "device_number": a.ifindex,
                    "interface": a.name,
                    "prefix_length": a.prefix,
                    "raw_flags": a.raw_flags,
                    "scope": a.scope,
                }),
            ));
        }
        addrs.sort_by(|a, b| a.0.cmp(&b.0));
        inet6.insert(
            "addresses".into(),
            Json::Object(addrs.into_iter().collect()),
        );
    }
    if let Some(text) = root.read("/proc/net/ipv6_route") {
        inet6.insert("routes".into(), Json::Array(parse_ipv6_routes(&text)));
    }
    if let Some(text) = root.read("/proc/net/snmp6") {
        inet6.insert("stats".into(), Json::Object(parse_snmp6(&text)));
    }
    inet6
}
