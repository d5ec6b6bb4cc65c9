//! `acl` bodies on Linux, as cf-agent 3.21 sets POSIX ACLs: the ACEs
//! (`user:NAME:MODE`, `group:NAME:MODE`, `user:*` and `group:*` for the
//! owner and the owning group, `all:MODE`, `mask:MODE` with
//! `acl_type => "posix"`) are checked for syntax, then applied to the
//! entry's access list (added to what is there with `acl_method =>
//! "append"`, the default, or alone with `"overwrite"`), the mask
//! recomputed unless one is given, and the list written only when it
//! differs. A directory's default list follows `acl_default`
//! (`nochange`, `specify` from `specify_default_aces`, `access` as its
//! access list, `clear`). As in cf-agent, nothing happens without `aces`,
//! and `acl_inherit` is for Windows only.
//!
//! A mode is clauses separated by `,`: `+rw` adds, `-x` removes, `rw` or
//! `=rw` sets; a native part `(rwx)` is the same bits on Linux.

use super::Verdict;
use crate::eval::bodies::ResolvedBody;
use crate::eval::expanded::ExpandedPromise;
use crate::host::acl::{ACL_EXECUTE, ACL_READ, ACL_WRITE, AclEntry, AclKind, AclTag};
use crate::host::fs::{FileKind, Meta};
use crate::promises::ActContext;
use crate::report::change::Change;
use std::path::Path;

use super::perms::{gid_of_known, uid_of_known};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Append,
    Overwrite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Generic,
    Posix,
    Ntfs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Default {
    NoChange,
    Specify,
    Access,
    Clear,
}

fn kind_name(kind: AclKind) -> &'static str {
    match kind {
        AclKind::Access => "Access",
        AclKind::Default => "Default",
    }
}

/// Applies the `acl` body of a files promise to `target`.
pub(super) fn apply_acl(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    shown: &str,
    target: &Path,
    meta: &Meta,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let aces = body.list("aces");
    if aces.is_empty() || meta.kind == FileKind::Symlink {
        return;
    }
    // cf-agent finds the entry's other attributes as promised first.
    v.kept_step();
    let method = match body.scalar("acl_method") {
        Some("overwrite") => Method::Overwrite,
        _ => Method::Append,
    };
    let acl_type = match body.scalar("acl_type") {
        Some("posix") => Type::Posix,
        Some("ntfs") => Type::Ntfs,
        _ => Type::Generic,
    };
    let parse_default = |s: &str| match s {
        "nochange" => Some(Default::NoChange),
        "specify" => Some(Default::Specify),
        "access" => Some(Default::Access),
        "clear" => Some(Default::Clear),
        _ => None,
    };
    let default = body
        .scalar("acl_default")
        .and_then(parse_default)
        .or_else(|| body.scalar("acl_directory_inherit").and_then(parse_default));
    let mut default_aces = body.list("specify_default_aces");
    if default_aces.is_empty() {
        default_aces = body.list("specify_inherit_aces");
    }
    let is_dir = meta.kind == FileKind::Dir;
    let reference = p.reference();

    if !syntax_ok(default, is_dir, acl_type, &aces, &default_aces, &reference) {
        crate::error!("Syntax error in access control list for '{shown}'");
        crate::error!("{reference}");
        v.failed();
        return;
    }
    if acl_type == Type::Ntfs {
        crate::error!("NTFS ACLs are not supported on this system");
        v.failed();
        return;
    }
    if !check_aces(act, &aces, method, shown, target, AclKind::Access, v) {
        crate::error!("{reference}");
        return;
    }
    if !is_dir {
        return;
    }
    let done = match default.unwrap_or(Default::NoChange) {
        Default::NoChange => {
            crate::debug!("No change required for '{shown}' with acl_default=nochange");
            v.kept_step();
            true
        }
        Default::Specify => check_aces(
            act,
            &default_aces,
            method,
            shown,
            target,
            AclKind::Default,
            v,
        ),
        Default::Access => default_as_access(act, shown, target, v),
        Default::Clear => clear_default(act, shown, target, v),
    };
    if !done {
        crate::error!("{reference}");
    }
}

// ---------------------------------------------------------------- syntax

