//! The functions CFEngine added after 3.21 (3.22 to 3.28; see
//! `schema::newer` for the version of each): policy written for a newer
//! CFEngine calls them, and they answer as the newer cf-agent does.

use super::args::Args;
use super::system::{Group, all_accounts, all_groups, find_account, find_group, numeric_id};
use super::{FnError, FnResult, FnSpec, class_result, spec};
use crate::eval::EvalContext;
use crate::values::Value;
use serde_json::{Map, Value as Json, json};
use std::time::Duration;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("isreadable", 1, Some(2), isreadable),
    spec("version_compare", 3, Some(3), version_compare),
    spec("findlocalusers", 1, Some(1), findlocalusers),
    spec("findlocalgroups", 1, Some(1), findlocalgroups),
    spec("getbundlemetatags", 1, Some(2), getbundlemetatags),
    spec("is_type", 2, Some(2), is_type),
    spec("isconnectable", 2, Some(3), isconnectable),
    spec("useringroup", 2, Some(2), useringroup),
    spec("classfilterdata", 2, Some(3), classfilterdata),
    spec("getgroupinfo", 0, Some(1), getgroupinfo),
    spec("getgroups", 0, Some(2), getgroups),
    spec("isnewerthantime", 2, Some(2), isnewerthantime),
    spec("getacls", 2, Some(2), getacls),
];

/// `getacls(path, "access"|"default")` (3.27): the file's POSIX ACL of
/// that kind, one entry per item as `acl_to_any_text` writes them
/// (`user::rwx`, `user:root:rwx`, `mask::rwx`, ...). A file whose ACL
/// cannot be read gives an empty list and an error, as in cf-agent; so
/// does a file system without ACLs (the default list of a file without
/// one is empty).
fn getacls(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    use crate::host::acl::AclKind;
    let p = Args::new("getacls", a);
    let path = p.str(0, "path")?;
    let kind = match p.str(1, "type")? {
        "access" => AclKind::Access,
        "default" => AclKind::Default,
        other => return Err(p.fail(format!("'{other}' is neither 'access' nor 'default'"))),
    };
    match ctx.host().posix_acl(std::path::Path::new(path), kind) {
        Ok(list) => Ok(Value::List(crate::host::acl::text_entries(&list))),
        Err(e) => {
            let which = if kind == AclKind::Access {
                "access"
            } else {
                "default"
            };
            crate::error!("Failed to get {which} ACLs for '{path}': {e}");
            Ok(Value::List(Vec::new()))
        }
    }
}

/// `isreadable(path, timeout)`: whether a byte of the file can be read
/// within `timeout` seconds (3 unless given; 0 waits as long as it takes).
/// A directory cannot be read.
fn isreadable(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("isreadable", a);
    let path = p.str(0, "path")?;
    let secs = p.opt_int(1, "timeout", 3)?;
    if secs < 0 {
        return Err(p.fail(format!("a timeout of {secs} seconds")));
    }
    let timeout = (secs > 0).then(|| Duration::from_secs(secs as u64));
    Ok(class_result(
        ctx.host().plain().readable_within(path, timeout),
    ))
}

