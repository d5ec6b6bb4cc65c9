//! Variable references: finding `$(...)`/`${...}` in text and splitting a
//! reference such as `ns:bundle.var[a][b]` into its parts.

/// Where a reference sits in a string: the whole `$(...)` and its inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefSpan {
    pub start: usize,
    pub end: usize,
    pub inner_start: usize,
    pub inner_end: usize,
    /// `@` rather than `$`.
    pub list_sigil: bool,
}

/// Finds the next reference at or after `from`, with balanced brackets.
pub fn next_ref(s: &str, from: usize) -> Option<RefSpan> {
    let b = s.as_bytes();
    let rest = b.get(from..)?;
    // Most texts scanned are short (a name, an index): a plain loop finds
    // their sigils sooner than setting up memchr's vector search.
    if rest.len() <= SHORT_TEXT {
        return rest
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c == b'$' || c == b'@')
            .find_map(|(k, _)| ref_at(b, from + k));
    }
    // memchr skips to each `$`/`@` without a test per byte.
    crate::scan::memchr2_iter(b'$', b'@', rest).find_map(|k| ref_at(b, from + k))
}

/// Texts up to this long are scanned byte by byte.
const SHORT_TEXT: usize = 32;

/// The reference whose sigil is at `i`, if a bracket opens after it and
/// one closes it.
fn ref_at(b: &[u8], i: usize) -> Option<RefSpan> {
    if !matches!(b.get(i + 1), Some(b'(' | b'{')) {
        return None;
    }
    let end = matching_close(b, i + 1)?;
    Some(RefSpan {
        start: i,
        end: end + 1,
        inner_start: i + 2,
        inner_end: end,
        list_sigil: b[i] == b'@',
    })
}

/// Index of the bracket that closes the one at `open`.
fn matching_close(b: &[u8], open: usize) -> Option<usize> {
    // Most references hold no bracket of their own (`$(name)`,
    // `$(a[k])`): the first closing bracket, found by a byte search, closes
    // it when no opening one comes before it. This runs for every
    // reference of every string expanded.
    let rest = b.get(open + 1..)?;
    let close = crate::scan::memchr2(b')', b'}', rest)?;
    if crate::scan::memchr2(b'(', b'{', &rest[..close]).is_none() {
        let want = if b[open] == b'{' { b'}' } else { b')' };
        return (rest[close] == want).then_some(open + 1 + close);
    }
    matching_close_nested(b, open)
}

/// [`matching_close`] of a reference with brackets inside.
fn matching_close_nested(b: &[u8], open: usize) -> Option<usize> {
    // The open brackets as a stack of bits (1 for `{`) while at most 64
    // deep, so that no call allocates; deeper ones (rare) go to a vector.
    let mut bits: u64 = 0;
    let mut deeper: Vec<bool> = Vec::new();
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' | b'{' => {
                let brace = c == b'{';
                if depth < 64 {
                    bits = (bits << 1) | u64::from(brace);
                } else {
                    deeper.push(brace);
                }
                depth += 1;
            }
            b')' | b'}' => {
                if depth == 0 {
                    return None;
                }
                depth -= 1;
                let brace = if depth < 64 {
                    let top = bits & 1 == 1;
                    bits >>= 1;
                    top
                } else {
                    deeper.pop()?
                };
                if brace != (c == b'}') {
                    return None;
                }
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// True if the text holds any `$(...)`/`${...}` reference.
pub fn has_refs(s: &str) -> bool {
    let b = s.as_bytes();
    crate::scan::memchr2_iter(b'$', b'@', b).any(|i| matches!(b.get(i + 1), Some(b'(' | b'{')))
}

/// Whether cf-agent 3.21 sees a variable reference in a finished string
/// (`IsCf3VarString`): a `$(`, `${`, `@(` or `@{` whose brackets close,
/// with no `/` inside them (`$(/bin/cat f)` is a shell's, not ours). A
/// report whose text still looks so waits for the last pass.
pub fn looks_like_reference(s: &str) -> bool {
    let b = s.as_bytes();
    let (mut open, mut close) = (0u8, 0u8);
    let mut sigil = false;
    let mut depth = 0i32;
    let mut found = false;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'$' | b'@' if matches!(b.get(i + 1), Some(b'(' | b'{')) => sigil = true,
            b'(' | b'{' if sigil => {
                open = c;
                depth += 1;
            }
            b')' | b'}' if sigil => {
                close = c;
                depth -= 1;
            }
            _ => {}
        }
        if depth > 0 && c == b'/' {
            return false;
        }
        if sigil && depth == 0 && matches!((open, close), (b'(', b')') | (b'{', b'}')) {
            found = true;
            sigil = false;
        }
    }
    found && !(sigil && depth != 0)
}

