//! Networking: names and addresses, address ranges, this host's
//! interfaces and connections, plain TCP and HTTP reads, and the functions
//! that need a CFEngine hub, LDAP or the Windows registry, which we do not
//! support and say so.

use super::args::Args;
use super::{FnError, FnResult, FnSpec, cached, class_result, effect, spec};
use crate::eval::EvalContext;
use crate::values::Value;
use serde_json::{Map, Value as Json, json};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream, ToSocketAddrs};
use std::time::Duration;

pub static FUNCTIONS: &[FnSpec] = &[
    cached("host2ip", 1, Some(1), host2ip),
    cached("ip2host", 1, Some(1), ip2host),
    spec("hostrange", 2, Some(2), hostrange),
    spec("iprange", 1, None, iprange),
    spec("isipinsubnet", 1, None, isipinsubnet),
    spec("network_connections", 0, Some(0), network_connections),
    spec("hostsseen", 3, Some(3), hostsseen),
    effect("readtcp", 4, Some(4), true, readtcp),
    effect("url_get", 2, Some(2), false, url_get),
    spec("hubknowledge", 1, Some(1), hubknowledge),
    spec("remoteclassesmatching", 4, Some(4), remoteclassesmatching),
    spec("remotescalar", 3, Some(3), remotescalar),
    spec("hostswithclass", 2, Some(2), hostswithclass),
    spec("ldaparray", 6, Some(6), ldaparray),
    spec("ldaplist", 6, Some(6), ldaplist),
    spec("ldapvalue", 6, Some(6), ldapvalue),
    spec("regldap", 7, Some(7), regldap),
    spec("selectservers", 6, Some(6), selectservers),
    spec("registryvalue", 2, Some(2), registryvalue),
    spec("hostswithgroup", 2, Some(2), hostswithgroup),
];

/// How long network functions wait for a peer.
const NET_TIMEOUT: Duration = Duration::from_secs(30);

