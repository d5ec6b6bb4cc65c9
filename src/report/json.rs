//! `--json` and `--report-file`: one JSON object per line per event —
//! the run's start, each report line, each promise's outcome (with the
//! changes it made and how long it took), and the run's summary. The shape
//! is frozen by tests/it/json_events.rs.

use super::{Counts, PromiseEvent, Sink};
use serde::{Deserialize, Serialize};
use std::io::Write;

/// Every event, tagged by `"event"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum JsonEvent {
    RunStart {
        /// Seconds since the epoch.
        time: i64,
        version: String,
        policy: String,
        workdir: String,
        dry_run: bool,
    },
    Report {
        text: String,
    },
    Promise {
        bundle: String,
        namespace: String,
        promise_type: String,
        promiser: String,
        handle: Option<String>,
        file: String,
        line: usize,
        /// kept, repaired, failed, denied, timeout, interrupted or warned.
        outcome: String,
        /// What the promise changed, or would have (a dry run, a promise
        /// that only warns): what, path, before, after, applied, message.
        changes: Vec<super::change::Change>,
        duration_ms: f64,
    },
    /// A transaction was undone: its bundle failed (`recovered: false`),
    /// or the run that started it was killed and this run undid it before
    /// anything else (`recovered: true`).
    Rollback {
        bundle: String,
        namespace: String,
        /// Why: the promise that was not kept, or the killed run.
        reason: String,
        /// Each path put back, newest change first.
        restored: Vec<String>,
        /// Paths that could not be put back, with why.
        failed: Vec<String>,
        recovered: bool,
    },
    RunEnd {
        kept: usize,
        repaired: usize,
        not_kept: usize,
        duration_ms: f64,
    },
}

impl JsonEvent {
    pub fn from_promise(e: &PromiseEvent) -> JsonEvent {
        JsonEvent::Promise {
            bundle: e.bundle.clone(),
            namespace: e.namespace.clone(),
            promise_type: e.promise_type.clone(),
            promiser: e.promiser.clone(),
            handle: e.handle.clone(),
            file: e.file.clone(),
            line: e.line,
            outcome: e.outcome.as_str().to_string(),
            changes: e.changes.clone(),
            duration_ms: e.duration.as_secs_f64() * 1000.0,
        }
    }
}

/// Writes events as JSON lines.
pub struct JsonSink<W: Write> {
    out: W,
    pub counts: Counts,
}

impl<W: Write> JsonSink<W> {
    pub fn new(out: W) -> JsonSink<W> {
        JsonSink {
            out,
            counts: Counts::default(),
        }
    }

    pub fn write_event(&mut self, e: &JsonEvent) {
        if let Ok(line) = serde_json::to_string(e) {
            let _ = writeln!(self.out, "{line}");
        }
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn report_line(&mut self, text: &str) {
        self.write_event(&JsonEvent::Report {
            text: text.to_string(),
        });
    }

    fn promise_event(&mut self, event: &PromiseEvent) {
        self.counts.add(event.outcome);
        self.write_event(&JsonEvent::from_promise(event));
    }

    fn event(&mut self, e: &JsonEvent) {
        self.write_event(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;
    use crate::report::change::{Change, Changes, Decision, Mode};

    fn event(changes: Vec<Change>) -> PromiseEvent {
        PromiseEvent {
            bundle: "main".into(),
            namespace: "default".into(),
            promise_type: "files".into(),
            promiser: "/etc/motd".into(),
            handle: None,
            file: "p.cf".into(),
            line: 3,
            outcome: Outcome::Repaired,
            changes,
            duration: std::time::Duration::ZERO,
        }
    }

    fn changes_json(e: &PromiseEvent) -> serde_json::Value {
        let v = serde_json::to_value(JsonEvent::from_promise(e)).unwrap();
        v["changes"].clone()
    }

    #[test]
    fn changes_are_the_change_records() {
        let mut c = Changes::new(Mode::Apply, false);
        for (what, done) in [
            ("create", "Created file '/etc/motd', mode 0600"),
            ("content", "Updated file '/etc/motd' with content 'hi'"),
        ] {
            let change = Change::new(what, "/etc/motd").done(done);
            assert_eq!(c.plan(&change), Decision::Make);
            c.made(change);
        }
        let mut records = c.take();
        let both = changes_json(&event(records.clone()));
        assert_eq!(both.as_array().unwrap().len(), 2);
        assert_eq!(both[0]["what"], "create");
        assert_eq!(both[0]["path"], "/etc/motd");
        assert_eq!(both[0]["applied"], true);
        assert_eq!(
            both[1]["message"],
            "Updated file '/etc/motd' with content 'hi'"
        );
        // A record removed is a change gone from the JSON.
        records.remove(0);
        let one = changes_json(&event(records));
        assert_eq!(one.as_array().unwrap().len(), 1);
        assert_eq!(one[0], both[1]);
    }
}