/// A reference split into namespace, scope, base name and indices, after
/// any nested references inside it were expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarRef<'a> {
    pub ns: Option<&'a str>,
    pub scope: Option<&'a str>,
    /// The name before the first `[`.
    pub base: &'a str,
    /// The name with its indices as written, `a[x][y]`.
    pub name: &'a str,
    /// The text from the first `[` on, split by [`VarRef::indices`] only
    /// when asked: most lookups find the name as written.
    index_text: &'a str,
}

/// Scopes that always live in the default namespace.
pub fn is_special_scope(scope: &str) -> bool {
    matches!(
        scope,
        "sys" | "const" | "this" | "match" | "mon" | "edit" | "body" | "def" | "connection"
    )
}

impl<'a> VarRef<'a> {
    pub fn parse(s: &'a str) -> VarRef<'a> {
        // The namespace and scope separators count only before the first
        // '['; the scope's '.' only after the first ':'. One pass finds all
        // three (this runs for every reference expanded).
        let b = s.as_bytes();
        let (mut bracket, mut colon, mut dot) = (b.len(), None, None);
        for (i, &c) in b.iter().enumerate() {
            match c {
                b'[' => {
                    bracket = i;
                    break;
                }
                b':' if colon.is_none() => {
                    colon = Some(i);
                    dot = None;
                }
                b'.' if dot.is_none() => dot = Some(i),
                _ => {}
            }
        }
        let (ns, rest_start) = match colon {
            Some(i) => (Some(&s[..i]), i + 1),
            None => (None, 0),
        };
        let (scope, name_start) = match dot {
            Some(i) => (Some(&s[rest_start..i]), i + 1),
            None => (None, rest_start),
        };
        let name = &s[name_start..];
        let base = &s[name_start..bracket];
        let index_text = &s[bracket..];
        VarRef {
            ns,
            scope,
            base,
            name,
            index_text,
        }
    }

    /// The indices, `a[x][y[z]]` → `["x", "y[z]"]`.
    pub fn indices(&self) -> Vec<&'a str> {
        self.index_iter().collect()
    }

    /// [`Self::indices`] one at a time, without a vector.
    pub fn index_iter(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let s = self.index_text;
        let mut i = 0;
        std::iter::from_fn(move || {
            let j = first_index_end(s.as_bytes(), i)?;
            let idx = &s[i + 1..j];
            i = j + 1;
            Some(idx)
        })
    }

    /// Whether the reference has an index (a `[` that closes).
    pub fn has_indices(&self) -> bool {
        first_index_end(self.index_text.as_bytes(), 0).is_some()
    }
}

