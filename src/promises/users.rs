//! `users`: local accounts through the system's own tools (useradd,
//! usermod, userdel, chpasswd), never through a shell; /etc/passwd,
//! /etc/shadow and /etc/group are read to decide what is already as
//! promised. The decisions, the order of the changes and the words follow
//! cf-agent 3.21: a new account gets no home directory (`home_bundle` makes
//! it) and the hash `x` until a password is set; locking puts `!` before the
//! hash and expires the account on 1970-01-02.

use super::{ActContext, Actuator, Followup};
use crate::report::change::{Change, Decision};

use crate::eval::expanded::{AttrValue, ExpandedPromise};

use crate::host::Host;
use crate::host::exec::CommandSpec;
use crate::report::Outcome;
use crate::values::Value;
use std::collections::BTreeSet;
use std::path::Path;

pub struct Users;

const USERADD: &str = "/usr/sbin/useradd";
const USERMOD: &str = "/usr/sbin/usermod";
const USERDEL: &str = "/usr/sbin/userdel";
const CHPASSWD: &str = "/usr/sbin/chpasswd";
/// The day cf-agent expires a locked account on (Linux's `usermod -e`).
const LOCK_EXPIRY: &str = "1970-01-02";

/// One /etc/passwd entry with its shadow password field.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Account {
    name: String,
    uid: String,
    gid: String,
    gecos: String,
    home: String,
    shell: String,
    hash: String,
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
    let get = |i: usize| pw.get(i).cloned().unwrap_or_default();
    // As cf-agent: a short passwd field is a stub for the shadow one.
    let mut hash = get(1);
    if hash.len() <= 4 {
        hash = read_lines(host, "/etc/shadow")
            .into_iter()
            .find(|f| f.first().map(String::as_str) == Some(name))
            .and_then(|f| f.get(1).cloned())
            .unwrap_or_default();
    }
    Some(Account {
        name: get(0),
        uid: get(2),
        gid: get(3),
        gecos: get(4),
        home: get(5),
        shell: get(6),
        hash,
    })
}

/// The groups (by name) that list `user` as a member.
fn secondary_groups(host: &Host, user: &str) -> BTreeSet<String> {
    read_lines(host, "/etc/group")
        .into_iter()
        .filter(|f| f.get(3).is_some_and(|m| m.split(',').any(|u| u == user)))
        .filter_map(|f| f.first().cloned())
        .collect()
}

/// A group named by name or, failing that, by number: its (name, gid).
fn find_group(host: &Host, group: &str) -> Option<(String, String)> {
    let groups = read_lines(host, "/etc/group");
    let field = |f: &Vec<String>, i: usize| f.get(i).cloned().unwrap_or_default();
    groups
        .iter()
        .find(|f| field(f, 0) == group)
        .or_else(|| {
            group
                .chars()
                .all(|c| c.is_ascii_digit())
                .then(|| groups.iter().find(|f| field(f, 2) == group))
                .flatten()
        })
        .map(|f| (field(f, 0), field(f, 2)))
}

/// A valid account name: what useradd accepts on Debian.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'))
}

/// Whether the account is locked, as cf-agent reads it: its hash starts
/// with `!`. A bare `!` (or `!!`, `!*`) is useradd's "no password yet":
/// unlocking it would leave an account with an empty password, so it is
/// not taken for a lock to undo (README, "Where we differ").
fn locked(hash: &str) -> bool {
    hash.starts_with('!')
}

fn lock_to_undo(hash: &str) -> bool {
    locked(hash) && !matches!(hash, "!" | "!!" | "!*")
}

/// What the promise asks for.
struct Wanted {
    policy: String,
    uid: Option<String>,
    description: Option<String>,
    group_primary: Option<String>,
    groups_secondary: Option<Vec<String>>,
    home_dir: Option<String>,
    shell: Option<String>,
    /// (plaintext?, data); an empty password is no password.
    password: Option<(bool, String)>,
}

impl Wanted {
    fn of(p: &ExpandedPromise) -> Wanted {
        let s = |a: &str| p.scalar(a).map(str::to_string);
        Wanted {
            policy: s("policy").unwrap_or_else(|| "present".into()),
            uid: s("uid"),
            description: s("description"),
            group_primary: s("group_primary").filter(|g| !g.is_empty()),
            groups_secondary: match p.value("groups_secondary") {
                Some(Value::List(l)) => Some(l.clone()),
                Some(Value::Scalar(v)) => Some(vec![v.clone()]),
                _ => None,
            },
            home_dir: s("home_dir").filter(|h| !h.is_empty()),
            shell: s("shell").filter(|h| !h.is_empty()),
            password: p
                .body("password")
                .map(|b| {
                    (
                        b.scalar("format") == Some("plaintext"),
                        b.scalar("data").unwrap_or("").to_string(),
                    )
                })
                .filter(|(_, d)| !d.is_empty()),
        }
    }

