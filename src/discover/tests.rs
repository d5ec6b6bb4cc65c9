//! Unit tests of discovery: pure parsers, and whole runs on fake root
//! trees with an injected clock, interface list and time zone.

use super::*;
use crate::values::value::Value;
use std::net::Ipv4Addr;
use std::time::{Duration, UNIX_EPOCH};

const PKCS1_KEY: &str = "-----BEGIN RSA PUBLIC KEY-----
MEgCQQChNAT6TyXFqyZ9Lbi+HwziMdJOL60bucTLKfm5FgQrvNPs34wk7dD1ogIa
Y0pGBirMH58Y2gIlQyQ4TmcfloyJAgMBAAE=
-----END RSA PUBLIC KEY-----
";
const SPKI_KEY: &str = "-----BEGIN PUBLIC KEY-----
MFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAKE0BPpPJcWrJn0tuL4fDOIx0k4vrRu5
xMsp+bkWBCu80+zfjCTt0PWiAhpjSkYGKswfnxjaAiVDJDhOZx+WjIkCAwEAAQ==
-----END PUBLIC KEY-----
";
/// MD5 of that key's modulus and exponent, computed with Python's hashlib.
const KEY_MD5: &str = "9da543a7332120516d7acc2ff132b33d";

/// 2026-11-22 17:47:05 UTC, a Sunday.
const SUNDAY_EVENING: u64 = 1_795_369_625;

struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(tempfile::tempdir().expect("temp dir"))
    }

    fn file(&self, path: &str, content: &str) -> &Tree {
        let p = self.0.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
        self
    }

    fn input(&self, now: u64, offset: i64, ipv4: Vec<Ipv4Iface>) -> DiscoverInput {
        DiscoverInput {
            layout: Layout::for_workdir(Path::new("/var/lib/convergent")),
            entry: PathBuf::from("/srv/policy/./promises.cf"),
            now: UNIX_EPOCH + Duration::from_secs(now),
            root: self.0.path().to_path_buf(),
            role: Role::Agent,
            ipv4: Some(ipv4),
            utc_offset: Some(offset),
            name_lookup: NameLookup::HostsFile,
            procdir: None,
        }
    }
}

fn iface(name: &str, addr: [u8; 4], flags: u32) -> Ipv4Iface {
    Ipv4Iface {
        name: name.to_string(),
        addr: Ipv4Addr::from(addr),
        flags,
    }
}

fn class_names(d: &Discovery) -> Vec<&str> {
    d.classes.iter().map(|c| c.name.as_str()).collect()
}

fn sys<'a>(d: &'a Discovery, name: &str) -> &'a Value {
    d.var("sys", name)
        .unwrap_or_else(|| panic!("sys.{name} defined"))
        .value()
}

fn scalar<'a>(d: &'a Discovery, name: &str) -> &'a str {
    sys(d, name).as_scalar().unwrap_or("<not a scalar>")
}

