//! A reader for the strict JSON that `serde_json` reads, building the same
//! values without its per-value detours (a `String` and a map lookup per
//! number, objects grown one entry at a time): a 1 MB `readjson` is read
//! in about half the instructions. Whatever it is not sure to read exactly
//! as `serde_json` does (an error, an escape it does not know, nesting
//! near the depth limit, serde_json's private number key) gives `None`, and
//! the caller reads the text with `serde_json` instead.

use serde_json::{Map, Number, Value as Json};

/// `text` as `serde_json::from_str` reads it, or `None` when it is not
/// sure to.
pub fn parse(text: &str) -> Option<Json> {
    let mut r = Reader {
        b: text.as_bytes(),
        s: text,
        i: 0,
        entries: Vec::new(),
        items: Vec::new(),
    };
    let v = r.value(0)?;
    r.skip_ws();
    (r.i == r.b.len()).then_some(v)
}

/// Deeper than this is left to serde_json (its limit is 128).
const MAX_DEPTH: usize = 100;

/// serde_json turns an object whose first key is this into a number.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

struct Reader<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
    /// The entries of the objects being read, as a stack: an object's
    /// map is made once with its final size.
    entries: Vec<(String, Json)>,
    /// The same for the items of the arrays being read.
    items: Vec<Json>,
}

impl Reader<'_> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Option<Json> {
        self.skip_ws();
        match *self.b.get(self.i)? {
            b'"' => self.string().map(Json::String),
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b't' => self.word("true", Json::Bool(true)),
            b'f' => self.word("false", Json::Bool(false)),
            b'n' => self.word("null", Json::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn word(&mut self, w: &str, v: Json) -> Option<Json> {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Some(v)
        } else {
            None
        }
    }

    fn object(&mut self, depth: usize) -> Option<Json> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        let base = self.entries.len();
        self.skip_ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Some(Json::Object(Map::new()));
        }
        loop {
            self.skip_ws();
            if self.b.get(self.i) != Some(&b'"') {
                return None;
            }
            let key = self.string()?;
            if key == NUMBER_TOKEN {
                return None;
            }
            self.skip_ws();
            if self.b.get(self.i) != Some(&b':') {
                return None;
            }
            self.i += 1;
            let v = self.value(depth)?;
            self.entries.push((key, v));
            self.skip_ws();
            match self.b.get(self.i)? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    break;
                }
                _ => return None,
            }
        }
        // Inserted one by one as serde_json does: a repeated key keeps its
        // first place and takes its last value.
        let mut m = Map::with_capacity(self.entries.len() - base);
        for (k, v) in self.entries.drain(base..) {
            m.insert(k, v);
        }
        Some(Json::Object(m))
    }

    fn array(&mut self, depth: usize) -> Option<Json> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        let base = self.items.len();
        self.skip_ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Some(Json::Array(Vec::new()));
        }
        loop {
            let v = self.value(depth)?;
            self.items.push(v);
            self.skip_ws();
            match self.b.get(self.i)? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    // Gathered on the shared stack, so that the array is
                    // made at its size (no room left over, no copies as
                    // it grows).
                    return Some(Json::Array(self.items.drain(base..).collect()));
                }
                _ => return None,
            }
        }
    }

    /// A string from its opening quote; only the escapes other than
    /// `\u` (which the caller leaves to the lenient reader).
    fn string(&mut self) -> Option<String> {
        self.i += 1;
        let start = self.i;
        // The common case: no escape, one copy.
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'"' => {
                    let s = self.s[start..self.i].to_string();
                    self.i += 1;
                    return Some(s);
                }
                b'\\' => break,
                0..=0x1f => return None,
                _ => self.i += 1,
            }
        }
        let mut out = String::with_capacity(self.i - start + 16);
        out.push_str(&self.s[start..self.i]);
        loop {
            let c = *self.b.get(self.i)?;
            match c {
                b'"' => {
                    self.i += 1;
                    return Some(out);
                }
                b'\\' => {
                    let e = match *self.b.get(self.i + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\x08',
                        b'f' => '\x0c',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return None,
                    };
                    out.push(e);
                    self.i += 2;
                }
                0..=0x1f => return None,
                _ => {
                    // Up to the next quote, escape or control byte, whole
                    // characters at a time.
                    let from = self.i;
                    while let Some(&c) = self.b.get(self.i) {
                        if matches!(c, b'"' | b'\\' | 0..=0x1f) {
                            break;
                        }
                        self.i += 1;
                    }
                    out.push_str(&self.s[from..self.i]);
                }
            }
        }
    }

    /// A number as JSON writes it; its value is made by serde_json's own
    /// number reader from the same text.
    fn number(&mut self) -> Option<Json> {
        let start = self.i;
        let digits = |r: &mut Self| {
            let from = r.i;
            while let Some(b'0'..=b'9') = r.b.get(r.i) {
                r.i += 1;
            }
            r.i > from
        };
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        match self.b.get(self.i)? {
            b'0' => {
                self.i += 1;
                if let Some(b'0'..=b'9') = self.b.get(self.i) {
                    return None;
                }
            }
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        let mut integer = true;
        if self.b.get(self.i) == Some(&b'.') {
            integer = false;
            self.i += 1;
            if !digits(self) {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            integer = false;
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        let text = &self.s[start..self.i];
        // A small non-negative integer is what serde_json makes of a u64.
        if integer
            && !text.starts_with('-')
            && let Ok(u) = text.parse::<u64>()
        {
            return Some(Json::Number(Number::from(u)));
        }
        text.parse::<Number>().ok().map(Json::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn same(text: &str) {
        let ours = parse(text.trim());
        let theirs: Result<serde_json::Value, _> = serde_json::from_str(text.trim());
        match (ours, theirs) {
            (Some(a), Ok(b)) => {
                assert_eq!(a, b, "{text}");
                assert_eq!(a.to_string(), b.to_string(), "{text}");
            }
            (None, _) => {}
            (Some(a), Err(e)) => panic!("{text}: read as {a} where serde_json says {e}"),
        }
    }

    #[test]
    fn reads_as_serde_json_reads() {
        for t in [
            r#"{"a": 1, "b": [1, 2.5, -0, -3, 1e5, 1E+5, 2.50e-3, 18446744073709551616, -9223372036854775809], "c": {"d": null, "e": true, "f": false}}"#,
            r#"{"a": 1, "a": 2, "b": 3}"#,
            r#"["x\"y\\z\/\b\f\n\r\t", "é ü", "", "a\tb"]"#,
            r#"  [ ]  "#,
            r#"{}"#,
            r#"{"$serde_json::private::Number": "12"}"#,
            r#"[01]"#,
            r#"[1.]"#,
            r#"[1e]"#,
            r#"[-]"#,
            r#"[1,]"#,
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"[1] x"#,
            r#"["a
b"]"#,
            r#"["\x"]"#,
            r#"[tru]"#,
            r#"[nulll]"#,
            r#"18446744073709551615"#,
            r#"-0.0"#,
            r#""s""#,
        ] {
            same(t);
        }
        let deep = format!("{}{}", "[".repeat(150), "]".repeat(150));
        same(&deep);
        assert!(parse(&deep).is_none());
    }
}
