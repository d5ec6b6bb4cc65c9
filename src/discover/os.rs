//! The distribution: `/etc/os-release` and the distribution-specific
//! release files, in cf-agent's order. They define classes (`debian`,
//! `debian_12`, `ubuntu_22`, `redhat`...), `sys.flavor`, `sys.os_release`,
//! `sys.os_name_human`, `sys.os_version_major`, `sys.crontab` and
//! `sys.doc_root`.
//!
//! Not read (distributions long gone or not Linux servers we target):
//! Mandrake/Mandriva and Oracle VM Server release files (their presence
//! still stops the Red Hat check, as in cf-agent), Slackware, VMware ESX,
//! Arista EOS and BIG-IP.

use super::Collector;
use super::root::Root;
use super::user::User;
use crate::values::canon::canonify;
use crate::values::value::{DataType, Value};

const INV: &str = "inventory,attribute_name=none,source=agent";

/// Sets `sys.flavor` (the last call wins) and defines the flavor class.
fn set_flavor(c: &mut Collector, flavor: &str) {
    c.class(
        flavor,
        "inventory,attribute_name=none,source=agent,derived-from=sys.flavor",
    );
    c.sys("flavour", flavor, "source=agent");
    c.sys(
        "flavor",
        flavor,
        "inventory,source=agent,attribute_name=none",
    );
}

/// `id_version` and each prefix ending before an underscore.
fn versioned_classes(c: &mut Collector, tags: &str, id: &str, version: &str) {
    let mut name = format!("{id}_{version}");
    loop {
        c.class(&name, tags);
        match name.rfind('_') {
            Some(i) => name.truncate(i),
            None => break,
        }
    }
}

/// Parses a shell-style `KEY=value` file such as os-release.
pub(crate) fn parse_env_file(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() {
            continue;
        }
        let value = value.trim();
        let value = if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
            let mut s = String::new();
            let mut chars = value[1..value.len() - 1].chars();
            while let Some(ch) = chars.next() {
                if ch == '\\' {
                    match chars.next() {
                        Some(n @ ('"' | '\\' | '$' | '`')) => s.push(n),
                        Some(n) => {
                            s.push('\\');
                            s.push(n);
                        }
                        None => s.push('\\'),
                    }
                } else {
                    s.push(ch);
                }
            }
            s
        } else if value.len() >= 2 && value.starts_with('\'') && value.ends_with('\'') {
            value[1..value.len() - 1].to_string()
        } else {
            value.to_string()
        };
        match out.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => out.push((key.to_string(), value)),
        }
    }
    out
}

fn os_release(c: &mut Collector, root: &Root, path: &str) {
    let Some(text) = root.read(path) else { return };
    let mut pairs = parse_env_file(&text);
    let tags = format!("{INV},derived-from-file={path}");
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    let id = get("ID");
    let version_id = get("VERSION_ID");

    // Sorted keys: the order cf-agent's JSON writer prints them in.
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let map: serde_json::Map<String, serde_json::Value> = pairs
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    c.var(
        "sys",
        "os_release",
        Value::data(serde_json::Value::Object(map)),
        DataType::Data,
        &tags,
    );

    let Some(id) = id.map(|i| canonify(&i)) else {
        return;
    };
    let alias = match id.as_str() {
        "rhel" => Some("redhat"),
        "opensuse" | "sles" => Some("suse"),
        _ => None,
    };
    match version_id.map(|v| canonify(&v)) {
        None => {
            c.class(&id, &tags);
            if let Some(a) = alias {
                c.class(a, &tags);
            }
        }
        Some(version) => {
            let major = version.split('_').next().unwrap_or(&version);
            set_flavor(c, &format!("{id}_{major}"));
            versioned_classes(c, &tags, &id, &version);
            if let Some(a) = alias {
                versioned_classes(c, &tags, a, &version);
            }
        }
    }
}

/// Leading decimal digits of `s` (after spaces) as C's `%d` reads them.
fn scan_int(s: &str) -> Option<(i64, &str)> {
    let s = s.trim_start();
    let end = s.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(s.len());
    let n = s[..end].parse().ok()?;
    Some((n, &s[end..]))
}

/// `major.minor` or `major` after the word "release ".
fn release_numbers(line: &str) -> Option<(i64, Option<i64>)> {
    let at = line.find("release ")?;
    let (major, rest) = scan_int(&line[at + "release ".len()..])?;
    let minor = rest.strip_prefix('.').and_then(scan_int).map(|(m, _)| m);
    Some((major, minor))
}

