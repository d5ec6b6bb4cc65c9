//! Time: the clock, dates built from fields, durations, formatting, and
//! the classes that depend on the time of day.
//!
//! Dates go through the C library's `mktime`, `localtime_r` and `strftime`
//! so that time zones, daylight saving and the formats behave exactly as
//! they do for cf-agent on the same host.

use super::args::Args;
use super::{FnError, FnResult, FnSpec, class_result, int_value, spec};
use crate::eval::EvalContext;
use crate::host::clock::{empty_tm, format_tm, gmtime, localtime, mktime, now_secs};
use crate::values::Value;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("now", 0, Some(0), now),
    spec("on", 6, Some(6), on),
    spec("ago", 6, Some(6), ago),
    spec("accumulated", 6, Some(6), accumulated),
    spec("laterthan", 6, Some(6), laterthan),
    spec("strftime", 3, Some(3), strftime),
    spec("splayclass", 2, Some(2), splayclass),
];

fn now(_: &mut EvalContext, _: &[Value]) -> FnResult {
    Ok(int_value(now_secs()))
}

/// The six fields of a date or a duration, largest first.
fn six(p: &Args) -> Result<[i64; 6], FnError> {
    const FIELDS: [&str; 6] = ["years", "months", "days", "hours", "minutes", "seconds"];
    let mut v = [0i64; 6];
    for (i, slot) in v.iter_mut().enumerate() {
        *slot = p.int(i, FIELDS[i])?;
    }
    Ok(v)
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// `on(year, month, day, hour, minute, second)`: a local date as seconds
/// since the epoch. As in cf-agent 3.21, month and day count from zero
/// (`on(1970,0,0,0,0,0)` is the epoch in UTC).
fn on(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("on", a);
    let [y, mo, d, h, mi, s] = six(&p)?;
    Ok(int_value(on_epoch(y, mo, d, h, mi, s)))
}

fn on_epoch(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
    let mut tm = empty_tm();
    tm.tm_year = clamp_i32(y - 1900);
    tm.tm_mon = clamp_i32(mo);
    tm.tm_mday = clamp_i32(d + 1);
    tm.tm_hour = clamp_i32(h);
    tm.tm_min = clamp_i32(mi);
    tm.tm_sec = clamp_i32(s);
    mktime(&mut tm)
}

/// `ago(years, months, days, hours, minutes, seconds)`: the local time that
/// long before now, counting calendar months and years.
fn ago(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("ago", a);
    let [y, mo, d, h, mi, s] = six(&p)?;
    let Some(mut tm) = localtime(now_secs()) else {
        return Err(p.fail("cannot read the local time"));
    };
    tm.tm_year = clamp_i32(tm.tm_year as i64 - y);
    tm.tm_mon = clamp_i32(tm.tm_mon as i64 - mo);
    tm.tm_mday = clamp_i32(tm.tm_mday as i64 - d);
    tm.tm_hour = clamp_i32(tm.tm_hour as i64 - h);
    tm.tm_min = clamp_i32(tm.tm_min as i64 - mi);
    tm.tm_sec = clamp_i32(tm.tm_sec as i64 - s);
    let t = mktime(&mut tm);
    Ok(int_value(t.max(0)))
}

/// `accumulated(...)`: a duration in seconds, with years of 365 days and
/// months of 30.
fn accumulated(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("accumulated", a);
    let [y, mo, d, h, mi, s] = six(&p)?;
    let total = y
        .saturating_mul(365 * 86400)
        .saturating_add(mo.saturating_mul(30 * 86400))
        .saturating_add(d.saturating_mul(86400))
        .saturating_add(h.saturating_mul(3600))
        .saturating_add(mi.saturating_mul(60))
        .saturating_add(s);
    Ok(int_value(total))
}

/// `laterthan(year, month, day, hour, minute, second)`: whether now is
/// after that local date (months and days counted as for `on`, but from
/// one: cf-agent subtracts one from the month here).
fn laterthan(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("laterthan", a);
    let [y, mo, d, h, mi, s] = six(&p)?;
    let mut tm = empty_tm();
    tm.tm_year = clamp_i32(y - 1900);
    tm.tm_mon = clamp_i32(mo - 1);
    tm.tm_mday = clamp_i32(d);
    tm.tm_hour = clamp_i32(h);
    tm.tm_min = clamp_i32(mi);
    tm.tm_sec = clamp_i32(s);
    let then = mktime(&mut tm);
    Ok(class_result(now_secs() > then))
}

/// `strftime(gmtime|localtime, format, epoch)`: the C library's formatting.
fn strftime(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("strftime", a);
    let mode = p.option(0, "mode", &["gmtime", "localtime"])?;
    let fmt = p.str(1, "format")?;
    let t = p.int(2, "time")?;
    let tm = if mode == "gmtime" {
        gmtime(t)
    } else {
        localtime(t)
    }
    .ok_or_else(|| p.fail(format!("time {t} cannot be represented")))?;
    // cf-agent fails a format that gives no text without a word.
    let out = format_tm(fmt, &tm).ok_or_else(|| p.fail_quietly("the format gives no text"))?;
    Ok(Value::str(out))
}

/// Bob Jenkins' one-at-a-time hash, reduced to `max` (a power of two), as
/// CFEngine spreads names over time slots.
pub fn oat_hash(s: &str, max: u32) -> u32 {
    let mut h: u32 = 0;
    for &b in s.as_bytes() {
        h = h.wrapping_add(b as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h = h.wrapping_add(h << 15);
    h & (max - 1)
}

const HASH_TABLE_SIZE: u32 = 8192;

/// The time class expression `splayclass` tests for a name.
pub fn splay_expression(name: &str, hourly: bool) -> String {
    let h = oat_hash(name, HASH_TABLE_SIZE) as u64;
    if hourly {
        let slot = h * 12 / HASH_TABLE_SIZE as u64;
        format!("Min{:02}_{:02}", slot * 5, ((slot + 1) * 5) % 60)
    } else {
        let dayslot = h * 12 * 24 / HASH_TABLE_SIZE as u64;
        let hour = dayslot / 12;
        let slot = dayslot % 12;
        format!(
            "Min{:02}_{:02}.Hr{:02}",
            slot * 5,
            ((slot + 1) * 5) % 60,
            hour
        )
    }
}

/// `splayclass(name, daily|hourly)`: true in the five-minute slot of the
/// day (or hour) that the name hashes to.
fn splayclass(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("splayclass", a);
    let name = p.str(0, "text")?;
    let hourly = p.option(1, "period", &["daily", "hourly"])? == "hourly";
    let expr = splay_expression(name, hourly);
    Ok(class_result(ctx.eval_class_expr(&expr).unwrap_or(false)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulated_counts_30_day_months() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let args: Vec<Value> = ["1", "1", "1", "1", "1", "1"]
            .iter()
            .map(|s| Value::str(*s))
            .collect();
        assert_eq!(accumulated(&mut c, &args), Ok(Value::str("34218061")));
    }

    #[test]
    fn splay_slots_are_stable() {
        let e = splay_expression("x", true);
        assert!(e.starts_with("Min") && e.len() == 8, "{e}");
        let d = splay_expression("x", false);
        assert!(d.contains(".Hr"), "{d}");
        assert_eq!(oat_hash("", 8192), 0);
        assert_eq!(splay_expression("x", false), splay_expression("x", false));
    }

    #[test]
    fn strftime_formats_in_utc() {
        let tm = gmtime(86400).unwrap();
        assert_eq!(
            format_tm("%Y-%m-%d %j %A", &tm).as_deref(),
            Some("1970-01-02 002 Friday")
        );
        assert_eq!(format_tm("", &tm), None);
    }
}
