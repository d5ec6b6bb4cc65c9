//! The tokenizer. It follows the longest-match rules of CFEngine's own
//! lexer, so `linux::` is a class guard, `vars:` a promise type and
//! `ns:name` one symbol, and it never fails: anything it cannot read
//! becomes an `Unknown` token that the parser reports.
//!
//! The `@if`/`@else`/`@endif` macros are handled here, because whether a
//! region of text exists at all is a lexical question.

use super::diagnostic::Diagnostic;
use super::source::Span;
use nom::IResult;
use nom::bytes::complete::{take_till, take_while1};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or namespaced symbol (`main`, `default:main`).
    Word,
    /// `vars:`; the span covers the colon.
    PromiseType,
    /// `linux.!windows::`; the span covers the colons.
    ClassGuard,
    /// `"$(x)"::` or `'...'::`.
    QuotedGuard,
    /// A quoted string; the span covers the quotes.
    Str,
    /// `$(x)`, `${x}`, `@(x)`, `@{x}` written without quotes.
    NakedVar,
    FatArrow,
    ThinArrow,
    LBrace,
    RBrace,
    LParen,
    RParen,
    Comma,
    Semi,
    /// A character or string that cannot start any token.
    Unknown,
    /// A string that runs to the end of the file.
    Unterminated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: Tok,
    pub span: Span,
}

/// The version that `@if` macros compare against.
pub const COMPAT_VERSION: (u32, u32, u32) = (3, 21, 0);

/// Feature names `@if feature(...)` knows to be present.
pub const FEATURES: &[&str] = &[
    "def_json_preparse",
    "host_specific_data_load",
    "copyfrom_restrict_keys",
    "tls_1_0",
    "tls_1_1",
    "tls_1_2",
    "tls_1_3",
    "yaml",
    "xml",
];

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

fn is_class_byte(b: u8) -> bool {
    is_word_byte(b) || matches!(b, b'.' | b'|' | b'&' | b'!' | b'(' | b')' | b':')
}

fn is_class_run_byte(b: u8) -> bool {
    is_class_byte(b) || b == b' ' || b == b'\t'
}

fn word(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii())(i)
}

fn letters(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| c.is_ascii_alphabetic() || c == '_')(i)
}

/// Length of a quoted string starting at `i` (which starts with the quote),
/// or `None` when it is not closed.
fn quoted_len(i: &str) -> Option<usize> {
    let bytes = i.as_bytes();
    let q = bytes[0];
    let mut k = 1;
    while k < bytes.len() {
        let b = bytes[k];
        if b == b'\\' && q != b'`' {
            k += 2;
            continue;
        }
        if b == q {
            return Some(k + 1);
        }
        k += 1;
    }
    None
}

/// Length of a naked variable reference `$(...)`/`@{...}` with balanced
/// brackets, or `None`.
fn naked_var_len(i: &str) -> Option<usize> {
    let bytes = i.as_bytes();
    if bytes.len() < 3 || !matches!(bytes[0], b'$' | b'@') {
        return None;
    }
    let close = match bytes[1] {
        b'(' => b')',
        b'{' => b'}',
        _ => return None,
    };
    let mut stack = vec![close];
    let mut k = 2;
    while k < bytes.len() {
        let b = bytes[k];
        match b {
            b'(' => stack.push(b')'),
            b'{' => stack.push(b'}'),
            b')' | b'}' => {
                if stack.pop() != Some(b) {
                    return None;
                }
                if stack.is_empty() {
                    return if k > 2 { Some(k + 1) } else { None };
                }
            }
            b'\n' | b'"' | b'\'' | b';' | b',' | b' ' | b'\t' => return None,
            _ => {}
        }
        k += 1;
    }
    None
}

/// The result of lexing a whole file.
#[derive(Debug, Default)]
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub diagnostics: Vec<Diagnostic>,
}

struct MacroState {
    /// Inside an `@if` whose condition decided what to keep.
    open: Option<(Span, bool, bool)>, // (span of @if, condition, in_else)
}

