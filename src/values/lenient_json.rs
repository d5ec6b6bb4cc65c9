//! A JSON reader that accepts what CFEngine's own JSON parser accepts, and
//! remembers where each value starts so that errors can name a line and a
//! column.
//!
//! CFEngine 3.21 reads augments with a lenient parser, and policies in the
//! wild depend on it. Measured with `cf-promises` (one `def.json` each):
//!
//! - a trailing comma (`[1,]`, `{"a":1,}`) and a comma right after `{` are
//!   accepted; two commas in a row are an error;
//! - a missing comma between members or elements, a missing `:` after a
//!   key, and unquoted keys (`{x: 1}`) are accepted;
//! - whatever follows the first complete value is ignored;
//! - in strings `\" \\ \/ \b \f \n \r \t` are decoded, every other escape
//!   (including `\uXXXX`) is kept as written, backslash and all;
//! - a number with a leading zero (`01`), without digits after `.` (`1.`),
//!   or with a sign other than a leading `-` is an error;
//! - a number without `.` is an integer. With an exponent (`1e3`) or out of
//!   the 64-bit range cf-promises exits at once ("Conversion error"); we
//!   report it as an error of this file instead, and the run goes on.
//!
//! Objects keep their members in file order; a repeated key replaces the
//! earlier value (`{"vars":{..},"vars":{..}}` keeps only the second).

use std::collections::HashMap;
use std::fmt;

/// One JSON value and the byte offset where it starts in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Json,
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Real(f64),
    Str(String),
    Array(Vec<Node>),
    /// Members in file order: (key, key offset, value).
    Object(Vec<Member>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: String,
    pub key_pos: usize,
    pub node: Node,
}

impl Node {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Json::Object(m) => m.iter().find(|m| m.key == key).map(|m| &m.node),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_primitive(&self) -> bool {
        !matches!(self.value, Json::Array(_) | Json::Object(_))
    }

    /// A primitive as the text CFEngine gives it in a string variable:
    /// integers as written, reals with two decimals, booleans as words.
    /// `None` for null and for containers.
    pub fn primitive_text(&self) -> Option<String> {
        match &self.value {
            Json::Str(s) => Some(s.clone()),
            Json::Int(i) => Some(i.to_string()),
            Json::Real(r) => Some(format!("{r:.2}")),
            Json::Bool(b) => Some(b.to_string()),
            Json::Null | Json::Array(_) | Json::Object(_) => None,
        }
    }

    /// The value as a `serde_json` tree (for data containers).
    pub fn to_serde(&self) -> serde_json::Value {
        use serde_json::Value as V;
        match &self.value {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(*b),
            Json::Int(i) => V::from(*i),
            Json::Real(r) => serde_json::Number::from_f64(*r).map_or(V::Null, V::Number),
            Json::Str(s) => V::String(s.clone()),
            Json::Array(a) => V::Array(a.iter().map(Node::to_serde).collect()),
            Json::Object(m) => V::Object(
                m.iter()
                    .map(|m| (m.key.clone(), m.node.to_serde()))
                    .collect(),
            ),
        }
    }

    /// A copy with `f` applied to every string and every object key (used
    /// to expand variable references).
    pub fn map_strings(&self, f: &mut impl FnMut(&str) -> String) -> Node {
        let value = match &self.value {
            Json::Str(s) => Json::Str(f(s)),
            Json::Array(a) => Json::Array(a.iter().map(|n| n.map_strings(f)).collect()),
            Json::Object(m) => {
                // Keys distinct as written can become one once expanded.
                let mut out = ObjectBuilder::with_capacity(m.len());
                for mem in m {
                    out.insert(Member {
                        key: f(&mem.key),
                        key_pos: mem.key_pos,
                        node: mem.node.map_strings(f),
                    });
                }
                Json::Object(out.finish())
            }
            other => other.clone(),
        };
        Node {
            value,
            pos: self.pos,
        }
    }

    /// Whether `pred` holds for some string or key in the tree.
    pub fn any_string(&self, pred: &impl Fn(&str) -> bool) -> bool {
        match &self.value {
            Json::Str(s) => pred(s),
            Json::Array(a) => a.iter().any(|n| n.any_string(pred)),
            Json::Object(m) => m.iter().any(|m| pred(&m.key) || m.node.any_string(pred)),
            _ => false,
        }
    }
}

