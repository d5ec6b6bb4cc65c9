//! The clock and the C library's view of local time.
//!
//! Dates go through the C library's `mktime`, `localtime_r` and `strftime`
//! so that time zones, daylight saving and the formats behave exactly as
//! they do for cf-agent on the same host. A run reads the time through
//! [`Clock`], which a test can fix.

/// Where a run reads the time: the system's clock, or a fixed second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Clock {
    #[default]
    System,
    Fixed(i64),
}

impl Clock {
    /// Seconds since the epoch.
    pub fn now_secs(self) -> i64 {
        match self {
            Clock::System => now_secs(),
            Clock::Fixed(t) => t,
        }
    }
}

/// Seconds since the epoch on the system's clock (0 for a clock set before
/// it).
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Nanoseconds since the epoch on the system's clock (0 for a clock set
/// before it): the time stamp of run events.
pub fn now_unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

pub fn empty_tm() -> libc::tm {
    // SAFETY: `tm` is a plain C struct of integers and a pointer; all-zero
    // is a valid value for it.
    unsafe { std::mem::zeroed() }
}

/// `mktime` of a broken-down local time; fields out of range are
/// normalised as C does.
pub fn mktime(tm: &mut libc::tm) -> i64 {
    tm.tm_isdst = -1;
    // SAFETY: `tm` is a valid, exclusively borrowed struct.
    unsafe { libc::mktime(tm) as i64 }
}

pub fn localtime(t: i64) -> Option<libc::tm> {
    let mut tm = empty_tm();
    let tt = t as libc::time_t;
    // SAFETY: both pointers are valid for the call; localtime_r is
    // reentrant.
    let r = unsafe { libc::localtime_r(&tt, &mut tm) };
    (!r.is_null()).then_some(tm)
}

pub fn gmtime(t: i64) -> Option<libc::tm> {
    let mut tm = empty_tm();
    let tt = t as libc::time_t;
    // SAFETY: as for localtime_r.
    let r = unsafe { libc::gmtime_r(&tt, &mut tm) };
    (!r.is_null()).then_some(tm)
}

/// `t` (seconds since the epoch) in local time, formatted by `strftime`.
pub fn local_text(t: i64, fmt: &str) -> Option<String> {
    format_tm(fmt, &localtime(t)?)
}

/// Formats with the C library; `None` when the result is empty (as
/// cf-agent, which then fails the call).
pub fn format_tm(fmt: &str, tm: &libc::tm) -> Option<String> {
    if fmt.is_empty() || fmt.contains('\0') {
        return None;
    }
    let cfmt = std::ffi::CString::new(fmt).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: the buffer is writable for its length, the format is a valid
    // C string and `tm` a valid struct.
    let n = unsafe {
        libc::strftime(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            cfmt.as_ptr(),
            tm,
        )
    };
    if n == 0 {
        return None;
    }
    buf.truncate(n);
    Some(String::from_utf8_lossy(&buf).into_owned())
}