/// The integer after `KEY =` at the start of a line (C's `"KEY = %d"`).
fn key_int(line: &str, key: &str) -> Option<i64> {
    let rest = line.strip_prefix(key)?.trim_start().strip_prefix('=')?;
    scan_int(rest).map(|(n, _)| n)
}

/// The word after `KEY =` at the start of a line (C's `"KEY = %s"`).
fn key_word<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(key)?.trim_start().strip_prefix('=')?;
    rest.split_whitespace().next()
}

/// `/etc/SuSE-release` (SLES 12 and older, openSUSE before Leap), as
/// cf-agent 3.21's Linux_Suse_Version reads it: the product from the
/// first line, the version from `VERSION =` and `PATCHLEVEL =` lines or
/// from a `major.minor` after "linux " in the first line. Its flavor
/// (`SUSE_12`) replaces the one os-release gave.
fn suse(c: &mut Collector, root: &Root) {
    c.class("SUSE", INV);
    c.class("suse", INV);
    c.class("SuSE", INV);
    let Some(text) = root.read("/etc/SuSE-release") else {
        return;
    };
    if text.is_empty() {
        return;
    }
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").to_ascii_lowercase();
    let (mut version_line, mut patch_line) = ("", "");
    let (mut major, mut minor) = (None, None);
    for line in lines {
        if line.starts_with("VERSION") {
            version_line = line;
            major = key_int(line, "VERSION").or(major);
        }
        if line.starts_with("PATCH") {
            patch_line = line;
            minor = key_int(line, "PATCHLEVEL").or(minor);
        }
    }
    if first.starts_with("suse sles-8") {
        c.class("SLES8", INV);
    } else if first.starts_with("sles") {
        let word: String = first
            .chars()
            .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '-' || *ch == '_')
            .take(255)
            .collect();
        c.class(&canonify(&word), INV);
        for part in word.split('-') {
            c.class(&canonify(part), INV);
        }
    } else {
        for v in 9..13 {
            if first.starts_with(&format!("suse linux enterprise server {v} ")) {
                c.class(&format!("SLES{v}"), INV);
            } else if first.starts_with(&format!("suse linux enterprise desktop {v} ")) {
                c.class(&format!("SLED{v}"), INV);
            }
        }
    }
    let release = first
        .find("linux ")
        .or_else(|| first.find("opensuse"))
        .map_or(version_line, |at| &first[at..]);
    if release.contains('.') {
        // "%*s %d.%d": a word, then major.minor; what parses is kept.
        let after_word = release
            .trim_start()
            .split_once(char::is_whitespace)
            .map_or("", |(_, r)| r);
        if let Some((mj, rest)) = scan_int(after_word) {
            major = Some(mj);
            if let Some((mn, _)) = rest.strip_prefix('.').and_then(scan_int) {
                minor = Some(mn);
            }
        }
        if let (Some(mj), Some(mn)) = (major, minor) {
            c.class("SUSE", INV);
            set_flavor(c, &format!("SUSE_{mj}"));
            c.class(&format!("SUSE_{mj}_{mn}"), INV);
            c.class("SuSE", INV);
            c.class(&format!("SuSE_{mj}"), INV);
            c.class(&format!("SuSE_{mj}_{mn}"), INV);
        }
    } else if let (Some(mj), Some(_)) = (major, minor) {
        let word_major = key_word(version_line, "VERSION").unwrap_or_default();
        let word_minor = key_word(patch_line, "PATCHLEVEL").unwrap_or_default();
        c.class("SLES", INV);
        c.class(&format!("SLES_{word_major}"), INV);
        c.class(&format!("SLES_{word_major}_{word_minor}"), INV);
        set_flavor(c, &format!("SUSE_{mj}"));
        c.class(&format!("SuSE_{mj}"), "source=agent");
    }
}

fn fedora(c: &mut Collector, root: &Root) {
    c.class("redhat", INV);
    c.class("fedora", INV);
    let Some(line) = root.first_line("/etc/fedora-release") else {
        return;
    };
    if !line.starts_with("Fedora") {
        return;
    }
    if let Some((major, _)) = release_numbers(&line) {
        c.class("fedora", INV);
        set_flavor(c, &format!("fedora_{major}"));
    }
}