/// An Ubuntu 22.04 web server with one Ethernet interface.
fn ubuntu_tree() -> Tree {
    let t = Tree::new();
    t.file("/proc/sys/kernel/ostype", "Linux\n")
        .file("/proc/sys/kernel/hostname", "Web1\n")
        .file("/proc/sys/kernel/osrelease", "5.15.0-91-generic\n")
        .file(
            "/proc/sys/kernel/version",
            "#101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023\n",
        )
        .file("/proc/sys/kernel/arch", "x86_64\n")
        .file(
            "/etc/os-release",
            "PRETTY_NAME=\"Ubuntu 22.04.3 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\n\
             # a comment\nID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=jammy\n",
        )
        .file("/etc/debian_version", "bookworm/sid\n")
        .file("/etc/issue", "Ubuntu 22.04.3 LTS \\n \\l\n")
        .file(
            "/etc/hosts",
            "127.0.0.1 localhost\n::1 web1.example.com\n10.0.0.5 web1.example.com web1 www\n",
        )
        .file("/proc/uptime", "5232.35 9788.17\n")
        .file("/sys/devices/system/cpu/online", "0-3\n")
        .file(
            "/proc/self/status",
            "Name:\tagent\nUid:\t1000\t1000\t1000\t1000\n",
        )
        .file(
            "/etc/passwd",
            "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/zsh\n",
        )
        .file("/proc/1/cmdline", "/sbin/init\0splash\0")
        .file("/lib/systemd/systemd", "")
        .file(
            "/proc/net/route",
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
             eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
        )
        .file(
            "/proc/net/if_inet6",
            "fd000000000000000000000000000005 02 40 00 80     eth0\n\
             00000000000000000000000000000001 01 80 10 80       lo\n",
        )
        .file(
            "/proc/net/dev",
            "Inter-|   Receive |  Transmit\n face |bytes packets|bytes packets\n\
             \x20   lo:  10 1 0 0 0 0 0 0  10 1 0 0 0 0 0 0\n\
             \x20 eth0: 200 2 0 0 0 0 0 0 300 3 0 0 0 0 0 0\n\
             \x20 wlan0: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        )
        .file("/sys/class/net/eth0/address", "52:54:00:AB:CD:EF\n")
        .file("/sys/class/net/eth0/type", "1\n")
        .file("/sys/class/net/wlan0/address", "52:54:00:00:00:99\n")
        .file("/sys/class/net/wlan0/type", "1\n")
        .file("/sys/class/net/lo/address", "00:00:00:00:00:00\n")
        .file("/sys/class/net/lo/type", "772\n")
        .file("/sbin/ifconfig", "")
        .file("/var/lib/convergent/ppkeys/localhost.pub", PKCS1_KEY)
        .file("/var/lib/convergent/bin/cf-promises", "");
    // PID 1 is a link to systemd, as on Ubuntu (relative, to stay inside
    // the fake root).
    std::os::unix::fs::symlink("../lib/systemd/systemd", t.0.path().join("sbin/init"))
        .expect("symlink");
    t
}

fn ubuntu_discovery(t: &Tree) -> Discovery {
    discover(&t.input(
        SUNDAY_EVENING,
        3600,
        vec![
            iface("lo", [127, 0, 0, 1], 0x49),
            iface("eth0", [10, 0, 0, 5], 0x1043),
        ],
    ))
}

#[test]
fn ubuntu_release_classes_and_flavor() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    let names = class_names(&d);
    for c in [
        "linux",
        "ubuntu",
        "ubuntu_22",
        "ubuntu_22_04",
        "debian",
        "debian_bookworm",
    ] {
        assert!(names.contains(&c), "{c} in {names:?}");
    }
    // Ubuntu's debian_version has no number, so no ubuntu_22_04 from /etc/issue;
    // the one above comes from os-release, with its tags.
    assert_eq!(
        d.class("ubuntu_22_04").map(|c| c.tags.join(",")),
        Some(
            "inventory,attribute_name=none,source=agent,derived-from-file=/etc/os-release,hardclass"
                .to_string()
        )
    );
    assert_eq!(
        d.class("ubuntu_22").map(|c| c.tags.join(",")),
        Some(
            "inventory,attribute_name=none,source=agent,derived-from=sys.flavor,hardclass"
                .to_string()
        )
    );
    assert_eq!(scalar(&d, "flavor"), "ubuntu_22");
    assert_eq!(scalar(&d, "flavour"), "ubuntu_22");
    assert_eq!(scalar(&d, "os_name_human"), "Ubuntu");
    assert_eq!(scalar(&d, "os_version_major"), "22");
    assert_eq!(scalar(&d, "doc_root"), "/var/www");
    assert!(names.contains(&"systemd"));
    let os_release = sys(&d, "os_release").as_data().expect("data");
    assert_eq!(os_release["PRETTY_NAME"], "Ubuntu 22.04.3 LTS");
    assert_eq!(os_release["ID_LIKE"], "debian");
    // Keys sorted, as cf-promises prints them.
    let keys: Vec<&String> = os_release.as_object().expect("object").keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[test]
fn kernel_and_architecture() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    let names = class_names(&d);
    for c in [
        "64_bit",
        "x86_64",
        "linux_x86_64",
        "linux_5_15_0_91_generic",
        "linux_x86_64_5_15_0_91_generic",
        "linux_x86_64_5_15_0_91_generic__101_Ubuntu_SMP_Tue_Nov_14_13_30_08_UTC_2023",
        "compiled_on_linux_gnu",
        "agent",
        "any",
        "cfengine",
        "cfengine_3",
        "cfengine_3_21",
        "cfengine_3_21_0",
        "community_edition",
        "feature_tls_1_3",
        "feature_def_json_preparse",
    ] {
        assert!(names.contains(&c), "{c} in {names:?}");
    }
    assert!(!names.contains(&"common"));
    assert_eq!(scalar(&d, "os"), "linux");
    assert_eq!(scalar(&d, "class"), "linux");
    assert_eq!(scalar(&d, "arch"), "x86_64");
    assert_eq!(scalar(&d, "release"), "5.15.0-91-generic");
    assert_eq!(scalar(&d, "ostype"), "linux_x86_64");
    assert_eq!(scalar(&d, "cf_version"), "3.21.0");
    assert_eq!(scalar(&d, "cf_version_minor"), "21");
    // The platform class keeps the tags of its first definition.
    assert_eq!(
        d.class("linux_x86_64").map(|c| c.tags.join(",")),
        Some("source=agent,derived-from=sys.sysname,derived-from=sys.machine,hardclass".into())
    );
}

#[test]
fn host_names_from_etc_hosts() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    assert_eq!(scalar(&d, "host"), "web1");
    assert_eq!(scalar(&d, "uqhost"), "web1");
    assert_eq!(scalar(&d, "fqhost"), "web1.example.com");
    assert_eq!(scalar(&d, "domain"), "example.com");
    let names = class_names(&d);
    for c in ["web1_example_com", "example_com", "com", "web1", "www"] {
        assert!(names.contains(&c), "{c} in {names:?}");
    }
    assert_eq!(
        d.class("example_com").map(|c| c.tags.join(",")),
        Some("inventory,attribute_name=none,source=agent,derived-from=sys.fqhost,hardclass".into())
    );
    assert_eq!(
        d.class("www").map(|c| c.tags.join(",")),
        Some("inventory,attribute_name=none,source=agent,based-on=sys.fqhost,hardclass".into())
    );
}

