//! String functions: formatting, splitting, case, trimming, hashing.
//!
//! Lengths, heads and tails count bytes, as cf-agent's C strings do; a cut
//! that would split a UTF-8 character moves back to the character start so
//! the result stays valid text.

use super::args::{Args, element_texts};
use super::{FnError, FnResult, FnSpec, class_result, spec};
use crate::eval::EvalContext;
use crate::values::Value;
use crate::values::canon::canonify;
use crate::values::json;
use crate::values::number::{parse_c_double, parse_c_long};
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};

pub static FUNCTIONS: &[FnSpec] = &[
    spec("canonifyuniquely", 1, Some(1), canonifyuniquely),
    spec("format", 1, None, format_fn).pure(),
    spec("join", 2, Some(2), join).pure(),
    spec("splitstring", 3, Some(3), splitstring).pure(),
    spec("string_split", 3, Some(3), string_split).pure(),
    spec("string_length", 1, Some(1), string_length).pure(),
    spec("string_head", 2, Some(2), string_head).pure(),
    spec("string_tail", 2, Some(2), string_tail).pure(),
    spec("string_upcase", 1, Some(1), string_upcase).pure(),
    spec("string_downcase", 1, Some(1), string_downcase).pure(),
    spec("string_reverse", 1, Some(1), string_reverse).pure(),
    spec("string_replace", 3, Some(3), string_replace).pure(),
    spec("string_trim", 1, Some(1), string_trim).pure(),
    spec("string", 1, Some(1), string_fn).pure(),
    spec("escape", 1, Some(1), escape).pure(),
    spec("hash", 2, Some(2), hash).pure(),
    spec("hash_to_int", 3, Some(3), hash_to_int).pure(),
    spec("lastnode", 2, Some(2), lastnode).pure(),
    spec("basename", 1, Some(2), basename).pure(),
    spec("classify", 1, Some(1), classify),
];

fn canonifyuniquely(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("canonifyuniquely", a).str(0, "text")?;
    Ok(Value::str(format!(
        "{}_{}",
        canonify(s),
        hex(&Sha1::digest(s.as_bytes()))
    )))
}

fn join(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("join", a);
    let glue = args.str(0, "glue")?;
    let v = args.collect(ctx, 1, "list")?;
    Ok(Value::str(element_texts(&v, false).join(glue)))
}

/// Splits `s` at every (non-empty) match of `re`, into at most `max`
/// pieces, the last holding the rest.
pub fn split_regex(re: &crate::values::regex::Regex, s: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut pos = 0;
    for (start, end) in re.find_all(s) {
        if end == start {
            continue;
        }
        if out.len() + 1 >= max {
            break;
        }
        out.push(s[pos..start].to_string());
        pos = end;
    }
    out.push(s[pos..].to_string());
    out
}

fn splitstring(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("splitstring", a);
    let s = args.str(0, "string")?;
    let max = args.int(2, "max")?.max(0) as usize;
    // A pattern that does not compile is an error, and the string is one
    // piece, as cf-agent splits it.
    let re = match args.regex(ctx, 1, "regex") {
        Ok(re) => re,
        Err(FnError::Failed(m)) => {
            crate::error!("{m}");
            let whole = (!s.is_empty() && max > 0).then(|| s.to_string());
            return Ok(Value::List(whole.into_iter().collect()));
        }
        Err(e) => return Err(e),
    };
    // splitstring drops what lies past the last allowed piece.
    // An empty string has no pieces here (string_split gives one).
    if s.is_empty() {
        return Ok(Value::List(Vec::new()));
    }
    let mut parts = split_regex(&re, s, usize::MAX);
    parts.truncate(max);
    Ok(Value::List(parts))
}

fn string_split(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("string_split", a);
    let s = args.str(0, "string")?;
    let re = args.regex(ctx, 1, "regex")?;
    let max = args.int(2, "max")?;
    if max < 1 {
        // cf-agent fails it without a word.
        return Err(args.fail_quietly("parameter 'max' must be at least 1"));
    }
    Ok(Value::List(split_from_rest(&re, s, max as usize)))
}

