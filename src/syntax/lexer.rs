//! The tokenizer. It follows the longest-match rules of CFEngine's own
//! lexer, so `linux::` is a class guard, `vars:` a promise type and
//! `ns:name` one symbol, and it never fails: anything it cannot read
//! becomes an `Unknown` token that the parser reports.
//!
//! The `@if`/`@else`/`@endif` macros are handled here, because whether a
//! region of text exists at all is a lexical question.

use super::diagnostic::Diagnostic;
use super::source::Span;
use compact_str::CompactString;

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

/// cf-promises refuses an identifier (or `ns:name`) of this many bytes or
/// more: its buffers for names hold 1023 bytes and a terminator.
const MAX_IDENTIFIER_LEN: usize = 1024;

/// Per byte, which of the classes below it belongs to: one load instead
/// of a chain of comparisons for each byte of the file.
const WORD: u8 = 1;
const CLASS: u8 = 2;
const CLASS_RUN: u8 = 4;
const COLON: u8 = 8;
static BYTE_CLASSES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        let word = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        let class = word || matches!(c, b'.' | b'|' | b'&' | b'!' | b'(' | b')' | b':');
        let run = class || c == b' ' || c == b'\t';
        t[b] = ((word as u8) * WORD)
            | ((class as u8) * CLASS)
            | ((run as u8) * CLASS_RUN)
            | (((c == b':') as u8) * COLON);
        b += 1;
    }
    t
};

fn is_word_byte(b: u8) -> bool {
    BYTE_CLASSES[b as usize] & WORD != 0
}

fn is_class_byte(b: u8) -> bool {
    BYTE_CLASSES[b as usize] & CLASS != 0
}

/// The end of the run of blanks at `pos`. Indentation is much of a file
/// and comes as runs of spaces, so those are stepped over eight at a time.
fn skip_blanks(bytes: &[u8], mut pos: usize) -> usize {
    if bytes.get(pos) == Some(&b' ') {
        while let Some(chunk) = bytes.get(pos..pos + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let not_spaces = word ^ u64::from_le_bytes([b' '; 8]);
            if not_spaces != 0 {
                pos += (not_spaces.trailing_zeros() / 8) as usize;
                break;
            }
            pos += 8;
        }
    }
    while pos < bytes.len() && matches!(bytes[pos], b' ' | b'\t') {
        pos += 1;
    }
    pos
}

/// An identifier: ASCII letters, digits, `_` and any non-ASCII character
/// (every byte of a multi-byte UTF-8 character is >= 0x80, so working on
/// bytes never splits one). `None` when `i` does not start with one.
fn word(i: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = i.iter().position(|&b| !is_word_byte(b)).unwrap_or(i.len());
    (len > 0).then(|| (&i[len..], &i[..len]))
}

fn is_letters(w: &[u8]) -> bool {
    w.iter().all(|&b| b.is_ascii_alphabetic() || b == b'_')
}

/// Start of the last `::` in `bytes`.
fn last_double_colon(bytes: &[u8]) -> Option<usize> {
    (1..bytes.len())
        .rev()
        .find(|&i| bytes[i] == b':' && bytes[i - 1] == b':')
        .map(|i| i - 1)
}

/// Length of a quoted string starting at `i` (which starts with the quote),
/// or `None` when it is not closed.
fn quoted_len(i: &str) -> Option<usize> {
    let bytes = i.as_bytes();
    let q = bytes[0];
    let mut k = 1;
    loop {
        // Only the closing quote and (outside backquotes) a backslash
        // matter: jump from one to the next.
        let rest = bytes.get(k..)?;
        let at = match q {
            b'`' => crate::scan::memchr(q, rest),
            _ => crate::scan::memchr2(q, b'\\', rest),
        }?;
        k += at;
        if bytes[k] == q {
            return Some(k + 1);
        }
        k += 2;
    }
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
                    return (k > 2 && naked_name_ok(&bytes[2..k])).then_some(k + 1);
                }
            }
            b'\n' | b'"' | b'\'' | b';' | b',' | b' ' | b'\t' => return None,
            _ => {}
        }
        k += 1;
    }
    None
}

/// Whether the inside of a naked reference is one cf-promises' lexer takes:
/// name characters (brackets included), or a name followed by one index
/// that may hold references (`a[$(k)]`). `@($(x))` and `@(a[$(k)][x])` are
/// not naked references.
fn naked_name_ok(inner: &[u8]) -> bool {
    let name = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':') || *b >= 0x80;
    if inner.iter().all(|b| name(b) || matches!(b, b'[' | b']')) {
        return true;
    }
    let Some(open) = inner.iter().position(|&b| b == b'[') else {
        return false;
    };
    let closes = inner.iter().rev().take_while(|&&b| b == b']').count();
    let index = &inner[open + 1..inner.len() - closes];
    open > 0
        && closes > 0
        && inner[..open].iter().all(name)
        && !index.is_empty()
        && index
            .iter()
            .all(|b| name(b) || matches!(b, b'$' | b'(' | b')' | b'{' | b'}'))
}