fn redhat(c: &mut Collector, root: &Root) {
    let tags = format!("{INV},derived-from-file=/etc/redhat-release");
    c.class("redhat", &tags);
    let Some(line) = root.first_line("/etc/redhat-release") else {
        return;
    };
    // Longest prefixes first where one prefix contains another.
    const VENDORS: [(&str, &str, &str); 16] = [
        ("Red Hat Enterprise Linux ES", "redhat", "es"),
        ("Red Hat Enterprise Linux WS", "redhat", "ws"),
        ("Red Hat Enterprise Linux AS", "redhat", "as"),
        ("Red Hat Linux Advanced Server", "redhat", "as"),
        ("Red Hat Enterprise Linux Server", "redhat", "s"),
        ("Red Hat Enterprise Linux Client", "redhat", "c"),
        ("Red Hat Enterprise Linux Workstation", "redhat", "c"),
        ("Red Hat Enterprise Linux ComputeNode", "redhat", "cn"),
        ("Red Hat Linux", "redhat", ""),
        ("Red Hat Enterprise Linux", "redhat", ""),
        ("Linux Mandrake", "mandrake", ""),
        ("Mandrakelinux", "mandrake", ""),
        ("White Box Enterprise Linux", "whitebox", ""),
        ("Scientific Linux SL", "scientific", "sl"),
        ("Scientific Linux CERN", "scientific", "cern"),
        ("Scientific Linux", "scientific", "sl"),
    ];
    let found = VENDORS
        .iter()
        .find(|(prefix, _, _)| line.starts_with(prefix))
        .map(|&(_, v, e)| (v, e))
        .or_else(|| line.starts_with("CentOS").then_some(("centos", "")))
        .or_else(|| {
            line.starts_with("Enterprise Linux Enterprise Linux Server")
                .then_some(("oracle", "s"))
        });
    let Some((vendor, edition)) = found else {
        return;
    };
    let Some((major, minor)) = release_numbers(&line.to_lowercase()) else {
        return;
    };
    let mut name = vendor.to_string();
    c.class(&name, &tags);
    if !edition.is_empty() {
        name = format!("{name}_{edition}");
        c.class(&name, &tags);
    }
    name = format!("{name}_{major}");
    c.class(&name, &tags);
    if let Some(minor) = minor {
        c.class(&format!("{name}_{minor}"), &tags);
    }
    // And without the edition.
    let flavor = format!("{vendor}_{major}");
    set_flavor(c, &flavor);
    if let Some(minor) = minor {
        c.class(&format!("{flavor}_{minor}"), &tags);
    }
}

fn oracle(c: &mut Collector, root: &Root) {
    c.class("oracle", INV);
    let Some(line) = root.first_line("/etc/oracle-release") else {
        return;
    };
    if !line.starts_with("Oracle Linux Server") {
        return;
    }
    if let Some((major, Some(minor))) = release_numbers(&line) {
        set_flavor(c, &format!("oracle_{major}"));
        c.class(&format!("oracle_{major}_{minor}"), INV);
    }
}

fn amazon(c: &mut Collector, root: &Root) {
    let Some(line) = root.first_line("/etc/system-release") else {
        return;
    };
    if !line.contains("Amazon") {
        return;
    }
    let tags = format!("{INV},derived-from-file=/etc/system-release");
    c.class("amazon_linux", &tags);
    // "Amazon Linux release 2 (Karoo)": the fourth word.
    match line.split_whitespace().nth(3) {
        Some(version) => {
            let class = format!("amazon_linux_{}", canonify(version));
            c.class(&class, &tags);
            set_flavor(c, &class);
        }
        None => set_flavor(c, "amazon_linux"),
    }
    c.class(
        "AmazonLinux",
        "inventory,attribute_name=none,source=agent,derived-from=sys.flavor",
    );
}

/// Removes `/etc/issue` escapes (`\n`, `@s`...) and trailing spaces.
pub(crate) fn sanitize_issue(s: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for ch in s.chars() {
        if ch == '\\' || ch == '@' || escaped {
            escaped = !escaped;
        } else {
            out.push(ch);
        }
    }
    out.trim_end().to_string()
}

