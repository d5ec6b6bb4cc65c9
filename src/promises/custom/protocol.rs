//! The promise module protocol (version `v1`) on the wire, in both of its
//! variants: headers, requests as the agent writes them, and responses
//! read line by line exactly as cf-agent 3.21 reads them, so that a module
//! that misbehaves is understood (and misunderstood) the same way.

use serde_json::Value as Json;

/// The header the agent sends when a module starts. Modules (and
/// CFEngine's own module libraries) check that the version starts with
/// `3.`, so we introduce ourselves as the cf-agent we follow.
pub fn agent_header() -> String {
    format!("cf-agent {} v1\n\n", crate::COMPAT_VERSION)
}

/// Which variant of the protocol a module speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// One JSON object a message; attributes may be lists and data.
    Json,
    /// `key=value` lines; attributes are strings only.
    Lines,
}

/// What a module's header asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleHeader {
    pub protocol: Protocol,
    /// The module can check without changing (`action_policy` flag).
    pub action_policy: bool,
    /// The header named no protocol, or both.
    pub note: Option<ProtocolNote>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolNote {
    /// Neither `json_based` nor `line_based`: the line protocol is used.
    Unspecified,
    /// Both: the last one written is used.
    Ambiguous,
}

/// Reads a module's header line: `name version v1 flag...`. The flags
/// start at the fourth word; as in cf-agent, the name, version and
/// protocol version are not checked.
pub fn parse_header(line: &str) -> ModuleHeader {
    let mut protocol = None;
    let mut both = false;
    let mut action_policy = false;
    for flag in line.split(' ').skip(3) {
        match flag {
            "json_based" | "line_based" => {
                let p = if flag == "json_based" {
                    Protocol::Json
                } else {
                    Protocol::Lines
                };
                both |= protocol.is_some_and(|q| q != p);
                protocol = Some(p);
            }
            "action_policy" => action_policy = true,
            _ => {}
        }
    }
    ModuleHeader {
        protocol: protocol.unwrap_or(Protocol::Lines),
        action_policy,
        note: if both {
            Some(ProtocolNote::Ambiguous)
        } else if protocol.is_none() {
            Some(ProtocolNote::Unspecified)
        } else {
            None
        },
    }
}

/// The promise a validate or evaluate request is about.
#[derive(Debug, Clone, PartialEq)]
pub struct PromiseRequest<'a> {
    pub promise_type: &'a str,
    pub promiser: &'a str,
    pub line_number: usize,
    pub filename: &'a str,
    /// In the order the promise gives them.
    pub attributes: &'a [(String, Json)],
}

/// One request to a module.
#[derive(Debug, Clone, PartialEq)]
pub struct Request<'a> {
    pub operation: &'a str,
    /// Absent from `terminate`.
    pub log_level: Option<&'a str>,
    pub promise: Option<PromiseRequest<'a>>,
}

impl Request<'_> {
    /// The request as sent, ending with the empty line that closes it.
    /// JSON objects are written compactly with their keys sorted, as
    /// cf-agent writes them; lines keep the promise's attribute order.
    pub fn encode(&self, protocol: Protocol) -> String {
        let mut fields: Vec<(&str, Json)> = vec![("operation", Json::from(self.operation))];
        if let Some(l) = self.log_level {
            fields.push(("log_level", Json::from(l)));
        }
        if let Some(p) = &self.promise {
            fields.push(("promise_type", Json::from(p.promise_type)));
            fields.push(("promiser", Json::from(p.promiser)));
            fields.push(("line_number", Json::from(p.line_number)));
            fields.push(("filename", Json::from(p.filename)));
        }
        let attributes = self.promise.as_ref().map_or(&[][..], |p| p.attributes);
        match protocol {
            Protocol::Json => {
                let mut obj: serde_json::Map<String, Json> = fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                if !attributes.is_empty() {
                    obj.insert(
                        "attributes".into(),
                        Json::Object(attributes.iter().cloned().collect()),
                    );
                }
                let mut out = String::new();
                write_sorted(&Json::Object(obj), &mut out);
                out.push_str("\n\n");
                out
            }
            Protocol::Lines => {
                let mut out = String::new();
                for (k, v) in fields {
                    out.push_str(&format!("{k}={}\n", line_value(&v)));
                }
                for (k, v) in attributes {
                    out.push_str(&format!("attribute_{k}={}\n", line_value(v)));
                }
                out.push('\n');
                out
            }
        }
    }
}