/// The result of lexing a whole file.
#[derive(Debug, Default)]
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub diagnostics: Vec<Diagnostic>,
}

/// One open `@if`: where it was written and whether the text after the
/// last macro line is read.
struct MacroFrame {
    span: Span,
    enabled: bool,
    else_seen: bool,
}

#[derive(Default)]
struct MacroState {
    open: Vec<MacroFrame>,
}

pub fn lex(src: &str) -> Lexed {
    lex_from(src, 0)
}

/// Lexes the text from `start`, a line start, to its end, as [`lex`] reads
/// it there when no `@if` is open; spans and line numbers are those of all
/// of `src`. The parser's second thread reads the second half of a big
/// file with it.
pub fn lex_from(src: &str, start: usize) -> Lexed {
    let mut out = Lexed {
        tokens: Vec::with_capacity((src.len() - start) / 6),
        diagnostics: Vec::new(),
    };
    let bytes = src.as_bytes();
    let mut pos = start;
    let mut macros = MacroState::default();
    // Only blanks so far on this line.
    let mut at_line_start = true;
    // The end of a run of class characters already known to hold no `::`.
    let mut guardless_until = 0usize;
    while pos < bytes.len() {
        let b = bytes[pos];
        if at_line_start && b == b'@' && bytes.get(pos + 1).is_some_and(u8::is_ascii_alphabetic) {
            let known = ["@if", "@else", "@endif"]
                .iter()
                .any(|m| src[pos..].starts_with(m));
            if known && pos > 0 && bytes[pos - 1] != b'\n' {
                // Read it as the macro it was meant to be, so that its
                // partner '@endif' still matches, but say where it belongs.
                let len = src[pos..]
                    .find(|c: char| c.is_whitespace())
                    .unwrap_or(src.len() - pos);
                out.diagnostics.push(
                    Diagnostic::error(
                        Span::new(pos, pos + len),
                        format!(
                            "the macro '{}' must start at the beginning of its line",
                            &src[pos..pos + len]
                        ),
                    )
                    .with_help("remove the blanks before it"),
                );
            }
            let (len, skip) = handle_macro(src, pos, &mut macros, &mut out.diagnostics);
            pos += len;
            if skip {
                pos = skip_disabled(src, pos);
            } else {
                // The rest of the macro's line is read as policy text, as
                // cf-promises reads it (a comment there is common).
                at_line_start = src[..pos].ends_with('\n');
            }
            continue;
        }
        if b == b' ' || b == b'\t' {
            pos = skip_blanks(bytes, pos + 1);
            continue;
        }
        at_line_start = false;
        match b {
            b'\n' => {
                at_line_start = true;
                pos += 1;
            }
            // cf-promises takes blanks, tabs and CR-LF line ends as
            // white space; a lone CR, a form feed or a vertical tab is an
            // unexpected character.
            b'\r' if bytes.get(pos + 1) == Some(&b'\n') => pos += 1,
            b'#' => {
                pos = src[pos..].find('\n').map_or(src.len(), |i| pos + i);
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
                pos = lex_wordlike(src, pos, &mut out, &mut guardless_until);
            }
            _ => {
                let len = src[pos..].chars().next().map_or(1, char::len_utf8);
                out.push(Tok::Unknown, pos, pos + len);
                pos += len;
            }
        }
    }
    for frame in macros.open {
        out.diagnostics.push(Diagnostic::error(
            frame.span,
            "'@if' is never closed by '@endif'",
        ));
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
///
/// `guardless_until` remembers where the last run without `::` ended: a
/// token that starts inside that run has the rest of it as its run, so
/// it cannot be a guard either, and the run is not scanned again (which
/// would be quadratic in the length of a line of words).
fn lex_wordlike(src: &str, pos: usize, out: &mut Lexed, guardless_until: &mut usize) -> usize {
    let bytes = src.as_bytes();
    // A class guard is the longest run of class characters (spaces and
    // tabs included) that ends in `::`.
    if pos >= *guardless_until {
        let mut run_end = pos;
        // Whether the run holds a colon at all: most runs (attribute
        // names, words) do not, and are not searched again for `::`.
        let mut seen = 0;
        while let Some(&b) = bytes.get(run_end) {
            let class = BYTE_CLASSES[b as usize];
            if class & CLASS_RUN == 0 {
                break;
            }
            seen |= class;
            run_end += 1;
        }
        let guard_end = if seen & COLON != 0 {
            last_double_colon(&bytes[pos..run_end])
        } else {
            None
        };
        match guard_end {
            Some(idx) => {
                let end = pos + idx + 2;
                // `::` alone, or a run that starts with the operator of a
                // word-less run, is still a guard; the parser checks its
                // syntax.
                out.push(Tok::ClassGuard, pos, end);
                return end;
            }
            None => *guardless_until = run_end,
        }
    }
    let rest = &bytes[pos..];
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
    if let Some((after, w)) = word(rest) {
        let mut end = pos + w.len();
        if let Some(tail) = after.strip_prefix(b":") {
            match word(tail) {
                // `ns:name` is longer than `ns:` as a promise type.
                Some((_, w2)) => end += 1 + w2.len(),
                None if is_letters(w) => {
                    out.push(Tok::PromiseType, pos, end + 1);
                    return end + 1;
                }
                None => {}
            }
        }
        if end - pos >= MAX_IDENTIFIER_LEN {
            let what = if bytes[pos..end].contains(&b':') {
                "qualified identifier too long"
            } else {
                "identifier too long"
            };
            out.diagnostics.push(
                Diagnostic::error(Span::new(pos, end), what).with_help(format!(
                    "names are limited to {} bytes",
                    MAX_IDENTIFIER_LEN - 1
                )),
            );
        }
        out.push(Tok::Word, pos, end);
        return end;
    }
    // An operator character outside a guard.
    let len = src[pos..].chars().next().map_or(1, char::len_utf8);
    out.push(Tok::Unknown, pos, pos + len);
    pos + len
}

/// Reads one macro at the start of a line. Returns the bytes consumed and
/// whether the text after them is disabled.
///
/// A well-formed macro is consumed up to its closing `)` (or the end of
/// `@else`/`@endif`); whatever follows on its line is read normally when the
/// region is enabled. A malformed macro line is consumed whole.
fn handle_macro(
    src: &str,
    pos: usize,
    state: &mut MacroState,
    diags: &mut Vec<Diagnostic>,
) -> (usize, bool) {
    let rest = &src[pos..];
    let line_len = rest.find('\n').map(|i| i + 1).unwrap_or(rest.len());
    let line = rest[..line_len].trim_end();
    let line_span = Span::new(pos, pos + line.len());
    let directive_len = line[1..]
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .map_or(line.len(), |i| i + 1);
    let directive = &line[..directive_len];
    if let Some(rest_len) = rest.strip_prefix("@else").map(|r| rest.len() - r.len()) {
        let span = Span::new(pos, pos + rest_len);
        return match state.open.last_mut() {
            Some(frame) => {
                if frame.else_seen {
                    // cf-promises flips between reading and skipping at
                    // every '@else'; follow it, but say so.
                    diags.push(
                        Diagnostic::warning(span, "a second '@else' in the same '@if'")
                            .with_help("each '@else' switches between reading and skipping"),
                    );
                }
                frame.else_seen = true;
                frame.enabled = !frame.enabled;
                (rest_len, !frame.enabled)
            }
            None => {
                diags.push(Diagnostic::error(span, "'@else' without '@if'"));
                (line_len, false)
            }
        };
    }
    if rest.starts_with("@endif") {
        let len = "@endif".len();
        if state.open.pop().is_none() {
            diags.push(Diagnostic::error(
                Span::new(pos, pos + len),
                "'@endif' without '@if'",
            ));
            return (line_len, false);
        }
        let enabled = state.open.last().is_none_or(|f| f.enabled);
        return (len, !enabled);
    }
    if !directive.starts_with("@if") {
        diags.push(
            Diagnostic::error(line_span, format!("unknown macro '{directive}'"))
                .with_help("the macros are '@if', '@else' and '@endif'"),
        );
        return (line_len, false);
    }
    if let Some(outer) = state.open.last() {
        let (line_no, _) = line_col(src, outer.span.start as usize);
        diags.push(
            Diagnostic::error(line_span, "'@if' cannot be nested inside another '@if'").with_help(
                format!("the '@if' on line {line_no} is still open; close it with '@endif' first"),
            ),
        );
    }
    match read_if_condition(line) {
        Ok((len, cond)) => {
            state.open.push(MacroFrame {
                span: Span::new(pos, pos + len),
                enabled: cond,
                else_seen: false,
            });
            (len, !cond)
        }
        Err(msg) => {
            diags.push(Diagnostic::error(line_span, msg).with_help(
                "write '@if minimum_version(3.18)', '@if between_versions(3.18, 3.21)' \
                 or '@if feature(yaml)', with one space after '@if' and none inside '( )'",
            ));
            // Read what it guards, so that its '@endif' still matches.
            state.open.push(MacroFrame {
                span: line_span,
                enabled: true,
                else_seen: false,
            });
            (line_len, false)
        }
    }
}

/// 1-based line and column of a byte offset (for help texts only).
fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// Parses `@if name(args)` as strictly as cf-promises does: one space
/// after `@if`, a known condition, versions of one to three numbers, no
/// blanks inside the parentheses except around the comma of
/// `between_versions`. Returns the macro's length and its value.
fn read_if_condition(line: &str) -> Result<(usize, bool), String> {
    use std::cmp::Ordering::*;
    let malformed = || format!("malformed macro '{line}'");
    let after = line.strip_prefix("@if ").ok_or_else(malformed)?;
    let open = after.find('(').ok_or_else(malformed)?;
    let close = after.find(')').ok_or_else(malformed)?;
    if close < open {
        return Err(malformed());
    }
    let name = &after[..open];
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(malformed());
    }
    let inner = &after[open + 1..close];
    let len = "@if ".len() + close + 1;
    let version = |s: &str| {
        strict_version(s).ok_or_else(|| format!("'{s}' is not a version in '{}'", &line[..len]))
    };
    let cond = match name {
        "minimum_version" => cmp_version(&version(inner)?) != Less,
        "maximum_version" => cmp_version(&version(inner)?) != Greater,
        "before_version" => cmp_version(&version(inner)?) == Less,
        "at_version" => cmp_version(&version(inner)?) == Equal,
        "after_version" => cmp_version(&version(inner)?) == Greater,
        "between_versions" => {
            let (a, b) = inner
                .split_once(',')
                .ok_or_else(|| format!("'{}' needs two versions", &line[..len]))?;
            let a = version(a.trim_end_matches(' '))?;
            let b = version(b.trim_start_matches(' '))?;
            cmp_version(&a) != Less && cmp_version(&b) != Greater
        }
        "feature" => {
            if inner.is_empty()
                || !inner
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(format!(
                    "'{inner}' is not a feature name in '{}'",
                    &line[..len]
                ));
            }
            FEATURES.contains(&inner)
        }
        _ => {
            return Err(format!(
                "unknown '@if' condition '{name}'; expected minimum_version, maximum_version, \
                 before_version, at_version, after_version, between_versions or feature"
            ));
        }
    };
    Ok((len, cond))
}