/// One part of a version: its leading digits as a number; `None` when it
/// does not start with a digit.
fn version_part(s: &str) -> Option<u64> {
    let digits: &str = &s[..s.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    // A number too long for u64 compares as the largest.
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// Compares two versions part by part (split at '.'), each part by its
/// leading number; what follows a part's number (`7a`, `7-1`) does not
/// count, and the comparison stops with the shorter version (`3.2` equals
/// `3.2.1`), as cf-agent 3.23's `version_compare` does. `None` when a part
/// compared is not a number.
pub fn compare_versions(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    for (x, y) in a.split('.').zip(b.split('.')) {
        let o = version_part(x)?.cmp(&version_part(y)?);
        if o.is_ne() {
            return Some(o);
        }
    }
    Some(std::cmp::Ordering::Equal)
}

fn version_compare(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("version_compare", a);
    let (x, op, y) = (
        p.str(0, "version")?,
        p.str(1, "operator")?,
        p.str(2, "version")?,
    );
    let o = compare_versions(x, y)
        .ok_or_else(|| p.fail(format!("cannot compare versions '{x}' and '{y}'")))?;
    use std::cmp::Ordering::*;
    let r = match op {
        "=" | "==" => o == Equal,
        "!=" => o != Equal,
        ">" => o == Greater,
        "<" => o == Less,
        ">=" => o != Less,
        "<=" => o != Greater,
        _ => return Err(p.fail(format!("unknown operator '{op}'"))),
    };
    Ok(class_result(r))
}

/// A filter of `findlocalusers`/`findlocalgroups`: `attribute=regex`
/// strings, from a list or data container by name or inline.
fn filters(ctx: &EvalContext, p: &Args) -> Result<Vec<(String, String)>, FnError> {
    let items: Vec<String> = match p.collect(ctx, 0, "filter")? {
        Value::List(l) => l,
        Value::Scalar(s) => vec![s],
        Value::Data(d) => {
            let elems: Vec<&Json> = match &*d {
                Json::Array(v) => v.iter().collect(),
                Json::Object(m) => m.values().collect(),
                _ => return Err(p.fail("expected a data container or slist")),
            };
            let mut out = Vec::new();
            for e in elems {
                match e {
                    Json::String(s) => out.push(s.clone()),
                    Json::Array(_) | Json::Object(_) => {
                        return Err(p.fail("the filter cannot hold nested data"));
                    }
                    other => out.push(other.to_string()),
                }
            }
            out
        }
    };
    items
        .into_iter()
        .map(|f| match f.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => Err(p.fail(format!(
                "invalid filter field '{f}': expected attribute=value"
            ))),
        })
        .collect()
}

fn full_match(ctx: &mut EvalContext, p: &Args, re: &str, text: &str) -> Result<bool, FnError> {
    let r = ctx
        .regexes
        .get(re)
        .map_err(|e| p.fail(format!("filter '{re}': {e}")))?;
    Ok(r.is_full_match(text))
}

/// `findlocalusers(filter)`: the local accounts every `attribute=regex`
/// of the filter matches (name, uid, gid, gecos, dir, shell), as
/// `{name: {uid, gid, gecos, dir, shell}}`.
fn findlocalusers(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("findlocalusers", a);
    let fs = filters(ctx, &p)?;
    let mut out = Map::new();
    for acc in all_accounts() {
        let mut keep = true;
        for (k, v) in &fs {
            let field = match k.as_str() {
                "name" => acc.name.clone(),
                "uid" => acc.uid.to_string(),
                "gid" => acc.gid.to_string(),
                "gecos" => acc.gecos.clone(),
                "dir" => acc.dir.clone(),
                "shell" => acc.shell.clone(),
                _ => return Err(p.fail(format!("invalid attribute '{k}': not supported"))),
            };
            keep &= full_match(ctx, &p, v, &field)?;
        }
        if keep {
            out.insert(
                acc.name.clone(),
                json!({"uid": acc.uid, "gid": acc.gid, "gecos": acc.gecos, "dir": acc.dir, "shell": acc.shell}),
            );
        }
    }
    Ok(Value::data(Json::Object(out)))
}

/// `findlocalgroups(filter)`: the local groups the filter matches (name
/// and gid as regular expressions; `members=a,b` those having all of
/// them), as `{name: {gid, members}}`.
fn findlocalgroups(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("findlocalgroups", a);
    let fs = filters(ctx, &p)?;
    let mut out = Map::new();
    for g in all_groups() {
        let mut keep = true;
        for (k, v) in &fs {
            keep &= match k.as_str() {
                "name" => full_match(ctx, &p, v, &g.name)?,
                "gid" => full_match(ctx, &p, v, &g.gid.to_string())?,
                "members" => v
                    .split(',')
                    .filter(|m| !m.is_empty())
                    .all(|m| g.members.iter().any(|x| x == m)),
                _ => return Err(p.fail(format!("invalid attribute '{k}': not supported"))),
            };
        }
        if keep {
            out.insert(g.name.clone(), json!({"gid": g.gid, "members": g.members}));
        }
    }
    Ok(Value::data(Json::Object(out)))
}

/// `getbundlemetatags(bundle, tag_key)`: the `tags` of the bundle's
/// `meta:` promises, as written in the policy (or only the values of its
/// `key=value` tags).
fn getbundlemetatags(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getbundlemetatags", a);
    let r = p.str(0, "bundle")?;
    let key = p.opt_str(1, "tag_key")?;
    let (ns, name) = r.split_once(':').unwrap_or(("default", r));
    // The policy's bundles grow as files load: no read of a store names them.
    ctx.vars.reads.note_unnamed();
    let Some(b) = ctx
        .policy_bundles
        .iter()
        .find(|b| b.ns == ns && b.name == name)
    else {
        return Err(p.fail(format!(
            "couldn't find bundle '{name}' with namespace '{ns}'"
        )));
    };
    let tags = b.meta_tags.clone();
    Ok(Value::List(match key {
        None => tags,
        Some(k) => tags
            .iter()
            .filter_map(|t| t.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
            .map(str::to_string)
            .collect(),
    }))
}

/// `is_type(variable, type)`: whether `type(variable)` is `type`; a type
/// with a space (`data object`, `policy int`) is compared with the
/// detailed answer.
fn is_type(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("is_type", a);
    let name = p.str(0, "variable")?;
    let ty = p.str(1, "type")?;
    let detail = ty.contains(' ');
    Ok(class_result(
        super::data::type_text(ctx, name, detail) == ty,
    ))
}

/// `isconnectable(host, port, timeout)`: whether a TCP connection can be
/// made within the timeout (30 seconds unless given).
fn isconnectable(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("isconnectable", a);
    let host = p.str(0, "host")?;
    let port = p.str(1, "port")?;
    let secs = p.opt_int(2, "timeout", 30)?.max(1) as u64;
    let Ok(port) = port.parse::<u16>() else {
        return Ok(class_result(false));
    };
    use std::net::{TcpStream, ToSocketAddrs};
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return Ok(class_result(false));
    };
    let ok = addrs
        .into_iter()
        .any(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(secs)).is_ok());
    Ok(class_result(ok))
}

