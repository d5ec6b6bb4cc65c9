//! Regular expressions with CFEngine's semantics: PCRE (through PCRE2),
//! compiled with multi-line and dot-all, as cf-agent compiles them.
//!
//! "Anchored" matching is cf-agent's full match: the *first* match must
//! start at 0 and end at the end of the text. That differs from wrapping
//! the pattern in `^(?:...)$` when alternatives overlap (`a|ab` does not
//! fully match "ab" in CFEngine), and we keep CFEngine's answer.

use pcre2::bytes::{CaptureLocations, Regex as Pcre, RegexBuilder};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use thiserror::Error;

#[derive(Debug, Clone, Error, PartialEq)]
#[error("invalid regular expression '{pattern}': {message}")]
pub struct RegexError {
    pub pattern: String,
    pub message: String,
}

#[derive(Debug)]
pub struct Regex {
    re: Pcre,
    pattern: String,
    /// The same pattern compiled without UTF-8 mode, for ASCII texts, made
    /// on first use (`None` if it does not compile so). PCRE2 validates the
    /// whole subject as UTF-8 on every match call, which makes splitting a
    /// long text quadratic; on ASCII text both modes match alike.
    ascii: OnceLock<Option<Pcre>>,
    /// The UTF-8 pattern JIT-compiled, for non-ASCII texts once the
    /// pattern is hot. `re` itself is not JIT-compiled: compiling to
    /// machine code costs more than a few interpreted matches, and most
    /// patterns of a policy check are matched a handful of times.
    utf_jit: OnceLock<Option<Pcre>>,
    /// Matches made so far on short texts with the interpreted pattern:
    /// past a few, the pattern is used in a loop (an edit over a file's
    /// lines) and a JIT-compiled one is worth making.
    short_uses: AtomicU32,
    /// Length of [`literal_prefix`](Self::literal_prefix), computed once.
    prefix_len: usize,
    /// Capture slots kept between calls of
    /// [`first_captures`](Self::first_captures) (one per compilation), so
    /// a pattern run over every line of a file does not allocate PCRE2's
    /// match data per line.
    locs: [Mutex<Option<CaptureLocations>>; 3],
}

/// Short texts matched with the interpreted pattern before a JIT-compiled
/// one is made for them.
const SHORT_USES_BEFORE_JIT: u32 = 16;

fn build(pattern: &str, utf: bool, jit: bool) -> Result<Pcre, pcre2::Error> {
    RegexBuilder::new()
        .multi_line(true)
        .dotall(true)
        .utf(utf)
        .jit_if_available(jit)
        .build(pattern)
}

/// `build`, reading a hyphen after a class escape or a POSIX class inside
/// brackets as a hyphen, as PCRE (cf-agent's) does (`[\w\d-._~]`,
/// `[[:alnum:]-_]`), where PCRE2 refuses the range.
fn compile(pattern: &str, utf: bool, jit: bool) -> Result<Pcre, pcre2::Error> {
    build(pattern, utf, jit).or_else(|e| match class_hyphens_escaped(pattern) {
        Some(p) => build(&p, utf, jit).map_err(|_| e),
        None => Err(e),
    })
}