/// cf-agent's check of the whole body before anything is read: each
/// problem said in its words, with the promise's reference where it gives
/// one.
fn syntax_ok(
    default: Option<Default>,
    is_dir: bool,
    acl_type: Type,
    aces: &[String],
    default_aces: &[String],
    reference: &str,
) -> bool {
    if default.is_some() && !is_dir {
        crate::error!("acl_default can only be set on directories.");
        crate::error!("{reference}");
        return false;
    }
    let (nperms, deny, mask) = match acl_type {
        Type::Generic => ("", false, false),
        Type::Posix => ("rwx", false, true),
        Type::Ntfs => ("drtTwabBpcoD", true, false),
    };
    let mut valid = true;
    // As in cf-agent, the verdict is the last list's: a valid default
    // list after a bad access one passes (the bad entry fails later).
    for list in [aces, default_aces] {
        if list.is_empty() {
            continue;
        }
        valid = true;
        for ace in list {
            if !ace_ok(ace, nperms, deny, mask, reference) {
                crate::error!("ACL: The ACE '{ace}' contains errors");
                crate::error!("{reference}");
                valid = false;
                break;
            }
        }
    }
    valid
}

fn ace_ok(ace: &str, nperms: &str, deny: bool, mask: bool, reference: &str) -> bool {
    let (rest, has_id) = if let Some(r) = ace.strip_prefix("user:") {
        (r, true)
    } else if let Some(r) = ace.strip_prefix("group:") {
        (r, true)
    } else if let Some(r) = ace.strip_prefix("all:") {
        (r, false)
    } else if let Some(r) = ace.strip_prefix("mask:") {
        if !mask {
            crate::error!("This ACL type does not support mask ACE.");
            crate::error!("{reference}");
            return false;
        }
        (r, false)
    } else {
        crate::error!("ACL: ACE '{ace}' does not start with user:/group:/all");
        crate::error!("{reference}");
        return false;
    };
    let mut rest = rest;
    if has_id {
        if rest.starts_with(':') {
            crate::error!("ACL: ACE '{ace}': id cannot be empty or contain ':'");
            return false;
        }
        // The id is at least one character, whatever it is.
        let mut chars = rest.char_indices().skip(1);
        match chars.find(|&(_, c)| c == ':') {
            Some((i, _)) if !rest.is_empty() => rest = &rest[i + 1..],
            _ => {
                crate::error!("ACL: Nothing following id string in ACE '{ace}'");
                return false;
            }
        }
    }
    let Some(after) = mode_ok(rest, nperms, reference) else {
        crate::error!("ACL: Malformed mode-string in ACE '{ace}'");
        crate::error!("{reference}");
        return false;
    };
    let Some(perm_type) = after.strip_prefix(':') else {
        return true;
    };
    let permt_ok = match perm_type {
        "allow" => true,
        "deny" if deny => true,
        "deny" => {
            crate::error!("Deny permission not supported by this ACL type");
            crate::error!("{reference}");
            false
        }
        _ => false,
    };
    if !permt_ok {
        crate::error!("ACL: Malformed perm_type syntax in ACE '{ace}'");
    }
    permt_ok
}

/// Checks a mode up to the `:` or the end; what follows it.
fn mode_ok<'a>(mode: &'a str, nperms: &str, reference: &str) -> Option<&'a str> {
    let b = mode.as_bytes();
    let mut i = 0;
    if b.is_empty() || b[0] == b':' {
        return Some(mode);
    }
    let skip = |i: &mut usize, set: &str| {
        while *i < b.len() && set.as_bytes().contains(&b[*i]) {
            *i += 1;
        }
    };
    loop {
        skip(&mut i, "=+-");
        skip(&mut i, "rwx");
        if b.get(i) == Some(&b'(') {
            i += 1;
            skip(&mut i, nperms);
            if b.get(i) == Some(&b')') {
                i += 1;
            } else {
                let c = b.get(i).map_or(String::new(), |&c| (c as char).to_string());
                crate::error!(
                    "ACL: Invalid native permission '{c}', or missing native end separator"
                );
                crate::error!("{reference}");
                return None;
            }
        }
        match b.get(i) {
            None | Some(b':') => return Some(&mode[i..]),
            Some(b',') => i += 1,
            Some(_) => {
                crate::error!("ACL: Mode string contains invalid characters");
                crate::error!("{reference}");
                return None;
            }
        }
    }
}

// ------------------------------------------------------------ arithmetic