/// `useringroup(user, group)`: whether the user is a member of the group,
/// or has it as primary group; false when either does not exist.
fn useringroup(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("useringroup", a);
    let user = p.str(0, "user")?;
    let group = p.str(1, "group")?;
    let Some(g) = find_group(group, None) else {
        return Ok(class_result(false));
    };
    if g.members.iter().any(|m| m == user) {
        return Ok(class_result(true));
    }
    Ok(class_result(
        find_account(user).is_some_and(|acc| acc.gid == g.gid),
    ))
}

/// The class expression of one element of `classfilterdata`'s container:
/// at index `sel` of an array, under key `sel` of an object, or (an
/// element of an object, without `sel`) the element's own key.
fn class_expr_of<'a>(
    p: &Args,
    elem: &'a Json,
    sel: Option<&str>,
    own_key: Option<&'a str>,
) -> Result<&'a str, FnError> {
    let found = match (elem, sel) {
        (_, None) => own_key,
        (Json::Array(v), Some(i)) => {
            let i: usize = i
                .parse()
                .map_err(|_| p.fail(format!("'{i}' is not an index")))?;
            v.get(i).and_then(Json::as_str)
        }
        (Json::Object(m), Some(k)) => m.get(k).and_then(Json::as_str),
        _ => None,
    };
    found.ok_or_else(|| p.fail("an element has no class expression where it was looked for"))
}

