//! Output: report lines, log lines, promise events, and the `--show-*`
//! tables.

pub mod banner;
pub mod change;
pub mod json;
pub mod log;
pub mod metrics;
pub mod profile;

/// How one promise iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Kept,
    Repaired,
    Failed,
    Denied,
    Timeout,
    Interrupted,
    /// Something differs and was not changed (dry-run or `action_policy
    /// => "warn"`): a repair that would have been made.
    Warned,
}

impl Outcome {
    pub fn is_not_kept(self) -> bool {
        !matches!(self, Outcome::Kept | Outcome::Repaired)
    }

    /// The worse of two outcomes, for aggregating (a method's bundle, the
    /// steps of one promise), as cf-agent's PromiseResultUpdate: a warning
    /// is worse than a repair, a failure worse than a warning; of two
    /// failures the first stays.
    pub fn worst(self, other: Outcome) -> Outcome {
        let rank = |o: Outcome| match o {
            Outcome::Kept => 0,
            Outcome::Repaired => 1,
            Outcome::Warned => 2,
            _ => 3,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Kept => "kept",
            Outcome::Repaired => "repaired",
            Outcome::Failed => "failed",
            Outcome::Denied => "denied",
            Outcome::Timeout => "timeout",
            Outcome::Interrupted => "interrupted",
            Outcome::Warned => "warned",
        }
    }
}

/// One promise iteration's result, as data.
#[derive(Debug, Clone, PartialEq)]
pub struct PromiseEvent {
    /// Shared with the promise's expansion (see `ExpandedPromise`).
    pub bundle: std::sync::Arc<str>,
    pub namespace: std::sync::Arc<str>,
    pub promise_type: std::sync::Arc<str>,
    pub promiser: String,
    pub handle: Option<String>,
    pub file: std::sync::Arc<str>,
    pub line: usize,
    pub outcome: Outcome,
    /// What the promise changed, or would have changed.
    pub changes: Vec<change::Change>,
    pub duration: std::time::Duration,
}

/// Where a run's output goes. Report lines (`R: ...`) are the policy's own
/// output; events describe what happened to each promise.
pub trait Sink {
    fn report_line(&mut self, text: &str);
    fn promise_event(&mut self, event: &PromiseEvent);
    /// Run-level events (start, end); only the JSON printer shows them.
    fn event(&mut self, _e: &json::JsonEvent) {}
}

/// Several sinks fed the same events (standard output and a report file).
pub struct Tee<'a>(pub Vec<&'a mut dyn Sink>);

impl Sink for Tee<'_> {
    fn report_line(&mut self, text: &str) {
        self.0.iter_mut().for_each(|s| s.report_line(text));
    }

    fn promise_event(&mut self, event: &PromiseEvent) {
        self.0.iter_mut().for_each(|s| s.promise_event(event));
    }

    fn event(&mut self, e: &json::JsonEvent) {
        self.0.iter_mut().for_each(|s| s.event(e));
    }
}

/// Standard output, as cf-agent prints it.
#[derive(Debug, Default)]
pub struct HumanSink {
    pub counts: Counts,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub kept: usize,
    pub repaired: usize,
    pub not_kept: usize,
    /// Of the repaired, those that only warned (a dry run, `action_policy
    /// => "warn"`): cf-agent's promise summary counts them not repaired.
    pub warned: usize,
}

impl Counts {
    pub fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Kept => self.kept += 1,
            // A warning under dry-run is a repair that would be made.
            Outcome::Repaired => self.repaired += 1,
            Outcome::Warned => {
                self.repaired += 1;
                self.warned += 1;
            }
            _ => self.not_kept += 1,
        }
    }

    pub fn total(&self) -> usize {
        self.kept + self.repaired + self.not_kept
    }
}

impl Sink for HumanSink {
    fn report_line(&mut self, text: &str) {
        crate::host::out::write_parts(&[b"R: ", text.as_bytes(), b"\n"]);
    }

    fn promise_event(&mut self, event: &PromiseEvent) {
        self.counts.add(event.outcome);
        // Where a promise that was not kept is written, in cf-agent's -v
        // words (its -I lines say what failed, not where).
        if event.outcome.is_not_kept() && event.outcome != Outcome::Warned {
            crate::debug!(
                "Additional promise info: source path '{}' at line {}",
                event.file,
                event.line
            );
        }
    }
}

/// What one run saw, whichever sinks print it: the outcomes, the errors
/// logged, the transactions undone. It passes everything on, and before
/// each event the `error:` lines logged since the last one, as error
/// events, so that they come in the order they happened.
pub struct Observed<'a> {
    inner: &'a mut dyn Sink,
    pub counts: Counts,
    pub errors: usize,
    pub rollbacks: usize,
}

impl<'a> Observed<'a> {
    pub fn new(inner: &'a mut dyn Sink) -> Observed<'a> {
        Observed {
            inner,
            counts: Counts::default(),
            errors: 0,
            rollbacks: 0,
        }
    }

    /// Passes on the errors logged since the last event.
    pub fn flush_errors(&mut self) {
        for e in log::take_errors() {
            self.errors += 1;
            self.inner.event(&json::JsonEvent::error(&e));
        }
    }
}

impl Sink for Observed<'_> {
    fn report_line(&mut self, text: &str) {
        self.flush_errors();
        // cf-agent sends its reports to the system log as notices.
        log::report_to_syslog(text);
        self.inner.report_line(text);
    }

    fn promise_event(&mut self, event: &PromiseEvent) {
        self.flush_errors();
        self.counts.add(event.outcome);
        self.inner.promise_event(event);
    }

    fn event(&mut self, e: &json::JsonEvent) {
        self.flush_errors();
        if matches!(e, json::JsonEvent::Rollback { .. }) {
            self.rollbacks += 1;
        }
        self.inner.event(e);
    }
}

/// Collects everything, for tests.
#[derive(Debug, Default)]
pub struct MemorySink {
    pub lines: Vec<String>,
    pub events: Vec<PromiseEvent>,
}

impl Sink for MemorySink {
    fn report_line(&mut self, text: &str) {
        self.lines.push(text.to_string());
    }

    fn promise_event(&mut self, event: &PromiseEvent) {
        self.events.push(event.clone());
    }
}