/// `3`, `3.21` or `3.21.0`: one to three numbers of one to ten digits.
fn strict_version(s: &str) -> Option<Vec<u32>> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || p.len() > 10 || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    parts
        .iter()
        .map(|p| p.parse::<u64>().ok().map(|v| v.min(u32::MAX as u64) as u32))
        .collect()
}

/// Skips disabled text: the rest of the current line, then whole lines up
/// to (not including) the next line that starts with `@else` or `@endif`.
fn skip_disabled(src: &str, pos: usize) -> usize {
    let mut pos = match src[pos..].find('\n') {
        Some(i) => pos + i + 1,
        None => return src.len(),
    };
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

/// The value of a string token, resolved as cf-promises resolves it for
/// every quote style, backticks included: `\\`, `\"` and `\'` stand for
/// the character after the backslash, a backslash before a line end joins
/// the lines, and every other backslash is kept (`"\n"` is a backslash and
/// an `n`).
pub fn unquote(raw: &str) -> CompactString {
    if raw.len() < 2 {
        return CompactString::default();
    }
    let inner = &raw[1..raw.len() - 1];
    if crate::scan::memchr(b'\\', inner.as_bytes()).is_none() {
        return inner.into();
    }
    let mut out = CompactString::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some(&n @ ('\\' | '"' | '\'')) => {
                out.push(n);
                chars.next();
            }
            Some('\n') => {
                chars.next();
            }
            _ => out.push(c),
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
        // What cf-agent 3.21 reports for these: the same rules in every
        // quote style, and a backslash-newline joins lines.
        assert_eq!(unquote(r#""x\'y""#), "x'y");
        assert_eq!(unquote(r#"'x\"y'"#), "x\"y");
        assert_eq!(unquote(r"`x\\y\'z`"), r"x\y'z");
        assert_eq!(unquote("\"line\\\nnext\""), "linenext");
        assert_eq!(unquote(r#""\$(x)""#), r"\$(x)");
        assert_eq!(kinds("\"abc"), vec![(Tok::Unterminated, "\"abc")]);
    }

    #[test]
    fn macros() {
        let src = "@if minimum_version(3.7)\nyes\n@else\nno\n@endif\n@if before_version(3.0)\nhidden\n@endif\n";
        assert_eq!(kinds(src), vec![(Tok::Word, "yes")]);
        let l = lex("@if minimum_version(3.7)\nx\n");
        assert_eq!(l.diagnostics.len(), 1);
        let cond = |l: &str| read_if_condition(l).map(|(_, c)| c);
        assert_eq!(cond("@if between_versions(3.18, 3.22)"), Ok(true));
        assert_eq!(cond("@if between_versions(3.18 ,3.22)"), Ok(true));
        assert_eq!(cond("@if at_version(3.21)"), Ok(true));
        assert_eq!(cond("@if minimum_version(3)"), Ok(true));
        assert_eq!(cond("@if after_version(3.21.0)"), Ok(false));
        assert_eq!(cond("@if feature(yaml)"), Ok(true));
        assert_eq!(cond("@if feature(nope)"), Ok(false));
        assert_eq!(
            read_if_condition("@if minimum_version(3.7) # c"),
            Ok((24, true))
        );
        // What cf-promises 3.21 rejects.
        for bad in [
            "@if bogus(1)",
            "@if  minimum_version(3.7)",
            "@if minimum_version( 3.7 )",
            "@if minimum_version(3.)",
            "@if minimum_version(3.7.1.2)",
            "@if feature(yaml )",
            "@if feature()",
            "@if between_versions( 3.7,3.99)",
        ] {
            assert!(read_if_condition(bad).is_err(), "{bad}");
        }
    }

    /// One mistake in the macros gives one error, not one more at each
    /// '@endif' that follows.
    #[test]
    fn macro_mistakes_do_not_cascade() {
        for src in [
            "@if minimum_version(3.7)\n@if minimum_version(3.8)\nx\n@endif\n@endif\n",
            "@ifdef minimum_version(3.7)\nx\n@endif\n",
            "@if minimum_version(three)\nx\n@endif\n",
            "x\n  @if minimum_version(3.7)\nx\n@endif\n",
        ] {
            assert_eq!(lex(src).diagnostics.len(), 1, "{src}");
        }
    }

    /// cf-promises flips at every '@else', so a second one is legal there.
    #[test]
    fn second_else_flips_again() {
        let src = "@if minimum_version(3.7)\na\n@else\nb\n@else\nc\n@endif\n";
        let l = lex(src);
        let words: Vec<_> = l.tokens.iter().map(|t| &src[t.span.range()]).collect();
        assert_eq!(words, vec!["a", "c"]);
        assert!(l.diagnostics.iter().all(|d| !d.is_error()));
    }

    /// Text after a macro on its line is read when the region is enabled.
    #[test]
    fn text_after_a_macro() {
        assert_eq!(
            kinds("@if minimum_version(3.7) x\ny\n@endif z\n"),
            vec![(Tok::Word, "x"), (Tok::Word, "y"), (Tok::Word, "z")]
        );
        assert_eq!(
            kinds("@if before_version(3.0) x\ny\n@endif z\n"),
            vec![(Tok::Word, "z")]
        );
    }

    /// A lone CR, a form feed or a vertical tab is not white space for
    /// cf-promises; CR-LF is.
    #[test]
    fn only_blanks_tabs_and_crlf_are_white_space() {
        assert_eq!(kinds("a\r\nb"), vec![(Tok::Word, "a"), (Tok::Word, "b")]);
        for odd in ["a\rb", "a\x0cb", "a\x0bb"] {
            assert!(
                kinds(odd).iter().any(|(k, _)| *k == Tok::Unknown),
                "{odd:?}"
            );
        }
    }

    /// cf-promises 3.21 refuses names of 1024 bytes or more
    /// (00_basics/01_compiler/200.x.cf); 1023 bytes still pass.
    #[test]
    fn overlong_identifiers() {
        let msgs = |src: &str| -> Vec<String> {
            lex(src)
                .diagnostics
                .into_iter()
                .map(|d| d.message)
                .collect()
        };
        assert!(msgs(&"x".repeat(1023)).is_empty());
        assert_eq!(msgs(&"x".repeat(1024)), ["identifier too long"]);
        assert!(msgs(&format!("ab:{}", "x".repeat(1020))).is_empty());
        assert_eq!(
            msgs(&format!("ab:{}", "x".repeat(1021))),
            ["qualified identifier too long"]
        );
    }
}