/// The entry an ACE names, and what follows the name (`:MODE...`); the
/// name lookup's failure said in cf-agent's words.
fn parse_entity(ace: &str) -> Result<(AclTag, u32, &str), String> {
    let named = |rest: &str| -> (String, usize) {
        let end = rest.find(':').unwrap_or(rest.len());
        (rest[..end].to_string(), end)
    };
    if let Some(rest) = ace.strip_prefix("user:") {
        let (id, end) = named(rest);
        let rest = &rest[end..];
        if id == "*" {
            return Ok((AclTag::UserObj, 0, rest));
        }
        match uid_of_known(&id) {
            Some(uid) => Ok((AclTag::User, uid, rest)),
            None => {
                crate::error!("Could not get UID for user '{id}', (getpwnam: not found)");
                Err(rest.to_string())
            }
        }
    } else if let Some(rest) = ace.strip_prefix("group:") {
        let (id, end) = named(rest);
        let rest = &rest[end..];
        if id == "*" {
            return Ok((AclTag::GroupObj, 0, rest));
        }
        match gid_of_known(&id) {
            Some(gid) => Ok((AclTag::Group, gid, rest)),
            None => {
                crate::error!("Could not get GID for group '{id}', (getgrnam: not found)");
                Err(rest.to_string())
            }
        }
    } else if ace.starts_with("all:") {
        Ok((AclTag::Other, 0, &ace[3..]))
    } else if ace.starts_with("mask:") {
        Ok((AclTag::Mask, 0, &ace[4..]))
    } else {
        crate::error!("ACE does not start with user:/group:/all:/mask:");
        Err(ace.to_string())
    }
}

fn perm_bit(c: u8) -> Option<u8> {
    match c {
        b'r' => Some(ACL_READ),
        b'w' => Some(ACL_WRITE),
        b'x' => Some(ACL_EXECUTE),
        _ => None,
    }
}

/// Applies a mode (up to a `:` or the end) to an entry's permissions.
fn apply_mode(mode: &str, perm: &mut u8) {
    let b = mode.as_bytes();
    if b.is_empty() || b[0] == b':' {
        *perm = 0;
        return;
    }
    let mut i = 0;
    loop {
        let add = match b.get(i) {
            Some(b'+') => {
                i += 1;
                true
            }
            Some(b'-') => {
                i += 1;
                false
            }
            c => {
                if c == Some(&b'=') {
                    i += 1;
                }
                *perm = 0;
                true
            }
        };
        let mut set = |bit: u8| {
            if add {
                *perm |= bit;
            } else {
                *perm &= !bit;
            }
        };
        while let Some(bit) = b.get(i).copied().and_then(perm_bit) {
            set(bit);
            i += 1;
        }
        if b.get(i) == Some(&b'(') {
            i += 1;
            while let Some(bit) = b.get(i).copied().and_then(perm_bit) {
                set(bit);
                i += 1;
            }
            i += 1;
        }
        if b.get(i) == Some(&b',') {
            i += 1;
        } else {
            return;
        }
    }
}

fn find(list: &[AclEntry], tag: AclTag, id: u32) -> Option<usize> {
    list.iter()
        .position(|e| e.tag == tag && (!tag.qualified() || e.id == id))
}

/// libacl's `acl_calc_mask`: the mask is the union of the group class.
fn calc_mask(list: &mut Vec<AclEntry>) {
    let perm = list
        .iter()
        .filter(|e| matches!(e.tag, AclTag::GroupObj | AclTag::User | AclTag::Group))
        .fold(0, |acc, e| acc | e.perm);
    match find(list, AclTag::Mask, 0) {
        Some(i) => list[i].perm = perm,
        None => list.push(AclEntry {
            tag: AclTag::Mask,
            id: 0,
            perm,
        }),
    }
}

/// Same entries, each with the same permissions, in any order.
fn equal(a: &[AclEntry], b: &[AclEntry]) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|e| find(b, e.tag, e.id).is_some_and(|i| b[i].perm == e.perm))
}

fn sorted(list: &[AclEntry]) -> Vec<AclEntry> {
    let mut s = list.to_vec();
    s.sort_by_key(|e| (e.tag, e.id));
    s
}

/// libacl's `acl_check` over a sorted list: the index where it went wrong
/// and why, in `acl_error`'s words.
fn check_valid(list: &[AclEntry]) -> Result<(), (usize, &'static str)> {
    const MULTI: &str = "Multiple entries of same type";
    const DUPLICATE: &str = "Duplicate entries";
    const MISSING: &str = "Missing or wrong entry";
    #[derive(PartialEq, PartialOrd)]
    enum State {
        UserObj,
        User,
        Group,
        Other,
        Done,
    }
    let mut state = State::UserObj;
    let mut needs_mask = false;
    let mut next_id: u64 = 0;
    for (i, e) in list.iter().enumerate() {
        match e.tag {
            AclTag::UserObj => {
                if state != State::UserObj {
                    return Err((i, MULTI));
                }
                state = State::User;
                next_id = 0;
            }
            AclTag::User | AclTag::Group => {
                let want = if e.tag == AclTag::User {
                    State::User
                } else {
                    State::Group
                };
                if state != want {
                    return Err((i, MISSING));
                }
                if u64::from(e.id) < next_id {
                    return Err((i, DUPLICATE));
                }
                next_id = u64::from(e.id) + 1;
                needs_mask = true;
            }
            AclTag::GroupObj => {
                if state == State::User {
                    state = State::Group;
                    next_id = 0;
                } else if state >= State::Group {
                    return Err((i, MULTI));
                } else {
                    return Err((i, MISSING));
                }
            }
            AclTag::Mask => {
                if state == State::Group {
                    state = State::Other;
                } else if state >= State::Other {
                    return Err((i, MULTI));
                } else {
                    return Err((i, MISSING));
                }
            }
            AclTag::Other => {
                if state == State::Other || (state == State::Group && !needs_mask) {
                    state = State::Done;
                } else if state == State::Done {
                    return Err((i, MULTI));
                } else {
                    return Err((i, MISSING));
                }
            }
        }
    }
    if state != State::Done {
        return Err((list.len(), MISSING));
    }
    Ok(())
}

