//! The process table, read from /proc, and signals.

use std::path::{Path, PathBuf};

/// One process, with the fields `process_select` can test.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub uid: u32,
    /// The command line, arguments joined by spaces (`[comm]` for kernel
    /// threads, as ps shows them).
    pub command: String,
    /// One-letter state (R, S, D, Z, T, ...).
    pub status: String,
    pub priority: i64,
    pub nice: i64,
    pub threads: i64,
    /// Resident and virtual size in KiB.
    pub rsize_kb: u64,
    pub vsize_kb: u64,
    /// CPU time used, in seconds.
    pub ttime_secs: u64,
    /// Start time, seconds since the epoch.
    pub stime: i64,
    pub tty: i64,
    /// The owner's name (the uid when it has none).
    pub user: String,
    /// Share of the CPU since it started and of the memory, in percent.
    pub pcpu: f64,
    pub pmem: f64,
}

impl ProcessInfo {
    /// The process as one line in the columns cf-agent reads from
    /// `ps -eo user:30,pid,ppid,pgid,pcpu,pmem,vsz,ni,rss:9,tname,nlwp,stime,etime,time,args`
    /// on Linux: what a `processes` promiser is matched against, and how
    /// cf-agent names a process it signals.
    pub fn ps_line(&self, now: i64) -> String {
        let tty = self.tty_name();
        let start = if now - self.stime < 24 * 3600 {
            clock(self.stime, "%H:%M")
        } else {
            clock(self.stime, "%b%d")
        };
        format!(
            "{:<30} {:>7} {:>7} {:>7} {:>4.1} {:>4.1} {:>6} {:>3} {:>9} {:<8} {:>4} {:>5} {:>11} {:>8} {}",
            self.user,
            self.pid,
            self.ppid,
            self.pgid,
            self.pcpu,
            self.pmem,
            self.vsize_kb,
            self.nice,
            self.rsize_kb,
            tty,
            self.threads,
            start,
            duration((now - self.stime).max(0) as u64, false),
            duration(self.ttime_secs, true),
            self.command
        )
    }
}

impl ProcessInfo {
    /// The controlling terminal as ps names it (`pts/3`, `tty1`), or `?`.
    pub fn tty_name(&self) -> String {
        let major = (self.tty >> 8) & 0xfff;
        let minor = (self.tty & 0xff) | ((self.tty >> 12) & 0xfff00);
        match major {
            0 => "?".to_string(),
            4 => format!("tty{minor}"),
            136..=143 => format!("pts/{}", (major - 136) * 256 + minor),
            _ => format!("{major}:{minor}"),
        }
    }
}

/// `[[DD-]HH:]MM:SS` as ps prints an elapsed time; with `hours`, the hours
/// always (`[DD-]HH:MM:SS`, ps's cumulative CPU time).
fn duration(secs: u64, hours: bool) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h) {
        (0, 0) if !hours => format!("{m:02}:{s:02}"),
        (0, _) => format!("{h:02}:{m:02}:{s:02}"),
        _ => format!("{d}-{h:02}:{m:02}:{s:02}"),
    }
}

/// A local time in a strftime format.
fn clock(t: i64, format: &str) -> String {
    let tt = t as libc::time_t;
    // SAFETY: zeroed tm is valid storage; localtime_r fills it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::localtime_r(&tt, &mut tm) }.is_null() {
        return "?".into();
    }
    let mut buf = [0u8; 32];
    let Ok(fmt) = std::ffi::CString::new(format) else {
        return "?".into();
    };
    // SAFETY: buf is writable for its length; fmt and tm are valid.
    let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), &tm) };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The name of the effective user (its id when it has none).
pub fn current_user_name() -> String {
    user_name(rustix::process::geteuid().as_raw())
}

