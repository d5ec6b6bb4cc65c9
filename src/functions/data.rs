//! Data containers and reading data: JSON, YAML, CSV and env files,
//! classic arrays parsed from text, merging, expansion, serialization and
//! validation, and `type`.

use super::args::{Args, collect, value_to_arc_json};
use super::regexes::define_var;
use super::strings::{HASH_ALGORITHMS, digest, hex, split_regex};
use super::{FnError, FnResult, FnSpec, class_result, parses_file, spec};
use crate::eval::EvalContext;
use crate::eval::context::MergedData;
use crate::values::json;
use crate::values::regex::Regex;
use crate::values::{DataType, Value};
use serde_json::{Map, Value as Json};
use std::sync::Arc;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("parsejson", 1, Some(1), parsejson).pure(),
    parses_file("readjson", 1, Some(2), 0, readjson),
    spec("parseyaml", 1, Some(1), parseyaml).pure(),
    parses_file("readyaml", 1, Some(2), 0, readyaml),
    parses_file("readcsv", 1, Some(2), 0, readcsv),
    parses_file("readdata", 2, Some(2), 0, readdata),
    spec("readenvfile", 1, Some(2), readenvfile),
    spec("readfile", 1, Some(2), readfile),
    spec("parseintarray", 6, Some(6), parseintarray).pure(),
    spec("parserealarray", 6, Some(6), parserealarray).pure(),
    spec("parsestringarray", 6, Some(6), parsestringarray).pure(),
    spec("parsestringarrayidx", 6, Some(6), parsestringarrayidx).pure(),
    spec("readintarray", 6, Some(6), readintarray),
    spec("peers", 3, Some(3), peers),
    spec("peerleader", 3, Some(3), peerleader),
    spec("peerleaders", 3, Some(3), peerleaders),
    spec("readrealarray", 6, Some(6), readrealarray),
    spec("readstringarray", 6, Some(6), readstringarray),
    spec("readstringarrayidx", 6, Some(6), readstringarrayidx),
    spec("readintlist", 5, Some(5), readintlist),
    spec("readreallist", 5, Some(5), readreallist),
    spec("readstringlist", 5, Some(5), readstringlist),
    spec("data_readstringarray", 5, Some(5), data_readstringarray),
    spec(
        "data_readstringarrayidx",
        5,
        Some(5),
        data_readstringarrayidx,
    ),
    spec("mergedata", 0, None, mergedata).pure(),
    spec("data_expand", 1, Some(1), data_expand).pure(),
    spec("storejson", 1, Some(1), storejson).pure(),
    spec("validjson", 1, Some(2), validjson).pure(),
    spec("validdata", 2, Some(3), validdata).pure(),
    spec("type", 1, Some(2), type_fn).pure(),
    spec("classfiltercsv", 2, Some(4), classfiltercsv),
    spec("string_mustache", 1, Some(2), string_mustache).pure(),
    spec("hashmatch", 3, Some(3), hashmatch),
    spec("getfields", 4, Some(4), getfields),
    spec("makerule", 2, Some(2), makerule),
];

// ---- reading files ------------------------------------------------------------

/// Reads at most `max` bytes (all when `max` is 0 or absent) as text.
fn read_text(
    ctx: &EvalContext,
    args: &Args,
    i: usize,
    max_index: Option<usize>,
) -> Result<String, FnError> {
    read_text_as(ctx, args, i, max_index, false)
}

/// A CSV or env file: one that cannot be opened (missing, not allowed)
/// fails the function without an error line, as cf-agent 3.21's parsers
/// of those formats only tell it under `-v`; one that opens but cannot be
/// read (a directory) is an error there too.
fn read_text_quiet_open(
    ctx: &EvalContext,
    args: &Args,
    i: usize,
    max_index: Option<usize>,
) -> Result<String, FnError> {
    read_text_as(ctx, args, i, max_index, true)
}

fn read_text_as(
    ctx: &EvalContext,
    args: &Args,
    i: usize,
    max_index: Option<usize>,
    quiet_open: bool,
) -> Result<String, FnError> {
    let max = match max_index {
        Some(m) if m < args.len() => args.int(m, "max_bytes")?,
        _ => 0,
    };
    // Only what was asked is read: a bound on a huge file or a device
    // such as /dev/zero reads that many bytes and stops.
    let bound = u64::try_from(max).ok().filter(|m| *m > 0);
    read_text_upto(ctx, args, i, bound, quiet_open)
}

/// The text of the file argument `i`, at most `bound` bytes of it.
fn read_text_upto(
    ctx: &EvalContext,
    args: &Args,
    i: usize,
    bound: Option<u64>,
    quiet_open: bool,
) -> Result<String, FnError> {
    let path = args.str(i, "file")?;
    let bytes = ctx.host().plain().read_upto(path, bound).map_err(|e| {
        let msg = format!("cannot read '{path}': {e}");
        let cannot_open = matches!(
            e.kind(),
            std::io::ErrorKind::NotFound
                | std::io::ErrorKind::PermissionDenied
                | std::io::ErrorKind::NotADirectory
        );
        if quiet_open && cannot_open {
            args.fail_quietly(msg)
        } else {
            args.fail(msg)
        }
    })?;
    // Valid UTF-8 (the usual case) is checked a word at a time and kept
    // without a copy; only invalid text pays for the replacement.
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// A file read as cf-agent reads it for `readfile` and the `read*list`,
/// `read*array` and `data_readstringarray*` functions: a file of a single
/// line loses its line ending (`"abc\n"` is `abc`), one of more lines
/// keeps every byte.
fn read_text_chomped(
    ctx: &EvalContext,
    args: &Args,
    i: usize,
    max_index: Option<usize>,
) -> Result<String, FnError> {
    let mut text = read_text(ctx, args, i, max_index)?;
    if let Some(end) = text.find(['\n', '\r']) {
        // Only a final "\n" goes: a lone "\r" at the end stays, as there.
        if end + 1 == text.len() && text.ends_with('\n') {
            text.truncate(end);
        }
    }
    Ok(text)
}

fn readfile(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("readfile", a);
    let mut text = read_text_chomped(ctx, &args, 0, Some(1))?;
    // cf-agent keeps the contents as a C string, so they end at the first
    // NUL byte (`readfile("/proc/1/cmdline")` is argv[0]).
    if let Some(nul) = text.find('\0') {
        text.truncate(nul);
    }
    Ok(Value::str(text))
}

/// JSON read by `parsejson`, `readjson` and `readdata`: an array or an
/// object.
fn parse_json_arg(args: &Args, text: &str) -> FnResult {
    let j = json::parse(text).map_err(|e| args.fail(format!("invalid JSON: {e}")))?;
    if !j.is_array() && !j.is_object() {
        return Err(args.fail("the JSON is not an array or an object"));
    }
    Ok(Value::data(j))
}

fn parsejson(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("parsejson", a);
    parse_json_arg(&args, args.str(0, "json")?)
}

fn readjson(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("readjson", a);
    let text = read_text(ctx, &args, 0, Some(1))?;
    parse_json_arg(&args, &text)
}

// ---- YAML ---------------------------------------------------------------------

/// YAML to JSON, as cf-agent converts it: mappings keep their order and
/// their keys are strings; quoted scalars are strings; plain scalars are
/// `null` (`~`, `null`, empty), booleans (`true`/`yes`/`on`,
/// `false`/`no`/`off`), integers, reals, or else strings. Only the first
/// document is read; aliases repeat their anchor's value.
pub fn parse_yaml(text: &str) -> Result<Json, String> {
    use yaml_rust2::parser::Parser;
    let mut b = YamlBuilder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut b, false).map_err(|e| e.to_string())?;
    let mut j = b.doc.unwrap_or(Json::Null);
    json::normalize(&mut j);
    Ok(j)
}

