//! `perms` bodies: modes in octal or symbolic form, owners and groups.

use std::ffi::{CStr, CString};

/// A mode change: bits to set, bits to clear, or an absolute mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModeSpec {
    clauses: Vec<Clause>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Clause {
    Absolute(u32),
    Add(u32),
    Remove(u32),
    /// `u=rw`: clear the `mask` bits, then set `bits`.
    Assign {
        mask: u32,
        bits: u32,
    },
}

impl ModeSpec {
    /// Parses `644`, `0644`, `u=rw,go=r`, `a+x`, `o-rwx`, `+x`.
    pub fn parse(s: &str) -> Result<ModeSpec, String> {
        let s = s.trim();
        if !s.is_empty() && s.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            let m = u32::from_str_radix(s, 8).map_err(|e| format!("mode '{s}': {e}"))?;
            if m > 0o7777 {
                return Err(format!("mode '{s}' is larger than 7777"));
            }
            return Ok(ModeSpec {
                clauses: vec![Clause::Absolute(m)],
            });
        }
        let mut clauses = Vec::new();
        for part in s.split(',') {
            clauses.push(parse_symbolic(part).ok_or_else(|| {
                format!(
                    "'{part}' is not a valid mode (octal like 0644, or symbolic like u=rw,go=r)"
                )
            })?);
        }
        if clauses.is_empty() {
            return Err("empty mode".into());
        }
        Ok(ModeSpec { clauses })
    }

    pub fn apply(&self, mut mode: u32) -> u32 {
        for c in &self.clauses {
            mode = match *c {
                Clause::Absolute(m) => m,
                Clause::Add(b) => mode | b,
                Clause::Remove(b) => mode & !b,
                Clause::Assign { mask, bits } => (mode & !mask) | bits,
            };
        }
        mode & 0o7777
    }
}

fn parse_symbolic(part: &str) -> Option<Clause> {
    let op_at = part.find(['+', '-', '='])?;
    let (who, rest) = part.split_at(op_at);
    let op = rest.as_bytes()[0];
    let perms = &rest[1..];
    let mut who_mask = 0u32;
    for c in who.chars() {
        who_mask |= match c {
            'u' => 0o4700,
            'g' => 0o2070,
            'o' => 0o1007,
            'a' => 0o7777,
            _ => return None,
        };
    }
    if who.is_empty() {
        who_mask = 0o7777;
    }
    let mut bits = 0u32;
    for c in perms.chars() {
        bits |= match c {
            'r' => 0o444,
            'w' => 0o222,
            'x' => 0o111,
            's' => 0o6000,
            't' => 0o1000,
            _ => return None,
        };
    }
    let bits = bits & who_mask;
    Some(match op {
        b'+' => Clause::Add(bits),
        b'-' => Clause::Remove(bits),
        _ => Clause::Assign {
            mask: who_mask & 0o777 | (who_mask & 0o7000),
            bits,
        },
    })
}

/// With `rxdirs`, a directory gets `x` wherever it has `r`.
pub fn rx_for_dirs(mode: u32) -> u32 {
    mode | ((mode & 0o444) >> 2)
}

/// A user name or number to a uid.
pub fn uid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Some(n);
    }
    let c = CString::new(name).ok()?;
    // SAFETY: getpwnam returns null or a pointer to static storage valid
    // until the next call; we copy the uid out at once.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        None
    } else {
        // SAFETY: pw is non-null.
        Some(unsafe { (*pw).pw_uid })
    }
}

/// A group name or number to a gid.
pub fn gid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Some(n);
    }
    let c = CString::new(name).ok()?;
    // SAFETY: as for getpwnam.
    let gr = unsafe { libc::getgrnam(c.as_ptr()) };
    if gr.is_null() {
        None
    } else {
        // SAFETY: gr is non-null.
        Some(unsafe { (*gr).gr_gid })
    }
}

/// The user name of a uid, for messages.
pub fn user_name(uid: u32) -> String {
    // SAFETY: as for getpwnam; the name is copied at once.
    let pw = unsafe { libc::getpwuid(uid) };
    if pw.is_null() {
        return uid.to_string();
    }
    // SAFETY: pw and its pw_name are valid C data.
    unsafe { CStr::from_ptr((*pw).pw_name) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_and_symbolic() {
        assert_eq!(ModeSpec::parse("644").unwrap().apply(0o600), 0o644);
        assert_eq!(ModeSpec::parse("0755").unwrap().apply(0), 0o755);
        assert_eq!(ModeSpec::parse("u=rw,go=r").unwrap().apply(0o777), 0o644);
        assert_eq!(ModeSpec::parse("a+x").unwrap().apply(0o644), 0o755);
        assert_eq!(ModeSpec::parse("o-rwx").unwrap().apply(0o777), 0o770);
        assert_eq!(ModeSpec::parse("+x").unwrap().apply(0o600), 0o711);
        assert_eq!(ModeSpec::parse("u+s").unwrap().apply(0o755), 0o4755);
        assert!(ModeSpec::parse("u=q").is_err());
        assert!(ModeSpec::parse("99999").is_err());
        assert_eq!(rx_for_dirs(0o640), 0o750);
    }

    #[test]
    fn names_resolve() {
        assert_eq!(uid_of("root"), Some(0));
        assert_eq!(gid_of("0"), Some(0));
        assert_eq!(uid_of("no-such-user-here"), None);
        assert_eq!(user_name(0), "root");
    }
}