    fn locking(&self) -> bool {
        self.policy == "locked"
    }
}

/// The attributes of an existing account that differ from the promise.
#[derive(Debug, Default)]
struct Changes {
    uid: bool,
    comment: bool,
    group: bool,
    groups: bool,
    home: bool,
    shell: bool,
    password: bool,
    lock: bool,
}

impl Changes {
    fn any(&self) -> bool {
        self.attributes() || self.password || self.lock
    }

    /// Whether usermod has something to change.
    fn attributes(&self) -> bool {
        self.uid || self.comment || self.group || self.groups || self.home || self.shell
    }
}

fn changes(host: &Host, w: &Wanted, cur: &Account) -> Changes {
    let differs = |want: &Option<String>, have: &str| want.as_deref().is_some_and(|x| x != have);
    let mut c = Changes {
        comment: differs(&w.description, &cur.gecos),
        uid: w
            .uid
            .as_deref()
            .is_some_and(|u| u.trim().parse::<i64>().ok() != cur.uid.parse::<i64>().ok()),
        home: differs(&w.home_dir, &cur.home),
        shell: differs(&w.shell, &cur.shell),
        lock: if w.locking() {
            !locked(&cur.hash)
        } else {
            lock_to_undo(&cur.hash)
        },
        ..Changes::default()
    };
    // The password does not matter for an account that is to be locked.
    if let Some((plain, data)) = &w.password
        && !w.locking()
    {
        c.password = if *plain {
            !plaintext_matches(data, &cur.hash)
        } else {
            *data != cur.hash
        };
    }
    if let Some(g) = &w.group_primary {
        c.group = match find_group(host, g) {
            Some((_, gid)) => gid != cur.gid,
            None => {
                crate::error!("No such group '{g}'.");
                true
            }
        };
    }
    if let Some(groups) = &w.groups_secondary {
        let wanted: BTreeSet<String> = groups
            .iter()
            .map(|g| {
                // A group name wins over a gid that looks the same.
                find_group(host, g).map_or_else(|| g.clone(), |(name, _)| name)
            })
            .collect();
        c.groups = wanted != secondary_groups(host, &cur.name);
    }
    c
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
        Ok(r) => Err(r.output_text().trim().to_string()),
        Err(e) => Err(format!("could not run '{}': {e}", argv[0])),
    }
}

/// A command as cf-agent writes it in its messages: each value quoted.
fn shown(argv: &[String]) -> String {
    let mut out = argv.first().cloned().unwrap_or_default();
    let mut words = argv.iter().skip(1).peekable();
    while let Some(w) = words.next() {
        if w.starts_with('-') && words.peek().is_some() {
            out.push_str(&format!(" {w} \"{}\"", words.next().unwrap_or(w)));
        } else {
            out.push_str(&format!(" {w}"));
        }
    }
    out
}

/// Runs a user tool, saying what failed as cf-agent does.
fn user_command(
    act: &mut ActContext<'_>,
    name: &str,
    argv: Vec<String>,
    action: &str,
) -> Result<(), ()> {
    let line = shown(&argv);
    crate::debug!("{action} user '{name}'. (command: '{line}')");
    run_tool(act, argv, "").map_err(|e| {
        crate::error!(
            "Command returned error while {} user '{name}'. (Command line: '{line}')",
            action.to_lowercase()
        );
        if !e.is_empty() {
            crate::error!("{e}");
        }
    })
}

/// Sets the password: a hash as it is, plaintext hashed by chpasswd.
fn set_password(act: &mut ActContext<'_>, name: &str, data: &str, plain: bool) -> Result<(), ()> {
    let mut argv = vec![CHPASSWD.to_string()];
    if !plain {
        argv.push("-e".into());
    }
    run_tool(act, argv, &format!("{name}:{data}\n")).map_err(|e| {
        crate::error!("Could not change password for user '{name}'. ({e})");
    })
}