/// Where the index that opens at `i` closes, if a `[` is there and its
/// `]` is found.
fn first_index_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'[') {
        return None;
    }
    let mut depth = 0usize;
    for (j, &c) in b.iter().enumerate().skip(i) {
        match c {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_close_agrees_with_the_walk() {
        let texts = [
            "$(a)",
            "${a}",
            "$(a}",
            "${a)",
            "$(a[$(k)])",
            "${a[$(k)]}",
            "$(a[${k}])",
            "$(a",
            "$(a(b)c)",
            "$(a{b)c)",
            "x $(a) $(b[c]) ${d}",
            "$()",
            "${}",
            "$((",
            "$(a))",
            "$(a[k][$(j[$(i)])])",
            "@(l) @{m} $(n",
            "$(a)b)c(",
            "${a(b}c)",
        ];
        for t in texts {
            let b = t.as_bytes();
            for open in 0..b.len() {
                if matches!(b[open], b'(' | b'{') {
                    assert_eq!(
                        matching_close(b, open),
                        matching_close_nested(b, open),
                        "{t} at {open}"
                    );
                }
            }
        }
    }

    #[test]
    fn looks_like_reference_as_cf_agent_sees_it() {
        assert!(looks_like_reference("z=@(l)"));
        assert!(looks_like_reference("a $(x) b"));
        assert!(looks_like_reference("${x}"));
        assert!(!looks_like_reference("plain (text) {here}"));
        assert!(!looks_like_reference("$(/bin/cat f)"));
        assert!(!looks_like_reference("cost $5 (five)"));
        assert!(!looks_like_reference("open $(x"));
        assert!(!looks_like_reference("mixed $(x}"));
    }

    #[test]
    fn finds_nested_refs() {
        let s = "a $(x[$(k)]) b ${y}";
        let r = next_ref(s, 0).unwrap();
        assert_eq!(&s[r.start..r.end], "$(x[$(k)])");
        assert_eq!(&s[r.inner_start..r.inner_end], "x[$(k)]");
        let r2 = next_ref(s, r.end).unwrap();
        assert_eq!(&s[r2.inner_start..r2.inner_end], "y");
        assert!(next_ref("$(unclosed", 0).is_none());
    }

    #[test]
    fn short_and_long_texts_scan_alike() {
        // The same texts below and above the length scanned byte by byte.
        for s in [
            "$(a}) ${b}",
            "x @(l) $(y",
            "$$(a) @{b}",
            "$(x[$(k)])",
            "none here",
            "$ ( $(",
        ] {
            let long = format!("{s}{}", " ".repeat(SHORT_TEXT + 1));
            let spans = |t: &str| {
                let mut out = Vec::new();
                let mut pos = 0;
                while let Some(r) = next_ref(t, pos) {
                    out.push((r.start, r.end, r.inner_start, r.inner_end, r.list_sigil));
                    pos = r.end;
                }
                out
            };
            assert_eq!(spans(s), spans(&long), "{s}");
        }
    }

    #[test]
    fn brackets_pair_by_kind_at_any_depth() {
        // A mismatched close ends the attempt; the scan goes on after it.
        let s = "$(a}) ${b}";
        let r = next_ref(s, 0).unwrap();
        assert_eq!(&s[r.inner_start..r.inner_end], "b");
        assert!(has_refs(s) && !has_refs("$ ( @x"));
        // Deeper than the 64 brackets held in bits.
        for depth in [63, 64, 65, 130] {
            let inner = format!("{}x{}", "({".repeat(depth), "})".repeat(depth));
            let s = format!("$({inner}) tail");
            let r = next_ref(&s, 0).unwrap();
            assert_eq!(&s[r.inner_start..r.inner_end], inner, "depth {depth}");
            let bad = format!("$({}x{}) tail", "({".repeat(depth), ")}".repeat(depth));
            assert!(next_ref(&bad, 0).is_none(), "depth {depth}");
        }
    }

    #[test]
    fn splits_references() {
        let r = VarRef::parse("ns:b.v[x.y][0]");
        assert_eq!(r.ns, Some("ns"));
        assert_eq!(r.scope, Some("b"));
        assert_eq!(r.base, "v");
        assert_eq!(r.name, "v[x.y][0]");
        assert_eq!(r.indices(), vec!["x.y", "0"]);
        let r = VarRef::parse("v");
        assert_eq!((r.ns, r.scope, r.base), (None, None, "v"));
        let r = VarRef::parse("sys.ipv4[eth0:1]");
        assert_eq!(r.scope, Some("sys"));
        assert_eq!(r.indices(), vec!["eth0:1"]);
        // A '.' before the namespace's ':' is part of the namespace; one
        // after the first '[' is part of an index.
        let r = VarRef::parse("a.b:c.d[e.f:g]");
        assert_eq!((r.ns, r.scope, r.base), (Some("a.b"), Some("c"), "d"));
        assert_eq!(r.indices(), vec!["e.f:g"]);
        let r = VarRef::parse("a:b:c.d");
        assert_eq!((r.ns, r.scope, r.base), (Some("a"), Some("b:c"), "d"));
        let r = VarRef::parse("x[1].y");
        assert_eq!((r.ns, r.scope, r.base, r.name), (None, None, "x", "x[1].y"));
    }
}