/// The pattern with each hyphen that follows a class escape or a POSIX
/// class inside brackets escaped; `None` when there is none.
fn class_hyphens_escaped(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 4);
    let (mut i, mut in_class, mut changed) = (0, false, false);
    while i < chars.len() {
        let c = chars[i];
        let mut set_end = false;
        if c == '\\' && i + 1 < chars.len() {
            out.push(c);
            out.push(chars[i + 1]);
            set_end = in_class && "dDwWsShHvV".contains(chars[i + 1]);
            i += 2;
        } else if in_class && c == '[' && chars.get(i + 1) == Some(&':') {
            let close = (i + 2..chars.len().saturating_sub(1))
                .find(|&j| chars[j] == ':' && chars[j + 1] == ']');
            match close {
                Some(j) => {
                    out.extend(&chars[i..j + 2]);
                    i = j + 2;
                    set_end = true;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else if !in_class && c == '[' {
            out.push(c);
            i += 1;
            in_class = true;
            // A leading `^` and `]` belong to the class.
            if chars.get(i) == Some(&'^') {
                out.push('^');
                i += 1;
            }
            if chars.get(i) == Some(&']') {
                out.push(']');
                i += 1;
            }
        } else {
            if in_class && c == ']' {
                in_class = false;
            }
            out.push(c);
            i += 1;
        }
        if set_end && chars.get(i) == Some(&'-') && chars.get(i + 1).is_some_and(|n| *n != ']') {
            out.push_str("\\-");
            i += 1;
            changed = true;
        }
    }
    changed.then_some(out)
}

impl Regex {
    pub fn new(pattern: &str) -> Result<Regex, RegexError> {
        compile(pattern, true, false)
            .map(|re| Regex {
                re,
                pattern: pattern.to_string(),
                ascii: OnceLock::new(),
                utf_jit: OnceLock::new(),
                short_uses: AtomicU32::new(0),
                prefix_len: literal_prefix_of(pattern).len(),
                locs: Default::default(),
            })
            .map_err(|e| RegexError {
                pattern: pattern.to_string(),
                message: e.to_string(),
            })
    }

    /// The compiled pattern to match `text` with.
    fn re(&self, text: &str) -> &Pcre {
        self.variant(text).1
    }

    /// The compiled pattern to match `text` with, and its capture slot.
    fn variant(&self, text: &str) -> (usize, &Pcre) {
        if text.len() < 64
            && self.ascii.get().is_none()
            && self.utf_jit.get().is_none()
            && self.short_uses.fetch_add(1, Ordering::Relaxed) < SHORT_USES_BEFORE_JIT
        {
            return (0, &self.re);
        }
        // A pattern with non-ASCII characters means other bytes without
        // UTF-8 mode (`é?` would make only the last byte optional).
        let (slot, cell, utf) = if text.is_ascii() && self.pattern.is_ascii() {
            (1, &self.ascii, false)
        } else {
            (2, &self.utf_jit, true)
        };
        match cell
            .get_or_init(|| compile(&self.pattern, utf, true).ok())
            .as_ref()
        {
            Some(re) => (slot, re),
            None => (0, &self.re),
        }
    }

    /// Text every full match starts with: the pattern's leading literal
    /// characters (empty when it starts otherwise or has an alternative),
    /// so a caller can rule out most texts without running the pattern.
    pub fn literal_prefix(&self) -> &str {
        &self.pattern[..self.prefix_len]
    }

    /// Somewhere in the text.
    pub fn is_match(&self, text: &str) -> bool {
        self.re(text).is_match(text.as_bytes()).unwrap_or(false)
    }

    /// cf-agent's full match: the first match covers the whole text.
    pub fn is_full_match(&self, text: &str) -> bool {
        // A match at 0 starts with the pattern's literal prefix: most
        // texts of a loop (an edit's lines) are ruled out without PCRE.
        if !text.starts_with(self.literal_prefix()) {
            return false;
        }
        match self.re(text).find(text.as_bytes()) {
            Ok(Some(m)) => m.start() == 0 && m.end() == text.len(),
            _ => false,
        }
    }

    /// cf-agent's `FullTextMatch` (edit_line's line selections): a full
    /// match, or the pattern read as plain text is the text (`[main]`
    /// selects the line `[main]`, which as a regex it does not match).
    pub fn is_full_text_match(&self, text: &str) -> bool {
        self.pattern == text || self.is_full_match(text)
    }

    /// The groups of the first match (group 0 is the whole match); `None`
    /// for groups that did not take part.
    pub fn captures(&self, text: &str) -> Option<Vec<Option<String>>> {
        let caps = self.re(text).captures(text.as_bytes()).ok()??;
        Some(
            (0..caps.len())
                .map(|i| {
                    caps.get(i)
                        .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned())
                })
                .collect(),
        )
    }

    /// Like `captures`, but only when the first match is a full match.
    pub fn full_captures(&self, text: &str) -> Option<Vec<Option<String>>> {
        let caps = self.re(text).captures(text.as_bytes()).ok()??;
        let m = caps.get(0)?;
        if m.start() != 0 || m.end() != text.len() {
            return None;
        }
        Some(
            (0..caps.len())
                .map(|i| {
                    caps.get(i)
                        .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned())
                })
                .collect(),
        )
    }

    /// Named groups, for functions that expose them.
    pub fn group_names(&self) -> Vec<Option<String>> {
        self.re.capture_names().to_vec()
    }

    /// Byte ranges of every non-overlapping match.
    pub fn find_all(&self, text: &str) -> Vec<(usize, usize)> {
        self.re(text)
            .find_iter(text.as_bytes())
            .filter_map(Result::ok)
            .map(|m| (m.start(), m.end()))
            .collect()
    }

    /// The groups of the first match as byte ranges (group 0 is the whole
    /// match); `None` for groups that did not take part.
    pub fn first_captures(&self, text: &str) -> Option<Vec<Option<(usize, usize)>>> {
        let (slot, re) = self.variant(text);
        let slot = &self.locs[slot];
        let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
        let locs = guard.get_or_insert_with(|| re.capture_locations());
        re.captures_read(locs, text.as_bytes()).ok()??;
        Some((0..locs.len()).map(|i| locs.get(i)).collect())
    }

    /// Every non-overlapping match with its groups.
    pub fn captures_all(&self, text: &str) -> Vec<Vec<Option<(usize, usize)>>> {
        self.re(text)
            .captures_iter(text.as_bytes())
            .filter_map(Result::ok)
            .map(|c| {
                (0..c.len())
                    .map(|i| c.get(i).map(|m| (m.start(), m.end())))
                    .collect()
            })
            .collect()
    }
}

/// The pattern's leading literal characters: see [`Regex::literal_prefix`].
fn literal_prefix_of(p: &str) -> &str {
    if p.contains('|') {
        return "";
    }
    let end = p
        .find(|c: char| "\\.^$?*+()[]{}".contains(c))
        .unwrap_or(p.len());
    match p[end..].chars().next() {
        // `ab?`: the last literal character is optional.
        Some('?' | '*' | '{') => {
            let last = p[..end].char_indices().last().map_or(0, |(i, _)| i);
            &p[..last]
        }
        _ => &p[..end],
    }
}