/// Locks (or unlocks) an account: `!` before the hash (taken away), and the
/// expiry date set to the day after the epoch (cleared). Without a hash,
/// only the expiry changes.
fn set_locked(
    act: &mut ActContext<'_>,
    name: &str,
    hash: Option<&str>,
    lock: bool,
) -> Result<(), ()> {
    match hash {
        Some(h) if lock && !h.starts_with('!') => set_password(act, name, &format!("!{h}"), false)?,
        Some(h) if !lock && h.starts_with('!') => set_password(act, name, &h[1..], false)?,
        _ => {}
    }
    let expiry = if lock { LOCK_EXPIRY } else { "" };
    user_command(
        act,
        name,
        vec![USERMOD.into(), "-e".into(), expiry.into(), name.into()],
        if lock { "Locking" } else { "Unlocking" },
    )
}

impl Actuator for Users {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let name = p.promiser.as_str();
        if !valid_name(name) {
            crate::error!(
                "'{name}' is not a valid user name (letters, digits, '_', '-', '.', at most 32 characters, not starting with '-'), in the users promise at {}:{}",
                p.file,
                p.line
            );
            return Outcome::Failed;
        }
        let w = Wanted::of(p);
        let current = account(act.host, name);
        match (w.policy.as_str(), current) {
            ("absent", None) => Outcome::Kept,
            ("absent", Some(_)) => {
                let change = Change::new("delete_user", name)
                    .done(format!("Removed user '{name}'"))
                    .should(format!("Need to remove user '{name}'."))
                    .without_suffix();
                if let Decision::Withheld { outcome, .. } = act.changes.plan(&change) {
                    return outcome;
                }
                let argv = vec![USERDEL.to_string(), name.to_string()];
                if user_command(act, name, argv, "Removing").is_err() {
                    crate::error!("Failed to remove user '{name}'");
                    return Outcome::Failed;
                }
                act.changes.made(change);
                Outcome::Repaired
            }
            (_, None) => create(act, p, &w, name),
            (_, Some(cur)) => modify(act, &w, &cur),
        }
    }
}

fn create(act: &mut ActContext<'_>, p: &ExpandedPromise, w: &Wanted, name: &str) -> Outcome {
    let change = Change::new("create_user", name)
        .should(format!("Need to create user '{name}'."))
        .without_suffix();
    if let Decision::Withheld { outcome, .. } = act.changes.plan(&change) {
        return outcome;
    }
    let mut argv = vec![USERADD.to_string()];
    for (flag, value) in [
        ("-u", w.uid.clone()),
        ("-c", w.description.clone()),
        ("-g", w.group_primary.clone()),
        ("-G", w.groups_secondary.as_ref().map(|g| g.join(","))),
        ("-d", w.home_dir.clone()),
        ("-s", w.shell.clone()),
    ] {
        if let Some(v) = value {
            argv.extend([flag.to_string(), v]);
        }
    }
    // No home directory: home_bundle makes it, as with cf-agent.
    argv.extend(["-M".to_string(), name.to_string()]);
    let failed = |_| {
        crate::error!("Failed to create user '{name}'");
        Outcome::Failed
    };
    if let Err(e) = user_command(act, name, argv, "Creating") {
        return failed(e);
    }
    // useradd leaves `!`, which would read as locked; `x` matches no
    // password at all.
    if let Err(e) = set_password(act, name, "x", false) {
        return failed(e);
    }
    if w.locking()
        && let Err(e) = set_locked(act, name, Some("x"), true)
    {
        return failed(e);
    }
    if let Some((plain, data)) = &w.password
        && !w.locking()
        && let Err(e) = set_password(act, name, data, *plain)
    {
        return failed(e);
    }
    let created = format!("Created user '{name}'");
    match p.attrs.get("home_bundle") {
        // The bundle runs before the account is reported created.
        Some(bundle @ AttrValue::Bundle { .. }) => {
            act.changes.made(change);
            act.followup = Some(Followup {
                bundle: bundle.clone(),
                inherit: p.flag("home_bundle_inherit").unwrap_or(false),
                then_inform: created,
            });
        }
        _ => act.changes.made(change.done(created)),
    }
    Outcome::Repaired
}