#[derive(Default)]
struct YamlBuilder {
    stack: Vec<(Json, Option<String>, usize)>,
    anchors: std::collections::HashMap<usize, Json>,
    doc: Option<Json>,
}

impl YamlBuilder {
    fn push_value(&mut self, v: Json, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, v.clone());
        }
        match self.stack.last_mut() {
            None => {
                if self.doc.is_none() {
                    self.doc = Some(v);
                }
            }
            Some((Json::Array(a), _, _)) => a.push(v),
            Some((Json::Object(m), key, _)) => match key.take() {
                Some(k) => {
                    m.insert(k, v);
                }
                None => {
                    *key = Some(match v {
                        Json::String(s) => s,
                        Json::Null => String::new(),
                        other => json::primitive_text(&other)
                            .map(|t| t.into_owned())
                            .unwrap_or_else(|| json::write_compact(&other)),
                    });
                }
            },
            Some(_) => {}
        }
    }
}

fn plain_scalar(s: &str) -> Json {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Json::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
            return Json::Bool(true);
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => {
            return Json::Bool(false);
        }
        _ => {}
    }
    yaml_number(s).unwrap_or_else(|| Json::String(s.to_string()))
}

/// A plain scalar that starts with a number is that number, as cf-agent
/// reads it with its JSON number reader: up to the first blank, comma or
/// closing bracket (a folded `200 300` is 200), with an optional leading
/// minus, no leading zeros, digits around a dot and an exponent.
fn yaml_number(s: &str) -> Option<Json> {
    let end = s
        .find(|c: char| c.is_ascii_whitespace() || matches!(c, ',' | ']' | '}'))
        .unwrap_or(s.len());
    let token = &s[..end];
    let (mut zero_start, mut dot, mut exp) = (false, false, false);
    let mut prev: Option<u8> = None;
    for b in token.bytes() {
        let prev_digit = prev.is_some_and(|p| p.is_ascii_digit());
        match b {
            b'-' if prev.is_some() && !matches!(prev, Some(b'e' | b'E')) => return None,
            b'+' if !matches!(prev, Some(b'e' | b'E')) => return None,
            b'-' | b'+' => {}
            b'0' => {
                if zero_start && !dot && !exp {
                    return None;
                }
                zero_start |= prev.is_none();
            }
            b'.' if !prev_digit => return None,
            b'.' => dot = true,
            b'e' | b'E' if exp || !prev_digit => return None,
            b'e' | b'E' => exp = true,
            _ if zero_start && !dot && !exp => return None,
            _ if !b.is_ascii_digit() => return None,
            _ => {}
        }
        prev = Some(b);
    }
    if !prev.is_some_and(|p| p.is_ascii_digit()) {
        return None;
    }
    if !dot && let Ok(i) = token.parse::<i64>() {
        return Some(Json::from(i));
    }
    token
        .parse::<f64>()
        .ok()
        .map(|f| Json::Number(json::real_number(f)))
}

impl yaml_rust2::parser::MarkedEventReceiver for YamlBuilder {
    fn on_event(&mut self, ev: yaml_rust2::Event, _: yaml_rust2::scanner::Marker) {
        use yaml_rust2::Event;
        use yaml_rust2::scanner::TScalarStyle;
        match ev {
            Event::Scalar(s, style, anchor, _) => {
                // A mapping's key stays the text it is (`y:` is the key
                // "y", not true).
                let is_key = matches!(self.stack.last(), Some((Json::Object(_), None, _)));
                let v = if style == TScalarStyle::Plain && !is_key {
                    plain_scalar(&s)
                } else {
                    Json::String(s)
                };
                self.push_value(v, anchor);
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push((Json::Array(Vec::new()), None, anchor))
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push((Json::Object(Map::new()), None, anchor))
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((v, _, anchor)) = self.stack.pop() {
                    self.push_value(v, anchor);
                }
            }
            Event::Alias(id) => {
                let v = self.anchors.get(&id).cloned().unwrap_or(Json::Null);
                self.push_value(v, 0);
            }
            _ => {}
        }
    }
}

/// As parsejson: a document that is a scalar (any text that is not YAML
/// reads as one) is an error, and the call fails.
fn parseyaml(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("parseyaml", a);
    let j =
        parse_yaml(args.str(0, "yaml")?).map_err(|e| args.fail(format!("invalid YAML: {e}")))?;
    if !j.is_array() && !j.is_object() {
        return Err(args.fail("the YAML is not a mapping or a sequence"));
    }
    Ok(Value::data(j))
}