/// Compiled patterns by text, so a regex used in a loop compiles once.
#[derive(Debug, Default)]
pub struct RegexCache {
    map: super::hash::FastMap<String, Result<Arc<Regex>, RegexError>>,
}

impl RegexCache {
    pub fn get(&mut self, pattern: &str) -> Result<Arc<Regex>, RegexError> {
        if let Some(r) = self.map.get(pattern) {
            return r.clone();
        }
        let r = Regex::new(pattern).map(Arc::new);
        self.map.insert(pattern.to_string(), r.clone());
        r
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn hyphens_after_class_escapes_are_hyphens_as_in_pcre() {
        let r = Regex::new(r"^([\w\d-._~]+@[\d.]+)$").unwrap();
        assert!(r.is_full_match("left-pad@1.3"));
        let r = Regex::new(r"^([[:alnum:]-_]+)$").unwrap();
        assert!(r.is_full_match("a-b_c"));
        assert!(!r.is_full_match("a.b"));
        assert!(Regex::new("[z-a]").is_err());
        Regex::new(r"^([[:alnum:]-_]+\s\([\d.]+\))").unwrap();
    }
    use super::*;

    #[test]
    fn the_literal_prefix_is_what_every_match_starts_with() {
        let prefix = |p: &str| Regex::new(p).unwrap().literal_prefix().to_string();
        assert_eq!(prefix("default:def.control_.*"), "default:def");
        assert_eq!(prefix("abc?d"), "ab");
        assert_eq!(prefix("ab*"), "a");
        assert_eq!(prefix("ab+"), "ab");
        assert_eq!(prefix("a|b"), "");
        assert_eq!(prefix("(?i)abc"), "");
        assert_eq!(prefix(".*"), "");
        assert_eq!(prefix("plain"), "plain");
        assert_eq!(prefix("x\\.y"), "x");
    }

    #[test]
    fn full_match_is_cfengines() {
        let r = Regex::new("a|ab").unwrap();
        assert!(!r.is_full_match("ab"));
        assert!(Regex::new("ab|a").unwrap().is_full_match("ab"));
        assert!(Regex::new("^(?!MISSING).*").unwrap().is_full_match("linux"));
        assert!(
            !Regex::new("^(?!MISSING).*")
                .unwrap()
                .is_full_match("MISSING")
        );
        assert!(Regex::new("(a)\\1").unwrap().is_match("aa"));
    }

    #[test]
    fn long_ascii_texts_match_as_in_utf_mode() {
        let text = "item_0001, item_0002,item_0003 ".repeat(20);
        for pattern in [",\\s*", "(?i)ITEM_(\\d+)", "\\w+", ".", "[^a-z]+"] {
            let r = Regex::new(pattern).unwrap();
            let utf = build(pattern, true, false).unwrap();
            let expected: Vec<(usize, usize)> = utf
                .find_iter(text.as_bytes())
                .map(|m| m.map(|m| (m.start(), m.end())).unwrap())
                .collect();
            assert_eq!(r.find_all(&text), expected, "{pattern}");
        }
        // Not ASCII: the UTF-8 pattern matches characters, not bytes.
        let t = format!("{}é", "x".repeat(70));
        assert_eq!(Regex::new("é$").unwrap().find_all(&t), vec![(70, 72)]);
        // A pattern only UTF-8 mode compiles still matches ASCII text.
        let wide = Regex::new("\\x{100}|x").unwrap();
        assert_eq!(wide.find_all(&"x".repeat(70)).len(), 70);
    }

    #[test]
    fn hot_patterns_match_as_the_interpreted_one() {
        // Past the first uses a JIT-compiled pattern takes over (ASCII or
        // UTF-8 by text): the answers and captures stay the same.
        let r = Regex::new("^([\\w\\d-._~]+)é?$").unwrap();
        for round in 0..3 * SHORT_USES_BEFORE_JIT {
            for (text, whole) in [
                ("a-b.c", true),
                ("a-bé", true),
                ("a b", false),
                ("ü", false),
            ] {
                assert_eq!(r.is_full_match(text), whole, "{text} at {round}");
                let caps = r.first_captures(text).map(|c| c[1]);
                assert_eq!(caps.is_some(), whole, "{text} at {round}");
            }
        }
        // Its non-ASCII `é` keeps the pattern in UTF-8 mode for every text.
        assert!(r.ascii.get().is_none() && r.utf_jit.get().is_some());
    }

    #[test]
    fn dot_matches_newline() {
        assert!(Regex::new("a.b").unwrap().is_full_match("a\nb"));
    }

    #[test]
    fn captures_and_errors() {
        let r = Regex::new("(\\w+)=(\\d+)?").unwrap();
        let c = r.captures("x k= y").unwrap();
        assert_eq!(c, vec![Some("k=".into()), Some("k".into()), None]);
        assert!(Regex::new("(").is_err());
    }
}