/// string_split's pieces as cf-agent 3.21 cuts them: up to `max - 1` times,
/// the first match in what is left ends a piece and the rest goes on after
/// it. A match of nothing is no exception: it cuts an empty piece and leaves
/// the rest whole, so `string_split("abc", "", "3")` is `{"", "", "abc"}`.
fn split_from_rest(re: &crate::values::regex::Regex, s: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while out.len() + 1 < max {
        let Some((start, end)) = re
            .first_captures(rest)
            .and_then(|c| c.first().copied().flatten())
        else {
            break;
        };
        out.push(rest[..start].to_string());
        rest = &rest[end..];
    }
    out.push(rest.to_string());
    out
}

fn string_length(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("string_length", a).str(0, "string")?;
    Ok(Value::str(s.len().to_string()))
}

/// The string of `string_head` and `string_tail` and how many of its bytes
/// they keep: at most `max`, or all but `-max` when it is negative.
fn head_or_tail<'a>(args: &Args<'a>) -> Result<(&'a str, usize), FnError> {
    let s = args.str(0, "string")?;
    let n = args.int(1, "max")?;
    let len = s.len() as i64;
    let keep = if n < 0 { (len + n).max(0) } else { n.min(len) };
    Ok((s, keep as usize))
}

fn string_head(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let (s, keep) = head_or_tail(&Args::new("string_head", a))?;
    Ok(Value::str(&s[..s.floor_char_boundary(keep)]))
}

fn string_tail(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let (s, keep) = head_or_tail(&Args::new("string_tail", a))?;
    Ok(Value::str(&s[s.floor_char_boundary(s.len() - keep)..]))
}

fn string_upcase(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("string_upcase", a).str(0, "string")?;
    Ok(Value::str(s.to_ascii_uppercase()))
}

fn string_downcase(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("string_downcase", a).str(0, "string")?;
    Ok(Value::str(s.to_ascii_lowercase()))
}

fn string_reverse(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("string_reverse", a).str(0, "string")?;
    Ok(Value::str(s.chars().rev().collect::<String>()))
}

fn string_replace(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("string_replace", a);
    let s = args.str(0, "string")?;
    let from = args.str(1, "match")?;
    let to = args.str(2, "replacement")?;
    if from.is_empty() {
        return Ok(Value::str(s));
    }
    Ok(Value::str(s.replace(from, to)))
}

fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}')
}

fn string_trim(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("string_trim", a).str(0, "string")?;
    Ok(Value::str(s.trim_matches(is_c_space)))
}

/// `string(x)`: a scalar as JSON string content (quotes and backslashes
/// escaped); a container as compact JSON.
fn string_fn(_: &mut EvalContext, a: &[Value]) -> FnResult {
    match a.first() {
        Some(Value::Scalar(s)) => Ok(Value::str(s.replace('\\', "\\\\").replace('"', "\\\""))),
        Some(Value::Data(d)) => Ok(Value::str(json::write_compact(d))),
        Some(Value::List(l)) => Ok(Value::str(json::write_compact(&serde_json::Value::Array(
            l.iter().cloned().map(serde_json::Value::String).collect(),
        )))),
        None => Err(FnError::Failed(
            "function 'string': missing argument".into(),
        )),
    }
}