fn readyaml(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("readyaml", a);
    let text = read_text(ctx, &args, 0, Some(1))?;
    yaml_file_data(&args, &text)
}

/// A YAML file's data: as in cf-agent, a file whose document is a single
/// scalar (any text that is not YAML reads as one) gives no data
/// (01_vars/02_functions/readdata_yaml.cf).
fn yaml_file_data(args: &Args, text: &str) -> FnResult {
    let j = parse_yaml(text).map_err(|e| args.fail(format!("invalid YAML: {e}")))?;
    if !j.is_array() && !j.is_object() {
        return Err(args.fail("the YAML file holds no mapping or sequence"));
    }
    Ok(Value::data(j))
}

// ---- CSV and env files ----------------------------------------------------------

/// CSV records as cf-agent reads them: a record ends only at a CRLF
/// outside double quotes (a bare newline belongs to the field; text after
/// the last CRLF is a last record), and a record cf-agent's parser refuses
/// (a quote inside an unquoted field, text after a closing quote, a quote
/// left open) is left out (01_vars/02_functions/readdata.cf).
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    csv_lines(text).filter_map(csv_record).collect()
}

/// The records of a CSV text, each with its CRLF: quotes toggle, and a
/// CRLF outside them ends the record.
fn csv_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let bytes = rest.as_bytes();
        let mut in_quotes = false;
        let mut end = bytes.len();
        for i in 0..bytes.len() {
            match bytes[i] {
                b'"' => in_quotes = !in_quotes,
                b'\n' if !in_quotes && i > 0 && bytes[i - 1] == b'\r' => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        let (line, tail) = rest.split_at(end);
        rest = tail;
        Some(line)
    })
}

/// Where the CSV reader is within a record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Csv {
    /// At the start of the record.
    Start,
    /// In blanks before a field's text (they belong to it).
    Blanks,
    /// In an unquoted field.
    Plain,
    /// Just after a comma.
    Comma,
    /// Just after a field's opening quote.
    Opened,
    /// Inside quotes.
    Quoted,
    /// Just after a quote inside a quoted field: the closing one, or the
    /// first of a doubled one.
    QuoteSeen,
    /// In blanks after a closing quote.
    AfterQuote,
    /// Refused.
    Bad,
}

/// One CSV record's fields, or `None` when cf-agent's parser refuses it.
/// Blanks are space, tab, CR and LF; an unquoted field keeps its blanks
/// but loses a final CRLF, a quoted one loses the blanks after its closing
/// quote.
fn csv_record(line: &str) -> Option<Vec<String>> {
    let blank = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut state = Csv::Start;
    for c in line.chars() {
        state = match (state, c) {
            // A refusal shows at the next character (one on the last
            // character of the text goes unnoticed, as there).
            (Csv::Bad, _) => return None,
            (Csv::Start | Csv::Blanks | Csv::Comma, ',') => {
                fields.push(std::mem::take(&mut field));
                Csv::Comma
            }
            (Csv::Start | Csv::Blanks | Csv::Comma, '"') => {
                field.clear();
                Csv::Opened
            }
            (Csv::Start | Csv::Blanks | Csv::Comma, c) => {
                field.push(c);
                if blank(c) { Csv::Blanks } else { Csv::Plain }
            }
            (Csv::Plain, ',') => {
                fields.push(std::mem::take(&mut field));
                Csv::Comma
            }
            (Csv::Plain, '"') => Csv::Bad,
            (Csv::Plain, c) => {
                field.push(c);
                Csv::Plain
            }
            (Csv::Opened, '"') => {
                field.clear();
                Csv::QuoteSeen
            }
            (Csv::Quoted, '"') => Csv::QuoteSeen,
            (Csv::Opened | Csv::Quoted, c) => {
                field.push(c);
                Csv::Quoted
            }
            (Csv::QuoteSeen | Csv::AfterQuote, ',') => {
                fields.push(std::mem::take(&mut field));
                Csv::Comma
            }
            (Csv::QuoteSeen, '"') => {
                field.push('"');
                Csv::Quoted
            }
            (Csv::QuoteSeen | Csv::AfterQuote, c) if blank(c) => Csv::AfterQuote,
            (Csv::QuoteSeen | Csv::AfterQuote, _) => Csv::Bad,
        };
    }
    match state {
        Csv::Opened | Csv::Quoted => return None,
        Csv::Bad => field.clear(),
        Csv::Plain | Csv::Blanks if field.ends_with("\r\n") => {
            field.truncate(field.len() - 2);
        }
        _ => {}
    }
    fields.push(field);
    Some(fields)
}

fn csv_json(rows: Vec<Vec<String>>) -> Json {
    Json::Array(
        rows.into_iter()
            .map(|r| Json::Array(r.into_iter().map(Json::String).collect()))
            .collect(),
    )
}

/// cf-agent's byte limit when `readcsv` is given none (its `inf`).
const CSV_DEFAULT_MAX_BYTES: u64 = 999_999_999;

fn readcsv(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("readcsv", a);
    let max = match args.len() {
        0 | 1 => CSV_DEFAULT_MAX_BYTES,
        _ => u64::try_from(args.int(1, "max_bytes")?).unwrap_or(0),
    };
    // One byte past the limit shows whether a record goes beyond it.
    let text = read_text_upto(ctx, &args, 0, Some(max.saturating_add(1)), true)?;
    csv_file_data(&args, &text, max)
}

/// A CSV file's records within `max` bytes; cf-agent warns when there are
/// none, an empty file included.
fn csv_file_data(args: &Args, text: &str, max: u64) -> FnResult {
    let rows = parse_csv_within(text, max);
    if rows.is_empty() {
        crate::warn!(
            "function '{}': nothing was parsed from CSV file '{}' (records end with CRLF)",
            args.name,
            args.str(0, "file")?
        );
    }
    Ok(Value::data(csv_json(rows)))
}

/// The CSV records of `text` as cf-agent reads them with a byte limit:
/// whole records (each with its CRLF) while their bytes add up to at most
/// `max`; the record that goes beyond it and all after it are left out.
fn parse_csv_within(text: &str, max: u64) -> Vec<Vec<String>> {
    let mut used = 0u64;
    csv_lines(text)
        .take_while(|line| {
            used = used.saturating_add(line.len() as u64);
            used <= max
        })
        .filter_map(csv_record)
        .collect()
}