/// A value in the line protocol: strings as they are (a newline in one
/// is sent as it is, as cf-agent does), anything else as JSON.
fn line_value(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Compact JSON with every object's keys sorted.
fn write_sorted(v: &Json, out: &mut String) {
    match v {
        Json::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Json::from(k.as_str()).to_string());
                out.push(':');
                write_sorted(&m[k], out);
            }
            out.push('}');
        }
        Json::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// CFEngine's log levels, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Critical,
    Error,
    Warning,
    Notice,
    Info,
    Verbose,
    Debug,
}

impl Level {
    /// A level as cf-agent reads one from a module: any leading part of
    /// the full name, in any case (`err`, `warn`, `i`), tried in order of
    /// severity.
    pub fn parse(s: &str) -> Option<Level> {
        if s.is_empty() {
            return None;
        }
        let names = [
            ("critical", Level::Critical),
            ("errors", Level::Error),
            ("warnings", Level::Warning),
            ("notices", Level::Notice),
            ("information", Level::Info),
            ("verbose", Level::Verbose),
            ("debug", Level::Debug),
        ];
        let s = s.to_ascii_lowercase();
        names
            .iter()
            .find(|(full, _)| full.starts_with(&s))
            .map(|(_, l)| *l)
    }

    /// The word of a request's `log_level`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Critical => "critical",
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Notice => "notice",
            Level::Info => "info",
            Level::Verbose => "verbose",
            Level::Debug => "debug",
        }
    }
}

impl From<crate::config::LogLevel> for Level {
    /// The run's log level, as a request to a module names it.
    fn from(l: crate::config::LogLevel) -> Level {
        use crate::config::LogLevel as L;
        match l {
            L::Error => Level::Error,
            L::Warning => Level::Warning,
            L::Notice => Level::Notice,
            L::Info => Level::Info,
            L::Verbose => Level::Verbose,
            L::Debug => Level::Debug,
        }
    }
}

/// Something to say while a response is read, in the order it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A log message from the module.
    Log { level: Level, message: String },
    /// A `log_...` line whose level no one knows (cf-agent aborts on it).
    UnknownLevel { line: String },
    /// A `log_...` line without `=`.
    InvalidLogLine(String),
    /// A line of the line protocol without `=`.
    InvalidLine(String),
    /// A line of the JSON protocol that is not JSON.
    InvalidJson,
    /// A JSON protocol response without its JSON line.
    IncompleteJson,
}

/// A module's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Response {
    pub result: Option<String>,
    pub result_classes: Vec<String>,
}

/// How reading a response ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    Response(Response),
    /// Unreadable: the module sent something that is not the protocol.
    Broken,
    /// The module stopped answering (see [`LineIn::TimedOut`]).
    TimedOut,
}

/// One line of a module's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineIn {
    Line(String),
    Eof,
    TimedOut,
}

