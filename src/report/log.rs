//! Log lines in cf-agent's shape (`    info: ...`, `   error: ...`),
//! through `tracing`. CFEngine has six levels and tracing five, so notice
//! and info share INFO and are told apart by their target.

use crate::config::LogLevel;
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

pub const NOTICE_TARGET: &str = "cf_notice";

/// The CFEngine level word of an event, right-aligned to eight columns as
/// cf-agent prints it.
fn prefix(level: &Level, target: &str) -> &'static str {
    match *level {
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

struct CfFormat {
    timestamps: bool,
}

impl<S, N> FormatEvent<S, N> for CfFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut msg = String::new();
        event.record(&mut MessageVisitor(&mut msg));
        if self.timestamps {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            write!(w, "{secs} ")?;
        }
        writeln!(w, "{}: {}", prefix(meta.level(), meta.target()), msg)
    }
}

/// Whether an event at (level, target) passes the configured level.
fn enabled(max: LogLevel, level: &Level, target: &str) -> bool {
    let ours = match *level {
        Level::ERROR => LogLevel::Error,
        Level::WARN => LogLevel::Warning,
        Level::INFO if target == NOTICE_TARGET => LogLevel::Notice,
        Level::INFO => LogLevel::Info,
        Level::DEBUG => LogLevel::Verbose,
        Level::TRACE => LogLevel::Debug,
    };
    ours <= max
}

/// Installs the global subscriber; logs go to standard output, as
/// cf-agent's do. Calling it twice is harmless.
pub fn init(max: LogLevel, timestamps: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    let filter =
        tracing_subscriber::filter::filter_fn(move |m| enabled(max, m.level(), m.target()));
    let layer = tracing_subscriber::fmt::layer()
        .event_format(CfFormat { timestamps })
        .with_writer(std::io::stdout)
        .with_filter(filter);
    let subscriber = tracing_subscriber::registry().with(layer);
    let _ = tracing::subscriber::set_global_default(subscriber);
}

use tracing_subscriber::Layer as _;

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
    }
}