/// `KEY=value` lines as cf-agent reads an env file: blank lines and
/// comments skipped, lines without `=` or without a key ignored, the key
/// taken as written (cf-agent keeps `export B` and `1BAD`) and the value
/// read by [`env_value`]; a later key replaces an earlier one.
pub fn parse_env(text: &str) -> Json {
    let mut m = Map::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let k = k.trim();
        if k.is_empty() {
            continue;
        }
        if let Some(v) = env_value(v.trim()) {
            m.insert(k.to_string(), Json::String(v));
        }
    }
    Json::Object(m)
}

/// An env file's value: a quote (double or single) at its start opens it
/// and the same quote closes it, whatever follows is dropped, and an
/// unclosed one runs to the end of the line; unquoted, a bare quote makes
/// the line invalid (`None`). A backslash takes the next character as it
/// is, except `\n`, a newline.
fn env_value(v: &str) -> Option<String> {
    let mut chars = v.chars();
    let opening = match v.chars().next() {
        Some(q @ ('"' | '\'')) => {
            chars.next();
            Some(q)
        }
        _ => None,
    };
    let mut out = String::new();
    while let Some(c) = chars.next() {
        if Some(c) == opening {
            break;
        }
        match c {
            '"' | '\'' if opening.is_none() => return None,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some(next) => out.push(next),
                None => break,
            },
            c => out.push(c),
        }
    }
    Some(out)
}

fn readenvfile(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("readenvfile", a);
    let text = read_text_quiet_open(ctx, &args, 0, Some(1))?;
    Ok(Value::data(parse_env(&text)))
}

/// A data file read as `readdata(path, "auto")` reads it (the module
/// protocol's `&name=file` lines).
pub fn read_data_file(ctx: &mut EvalContext, path: &str) -> Result<Value, String> {
    readdata(ctx, &[Value::str(path), Value::str("auto")]).map_err(|e| e.to_string())
}

fn readdata(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("readdata", a);
    let path = args.str(0, "file")?;
    let mut kind = args.option(1, "type", &["CSV", "YAML", "JSON", "ENV", "auto"])?;
    if kind == "auto" {
        let lower = path.to_ascii_lowercase();
        kind = if lower.ends_with(".csv") {
            "CSV"
        } else if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            "YAML"
        } else if lower.ends_with(".env") {
            "ENV"
        } else {
            "JSON"
        };
    }
    let text = read_text_as(ctx, &args, 0, None, matches!(kind, "CSV" | "ENV"))?;
    match kind {
        "CSV" => csv_file_data(&args, &text, CSV_DEFAULT_MAX_BYTES),
        "ENV" => Ok(Value::data(parse_env(&text))),
        "YAML" => yaml_file_data(&args, &text),
        _ => parse_json_arg(&args, &text),
    }
}

// ---- classic arrays and lists from text ------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Field {
    Str,
    Int,
    Real,
}

/// Text to split as the array and list functions take it: the arguments
/// from `first` on are a comment pattern, a split pattern, the most entries
/// and the most bytes (negative: no limit).
struct Splitting {
    /// The text cut to the most bytes (on a character boundary), comments
    /// removed.
    text: String,
    split: Arc<Regex>,
    max_entries: i64,
}

fn splitting(
    ctx: &mut EvalContext,
    args: &Args,
    text: &str,
    first: usize,
) -> Result<Splitting, FnError> {
    let comment = args.str(first, "comment")?;
    let split = args.regex(ctx, first + 1, "split")?;
    let max_entries = args.int(first + 2, "max_entries")?;
    let max_bytes = args.int(first + 3, "max_bytes")?;
    // 0 reads the whole file, as cf-agent's CfReadFile does (ncf's
    // variable_iterator_from_file gives readstringlist 0).
    let text = match usize::try_from(max_bytes) {
        Ok(max) if max > 0 => &text[..text.floor_char_boundary(max)],
        _ => text,
    };
    Ok(Splitting {
        text: strip_comments(ctx, args, text, comment)?,
        split,
        max_entries,
    })
}

/// The lines of `text` after removing comments, at most `max_entries`,
/// each split into fields.
fn table(
    ctx: &mut EvalContext,
    args: &Args,
    text: &str,
    first: usize,
) -> Result<Vec<Vec<String>>, FnError> {
    let Splitting {
        text,
        split,
        max_entries,
    } = splitting(ctx, args, text, first)?;
    let mut rows = Vec::new();
    for line in text.split('\n') {
        if line.trim().is_empty() {
            continue;
        }
        if max_entries >= 0 && rows.len() as i64 >= max_entries {
            break;
        }
        rows.push(split_regex(&split, line, usize::MAX));
    }
    Ok(rows)
}

fn strip_comments(
    ctx: &mut EvalContext,
    args: &Args,
    text: &str,
    comment: &str,
) -> Result<String, FnError> {
    if comment.is_empty() {
        return Ok(text.to_string());
    }
    // A comment pattern that does not compile is an error, and the text
    // is read with nothing removed, as cf-agent reads it.
    let re = match ctx.regexes.get(comment) {
        Ok(re) => re,
        Err(e) => {
            crate::error!("function '{}': parameter 'comment': {e}", args.name);
            return Ok(text.to_string());
        }
    };
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for (s, e) in re.find_all(text) {
        out.push_str(&text[pos..s]);
        pos = e;
    }
    out.push_str(&text[pos..]);
    Ok(out)
}

fn check_field(args: &Args, kind: Field, s: &str) -> Result<(), FnError> {
    let ok = match kind {
        Field::Str => true,
        Field::Int => crate::values::number::parse_int(s).is_ok(),
        Field::Real => crate::values::number::parse_real(s).is_ok(),
    };
    if ok {
        Ok(())
    } else {
        Err(args.fail(format!(
            "'{s}' is not {}",
            if kind == Field::Int {
                "an integer"
            } else {
                "a real number"
            }
        )))
    }
}