/// This host's name as the kernel knows it.
pub fn host_name() -> String {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: the buffer is writable for its length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    buf[buf.len() - 1] = 0;
    // SAFETY: gethostname wrote a NUL-terminated string (forced above).
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `host2ip(name)`: the first address the resolver gives; the name itself
/// when it does not resolve.
fn host2ip(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("host2ip", a);
    let name = p.str(0, "host")?;
    let addr = (name, 0u16)
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .map(|sa| sa.ip().to_string());
    Ok(Value::str(addr.unwrap_or_else(|| name.to_string())))
}

/// `ip2host(address)`: the name the resolver gives for the address; the
/// address itself when it has none (or is not an address).
fn ip2host(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("ip2host", a);
    let ip = p.str(0, "ip")?;
    let Ok(addr) = ip.parse::<IpAddr>() else {
        crate::error!("Unable to convert IP address '{ip}'");
        return Ok(Value::str(ip));
    };
    Ok(Value::str(
        reverse_lookup(addr).unwrap_or_else(|| ip.to_string()),
    ))
}

fn reverse_lookup(addr: IpAddr) -> Option<String> {
    match addr {
        IpAddr::V4(v4) => {
            // SAFETY: sockaddr_in is plain data.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr.s_addr = u32::from_ne_bytes(v4.octets());
            name_info(&sa)
        }
        IpAddr::V6(v6) => {
            // SAFETY: sockaddr_in6 is plain data.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_addr.s6_addr = v6.octets();
            name_info(&sa)
        }
    }
}

/// The name `getnameinfo` gives a socket address (`sockaddr_in` or
/// `sockaddr_in6`, family set); `None` when it has none.
fn name_info<T>(sa: &T) -> Option<String> {
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY: `sa` is a whole socket address of its type's size, and the
    // buffer is writable for its length.
    let rc = unsafe {
        libc::getnameinfo(
            sa as *const T as *const libc::sockaddr,
            std::mem::size_of::<T>() as libc::socklen_t,
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: getnameinfo wrote a NUL-terminated name.
    Some(
        unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `hostrange(prefix, "a-b")`: this host's short name is the prefix
/// followed by a number in the range.
fn hostrange(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("hostrange", a);
    let prefix = p.str(0, "prefix")?;
    let range = p.str(1, "range")?;
    let host = ctx
        .lookup("sys.uqhost")
        .and_then(|v| v.as_scalar().map(str::to_string))
        .unwrap_or_else(|| host_name().split('.').next().unwrap_or("").to_string());
    let Some((lo, hi)) = range
        .split_once('-')
        .and_then(|(l, h)| Some((l.trim().parse::<u64>().ok()?, h.trim().parse::<u64>().ok()?)))
    else {
        return Err(p.fail(format!("'{range}' is not a range like 1-32")));
    };
    let hit = host
        .strip_prefix(prefix)
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| n >= lo && n <= hi);
    Ok(class_result(hit))
}

/// An address range as cf-agent writes them: a CIDR network (v4 or v6), a
/// v4 address with a range in one octet (`10.0.0.1-10`), two full v4
/// addresses (`10.0.0.1-10.0.0.9`), or one address.
#[derive(Debug, Clone, PartialEq)]
pub enum IpRange {
    Cidr(IpAddr, u8),
    Octets([(u8, u8); 4]),
    Span(Ipv4Addr, Ipv4Addr),
}

impl IpRange {
    pub fn parse(s: &str) -> Option<IpRange> {
        let s = s.trim();
        if let Some((addr, bits)) = s.split_once('/') {
            let ip: IpAddr = addr.parse().ok()?;
            let bits: u8 = bits.parse().ok()?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            return (bits <= max).then_some(IpRange::Cidr(ip, bits));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            let max = if ip.is_ipv4() { 32 } else { 128 };
            return Some(IpRange::Cidr(ip, max));
        }
        if let Some((l, h)) = s.split_once('-')
            && let (Ok(l), Ok(h)) = (l.parse::<Ipv4Addr>(), h.parse::<Ipv4Addr>())
        {
            return Some(IpRange::Span(l, h));
        }
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 4 {
            return None;
        }
        let mut octets = [(0u8, 0u8); 4];
        for (i, part) in parts.iter().enumerate() {
            octets[i] = match part.split_once('-') {
                Some((l, h)) => (l.parse().ok()?, h.parse().ok()?),
                None => {
                    let v = part.parse().ok()?;
                    (v, v)
                }
            };
        }
        Some(IpRange::Octets(octets))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (IpRange::Cidr(IpAddr::V4(net), bits), IpAddr::V4(ip)) => {
                let mask = if *bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - *bits as u32)
                };
                u32::from(*net) & mask == u32::from(ip) & mask
            }
            (IpRange::Cidr(IpAddr::V6(net), bits), IpAddr::V6(ip)) => {
                let mask = if *bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - *bits as u32)
                };
                u128::from(*net) & mask == u128::from(ip) & mask
            }
            (IpRange::Octets(o), IpAddr::V4(ip)) => ip
                .octets()
                .iter()
                .zip(o.iter())
                .all(|(v, (l, h))| v >= l && v <= h),
            (IpRange::Span(l, h), IpAddr::V4(ip)) => {
                let v = u32::from(ip);
                v >= u32::from(*l) && v <= u32::from(*h)
            }
            _ => false,
        }
    }
}

/// This host's addresses by interface name.
pub fn interface_addresses() -> Vec<(String, IpAddr)> {
    let mut out = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list that freeifaddrs releases below.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return out;
    }
    let mut cur = ifap;
    while !cur.is_null() {
        // SAFETY: `cur` walks the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a valid C string.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null; its family says which struct it is.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let ip = match family {
            libc::AF_INET => {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::V4(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                IpAddr::V6(Ipv6Addr::from(sa.sin6_addr.s6_addr))
            }
            _ => continue,
        };
        out.push((name, ip));
    }
    // SAFETY: releases the list from getifaddrs once.
    unsafe { libc::freeifaddrs(ifap) };
    out
}

/// `iprange(range, interface...)`: one of this host's addresses (on the
/// named interfaces, when given) is in the range.
fn iprange(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("iprange", a);
    let range = p.str(0, "range")?;
    let Some(r) = IpRange::parse(range) else {
        return Ok(class_result(false));
    };
    let mut ifaces = Vec::new();
    for i in 1..p.len() {
        ifaces.push(p.str(i, "interface")?);
    }
    let hit = interface_addresses()
        .into_iter()
        .filter(|(n, _)| ifaces.is_empty() || ifaces.contains(&n.as_str()))
        .any(|(_, ip)| r.contains(ip));
    Ok(class_result(hit))
}

