//! Time classes (`Hr17`, `Min45_50`, `GMT_Monday`...), `sys.date`,
//! `sys.cdate`, `sys.systime`, `sys.sysday` and `sys.uptime`.
//!
//! Calendar arithmetic is done here (days to civil date); only the local
//! time zone offset comes from the C library's `localtime_r`, the call
//! cf-agent makes, so `TZ` and `/etc/localtime` are honoured the same way.

use super::Collector;
use super::root::Root;
use crate::values::canon::canonify;
use crate::values::value::{DataType, Value};
use std::time::{SystemTime, UNIX_EPOCH};

const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const SHIFTS: [&str; 4] = ["Night", "Morning", "Afternoon", "Evening"];

/// A broken-down time, like C's `struct tm` but with a real year and a
/// 1-based month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tm {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    /// 0 = Monday .. 6 = Sunday
    pub weekday: u32,
}

/// Converts seconds since the epoch (already shifted to the wanted zone)
/// to a civil date and time.
pub(crate) fn civil(secs: i64) -> Tm {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days to year/month/day in the proleptic Gregorian calendar, counting
    // eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    // 1970-01-01 was a Thursday (3 when Monday is 0).
    let weekday = (days + 3).rem_euclid(7) as u32;
    Tm {
        year,
        month,
        day,
        hour: (rem / 3600) as u32,
        min: (rem % 3600 / 60) as u32,
        sec: (rem % 60) as u32,
        weekday,
    }
}

/// The moment of the run in UTC and local time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// Seconds since the epoch.
    pub epoch: i64,
    pub local: Tm,
    pub gmt: Tm,
}

impl Clock {
    pub(crate) fn new(now: SystemTime, utc_offset: Option<i64>) -> Clock {
        let epoch = match now.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_secs() as i64,
            Err(e) => -(e.duration().as_secs() as i64),
        };
        let offset = utc_offset.unwrap_or_else(|| c_library_offset(epoch));
        Clock {
            epoch,
            local: civil(epoch + offset),
            gmt: civil(epoch),
        }
    }
}

/// The local time zone's offset from UTC at `epoch`, from `localtime_r`.
fn c_library_offset(epoch: i64) -> i64 {
    let t = epoch as libc::time_t;
    // SAFETY: `tm` is plain data that localtime_r fills in; both pointers
    // are valid for the duration of the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::localtime_r(&t, &mut tm) };
    if r.is_null() { 0 } else { tm.tm_gmtoff as i64 }
}

/// The time class names for one broken-down time, with a prefix (`""` for
/// local time, `GMT_` for UTC).
pub(crate) fn time_class_names(prefix: &str, t: &Tm) -> Vec<String> {
    let quarter = t.min / 15 + 1;
    let interval = t.min / 5 * 5;
    vec![
        format!("{prefix}Lcycle_{}", t.year.rem_euclid(3)),
        format!("{prefix}Yr{:04}", t.year),
        format!("{prefix}{}", MONTHS[(t.month - 1) as usize]),
        format!("{prefix}{}", DAYS[t.weekday as usize]),
        format!("{prefix}Day{}", t.day),
        format!("{prefix}{}", SHIFTS[(t.hour / 6) as usize]),
        format!("{prefix}Hr{:02}", t.hour),
        format!("{prefix}Hr{}", t.hour),
        format!("{prefix}Q{quarter}"),
        format!("{prefix}Hr{:02}_Q{quarter}", t.hour),
        format!("{prefix}Min{:02}", t.min),
        format!("{prefix}Min{:02}_{:02}", interval, (interval + 5) % 60),
    ]
}

pub(crate) fn time_classes(c: &mut Collector, clock: &Clock) {
    let tags = "time_based,cfengine_internal_time_based_autoremove,source=agent";
    for name in time_class_names("", &clock.local)
        .into_iter()
        .chain(time_class_names("GMT_", &clock.gmt))
    {
        c.class(&name, tags);
    }
}

/// `sys.systime`, `sys.sysday` and `sys.uptime` (minutes since boot, from
/// `/proc/uptime`, which is what sysinfo(2) reports).
pub(crate) fn time_vars(c: &mut Collector, clock: &Clock, root: &Root) {
    let int = |v: i64| Value::Scalar(v.to_string());
    c.var(
        "sys",
        "systime",
        int(clock.epoch),
        DataType::Int,
        "time_based,source=agent",
    );
    c.var(
        "sys",
        "sysday",
        int(clock.epoch.div_euclid(86_400)),
        DataType::Int,
        "time_based,source=agent",
    );
    if let Some(secs) = root.read("/proc/uptime").and_then(|s| parse_uptime(&s)) {
        c.var(
            "sys",
            "uptime",
            int(secs / 60),
            DataType::Int,
            "inventory,time_based,source=agent,attribute_name=Uptime minutes",
        );
    }
}

/// Whole seconds since boot from the text of `/proc/uptime`.
pub(crate) fn parse_uptime(text: &str) -> Option<i64> {
    let first = text.split_whitespace().next()?;
    let whole = first.split('.').next()?;
    whole.parse().ok()
}

/// C's `ctime` without the newline: `Mon Nov  3 02:15:14 2026`.
pub(crate) fn ctime(t: &Tm) -> String {
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        &DAYS[t.weekday as usize][..3],
        &MONTHS[(t.month - 1) as usize][..3],
        t.day,
        t.hour,
        t.min,
        t.sec,
        t.year
    )
}

pub(crate) fn date_vars(c: &mut Collector, clock: &Clock) {
    let date = ctime(&clock.local);
    c.sys("cdate", canonify(&date), "time_based,source=agent");
    c.sys("date", date, "time_based,source=agent");
}
