//! `users`: local accounts through the system's own tools (useradd,
//! usermod, userdel, chpasswd); /etc/passwd, /etc/shadow and /etc/group
//! are read to decide what is already as promised.

use super::{ActContext, Actuator, ExpandedPromise, Outcome};
use crate::eval::Value;
use crate::host::Host;
use crate::host::exec::CommandSpec;
use std::path::Path;

pub struct Users;

/// One /etc/passwd entry (with its shadow password field).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Account {
    name: String,
    uid: String,
    gid: String,
    gecos: String,
    home: String,
    shell: String,
    password: String,
}

fn read_lines(host: &Host, path: &str) -> Vec<Vec<String>> {
    let text = host
        .read(Path::new(path))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split(':').map(str::to_string).collect())
        .collect()
}

fn account(host: &Host, name: &str) -> Option<Account> {
    let pw = read_lines(host, "/etc/passwd")
        .into_iter()
        .find(|f| f.first().map(String::as_str) == Some(name))?;
    let shadow = read_lines(host, "/etc/shadow")
        .into_iter()
        .find(|f| f.first().map(String::as_str) == Some(name))
        .and_then(|f| f.get(1).cloned())
        .unwrap_or_default();
    let get = |i: usize| pw.get(i).cloned().unwrap_or_default();
    Some(Account {
        name: get(0),
        uid: get(2),
        gid: get(3),
        gecos: get(4),
        home: get(5),
        shell: get(6),
        password: shadow,
    })
}

/// The groups (by name) that list `user` as a member.
fn secondary_groups(host: &Host, user: &str) -> Vec<String> {
    let mut v: Vec<String> = read_lines(host, "/etc/group")
        .into_iter()
        .filter(|f| f.get(3).is_some_and(|m| m.split(',').any(|u| u == user)))
        .filter_map(|f| f.first().cloned())
        .collect();
    v.sort();
    v
}

fn group_gid(host: &Host, group: &str) -> Option<String> {
    if group.chars().all(|c| c.is_ascii_digit()) {
        return Some(group.to_string());
    }
    read_lines(host, "/etc/group")
        .into_iter()
        .find(|f| f.first().map(String::as_str) == Some(group))
        .and_then(|f| f.get(2).cloned())
}

/// A valid account name: what useradd accepts on Debian.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') || (c == '$'))
}

fn run_tool(act: &mut ActContext<'_>, mut argv: Vec<String>, stdin: &str) -> Result<(), String> {
    if let Some(root) = act.host.root() {
        argv.insert(1, "--root".into());
        argv.insert(2, root.display().to_string());
    }
    let spec = CommandSpec {
        argv: argv.clone(),
        stdin: stdin.as_bytes().to_vec(),
        timeout: Some(std::time::Duration::from_secs(60)),
        ..CommandSpec::default()
    };
    match act.host.run(&spec) {
        Ok(r) if r.code == Some(0) => Ok(()),
        Ok(r) => Err(format!(
            "'{}' failed ({:?}): {}",
            argv.join(" "),
            r.code,
            r.output_text().trim()
        )),
        Err(e) => Err(format!("could not run '{}': {e}", argv[0])),
    }
}

