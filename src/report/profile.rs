//! `-p`/`--profile` (cf-agent 3.27): the time spent in each bundle and
//! each promise of a run, printed after it as a JSON array. Each event has
//! the keys cf-agent 3.27 gives it: `component` (`bundle` or `promise`),
//! `type` (the bundle type, or the promise type), `name` and `namespace`
//! (the bundle's; cf-agent writes `x` for a promise, and so do we),
//! `source` (the policy file), `id` (`FILE:LINE/bundle_TYPE_NS:NAME` or
//! `FILE:LINE/promise_TYPE`), `elapsed` (nanoseconds), `callstack` (the ids
//! of the frames it ran in, outermost first, joined by `;`) and `offset`
//! (`start`, `end`, `context`, `line` in the file). An event is recorded
//! when its frame ends, so a bundle comes after its promises. cf-agent
//! also times function calls; we do not (the functions of a promise are
//! in its time).

use std::time::Instant;

/// Where a frame's text is in its policy file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offset {
    pub start: u32,
    pub end: u32,
    /// Where the class guard in force begins (the frame's start for a
    /// bundle).
    pub context: u32,
    pub line: usize,
}

/// What a frame is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub component: &'static str,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub source: String,
    pub offset: Offset,
}

impl Frame {
    fn id(&self) -> String {
        match self.component {
            "bundle" => format!(
                "{}:{}/bundle_{}_{}:{}",
                self.source, self.offset.line, self.kind, self.namespace, self.name
            ),
            c => format!("{}:{}/{c}_{}", self.source, self.offset.line, self.kind),
        }
    }
}

/// One finished frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub frame: Frame,
    pub id: String,
    pub callstack: String,
    pub elapsed_ns: u128,
}

/// The frames open now and those finished.
#[derive(Debug, Default)]
pub struct Profiler {
    open: Vec<(Frame, String, String, Instant)>,
    events: Vec<Event>,
}

impl Profiler {
    pub fn begin(&mut self, frame: Frame) {
        let id = frame.id();
        let callstack = match self.open.last() {
            Some((_, _, outer, _)) => format!("{outer};{id}"),
            None => id.clone(),
        };
        self.open.push((frame, id, callstack, Instant::now()));
    }

    /// Ends the innermost open frame.
    pub fn end(&mut self) {
        if let Some((frame, id, callstack, started)) = self.open.pop() {
            self.events.push(Event {
                frame,
                id,
                callstack,
                elapsed_ns: started.elapsed().as_nanos(),
            });
        }
    }

    /// The finished frames, in the order they ended; frames still open
    /// (a run stopped early) end now.
    pub fn finish(mut self) -> Vec<Event> {
        while !self.open.is_empty() {
            self.end();
        }
        self.events
    }
}

/// The events as cf-agent 3.27 prints them.
pub fn to_json(events: &[Event]) -> serde_json::Value {
    use serde_json::{Value, json};
    Value::Array(
        events
            .iter()
            .map(|e| {
                json!({
                    "component": e.frame.component,
                    "type": e.frame.kind,
                    "name": e.frame.name,
                    "namespace": e.frame.namespace,
                    "source": e.frame.source,
                    "id": e.id,
                    "elapsed": u64::try_from(e.elapsed_ns).unwrap_or(u64::MAX),
                    "callstack": e.callstack,
                    "offset": {
                        "start": e.frame.offset.start,
                        "end": e.frame.offset.end,
                        "context": e.frame.offset.context,
                        "line": e.frame.offset.line,
                    },
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(component: &'static str, kind: &str, line: usize) -> Frame {
        Frame {
            component,
            kind: kind.into(),
            name: if component == "bundle" { "main" } else { "x" }.into(),
            namespace: if component == "bundle" {
                "default"
            } else {
                "x"
            }
            .into(),
            source: "/p.cf".into(),
            offset: Offset {
                line,
                ..Offset::default()
            },
        }
    }

    #[test]
    fn frames_nest_and_end_innermost_first() {
        let mut p = Profiler::default();
        p.begin(frame("bundle", "agent", 2));
        p.begin(frame("promise", "reports", 5));
        p.end();
        p.end();
        let events = p.finish();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].id, "/p.cf:5/promise_reports");
        assert_eq!(
            events[0].callstack,
            "/p.cf:2/bundle_agent_default:main;/p.cf:5/promise_reports"
        );
        assert_eq!(events[1].id, "/p.cf:2/bundle_agent_default:main");
        let j = to_json(&events);
        assert_eq!(j[0]["component"], "promise");
        assert_eq!(j[1]["offset"]["line"], 2);
        assert!(j[1]["elapsed"].as_u64().unwrap() >= j[0]["elapsed"].as_u64().unwrap());
    }

    #[test]
    fn frames_left_open_end_at_finish() {
        let mut p = Profiler::default();
        p.begin(frame("bundle", "agent", 2));
        assert_eq!(p.finish().len(), 1);
    }
}