/// `isipinsubnet(range, address...)`: one of the addresses is in the range.
fn isipinsubnet(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("isipinsubnet", a);
    let Some(r) = IpRange::parse(p.str(0, "range")?) else {
        return Ok(class_result(false));
    };
    for i in 1..p.len() {
        if let Ok(ip) = p.str(i, "ip")?.trim().parse::<IpAddr>()
            && r.contains(ip)
        {
            return Ok(class_result(true));
        }
    }
    Ok(class_result(false))
}

/// The state names cf-agent reports. It reads the kernel's hexadecimal
/// state as a decimal number, so `0A` (listening) shows as `UNKNOWN`; we
/// keep its answers.
const TCP_STATES: [&str; 12] = [
    "UNKNOWN",
    "ESTABLISHED",
    "SYN_SENT",
    "SYN_RECV",
    "FIN_WAIT1",
    "FIN_WAIT2",
    "TIME_WAIT",
    "CLOSE",
    "CLOSE_WAIT",
    "LAST_ACK",
    "LISTEN",
    "CLOSING",
];

fn proc_net_address(hex: &str, v6: bool) -> Option<(String, String)> {
    let (addr, port) = hex.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?.to_string();
    let ip = if v6 {
        // cf-agent writes the kernel's hex as it stands, four digits to a
        // group, none left out: `::1`, which the kernel writes in host
        // order, reads 0:0:0:0:0:0:100:0 (00_basics/environment/
        // proc-net-functions.cf).
        if addr.len() != 32 || !addr.is_ascii() {
            return None;
        }
        let groups: Option<Vec<String>> = (0..8)
            .map(|g| {
                u16::from_str_radix(&addr[g * 4..g * 4 + 4], 16)
                    .ok()
                    .map(|v| format!("{v:x}"))
            })
            .collect();
        groups?.join(":")
    } else {
        let v = u32::from_str_radix(addr, 16).ok()?;
        Ipv4Addr::from(v.to_le_bytes()).to_string()
    };
    Some((ip, port))
}

fn proc_net_table(host: &crate::host::Host, kind: &str) -> Vec<Json> {
    let v6 = kind.ends_with('6');
    let Ok(text) = host.proc_text(&format!("/proc/net/{kind}")) else {
        return Vec::new();
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 {
                return None;
            }
            let (la, lp) = proc_net_address(f[1], v6)?;
            let (ra, rp) = proc_net_address(f[2], v6)?;
            let digits: String = f[3].chars().take_while(|c| c.is_ascii_digit()).collect();
            let st = digits.parse::<usize>().unwrap_or(0);
            let state = TCP_STATES.get(st).copied().unwrap_or("UNKNOWN");
            Some(json!({
                "local": {"address": la, "port": lp},
                "remote": {"address": ra, "port": rp},
                "state": state,
            }))
        })
        .collect()
}

/// `network_connections()`: the sockets of /proc/net by protocol.
fn network_connections(ctx: &mut EvalContext, _: &[Value]) -> FnResult {
    let mut m = Map::new();
    for kind in ["tcp", "tcp6", "udp", "udp6"] {
        m.insert(
            kind.to_string(),
            Json::Array(proc_net_table(ctx.host(), kind)),
        );
    }
    Ok(Value::data(Json::Object(m)))
}

/// `hostsseen(...)`: the hosts this one has talked to. We keep no record of
/// peers in cf-agent's form (its lastseen quality records), so the call
/// fails as cf-agent's does when that database holds no host: without a
/// word (cf-promises 3.21 is silent; `tests/it/function_failures_differential.rs`).
fn hostsseen(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("hostsseen", a);
    Err(p.fail_quietly("no record of hosts seen is kept (there is no lastseen database)"))
}

/// The most `readtcp` reads (cf-agent's buffer less its terminator).
const READTCP_MAX: i64 = 4095;

