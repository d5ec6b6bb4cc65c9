//! The number of online CPUs: `sys.cpus` and `N_cpus` (or `1_cpu`); the
//! number of CPU sockets (CFEngine 3.26): `sys.cpusockets` and
//! `N_cpusockets` (or `1_cpusocket`).
//!
//! cf-agent asks sysconf(_SC_NPROCESSORS_ONLN), which glibc answers from
//! `/sys/devices/system/cpu/online` and, failing that, from the `cpuN`
//! lines of `/proc/stat`; we read the same files.

use super::Collector;
use super::root::Root;

/// The ranges of a CPU list such as `0-3,5,7-8`; `None` when it cannot be
/// read.
fn cpu_ranges(list: &str) -> Option<Vec<(usize, usize)>> {
    list.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
                None => {
                    let n = part.trim().parse().ok()?;
                    (n, n)
                }
            };
            (a <= b).then_some((a, b))
        })
        .collect()
}

/// Counts the CPUs in a list such as `0-3,5,7-8`.
pub(crate) fn count_cpu_list(list: &str) -> Option<usize> {
    Some(cpu_ranges(list)?.iter().map(|(a, b)| b - a + 1).sum())
}

pub(crate) fn online_cpus(root: &Root) -> Option<usize> {
    if let Some(n) = root
        .read("/sys/devices/system/cpu/online")
        .and_then(|s| count_cpu_list(&s))
        .filter(|&n| n > 0)
    {
        return Some(n);
    }
    let stat = root.read("/proc/stat")?;
    let n = stat
        .lines()
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|rest| rest.starts_with(|ch: char| ch.is_ascii_digit()))
        })
        .count();
    (n > 0).then_some(n)
}

/// The highest `physical_package_id` of the CPUs in sysfs, plus one; one
/// when none can be read (as CFEngine 3.26 counts them).
///
/// A CPU's `package_cpus_list` names the CPUs of its package, which share
/// its id: those are not read again, so a host reads two files per socket
/// instead of one per CPU (a 64-CPU host made 256 system calls at every
/// start). A CPU without the list (a kernel before 5.x, a fake tree) is
/// read alone.
pub(crate) fn cpu_sockets(root: &Root) -> usize {
    let base = "/sys/devices/system/cpu";
    let mut cpus: Vec<usize> = root
        .list(base)
        .iter()
        .filter_map(|n| n.strip_prefix("cpu")?.parse().ok())
        .collect();
    cpus.sort_unstable();
    let mut covered: Vec<usize> = Vec::new();
    let mut highest = None;
    for cpu in cpus {
        if covered.binary_search(&cpu).is_ok() {
            continue;
        }
        let topology = format!("{base}/cpu{cpu}/topology");
        if let Some(id) = root
            .read(&format!("{topology}/physical_package_id"))
            .and_then(|t| t.trim().parse::<usize>().ok())
        {
            highest = highest.max(Some(id));
            let listed = root
                .read(&format!("{topology}/package_cpus_list"))
                .and_then(|l| cpu_ranges(&l))
                .unwrap_or_default();
            // Bounded: a list is of the CPUs there are.
            for (a, b) in listed.into_iter().filter(|(a, b)| b - a < 1 << 16) {
                covered.extend(a..=b);
            }
            covered.sort_unstable();
            covered.dedup();
        }
    }
    highest.map_or(1, |h| h + 1)
}

pub(crate) fn cpus(c: &mut Collector, root: &Root) {
    // CFEngine 3.26 counts the sockets first; 3.21 knows nothing of them
    // (crate::schema::newer::NEWER_SYS_VARS).
    let sockets = cpu_sockets(root);
    let class = if sockets == 1 {
        "1_cpusocket".to_string()
    } else {
        format!("{sockets}_cpusockets")
    };
    c.class(&class, "source=agent,derived-from=sys.cpusockets");
    c.sys(
        "cpusockets",
        sockets.to_string(),
        "inventory,source=agent,attribute_name=CPU sockets",
    );
    let Some(n) = online_cpus(root) else { return };
    let class = if n == 1 {
        "1_cpu".to_string()
    } else {
        format!("{n}_cpus")
    };
    c.class(&class, "source=agent,derived-from=sys.cpus");
    c.sys(
        "cpus",
        n.to_string(),
        "inventory,source=agent,attribute_name=CPU logical cores",
    );
}
