//! `perms` bodies: modes in octal or symbolic form, owners and groups.

use std::ffi::CString;

/// A mode change as cf-agent reads one: bits to set (`plus`) and bits to
/// clear (`minus`), gathered over the comma-separated clauses of an octal
/// or symbolic mode (`644`, `u=rw,go=r`, `a+x`, `o-rwx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModeSpec {
    plus: u32,
    minus: u32,
}

/// The file type bits `stat` reports, which a mode cannot set.
const S_IFMT: u32 = 0o170000;

impl ModeSpec {
    /// Parses a mode as cf-agent does: an octal number (its file type
    /// bits dropped, at most 7777), or clauses `WHO OP PERMS` where WHO is
    /// some of `ugoa`, OP one of `+-=` and PERMS some of `rwxst`.
    pub fn parse(s: &str) -> Result<ModeSpec, String> {
        let mut spec = ModeSpec::default();
        let clauses: Vec<&str> = s.split(',').collect();
        for (i, part) in clauses.iter().enumerate() {
            let (op, affected, value) = parse_clause(part).ok_or_else(|| {
                format!("'{s}' is not a valid mode (octal like 0644, or symbolic like u=rw,go=r)")
            })??;
            if i + 1 == clauses.len() && value == 0 && s != "0000" && s != "000" {
                return Err(format!("mode string '{s}' is incomplete"));
            }
            match op {
                '+' => spec.plus |= value,
                '-' => spec.minus |= value,
                _ => {
                    spec.plus |= value;
                    spec.minus |= !value & 0o7777 & affected;
                }
            }
        }
        Ok(spec)
    }

    /// The mode `mode` becomes: the bits to set set, then those to clear
    /// cleared.
    pub fn apply(&self, mode: u32) -> u32 {
        ((mode & 0o7777) | self.plus) & !self.minus
    }

    /// The mode cf-agent gives a file it creates with this mode promised.
    pub fn creation_mode(&self) -> u32 {
        self.plus & !self.minus & 0o7777
    }
}

/// One clause: its operator, the bits its WHO covers, and its PERMS (or
/// octal value); `None` when it is not a mode, an error when the value is
/// out of range.
#[allow(clippy::type_complexity)]
fn parse_clause(part: &str) -> Option<Result<(char, u32, u32), String>> {
    if !part.is_empty() && part.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        let v = u32::from_str_radix(part, 8).ok()? & !S_IFMT;
        if v > 0o7777 {
            return Some(Err(format!("mode value '{part}' is too big")));
        }
        return Some(Ok(('=', 0o7777, v)));
    }
    let op_at = part.find(['+', '-', '='])?;
    let (who, rest) = part.split_at(op_at);
    let op = rest.chars().next()?;
    let mut affected = 0u32;
    for c in who.chars() {
        affected |= match c {
            'u' => 0o4700,
            'g' => 0o2070,
            'o' => 0o0007,
            'a' => 0o7777,
            _ => return None,
        };
    }
    let mut value = 0u32;
    for c in rest[1..].chars() {
        value |= match c {
            'r' => 0o444 & affected,
            'w' => 0o222 & affected,
            'x' => 0o111 & affected,
            's' => 0o6000 & affected,
            // cf-agent sets the sticky bit whoever the clause names.
            't' => 0o1000,
            _ => return None,
        };
    }
    Some(Ok((op, affected, value)))
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

/// A user's uid by name, or by number when that user exists (as
/// cf-agent's lookup through `getent passwd` finds it).
pub fn uid_of_known(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: as in `uid_of`.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if !pw.is_null() {
        // SAFETY: pw is non-null.
        return Some(unsafe { (*pw).pw_uid });
    }
    let n = name.parse::<u32>().ok()?;
    // SAFETY: as for getpwnam.
    (!unsafe { libc::getpwuid(n) }.is_null()).then_some(n)
}

/// A group's gid by name, or by number when that group exists.
pub fn gid_of_known(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: as in `gid_of`.
    let gr = unsafe { libc::getgrnam(c.as_ptr()) };
    if !gr.is_null() {
        // SAFETY: gr is non-null.
        return Some(unsafe { (*gr).gr_gid });
    }
    let n = name.parse::<u32>().ok()?;
    // SAFETY: as for getgrnam.
    (!unsafe { libc::getgrgid(n) }.is_null()).then_some(n)
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
        assert_eq!(ModeSpec::parse("u+s").unwrap().apply(0o755), 0o4755);
        // The file type bits of a number are dropped (10_files/01_create/perms-mode.cf).
        assert_eq!(ModeSpec::parse("13400").unwrap().apply(0o600), 0o3400);
        assert_eq!(ModeSpec::parse("22222").unwrap().apply(0o600), 0o2222);
        // A new file gets only what the mode sets.
        assert_eq!(ModeSpec::parse("o=x").unwrap().creation_mode(), 0o001);
        assert_eq!(ModeSpec::parse("o=x").unwrap().apply(0o600), 0o601);
        // Without WHO a clause covers nothing: cf-agent calls it incomplete.
        assert!(ModeSpec::parse("+x").is_err());
        assert!(ModeSpec::parse("0").is_err());
        assert_eq!(ModeSpec::parse("000").unwrap().apply(0o644), 0);
        assert!(ModeSpec::parse("u=q").is_err());
        assert!(ModeSpec::parse("99999").is_err());
        assert_eq!(rx_for_dirs(0o640), 0o750);
    }

    #[test]
    fn names_resolve() {
        assert_eq!(uid_of("root"), Some(0));
        assert_eq!(gid_of("0"), Some(0));
        assert_eq!(uid_of("no-such-user-here"), None);
    }
}