impl Actuator for Users {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let name = p.promiser.as_str();
        if !valid_name(name) {
            tracing::error!(
                "'{name}' is not a valid user name (letters, digits, '_', '-', '.', at most 32 characters, not starting with '-')"
            );
            return Outcome::Failed;
        }
        let policy = p.scalar("policy").unwrap_or("present");
        let current = account(act.host, name);
        let password = p.body("password").map(|b| {
            (
                b.scalar("format").unwrap_or("hash").to_string(),
                b.scalar("data").unwrap_or("").to_string(),
            )
        });
        match (policy, &current) {
            ("absent", None) => Outcome::Kept,
            ("absent", Some(_)) => {
                if act.dry_run {
                    tracing::warn!("Should delete user '{name}', but only warning promised");
                    return Outcome::Warned;
                }
                match run_tool(act, vec!["/usr/sbin/userdel".into(), name.into()], "") {
                    Ok(()) => {
                        tracing::info!("Deleted user '{name}'");
                        Outcome::Repaired
                    }
                    Err(e) => {
                        tracing::error!("Could not delete user '{name}': {e}");
                        Outcome::Failed
                    }
                }
            }
            (_, None) => {
                if act.dry_run {
                    tracing::warn!("Should create user '{name}', but only warning promised");
                    return Outcome::Warned;
                }
                let mut argv = vec!["/usr/sbin/useradd".to_string()];
                push_opts(act.host, p, &mut argv, None);
                // Like cf-agent, a new account without a hashed password gets
                // "x" (no password, not locked).
                match &password {
                    Some((fmt, data)) if fmt == "hash" => argv.extend(["-p".into(), data.clone()]),
                    _ => argv.extend(["-p".into(), "x".into()]),
                }
                argv.push(name.into());
                if let Err(e) = run_tool(act, argv, "") {
                    tracing::error!("Could not create user '{name}': {e}");
                    return Outcome::Failed;
                }
                if let Some((fmt, data)) = &password
                    && fmt == "plaintext"
                    && let Err(e) = run_tool(
                        act,
                        vec!["/usr/sbin/chpasswd".into()],
                        &format!("{name}:{data}\n"),
                    )
                {
                    tracing::error!("Could not set the password of '{name}': {e}");
                    return Outcome::Failed;
                }
                if policy == "locked"
                    && let Err(e) = run_tool(
                        act,
                        vec![
                            "/usr/sbin/usermod".into(),
                            "-L".into(),
                            "-e".into(),
                            "1".into(),
                            name.into(),
                        ],
                        "",
                    )
                {
                    tracing::error!("Could not lock user '{name}': {e}");
                    return Outcome::Failed;
                }
                tracing::info!("Created user '{name}'");
                Outcome::Repaired
            }
            (_, Some(cur)) => {
                let mut argv = vec!["/usr/sbin/usermod".to_string()];
                push_opts(act.host, p, &mut argv, Some(cur));
                let locked = cur.password.starts_with('!');
                let mut lock_change = None;
                if policy == "locked" && !locked {
                    lock_change = Some(vec!["-L".to_string(), "-e".into(), "1".into()]);
                } else if policy == "present" && locked {
                    lock_change = Some(vec!["-U".to_string(), "-e".into(), String::new()]);
                }
                let mut set_plain = None;
                if let Some((fmt, data)) = &password {
                    let current_hash = cur.password.trim_start_matches('!');
                    if fmt == "hash" && current_hash != data {
                        argv.extend([
                            "-p".into(),
                            if locked || policy == "locked" {
                                format!("!{data}")
                            } else {
                                data.clone()
                            },
                        ]);
                    } else if fmt == "plaintext" && !plaintext_matches(data, current_hash) {
                        set_plain = Some(data.clone());
                    }
                }
                if argv.len() == 1 && lock_change.is_none() && set_plain.is_none() {
                    return Outcome::Kept;
                }
                if act.dry_run {
                    tracing::warn!("Should update user '{name}', but only warning promised");
                    return Outcome::Warned;
                }
                if argv.len() > 1 {
                    argv.push(name.into());
                    if let Err(e) = run_tool(act, argv, "") {
                        tracing::error!("Could not update user '{name}': {e}");
                        return Outcome::Failed;
                    }
                }
                if let Some(data) = set_plain
                    && let Err(e) = run_tool(
                        act,
                        vec!["/usr/sbin/chpasswd".into()],
                        &format!("{name}:{data}\n"),
                    )
                {
                    tracing::error!("Could not set the password of '{name}': {e}");
                    return Outcome::Failed;
                }
                if let Some(mut flags) = lock_change {
                    let mut argv = vec!["/usr/sbin/usermod".to_string()];
                    argv.append(&mut flags);
                    argv.push(name.into());
                    if let Err(e) = run_tool(act, argv, "") {
                        tracing::error!("Could not change the lock of user '{name}': {e}");
                        return Outcome::Failed;
                    }
                    tracing::info!(
                        "{} user '{name}'",
                        if policy == "locked" {
                            "Locked"
                        } else {
                            "Unlocked"
                        }
                    );
                }
                tracing::info!("Updated user '{name}'");
                Outcome::Repaired
            }
        }
    }
}

