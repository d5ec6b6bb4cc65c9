//! JSON as CFEngine keeps it: integers are C `int`s, reals are stored as
//! the text `%.4f` of the parsed number, objects keep their insertion order
//! but are written with sorted keys, and a real in a string context reads
//! as `%.2f`. Every data container the functions build goes through
//! `parse`/`normalize`, and every one they print through `write_compact` or
//! `write_pretty`, so the tables and `storejson` look like cf-promises'.

use serde_json::{Map, Number, Value as Json};
use std::borrow::Cow;

/// Parses JSON text. Numbers keep the text they were written with until
/// the container is stored in a variable (see `normalize`): cf-agent's
/// `join(",", '[2.5]')` gives `2.5`, a stored container prints `2.5000`.
///
/// What strict JSON refuses but CFEngine's own parser accepts (a trailing
/// comma, as in the MPF's dmidecode inventory) is read as CFEngine reads
/// it, through the lenient reader of augments.
///
/// CFEngine keeps a `\uXXXX` escape as written, backslash and all, so text
/// holding one is read by that same lenient reader too.
pub fn parse(text: &str) -> Result<Json, String> {
    let lenient = || crate::values::lenient_json::parse(text).map(|node| node.to_serde());
    if text.contains("\\u") {
        return lenient().map_err(|e| e.to_string());
    }
    let text_trimmed = text.trim();
    if let Some(j) = crate::values::json_fast::parse(text_trimmed) {
        return Ok(j);
    }
    serde_json::from_str(text_trimmed).or_else(|strict| lenient().map_err(|_| strict.to_string()))
}

/// Brings every number to what CFEngine stores in a variable: integers
/// wrap to 32 bits (cf-agent keeps them in an `int`), reals are kept as
/// their `%.4f` text.
pub fn normalize(j: &mut Json) {
    match j {
        Json::Number(n) => {
            let normal = normal_number(n);
            if normal != *n {
                *n = normal;
            }
        }
        Json::Array(a) => a.iter_mut().for_each(normalize),
        Json::Object(m) => m.values_mut().for_each(normalize),
        _ => {}
    }
}

/// Normalizes a shared container for storing (see [`normalize`]), copying
/// it only when a number must change. A container stored again unchanged
/// (the same allocation a cached function or a variable gave: every pass
/// stores a 1 MB `readjson` result again) is not walked again: the last
/// few normalized allocations are remembered by weak reference, which
/// also keeps their address from being reused while remembered, and an
/// `Arc` is never changed in place while a weak reference to it exists
/// (`Arc::make_mut` moves it out first).
pub fn normalize_shared(d: &mut std::sync::Arc<Json>) {
    use std::sync::{Arc, Weak};
    thread_local! {
        static NORMALIZED: std::cell::RefCell<Vec<Weak<Json>>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    const REMEMBERED: usize = 8;
    let known = NORMALIZED.with(|n| {
        n.borrow()
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(d)) && w.strong_count() > 0)
    });
    if known {
        return;
    }
    if needs_normalizing(d) {
        normalize(Arc::make_mut(d));
    }
    NORMALIZED.with(|n| {
        let mut n = n.borrow_mut();
        n.retain(|w| w.strong_count() > 0);
        if n.len() >= REMEMBERED {
            n.remove(0);
        }
        n.push(Arc::downgrade(d));
    });
}

/// Whether a container holds a number that `normalize` would change, so
/// that a shared container is copied only when it must be.
pub fn needs_normalizing(j: &Json) -> bool {
    match j {
        Json::Number(n) => !is_small_int_text(n.as_str()) && normal_number(n) != *n,
        Json::Array(a) => a.iter().any(needs_normalizing),
        Json::Object(m) => m.values().any(needs_normalizing),
        _ => false,
    }
}

/// Whether a number's text is an integer as it is stored (`-12`, `0`, up
/// to nine digits, no leading zero): one that normalizing keeps as it is,
/// told without parsing it (a 1 MB container holds thousands).
fn is_small_int_text(t: &str) -> bool {
    let digits = t.strip_prefix('-').unwrap_or(t);
    !digits.is_empty()
        && digits.len() <= 9
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" && digits.len() == t.len() || !digits.starts_with('0'))
}

fn number_from_text(t: &str) -> Number {
    serde_json::from_str::<Number>(t).unwrap_or_else(|_| Number::from(0))
}