/// The effective user's home directory as the password database gives it
/// (for a run without HOME), if it names one.
pub fn current_user_home() -> Option<String> {
    let uid = rustix::process::geteuid().as_raw();
    // SAFETY: getpwuid returns null or a pointer to static storage that we
    // copy at once.
    let pw = unsafe { libc::getpwuid(uid) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: pw is non-null; pw_dir is null or a valid C string.
    let dir = unsafe { (*pw).pw_dir };
    if dir.is_null() {
        return None;
    }
    // SAFETY: dir is a valid C string.
    let home = unsafe { std::ffi::CStr::from_ptr(dir) }
        .to_string_lossy()
        .into_owned();
    (!home.is_empty()).then_some(home)
}

/// The name of a user id, or the id itself.
pub(crate) fn user_name(uid: u32) -> String {
    // SAFETY: getpwuid returns null or a pointer to static storage that we
    // copy at once.
    let pw = unsafe { libc::getpwuid(uid) };
    if pw.is_null() {
        return uid.to_string();
    }
    // SAFETY: pw is non-null and pw_name a valid C string.
    unsafe { std::ffi::CStr::from_ptr((*pw).pw_name) }
        .to_string_lossy()
        .into_owned()
}

/// The name of a group id, or the id itself.
pub(crate) fn group_name(gid: u32) -> String {
    // SAFETY: getgrgid returns null or a pointer to static storage that we
    // copy at once.
    let gr = unsafe { libc::getgrgid(gid) };
    if gr.is_null() {
        return gid.to_string();
    }
    // SAFETY: gr is non-null and gr_name a valid C string.
    unsafe { std::ffi::CStr::from_ptr((*gr).gr_name) }
        .to_string_lossy()
        .into_owned()
}

fn parse_stat(pid: i32, stat: &str) -> Option<ProcessInfo> {
    // The command name is in parentheses and may itself hold spaces and
    // parentheses: split at the last ')'.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = &stat[open + 1..close];
    let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    let page_kb = 4;
    let ticks = 100;
    Some(ProcessInfo {
        pid,
        ppid: num(1) as i32,
        pgid: num(2) as i32,
        uid: 0,
        command: format!("[{comm}]"),
        status: f.first().map(|s| s.to_string()).unwrap_or_default(),
        priority: num(15),
        nice: num(16),
        threads: num(17),
        vsize_kb: (num(20) as u64) / 1024,
        rsize_kb: (num(21) as u64) * page_kb,
        ttime_secs: ((num(11) + num(12)) / ticks) as u64,
        stime: num(19) / ticks,
        tty: num(4),
        user: String::new(),
        pcpu: 0.0,
        pmem: 0.0,
    })
}

/// Whether `pid` is an ancestor of this process (its parent, or the
/// parent's parent, ...), read from /proc.
pub fn is_ancestor(pid: i32) -> bool {
    let mut cur = std::os::unix::process::parent_id() as i32;
    // A chain longer than this is a loop in what /proc said.
    for _ in 0..4096 {
        if cur == pid {
            return true;
        }
        if cur <= 1 {
            return false;
        }
        let Some(info) = std::fs::read_to_string(format!("/proc/{cur}/stat"))
            .ok()
            .and_then(|s| parse_stat(cur, &s))
        else {
            return false;
        };
        cur = info.ppid;
    }
    false
}

/// Makes this process the leader of a process group of its own, so that
/// what it starts can be stopped with it (a scheduled run that outlives
/// `agent_expireafter`). A session leader already leads its group: the
/// refusal then changes nothing.
pub fn lead_own_process_group() {
    // SAFETY: setpgid(2) has no memory-safety preconditions.
    let _ = unsafe { libc::setpgid(0, 0) };
}

/// Sends `sig` to the process group `pid` leads, or to `pid` alone when it
/// leads none (it was not started as a scheduled run).
pub fn signal_group(pid: i32, sig: i32) -> std::io::Result<()> {
    // SAFETY: getpgid(2) and kill(2) have no memory-safety preconditions.
    let target = if unsafe { libc::getpgid(pid) } == pid {
        -pid
    } else {
        pid
    };
    if unsafe { libc::kill(target, sig) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Every process on the machine (of a /proc-like directory, for tests).
pub fn processes_in(proc_dir: &Path) -> Vec<ProcessInfo> {
    let boot = std::fs::read_to_string(proc_dir.join("stat"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("btime ")
                    .and_then(|v| v.trim().parse::<i64>().ok())
            })
        })
        .unwrap_or(0);
    let uptime = std::fs::read_to_string(proc_dir.join("uptime"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let mem_kb = std::fs::read_to_string(proc_dir.join("meminfo"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")?
                    .split_whitespace()
                    .next()?
                    .parse::<f64>()
                    .ok()
            })
        })
        .unwrap_or(0.0);
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(proc_dir) else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let dir = e.path();
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        let Some(mut info) = parse_stat(pid, &stat) else {
            continue;
        };
        // The start time is in clock ticks since boot.
        let started_after_boot = info.stime;
        info.stime += boot;
        let elapsed = uptime - started_after_boot as f64;
        if elapsed > 0.0 {
            info.pcpu = info.ttime_secs as f64 * 100.0 / elapsed;
        }
        if mem_kb > 0.0 {
            info.pmem = info.rsize_kb as f64 * 100.0 / mem_kb;
        }
        if let Ok(cmdline) = std::fs::read(dir.join("cmdline"))
            && !cmdline.is_empty()
        {
            let args: Vec<String> = cmdline
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            info.command = args.join(" ");
        }
        if let Ok(status) = std::fs::read_to_string(dir.join("status")) {
            info.uid = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
        info.user = user_name(info.uid);
        out.push(info);
    }
    out.sort_by_key(|p| p.pid);
    out
}

impl super::Host {
    /// The process table of this machine.
    pub fn processes(&self) -> Vec<ProcessInfo> {
        processes_in(Path::new("/proc"))
    }

    /// The text of one of the kernel's views below `/proc` (`/proc/net/tcp`),
    /// taken below `CFENGINE_TEST_OVERRIDE_PROCDIR` when it is set, never
    /// below the host's root: like the process table, it is this machine's.
    pub fn proc_text(&self, path: &str) -> std::io::Result<String> {
        super::local::read_to_string(super::local::relocated_proc(path))
    }

    /// A kernel parameter by its dotted key (`net.ipv4.ip_forward`), from
    /// `/proc/sys`, without its trailing newline.
    pub fn kernel_parameter(&self, key: &str) -> Result<String, (PathBuf, std::io::Error)> {
        let path =
            super::local::relocated_proc(&format!("{SYSCTL_ROOT}/{}", key.replace('.', "/")));
        match super::local::read_to_string(&path) {
            Ok(v) => Ok(v.trim_end_matches('\n').to_string()),
            Err(e) => Err((path, e)),
        }
    }

    /// Every readable kernel parameter by dotted key, sorted.
    pub fn kernel_parameters(&self) -> Vec<(String, String)> {
        let mut all = Vec::new();
        collect_sysctl(&super::local::relocated_proc(SYSCTL_ROOT), "", &mut all);
        all.sort();
        all
    }

    /// Sends a signal to a process.
    pub fn signal(&self, pid: i32, sig: i32) -> std::io::Result<()> {
        // SAFETY: kill(2) has no memory-safety preconditions.
        if unsafe { libc::kill(pid, sig) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

const SYSCTL_ROOT: &str = "/proc/sys";

fn collect_sysctl(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    let Ok(entries) = super::local::list_dir(dir) else {
        return;
    };
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        // The entry itself, as a directory listing gives its type.
        match super::local::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => collect_sysctl(&path, &key, out),
            Ok(m) if m.is_file() => {
                if let Ok(v) = super::local::read_to_string(&path) {
                    out.push((key, v.trim_end_matches('\n').to_string()));
                }
            }
            _ => {}
        }
    }
}

/// A signal name as policies write it (`term`, `kill`, `hup`, ...).
pub fn signal_number(name: &str) -> Option<i32> {
    Some(match name.to_ascii_lowercase().trim_start_matches("sig") {
        "hup" => libc::SIGHUP,
        "int" => libc::SIGINT,
        "trap" => libc::SIGTRAP,
        "kill" => libc::SIGKILL,
        "pipe" => libc::SIGPIPE,
        "cont" => libc::SIGCONT,
        "abrt" => libc::SIGABRT,
        "stop" => libc::SIGSTOP,
        "quit" => libc::SIGQUIT,
        "term" => libc::SIGTERM,
        "child" | "chld" => libc::SIGCHLD,
        "usr1" => libc::SIGUSR1,
        "usr2" => libc::SIGUSR2,
        "bus" => libc::SIGBUS,
        "segv" => libc::SIGSEGV,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_names() {
        let p = parse_stat(7, "7 (a (b) c) S 1 7 7 0 -1 4194560 0 0 0 0 100 50 0 0 20 0 3 0 500 1048576 10 18446744073709551615").unwrap();
        assert_eq!(p.command, "[a (b) c]");
        assert_eq!(p.ppid, 1);
        assert_eq!(p.status, "S");
        assert_eq!(p.threads, 3);
        assert_eq!(p.rsize_kb, 40);
        assert_eq!(p.vsize_kb, 1024);
        assert_eq!(p.ttime_secs, 1);
    }

    #[test]
    fn terminals_and_lines_as_ps_shows_them() {
        let mut p = parse_stat(
            7,
            "7 (sleep) S 1 7 7 34817 -1 4194560 0 0 0 0 100 50 0 0 20 0 1 0 500 1048576 10 0",
        )
        .unwrap();
        assert_eq!(p.tty_name(), "pts/1");
        p.tty = 0;
        assert_eq!(p.tty_name(), "?");
        p.tty = 1025;
        assert_eq!(p.tty_name(), "tty1");
        p.user = "root".into();
        p.command = "sleep 5".into();
        p.stime = 1000;
        let line = p.ps_line(1000 + 65);
        assert!(line.starts_with("root "), "{line}");
        assert!(line.ends_with(" 01:05 00:00:01 sleep 5"), "{line}");
        assert_eq!(duration(90061, true), "1-01:01:01");
    }

    #[test]
    fn knows_its_ancestors() {
        assert!(is_ancestor(std::os::unix::process::parent_id() as i32));
        assert!(!is_ancestor(std::process::id() as i32));
    }

    #[test]
    fn sees_itself() {
        let me = std::process::id() as i32;
        assert!(processes_in(Path::new("/proc")).iter().any(|p| p.pid == me));
        assert_eq!(signal_number("TERM"), Some(libc::SIGTERM));
        assert_eq!(signal_number("sigkill"), Some(libc::SIGKILL));
        assert_eq!(signal_number("bogus"), None);
    }
}
