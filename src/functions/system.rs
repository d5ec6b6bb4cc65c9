//! The system: commands and their output, the environment, users and
//! groups, processes, kernel parameters, and the installed-packages cache.

use super::args::Args;
use super::exec::{self, Shell};
use super::{FnError, FnResult, FnSpec, cached, class_result, effect, int_value, spec};
use crate::eval::EvalContext;
use crate::host::exec::OutputSelect;
use crate::host::packages::{Inventory, read_inventory, read_module_inventory};
use crate::values::Value;
use serde_json::{Map, Value as Json, json};
use std::ffi::{CStr, CString};

pub static FUNCTIONS: &[FnSpec] = &[
    effect("execresult", 2, Some(3), true, execresult),
    effect("execresult_as_data", 2, Some(3), true, execresult_as_data),
    effect("returnszero", 2, Some(2), true, returnszero),
    spec("getenv", 2, Some(2), getenv),
    spec("getuid", 1, Some(1), getuid),
    spec("getgid", 1, Some(1), getgid),
    spec("getuserinfo", 0, Some(1), getuserinfo),
    spec("getusers", 0, Some(2), getusers),
    spec("userexists", 1, Some(1), userexists),
    spec("groupexists", 1, Some(1), groupexists),
    cached("findprocesses", 1, Some(1), findprocesses),
    cached("processexists", 1, Some(1), processexists),
    spec("sysctlvalue", 1, Some(1), sysctlvalue),
    spec("data_sysctlvalues", 0, Some(0), data_sysctlvalues),
    spec("packagesmatching", 4, Some(4), packagesmatching),
    spec("packageupdatesmatching", 4, Some(4), packageupdatesmatching),
    spec("hostinnetgroup", 1, Some(1), hostinnetgroup),
];

// ---- commands ---------------------------------------------------------------

fn shell_arg(p: &Args, i: usize) -> Result<Shell, FnError> {
    match p.opt_option(
        i,
        "shell",
        &["noshell", "useshell", "powershell"],
        "noshell",
    )? {
        "useshell" => Ok(Shell::Sh),
        "powershell" => Err(p.fail("powershell is only available on Windows")),
        _ => Ok(Shell::No),
    }
}

/// Which output to keep: both streams unless asked, as cf-agent 3.21
/// keeps them (00_basics/03_bodies/report_error_when_body_missing.cf greps
/// what an agent run wrote to its standard error).
fn capture_arg(p: &Args, i: usize) -> Result<OutputSelect, FnError> {
    match p.opt_option(i, "output", &["both", "stdout", "stderr"], "both")? {
        "stderr" => Ok(OutputSelect::Stderr),
        "both" => Ok(OutputSelect::Both),
        _ => Ok(OutputSelect::Stdout),
    }
}

fn run_for(ctx: &EvalContext, p: &Args) -> Result<exec::Finished, FnError> {
    let line = p.str(0, "command")?;
    let shell = shell_arg(p, 1)?;
    let capture = capture_arg(p, 2)?;
    exec::run(ctx.host(), line, shell, capture, exec::DEFAULT_TIMEOUT).map_err(|e| p.fail(e))
}

/// `execresult(command, shell, output)`: the output with trailing white
/// space removed, whatever the exit code.
fn execresult(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("execresult", a);
    let f = run_for(ctx, &p)?;
    Ok(Value::str(exec::trim_output(&f.output)))
}

/// `execresult_as_data(...)`: `{"exit_code": n, "output": "..."}`.
fn execresult_as_data(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("execresult_as_data", a);
    let f = run_for(ctx, &p)?;
    Ok(Value::data(json!({
        "exit_code": f.code.unwrap_or(-1),
        "output": exec::trim_output(&f.output),
    })))
}

/// `returnszero(command, shell)`: whether it ran and exited with 0. Its
/// output is not collected: as in cf-agent, a command run through the shell
/// always writes to the agent's own output, one run without a shell only at
/// inform level and above (02_classes/02_functions/silent_returnszero.cf).
fn returnszero(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("returnszero", a);
    let line = p.str(0, "command")?;
    let shell = shell_arg(&p, 1)?;
    let output = if shell == exec::Shell::Sh || ctx.settings.command_output_shown {
        OutputSelect::Inherit
    } else {
        OutputSelect::Stdout
    };
    match exec::run(ctx.host(), line, shell, output, exec::DEFAULT_TIMEOUT) {
        Ok(f) => Ok(class_result(f.code == Some(0))),
        Err(e) => {
            crate::error!("returnszero {e}");
            Ok(class_result(false))
        }
    }
}