fn debian(c: &mut Collector, root: &Root) {
    let tags = format!("{INV},derived-from-file=/etc/debian_version");
    c.class("debian", &tags);
    let Some(line) = root.first_line("/etc/debian_version") else {
        return;
    };
    let mut minor_release: Option<i64> = None;
    match scan_int(&line) {
        Some((major, rest)) => match rest.strip_prefix('.').and_then(scan_int) {
            Some((minor, _)) => {
                minor_release = Some(minor);
                c.class(&format!("debian_{major}_{minor}"), &tags);
                set_flavor(c, &format!("debian_{major}"));
            }
            None => set_flavor(c, &format!("debian_{major}")),
        },
        None => {
            let name: String = line.chars().take_while(|&ch| ch != '/').take(25).collect();
            if !name.is_empty() {
                c.class(&format!("debian_{name}"), &tags);
            }
        }
    }

    let Some(issue) = root.first_line("/etc/issue") else {
        return;
    };
    let issue_tags = format!("{INV},derived-from-file=/etc/issue");
    match issue.split_whitespace().next() {
        Some("Debian") => {
            let clean = sanitize_issue(&issue);
            // The third word, up to a dot or slash.
            let mut rest = clean.as_str();
            for _ in 0..2 {
                rest = rest.trim_start();
                rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
            }
            let version: String = rest
                .trim_start()
                .chars()
                .take_while(|&ch| ch != '.' && ch != '/')
                .collect();
            c.class("debian", &issue_tags);
            if !version.is_empty() {
                set_flavor(c, &format!("debian_{version}"));
            }
        }
        Some("Ubuntu") => {
            let clean = sanitize_issue(&issue);
            let rest = clean.trim_start();
            let rest = rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..].trim_start();
            let (version, minor) = match rest.split_once('.') {
                Some((v, m)) => (v, m.split_whitespace().next().unwrap_or("")),
                None => (rest, ""),
            };
            if version.is_empty() {
                return;
            }
            set_flavor(c, &format!("ubuntu_{version}"));
            c.class("ubuntu", &issue_tags);
            if minor_release.is_some() && !minor.is_empty() {
                c.class(&format!("ubuntu_{version}_{minor}"), &issue_tags);
            }
        }
        _ => {}
    }
}

fn lsb_release(c: &mut Collector, root: &Root) {
    let Some(text) = root.read("/etc/lsb-release") else {
        return;
    };
    let mut os = None;
    let mut version = String::new();
    for line in text.lines() {
        if line.contains("Cumulus") {
            c.class("cumulus", INV);
            os = Some("cumulus");
        }
        if let Some(at) = line.find("DISTRIB_RELEASE=") {
            version = canonify(&line[at + "DISTRIB_RELEASE=".len()..]);
        }
    }
    if let Some(os) = os
        && !version.is_empty()
    {
        set_flavor(c, &format!("{os}_{version}"));
    }
}

fn alpine(c: &mut Collector, root: &Root) {
    let tags = format!("{INV},derived-from-file=/etc/alpine-release");
    c.class("alpine_linux", &tags);
    if let Some(line) = root.first_line("/etc/alpine-release")
        && let Some(version) = line.split_whitespace().next()
    {
        c.class(&format!("alpine_linux_{}", canonify(version)), &tags);
    }
    set_flavor(c, "alpinelinux");
}

fn xen(c: &mut Collector, root: &Root) {
    let tags = "inventory,attribute_name=Virtual host,source=agent";
    c.class("xen", tags);
    let Some(caps) = root.read("/proc/xen/capabilities") else {
        return;
    };
    if caps.contains("control_d") {
        c.class("xen_dom0", tags);
    } else {
        c.class("xen_domu_pv", tags);
    }
}

fn openvz(c: &mut Collector, root: &Root) {
    let tags = "inventory,attribute_name=Virtual host,source=agent";
    if root.exists("/proc/bc/0") {
        c.class("virt_host_vz", tags);
        if root.exists("/bin/vzps") {
            c.class("virt_host_vz_vzps", tags);
        }
    } else if root.exists("/proc/vz") {
        c.class("virt_guest_vz", tags);
    }
}

/// Whether PID 1 is systemd: its command, links resolved, ends in
/// `/systemd`.
fn systemd(c: &mut Collector, root: &Root) {
    let Some(cmdline) = root.read("/proc/1/cmdline") else {
        return;
    };
    let init = cmdline.split(['\0', '\n']).next().unwrap_or("");
    if init.is_empty() {
        return;
    }
    let resolved = if init.starts_with('/') {
        root.realpath(init).unwrap_or_else(|| init.to_string())
    } else {
        init.to_string()
    };
    if resolved.ends_with("/systemd") {
        c.class("systemd", INV);
    }
}