pub fn lex(src: &str) -> Lexed {
    let mut out = Lexed {
        tokens: Vec::with_capacity(src.len() / 6),
        diagnostics: Vec::new(),
    };
    let bytes = src.as_bytes();
    let mut pos = 0usize;
    let mut macros = MacroState { open: None };
    let mut at_line_start = true;
    while pos < bytes.len() {
        let b = bytes[pos];
        if at_line_start && b == b'@' && bytes.get(pos + 1).is_some_and(u8::is_ascii_alphabetic) {
            let (rest_len, skip) = handle_macro(src, pos, &mut macros, &mut out.diagnostics);
            pos += rest_len;
            if skip {
                pos = skip_disabled(src, pos);
            }
            continue;
        }
        at_line_start = false;
        match b {
            b'\n' => {
                at_line_start = true;
                pos += 1;
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c => pos += 1,
            b'#' => {
                let rest = &src[pos..];
                let (_, comment) = take_till::<_, _, nom::error::Error<&str>>(|c| c == '\n')(rest)
                    .unwrap_or(("", rest));
                pos += comment.len();
            }
            b'"' | b'\'' | b'`' => match quoted_len(&src[pos..]) {
                Some(len) => {
                    let end = pos + len;
                    if b != b'`' && src[end..].starts_with("::") {
                        out.push(Tok::QuotedGuard, pos, end + 2);
                        pos = end + 2;
                    } else {
                        out.push(Tok::Str, pos, end);
                        pos = end;
                    }
                }
                None => {
                    out.push(Tok::Unterminated, pos, src.len());
                    pos = src.len();
                }
            },
            b'$' | b'@' => match naked_var_len(&src[pos..]) {
                Some(len) => {
                    out.push(Tok::NakedVar, pos, pos + len);
                    pos += len;
                }
                None => {
                    let len = src[pos..].chars().next().map_or(1, char::len_utf8);
                    out.push(Tok::Unknown, pos, pos + len);
                    pos += len;
                }
            },
            b'=' if bytes.get(pos + 1) == Some(&b'>') => {
                out.push(Tok::FatArrow, pos, pos + 2);
                pos += 2;
            }
            b'-' if bytes.get(pos + 1) == Some(&b'>') => {
                out.push(Tok::ThinArrow, pos, pos + 2);
                pos += 2;
            }
            b'{' => {
                out.push(Tok::LBrace, pos, pos + 1);
                pos += 1;
            }
            b'}' => {
                out.push(Tok::RBrace, pos, pos + 1);
                pos += 1;
            }
            b',' => {
                out.push(Tok::Comma, pos, pos + 1);
                pos += 1;
            }
            b';' => {
                out.push(Tok::Semi, pos, pos + 1);
                pos += 1;
            }
            _ if is_class_byte(b) => {
                pos = lex_wordlike(src, pos, &mut out);
            }
            _ => {
                let len = src[pos..].chars().next().map_or(1, char::len_utf8);
                out.push(Tok::Unknown, pos, pos + len);
                pos += len;
            }
        }
    }
    if let Some((span, _, _)) = macros.open {
        out.diagnostics
            .push(Diagnostic::error(span, "'@if' is never closed by '@endif'"));
    }
    out
}

impl Lexed {
    fn push(&mut self, kind: Tok, start: usize, end: usize) {
        self.tokens.push(Token {
            kind,
            span: Span::new(start, end),
        });
    }
}

/// A class guard, promise type, word or parenthesis, by longest match.
fn lex_wordlike(src: &str, pos: usize, out: &mut Lexed) -> usize {
    let bytes = src.as_bytes();
    // A class guard is the longest run of class characters (spaces and
    // tabs included) that ends in `::`.
    let mut run_end = pos;
    while run_end < bytes.len() && is_class_run_byte(bytes[run_end]) {
        run_end += 1;
    }
    if let Some(idx) = src[pos..run_end].rfind("::") {
        let end = pos + idx + 2;
        // `::` alone, or a run that starts with the operator of a
        // word-less run, is still a guard; the parser checks its syntax.
        out.push(Tok::ClassGuard, pos, end);
        return end;
    }
    let rest = &src[pos..];
    match bytes[pos] {
        b'(' => {
            out.push(Tok::LParen, pos, pos + 1);
            return pos + 1;
        }
        b')' => {
            out.push(Tok::RParen, pos, pos + 1);
            return pos + 1;
        }
        _ => {}
    }
    if let Ok((after, w)) = word(rest) {
        let mut end = pos + w.len();
        if let Some(tail) = after.strip_prefix(':') {
            match word(tail) {
                // `ns:name` is longer than `ns:` as a promise type.
                Ok((_, w2)) => end += 1 + w2.len(),
                Err(_) if letters(w).map(|(r, _)| r.is_empty()).unwrap_or(false) => {
                    out.push(Tok::PromiseType, pos, end + 1);
                    return end + 1;
                }
                Err(_) => {}
            }
        }
        out.push(Tok::Word, pos, end);
        return end;
    }
    // An operator character outside a guard.
    let len = rest.chars().next().map_or(1, char::len_utf8);
    out.push(Tok::Unknown, pos, pos + len);
    pos + len
}

/// Reads one macro line at `pos`. Returns the bytes consumed and whether the
/// text that follows is disabled.
fn handle_macro(
    src: &str,
    pos: usize,
    state: &mut MacroState,
    diags: &mut Vec<Diagnostic>,
) -> (usize, bool) {
    let rest = &src[pos..];
    let line_len = rest.find('\n').map(|i| i + 1).unwrap_or(rest.len());
    let line = rest[..line_len].trim_end();
    let span = Span::new(pos, pos + line.len());
    let (directive, arg) = match line.find(|c: char| c.is_whitespace()) {
        Some(i) => (&line[..i], line[i..].trim()),
        None => (line, ""),
    };
    match directive {
        "@if" => {
            if let Some((open, _, _)) = state.open {
                diags.push(
                    Diagnostic::error(span, "'@if' cannot be nested inside another '@if'")
                        .with_help(format!(
                            "the open '@if' starts at byte {}; close it with '@endif' first",
                            open.start
                        )),
                );
            }
            let cond = match eval_macro_condition(arg) {
                Ok(c) => c,
                Err(msg) => {
                    diags.push(Diagnostic::error(span, msg));
                    false
                }
            };
            state.open = Some((span, cond, false));
            (line_len, !cond)
        }
        "@else" => match state.open {
            Some((s, cond, false)) => {
                state.open = Some((s, cond, true));
                (line_len, cond)
            }
            Some((s, cond, true)) => {
                diags.push(Diagnostic::error(
                    span,
                    "a second '@else' in the same '@if'",
                ));
                state.open = Some((s, cond, true));
                (line_len, cond)
            }
            None => {
                diags.push(Diagnostic::error(span, "'@else' without '@if'"));
                (line_len, false)
            }
        },
        "@endif" => {
            if state.open.take().is_none() {
                diags.push(Diagnostic::error(span, "'@endif' without '@if'"));
            }
            (line_len, false)
        }
        _ => {
            diags.push(
                Diagnostic::error(span, format!("unknown macro '{directive}'"))
                    .with_help("the macros are '@if', '@else' and '@endif'"),
            );
            (line_len, false)
        }
    }
}

/// Skips disabled text up to (not including) the next `@else`/`@endif` line.
fn skip_disabled(src: &str, mut pos: usize) -> usize {
    while pos < src.len() {
        let rest = &src[pos..];
        if rest.starts_with("@else") || rest.starts_with("@endif") {
            return pos;
        }
        match rest.find('\n') {
            Some(i) => pos += i + 1,
            None => return src.len(),
        }
    }
    pos
}

fn parse_version(s: &str) -> Option<Vec<u32>> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    s.split('.').map(|p| p.trim().parse::<u32>().ok()).collect()
}