#[test]
fn domain_name_rules() {
    use super::host::{calculate_domain_name, hosts_lookup};
    let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(calculate_domain_name("vm", "vm"), s("vm", "vm", ""));
    assert_eq!(calculate_domain_name("vm", ""), s("vm", "vm", ""));
    assert_eq!(calculate_domain_name("a", "a.b.c"), s("a.b.c", "a", "b.c"));
    assert_eq!(calculate_domain_name("a.x", ""), s("a.x", "a", "x"));
    assert_eq!(calculate_domain_name("a", "z.b"), s("z.b", "a", ""));
    let hosts = "# c\n::1 vm.v6\n127.0.0.1 localhost\n127.0.0.1 VM alias # x\n";
    assert_eq!(
        hosts_lookup(hosts, "vm"),
        Some(("VM".to_string(), vec!["alias".to_string()]))
    );
    assert_eq!(hosts_lookup(hosts, "nothere"), None);
}

#[test]
fn network_classes_and_variables() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    let names = class_names(&d);
    for c in [
        "127_0_0_1",
        "ipv4_127",
        "ipv4_127_0_0_1",
        "10_0_0_5",
        "ipv4_10",
        "ipv4_10_0",
        "ipv4_10_0_0",
        "ipv4_10_0_0_5",
        "net_iface_lo",
        "net_iface_eth0",
        "mac_52_54_00_ab_cd_ef",
        "ipv4_gw_10_0_0_1",
        "fd00__5",
        "ipv6_fd00__5",
    ] {
        assert!(names.contains(&c), "{c} in {names:?}");
    }
    // Interfaces without IPv4 get no mac_ class, loopback no MAC at all.
    assert!(!names.contains(&"mac_52_54_00_00_00_99"));
    assert!(!names.contains(&"__1"));
    assert_eq!(scalar(&d, "ipv4"), "10.0.0.5");
    assert_eq!(scalar(&d, "interface"), "eth0");
    assert_eq!(scalar(&d, "ipv4[eth0]"), "10.0.0.5");
    assert_eq!(scalar(&d, "ipv4_1[eth0]"), "10");
    assert_eq!(scalar(&d, "ipv4_3[lo]"), "127.0.0");
    assert_eq!(scalar(&d, "ip2iface[10.0.0.5]"), "eth0");
    assert_eq!(scalar(&d, "interface_flags[lo]"), "up loopback running");
    assert_eq!(
        scalar(&d, "interface_flags[eth0]"),
        "up broadcast running multicast"
    );
    assert_eq!(scalar(&d, "hardware_mac[eth0]"), "52:54:00:ab:cd:ef");
    assert_eq!(scalar(&d, "hardware_mac[wlan0]"), "52:54:00:00:00:99");
    assert_eq!(
        d.var("sys", "hardware_mac[wlan0]")
            .map(|v| v.tags.join(",")),
        Some("source=agent,derived-from=ifconfig".to_string())
    );
    let list = |name: &str| sys(&d, name).as_list().map(|l| l.join(" "));
    assert_eq!(list("interfaces"), Some("eth0".into()));
    assert_eq!(
        list("hardware_addresses"),
        Some("52:54:00:ab:cd:ef 52:54:00:00:00:99".into())
    );
    assert_eq!(
        list("ip_addresses"),
        Some("127.0.0.1 10.0.0.5 fd00::5".into())
    );

    let inet = sys(&d, "inet").as_data().expect("data");
    assert_eq!(inet["default_gateway"], "10.0.0.1");
    assert_eq!(inet["default_route"]["interface"], "eth0");
    assert_eq!(inet["routes"][1]["mask"], "255.255.255.0");
    assert_eq!(
        inet["routes"][1]["flags"],
        serde_json::json!(["up", "net", "not_default", "local"])
    );
    let inet6 = sys(&d, "inet6").as_data().expect("data");
    assert_eq!(inet6["addresses"]["eth0"]["address"], "fd00:0:0:0:0:0:0:5");
    assert_eq!(inet6["addresses"]["lo"]["prefix_length"], 128);
    let data = sys(&d, "interfaces_data").as_data().expect("data");
    assert_eq!(data["eth0"]["transmit_packets"], "3");
    assert_eq!(data["wlan0"]["device"], "wlan0");
}

#[test]
fn without_ifconfig_no_ipv6_is_found() {
    let t = ubuntu_tree();
    std::fs::remove_file(t.0.path().join("sbin/ifconfig")).expect("rm");
    let d = ubuntu_discovery(&t);
    assert!(d.class("ipv6_fd00__5").is_none());
    assert!(d.var("sys", "hardware_mac[wlan0]").is_none());
    // sys.inet6 comes from /proc and stays.
    assert!(d.var("sys", "inet6").is_some());
}