/// Defines `array[key][i]` (or `array[line][i]`) and returns the number of
/// lines read.
fn define_array(
    ctx: &mut EvalContext,
    args: &Args,
    rows: Vec<Vec<String>>,
    kind: Field,
    by_index: bool,
) -> FnResult {
    let array = args.str(0, "array")?;
    for row in &rows {
        for f in row {
            // A field that is no number stops cf-agent ("Could not
            // convert token to int"), as a bad argument does.
            if let Err(FnError::Failed(m)) = check_field(args, kind, f) {
                let m = format!("{m}; {}", crate::eval::rval::STOPS_CF_AGENT);
                ctx.fatal.get_or_insert_with(|| m.clone());
                return Err(FnError::Failed(m));
            }
        }
    }
    let n = rows.len();
    for (line, row) in rows.into_iter().enumerate() {
        // An integer array holds the numbers read (` 5` is 5, `2k` 2000),
        // its key too, as cf-agent stores them; reals keep their text.
        let row: Vec<String> = match kind {
            Field::Int => row
                .into_iter()
                .map(|f| crate::values::number::parse_int(&f).map_or(f, |n| n.to_string()))
                .collect(),
            _ => row,
        };
        let key = if by_index {
            line.to_string()
        } else {
            row.first().cloned().unwrap_or_default()
        };
        for (i, f) in row.into_iter().enumerate() {
            let dtype = match kind {
                Field::Str => DataType::String,
                Field::Int => DataType::Int,
                Field::Real => DataType::Real,
            };
            define_var(
                ctx,
                &format!("{array}[{key}][{i}]"),
                Value::Scalar(f),
                dtype,
                // cf-agent tags every one of them with its common helper.
                "buildlinearray",
            );
        }
    }
    Ok(Value::str(n.to_string()))
}

fn parse_array(
    name: &'static str,
    ctx: &mut EvalContext,
    a: &[Value],
    kind: Field,
    idx: bool,
) -> FnResult {
    let args = Args::new(name, a);
    let text = args.str(1, "string")?.to_string();
    let rows = table(ctx, &args, &text, 2)?;
    define_array(ctx, &args, rows, kind, idx)
}

fn read_array(
    name: &'static str,
    ctx: &mut EvalContext,
    a: &[Value],
    kind: Field,
    idx: bool,
) -> FnResult {
    let args = Args::new(name, a);
    // A file that cannot be read defines no entry: cf-agent says so and
    // returns 0 (ReadArray).
    let text = match read_text_chomped(ctx, &args, 1, None) {
        Ok(t) => t,
        Err(FnError::Failed(m)) => {
            crate::error!("{m}");
            return Ok(Value::str("0"));
        }
        Err(e) => return Err(e),
    };
    let rows = table(ctx, &args, &text, 2)?;
    define_array(ctx, &args, rows, kind, idx)
}

fn parseintarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    parse_array("parseintarray", ctx, a, Field::Int, false)
}
fn parserealarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    parse_array("parserealarray", ctx, a, Field::Real, false)
}
fn parsestringarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    parse_array("parsestringarray", ctx, a, Field::Str, false)
}
fn parsestringarrayidx(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    parse_array("parsestringarrayidx", ctx, a, Field::Str, true)
}
fn readintarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    read_array("readintarray", ctx, a, Field::Int, false)
}
fn readrealarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    read_array("readrealarray", ctx, a, Field::Real, false)
}
fn readstringarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    read_array("readstringarray", ctx, a, Field::Str, false)
}
fn readstringarrayidx(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    read_array("readstringarrayidx", ctx, a, Field::Str, true)
}

fn read_list(name: &'static str, ctx: &mut EvalContext, a: &[Value], kind: Field) -> FnResult {
    let args = Args::new(name, a);
    let text = read_text_chomped(ctx, &args, 0, None)?;
    let Splitting {
        text,
        split,
        max_entries,
    } = splitting(ctx, &args, &text, 1)?;
    let mut out = Vec::new();
    for item in split_regex(&split, &text, usize::MAX) {
        if item.is_empty() {
            continue;
        }
        if max_entries >= 0 && out.len() as i64 >= max_entries {
            break;
        }
        check_field(&args, kind, &item)?;
        out.push(item);
    }
    Ok(Value::List(out))
}

fn readintlist(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    read_list("readintlist", ctx, a, Field::Int)
}
fn readreallist(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    read_list("readreallist", ctx, a, Field::Real)
}
fn readstringlist(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    read_list("readstringlist", ctx, a, Field::Str)
}

fn data_readstringarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("data_readstringarray", a);
    let text = read_text_chomped(ctx, &args, 0, None)?;
    let rows = table(ctx, &args, &text, 1)?;
    let mut m = Map::new();
    for mut row in rows {
        if row.is_empty() {
            continue;
        }
        let key = row.remove(0);
        m.insert(
            key,
            Json::Array(row.into_iter().map(Json::String).collect()),
        );
    }
    Ok(Value::data(Json::Object(m)))
}

fn data_readstringarrayidx(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("data_readstringarrayidx", a);
    let text = read_text_chomped(ctx, &args, 0, None)?;
    let rows = table(ctx, &args, &text, 1)?;
    Ok(Value::data(csv_json(rows)))
}

// ---- containers ---------------------------------------------------------------

/// `mergedata(a, b, ...)`: objects merge key by key (later wins), arrays
/// concatenate; an array merged with an object counts as an object keyed
/// by position.
fn mergedata(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("mergedata", a);
    if a.is_empty() {
        return Err(args.fail("needs at least one argument, a container or a list"));
    }
    let mut parts: Vec<Arc<Json>> = Vec::with_capacity(a.len());
    for i in 0..a.len() {
        let v = args.collect(ctx, i, "data")?;
        parts.push(value_to_arc_json(v));
    }
    // Each pass calls it again on the same containers (a pure function of
    // them): the same containers give the result already made.
    let key = memo_key(a);
    if let Some(key) = &key
        && let Some(m) = ctx.merged.get(key)
        && m.parts.len() == parts.len()
        && m.parts.iter().zip(&parts).all(|(x, y)| Arc::ptr_eq(x, y))
    {
        return Ok(Value::Data(m.result.clone()));
    }
    let merged = merge_parts(&args, parts.clone())?;
    if let (Some(key), Value::Data(result)) = (key, &merged) {
        let result = result.clone();
        ctx.merged.insert(key, MergedData { parts, result });
    }
    Ok(merged)
}