fn normal_number(n: &Number) -> Number {
    if n.is_f64() {
        real_number(n.as_f64().unwrap_or(0.0))
    } else if let Some(i) = n.as_i64() {
        Number::from(i as i32)
    } else if let Some(u) = n.as_u64() {
        Number::from(u as i32)
    } else {
        // An integer too large for 64 bits: keep its low 32 bits, as the C
        // conversion through a `long` would not; good enough for such text.
        let digits = n.to_string();
        let neg = digits.starts_with('-');
        let mut v: u32 = 0;
        for b in digits.bytes().filter(u8::is_ascii_digit) {
            v = v.wrapping_mul(10).wrapping_add((b - b'0') as u32);
        }
        let v = v as i32;
        Number::from(if neg { v.wrapping_neg() } else { v })
    }
}

/// A real as CFEngine stores it: the `%.4f` text (non-finite values
/// become 0).
pub fn real_number(f: f64) -> Number {
    let f = if f.is_finite() { f } else { 0.0 };
    number_from_text(&format!("{f:.4}"))
}

/// The text of a number as it is kept.
pub fn number_text(n: &Number) -> String {
    n.to_string()
}

/// The text of a primitive as functions like `nth`, `join` and `maplist`
/// see it; `None` for containers.
pub fn primitive_text(j: &Json) -> Option<Cow<'_, str>> {
    match j {
        Json::String(s) => Some(Cow::Borrowed(s)),
        Json::Number(n) => Some(Cow::Owned(number_text(n))),
        Json::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        Json::Null => Some(Cow::Borrowed("null")),
        _ => None,
    }
}

/// The text of a primitive when it is expanded into a string (`$(d[k])`)
/// or iterated over: reals show two decimals; `null` has none.
pub fn expansion_text(j: &Json) -> Option<String> {
    match j {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) if n.is_f64() => Some(format!("{:.2}", n.as_f64().unwrap_or(0.0))),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether every object in `j` has its keys in sorted order.
pub fn keys_sorted(j: &Json) -> bool {
    match j {
        Json::Object(m) => {
            m.keys().zip(m.keys().skip(1)).all(|(a, b)| a <= b) && m.values().all(keys_sorted)
        }
        Json::Array(a) => a.iter().all(keys_sorted),
        _ => true,
    }
}

/// Puts the keys of every object in `j` in sorted order, as cf-agent's
/// writer leaves a container it wrote.
pub fn sort_keys(j: &mut Json) {
    match j {
        Json::Object(m) => {
            let mut entries: Vec<(String, Json)> = std::mem::take(m).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, mut v) in entries {
                sort_keys(&mut v);
                m.insert(k, v);
            }
        }
        Json::Array(a) => a.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// Compact JSON, keys sorted, as cf-promises prints a container. Like
/// cf-agent's writer it writes object keys as they are, unescaped (a key
/// `x"x` is written `"x"x"`): what it writes is not always JSON.
pub fn write_compact(j: &Json) -> String {
    let mut out = String::new();
    compact_into(j, Keys::AsWritten, &mut out);
    out
}

/// Compact JSON, keys sorted and escaped: always JSON, for text that is
/// read back (a container named inside inline JSON).
pub fn write_compact_json(j: &Json) -> String {
    let mut out = String::new();
    compact_into(j, Keys::Escaped, &mut out);
    out
}

/// How object keys are written.
#[derive(Clone, Copy)]
enum Keys {
    /// Between quotes as they are, as cf-agent writes them.
    AsWritten,
    /// Escaped as JSON strings.
    Escaped,
}

fn key_into(k: &str, keys: Keys, out: &mut String) {
    match keys {
        Keys::AsWritten => {
            out.push('"');
            out.push_str(k);
            out.push('"');
        }
        Keys::Escaped => string_into(k, out),
    }
}

fn compact_into(j: &Json, keys: Keys, out: &mut String) {
    match j {
        Json::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                compact_into(v, keys, out);
            }
            out.push(']');
        }
        Json::Object(m) => {
            out.push('{');
            for (i, (k, v)) in sorted(m).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                key_into(k, keys, out);
                out.push(':');
                compact_into(v, keys, out);
            }
            out.push('}');
        }
        other => primitive_into(other, out),
    }
}

/// Indented JSON as `storejson` writes it: two spaces per level, sorted
/// keys, empty arrays as `[]` and empty objects opened and closed on two
/// lines. Keys are written unescaped, as by [`write_compact`].
pub fn write_pretty(j: &Json) -> String {
    let mut out = String::new();
    pretty_into(j, 0, &mut out);
    out
}