#[test]
fn ignored_and_down_interfaces() {
    let t = ubuntu_tree();
    t.file(
        "/var/lib/convergent/inputs/ignore_interfaces.rx",
        "docker.*\n",
    );
    let d = discover(&t.input(
        SUNDAY_EVENING,
        0,
        vec![
            iface("docker0", [172, 17, 0, 1], 0x1043),
            iface("eth1", [192, 168, 1, 2], 0x1002),
        ],
    ));
    assert!(d.class("net_iface_docker0").is_none());
    assert!(d.class("ipv4_172_17_0_1").is_none());
    // Down: the interface class and flags, but no address classes.
    assert!(d.class("net_iface_eth1").is_some());
    assert!(d.class("ipv4_192_168_1_2").is_none());
    assert_eq!(scalar(&d, "interface_flags[eth1]"), "broadcast multicast");
    assert!(d.var("sys", "ipv4").is_none());

    // A tunnel has no hardware address: zeros, as SIOCGIFHWADDR says.
    t.file("/sys/class/net/tun0/address", "\n");
    let d = discover(&t.input(
        SUNDAY_EVENING,
        0,
        vec![iface("tun0", [10, 8, 0, 1], 0x10d1)],
    ));
    assert_eq!(scalar(&d, "hardware_mac[tun0]"), "00:00:00:00:00:00");
    assert_eq!(
        scalar(&d, "interface_flags[tun0]"),
        "up pointopoint running noarp multicast"
    );
}

#[test]
fn time_classes_local_and_gmt() {
    let t = ubuntu_tree();
    // One hour east of UTC: 18:47 local, 17:47 GMT.
    let d = ubuntu_discovery(&t);
    let names = class_names(&d);
    for c in [
        "Hr18",
        "Hr18_Q4",
        "Evening",
        "Min47",
        "Min45_50",
        "Q4",
        "Day22",
        "Sunday",
        "November",
        "Yr2026",
        "Lcycle_1",
        "GMT_Hr17",
        "GMT_Hr17_Q4",
        "GMT_Afternoon",
        "GMT_Min45_50",
        "GMT_Sunday",
        "GMT_Day22",
        "GMT_Lcycle_1",
    ] {
        assert!(names.contains(&c), "{c} in {names:?}");
    }
    assert!(!names.contains(&"Hr17"));
    assert_eq!(
        d.class("Hr18").map(|c| c.tags.join(",")),
        Some("time_based,cfengine_internal_time_based_autoremove,source=agent,hardclass".into())
    );
    assert_eq!(scalar(&d, "date"), "Sun Nov 22 18:47:05 2026");
    assert_eq!(scalar(&d, "cdate"), "Sun_Nov_22_18_47_05_2026");
    assert_eq!(scalar(&d, "systime"), "1795369625");
    assert_eq!(scalar(&d, "sysday"), "20779");
    assert_eq!(scalar(&d, "uptime"), "87");
    assert_eq!(
        d.var("sys", "systime").map(|v| v.dtype),
        Some(DataType::Int)
    );
}

#[test]
fn calendar_arithmetic() {
    use super::time::{civil, ctime, time_class_names};
    let t = civil(0);
    assert_eq!((t.year, t.month, t.day, t.weekday), (1970, 1, 1, 3));
    let t = civil(1_795_400_114);
    assert_eq!(
        (t.year, t.month, t.day, t.hour, t.min, t.sec),
        (2026, 11, 23, 2, 15, 14)
    );
    assert_eq!(ctime(&t), "Mon Nov 23 02:15:14 2026");
    // A leap day, and a day of the month with one digit.
    let t = civil(1_709_164_800);
    assert_eq!((t.year, t.month, t.day), (2024, 2, 29));
    assert_eq!(ctime(&civil(1_709_337_600)), "Sat Mar  2 00:00:00 2024");
    // Before the epoch.
    let t = civil(-1);
    assert_eq!(
        (t.year, t.month, t.day, t.hour, t.weekday),
        (1969, 12, 31, 23, 2)
    );
    // Minute 58: the interval wraps to 00.
    let names = time_class_names("", &civil(58 * 60));
    assert!(names.contains(&"Min55_00".to_string()), "{names:?}");
    assert!(names.contains(&"Night".to_string()));
    assert!(names.contains(&"Lcycle_2".to_string())); // 1970 % 3
}