fn modify(act: &mut ActContext<'_>, w: &Wanted, cur: &Account) -> Outcome {
    let name = cur.name.as_str();
    let c = changes(act.host, w, cur);
    if !c.any() {
        return Outcome::Kept;
    }
    // cf-agent 3.21's order: the secondary groups last, sorted.
    let groups = w.groups_secondary.as_ref().map(|g| {
        g.iter()
            .cloned()
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(",")
    });
    let mut argv = vec![USERMOD.to_string()];
    let mut add = |on: bool, flag: &str, value: Option<String>| {
        if on && let Some(v) = value {
            argv.extend([flag.to_string(), v]);
        }
    };
    add(c.uid, "-u", w.uid.clone());
    add(c.comment, "-c", w.description.clone());
    add(c.group, "-g", w.group_primary.clone());
    add(c.home, "-d", w.home_dir.clone());
    add(c.shell, "-s", w.shell.clone());
    add(c.groups, "-G", groups);
    // cf-agent's message has two spaces before the name after a group list.
    let mut shown_command = shown(&argv);
    if c.groups {
        shown_command.push(' ');
    }
    shown_command.push_str(&format!(" {name}"));
    argv.push(name.to_string());
    // cf-agent names the first thing it would do.
    let should = if c.password {
        format!("Need to change password for user '{name}'.")
    } else if c.lock {
        let what = if w.locking() { "lock" } else { "unlock" };
        format!("Need to {what} account for user '{name}'.")
    } else {
        format!("Need to update user attributes (command '{shown_command}').")
    };
    let change = Change::new("modify_user", name)
        .done(format!("Modified user '{name}'"))
        .should(should)
        .without_suffix();
    if let Decision::Withheld { outcome, .. } = act.changes.plan(&change) {
        return outcome;
    }
    let failed = |_| {
        crate::error!("Failed to modify user '{name}'");
        Outcome::Failed
    };
    if c.password
        && let Some((plain, data)) = &w.password
        && let Err(e) = set_password(act, name, data, *plain)
    {
        return failed(e);
    }
    if c.lock {
        // A password just set is already unlocked.
        let hash = (!c.password).then_some(cur.hash.as_str());
        if let Err(e) = set_locked(act, name, hash, w.locking()) {
            return failed(e);
        }
    }
    if c.attributes()
        && let Err(e) = user_command(act, name, argv, "Modifying")
    {
        return failed(e);
    }
    act.changes.made(change);
    Outcome::Repaired
}

/// Whether a plaintext password already produces the stored hash (cf-agent
/// asks PAM to log in; the stored hash answers the same question).
fn plaintext_matches(plain: &str, hash: &str) -> bool {
    if hash.len() < 3 || !hash.starts_with('$') {
        return false;
    }
    let (Ok(k), Ok(s)) = (std::ffi::CString::new(plain), std::ffi::CString::new(hash)) else {
        return false;
    };
    let Some(crypt) = crypt_function() else {
        crate::error!(
            "Cannot check the password: the C library's crypt (libcrypt.so.1) is missing"
        );
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

type CryptFn = unsafe extern "C" fn(*const libc::c_char, *const libc::c_char) -> *mut libc::c_char;

/// crypt(3), loaded the first time a password is checked: linked, its
/// library would be loaded (and relocated) at every start of the agent,
/// for the few runs that check a plaintext password.
fn crypt_function() -> Option<CryptFn> {
    static CRYPT: std::sync::OnceLock<Option<CryptFn>> = std::sync::OnceLock::new();
    *CRYPT.get_or_init(|| {
        // SAFETY: dlopen and dlsym take C string constants; the library is
        // never closed, so the function stays valid, and the symbol is
        // crypt(3), whose signature CryptFn spells.
        unsafe {
            let lib = libc::dlopen(c"libcrypt.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if lib.is_null() {
                return None;
            }
            let sym = libc::dlsym(lib, c"crypt".as_ptr());
            (!sym.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, CryptFn>(sym))
        }
    })
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
        let crypt = crypt_function().expect("libcrypt.so.1");
        let out = unsafe {
            let k = std::ffi::CString::new("secret").unwrap();
            let s = std::ffi::CString::new("$1$saltsalt$").unwrap();
            std::ffi::CStr::from_ptr(crypt(k.as_ptr(), s.as_ptr()))
                .to_string_lossy()
                .into_owned()
        };
        assert!(plaintext_matches("secret", &out));
        assert!(!plaintext_matches("other", &out));
        assert!(!plaintext_matches("x", "x"));
    }

    #[test]
    fn commands_shown_as_cf_agent_writes_them() {
        let argv: Vec<String> = [
            "/usr/sbin/usermod",
            "-c",
            "New Name",
            "-s",
            "/bin/sh",
            "bob",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            shown(&argv),
            "/usr/sbin/usermod -c \"New Name\" -s \"/bin/sh\" bob"
        );
    }

    #[test]
    fn a_bare_bang_is_no_lock_to_undo() {
        assert!(locked("!$1$s$x") && lock_to_undo("!$1$s$x"));
        assert!(locked("!") && !lock_to_undo("!"));
        assert!(!locked("$1$s$x"));
    }
}
