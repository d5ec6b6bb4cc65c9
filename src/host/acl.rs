//! POSIX access control lists as Linux keeps them: the extended attributes
//! `system.posix_acl_access` and `system.posix_acl_default`, read and
//! written through a descriptor of the entry itself (never a path walked
//! again), in the kernel's format: a version word then entries of tag,
//! permissions and qualifier, each little-endian.

use super::Host;
use super::safe::{self, Final};
use rustix::fs::{OFlags, XattrFlags};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

/// Which of an entry's two lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclKind {
    /// The permissions of the entry itself.
    Access,
    /// What a directory hands its new entries.
    Default,
}

impl AclKind {
    fn xattr(self) -> &'static str {
        match self {
            AclKind::Access => "system.posix_acl_access",
            AclKind::Default => "system.posix_acl_default",
        }
    }
}

/// An entry's tag, in the order the kernel keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AclTag {
    UserObj,
    User,
    GroupObj,
    Group,
    Mask,
    Other,
}

impl AclTag {
    fn code(self) -> u16 {
        match self {
            AclTag::UserObj => 0x01,
            AclTag::User => 0x02,
            AclTag::GroupObj => 0x04,
            AclTag::Group => 0x08,
            AclTag::Mask => 0x10,
            AclTag::Other => 0x20,
        }
    }

    fn from_code(c: u16) -> Option<AclTag> {
        Some(match c {
            0x01 => AclTag::UserObj,
            0x02 => AclTag::User,
            0x04 => AclTag::GroupObj,
            0x08 => AclTag::Group,
            0x10 => AclTag::Mask,
            0x20 => AclTag::Other,
            _ => return None,
        })
    }

    /// Whether the entry names a user or group.
    pub fn qualified(self) -> bool {
        matches!(self, AclTag::User | AclTag::Group)
    }
}

/// Read, write and execute, as the low three bits.
pub const ACL_READ: u8 = 4;
pub const ACL_WRITE: u8 = 2;
pub const ACL_EXECUTE: u8 = 1;

/// One entry: the qualifier is the uid or gid of a `User` or `Group`
/// entry, 0 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclEntry {
    pub tag: AclTag,
    pub id: u32,
    pub perm: u8,
}

const VERSION: u32 = 2;
const UNDEFINED_ID: u32 = u32::MAX;

/// The entries of an extended attribute's value.
fn decode(bytes: &[u8]) -> io::Result<Vec<AclEntry>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed POSIX ACL attribute");
    if bytes.len() < 4 || !(bytes.len() - 4).is_multiple_of(8) {
        return Err(bad());
    }
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if word(&bytes[..4]) != VERSION {
        return Err(bad());
    }
    bytes[4..]
        .chunks_exact(8)
        .map(|e| {
            let tag = AclTag::from_code(u16::from_le_bytes([e[0], e[1]])).ok_or_else(bad)?;
            let perm = (u16::from_le_bytes([e[2], e[3]]) & 7) as u8;
            let id = if tag.qualified() { word(&e[4..]) } else { 0 };
            Ok(AclEntry { tag, id, perm })
        })
        .collect()
}

/// The extended attribute's value of `entries`, sorted as the kernel
/// wants them.
fn encode(entries: &[AclEntry]) -> Vec<u8> {
    let mut sorted = entries.to_vec();
    sorted.sort_by_key(|e| (e.tag, e.id));
    let mut out = VERSION.to_le_bytes().to_vec();
    for e in sorted {
        out.extend_from_slice(&e.tag.code().to_le_bytes());
        out.extend_from_slice(&u16::from(e.perm & 7).to_le_bytes());
        let id = if e.tag.qualified() {
            e.id
        } else {
            UNDEFINED_ID
        };
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

/// The access list a mode stands for when the entry has none of its own.
fn from_mode(mode: u32) -> Vec<AclEntry> {
    let perm = |shift: u32| ((mode >> shift) & 7) as u8;
    vec![
        AclEntry {
            tag: AclTag::UserObj,
            id: 0,
            perm: perm(6),
        },
        AclEntry {
            tag: AclTag::GroupObj,
            id: 0,
            perm: perm(3),
        },
        AclEntry {
            tag: AclTag::Other,
            id: 0,
            perm: perm(0),
        },
    ]
}

/// The path through which a descriptor's own inode is reached (an
/// `O_PATH` descriptor has no xattr calls of its own).
/// The entries as `acl_to_any_text(acl, NULL, ',', 0)` writes them, one
/// item each: `user::rwx`, `user:NAME:r-x` (the user's name, or its id
/// when it has none), `group::`, `group:NAME:`, `mask::`, `other::`.
pub fn text_entries(list: &[AclEntry]) -> Vec<String> {
    let perms = |p: u8| {
        let mut s = String::new();
        s.push(if p & ACL_READ != 0 { 'r' } else { '-' });
        s.push(if p & ACL_WRITE != 0 { 'w' } else { '-' });
        s.push(if p & ACL_EXECUTE != 0 { 'x' } else { '-' });
        s
    };
    list.iter()
        .map(|e| {
            let (tag, qual) = match e.tag {
                AclTag::UserObj => ("user", String::new()),
                AclTag::User => ("user", super::procs::user_name(e.id)),
                AclTag::GroupObj => ("group", String::new()),
                AclTag::Group => ("group", super::procs::group_name(e.id)),
                AclTag::Mask => ("mask", String::new()),
                AclTag::Other => ("other", String::new()),
            };
            format!("{tag}:{qual}:{}", perms(e.perm))
        })
        .collect()
}

fn proc_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd())
}