/// Reads one response: lines up to an empty line (or the end of the
/// output), telling `note` what it meets as it meets it, so that a
/// module's log lines are printed while it works.
///
/// This follows cf-agent's reader to the letter, since the next response
/// starts wherever this one stopped: a line that is not JSON ends the
/// response at once (what follows it is read as the next response), a
/// second JSON line replaces the first, a repeated key of the line protocol
/// replaces the earlier one, and `log_` lines may come before the JSON.
pub fn receive(
    next_line: &mut dyn FnMut() -> LineIn,
    protocol: Protocol,
    note: &mut dyn FnMut(Note),
) -> Received {
    let mut json: Option<Json> = None;
    let mut fields = Response::default();
    loop {
        let line = match next_line() {
            LineIn::Line(l) => l,
            LineIn::Eof => break,
            LineIn::TimedOut => return Received::TimedOut,
        };
        if line.is_empty() {
            break;
        }
        if let Some(rest) = line.strip_prefix("log_") {
            let Some((level, message)) = rest.split_once('=') else {
                note(Note::InvalidLogLine(line));
                continue;
            };
            match Level::parse(level) {
                Some(level) => note(Note::Log {
                    level,
                    message: message.to_string(),
                }),
                None => note(Note::UnknownLevel { line: line.clone() }),
            }
            continue;
        }
        match protocol {
            Protocol::Lines => {
                let Some((key, value)) = line.split_once('=') else {
                    note(Note::InvalidLine(line));
                    continue;
                };
                match key {
                    "result" => fields.result = Some(value.to_string()),
                    "result_classes" => {
                        fields.result_classes = value.split(',').map(str::to_string).collect()
                    }
                    _ => {}
                }
            }
            Protocol::Json => match serde_json::from_str::<Json>(&line) {
                Ok(v) => json = Some(v),
                Err(_) => {
                    note(Note::InvalidJson);
                    return Received::Broken;
                }
            },
        }
    }
    if protocol == Protocol::Lines {
        return Received::Response(fields);
    }
    let Some(json) = json else {
        note(Note::IncompleteJson);
        return Received::Broken;
    };
    // Log messages inside the JSON come after the separate log lines.
    if let Some(logs) = json.get("log").and_then(Json::as_array) {
        for entry in logs {
            let level = entry.get("level").and_then(Json::as_str);
            let message = entry.get("message").and_then(Json::as_str);
            let (Some(level), Some(message)) = (level, message) else {
                continue;
            };
            match Level::parse(level) {
                Some(level) => note(Note::Log {
                    level,
                    message: message.to_string(),
                }),
                None => note(Note::UnknownLevel {
                    line: entry.to_string(),
                }),
            }
        }
    }
    Received::Response(Response {
        result: json
            .get("result")
            .and_then(Json::as_str)
            .map(str::to_string),
        result_classes: json
            .get("result_classes")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> impl FnMut() -> LineIn {
        let mut it: Vec<String> = text.split('\n').map(str::to_string).collect();
        it.reverse();
        move || it.pop().map_or(LineIn::Eof, LineIn::Line)
    }

    fn read(text: &str, p: Protocol) -> (Received, Vec<Note>) {
        let mut notes = Vec::new();
        let r = receive(&mut lines(text), p, &mut |n| notes.push(n));
        (r, notes)
    }

    #[test]
    fn headers() {
        let h = parse_header("git 0.0.1 v1 json_based action_policy");
        assert_eq!(h.protocol, Protocol::Json);
        assert!(h.action_policy);
        assert_eq!(h.note, None);
        let h = parse_header("x 1 v1");
        assert_eq!(
            (h.protocol, h.note),
            (Protocol::Lines, Some(ProtocolNote::Unspecified))
        );
        let h = parse_header("x 1 v1 line_based json_based");
        assert_eq!(
            (h.protocol, h.note),
            (Protocol::Json, Some(ProtocolNote::Ambiguous))
        );
        // The flags start at the fourth word, whatever the first three say.
        assert_eq!(parse_header("json_based 1 v1").protocol, Protocol::Lines);
        assert_eq!(agent_header(), "cf-agent 3.21.0 v1\n\n");
    }

    #[test]
    fn requests_in_both_variants() {
        let attrs = vec![
            ("zeta".to_string(), Json::from("1")),
            (
                "alpha".to_string(),
                serde_json::json!({"b": [1, 2], "a": "x"}),
            ),
        ];
        let r = Request {
            operation: "validate_promise",
            log_level: Some("info"),
            promise: Some(PromiseRequest {
                promise_type: "git",
                promiser: "/opt/x",
                line_number: 7,
                filename: "/p.cf",
                attributes: &attrs,
            }),
        };
        assert_eq!(
            r.encode(Protocol::Json),
            "{\"attributes\":{\"alpha\":{\"a\":\"x\",\"b\":[1,2]},\"zeta\":\"1\"},\"filename\":\"/p.cf\",\
             \"line_number\":7,\"log_level\":\"info\",\"operation\":\"validate_promise\",\
             \"promise_type\":\"git\",\"promiser\":\"/opt/x\"}\n\n"
        );
        let attrs = vec![("zeta".to_string(), Json::from("a=b"))];
        let r = Request {
            promise: Some(PromiseRequest {
                attributes: &attrs,
                ..r.promise.unwrap()
            }),
            ..r
        };
        assert_eq!(
            r.encode(Protocol::Lines),
            "operation=validate_promise\nlog_level=info\npromise_type=git\npromiser=/opt/x\n\
             line_number=7\nfilename=/p.cf\nattribute_zeta=a=b\n\n"
        );
        let t = Request {
            operation: "terminate",
            log_level: None,
            promise: None,
        };
        assert_eq!(
            t.encode(Protocol::Json),
            "{\"operation\":\"terminate\"}\n\n"
        );
        assert_eq!(t.encode(Protocol::Lines), "operation=terminate\n\n");
    }

    #[test]
    fn levels_read_as_cf_agent_reads_them() {
        assert_eq!(Level::parse("err"), Some(Level::Error));
        assert_eq!(Level::parse("WARN"), Some(Level::Warning));
        assert_eq!(Level::parse("c"), Some(Level::Critical));
        assert_eq!(Level::parse("inform"), Some(Level::Info));
        assert_eq!(Level::parse("bogus"), None);
        assert_eq!(Level::parse(""), None);
    }

    #[test]
    fn line_responses() {
        let (r, notes) = read(
            "log_info=Cloning x\nresult_classes=a,b\nbad line\nlog_oops\nresult=kept\nresult=repaired\n\nnext=1\n",
            Protocol::Lines,
        );
        assert_eq!(
            r,
            Received::Response(Response {
                result: Some("repaired".into()),
                result_classes: vec!["a".into(), "b".into()],
            })
        );
        assert_eq!(
            notes,
            vec![
                Note::Log {
                    level: Level::Info,
                    message: "Cloning x".into()
                },
                Note::InvalidLine("bad line".into()),
                Note::InvalidLogLine("log_oops".into()),
            ]
        );
        // A module that is gone answers nothing at all.
        assert_eq!(
            read("", Protocol::Lines).0,
            Received::Response(Response::default())
        );
    }

    #[test]
    fn json_responses() {
        let (r, notes) = read(
            "log_verbose=first\n{\"result\":\"repaired\",\"result_classes\":[\"x\"],\"log\":[{\"level\":\"info\",\"message\":\"second\"}]}\n\n",
            Protocol::Json,
        );
        assert_eq!(
            r,
            Received::Response(Response {
                result: Some("repaired".into()),
                result_classes: vec!["x".into()],
            })
        );
        let order: Vec<&str> = notes
            .iter()
            .map(|n| match n {
                Note::Log { message, .. } => message.as_str(),
                _ => "?",
            })
            .collect();
        assert_eq!(order, ["first", "second"]);
        assert_eq!(
            read("not json\n\n", Protocol::Json),
            (Received::Broken, vec![Note::InvalidJson])
        );
        assert_eq!(
            read("log_info=only a log\n\n", Protocol::Json).0,
            Received::Broken
        );
    }

    #[test]
    fn a_response_stops_where_cf_agent_stops() {
        // After a line that is not JSON, the rest of that response is read
        // as the next one: the empty line makes it an empty response.
        let mut src = lines("garbage\n\n{\"result\":\"valid\"}\n\n");
        let mut notes = Vec::new();
        let first = receive(&mut src, Protocol::Json, &mut |n| notes.push(n));
        let second = receive(&mut src, Protocol::Json, &mut |n| notes.push(n));
        let third = receive(&mut src, Protocol::Json, &mut |n| notes.push(n));
        assert_eq!((first, second), (Received::Broken, Received::Broken));
        assert_eq!(notes, vec![Note::InvalidJson, Note::IncompleteJson]);
        assert!(matches!(third, Received::Response(r) if r.result.as_deref() == Some("valid")));
    }

    #[test]
    fn a_silent_module_times_out() {
        let mut n = 0;
        let mut src = move || {
            n += 1;
            if n == 1 {
                LineIn::Line("log_info=working".into())
            } else {
                LineIn::TimedOut
            }
        };
        let r = receive(&mut src, Protocol::Json, &mut |_| {});
        assert_eq!(r, Received::TimedOut);
    }
}