/// Compares the compat version with a possibly partial version: `3.21`
/// equals every 3.21.x.
fn cmp_version(v: &[u32]) -> std::cmp::Ordering {
    let ours = [COMPAT_VERSION.0, COMPAT_VERSION.1, COMPAT_VERSION.2];
    for (a, b) in ours.iter().zip(v.iter()) {
        match a.cmp(b) {
            std::cmp::Ordering::Equal => continue,
            o => return o,
        }
    }
    std::cmp::Ordering::Equal
}

fn eval_macro_condition(arg: &str) -> Result<bool, String> {
    use std::cmp::Ordering::*;
    let open = arg
        .find('(')
        .ok_or_else(|| format!("malformed '@if {arg}': expected 'name(arguments)'"))?;
    if !arg.ends_with(')') {
        return Err(format!("malformed '@if {arg}': expected ')' at the end"));
    }
    let name = arg[..open].trim();
    let inner = &arg[open + 1..arg.len() - 1];
    let version = |s: &str| {
        parse_version(s).ok_or_else(|| format!("'{}' is not a version in '@if {arg}'", s.trim()))
    };
    Ok(match name {
        "minimum_version" => cmp_version(&version(inner)?) != Less,
        "maximum_version" => cmp_version(&version(inner)?) != Greater,
        "before_version" => cmp_version(&version(inner)?) == Less,
        "at_version" => cmp_version(&version(inner)?) == Equal,
        "after_version" => cmp_version(&version(inner)?) == Greater,
        "between_versions" => {
            let (a, b) = inner
                .split_once(',')
                .ok_or_else(|| format!("'@if {arg}' needs two versions"))?;
            cmp_version(&version(a)?) != Less && cmp_version(&version(b)?) != Greater
        }
        "feature" => FEATURES.contains(&inner.trim()),
        _ => {
            return Err(format!(
                "unknown '@if' condition '{name}'; expected minimum_version, maximum_version, \
                 before_version, at_version, after_version, between_versions or feature"
            ));
        }
    })
}