/// The list as `acl_to_any_text(acl, NULL, ',', 0)` writes it.
fn text(list: &[AclEntry]) -> String {
    crate::host::acl::text_entries(list).join(",")
}

// ----------------------------------------------------------------- steps

/// One list (access or default) brought to what the ACEs say; false when
/// the promise failed here (said already).
fn check_aces(
    act: &mut ActContext<'_>,
    aces: &[String],
    method: Method,
    shown: &str,
    target: &Path,
    kind: AclKind,
    v: &mut Verdict,
) -> bool {
    let name = kind_name(kind);
    let existing = match act.host.posix_acl(target, kind) {
        Ok(l) => l,
        Err(e) => {
            crate::error!(
                "No {name} ACL for '{shown}' could be read. (acl_get_file: {})",
                crate::host::strerror(&e)
            );
            v.failed();
            return false;
        }
    };
    let mut new = match method {
        Method::Append => existing.clone(),
        Method::Overwrite => Vec::new(),
    };
    let mut has_mask = false;
    for ace in aces {
        let (tag, id, rest) = match parse_entity(ace) {
            Ok(t) => t,
            Err(rest) => {
                crate::error!("ACL: Error parsing entity in '{rest}'");
                v.failed();
                return false;
            }
        };
        if tag == AclTag::Mask {
            has_mask = true;
        }
        let i = match find(&new, tag, id) {
            Some(i) => i,
            None => {
                new.push(AclEntry { tag, id, perm: 0 });
                new.len() - 1
            }
        };
        let Some(mode) = rest.strip_prefix(':') else {
            crate::error!("ACL: No separator before mode-string '{rest}'");
            v.failed();
            return false;
        };
        apply_mode(mode, &mut new[i].perm);
    }
    if !has_mask {
        calc_mask(&mut new);
    }
    let new = sorted(&new);
    if equal(&existing, &new) {
        crate::debug!("'{name}' ACL on '{shown}' needs no modification.");
        v.kept_step();
        return true;
    }
    let listed = text(&new);
    let change = Change::new("acl", shown)
        .before(text(&sorted(&existing)))
        .after(listed.clone())
        .done(format!("{name} ACL on '{shown}' successfully changed"))
        .should(format!("Should update ACL {name} on file '{shown}'"));
    let made = act.change(change, |h| {
        if let Err((at, why)) = check_valid(&new) {
            return Err(format!(
                "Invalid ACL in '{listed}' at index {at} (acl_check: {why})"
            ));
        }
        h.set_posix_acl(target, kind, &new).map_err(|e| {
            format!(
                "Error setting new {name} ACL({listed}) on file '{shown}' (acl_set_file: {}), are required ACEs present ?",
                crate::host::strerror(&e)
            )
        })
    });
    let mut ok = true;
    v.settle(made, |e| {
        crate::error!("{e}");
        ok = false;
    });
    ok
}