/// `readtcp(host, port, send, maxbytes)`: connects, sends the text (if
/// any) and returns at most `maxbytes` bytes of the answer (a count out of
/// range reads the most there is room for). Like cf-agent, it does not run
/// in cf-promises' role (the hard class `common`): checking a policy
/// never talks to the network.
fn readtcp(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("readtcp", a);
    let host = p.str(0, "host")?;
    let port = p.str(1, "port")?;
    let send = p.str(2, "send")?;
    let mut max = p.int(3, "max_bytes")?;
    if ctx.classes.get("common").is_some_and(|c| c.hard) {
        // cf-promises fails it without a word.
        return Err(p.fail_quietly("not run while only checking a policy (as cf-promises)"));
    }
    if !(0..=READTCP_MAX).contains(&max) {
        max = READTCP_MAX;
    }
    if max == 0 {
        return Ok(Value::str(""));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| p.fail(format!("'{port}' is not a port number")))?;
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut i| i.next())
        .ok_or_else(|| p.fail(format!("cannot resolve '{host}'")))?;
    // A host that does not answer is no error of the policy: cf-agent
    // says so at inform level (url_ping probes a port this way) and the
    // call fails.
    let mut s = TcpStream::connect_timeout(&addr, NET_TIMEOUT).map_err(|e| {
        crate::info!("readtcp: couldn't connect to {host}:{port}: {e}");
        p.fail_quietly(format!("cannot connect to {host}:{port}: {e}"))
    })?;
    let _ = s.set_read_timeout(Some(NET_TIMEOUT));
    let _ = s.set_write_timeout(Some(NET_TIMEOUT));
    if !send.is_empty() {
        s.write_all(send.as_bytes())
            .map_err(|e| p.fail(format!("cannot send to {host}:{port}: {e}")))?;
    }
    let mut buf = vec![0u8; max as usize];
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(_) if got > 0 => break,
            Err(e) => return Err(p.fail(format!("cannot read from {host}:{port}: {e}"))),
        }
    }
    buf.truncate(got);
    Ok(Value::str(String::from_utf8_lossy(&buf).into_owned()))
}

/// `url_get(url, options)`: a plain `http://` GET (HTTP/1.0, no TLS, no
/// redirects), as `{"content", "headers", "rc", "returncode", "success",
/// "error_message"}`. Options may hold `url.max_content`,
/// `url.max_headers` and `url.timeout` (seconds).
fn url_get(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("url_get", a);
    let url = p.str(0, "url")?;
    let options = match a.get(1) {
        None => Json::Object(Map::new()),
        Some(Value::Scalar(s)) if s.trim().is_empty() => Json::Object(Map::new()),
        Some(v) => match super::args::collect(ctx, v)? {
            Value::Data(d) => d.as_ref().clone(),
            _ => Json::Object(Map::new()),
        },
    };
    let opt = |k: &str| {
        options
            .get(k)
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
    };
    let max_content = opt("url.max_content").unwrap_or(4096) as usize;
    let max_headers = opt("url.max_headers").unwrap_or(4096) as usize;
    let timeout = Duration::from_secs(opt("url.timeout").unwrap_or(30));
    Ok(Value::data(match http_get(url, timeout) {
        Ok((code, headers, body)) => {
            let mut h = headers;
            h.truncate(max_headers);
            let mut b = body;
            b.truncate(max_content);
            json!({
                "content": String::from_utf8_lossy(&b),
                "error_message": "",
                "headers": String::from_utf8_lossy(&h),
                "rc": 0,
                "returncode": code,
                "success": (200..300).contains(&code),
            })
        }
        Err(m) => json!({
            "content": "",
            "error_message": m,
            "headers": "",
            "rc": 7,
            "returncode": 0,
            "success": false,
        }),
    }))
}

/// A minimal HTTP/1.0 GET: the status code, the header bytes, the body.
fn http_get(url: &str, timeout: Duration) -> Result<(u64, Vec<u8>, Vec<u8>), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("only http:// URLs are supported: '{url}'"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("bad port in '{url}'"))?,
        ),
        None => (authority, 80),
    };
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| format!("cannot resolve '{host}'"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let req = format!(
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nUser-Agent: convergent\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).map_err(|e| e.to_string())?;
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let head = all[..split + 4].to_vec();
    let body = all[split + 4..].to_vec();
    let status_line = String::from_utf8_lossy(&head);
    let code = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u64>().ok())
        .ok_or("malformed HTTP status line")?;
    Ok((code, head, body))
}

// ---- not supported ---------------------------------------------------------

fn not_supported(name: &str, what: &str) -> FnResult {
    Err(FnError::Failed(format!(
        "function '{name}' is not supported: {what}"
    )))
}

const HUB: &str = "it asks a CFEngine Enterprise hub, and convergent has no hub";
const LDAP: &str = "convergent has no LDAP client";

fn hubknowledge(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("hubknowledge", HUB)
}
fn remoteclassesmatching(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("remoteclassesmatching", HUB)
}
fn remotescalar(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("remotescalar", HUB)
}
fn hostswithclass(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("hostswithclass", HUB)
}
fn ldaparray(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("ldaparray", LDAP)
}
fn ldaplist(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("ldaplist", LDAP)
}
fn ldapvalue(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("ldapvalue", LDAP)
}
fn regldap(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("regldap", LDAP)
}
fn selectservers(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported(
        "selectservers",
        "it probes servers for a hub-style setup convergent does not have",
    )
}
fn registryvalue(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported(
        "registryvalue",
        "the Windows registry exists only on Windows",
    )
}