#[test]
fn cpus_user_and_paths() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    assert!(d.class("4_cpus").is_some());
    assert_eq!(scalar(&d, "cpus"), "4");
    assert_eq!(scalar(&d, "crontab"), "/var/spool/cron/crontabs/alice");
    let user = sys(&d, "user_data").as_data().expect("data");
    assert_eq!(
        user.to_string(),
        r#"{"description":"Alice,,,","gid":1000,"home_dir":"/home/alice","shell":"/bin/zsh","uid":1000,"username":"alice"}"#
    );
    assert_eq!(scalar(&d, "workdir"), "/var/lib/convergent");
    assert_eq!(scalar(&d, "inputdir"), "/var/lib/convergent/inputs");
    assert_eq!(scalar(&d, "statedir"), "/var/lib/convergent/state");
    assert_eq!(scalar(&d, "masterdir"), "/var/lib/convergent/masterfiles");
    assert_eq!(scalar(&d, "bindir"), "/var/lib/convergent/bin");
    assert_eq!(scalar(&d, "libdir"), "/var/lib/convergent/inputs/lib");
    assert_eq!(
        scalar(&d, "default_policy_path"),
        "/var/lib/convergent/inputs/promises.cf"
    );
    assert_eq!(
        scalar(&d, "cf_promises"),
        "\"/var/lib/convergent/bin/cf-promises\""
    );
    // No cf-agent in the bin directory: neither the agent nor its twin.
    assert!(d.var("sys", "cf_agent").is_none());
    assert!(d.var("sys", "cf_twin").is_none());
    assert!(d.var("sys", "cf_serverd").is_none());
    assert_eq!(
        scalar(&d, "policy_entry_filename"),
        "/srv/policy/promises.cf"
    );
    assert_eq!(scalar(&d, "policy_entry_dirname"), "/srv/policy");
    assert_eq!(scalar(&d, "policy_entry_basename"), "promises.cf");
    assert_eq!(scalar(&d, "key_digest"), format!("MD5={KEY_MD5}"));
    assert!(d.class(&format!("PK_MD5_{KEY_MD5}")).is_some());
    assert_eq!(
        d.var("const", "endl").map(|v| v.value.clone()),
        Some(Value::str("\n"))
    );
    assert!(d.var("def", "jq").is_some());
}

#[test]
fn debian_layout_and_version_files() {
    let l = Layout::for_workdir(Path::new("/var/lib/cfengine3"));
    assert_eq!(l.logdir, PathBuf::from("/var/log/cfengine3"));
    assert_eq!(l.piddir, PathBuf::from("/var/run/cfengine3"));
    assert_eq!(l.bindir, PathBuf::from("/usr/bin"));

    let t = Tree::new();
    t.file("/etc/debian_version", "12.11\n")
        .file("/etc/issue", "Debian GNU/Linux 12 \\n \\l\n")
        .file(
            "/etc/os-release",
            "ID=debian\nVERSION_ID=\"12\"\nNAME=\"Debian GNU/Linux\"\n",
        );
    let d = discover(&t.input(SUNDAY_EVENING, 0, vec![]));
    assert_eq!(
        d.class("debian_12_11").map(|c| c.tags.join(",")),
        Some(
            "inventory,attribute_name=none,source=agent,derived-from-file=/etc/debian_version,hardclass"
                .into()
        )
    );
    assert_eq!(
        d.class("debian").map(|c| c.tags.join(",")),
        Some(
            "inventory,attribute_name=none,source=agent,derived-from-file=/etc/os-release,hardclass"
                .into()
        )
    );
    assert_eq!(scalar(&d, "flavor"), "debian_12");
    assert_eq!(scalar(&d, "os_name_human"), "Debian");
}

#[test]
fn red_hat_family_release_files() {
    let t = Tree::new();
    t.file(
        "/etc/redhat-release",
        "Red Hat Enterprise Linux Server release 7.9 (Maipo)\n",
    );
    let d = discover(&t.input(SUNDAY_EVENING, 0, vec![]));
    let names = class_names(&d);
    for c in [
        "redhat",
        "redhat_s",
        "redhat_s_7",
        "redhat_s_7_9",
        "redhat_7",
        "redhat_7_9",
    ] {
        assert!(names.contains(&c), "{c} in {names:?}");
    }
    assert_eq!(scalar(&d, "flavor"), "redhat_7");
    assert_eq!(scalar(&d, "doc_root"), "/var/www/html");
    assert_eq!(scalar(&d, "os_name_human"), "RHEL");

    let t = Tree::new();
    t.file(
        "/etc/redhat-release",
        "CentOS Linux release 7.9.2009 (Core)\n",
    )
    .file("/etc/os-release", "ID=\"centos\"\nVERSION_ID=\"7\"\n")
    .file("/proc/self/status", "Uid:\t0\t0\t0\t0\n")
    .file("/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n");
    let d = discover(&t.input(SUNDAY_EVENING, 0, vec![]));
    for c in ["centos", "centos_7", "centos_7_9", "redhat"] {
        assert!(d.class(c).is_some(), "{c}");
    }
    assert_eq!(scalar(&d, "flavor"), "centos_7");
    assert_eq!(scalar(&d, "os_name_human"), "CentOS");
    assert_eq!(scalar(&d, "crontab"), "/var/spool/cron/root");

    let t = Tree::new();
    t.file("/etc/os-release", "ID=rhel\nVERSION_ID=\"9.3\"\n");
    let d = discover(&t.input(SUNDAY_EVENING, 0, vec![]));
    for c in [
        "rhel",
        "rhel_9",
        "rhel_9_3",
        "redhat",
        "redhat_9",
        "redhat_9_3",
    ] {
        assert!(d.class(c).is_some(), "{c}");
    }
    assert_eq!(scalar(&d, "flavor"), "rhel_9");
}