impl Host {
    /// The entry at `p` (following a final link, as cf-agent's
    /// `acl_get_file` does), opened to read or set its lists.
    fn acl_target(&self, p: &Path) -> io::Result<OwnedFd> {
        let l = self.locate(p, Final::Follow)?;
        l.open(OFlags::PATH)
    }

    /// The POSIX ACL of `p`: its access list (the one its mode stands for
    /// when it has none) or its default list (empty when it has none).
    pub fn posix_acl(&self, p: &Path, kind: AclKind) -> io::Result<Vec<AclEntry>> {
        let fd = self.acl_target(p)?;
        let mut buf = vec![0u8; 65536];
        match rustix::fs::getxattr(proc_path(&fd).as_str(), kind.xattr(), &mut buf[..]) {
            Ok(n) => decode(&buf[..n]),
            Err(rustix::io::Errno::NODATA) => match kind {
                AclKind::Access => {
                    let st = rustix::fs::fstat(&fd).map_err(safe::errno)?;
                    Ok(from_mode(st.st_mode))
                }
                AclKind::Default => Ok(Vec::new()),
            },
            Err(e) => Err(safe::errno(e)),
        }
    }

    /// Sets the POSIX ACL of `p`; an empty default list removes it. The
    /// kernel checks the list and keeps the mode's group bits in step.
    pub fn set_posix_acl(&self, p: &Path, kind: AclKind, entries: &[AclEntry]) -> io::Result<()> {
        self.before_change(p)?;
        let l = self.locate(p, Final::Follow)?;
        self.before_change_located(&l)?;
        let u = self.unlock(&l, p);
        let done = self.set_posix_acl_located(&l, kind, entries);
        self.relock(&l, p, u);
        done
    }

    fn set_posix_acl_located(
        &self,
        l: &super::safe::Located,
        kind: AclKind,
        entries: &[AclEntry],
    ) -> io::Result<()> {
        let fd = l.open(OFlags::PATH)?;
        let path = proc_path(&fd);
        if kind == AclKind::Default && entries.is_empty() {
            return match rustix::fs::removexattr(path.as_str(), kind.xattr()) {
                Ok(()) | Err(rustix::io::Errno::NODATA) => Ok(()),
                Err(e) => Err(safe::errno(e)),
            };
        }
        rustix::fs::setxattr(
            path.as_str(),
            kind.xattr(),
            &encode(entries),
            XattrFlags::empty(),
        )
        .map_err(safe::errno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_sorted() {
        let e = |tag, id, perm| AclEntry { tag, id, perm };
        let list = vec![
            e(AclTag::Other, 0, 4),
            e(AclTag::User, 7, 6),
            e(AclTag::UserObj, 0, 7),
            e(AclTag::Mask, 0, 6),
            e(AclTag::GroupObj, 0, 4),
        ];
        let bytes = encode(&list);
        assert_eq!(bytes.len(), 4 + 5 * 8);
        let back = decode(&bytes).unwrap();
        let tags: Vec<AclTag> = back.iter().map(|e| e.tag).collect();
        assert_eq!(
            tags,
            [
                AclTag::UserObj,
                AclTag::User,
                AclTag::GroupObj,
                AclTag::Mask,
                AclTag::Other
            ]
        );
        assert_eq!(back[1], e(AclTag::User, 7, 6));
        assert!(decode(&bytes[..7]).is_err());
    }

    #[test]
    fn a_mode_stands_for_three_entries() {
        let l = from_mode(0o754);
        assert_eq!(l.iter().map(|e| e.perm).collect::<Vec<_>>(), [7, 5, 4]);
    }
}