/// The distribution classes and `sys.flavor`, in cf-agent's order.
pub(crate) fn os_classes(c: &mut Collector, root: &Root) {
    systemd(c, root);

    if root.exists("/etc/os-release") {
        os_release(c, root, "/etc/os-release");
    } else if root.exists("/usr/lib/os-release") {
        os_release(c, root, "/usr/lib/os-release");
    }

    if root.exists("/etc/mandriva-release")
        || root.exists("/etc/mandrake-release")
        || root.exists("/etc/ovs-release")
    {
        // Not read; see the module comment.
    } else if root.exists("/etc/fedora-release") {
        fedora(c, root);
    } else if root.exists("/etc/redhat-release") {
        redhat(c, root);
    }
    if root.exists("/etc/oracle-release") {
        oracle(c, root);
    }
    if root.exists("/etc/generic-release") {
        set_flavor(c, "SunCobalt");
    }
    if root.exists("/etc/SuSE-release") {
        suse(c, root);
    }
    if root.exists("/etc/system-release") {
        amazon(c, root);
    }
    if root.exists("/etc/debian_version") {
        debian(c, root);
    }
    if root.exists("/etc/lsb-release") {
        lsb_release(c, root);
    }
    if root.exists("/usr/bin/aptitude") {
        c.class("have_aptitude", INV);
    }
    if root.exists("/etc/UnitedLinux-release") {
        set_flavor(c, "UnitedLinux");
    }
    if root.exists("/etc/alpine-release") {
        alpine(c, root);
    }
    if root.exists("/etc/gentoo-release") {
        set_flavor(c, "gentoo");
    }
    if root.exists("/etc/arch-release") {
        set_flavor(c, "archlinux");
    }
    if root.exists("/proc/xen/capabilities") {
        xen(c, root);
    }
    if root.exists("/proc/self/status") {
        openvz(c, root);
    }
}

/// `sys.crontab`: the user's crontab file where this distribution keeps it.
pub(crate) fn crontab(c: &mut Collector, user: Option<&User>) {
    let Some(u) = user else { return };
    let dir = if c.has_class("SUSE") {
        "/var/spool/cron/tabs"
    } else if c.has_class("redhat") {
        "/var/spool/cron"
    } else if c.has_class("freebsd") {
        "/var/cron/tabs"
    } else {
        "/var/spool/cron/crontabs"
    };
    c.sys("crontab", format!("{dir}/{}", u.name), "source=agent");
}

/// `sys.doc_root`: the web server's document root of the distribution.
pub(crate) fn doc_root(c: &mut Collector) {
    for (class, dir) in [
        ("redhat", "/var/www/html"),
        ("SUSE", "/srv/www/htdocs"),
        ("debian", "/var/www"),
    ] {
        if c.has_class(class) {
            c.sys("doc_root", dir, "source=agent");
        }
    }
}

/// `sys.os_name_human`: the first matching distribution name.
pub(crate) fn os_name_human(c: &mut Collector) {
    const NAMES: [(&str, &str); 15] = [
        ("ubuntu", "Ubuntu"),
        ("debian", "Debian"),
        ("centos", "CentOS"),
        ("fedora", "Fedora"),
        ("redhat", "RHEL"),
        ("aix", "AIX"),
        ("hpux", "HP-UX"),
        ("opensuse", "OpenSUSE"),
        ("suse", "SUSE"),
        ("macos", "macOS"),
        ("windows", "Windows"),
        ("freebsd", "FreeBSD"),
        ("solaris", "Solaris"),
        ("amazon_linux", "Amazon"),
        ("", "Unknown"),
    ];
    for (class, name) in NAMES {
        if class.is_empty() {
            c.sys("os_name_human", name, "source=agent");
        } else if c.has_class(class) {
            c.sys(
                "os_name_human",
                name,
                &format!("source=agent,derived-from={class}"),
            );
        } else {
            continue;
        }
        return;
    }
}

/// `sys.os_version_major`: the first number in `sys.flavor`.
pub(crate) fn os_version_major(c: &mut Collector) {
    let major: Option<String> = c.sys_str("flavor").and_then(|f| {
        let start = f.find(|ch: char| ch.is_ascii_digit())?;
        Some(
            f[start..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect(),
        )
    });
    match major {
        Some(m) => c.sys("os_version_major", m, "source=agent,derived-from=flavor"),
        None => c.sys("os_version_major", "Unknown", "source=agent"),
    }
}