/// Escapes every character that is not a letter or a digit with a
/// backslash, so the text matches itself as a regular expression.
fn escape(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("escape", a).str(0, "text")?;
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if !c.is_ascii_alphanumeric() && c.is_ascii() {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(Value::str(out))
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The digest of bytes with one of CFEngine's algorithm names.
pub fn digest(algorithm: &str, data: &[u8]) -> Option<Vec<u8>> {
    Some(match algorithm {
        "md5" => Md5::digest(data).to_vec(),
        "sha1" => Sha1::digest(data).to_vec(),
        "sha256" => Sha256::digest(data).to_vec(),
        "sha384" => Sha384::digest(data).to_vec(),
        "sha512" => Sha512::digest(data).to_vec(),
        _ => return None,
    })
}

pub const HASH_ALGORITHMS: &[&str] = &["md5", "sha1", "sha256", "sha384", "sha512"];

fn hash(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("hash", a);
    let s = args.str(0, "text")?;
    let alg = args.option(1, "algorithm", HASH_ALGORITHMS)?;
    let d = digest(alg, s.as_bytes()).ok_or_else(|| args.fail("unknown algorithm"))?;
    Ok(Value::str(hex(&d)))
}

/// `lower + h mod (upper - lower)` where `h` is the first eight bytes of
/// the SHA-256 digest read little-endian, as cf-agent computes it.
fn hash_to_int(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("hash_to_int", a);
    let lo = args.int(0, "lower")?;
    let hi = args.int(1, "upper")?;
    let s = args.str(2, "string")?;
    // cf-agent takes the bounds in either order, and equal bounds give
    // that number whatever the string.
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    if lo == hi {
        return Ok(Value::str(lo.to_string()));
    }
    let d = Sha256::digest(s.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    let h = u64::from_le_bytes(first);
    let range = (hi - lo) as u64;
    Ok(Value::str((lo + (h % range) as i64).to_string()))
}

fn lastnode(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("lastnode", a);
    let s = args.str(0, "string")?;
    let re = args.regex(ctx, 1, "separator")?;
    // An empty string has no nodes: cf-agent's split gives no list and
    // the function fails, without a word.
    if s.is_empty() {
        return Err(args.fail_quietly("an empty string has no last node"));
    }
    let parts = split_regex(&re, s, usize::MAX);
    Ok(Value::str(parts.last().cloned().unwrap_or_default()))
}

fn basename(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("basename", a);
    let path = args.str(0, "path")?;
    let suffix = args.opt_str(1, "suffix")?;
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(Value::str(if path.is_empty() { "" } else { "/" }));
    }
    let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
    let base = match suffix {
        Some(sfx) if !sfx.is_empty() && base.len() > sfx.len() => {
            base.strip_suffix(sfx).unwrap_or(base)
        }
        _ => base,
    };
    Ok(Value::str(base))
}

fn classify(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let s = Args::new("classify", a).str(0, "text")?;
    Ok(class_result(ctx.class_is_set(&canonify(s))))
}

// ---- format ---------------------------------------------------------------

/// The longest number `format` prints, as cf-agent's 4096-byte buffer
/// allows; also the largest precision it takes.
const MAX_FORMAT_NUMBER: usize = 4095;
/// The largest field width `format` pads to (1 MiB).
const MAX_FORMAT_WIDTH: usize = 1 << 20;

/// One `%...` conversion: flags, width, precision and the letter.
#[derive(Debug, Default, Clone, PartialEq)]
struct Conv {
    left: bool,
    plus: bool,
    space: bool,
    zero: bool,
    alt: bool,
    width: Option<usize>,
    precision: Option<usize>,
    letter: char,
}

fn format_fn(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("format", a);
    let fmt = args.str(0, "format")?;
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut next_arg = 1;
    let mut chars = fmt.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if let Some(&(_, '%')) = chars.peek() {
            chars.next();
            out.push('%');
            continue;
        }
        let mut conv = Conv::default();
        while let Some(&(_, f)) = chars.peek() {
            match f {
                '-' => conv.left = true,
                '+' => conv.plus = true,
                ' ' => conv.space = true,
                '0' => conv.zero = true,
                '#' => conv.alt = true,
                _ => break,
            }
            chars.next();
        }
        let num = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
            let mut n: Option<usize> = None;
            while let Some(&(_, d)) = chars.peek() {
                if let Some(v) = d.to_digit(10) {
                    n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(v as usize));
                    chars.next();
                } else {
                    break;
                }
            }
            n
        };
        // Bounded, so that a width or precision of many digits is no
        // request for gigabytes (or a panic of Rust's formatter).
        conv.width = num(&mut chars).map(|w| w.min(MAX_FORMAT_WIDTH));
        if let Some(&(_, '.')) = chars.peek() {
            chars.next();
            conv.precision = Some(num(&mut chars).unwrap_or(0).min(MAX_FORMAT_NUMBER));
        }
        while let Some(&(_, l)) = chars.peek() {
            if matches!(l, 'l' | 'h' | 'j' | 'z' | 't' | 'L') {
                chars.next();
            } else {
                break;
            }
        }
        // A conversion the text ends in before its letter is dropped, as
        // cf-agent's reader of conversions stops where none matches.
        let Some((_, letter)) = chars.next() else {
            break;
        };
        conv.letter = letter;
        let Some(arg) = a.get(next_arg) else {
            return Err(args.fail(format!(
                "the format '{fmt}' needs more arguments than the {} given",
                a.len() - 1
            )));
        };
        next_arg += 1;
        let text = match letter {
            'S' => {
                let text = match arg {
                    // A name: the container or list it names,
                    // serialized; an element of a container is written
                    // as JSON even when it is a string (quoted).
                    Value::Scalar(s) => match ctx.lookup_container_element(s) {
                        Some(j) => json::write_compact(&j),
                        None => {
                            // cf-agent leaves the call unresolved and says
                            // why only under -v (the acceptance framework's
                            // dcs_all_classes_to_string meets this in
                            // every run).
                            let v = ctx.lookup(s).ok_or_else(|| {
                                args.fail_quietly(format!(
                                    "%S needs a data container or a list instead of '{s}'"
                                ))
                            })?;
                            if let Value::Scalar(_) = v {
                                return Err(args.fail(format!(
                                    "%S expected a list variable or a data container, \
                                     got '{s}', a variable of type 'string'"
                                )));
                            }
                            ctx.sort_written_container(s);
                            serialize(&v)
                        }
                    },
                    other => serialize(other),
                };
                pad(&conv, text)
            }
            's' => {
                let s = match arg {
                    Value::Scalar(s) => s.clone(),
                    other => serialize(other),
                };
                let s = match conv.precision {
                    Some(p) => s[..s.floor_char_boundary(p)].to_string(),
                    None => s,
                };
                pad(&conv, s)
            }
            // cf-agent prints a number into a buffer of 4096 bytes.
            'd' | 'o' | 'x' => {
                let mut t = format_int(&conv, parse_c_long(arg.as_scalar().unwrap_or("")));
                t.truncate(MAX_FORMAT_NUMBER);
                t
            }
            'f' => {
                let mut t = format_real(&conv, parse_c_double(arg.as_scalar().unwrap_or("")));
                t.truncate(MAX_FORMAT_NUMBER);
                t
            }
            // Conversions C knows but cf-agent's format() does not handle.
            'i' | 'u' | 'X' | 'c' | 'e' | 'E' | 'F' | 'g' | 'G' | 'a' | 'A' | 'p' | 'n' => {
                "(unhandled format)".to_string()
            }
            _ => String::new(),
        };
        out.push_str(&text);
    }
    Ok(Value::str(out))
}

