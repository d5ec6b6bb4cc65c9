//! Log lines in cf-agent's shape (`    info: ...`, `   error: ...`),
//! through `tracing`. CFEngine has seven levels and tracing five, so notice
//! and info share INFO, and critical and error share ERROR, told apart by
//! their target.

use crate::config::LogLevel;
use std::fmt;
use std::io::Write as _;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

pub use crate::log::{CRITICAL_TARGET, NOTICE_TARGET, debug, verbose};

/// The CFEngine level word of an event, right-aligned to eight columns as
/// cf-agent prints it.
fn prefix(level: &Level, target: &str) -> &'static str {
    match *level {
        Level::ERROR if target == CRITICAL_TARGET => "CRITICAL",
        Level::ERROR => "   error",
        Level::WARN => " warning",
        Level::INFO if target == NOTICE_TARGET => "  notice",
        Level::INFO => "    info",
        Level::DEBUG => " verbose",
        Level::TRACE => "   debug",
    }
}

struct MessageVisitor<'a>(&'a mut String);

impl Visit for MessageVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            use fmt::Write;
            let _ = write!(self.0, "{value:?}");
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }
}

/// How each log line is dressed: cf-agent's `-l` and `-C`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStyle {
    /// Start with the local time.
    pub timestamps: bool,
    /// Colour by level, as cf-agent's `--color`.
    pub color: bool,
}

/// cf-agent's colour of a level: errors red, warnings yellow, notices and
/// infos green, the rest blue.
fn color_of(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "\x1b[31m",
        Level::WARN => "\x1b[33m",
        Level::INFO => "\x1b[32m",
        Level::DEBUG | Level::TRACE => "\x1b[34m",
    }
}

/// The text of an event's line as cf-agent prints it: colour, time stamp,
/// level word, message, newline.
fn format_line(style: LineStyle, level: &Level, target: &str, msg: &str) -> String {
    use fmt::Write as _;
    let mut line = String::with_capacity(msg.len() + 16);
    if style.color {
        line.push_str(color_of(level));
    }
    if style.timestamps {
        // cf-agent's -l: the local time, ISO 8601 with the offset.
        let now = crate::host::clock::now_secs();
        let stamp = crate::host::clock::local_text(now, "%Y-%m-%dT%H:%M:%S%z");
        let _ = write!(line, "{} ", stamp.unwrap_or_default());
    }
    let _ = writeln!(line, "{}: {}", prefix(level, target), msg);
    if style.color {
        // After the newline, as cf-agent resets it.
        line.push_str("\x1b[0m");
    }
    line
}

/// Whether an event at (level, target) passes the configured level.
fn enabled(max: LogLevel, level: &Level, target: &str) -> bool {
    level_of(level, target) <= max
}

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard output, as cf-agent writes them.
    Stdout,
    /// Standard error, when standard output carries JSON events.
    Stderr,
}

use crate::log::LEVEL;

// The floor below keeps the level as LogLevel's number.
const _: () = assert!(
    LogLevel::Notice as u8 == crate::log::NOTICE
        && LogLevel::Verbose as u8 == crate::log::VERBOSE
        && LogLevel::Debug as u8 == crate::log::DEBUG
);

fn current_level() -> LogLevel {
    level_from_u8(LEVEL.load(std::sync::atomic::Ordering::Relaxed))
}

fn level_from_u8(n: u8) -> LogLevel {
    match n {
        0 => LogLevel::Error,
        1 => LogLevel::Warning,
        2 => LogLevel::Notice,
        3 => LogLevel::Info,
        4 => LogLevel::Verbose,
        _ => LogLevel::Debug,
    }
}

/// Raises the level to at least `level` (never lowers it): agent control's
/// `inform => "true"` and `verbose => "true"` do what -I and -v do.
pub fn raise_level(level: LogLevel) {
    LEVEL.fetch_max(level as u8, std::sync::atomic::Ordering::Relaxed);
}

