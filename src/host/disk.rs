//! How full a file system is (statvfs), as `df` and cf-agent count it.

use std::path::Path;

/// The space of the file system holding a path, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    pub total: u64,
    /// Taken: the blocks not free (root's reserve counts as free here).
    pub used: u64,
    /// Free for ordinary users.
    pub avail: u64,
}

impl DiskUsage {
    /// The free share in whole percent, as df and cf-agent count it:
    /// available over used plus available (root's reserve left out).
    pub fn free_percent(&self) -> i64 {
        let all = self.used + self.avail;
        if all == 0 {
            return 100;
        }
        (self.avail as f64 * 100.0 / all as f64) as i64
    }
}

impl super::Host {
    /// The space of the file system holding `policy_path`.
    pub fn disk_usage(&self, policy_path: &Path) -> std::io::Result<DiskUsage> {
        use std::os::unix::ffi::OsStrExt;
        let real = self.map(policy_path);
        let c = std::ffi::CString::new(real.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: statvfs fills the zeroed struct; c is a valid C string.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let block = st.f_frsize as u64;
        Ok(DiskUsage {
            total: st.f_blocks as u64 * block,
            used: (st.f_blocks as u64).saturating_sub(st.f_bfree as u64) * block,
            avail: st.f_bavail as u64 * block,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_share_as_df() {
        let u = DiskUsage {
            total: 264,
            used: 28,
            avail: 67,
        };
        assert_eq!(u.free_percent(), 70);
        assert!(crate::host::Host::real().disk_usage(Path::new("/")).is_ok());
    }
}
