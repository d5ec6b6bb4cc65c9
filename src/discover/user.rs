//! The user we run as: `sys.user_data`, and the name in `sys.crontab`.
//!
//! The real user id comes from getuid (`/proc/self/status` below a test's
//! fake root) and its entry from
//! `/etc/passwd` (cf-agent asks getpwuid(getuid()); users known only to a
//! directory service are therefore not found here).

use super::Collector;
use super::root::Root;
use crate::values::value::{DataType, Value};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct User {
    pub name: String,
    pub gecos: String,
    pub home: String,
    pub shell: String,
    pub uid: u64,
    pub gid: u64,
}

pub(crate) fn current_user(root: &Root) -> Option<User> {
    // On the host getuid tells what the file's first Uid field does, for
    // one system call instead of five and no formatting by the kernel.
    let uid: u64 = if root.is_host() {
        u64::from(crate::host::local::real_uid())
    } else {
        root.read("/proc/self/status")?
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?
    };
    let passwd = root.read("/etc/passwd")?;
    passwd_entry(&passwd, uid)
}

/// The first `/etc/passwd` entry with this user id.
pub(crate) fn passwd_entry(passwd: &str, uid: u64) -> Option<User> {
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 7 || f[2].parse::<u64>().ok()? != uid {
            return None;
        }
        Some(User {
            name: f[0].to_string(),
            uid,
            gid: f[3].parse().ok()?,
            gecos: f[4].to_string(),
            home: f[5].to_string(),
            shell: f[6].to_string(),
        })
    })
}

pub(crate) fn user_data(c: &mut Collector, user: Option<&User>) {
    let Some(u) = user else { return };
    // Keys in sorted order, as cf-agent's JSON writer prints them.
    let json = serde_json::json!({
        "description": u.gecos,
        "gid": u.gid,
        "home_dir": u.home,
        "shell": u.shell,
        "uid": u.uid,
        "username": u.name,
    });
    c.var(
        "sys",
        "user_data",
        Value::data(json),
        DataType::Data,
        "source=agent,user_info",
    );
}