/// Runs `f` with the level raised to at least `level` (a promise's
/// `report_level`), then puts the run's level back.
pub fn with_raised_level<T>(level: Option<LogLevel>, f: impl FnOnce() -> T) -> T {
    let Some(level) = level else {
        return f();
    };
    let before = LEVEL.fetch_max(level as u8, std::sync::atomic::Ordering::Relaxed);
    let out = f();
    LEVEL.store(before, std::sync::atomic::Ordering::Relaxed);
    out
}

/// Runs `f` as if it were another program of ours started from this one
/// (the agent's pre-check by `cf-promises`, done in this process): at
/// `level`, whatever this run's is; without the system log, which
/// cf-promises does not write to; its error lines printed but not
/// counted among this run's. Everything is put back afterwards.
pub fn as_separate_program<T>(level: LogLevel, f: impl FnOnce() -> T) -> T {
    use std::sync::atomic::Ordering;
    let level_before = LEVEL.swap(level as u8, Ordering::Relaxed);
    let syslog_before = SYSLOG.swap(false, Ordering::Relaxed);
    let system_level_before = SYSTEM_LOG_LEVEL.swap(u8::MAX, Ordering::Relaxed);
    let errors_before = ERRORS.lock().map(|e| e.len()).unwrap_or(0);
    let out = f();
    if let Ok(mut e) = ERRORS.lock() {
        e.truncate(errors_before);
    }
    SYSTEM_LOG_LEVEL.store(system_level_before, Ordering::Relaxed);
    SYSLOG.store(syslog_before, Ordering::Relaxed);
    LEVEL.store(level_before, Ordering::Relaxed);
    out
}

/// Installs the global subscriber. Calling it twice is harmless.
pub fn init(max: LogLevel, style: LineStyle, target: LogTarget) {
    LEVEL.store(max as u8, std::sync::atomic::Ordering::Relaxed);
    let _ = tracing::subscriber::set_global_default(CfLog { style, target });
}

/// How many lines (errors to info, printed or not at the run's level) were
/// said so far: a caller that keeps an evaluation's result instead of
/// making it again asks whether the evaluation said anything, which it
/// would say again.
static SAID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The count of lines said so far (see [`SAID`]).
pub fn said() -> u64 {
    SAID.load(std::sync::atomic::Ordering::Relaxed)
}