// ---- environment --------------------------------------------------------------

/// `getenv(name, maxlen)`: the value cut to `maxlen` bytes (on a character
/// boundary); empty when unset.
fn getenv(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getenv", a);
    let name = p.str(0, "name")?;
    let max = p.int(1, "max_length")?.max(0) as usize;
    // What agent control set (`environment`, `childlibpath`) is part of
    // cf-agent's own environment.
    let v = crate::host::exec::run_env(name)
        .or_else(|| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
        .unwrap_or_default();
    Ok(Value::str(&v[..v.floor_char_boundary(max)]))
}

// ---- users and groups ------------------------------------------------------

/// One account of the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub gecos: String,
    pub dir: String,
    pub shell: String,
}

fn cstr(p: *const libc::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null pointers from the password and group databases are
    // valid C strings for the lifetime of the buffer passed in.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn account_of(pw: &libc::passwd) -> Account {
    Account {
        name: cstr(pw.pw_name),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        gecos: cstr(pw.pw_gecos),
        dir: cstr(pw.pw_dir),
        shell: cstr(pw.pw_shell),
    }
}

enum PwKey<'a> {
    Name(&'a str),
    Uid(u32),
}

fn lookup_account(key: PwKey) -> Option<Account> {
    // SAFETY: passwd is plain data filled by the call.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16384];
    let rc = match key {
        PwKey::Name(n) => {
            let c = CString::new(n).ok()?;
            // SAFETY: all pointers are valid for the call; the buffer
            // outlives the use of `pw`.
            unsafe {
                libc::getpwnam_r(
                    c.as_ptr(),
                    &mut pw,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut result,
                )
            }
        }
        // SAFETY: as above.
        PwKey::Uid(u) => unsafe {
            libc::getpwuid_r(u, &mut pw, buf.as_mut_ptr(), buf.len(), &mut result)
        },
    };
    if rc != 0 || result.is_null() {
        return None;
    }
    Some(account_of(&pw))
}

/// Every account, in the order of the database.
pub fn all_accounts() -> Vec<Account> {
    let mut out = Vec::new();
    // SAFETY: setpwent/getpwent_r/endpwent iterate the database; the
    // buffer outlives each use of `pw`.
    unsafe {
        libc::setpwent();
        let mut buf = vec![0 as libc::c_char; 16384];
        loop {
            let mut pw: libc::passwd = std::mem::zeroed();
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            let rc = libc::getpwent_r(&mut pw, buf.as_mut_ptr(), buf.len(), &mut result);
            if rc != 0 || result.is_null() {
                break;
            }
            out.push(account_of(&pw));
        }
        libc::endpwent();
    }
    out
}

enum GrKey<'a> {
    Name(&'a str),
    Gid(u32),
}