#[test]
fn an_empty_root_defines_what_it_can() {
    let t = Tree::new();
    let d = discover(&t.input(SUNDAY_EVENING, 0, vec![]));
    for c in [
        "any",
        "agent",
        "cfengine_3_21",
        "community_edition",
        "GMT_Sunday",
        "64_bit",
    ] {
        assert!(d.class(c).is_some(), "{c}");
    }
    assert!(d.var("sys", "os_release").is_none());
    assert!(d.var("sys", "uptime").is_none());
    assert!(d.var("sys", "user_data").is_none());
    assert!(d.var("sys", "key_digest").is_none());
    assert_eq!(scalar(&d, "os_name_human"), "Unknown");
    assert_eq!(scalar(&d, "os_version_major"), "Unknown");
    assert_eq!(scalar(&d, "fqhost"), "");
}

#[test]
fn command_line_defines_win_and_negates_do_not_cancel() {
    let t = ubuntu_tree();
    let mut classes = ubuntu_discovery(&t).classes;
    let before = classes.len();
    apply_command_line(
        &mut classes,
        &[
            "linux,a.b=c".to_string(),
            "ns:x-y".to_string(),
            String::new(),
        ],
        &["any".to_string(), "a_b_c".to_string()],
    );
    let linux = classes.iter().find(|c| c.name == "linux").expect("linux");
    assert_eq!(*linux.tags, vec!["source=environment".to_string()]);
    assert!(classes.iter().any(|c| c.name == "a_b_c"));
    assert!(classes.iter().any(|c| c.name == "ns:x_y"));
    assert!(classes.iter().any(|c| c.name == "any"));
    assert_eq!(classes.len(), before + 2);
}

#[test]
fn first_class_and_last_variable_win() {
    let mut c = Collector::default();
    c.class("a-b", "one");
    c.class("a_b", "two");
    c.class("", "empty");
    c.sys("v", "1", "x");
    c.sys("v", "2", "y");
    let d = c.finish();
    assert_eq!(d.classes.len(), 1);
    assert_eq!(
        *d.classes[0].tags,
        vec!["one".to_string(), "hardclass".to_string()]
    );
    assert_eq!(d.vars.len(), 1);
    assert_eq!(d.vars[0].value, Value::str("2"));
    assert_eq!(d.vars[0].tags, vec!["y".to_string()]);
}

#[test]
fn classes_of_one_tag_text_share_one_list() {
    let mut c = Collector::default();
    c.class("a", "x,source=agent");
    c.class("b", "y");
    c.class("c", "x,source=agent");
    let d = c.finish();
    let tags = |n: &str| d.class(n).expect(n).tags.clone();
    assert_eq!(*tags("a"), ["x", "source=agent", "hardclass"]);
    assert!(std::sync::Arc::ptr_eq(&tags("a"), &tags("c")));
    assert_eq!(*tags("b"), ["y", "hardclass"]);
}

#[test]
fn parsers() {
    use super::cpu::count_cpu_list;
    use super::keys::rsa_key_digest;
    use super::monitor::parse_shown_list;
    use super::network::{natural_cmp, parse_ipv6_routes, parse_net_dev, parse_netstat};
    use super::os::{parse_env_file, sanitize_issue};
    use std::cmp::Ordering;

    assert_eq!(count_cpu_list("0-3,5,7-8\n"), Some(7));
    assert_eq!(count_cpu_list("0\n"), Some(1));
    assert_eq!(count_cpu_list("x"), None);

    assert_eq!(rsa_key_digest(PKCS1_KEY).as_deref(), Some(KEY_MD5));
    assert_eq!(rsa_key_digest(SPKI_KEY).as_deref(), Some(KEY_MD5));
    assert_eq!(rsa_key_digest("-----BEGIN X-----\n!!\n"), None);

    assert_eq!(
        parse_shown_list(r#"{"a","b c",'d'}"#),
        vec!["a", "b c", "d"]
    );

    assert_eq!(natural_cmp("eth2", "eth10"), Ordering::Less);
    assert_eq!(natural_cmp("eth0", "ifb0"), Ordering::Less);
    assert_eq!(natural_cmp("lo", "eth0"), Ordering::Greater);

    let env = parse_env_file("A=\"x \\\"y\\\"\"\nB='z'\n#C=1\nD=plain\nA=again\n");
    assert_eq!(
        env,
        vec![
            ("A".to_string(), "again".to_string()),
            ("B".to_string(), "z".to_string()),
            ("D".to_string(), "plain".to_string()),
        ]
    );
    assert_eq!(
        sanitize_issue("Debian GNU/Linux 12 \\n \\l"),
        "Debian GNU/Linux 12"
    );

    let stats = parse_netstat("TcpExt: B A\nTcpExt: 2 1\nIpExt: X\nIpExt: 9\n");
    assert_eq!(
        serde_json::Value::Object(stats).to_string(),
        r#"{"IpExt":{"X":"9"},"TcpExt":{"A":"1","B":"2"}}"#
    );
    let routes = parse_ipv6_routes(
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n\
         00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n",
    );
    assert_eq!(routes[0]["next_hop"], "fd00:0:0:0:0:0:0:1");
    assert_eq!(routes[0]["metric"], 1024);
    assert_eq!(
        routes[0]["flags"],
        serde_json::json!(["up", "net", "gateway"])
    );
    assert_eq!(routes[1]["metric"], -1);
    assert_eq!(
        routes[1]["flags"],
        serde_json::json!(["down", "net", "local"])
    );
    // cf-agent reads the reference and use counts as decimal digits, and
    // skips a line where either has a hex letter.
    let routes = parse_ipv6_routes(
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 0007e26c 00200200       lo
         fe80000000000000c27cd1fffe3eada6 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000012 00000010 80200001       lo
",
    );
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0]["refcnt"], 12);
    assert_eq!(routes[0]["use"], 10);
    let dev = parse_net_dev("h\nh\n  lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
    assert_eq!(dev["lo"]["transmit_multicast"], "16");
    assert_eq!(dev["lo"]["receive_bytes"], "1");
}