/// Whether a plaintext password already produces the stored hash.
fn plaintext_matches(plain: &str, hash: &str) -> bool {
    if hash.is_empty() || hash == "x" || hash == "*" {
        return false;
    }
    let (Ok(k), Ok(s)) = (std::ffi::CString::new(plain), std::ffi::CString::new(hash)) else {
        return false;
    };
    // SAFETY: crypt reads two C strings and returns static storage that we
    // copy at once.
    let out = unsafe { crypt(k.as_ptr(), s.as_ptr()) };
    if out.is_null() {
        return false;
    }
    // SAFETY: out is a valid C string.
    unsafe { std::ffi::CStr::from_ptr(out) }.to_string_lossy() == hash
}

#[link(name = "crypt")]
unsafe extern "C" {
    fn crypt(key: *const libc::c_char, salt: *const libc::c_char) -> *mut libc::c_char;
}

/// useradd/usermod options for the attributes that differ from `cur`
/// (all given ones when creating).
fn push_opts(host: &Host, p: &ExpandedPromise, argv: &mut Vec<String>, cur: Option<&Account>) {
    let differs = |want: &str, have: fn(&Account) -> &str| cur.is_none_or(|c| have(c) != want);
    if let Some(uid) = p.scalar("uid")
        && differs(uid, |c| &c.uid)
    {
        argv.extend(["-u".into(), uid.into()]);
    }
    if let Some(g) = p.scalar("group_primary") {
        let gid = group_gid(host, g).unwrap_or_else(|| g.to_string());
        if cur.is_none_or(|c| c.gid != gid) {
            argv.extend(["-g".into(), g.into()]);
        }
    }
    if let Some(Value::List(groups)) = p.value("groups_secondary") {
        let mut want = groups.clone();
        want.sort();
        let have = cur.map(|c| secondary_groups(host, &c.name));
        if have.as_ref() != Some(&want) && !(cur.is_none() && want.is_empty()) {
            argv.extend(["-G".into(), want.join(",")]);
        }
    }
    if let Some(home) = p.scalar("home_dir")
        && differs(home, |c| &c.home)
    {
        argv.extend(["-d".into(), home.into()]);
    }
    if let Some(desc) = p.scalar("description")
        && differs(desc, |c| &c.gecos)
    {
        argv.extend(["-c".into(), desc.into()]);
    }
    if let Some(shell) = p.scalar("shell")
        && differs(shell, |c| &c.shell)
    {
        argv.extend(["-s".into(), shell.into()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("alice"));
        assert!(valid_name("svc-1.x"));
        assert!(!valid_name("-x"));
        assert!(!valid_name("a b"));
        assert!(!valid_name("a;rm"));
        assert!(!valid_name(""));
    }

    #[test]
    fn crypt_checks_plaintext() {
        // The hash of "secret" with an MD5 salt.
        let out = unsafe {
            let k = std::ffi::CString::new("secret").unwrap();
            let s = std::ffi::CString::new("$1$saltsalt$").unwrap();
            std::ffi::CStr::from_ptr(crypt(k.as_ptr(), s.as_ptr()))
                .to_string_lossy()
                .into_owned()
        };
        assert!(plaintext_matches("secret", &out));
        assert!(!plaintext_matches("other", &out));
    }
}