/// A group of the group database.
pub(super) struct Group {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

fn group_of(gr: &libc::group) -> Group {
    let mut members = Vec::new();
    if !gr.gr_mem.is_null() {
        let mut i = 0;
        // SAFETY: gr_mem is a NULL-terminated array of C strings filled by
        // the C library for this entry.
        unsafe {
            while !(*gr.gr_mem.add(i)).is_null() {
                members.push(cstr(*gr.gr_mem.add(i)));
                i += 1;
            }
        }
    }
    Group {
        name: cstr(gr.gr_name),
        gid: gr.gr_gid,
        members,
    }
}

/// Every group, in the order of the database.
pub(super) fn all_groups() -> Vec<Group> {
    let mut out = Vec::new();
    // SAFETY: setgrent/getgrent_r/endgrent iterate the database; the
    // buffer outlives each use of `gr`.
    unsafe {
        libc::setgrent();
        let mut buf = vec![0 as libc::c_char; 65536];
        loop {
            let mut gr: libc::group = std::mem::zeroed();
            let mut result: *mut libc::group = std::ptr::null_mut();
            let rc = libc::getgrent_r(&mut gr, buf.as_mut_ptr(), buf.len(), &mut result);
            if rc != 0 || result.is_null() {
                break;
            }
            out.push(group_of(&gr));
        }
        libc::endgrent();
    }
    out
}

/// A group by name, or by number when `by_gid`.
pub(super) fn find_group(name: &str, by_gid: Option<u32>) -> Option<Group> {
    match by_gid {
        Some(g) => lookup_group_full(GrKey::Gid(g)),
        None => lookup_group_full(GrKey::Name(name)),
    }
}

/// An account by name.
pub(super) fn find_account(name: &str) -> Option<Account> {
    lookup_account(PwKey::Name(name))
}

fn lookup_group(key: GrKey) -> Option<(String, u32)> {
    lookup_group_full(key).map(|g| (g.name, g.gid))
}

fn lookup_group_full(key: GrKey) -> Option<Group> {
    // SAFETY: group is plain data filled by the call.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::group = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 65536];
    let rc = match key {
        GrKey::Name(n) => {
            let c = CString::new(n).ok()?;
            // SAFETY: valid pointers; the buffer outlives `gr`.
            unsafe {
                libc::getgrnam_r(
                    c.as_ptr(),
                    &mut gr,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut result,
                )
            }
        }
        // SAFETY: as above.
        GrKey::Gid(g) => unsafe {
            libc::getgrgid_r(g, &mut gr, buf.as_mut_ptr(), buf.len(), &mut result)
        },
    };
    if rc != 0 || result.is_null() {
        return None;
    }
    Some(group_of(&gr))
}

pub(super) fn numeric_id(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn getuid(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getuid", a);
    let name = p.str(0, "user")?;
    match lookup_account(PwKey::Name(name)) {
        Some(acc) => Ok(int_value(acc.uid as i64)),
        None => match numeric_id(name) {
            Some(u) => Ok(int_value(u as i64)),
            None => Err(p.fail(format!("could not get the UID of user '{name}'"))),
        },
    }
}

fn getgid(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getgid", a);
    let name = p.str(0, "group")?;
    match lookup_group(GrKey::Name(name)) {
        Some((_, gid)) => Ok(int_value(gid as i64)),
        None => match numeric_id(name) {
            Some(g) => Ok(int_value(g as i64)),
            None => Err(p.fail(format!("could not get the GID of group '{name}'"))),
        },
    }
}

fn account_json(acc: &Account) -> Json {
    // Keys in sorted order, as cf-agent prints them.
    json!({
        "description": acc.gecos,
        "gid": acc.gid,
        "home_dir": acc.dir,
        "shell": acc.shell,
        "uid": acc.uid,
        "username": acc.name,
    })
}

/// `getuserinfo(name or uid)`: the account as data; without an argument,
/// the user running the agent. Like cf-agent, a name that is not found is
/// read as a number (so an unknown name gives the account of uid 0).
fn getuserinfo(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getuserinfo", a);
    let acc = match p.opt_str(0, "user")? {
        // SAFETY: getuid cannot fail.
        None => lookup_account(PwKey::Uid(unsafe { libc::getuid() })),
        Some(s) => match numeric_id(s) {
            Some(u) => lookup_account(PwKey::Uid(u)),
            None => lookup_account(PwKey::Name(s)).or_else(|| lookup_account(PwKey::Uid(0))),
        },
    };
    match acc {
        Some(acc) => Ok(Value::data(account_json(&acc))),
        None => Err(p.fail("no such user")),
    }
}

/// `getusers(exclude_names, exclude_uids)`: account names, in database
/// order, less the comma-separated exclusions.
fn getusers(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getusers", a);
    // Both optional since CFEngine 3.28.
    let names: Vec<&str> = p
        .opt_str(0, "exclude_names")?
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    let ids: Vec<&str> = p
        .opt_str(1, "exclude_ids")?
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    Ok(Value::List(
        all_accounts()
            .into_iter()
            .filter(|acc| {
                !names.contains(&acc.name.as_str()) && !ids.contains(&acc.uid.to_string().as_str())
            })
            .map(|acc| acc.name)
            .collect(),
    ))
}

fn userexists(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("userexists", a);
    let s = p.str(0, "user")?;
    let found = match numeric_id(s) {
        Some(u) => lookup_account(PwKey::Uid(u)).is_some(),
        None => lookup_account(PwKey::Name(s)).is_some(),
    };
    Ok(class_result(found))
}

fn groupexists(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("groupexists", a);
    let s = p.str(0, "group")?;
    let found = match numeric_id(s) {
        Some(g) => lookup_group(GrKey::Gid(g)).is_some(),
        None => lookup_group(GrKey::Name(s)).is_some(),
    };
    Ok(class_result(found))
}

// ---- processes ----------------------------------------------------------------

/// The processes whose command line the pattern matches anywhere. Like
/// cf-agent's, the table includes the agent itself.
fn matching_processes(
    ctx: &mut EvalContext,
    p: &Args,
) -> Result<Vec<crate::host::procs::ProcessInfo>, FnError> {
    let re = p.regex(ctx, 0, "regex")?;
    Ok(ctx
        .host()
        .processes()
        .into_iter()
        .filter(|pr| re.is_match(&pr.command))
        .collect())
}

/// `findprocesses(regex)`: `[{"pid": n, "line": "..."}]` of the processes
/// whose command line the pattern matches (anywhere in it).
fn findprocesses(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("findprocesses", a);
    let found = matching_processes(ctx, &p)?;
    Ok(Value::data(Json::Array(
        found
            .into_iter()
            .map(|pr| json!({"line": pr.command, "pid": pr.pid}))
            .collect(),
    )))
}

fn processexists(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("processexists", a);
    Ok(class_result(!matching_processes(ctx, &p)?.is_empty()))
}

// ---- kernel parameters ----------------------------------------------------

/// `sysctlvalue(key)`: `/proc/sys/<key with dots as slashes>`, without its
/// trailing newline.
fn sysctlvalue(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("sysctlvalue", a);
    let key = p.str(0, "key")?;
    ctx.host()
        .kernel_parameter(key)
        .map(Value::str)
        .map_err(|(path, e)| p.fail(format!("cannot read '{}': {e}", path.display())))
}

/// `data_sysctlvalues()`: every readable kernel parameter by dotted key.
fn data_sysctlvalues(ctx: &mut EvalContext, _: &[Value]) -> FnResult {
    let all = ctx.host().kernel_parameters();
    let m: Map<String, Json> = all.into_iter().map(|(k, v)| (k, Json::String(v))).collect();
    Ok(Value::data(Json::Object(m)))
}

// ---- packages --------------------------------------------------------------

fn package_query(
    ctx: &mut EvalContext,
    name: &'static str,
    a: &[Value],
    updates: bool,
) -> FnResult {
    let p = Args::new(name, a);
    // As cf-agent, one regular expression over the whole
    // `name,version,arch,method` line, which its first match must cover
    // (so `a|b` in the name matches `a` only if that is the whole line).
    let pattern = format!(
        "^{},{},{},{}$",
        p.str(0, "name_regex")?,
        p.str(1, "version_regex")?,
        p.str(2, "arch_regex")?,
        p.str(3, "method_regex")?
    );
    let re = ctx
        .regexes
        .get(&pattern)
        .map_err(|e| p.fail(format!("'{pattern}': {e}")))?;
    let workdir = ctx
        .lookup("sys.workdir")
        .and_then(|v| v.as_scalar().map(std::path::PathBuf::from));
    let which = if updates {
        Inventory::Updates
    } else {
        Inventory::Installed
    };
    // With `package_inventory` in body common control the caches of those
    // package modules are read; without it, the legacy inventory.
    let modules: Vec<String> = match &ctx.default_inventory {
        Some(Value::List(l)) => l.clone(),
        Some(Value::Scalar(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    // cf-agent skips a module name that still holds a reference and fails
    // the call, at debug level only, when no name is left: so the MPF's
    // agent bundles, pre-evaluated while its inventory names
    // `$(package_module_knowledge.platform_default)`, leave the variable
    // undefined.
    let unresolved = |m: &String| ["$(", "${", "@(", "@{"].iter().any(|r| m.contains(r));
    if !modules.is_empty() && modules.iter().all(unresolved) {
        return Err(FnError::Quiet(format!(
            "{name}: no valid package module inventory found"
        )));
    }
    let packages = match workdir {
        None => Vec::new(),
        Some(w) if modules.is_empty() => read_inventory(&w, which),
        Some(w) => modules
            .iter()
            .filter(|m| m.as_str() != "cf_null" && !unresolved(m))
            .flat_map(|m| read_module_inventory(&w, which, m).unwrap_or_default())
            .collect(),
    };
    let out: Vec<Json> = packages
        .into_iter()
        .filter(|r| re.is_full_match(&format!("{},{},{},{}", r.name, r.version, r.arch, r.method)))
        .map(|r| json!({"arch": r.arch, "method": r.method, "name": r.name, "version": r.version}))
        .collect();
    Ok(Value::data(Json::Array(out)))
}

/// `packagesmatching(name, version, arch, method)`: installed packages.
fn packagesmatching(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    package_query(ctx, "packagesmatching", a, false)
}

/// `packageupdatesmatching(...)`: available updates.
fn packageupdatesmatching(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    package_query(ctx, "packageupdatesmatching", a, true)
}

// ---- netgroups ----------------------------------------------------------------

unsafe extern "C" {
    fn innetgr(
        netgroup: *const libc::c_char,
        host: *const libc::c_char,
        user: *const libc::c_char,
        domain: *const libc::c_char,
    ) -> libc::c_int;
}

/// `hostinnetgroup(netgroup)`: whether this host is in the NIS netgroup.
fn hostinnetgroup(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("hostinnetgroup", a);
    let group = p.str(0, "netgroup")?;
    let (Ok(g), Ok(h)) = (CString::new(group), CString::new(super::net::host_name())) else {
        return Ok(class_result(false));
    };
    // SAFETY: valid C strings; null user and domain mean "any".
    let r = unsafe { innetgr(g.as_ptr(), h.as_ptr(), std::ptr::null(), std::ptr::null()) };
    Ok(class_result(r == 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<Value> {
        v.iter().map(|x| Value::str(*x)).collect()
    }

    #[test]
    fn root_exists_everywhere() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        assert_eq!(getuid(&mut c, &s(&["root"])), Ok(Value::str("0")));
        assert_eq!(userexists(&mut c, &s(&["0"])), Ok(class_result(true)));
        assert_eq!(
            userexists(&mut c, &s(&["no-such-user-xyz"])),
            Ok(class_result(false))
        );
        assert!(getuid(&mut c, &s(&["no-such-user-xyz"])).is_err());
        let info = getuserinfo(&mut c, &s(&["0"])).unwrap();
        assert_eq!(info.as_data().unwrap()["username"], "root");
        assert!(all_accounts().iter().any(|a| a.uid == 0));
    }

    #[test]
    fn getenv_truncates() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        // PATH is set in every test environment.
        let v = getenv(&mut c, &s(&["PATH", "3"])).unwrap();
        assert_eq!(v.as_scalar().map(str::len), Some(3));
        assert_eq!(
            getenv(&mut c, &s(&["NO_SUCH_VAR_XYZ", "10"])),
            Ok(Value::str(""))
        );
    }

    #[test]
    fn execresult_trims_and_keeps_failures() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        assert_eq!(
            execresult(&mut c, &s(&["/bin/printf '  x \\n\\n'", "useshell"])),
            Ok(Value::str("  x"))
        );
        assert!(execresult(&mut c, &s(&["echo x", "noshell"])).is_err());
        let d = execresult_as_data(&mut c, &s(&["echo x; exit 3", "useshell"])).unwrap();
        assert_eq!(d, Value::data(json!({"exit_code": 3, "output": "x"})));
        assert_eq!(
            execresult(&mut c, &s(&["echo x; echo y >&2", "useshell"])),
            Ok(Value::str("x\ny"))
        );
        assert_eq!(
            execresult(&mut c, &s(&["echo x; echo y >&2", "useshell", "stdout"])),
            Ok(Value::str("x"))
        );
        assert_eq!(
            returnszero(&mut c, &s(&["/nonexistent", "noshell"])),
            Ok(class_result(false))
        );
    }

    #[test]
    fn packages_come_from_the_work_directory_cache() {
        use crate::eval::vars::Variable;
        use crate::host::packages::{PackageRecord, write_inventory};
        use crate::values::{DataType, Origin};
        let dir = tempfile::tempdir().unwrap();
        let rec = |n: &str, v: &str| PackageRecord {
            name: n.into(),
            version: v.into(),
            arch: "amd64".into(),
            method: "apt_get".into(),
        };
        write_inventory(
            dir.path(),
            Inventory::Installed,
            &[rec("bash", "5.2"), rec("zsh", "5.9")],
        )
        .unwrap();
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        c.vars.put(
            "default",
            "sys",
            "workdir",
            Variable::new(
                Value::str(dir.path().display().to_string()),
                DataType::String,
                Origin::Agent,
            ),
        );
        let r = packagesmatching(&mut c, &s(&["ba.*", ".*", ".*", ".*"])).unwrap();
        assert_eq!(
            r,
            Value::data(
                json!([{"arch": "amd64", "method": "apt_get", "name": "bash", "version": "5.2"}])
            )
        );
        let u = packageupdatesmatching(&mut c, &s(&[".*", ".*", ".*", ".*"])).unwrap();
        assert_eq!(u, Value::data(json!([])));
    }

    #[test]
    fn an_inventory_of_unresolved_names_fails_the_call_quietly() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        c.default_inventory = Some(Value::List(vec!["$(knowledge.default)".into()]));
        let r = packagesmatching(&mut c, &s(&[".*", ".*", ".*", ".*"]));
        assert!(matches!(r, Err(FnError::Quiet(_))), "{r:?}");
    }

    #[test]
    fn with_package_inventory_the_module_caches_are_read() {
        use crate::eval::vars::Variable;
        use crate::host::packages::{PackageRecord, write_inventory, write_module_inventory};
        use crate::values::Origin;
        let dir = tempfile::tempdir().unwrap();
        let rec = |n: &str, v: &str, m: &str| PackageRecord {
            name: n.into(),
            version: v.into(),
            arch: "amd64".into(),
            method: m.into(),
        };
        write_inventory(dir.path(), Inventory::Installed, &[rec("legacy", "1", "x")]).unwrap();
        write_module_inventory(
            dir.path(),
            Inventory::Installed,
            "apt_get",
            &[rec("bash", "5.2", "apt_get"), rec("zsh", "5.9", "apt_get")],
        )
        .unwrap();
        write_module_inventory(
            dir.path(),
            Inventory::Updates,
            "apt_get",
            &[rec("bash", "5.3", "apt_get")],
        )
        .unwrap();
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let put = |c: &mut EvalContext, scope: &str, name: &str, v: Value| {
            let t = v.natural_type();
            c.vars
                .put("default", scope, name, Variable::new(v, t, Origin::Agent));
        };
        put(
            &mut c,
            "sys",
            "workdir",
            Value::str(dir.path().display().to_string()),
        );
        // The default inventory, as the agent sets it once its bundles start.
        c.default_inventory = Some(Value::List(vec!["apt_get".into(), "cf_null".into()]));
        let names = |v: Value| -> Vec<String> {
            v.as_data()
                .and_then(|d| d.as_array().cloned())
                .unwrap_or_default()
                .iter()
                .map(|p| format!("{} {} {}", p["name"], p["version"], p["method"]))
                .collect()
        };
        let all = packagesmatching(&mut c, &s(&[".*", ".*", ".*", ".*"])).unwrap();
        assert_eq!(
            names(all),
            vec![
                "\"bash\" \"5.2\" \"apt_get\"",
                "\"zsh\" \"5.9\" \"apt_get\""
            ]
        );
        // One expression over the whole line, matched in full: `zsh|bash`
        // in the name matches only where the whole line follows.
        let alt = packagesmatching(&mut c, &s(&["bash|zsh", ".*", ".*", ".*"])).unwrap();
        assert_eq!(names(alt), vec!["\"zsh\" \"5.9\" \"apt_get\""]);
        let u = packageupdatesmatching(&mut c, &s(&[".*", ".*", ".*", "apt_get"])).unwrap();
        assert_eq!(names(u), vec!["\"bash\" \"5.3\" \"apt_get\""]);
    }

    #[test]
    fn processes_include_this_one() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let me = std::process::id() as i64;
        let found = findprocesses(&mut c, &s(&[".*"])).unwrap();
        let pids: Vec<i64> = found
            .as_data()
            .and_then(|d| d.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p["pid"].as_i64())
            .collect();
        assert!(pids.contains(&me), "{pids:?}");
    }
}