#[test]
fn monitor_environment_file() {
    let t = ubuntu_tree();
    t.file(
        "/var/lib/convergent/state/env_data",
        "@listening_tcp4_ports={\"22\",\"80\"}\nusers_high=on\nentropy_low\n",
    );
    let mut input = t.input(SUNDAY_EVENING, 0, vec![]);
    input.now = SystemTime::now();
    let d = discover(&input);
    assert_eq!(
        d.var("mon", "listening_tcp4_ports")
            .map(|v| v.value.clone()),
        Some(Value::List(vec!["22".into(), "80".into()]))
    );
    assert_eq!(
        d.var("mon", "users_high").map(|v| v.value.clone()),
        Some(Value::str("on"))
    );
    assert!(d.var("mon", "env_time").is_some());
    assert_eq!(
        d.class("entropy_low").map(|c| c.tags.join(",")),
        Some("monitoring,source=environment,hardclass".into())
    );
    // An hour later the file is too old to trust.
    input.now = SystemTime::now() + Duration::from_secs(7200);
    assert!(discover(&input).var("mon", "users_high").is_none());
}

/// What bootstrapping leaves in the work directory: `policy_server.dat`
/// and `state/am_policy_hub` (00_basics/def.json/policy_server_classes.cf).
#[test]
fn bootstrap_files_define_the_hub() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    assert!(d.class("am_policy_hub").is_none());
    assert!(d.var("sys", "policy_hub_port").is_none());
    t.file("/var/lib/convergent/policy_server.dat", "www:1234\n")
        .file("/var/lib/convergent/state/am_policy_hub", "");
    let d = ubuntu_discovery(&t);
    assert_eq!(scalar(&d, "policy_hub"), "10.0.0.5");
    assert_eq!(scalar(&d, "policy_hub_port"), "1234");
    for c in ["am_policy_hub", "policy_server"] {
        assert!(d.class(c).is_some(), "{c}");
    }
    // A name that does not resolve gives no sys.policy_hub, as in
    // cf-agent; the port is the default one.
    t.file("/var/lib/convergent/policy_server.dat", "fake-server\n");
    let d = ubuntu_discovery(&t);
    assert!(d.var("sys", "policy_hub").is_none());
    assert_eq!(scalar(&d, "policy_hub_port"), "5308");
}

/// CFEngine 3.24's roles of a bootstrapped host: none before bootstrap, a
/// client, a policy server, a reporting hub (cf-hub in the bin directory).
#[test]
fn cfengine_roles_follow_the_bootstrap() {
    let roles = |d: &Discovery| {
        d.var("sys", "cfengine_roles")
            .and_then(|v| v.value.as_list().map(<[String]>::to_vec))
    };
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    assert_eq!(roles(&d), None);
    assert!(d.class("cfengine_client").is_none());
    t.file("/var/lib/convergent/policy_server.dat", "10.0.0.5\n");
    let d = ubuntu_discovery(&t);
    assert_eq!(roles(&d), Some(vec!["Client".to_string()]));
    assert!(d.class("cfengine_client").is_some());
    t.file("/var/lib/convergent/state/am_policy_hub", "");
    let d = ubuntu_discovery(&t);
    assert_eq!(roles(&d), Some(vec!["Policy server".to_string()]));
    assert!(d.class("cfengine_client").is_none());
    t.file("/var/lib/convergent/bin/cf-hub", "");
    let d = ubuntu_discovery(&t);
    assert_eq!(
        roles(&d),
        Some(vec![
            "Policy server".to_string(),
            "Reporting hub".to_string()
        ])
    );
    assert!(d.class("cfengine_reporting_hub").is_some());
}