/// `acl_default => "access"`: the default list made the access list.
fn default_as_access(
    act: &mut ActContext<'_>,
    shown: &str,
    target: &Path,
    v: &mut Verdict,
) -> bool {
    let read = |act: &mut ActContext<'_>, kind: AclKind| act.host.posix_acl(target, kind);
    let access = match read(act, AclKind::Access) {
        Ok(l) => l,
        Err(e) => {
            crate::error!(
                "Could not find an ACL for '{shown}'. (acl_get_file: {})",
                crate::host::strerror(&e)
            );
            v.failed();
            return false;
        }
    };
    let default = match read(act, AclKind::Default) {
        Ok(l) => l,
        Err(e) => {
            crate::error!(
                "Could not find default ACL for '{shown}'. (acl_get_file: {})",
                crate::host::strerror(&e)
            );
            v.failed();
            return false;
        }
    };
    if equal(&access, &default) {
        crate::debug!("Default ACL on '{shown}' as promised");
        v.kept_step();
        return true;
    }
    let change = Change::new("acl", shown)
        .before(text(&sorted(&default)))
        .after(text(&sorted(&access)))
        .done(format!(
            "Default ACL on '{shown}' successfully copied from access ACL."
        ))
        .should(format!(
            "Should copy default ACL on '{shown}' from access ACL"
        ));
    let made = act.change(change, |h| {
        h.set_posix_acl(target, AclKind::Default, &access)
            .map_err(|e| {
                format!(
                    "Could not set default ACL to access on '{shown}'. (acl_set_file: {})",
                    crate::host::strerror(&e)
                )
            })
    });
    let mut ok = true;
    v.settle(made, |e| {
        crate::error!("{e}");
        ok = false;
    });
    ok
}

/// `acl_default => "clear"`: no default list.
fn clear_default(act: &mut ActContext<'_>, shown: &str, target: &Path, v: &mut Verdict) -> bool {
    let default = match act.host.posix_acl(target, AclKind::Default) {
        Ok(l) => l,
        Err(e) => {
            crate::error!(
                "Unable to read default acl for '{shown}'. (acl_get_file: {})",
                crate::host::strerror(&e)
            );
            v.failed();
            return false;
        }
    };
    if default.is_empty() {
        crate::debug!("Default ACL on '{shown}' as promised");
        v.kept_step();
        return true;
    }
    let change = Change::new("acl", shown)
        .before(text(&sorted(&default)))
        .after("")
        .done(format!("Default ACL on '{shown}' successfully cleared"))
        .should(format!("Should clean default ACL on '{shown}'"));
    let made = act.change(change, |h| {
        h.set_posix_acl(target, AclKind::Default, &[]).map_err(|e| {
            format!(
                "Could not reset ACL for '{shown}'. (acl_set_file: {})",
                crate::host::strerror(&e)
            )
        })
    });
    // cf-agent says the list cleared even when clearing it failed.
    let mut ok = true;
    v.settle(made, |e| {
        crate::error!("{e}");
        ok = false;
    });
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perm_after(mode: &str, start: u8) -> u8 {
        let mut p = start;
        apply_mode(mode, &mut p);
        p
    }

    #[test]
    fn modes_set_add_and_remove() {
        assert_eq!(perm_after("rw", 1), 6);
        assert_eq!(perm_after("=r", 7), 4);
        assert_eq!(perm_after("+w", 4), 6);
        assert_eq!(perm_after("-x", 7), 6);
        assert_eq!(perm_after("+rw,-x", 1), 6);
        assert_eq!(perm_after("", 7), 0);
        assert_eq!(perm_after("(rx)", 2), 5);
        assert_eq!(perm_after("rw:allow", 0), 6);
    }

    #[test]
    fn syntax_follows_cf_agent() {
        assert!(ace_ok("user:bob:rw", "", false, false, ""));
        assert!(ace_ok("all:+r,-w", "", false, false, ""));
        assert!(ace_ok("user:*:rw:allow", "", false, false, ""));
        assert!(!ace_ok("user:*:rw:deny", "rwx", false, true, ""));
        assert!(!ace_ok("mask:rw", "", false, false, ""));
        assert!(ace_ok("mask:rw", "rwx", false, true, ""));
        assert!(!ace_ok("user::rw", "", false, false, ""));
        assert!(!ace_ok("user:bob", "", false, false, ""));
        assert!(!ace_ok("user:bob:(rw)", "", false, false, ""));
        assert!(ace_ok("user:bob:(rw)", "rwx", false, true, ""));
    }

    #[test]
    fn acl_check_as_libacl() {
        let e = |tag, id, perm| AclEntry { tag, id, perm };
        let bad = [e(AclTag::UserObj, 0, 6), e(AclTag::Mask, 0, 0)];
        assert_eq!(check_valid(&bad), Err((1, "Missing or wrong entry")));
        let good = [
            e(AclTag::UserObj, 0, 6),
            e(AclTag::User, 5, 6),
            e(AclTag::GroupObj, 0, 4),
            e(AclTag::Mask, 0, 6),
            e(AclTag::Other, 0, 4),
        ];
        assert_eq!(check_valid(&good), Ok(()));
        assert_eq!(
            text(&[e(AclTag::UserObj, 0, 6), e(AclTag::Mask, 0, 0)]),
            "user::rw-,mask::---"
        );
    }
}