/// A list as `{ "a", "b" }`, a container as compact JSON (`%S`).
fn serialize(v: &Value) -> String {
    match v {
        Value::Scalar(s) => s.clone(),
        Value::List(l) => {
            let items: Vec<String> = l
                .iter()
                .map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Data(d) => json::write_compact(d),
    }
}

fn pad(conv: &Conv, s: String) -> String {
    let len = s.chars().count();
    match conv.width {
        Some(w) if w > len => {
            let fill = " ".repeat(w - len);
            if conv.left { s + &fill } else { fill + &s }
        }
        _ => s,
    }
}

fn format_int(conv: &Conv, n: i64) -> String {
    let (neg, mut digits) = match conv.letter {
        'o' => (false, format!("{:o}", n as u64)),
        'x' => (false, format!("{:x}", n as u64)),
        _ => (n < 0, n.unsigned_abs().to_string()),
    };
    if let Some(p) = conv.precision {
        if digits.len() < p {
            digits = "0".repeat(p - digits.len()) + &digits;
        }
        if p == 0 && n == 0 {
            digits.clear();
        }
    }
    let mut prefix = String::new();
    if neg {
        prefix.push('-');
    } else if conv.plus && conv.letter == 'd' {
        prefix.push('+');
    } else if conv.space && conv.letter == 'd' {
        prefix.push(' ');
    }
    if conv.alt && n != 0 {
        match conv.letter {
            'x' => prefix.push_str("0x"),
            'o' if !digits.starts_with('0') => prefix.push('0'),
            _ => {}
        }
    }
    zero_pad(conv, prefix, digits, conv.precision.is_none())
}

fn zero_pad(conv: &Conv, prefix: String, body: String, zero_allowed: bool) -> String {
    let len = prefix.len() + body.len();
    match conv.width {
        Some(w) if w > len && conv.zero && !conv.left && zero_allowed => {
            format!("{prefix}{}{body}", "0".repeat(w - len))
        }
        _ => pad(conv, prefix + &body),
    }
}

fn format_real(conv: &Conv, v: f64) -> String {
    let p = conv.precision.unwrap_or(6);
    let neg = v.is_sign_negative() && v != 0.0;
    let a = v.abs();
    let body = if a.is_nan() {
        "nan".to_string()
    } else if a.is_infinite() {
        "inf".to_string()
    } else {
        format!("{a:.p$}")
    };
    let mut prefix = String::new();
    if neg {
        prefix.push('-');
    } else if conv.plus {
        prefix.push('+');
    } else if conv.space {
        prefix.push(' ');
    }
    zero_pad(conv, prefix, body, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(f: super::super::FnImpl, args: &[&str]) -> FnResult {
        let mut ctx = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let a: Vec<Value> = args.iter().map(|s| Value::str(*s)).collect();
        f(&mut ctx, &a)
    }

    /// A fuzzer's find (fuzz/findings/): a precision of 25 digits made
    /// Rust's formatter panic; a width of as many asked for all memory.
    /// As cf-agent, a number is at most 4095 characters.
    #[test]
    fn huge_widths_and_precisions_are_bounded() {
        let text = |r: FnResult| r.unwrap().as_scalar().unwrap().to_string();
        let f = text(call(format_fn, &["%.2222222222222222222222222f", "3.14"]));
        assert_eq!(f.len(), 4095);
        assert!(f.starts_with("3.14000"));
        assert_eq!(text(call(format_fn, &["%6000s", "x"])).len(), 6000);
        let wide = text(call(format_fn, &["%99999999999999999999s", "x"]));
        assert_eq!(wide.len(), 1 << 20);
    }

    #[test]
    fn printf_conversions() {
        let r = call(
            format_fn,
            &[
                "%5s|%-4d|%.2f|%x|%%|%05d|%+d|%e|%q|%.3s|%#x|%d",
                "ab",
                "12",
                "3.14159",
                "255",
                "42",
                "7",
                "1",
                "1",
                "abcdef",
                "255",
                "12abc",
            ],
        );
        assert_eq!(
            r,
            Ok(Value::str(
                "   ab|12  |3.14|ff|%|00042|+7|(unhandled format)||abc|0xff|12"
            ))
        );
        assert!(call(format_fn, &["%s %s", "a"]).is_err());
        // A conversion the format ends in is dropped, as cf-agent drops it.
        assert_eq!(call(format_fn, &["%"]), Ok(Value::str("")));
    }

    #[test]
    fn heads_tails_and_bytes() {
        assert_eq!(call(string_head, &["abcdef", "-2"]), Ok(Value::str("abcd")));
        assert_eq!(call(string_tail, &["abcdef", "-2"]), Ok(Value::str("cdef")));
        assert_eq!(
            call(string_tail, &["abcdef", "100"]),
            Ok(Value::str("abcdef"))
        );
        assert_eq!(call(string_length, &["héllo"]), Ok(Value::str("6")));
        // Never split a character.
        assert_eq!(call(string_head, &["héllo", "2"]), Ok(Value::str("h")));
        assert!(call(string_head, &["x", "y"]).is_err());
    }

    #[test]
    fn hash_to_int_matches_cfengine() {
        assert_eq!(
            call(hash_to_int, &["0", "100", "abc"]),
            Ok(Value::str("74"))
        );
        assert_eq!(
            call(hash_to_int, &["-5", "5", "hello"]),
            Ok(Value::str("-3"))
        );
        assert_eq!(call(hash_to_int, &["0", "1000", ""]), Ok(Value::str("227")));
        assert_eq!(call(hash_to_int, &["5", "5", "x"]), Ok(Value::str("5")));
        assert_eq!(call(hash_to_int, &["10", "9", "x"]), Ok(Value::str("9")));
    }

    #[test]
    fn splitting() {
        let mut ctx = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let re = ctx.regexes.get(",").unwrap();
        assert_eq!(split_regex(&re, "a,b,,c", 2), vec!["a", "b,,c"]);
        assert_eq!(
            split_regex(&re, "a,b,,c", usize::MAX),
            vec!["a", "b", "", "c"]
        );
        assert_eq!(split_regex(&re, "", usize::MAX), vec![""]);
        let empty = ctx.regexes.get("").unwrap();
        assert_eq!(split_from_rest(&empty, "abc", 3), vec!["", "", "abc"]);
        assert_eq!(split_from_rest(&empty, "abc", 1), vec!["abc"]);
        assert_eq!(split_from_rest(&empty, "", 3), vec!["", "", ""]);
        assert_eq!(split_from_rest(&re, "a,b,,c", 3), vec!["a", "b", ",c"]);
    }
}