/// The run's `error:` lines, kept for its events and its exit code.
static ERRORS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Whether log lines also go to the system log (cf-agent runs, not
/// cf-promises' checks).
static SYSLOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// body common control's `system_log_level`, when the policy sets one;
/// else the system log gets what the terminal gets.
static SYSTEM_LOG_LEVEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(u8::MAX);

/// The `error:` lines logged (or recorded) since the last call, oldest
/// first.
pub fn take_errors() -> Vec<String> {
    ERRORS
        .lock()
        .map(|mut e| std::mem::take(&mut *e))
        .unwrap_or_default()
}

/// An error printed without going through `tracing` (a policy's
/// diagnostics, which have their own shape): counted as one of the run's
/// errors and sent to the system log.
pub fn record_error(message: &str) {
    SAID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Ok(mut e) = ERRORS.lock() {
        e.push(message.to_string());
    }
    to_syslog(LogLevel::Error, message);
}

/// From now on, log lines also go to the system log under `tag`, as
/// cf-agent's do (facility user, `CFEngine(agent)` before each message).
pub fn open_syslog(tag: &str) {
    crate::host::syslog::open(tag);
    SYSLOG.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// body common control's `system_log_level`: what reaches the system log,
/// whatever the terminal shows.
pub fn set_system_log_level(level: LogLevel) {
    SYSTEM_LOG_LEVEL.store(level as u8, std::sync::atomic::Ordering::Relaxed);
}

fn level_of(level: &Level, target: &str) -> LogLevel {
    match *level {
        Level::ERROR => LogLevel::Error,
        Level::WARN => LogLevel::Warning,
        Level::INFO if target == NOTICE_TARGET => LogLevel::Notice,
        Level::INFO => LogLevel::Info,
        Level::DEBUG => LogLevel::Verbose,
        Level::TRACE => LogLevel::Debug,
    }
}

/// One line to the system log, if it is open and the line's level is
/// shown there: the terminal's level, or `system_log_level`; never verbose
/// or debug lines (cf-agent keeps those out).
pub fn to_syslog(level: LogLevel, message: &str) {
    use crate::host::syslog::{Severity, send};
    use std::sync::atomic::Ordering;
    if !SYSLOG.load(Ordering::Relaxed) || level >= LogLevel::Verbose {
        return;
    }
    let max = match SYSTEM_LOG_LEVEL.load(Ordering::Relaxed) {
        u8::MAX => current_level(),
        n => level_from_u8(n),
    };
    if level > max {
        return;
    }
    let severity = match level {
        LogLevel::Error => Severity::Err,
        LogLevel::Warning => Severity::Warning,
        LogLevel::Notice => Severity::Notice,
        _ => Severity::Info,
    };
    send(severity, format_args!("CFEngine(agent)  {message}\n"));
}

/// A report line to the system log (if it is open), as a notice whatever
/// the levels say: cf-agent sends each report there itself
/// (libpromises/verify_reports.c), past `system_log_level`.
/// A report's text goes as `R: <text>`; it is only formatted when the
/// system log is on (every report line of a run comes here).
pub fn report_to_syslog(text: &str) {
    if SYSLOG.load(std::sync::atomic::Ordering::Relaxed) {
        crate::host::syslog::send(
            crate::host::syslog::Severity::Notice,
            format_args!("CFEngine(agent)  R: {text}\n"),
        );
    }
}

/// The run's subscriber. It prints the lines the run's level shows, and
/// sees every line up to info whatever that level: keeps errors, counts
/// what was said, feeds the system log.
///
/// Written here rather than built from tracing-subscriber's registry and
/// fmt layer: the policy's log has no spans, and the registry's slab of
/// span slots (allocated and zeroed at start) plus its layers were a
/// measurable part of a small check's start-up.
struct CfLog {
    style: LineStyle,
    target: LogTarget,
}

impl Subscriber for CfLog {
    /// Never cached per callsite: the run's level changes while it goes
    /// (agent control's `inform`, `verbose`, a promise's `report_level`).
    fn register_callsite(&self, _: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, m: &Metadata<'_>) -> bool {
        level_of(m.level(), m.target()) < LogLevel::Verbose
            || enabled(current_level(), m.level(), m.target())
    }

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let level = level_of(meta.level(), meta.target());
        let mut msg = String::new();
        event.record(&mut MessageVisitor(&mut msg));
        if enabled(current_level(), meta.level(), meta.target()) {
            let line = format_line(self.style, meta.level(), meta.target(), &msg);
            // One write per line, errors ignored, as a terminal log does.
            match self.target {
                LogTarget::Stdout => crate::host::out::write(line.as_bytes()),
                LogTarget::Stderr => {
                    // What standard output holds was said first.
                    crate::host::out::flush();
                    let _ = std::io::stderr().lock().write_all(line.as_bytes());
                }
            }
        }
        if level >= LogLevel::Verbose {
            return;
        }
        SAID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let critical = meta.target() == CRITICAL_TARGET;
        // A critical line is an error to the system log too.
        to_syslog(if critical { LogLevel::Error } else { level }, &msg);
        if level == LogLevel::Error
            && let Ok(mut e) = ERRORS.lock()
        {
            e.push(msg);
        }
    }

    // The log has no spans: each gets the same id and nothing is kept.
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_filter_like_cf_agent() {
        assert!(enabled(LogLevel::Notice, &Level::ERROR, "convergent::x"));
        assert!(!enabled(LogLevel::Notice, &Level::INFO, "convergent::x"));
        assert!(enabled(LogLevel::Notice, &Level::INFO, NOTICE_TARGET));
        assert!(enabled(LogLevel::Info, &Level::INFO, "convergent::x"));
        assert!(!enabled(LogLevel::Info, &Level::DEBUG, "convergent::x"));
        assert_eq!(prefix(&Level::INFO, "x"), "    info");
        assert_eq!(prefix(&Level::INFO, NOTICE_TARGET), "  notice");
        assert_eq!(prefix(&Level::ERROR, CRITICAL_TARGET), "CRITICAL");
        assert!(enabled(LogLevel::Error, &Level::ERROR, CRITICAL_TARGET));
    }
}
