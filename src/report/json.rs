//! `--json` and `--report-file`: one JSON object per line per event —
//! the run's start, each report line, each promise's outcome (with the
//! changes it made and how long it took), each error, and the run's
//! summary. Every event carries the same envelope (schema version, time,
//! run id, host name). The shape is documented by docs/events.schema.json
//! and frozen by tests/it/json_events.rs, which validates every event the
//! integration tests see against that file.

use super::{Counts, PromiseEvent, Sink};
use serde::{Deserialize, Serialize};
use std::io::Write;

/// The version of the event schema (docs/events.schema.json): raised when
/// a field changes meaning or goes away; a new event or field does not.
pub const SCHEMA_VERSION: u32 = 1;

/// OpenTelemetry's severity number of ERROR (its log data model).
pub const SEVERITY_ERROR: u8 = 17;

/// What every event of one run carries besides its own fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Tells the events of one run from another's (128 random bits, hex).
    pub run_id: String,
    /// The host the run was on (its node name).
    pub hostname: String,
}

/// Every event, tagged by `"event"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum JsonEvent {
    RunStart {
        /// What `--version` prints: version, commit, CFEngine followed.
        version: String,
        /// The commit the agent was built from.
        commit: String,
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
    /// An error of the run: a policy that does not load, a promise that
    /// failed, anything cf-agent would print as `error:`. Field names are
    /// OpenTelemetry's log data model's.
    Error {
        /// Always "ERROR".
        severity_text: String,
        /// Always 17 (OpenTelemetry's ERROR).
        severity_number: u8,
        /// The message, as the `error:` line says it.
        body: String,
    },
    /// Always the last event of a run, whatever happened.
    RunEnd {
        /// "ok" (the policy ran), "aborted" (abortclasses) or "error"
        /// (the policy did not load, or the run could not start).
        status: String,
        kept: usize,
        repaired: usize,
        not_kept: usize,
        /// The run's `error:` lines.
        errors: usize,
        /// Transactions undone.
        rollbacks: usize,
        /// The agent's exit code for this run.
        exit_code: u8,
        duration_ms: f64,
    },
}

impl JsonEvent {
    pub fn error(body: &str) -> JsonEvent {
        JsonEvent::Error {
            severity_text: "ERROR".to_string(),
            severity_number: SEVERITY_ERROR,
            body: body.to_string(),
        }
    }

    pub fn from_promise(e: &PromiseEvent) -> JsonEvent {
        JsonEvent::Promise {
            bundle: e.bundle.to_string(),
            namespace: e.namespace.to_string(),
            promise_type: e.promise_type.to_string(),
            promiser: e.promiser.clone(),
            handle: e.handle.clone(),
            file: e.file.to_string(),
            line: e.line,
            outcome: e.outcome.as_str().to_string(),
            changes: e.changes.clone(),
            duration_ms: e.duration.as_secs_f64() * 1000.0,
        }
    }
}

/// One event as the JSON object written: the envelope's fields first
/// (`schema_version`, `time_unix_nano`, `run_id`, `hostname`), then
/// `event` and the event's own.
pub fn to_value(e: &JsonEvent, envelope: &Envelope, time_unix_nano: u128) -> serde_json::Value {
    use serde_json::Value;
    let mut out = serde_json::Map::new();
    out.insert("schema_version".into(), Value::from(SCHEMA_VERSION));
    // Nanoseconds since the epoch overflow nothing in u64 before 2554.
    let nanos = u64::try_from(time_unix_nano).unwrap_or(u64::MAX);
    out.insert("time_unix_nano".into(), Value::from(nanos));
    out.insert("run_id".into(), Value::from(envelope.run_id.clone()));
    out.insert("hostname".into(), Value::from(envelope.hostname.clone()));
    if let Ok(Value::Object(fields)) = serde_json::to_value(e) {
        out.extend(fields);
    }
    Value::Object(out)
}

/// Writes events as JSON lines.
pub struct JsonSink<W: Write> {
    out: W,
    envelope: Envelope,
    pub counts: Counts,
}

impl<W: Write> JsonSink<W> {
    pub fn new(out: W, envelope: Envelope) -> JsonSink<W> {
        JsonSink {
            out,
            envelope,
            counts: Counts::default(),
        }
    }

    pub fn write_event(&mut self, e: &JsonEvent) {
        let v = to_value(e, &self.envelope, crate::host::clock::now_unix_nanos());
        if let Ok(line) = serde_json::to_string(&v) {
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