/// The arguments of a call as one key, when they are all texts.
fn memo_key(a: &[Value]) -> Option<String> {
    let mut key = String::new();
    for v in a {
        key.push_str(v.as_scalar()?);
        key.push('\u{1}');
    }
    Some(key)
}

fn merge_parts(args: &Args, mut parts: Vec<Arc<Json>>) -> FnResult {
    if parts.len() == 1 {
        return Ok(Value::Data(parts.remove(0)));
    }
    if parts.is_empty() {
        return Ok(Value::data(Json::Object(Map::new())));
    }
    for p in &parts {
        if !p.is_array() && !p.is_object() {
            return Err(args.fail("every argument must be a container"));
        }
    }
    if parts.iter().all(|p| p.is_array()) {
        let mut out = Vec::new();
        for p in parts {
            if let Json::Array(arr) = Arc::unwrap_or_clone(p) {
                out.extend(arr);
            }
        }
        return Ok(Value::data(Json::Array(out)));
    }
    let mut out = Map::new();
    for p in parts {
        match Arc::unwrap_or_clone(p) {
            Json::Object(m) => {
                for (k, v) in m {
                    out.insert(k, v);
                }
            }
            Json::Array(arr) => {
                for (i, v) in arr.into_iter().enumerate() {
                    out.insert(i.to_string(), v);
                }
            }
            _ => {}
        }
    }
    Ok(Value::data(Json::Object(out)))
}