/// CFEngine 3.26's socket count: the highest physical package id, plus
/// one; one without sysfs.
#[test]
fn cpu_sockets_from_sysfs() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    assert_eq!(scalar(&d, "cpusockets"), "1");
    assert!(d.class("1_cpusocket").is_some());
    for (cpu, pkg) in [(0, "0"), (1, "0"), (2, "1"), (3, "1")] {
        t.file(
            &format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
            &format!("{pkg}\n"),
        );
    }
    let d = ubuntu_discovery(&t);
    assert_eq!(scalar(&d, "cpusockets"), "2");
    assert!(d.class("2_cpusockets").is_some());
    // With the package lists, the CPUs a list names are not read: a wrong
    // id planted in one that is listed changes nothing, one that is not
    // listed counts.
    for (cpu, list) in [(0, "0-1\n"), (2, "2,3\n")] {
        t.file(
            &format!("/sys/devices/system/cpu/cpu{cpu}/topology/package_cpus_list"),
            list,
        );
    }
    t.file(
        "/sys/devices/system/cpu/cpu3/topology/physical_package_id",
        "7\n",
    );
    assert_eq!(scalar(&ubuntu_discovery(&t), "cpusockets"), "2");
    t.file(
        "/sys/devices/system/cpu/cpu2/topology/package_cpus_list",
        "2\n",
    );
    assert_eq!(scalar(&ubuntu_discovery(&t), "cpusockets"), "8");
    assert_eq!(scalar(&d, "moduledir"), "/var/lib/convergent/modules");
    assert_eq!(scalar(&d, "keydir"), "/var/lib/convergent/ppkeys");
}

/// `sys.cf_agent` and `sys.cf_twin` as cf-agent 3.21 defines them: from
/// the bin directory alone, the twin falling back to the agent.
#[test]
fn agent_and_twin_from_the_bin_directory() {
    let t = ubuntu_tree();
    let d = ubuntu_discovery(&t);
    assert!(d.var("sys", "cf_agent").is_none());
    assert!(d.var("sys", "cf_twin").is_none());
    t.file("/var/lib/convergent/bin/cf-agent", "");
    let d = ubuntu_discovery(&t);
    let agent = "\"/var/lib/convergent/bin/cf-agent\"";
    assert_eq!(scalar(&d, "cf_agent"), agent);
    assert_eq!(scalar(&d, "cf_twin"), agent);
    t.file("/var/lib/convergent/bin/cf-twin", "");
    let d = ubuntu_discovery(&t);
    assert_eq!(scalar(&d, "cf_agent"), agent);
    assert_eq!(scalar(&d, "cf_twin"), "\"/var/lib/convergent/bin/cf-twin\"");
    // A twin without an agent is the twin alone.
    std::fs::remove_file(t.0.path().join("var/lib/convergent/bin/cf-agent")).expect("rm");
    let d = ubuntu_discovery(&t);
    assert!(d.var("sys", "cf_agent").is_none());
    assert_eq!(scalar(&d, "cf_twin"), "\"/var/lib/convergent/bin/cf-twin\"");
}

/// `/etc/SuSE-release` as cf-agent 3.21 reads it: SLES 12's VERSION and
/// PATCHLEVEL lines, and openSUSE 13.2's dotted version after its name
/// (tests/it/os_fixtures_differential.rs compares both with cf-promises).
#[test]
fn suse_release_file() {
    let t = ubuntu_tree();
    for f in [
        "/etc/os-release",
        "/etc/lsb-release",
        "/etc/debian_version",
        "/etc/issue",
    ] {
        let _ = std::fs::remove_file(t.0.path().join(f.trim_start_matches('/')));
    }
    t.file(
        "/etc/SuSE-release",
        "SUSE Linux Enterprise Server 12 (x86_64)\nVERSION = 12\nPATCHLEVEL = 5\n",
    );
    let d = ubuntu_discovery(&t);
    for class in [
        "SUSE",
        "suse",
        "SuSE",
        "SLES12",
        "SLES",
        "SLES_12",
        "SLES_12_5",
    ] {
        assert!(d.class(class).is_some(), "{class}");
    }
    assert_eq!(scalar(&d, "flavor"), "SUSE_12");
    assert_eq!(
        *d.class("SuSE_12").expect("SuSE_12").tags,
        ["source=agent", "hardclass"]
    );
    t.file(
        "/etc/SuSE-release",
        "openSUSE 13.2 (x86_64)\nVERSION = 13.2\nCODENAME = Harlequin\n",
    );
    let d = ubuntu_discovery(&t);
    for class in ["SUSE_13", "SUSE_13_2", "SuSE_13", "SuSE_13_2"] {
        assert!(d.class(class).is_some(), "{class}");
    }
    assert!(d.class("SLES").is_none());
    assert_eq!(scalar(&d, "flavor"), "SUSE_13");
}