/// The value of a string token: quotes removed, `\<quote>` and `\\`
/// resolved (other backslashes are kept, as CFEngine keeps them).
pub fn unquote(raw: &str) -> String {
    let bytes = raw.as_bytes();
    if bytes.len() < 2 {
        return String::new();
    }
    let q = bytes[0];
    let inner = &raw[1..raw.len() - 1];
    if q == b'`' || !inner.contains('\\') {
        return inner.to_string();
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some(&n) if n == q as char || n == '\\' => {
                    out.push(n);
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Tok, &str)> {
        lex(src)
            .tokens
            .iter()
            .map(|t| (t.kind, &src[t.span.range()]))
            .collect()
    }

    #[test]
    fn longest_match() {
        use Tok::*;
        assert_eq!(
            kinds("vars: linux.!x:: default:main ns:b.c"),
            vec![
                (ClassGuard, "vars: linux.!x::"),
                (Word, "default:main"),
                (Word, "ns:b"),
                (Unknown, "."),
                (Word, "c")
            ]
        );
        assert_eq!(
            kinds("vars:\n any::"),
            vec![(PromiseType, "vars:"), (ClassGuard, "any::")]
        );
        assert_eq!(
            kinds("f(a, b)"),
            vec![
                (Word, "f"),
                (LParen, "("),
                (Word, "a"),
                (Comma, ","),
                (Word, "b"),
                (RParen, ")")
            ]
        );
        assert_eq!(kinds("\"$(x)\"::"), vec![(QuotedGuard, "\"$(x)\"::")]);
        assert_eq!(
            kinds("@(a[$(i)]) ${b}"),
            vec![(NakedVar, "@(a[$(i)])"), (NakedVar, "${b}")]
        );
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(unquote(r#""x\"y\\z\n""#), r#"x"y\z\n"#);
        assert_eq!(unquote(r"'x\'y'"), "x'y");
        assert_eq!(unquote(r"`a\b`"), r"a\b");
        assert_eq!(kinds("\"abc"), vec![(Tok::Unterminated, "\"abc")]);
    }

    #[test]
    fn macros() {
        let src = "@if minimum_version(3.7)\nyes\n@else\nno\n@endif\n@if before_version(3.0)\nhidden\n@endif\n";
        assert_eq!(kinds(src), vec![(Tok::Word, "yes")]);
        let l = lex("@if minimum_version(3.7)\nx\n");
        assert_eq!(l.diagnostics.len(), 1);
        assert!(eval_macro_condition("between_versions(3.18, 3.22)").unwrap());
        assert!(eval_macro_condition("at_version(3.21)").unwrap());
        assert!(!eval_macro_condition("after_version(3.21.0)").unwrap());
        assert!(eval_macro_condition("feature(yaml)").unwrap());
        assert!(eval_macro_condition("bogus(1)").is_err());
    }
}