fn expand_json(ctx: &EvalContext, j: &Json) -> Json {
    match j {
        Json::String(s) => Json::String(ctx.expand(s).text),
        Json::Array(a) => Json::Array(a.iter().map(|v| expand_json(ctx, v)).collect()),
        Json::Object(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (ctx.expand(k).text, expand_json(ctx, v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn data_expand(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("data_expand", a);
    let v = args.collect(ctx, 0, "data")?;
    let j = value_to_arc_json(v);
    Ok(Value::data(expand_json(ctx, &j)))
}

fn storejson(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("storejson", a);
    let v = args.collect(ctx, 0, "data")?;
    match v {
        Value::Data(d) => Ok(Value::str(json::write_pretty(&d))),
        Value::List(l) => Ok(Value::str(json::write_pretty(&Json::Array(
            l.into_iter().map(Json::String).collect(),
        )))),
        Value::Scalar(_) => Err(args.fail("the argument is not a list or data container")),
    }
}

fn validjson(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("validjson", a);
    let text = args.str(0, "json")?;
    let strict = if a.len() > 1 {
        args.boolean(1, "strict")?
    } else {
        false
    };
    Ok(class_result(match json::parse(text) {
        Ok(j) => !strict || j.is_array() || j.is_object(),
        Err(_) => false,
    }))
}

fn validdata(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("validdata", a);
    let text = args.str(0, "data")?;
    args.option(1, "type", &["JSON"])?;
    // The optional strict argument is CFEngine 3.26's: only an array or
    // an object, what a data container can hold, is valid then.
    let strict = if a.len() > 2 {
        args.boolean(2, "strict")?
    } else {
        false
    };
    Ok(class_result(match json::parse(text) {
        Ok(j) => !strict || j.is_array() || j.is_object(),
        Err(_) => false,
    }))
}

/// `type(name)`: the variable's type; with details, where it comes from
/// (`policy` or `data`) and the type of a data node.
fn type_fn(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("type", a);
    let name = args.str(0, "variable")?;
    let detail = if a.len() > 1 {
        args.boolean(1, "detail")?
    } else {
        false
    };
    Ok(Value::str(type_text(ctx, name, detail)))
}

/// What `type(name, detail)` answers; `is_type` compares with it.
pub(super) fn type_text(ctx: &EvalContext, name: &str, detail: bool) -> String {
    let declared = ctx.lookup_variable(name).map(|v| v.dtype);
    let value = ctx.lookup(name);
    match (declared, value) {
        (Some(DataType::Data), Some(Value::Data(d))) | (None, Some(Value::Data(d))) => {
            if detail {
                format!("data {}", json_kind(&d))
            } else {
                "data".to_string()
            }
        }
        (None, Some(Value::Scalar(_))) => {
            // A primitive inside a container: find its JSON type.
            let kind = data_node_kind(ctx, name).unwrap_or("string");
            if detail {
                format!("data {kind}")
            } else {
                "data".to_string()
            }
        }
        (Some(t), Some(_)) => {
            if detail {
                format!("policy {}", t.as_str())
            } else {
                t.as_str().to_string()
            }
        }
        // cf-agent calls what it cannot find a policy variable of no type.
        _ if detail => "policy none".to_string(),
        _ => "none".to_string(),
    }
}

/// The JSON type of `base[i1][i2]...` inside a data container.
fn data_node_kind(ctx: &EvalContext, name: &str) -> Option<&'static str> {
    let r = crate::values::refs::VarRef::parse(name);
    let mut prefix = String::new();
    if let Some(ns) = r.ns {
        prefix.push_str(ns);
        prefix.push(':');
    }
    if let Some(scope) = r.scope {
        prefix.push_str(scope);
        prefix.push('.');
    }
    let base = ctx.lookup(&format!("{prefix}{}", r.base))?;
    let Value::Data(d) = base else {
        return None;
    };
    let mut cur: &Json = &d;
    for idx in &r.indices() {
        cur = match cur {
            Json::Object(m) => m.get(*idx)?,
            Json::Array(a) => a.get(idx.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(json_kind(cur))
}

fn json_kind(j: &Json) -> &'static str {
    match j {
        Json::Object(_) => "object",
        Json::Array(_) => "array",
        Json::String(_) => "string",
        Json::Number(n) if n.is_f64() => "real",
        Json::Number(_) => "int",
        Json::Bool(_) => "boolean",
        Json::Null => "null",
    }
}

/// `classfiltercsv(file, has_heading, class_column, sort_column)`: the
/// rows whose class expression (in `class_column`) holds, as objects keyed
/// by heading (or by position), without the class column.
fn classfiltercsv(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("classfiltercsv", a);
    let text = read_text(ctx, &args, 0, None)?;
    let heading = if a.len() > 1 {
        args.boolean(1, "has_heading")?
    } else {
        false
    };
    let class_col = if a.len() > 2 {
        args.int(2, "class_column")?
    } else {
        0
    }
    .max(0) as usize;
    let sort_col = if a.len() > 3 {
        Some(args.int(3, "sort_column")?.max(0) as usize)
    } else {
        None
    };
    let rows = csv_rows_of_equal_length("classfiltercsv", parse_csv(&text));
    let columns = rows.first().map_or(0, Vec::len);
    if !rows.is_empty() && class_col >= columns {
        return Err(args.fail(format!(
            "Class expression index is out of bounds. Row length {columns}, index {class_col}"
        )));
    }
    let mut rows = rows.into_iter();
    let names: Vec<String> = if heading {
        rows.next().unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut kept: Vec<Vec<String>> = Vec::new();
    for row in rows {
        if ctx.eval_class_expr(row[class_col].trim()).unwrap_or(false) {
            kept.push(row);
        }
    }
    match sort_col {
        Some(s) if s == class_col => crate::warn!(
            "classfiltercsv: sorting column ({s}) is the same as class expression column ({class_col}). Not sorting data container."
        ),
        Some(s) if s >= columns => crate::warn!(
            "classfiltercsv: sorting index {s} out of bounds. Not sorting data container."
        ),
        Some(s) => kept.sort_by(|x, y| x[s].cmp(&y[s])),
        None => {}
    }
    let out = kept
        .into_iter()
        .map(|row| {
            let mut m = Map::new();
            // Without a heading the fields are numbered as kept, the class
            // column left out (`{"0": ..., "1": ...}`), as cf-agent does.
            let fields = row.into_iter().enumerate().filter(|(i, _)| *i != class_col);
            for (n, (i, f)) in fields.enumerate() {
                let key = names.get(i).cloned().unwrap_or_else(|| n.to_string());
                m.insert(key, Json::String(f));
            }
            Json::Object(m)
        })
        .collect();
    Ok(Value::data(Json::Array(out)))
}

/// The rows of a CSV file as cf-agent's filtering reader keeps them:
/// without comment lines (`#` first) and empty lines, and without the
/// rows whose number of fields differs from the first row's (each one
/// warned about).
fn csv_rows_of_equal_length(fname: &str, rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    let mut columns = 0;
    let mut out = Vec::new();
    for (n, row) in rows.into_iter().enumerate() {
        let comment = row.first().is_some_and(|f| f.starts_with('#'));
        let empty = row.len() == 1 && row[0].is_empty();
        if comment || empty {
            continue;
        }
        if columns == 0 {
            columns = row.len();
        } else if row.len() != columns {
            crate::warn!(
                "{fname}: Line {} has incorrect amount of elements, {} instead of {columns}. Line ignored.",
                n + 1,
                row.len()
            );
            continue;
        }
        out.push(row);
    }
    out
}

fn string_mustache(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("string_mustache", a);
    let template = args.str(0, "template")?;
    let data = match a.get(1) {
        Some(v) => value_to_arc_json(collect(ctx, v)?),
        // Without data the template reads the whole state, as datastate().
        None => std::sync::Arc::new(super::introspect::datastate_json(ctx)),
    };
    super::mustache::render(template, &data)
        .map(Value::str)
        .map_err(|e| match e.level {
            super::mustache::Level::Error => args.fail(e),
            // cf-agent warns and fails the call, or fails it without a word.
            super::mustache::Level::Warning => {
                crate::warn!("function 'string_mustache': {e}");
                args.fail_quietly(e)
            }
            super::mustache::Level::Quiet => args.fail_quietly(e),
        })
}

fn hashmatch(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("hashmatch", a);
    let path = args.str(0, "file")?;
    let alg = args.option(1, "algorithm", HASH_ALGORITHMS)?;
    let want = args.str(2, "hash")?;
    let Ok(bytes) = ctx.host().plain().read(path) else {
        return Ok(class_result(false));
    };
    let d = digest(alg, &bytes).unwrap_or_default();
    Ok(class_result(hex(&d).eq_ignore_ascii_case(want)))
}

/// `getfields(regex, file, split, array)`: splits the first line that
/// matches into `array[1]`, `array[2]`...; returns the number of matching
/// lines.
fn getfields(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("getfields", a);
    let re = args.regex(ctx, 0, "regex")?;
    let text = read_text(ctx, &args, 1, None)?;
    let split = args.regex(ctx, 2, "split")?;
    let array = args.str(3, "array")?;
    let mut count = 0;
    for line in text.lines() {
        if !re.is_full_match(line) {
            continue;
        }
        if count == 0 {
            for (i, f) in split_regex(&split, line, usize::MAX)
                .into_iter()
                .enumerate()
            {
                define_var(
                    ctx,
                    &format!("{array}[{}]", i + 1),
                    Value::Scalar(f),
                    DataType::String,
                    "getfields",
                );
            }
        }
        count += 1;
    }
    Ok(Value::str(count.to_string()))
}

/// `makerule(target, sources)`: true when the target is missing or older
/// than a source.
fn makerule(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("makerule", a);
    let target = args.str(0, "target")?;
    let sources = match &a[1] {
        Value::Scalar(s) if ctx.host().plain().exists(s) => vec![s.clone()],
        other => super::args::element_texts(&collect(ctx, other)?, false)
            .into_iter()
            .map(|s| s.into_owned())
            .collect(),
    };
    let files = ctx.host().plain();
    let Ok(t) = files.metadata(target).and_then(|m| m.modified()) else {
        return Ok(class_result(true));
    };
    let newer = sources.iter().any(|s| {
        files
            .metadata(s)
            .and_then(|m| m.modified())
            .is_ok_and(|m| m > t)
    });
    Ok(class_result(newer))
}

// ---- peer groups --------------------------------------------------------------

/// A host list as the peer functions read it: the file's lines after its
/// comments are removed (the comment regex runs over the whole text, as
/// in cf-agent), empty ones skipped; the group size; and the names this
/// host goes by (`sys.fqhost`, `sys.uqhost`), which a line must equal
/// exactly to be this host. cf-agent refuses a group size under 2.
struct PeerList {
    hosts: Vec<String>,
    size: usize,
    me: Vec<String>,
}

impl PeerList {
    fn read(ctx: &mut EvalContext, args: &Args) -> Result<PeerList, FnError> {
        let size = args.int(2, "groupsize")?;
        if size < 2 {
            return Err(args.fail(format!(
                "a group size of {size} is nonsensical (at least 2)"
            )));
        }
        let text = read_text(ctx, args, 0, None)?;
        let comment = args.str(1, "comment")?;
        let text = strip_comments(ctx, args, &text, comment)?;
        let hosts = text
            .split('\n')
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        let me = ["sys.fqhost", "sys.uqhost"]
            .iter()
            .filter_map(|n| ctx.lookup_variable(n))
            .filter_map(|v| v.value.as_scalar().map(str::to_string))
            .collect();
        Ok(PeerList {
            hosts,
            size: usize::try_from(size).unwrap_or(usize::MAX),
            me,
        })
    }

    fn is_me(&self, host: &str) -> bool {
        self.me.iter().any(|m| m == host)
    }
}

/// `peers`: the other hosts of the first group that holds this host
/// (every line naming this host left out); empty when no group does.
fn peers(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("peers", a);
    let list = PeerList::read(ctx, &args)?;
    let mut found = false;
    let mut group = Vec::new();
    for (i, host) in list.hosts.iter().enumerate() {
        if list.is_me(host) {
            found = true;
        } else {
            group.push(host.clone());
        }
        if i % list.size == list.size - 1 {
            if found {
                break;
            }
            group.clear();
        }
    }
    Ok(Value::List(if found { group } else { Vec::new() }))
}

/// `peerleader`: the first host of the group where this host first
/// appears, `localhost` when that is this host; fails when no line names
/// this host.
fn peerleader(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("peerleader", a);
    let list = PeerList::read(ctx, &args)?;
    let mut leader = "";
    for (i, host) in list.hosts.iter().enumerate() {
        let me = list.is_me(host);
        if i % list.size == 0 {
            leader = if me { "localhost" } else { host };
        }
        if me {
            return Ok(Value::str(leader));
        }
    }
    Err(args.fail_quietly("this host is in none of the groups"))
}

/// `peerleaders`: the first host of every group, `localhost` for each
/// that is this host.
fn peerleaders(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("peerleaders", a);
    let list = PeerList::read(ctx, &args)?;
    let out = list
        .hosts
        .iter()
        .step_by(list.size)
        .map(|h| {
            if list.is_me(h) {
                "localhost".to_string()
            } else {
                h.clone()
            }
        })
        .collect();
    Ok(Value::List(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_records() {
        let rows = parse_csv("a,b\r\n\"x,\"\"y\"\"\",\r\n\"multi\r\nline\",z\r\nlast");
        assert_eq!(
            rows,
            vec![
                vec!["a".to_string(), "b".into()],
                vec!["x,\"y\"".into(), "".into()],
                vec!["multi\r\nline".into(), "z".into()],
                vec!["last".into()],
            ]
        );
        // A byte limit keeps the whole records within it.
        assert_eq!(parse_csv_within("a,b\r\nc,d", 5), vec![vec!["a", "b"]]);
        assert_eq!(parse_csv_within("a,b\r\nc,d", 4), Vec::<Vec<String>>::new());
        assert_eq!(parse_csv_within("a,b\r\nc,d", 8).len(), 2);
        assert_eq!(
            parse_csv("a,b\nc,d\n"),
            vec![vec!["a".to_string(), "b\nc".into(), "d\n".into()]]
        );
        // Records cf-agent's parser refuses are left out; the others stay.
        assert_eq!(
            parse_csv("a,b\r\nx \"y\" z,w\r\n"),
            vec![vec!["a".to_string(), "b".into()]]
        );
        assert_eq!(
            parse_csv("a,\"b\"c,d\r\n\"x\ny\",z\r\n"),
            vec![vec!["x\ny".to_string(), "z".into()]]
        );
        assert!(parse_csv("a,\"b\n").is_empty());
        assert_eq!(
            parse_csv(" a, \"b\" ,\r\n"),
            vec![vec![" a".to_string(), "b".into(), "".into()]]
        );
        assert!(parse_csv("").is_empty());
        assert!(parse_csv("").is_empty());
    }

    #[test]
    fn env_values_as_cf_agent_reads_them() {
        for (v, want) in [
            ("\\\\", Some("\\")),
            ("\\\"", Some("\"")),
            ("'\\\"'", Some("\"")),
            ("'OOPS", Some("OOPS")),
            ("\"a\" rest", Some("a")),
            ("'say \"hi\"'", Some("say \"hi\"")),
            ("a\\nb", Some("a\nb")),
            ("ab\"cd", None),
            ("", Some("")),
        ] {
            assert_eq!(env_value(v).as_deref(), want, "{v}");
        }
    }

    #[test]
    fn env_files() {
        let j = parse_env("# c\nA=1\nexport B=\"two words\"\n1X=bad\nC='q'\nnoeq\n");
        assert_eq!(
            json::write_compact(&j),
            r#"{"1X":"bad","A":"1","C":"q","export B":"two words"}"#
        );
    }

    /// Keys stay text; a plain scalar that starts with a number is that
    /// number (01_vars/02_functions/readdata_yaml.cf).
    #[test]
    fn yaml_keys_and_number_prefixes_as_cf_agent() {
        let j = parse_yaml("x: 100\ny:\n  - c:\n      200\n      300\n  - 007\n  - +5\n  - -1.5\n")
            .unwrap();
        assert_eq!(
            json::write_compact(&j),
            r#"{"x":100,"y":[{"c":200},"007","+5",-1.5000]}"#
        );
    }

    #[test]
    fn yaml_types() {
        let j =
            parse_yaml("a: 1\nb: [x, 2.5, true, ~, yes, \"3\", 0x10]\nc: {d: e}\n\"k\": null\n")
                .unwrap();
        assert_eq!(
            json::write_compact(&j),
            r#"{"a":1,"b":["x",2.5000,true,null,true,"3","0x10"],"c":{"d":"e"},"k":null}"#
        );
        assert!(parse_yaml("a: [").is_err());
    }
}