/// The members of an object being read, in file order, where a key seen
/// before keeps its place and takes the new value. Keys are found through a
/// hash index, one probe per member: a scan of the members read so far made
/// loading quadratic (a `def.json` of 40,000 variables took 20 s in a debug
/// build, 400,000 over half an hour).
#[derive(Default)]
struct ObjectBuilder {
    members: Vec<Member>,
    index: HashMap<String, usize>,
    /// Members whose key was compared to place new ones (at most one each
    /// with the index), for the test that keeps this linear.
    #[cfg(test)]
    examined: usize,
}

impl ObjectBuilder {
    fn with_capacity(n: usize) -> ObjectBuilder {
        let mut b = ObjectBuilder::default();
        b.members.reserve(n);
        b.index.reserve(n);
        b
    }

    fn insert(&mut self, member: Member) {
        match self.index.get(&member.key) {
            Some(&i) => {
                #[cfg(test)]
                {
                    self.examined += 1;
                }
                self.members[i].node = member.node;
            }
            None => {
                self.index.insert(member.key.clone(), self.members.len());
                self.members.push(member);
            }
        }
    }

    fn finish(self) -> Vec<Member> {
        self.members
    }
}

/// Why a file is not JSON, and where (byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub pos: usize,
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(text.len());
    let mut start = pos;
    while start > 0 && !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Line and column of many offsets in one text. [`line_col`] scans from
/// the start of the text, so a file with an error or a property on each of
/// its members cost the square of its size; this remembers where every
/// `MARK_EVERY` bytes fall (built on first use) and scans at most that far.
pub struct LineIndex<'a> {
    text: &'a str,
    /// (byte offset at a char boundary, its line, its column), ascending.
    marks: std::cell::OnceCell<Vec<(usize, usize, usize)>>,
}

const MARK_EVERY: usize = 4096;

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> LineIndex<'a> {
        LineIndex {
            text,
            marks: std::cell::OnceCell::new(),
        }
    }

    fn marks(&self) -> &[(usize, usize, usize)] {
        self.marks.get_or_init(|| {
            let mut marks = vec![(0, 1, 1)];
            let (mut line, mut column) = (1, 1);
            let mut next = MARK_EVERY;
            for (i, c) in self.text.char_indices() {
                if i >= next {
                    marks.push((i, line, column));
                    next = i + MARK_EVERY;
                }
                if c == '\n' {
                    line += 1;
                    column = 1;
                } else {
                    column += 1;
                }
            }
            marks
        })
    }

    /// The last mark at or before the char boundary `end`.
    fn mark_before(&self, end: usize) -> (usize, usize, usize) {
        let marks = self.marks();
        marks[marks.partition_point(|m| m.0 <= end) - 1]
    }

    /// The same as [`line_col`]`(text, pos)`.
    pub fn line_col(&self, pos: usize) -> (usize, usize) {
        let mut end = pos.min(self.text.len());
        while end > 0 && !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let (start, mut line, mut column) = self.mark_before(end);
        for c in self.text[start..end].chars() {
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        (line, column)
    }
}

/// Reads the first JSON value of `text`.
pub fn parse(text: &str) -> Result<Node, JsonError> {
    let mut p = Reader {
        s: text.as_bytes(),
        text,
        pos: 0,
        depth: 0,
    };
    p.skip_ws();
    if p.pos >= p.s.len() {
        return Err(p.err("the file holds no JSON data"));
    }
    p.value()
}

/// Nesting deeper than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 512;