fn hostswithgroup(_: &mut EvalContext, _: &[Value]) -> FnResult {
    not_supported("hostswithgroup", HUB)
}

/// The functions that always fail with "not supported", for the coverage
/// table.
pub const NOT_SUPPORTED: &[&str] = &[
    "hubknowledge",
    "remoteclassesmatching",
    "remotescalar",
    "hostswithclass",
    "ldaparray",
    "ldaplist",
    "ldapvalue",
    "regldap",
    "selectservers",
    "registryvalue",
    "hostswithgroup",
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn ranges_like_cf_agent() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let r = |s: &str| IpRange::parse(s).unwrap();
        assert!(r("10.0.0.0/8").contains(ip("10.1.2.3")));
        assert!(!r("10.0.0.0/8").contains(ip("11.1.2.3")));
        assert!(r("10.0.0.1-10").contains(ip("10.0.0.5")));
        assert!(!r("10.0.0.1-10").contains(ip("10.0.0.11")));
        assert!(r("10.0.0.1-10.0.0.9").contains(ip("10.0.0.5")));
        assert!(r("::1/128").contains(ip("::1")));
        assert!(r("127.0.0.1").contains(ip("127.0.0.1")));
        assert!(r("0.0.0.0/0").contains(ip("1.2.3.4")));
        assert!(IpRange::parse("nonsense").is_none());
        assert!(IpRange::parse("1.2.3.4/33").is_none());
    }

    /// As cf-agent 3.21 writes them: IPv6 hex as the kernel has it, four
    /// digits to a group (00_basics/environment/proc-net-functions.cf).
    #[test]
    fn proc_net_addresses_decode() {
        assert_eq!(
            proc_net_address("0100007F:0016", false),
            Some(("127.0.0.1".into(), "22".into()))
        );
        assert_eq!(
            proc_net_address("00000000000000000000000001000000:0050", true),
            Some(("0:0:0:0:0:0:100:0".into(), "80".into()))
        );
    }

    #[test]
    fn readtcp_and_url_get_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for _ in 0..2 {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 1024];
                let n = s.read(&mut buf).unwrap();
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                if req.starts_with("GET ") {
                    s.write_all(b"HTTP/1.0 200 OK\r\nX-A: b\r\n\r\nhello")
                        .unwrap();
                } else {
                    s.write_all(format!("echo:{req}").as_bytes()).unwrap();
                }
            }
        });
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let args: Vec<Value> = ["127.0.0.1", &port.to_string(), "ping", "7"]
            .iter()
            .map(|s| Value::str(*s))
            .collect();
        assert_eq!(readtcp(&mut c, &args), Ok(Value::str("echo:pi")));
        // In cf-promises' role the call fails without connecting.
        let mut common = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let mut info = crate::eval::classes::ClassInfo::soft(crate::values::Origin::Agent, vec![]);
        info.hard = true;
        common.classes.define("common", info);
        assert!(readtcp(&mut common, &args).is_err());
        let url = format!("http://127.0.0.1:{port}/x");
        let r = url_get(&mut c, &[Value::str(url)]).unwrap();
        let d = r.as_data().unwrap();
        assert_eq!(d["content"], "hello");
        assert_eq!(d["returncode"], 200);
        assert_eq!(d["success"], true);
        server.join().unwrap();
        let bad = url_get(&mut c, &[Value::str("https://x")]).unwrap();
        assert_eq!(bad.as_data().unwrap()["success"], false);
    }

    /// A port nobody listens on fails the call without an error line, as
    /// in cf-agent (bundles.cf's url_ping on a closed port).
    #[test]
    fn readtcp_to_a_closed_port_fails_quietly() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let args: Vec<Value> = ["127.0.0.1", &port.to_string(), "GET / HTTP/1.1", "20"]
            .iter()
            .map(|s| Value::str(*s))
            .collect();
        assert!(matches!(readtcp(&mut c, &args), Err(FnError::Quiet(_))));
    }

    #[test]
    fn hub_functions_say_not_supported() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        match hubknowledge(&mut c, &[Value::str("x")]) {
            Err(FnError::Failed(m)) => assert!(m.contains("not supported"), "{m}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