/// `classfilterdata(data, structure, key_or_index)`: the container less
/// the elements whose class expression is not true. The structure
/// (`array_of_arrays`, `array_of_objects`, `object_of_arrays`,
/// `object_of_objects` or `auto`) says what the elements are.
fn classfilterdata(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("classfilterdata", a);
    let data = match p.collect(ctx, 0, "data")? {
        Value::Data(d) => (*d).clone(),
        Value::List(l) => Json::Array(l.into_iter().map(Json::String).collect()),
        Value::Scalar(_) => return Err(p.fail("expected a data container")),
    };
    let structure = p.option(
        1,
        "structure",
        &[
            "array_of_arrays",
            "array_of_objects",
            "object_of_arrays",
            "object_of_objects",
            "auto",
        ],
    )?;
    let sel = p.opt_str(2, "key_or_index")?;
    let fits = |outer: &str, elem: &Json| {
        let inner = match elem {
            Json::Array(_) => "arrays",
            Json::Object(_) => "objects",
            _ => return false,
        };
        structure == "auto" || structure == format!("{outer}_of_{inner}")
    };
    let keep = |ctx: &mut EvalContext, expr: &str| -> Result<bool, FnError> {
        ctx.eval_class_expr(expr)
            .map_err(|e| p.fail(format!("class expression '{expr}': {e}")))
    };
    let out = match data {
        Json::Array(v) => {
            let Some(sel) = sel else {
                return Err(p.fail("an array needs the key or index of the class expression"));
            };
            let mut kept = Vec::new();
            for e in v {
                if !fits("array", &e) {
                    return Err(p.fail("the data does not have the structure given"));
                }
                let expr = class_expr_of(&p, &e, Some(sel), None)?.to_string();
                if keep(ctx, &expr)? {
                    kept.push(e);
                }
            }
            Json::Array(kept)
        }
        Json::Object(m) => {
            let mut kept = Map::new();
            for (k, e) in m {
                if !fits("object", &e) {
                    return Err(p.fail("the data does not have the structure given"));
                }
                let expr = class_expr_of(&p, &e, sel, Some(&k))?.to_string();
                if keep(ctx, &expr)? {
                    kept.insert(k, e);
                }
            }
            Json::Object(kept)
        }
        _ => return Err(p.fail("expected a data container")),
    };
    Ok(Value::data(out))
}

fn group_json(g: &Group) -> Json {
    json!({"name": g.name, "gid": g.gid, "members": g.members})
}

/// `getgroupinfo(group)`: `{name, gid, members}` of the group named or
/// numbered; without an argument, the agent's own group.
fn getgroupinfo(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getgroupinfo", a);
    let g = match p.opt_str(0, "group")? {
        // SAFETY: getgid cannot fail.
        None => find_group("", Some(unsafe { libc::getgid() })),
        Some(s) => match numeric_id(s) {
            Some(gid) => find_group(s, Some(gid)),
            None => find_group(s, None),
        },
    };
    match g {
        Some(g) => Ok(Value::data(group_json(&g))),
        None => Err(p.fail("no such group")),
    }
}

/// `getgroups(exclude_names, exclude_gids)`: group names in database
/// order, each once, less the comma-separated exclusions.
fn getgroups(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getgroups", a);
    let split = |s: Option<&str>| -> Vec<String> {
        s.unwrap_or("")
            .split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    };
    let names = split(p.opt_str(0, "exclude_names")?);
    let gids = split(p.opt_str(1, "exclude_gids")?);
    let mut out: Vec<String> = Vec::new();
    for g in all_groups() {
        if names.contains(&g.name) || gids.contains(&g.gid.to_string()) || out.contains(&g.name) {
            continue;
        }
        out.push(g.name);
    }
    Ok(Value::List(out))
}

/// `isnewerthantime(path, time)`: whether the file was modified after the
/// time (seconds since the epoch); fails when it does not exist.
fn isnewerthantime(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    use crate::host::plain::MetadataExt as _;
    let p = Args::new("isnewerthantime", a);
    let path = p.str(0, "path")?;
    let t = p.int(1, "time")?;
    match ctx.host().plain().metadata(path) {
        Ok(m) => Ok(class_result(m.mtime() > t)),
        Err(e) => Err(p.fail_quietly(format!("cannot stat '{path}': {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::compare_versions;
    use std::cmp::Ordering::*;

    #[test]
    fn versions_compare_as_cf_agent_3_23() {
        assert_eq!(compare_versions("1.2.3", "1.1.999"), Some(Greater));
        assert_eq!(compare_versions("7.7.7", "7.7.7-1"), Some(Equal));
        assert_eq!(compare_versions("7.7.7a", "7.7.7"), Some(Equal));
        assert_eq!(compare_versions("3", "3.2.1"), Some(Equal));
        assert_eq!(compare_versions("0.0.0", "0.0.1"), Some(Less));
        assert_eq!(compare_versions("a", "1"), None);
    }
}