struct Reader<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl Reader<'_> {
    fn err(&self, message: impl Into<String>) -> JsonError {
        JsonError {
            pos: self.pos,
            message: message.into(),
        }
    }

    fn err_at(&self, pos: usize, message: impl Into<String>) -> JsonError {
        JsonError {
            pos,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    /// The character at the cursor, for messages.
    fn here(&self) -> String {
        self.text
            .get(self.pos..)
            .and_then(|t| t.chars().next())
            .map_or_else(|| "end of file".to_string(), |c| format!("'{c}'"))
    }

    fn value(&mut self) -> Result<Node, JsonError> {
        let pos = self.pos;
        let value = match self.peek() {
            Some(b'{') => self.object()?,
            Some(b'[') => self.array()?,
            Some(b'"') => Json::Str(self.string()?),
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(b't' | b'f' | b'n') => self.word()?,
            None => return Err(self.err("unexpected end of file, expected a value")),
            Some(_) => {
                return Err(self.err(format!("unexpected {}, expected a value", self.here())));
            }
        };
        Ok(Node { value, pos })
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn object(&mut self) -> Result<Json, JsonError> {
        let open = self.pos;
        self.enter()?;
        self.pos += 1;
        let mut members = ObjectBuilder::default();
        // A comma is allowed after `{` and after each member, never two.
        let mut comma_ok = true;
        loop {
            self.skip_ws();
            match self.peek() {
                None => {
                    let (l, c) = line_col(self.text, open);
                    return Err(self.err(format!(
                        "unexpected end of file, the object opened at {l}:{c} is not closed"
                    )));
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                Some(b',') if comma_ok => {
                    self.pos += 1;
                    comma_ok = false;
                    continue;
                }
                Some(b',') => return Err(self.err("two commas in a row in an object")),
                _ => {}
            }
            let key_pos = self.pos;
            let key = match self.peek() {
                Some(b'"') => self.string()?,
                _ => self.bare_key()?,
            };
            self.skip_ws();
            if self.peek() == Some(b':') {
                self.pos += 1;
                self.skip_ws();
            }
            if self.peek() == Some(b'}') {
                return Err(self.err(format!("the key \"{key}\" has no value")));
            }
            let node = self.value()?;
            members.insert(Member { key, key_pos, node });
            comma_ok = true;
        }
        self.depth -= 1;
        Ok(Json::Object(members.finish()))
    }

    /// An unquoted key: ASCII letters, digits and `_` only, followed by
    /// white space or `:` (CFEngine refuses `{a-b: 1}` and `{'a': 1}`).
    fn bare_key(&mut self) -> Result<String, JsonError> {
        let start = self.pos;
        while matches!(self.peek(), Some(b) if b.is_ascii_alphanumeric() || b == b'_') {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.err(format!("unexpected {}, expected a key", self.here())));
        }
        if !matches!(
            self.peek(),
            None | Some(b' ' | b'\t' | b'\n' | b'\r' | b':')
        ) {
            return Err(self.err(format!("unexpected {} in an unquoted key", self.here())));
        }
        Ok(self.text[start..self.pos].to_string())
    }

    fn array(&mut self) -> Result<Json, JsonError> {
        let open = self.pos;
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        let mut comma_ok = false;
        loop {
            self.skip_ws();
            match self.peek() {
                None => {
                    let (l, c) = line_col(self.text, open);
                    return Err(self.err(format!(
                        "unexpected end of file, the array opened at {l}:{c} is not closed"
                    )));
                }
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                Some(b',') if comma_ok => {
                    self.pos += 1;
                    comma_ok = false;
                }
                Some(b',') => return Err(self.err("a comma without an element before it")),
                _ => {
                    items.push(self.value()?);
                    comma_ok = true;
                }
            }
        }
        self.depth -= 1;
        Ok(Json::Array(items))
    }

    fn string(&mut self) -> Result<String, JsonError> {
        let open = self.pos;
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            match self.peek() {
                None => {
                    let (l, c) = line_col(self.text, open);
                    return Err(self.err(format!(
                        "unexpected end of file, the string opened at {l}:{c} is not closed"
                    )));
                }
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => {
                    let decoded = match self.s.get(self.pos + 1) {
                        Some(b'"') => Some(b'"'),
                        Some(b'\\') => Some(b'\\'),
                        Some(b'/') => Some(b'/'),
                        Some(b'b') => Some(0x08),
                        Some(b'f') => Some(0x0c),
                        Some(b'n') => Some(b'\n'),
                        Some(b'r') => Some(b'\r'),
                        Some(b't') => Some(b'\t'),
                        _ => None,
                    };
                    match decoded {
                        Some(b) => {
                            out.push(b);
                            self.pos += 2;
                        }
                        None => {
                            // Kept as written, as CFEngine keeps it.
                            out.push(b'\\');
                            self.pos += 1;
                        }
                    }
                }
                Some(b) => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
        // The input is a &str and only whole ASCII bytes were replaced.
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn number(&mut self) -> Result<Json, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        let int_digits = self.pos - int_start;
        if int_digits == 0 {
            return Err(self.err("a number needs digits after '-'"));
        }
        if int_digits > 1 && self.s[int_start] == b'0' {
            return Err(self.err_at(int_start, "a number cannot start with 0"));
        }
        let mut real = false;
        if self.peek() == Some(b'.') {
            real = true;
            self.pos += 1;
            let frac = self.pos;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
            if self.pos == frac {
                return Err(self.err("a number needs digits after '.'"));
            }
        }
        let mut exponent = false;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            exponent = true;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            let digits = self.pos;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
            if self.pos == digits {
                return Err(self.err("a number needs digits in its exponent"));
            }
        }
        if let Some(b) = self.peek()
            && (b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
        {
            return Err(self.err(format!("unexpected {} in a number", self.here())));
        }
        let text = &self.text[start..self.pos];
        if real {
            return match text.parse::<f64>() {
                Ok(r) if r.is_finite() => Ok(Json::Real(r)),
                _ => Err(self.err_at(start, format!("the number {text} is out of range"))),
            };
        }
        if exponent {
            return Err(self.err_at(
                start,
                format!(
                    "the number {text} has an exponent but no decimal point, which CFEngine \
                     cannot read (write it with a '.', e.g. 1.0e3)"
                ),
            ));
        }
        text.parse::<i64>()
            .map(Json::Int)
            .map_err(|_| self.err_at(start, format!("the integer {text} does not fit in 64 bits")))
    }

    fn word(&mut self) -> Result<Json, JsonError> {
        for (w, v) in [
            ("true", Json::Bool(true)),
            ("false", Json::Bool(false)),
            ("null", Json::Null),
        ] {
            if self.s[self.pos..].starts_with(w.as_bytes()) {
                self.pos += w.len();
                return Ok(v);
            }
        }
        Err(self.err(format!("unexpected {}, expected a value", self.here())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> serde_json::Value {
        parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .to_serde()
    }

    fn err(text: &str) -> (usize, usize, String) {
        let e = parse(text).expect_err(text);
        let (l, c) = line_col(text, e.pos);
        (l, c, e.message)
    }

    #[test]
    fn strict_json_reads_as_usual() {
        assert_eq!(
            ok(r#"{"a": [1, -2, 3.5, true, false, null, "x"], "b": {}}"#),
            serde_json::json!({"a": [1, -2, 3.5, true, false, null, "x"], "b": {}})
        );
    }

    #[test]
    fn accepts_what_cfengine_accepts() {
        assert_eq!(ok(r#"{"a":1,}"#), serde_json::json!({"a": 1}));
        assert_eq!(ok(r#"[1,2,]"#), serde_json::json!([1, 2]));
        assert_eq!(ok(r#"{,"a":1}"#), serde_json::json!({"a": 1}));
        assert_eq!(ok(r#"{"a" 1 "b":2}"#), serde_json::json!({"a": 1, "b": 2}));
        assert_eq!(ok(r#"[1 2 "x"]"#), serde_json::json!([1, 2, "x"]));
        assert_eq!(
            ok(r#"{_a9: 1, x2 : 2}"#),
            serde_json::json!({"_a9": 1, "x2": 2})
        );
        assert_eq!(ok(r#"{"a":1}} trailing"#), serde_json::json!({"a": 1}));
        assert_eq!(
            ok(r#"{"v":{"x":1},"v":{"y":2}}"#),
            serde_json::json!({"v": {"y": 2}})
        );
    }

    #[test]
    fn string_escapes_like_cfengine() {
        assert_eq!(
            ok(r#"["a\"b\\c\/d\te\nf", "a\q", "\u00e9"]"#),
            serde_json::json!(["a\"b\\c/d\te\nf", "a\\q", "\\u00e9"])
        );
    }

    #[test]
    fn primitives_as_cfengine_strings() {
        let n = parse(r#"[5, -2, 3.5, 0.125, 0.375, 1.5e3, true, "s", null]"#).unwrap();
        let Json::Array(items) = n.value else {
            panic!("array expected")
        };
        let texts: Vec<Option<String>> = items.iter().map(Node::primitive_text).collect();
        let want = ["5", "-2", "3.50", "0.12", "0.38", "1500.00", "true", "s"];
        for (t, w) in texts.iter().zip(want) {
            assert_eq!(t.as_deref(), Some(w));
        }
        assert_eq!(texts[8], None);
    }

    #[test]
    fn errors_name_the_position() {
        assert_eq!(
            err("{\n  \"vars\": {\n    \"x\": tru\n  }\n}"),
            (3, 10, "unexpected 't', expected a value".to_string())
        );
        assert_eq!(err("").2, "the file holds no JSON data");
        assert_eq!(err("  \n ").0, 2);
        assert_eq!(
            err("{\"a\":[1,,2]}"),
            (1, 9, "a comma without an element before it".to_string())
        );
        assert_eq!(
            err("{\"a\":1,,\"b\":2}"),
            (1, 8, "two commas in a row in an object".to_string())
        );
        assert!(err("{\"a\":{\"b\":1}").2.contains("opened at 1:1"));
        assert_eq!(err("{'a':1}").2, "unexpected ''', expected a key");
        assert_eq!(err("{a-b:1}").2, "unexpected '-' in an unquoted key");
        assert_eq!(err("{\"a\":01}").2, "a number cannot start with 0");
        assert_eq!(err("{\"a\":1.}").2, "a number needs digits after '.'");
        assert_eq!(err("{\"a\":1a}").2, "unexpected 'a' in a number");
        assert!(err("{\"a\":1e3}").2.contains("no decimal point"));
        assert!(err("{\"a\":12345678901234567890}").2.contains("64 bits"));
        assert!(err("{\"a\":1.0e400}").2.contains("out of range"));
        assert_eq!(err("{\"a\":1, \"b\"}").2, "the key \"b\" has no value");
        assert!(err("\"abc").2.contains("string opened at 1:1"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(100_000);
        assert!(err(&text).2.contains("nesting deeper"));
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_col("é\"x", 2), (1, 2));
        assert_eq!(line_col("a\nbc", 3), (2, 2));
    }

    /// Issue 15: a def.json of 400,000 variables took over half an hour
    /// because each member was placed by comparing its key with every
    /// member read before it.
    #[test]
    fn objects_place_each_member_with_at_most_one_comparison() {
        const N: usize = 200_000;
        let mut b = ObjectBuilder::default();
        let member = |i: usize, v: i64| Member {
            key: format!("v{i}"),
            key_pos: i,
            node: Node {
                value: Json::Int(v),
                pos: i,
            },
        };
        for i in 0..N {
            b.insert(member(i, 0));
        }
        for i in (0..N).step_by(1000) {
            b.insert(member(i, 1));
        }
        let inserts = N + N / 1000;
        assert!(
            b.examined <= inserts,
            "{} comparisons for {inserts} members",
            b.examined
        );
        // The index names every member's place, and a repeated key keeps
        // its first place (and position) with the last value.
        assert_eq!(b.index.len(), N);
        let members = b.finish();
        assert_eq!(members.len(), N);
        for (i, m) in members.iter().enumerate() {
            assert_eq!(m.key, format!("v{i}"));
            assert_eq!(m.key_pos, i);
            let want = i64::from(i % 1000 == 0);
            assert_eq!(m.node.value, Json::Int(want), "{}", m.key);
        }
    }

    #[test]
    fn a_large_object_reads_whole_and_in_order() {
        let body: Vec<String> = (0..200_000).map(|i| format!("\"v{i}\":{i}")).collect();
        let text = format!("{{{},\"v7\":\"last\"}}", body.join(","));
        let root = parse(&text).unwrap();
        let Json::Object(m) = &root.value else {
            panic!("not an object")
        };
        assert_eq!(m.len(), 200_000);
        assert_eq!(m[199_999].key, "v199999");
        assert_eq!(m[7].node.value, Json::Str("last".into()));
    }

    /// Issue 15: an error or a property site on each member of a one-line
    /// file scanned the file from its start each time.
    #[test]
    fn line_index_agrees_with_line_col_and_scans_a_bounded_stretch() {
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(if i % 7 == 0 { "é\n" } else { "{\"ab\": 1}, " });
        }
        let index = LineIndex::new(&text);
        for pos in (0..text.len() + 3)
            .step_by(997)
            .chain([0, 1, 2, text.len()])
        {
            assert_eq!(index.line_col(pos), line_col(&text, pos), "at {pos}");
            let mut end = pos.min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let (mark, _, _) = index.mark_before(end);
            assert!(mark <= end && end - mark < MARK_EVERY + 4, "{mark}..{end}");
        }
        assert_eq!(LineIndex::new("").line_col(5), (1, 1));
    }
}
