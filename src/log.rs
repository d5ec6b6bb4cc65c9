//! The log's ground floor: the macros every module writes its lines with
//! (`crate::error!`, `warn!`, `info!`, `debug!`, `trace!`) and the run's
//! current level they consult. report::log installs the subscriber that
//! prints the lines and moves the level.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use tracing::Level;

/// The target of notices: CFEngine has seven levels and tracing five, so
/// notice and info share INFO, told apart by this target.
pub const NOTICE_TARGET: &str = "cf_notice";

/// The target of critical messages (`CRITICAL: ...`), which cf-agent prints
/// for bugs it detects in promise modules; they share ERROR with errors.
pub const CRITICAL_TARGET: &str = "cf_critical";

/// The level lines are printed at, as `config::LogLevel`'s number, kept
/// apart from tracing so that it can be raised once the policy is read
/// (agent control's `inform`, `verbose`) and asked cheaply. Starts at
/// notice; report::log alone moves it.
pub static LEVEL: AtomicU8 = AtomicU8::new(NOTICE);

/// `LogLevel::Notice`, `LogLevel::Verbose` and `LogLevel::Debug` as numbers
/// (report::log checks that they match).
pub const NOTICE: u8 = 2;
pub const VERBOSE: u8 = 4;
pub const DEBUG: u8 = 5;

/// Whether verbose lines are printed (`-v`, `-d`).
pub fn verbose() -> bool {
    LEVEL.load(Ordering::Relaxed) >= VERBOSE
}

/// Whether debug lines are printed (`-d`).
pub fn debug() -> bool {
    LEVEL.load(Ordering::Relaxed) >= DEBUG
}

/// The agent's log macros: `crate::error!`, `warn!`, `info!` (with
/// `target: NOTICE_TARGET` for notices), `debug!` (cf-agent's verbose) and
/// `trace!` (its debug), each taking a format string as `tracing`'s do.
///
/// They go through a handful of `tracing` callsites in [`emit`] instead of
/// one per line of code: each callsite is ~70 bytes of static metadata
/// with pointers the loader relocates at every start, and the agent has
/// ~700 log lines (100 KB, a quarter of all it relocates). Verbose and
/// debug lines are not made when their level is off, as with `tracing`.
#[macro_export]
macro_rules! error {
    (target: $target:expr, $($arg:tt)+) => {
        $crate::log::emit(::tracing::Level::ERROR, $target, format_args!($($arg)+))
    };
    ($($arg:tt)+) => {
        $crate::log::emit(::tracing::Level::ERROR, "", format_args!($($arg)+))
    };
}

/// See [`error!`].
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => {
        $crate::log::emit(::tracing::Level::WARN, "", format_args!($($arg)+))
    };
}

/// See [`error!`].
#[macro_export]
macro_rules! info {
    (target: $target:expr, $($arg:tt)+) => {
        $crate::log::emit(::tracing::Level::INFO, $target, format_args!($($arg)+))
    };
    ($($arg:tt)+) => {
        $crate::log::emit(::tracing::Level::INFO, "", format_args!($($arg)+))
    };
}

/// See [`error!`]: a verbose line.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => {
        if $crate::log::verbose() {
            $crate::log::emit(::tracing::Level::DEBUG, "", format_args!($($arg)+))
        }
    };
}

/// See [`error!`]: a debug line.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => {
        if $crate::log::debug() {
            $crate::log::emit(::tracing::Level::TRACE, "", format_args!($($arg)+))
        }
    };
}

/// One log line through one of `tracing`'s callsites (see [`error!`]);
/// `target` tells notices and critical lines apart, as before.
pub fn emit(level: Level, target: &str, message: fmt::Arguments<'_>) {
    match level {
        Level::ERROR if target == CRITICAL_TARGET => {
            tracing::error!(target: CRITICAL_TARGET, "{message}")
        }
        Level::ERROR => tracing::error!(target: "cf_agent", "{message}"),
        Level::WARN => tracing::warn!(target: "cf_agent", "{message}"),
        Level::INFO if target == NOTICE_TARGET => {
            tracing::info!(target: NOTICE_TARGET, "{message}")
        }
        Level::INFO => tracing::info!(target: "cf_agent", "{message}"),
        Level::DEBUG => tracing::debug!(target: "cf_agent", "{message}"),
        Level::TRACE => tracing::trace!(target: "cf_agent", "{message}"),
    }
}