fn indent(level: usize, out: &mut String) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn pretty_into(j: &Json, level: usize, out: &mut String) {
    match j {
        Json::Array(a) if a.is_empty() => out.push_str("[]"),
        Json::Array(a) => {
            out.push_str("[\n");
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(level + 1, out);
                pretty_into(v, level + 1, out);
            }
            out.push('\n');
            indent(level, out);
            out.push(']');
        }
        Json::Object(m) => {
            out.push_str("{\n");
            for (i, (k, v)) in sorted(m).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(level + 1, out);
                key_into(k, Keys::AsWritten, out);
                out.push_str(": ");
                pretty_into(v, level + 1, out);
            }
            if !m.is_empty() {
                out.push('\n');
            }
            indent(level, out);
            out.push('}');
        }
        other => primitive_into(other, out),
    }
}

fn sorted(m: &Map<String, Json>) -> Vec<(&String, &Json)> {
    let mut v: Vec<_> = m.iter().collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

fn primitive_into(j: &Json, out: &mut String) {
    match j {
        Json::String(s) => string_into(s, out),
        Json::Number(n) => out.push_str(&number_text(n)),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Null => out.push_str("null"),
        _ => {}
    }
}

fn string_into(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_integer_texts_are_kept_as_normalizing_keeps_them() {
        for t in [
            "0",
            "-0",
            "7",
            "-7",
            "00",
            "01",
            "-01",
            "123456789",
            "-123456789",
            "1234567890",
            "2147483648",
            "1.5",
            "1e3",
            "-",
            "",
        ] {
            let Ok(n) = serde_json::from_str::<Number>(t) else {
                assert!(!is_small_int_text(t), "{t}");
                continue;
            };
            if is_small_int_text(t) {
                assert_eq!(normal_number(&n).as_str(), t, "{t}");
            }
        }
        assert!(is_small_int_text("42") && is_small_int_text("-42") && is_small_int_text("0"));
        assert!(!is_small_int_text("-0") && !is_small_int_text("042"));
    }

    #[test]
    fn keys_sorted_in_place() {
        let mut j = parse(r#"{"b":{"z":1,"y":2},"a":[{"d":1,"c":2}]}"#).unwrap();
        assert!(!keys_sorted(&j));
        sort_keys(&mut j);
        assert!(keys_sorted(&j));
        let keys: Vec<&String> = j.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["a", "b"]);
        let inner: Vec<&String> = j["a"][0].as_object().unwrap().keys().collect();
        assert_eq!(inner, ["c", "d"]);
    }

    #[test]
    fn keys_written_unescaped_as_cfengine_writes_them() {
        let j = parse(r#"{"x\"x":"y\"y","a\\b":[1]}"#).unwrap();
        assert_eq!(write_compact(&j), r#"{"a\b":[1],"x"x":"y\"y"}"#);
        assert_eq!(write_compact_json(&j), r#"{"a\\b":[1],"x\"x":"y\"y"}"#);
        assert_eq!(
            write_pretty(&j),
            "{\n  \"a\\b\": [\n    1\n  ],\n  \"x\"x\": \"y\\\"y\"\n}"
        );
    }

    #[test]
    fn numbers_like_cfengine() {
        let mut j =
            parse(r#"{"e":1.5,"f":1.23456789,"h":12345678901234,"n":-3,"z":0.004999}"#).unwrap();
        assert_eq!(primitive_text(&j["e"]).as_deref(), Some("1.5"));
        assert!(needs_normalizing(&j));
        normalize(&mut j);
        assert!(!needs_normalizing(&j));
        assert_eq!(
            write_compact(&j),
            r#"{"e":1.5000,"f":1.2346,"h":1942892530,"n":-3,"z":0.0050}"#
        );
        // Reals read back from their stored text, so `0.004999` expands as
        // `0.01` (rounded twice), as it does in cf-agent.
        assert_eq!(expansion_text(&j["z"]).as_deref(), Some("0.01"));
        assert_eq!(primitive_text(&j["e"]).as_deref(), Some("1.5000"));
        assert_eq!(expansion_text(&Json::Null), None);
    }

    #[test]
    fn writers_sort_keys_and_indent() {
        let j = parse(r#"{"z":[1,{"b":[],"a":"x\"\\/"}],"c":{},"e":[{}]}"#).unwrap();
        assert_eq!(
            write_compact(&j),
            r#"{"c":{},"e":[{}],"z":[1,{"a":"x\"\\/","b":[]}]}"#
        );
        assert_eq!(
            write_pretty(&j),
            "{\n  \"c\": {\n  },\n  \"e\": [\n    {\n    }\n  ],\n  \"z\": [\n    1,\n    {\n      \"a\": \"x\\\"\\\\/\",\n      \"b\": []\n    }\n  ]\n}"
        );
        // Insertion order is kept in the container itself.
        let keys: Vec<_> = j.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, vec!["z", "c", "e"]);
    }

    #[test]
    fn invalid_json_is_an_error() {
        assert!(parse("{\"a\":").is_err());
        assert!(parse("").is_err());
    }
}
