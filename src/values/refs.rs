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
    let mut i = from;
    while i + 1 < b.len() {
        if (b[i] == b'$' || b[i] == b'@')
            && (b[i + 1] == b'(' || b[i + 1] == b'{')
            && let Some(end) = matching_close(b, i + 1)
        {
            return Some(RefSpan {
                start: i,
                end: end + 1,
                inner_start: i + 2,
                inner_end: end,
                list_sigil: b[i] == b'@',
            });
        }
        i += 1;
    }
    None
}

/// Index of the bracket that closes the one at `open`.
fn matching_close(b: &[u8], open: usize) -> Option<usize> {
    let mut stack: Vec<u8> = Vec::with_capacity(4);
    for (i, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' => stack.push(b')'),
            b'{' => stack.push(b'}'),
            b')' | b'}' => {
                if stack.pop() != Some(c) {
                    return None;
                }
                if stack.is_empty() {
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
    b.windows(2)
        .any(|w| (w[0] == b'$' || w[0] == b'@') && (w[1] == b'(' || w[1] == b'{'))
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
    pub indices: Vec<&'a str>,
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
        // The namespace and scope separators count only before the first '['.
        let bracket = s.find('[').unwrap_or(s.len());
        let head = &s[..bracket];
        let (ns, rest_start) = match head.find(':') {
            Some(i) => (Some(&s[..i]), i + 1),
            None => (None, 0),
        };
        let head2 = &s[rest_start..bracket];
        let (scope, name_start) = match head2.find('.') {
            Some(i) => (Some(&s[rest_start..rest_start + i]), rest_start + i + 1),
            None => (None, rest_start),
        };
        let name = &s[name_start..];
        let base_end = name.find('[').unwrap_or(name.len());
        let base = &name[..base_end];
        let indices = split_indices(&name[base_end..]);
        VarRef {
            ns,
            scope,
            base,
            name,
            indices,
        }
    }
}

/// `[a][b[c]]` → `["a", "b[c]"]`, with bracket nesting respected.
fn split_indices(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() && b[i] == b'[' {
        let mut depth = 0usize;
        let start = i + 1;
        let mut j = i;
        while j < b.len() {
            match b[j] {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        if j >= b.len() {
            break;
        }
        out.push(&s[start..j]);
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn splits_references() {
        let r = VarRef::parse("ns:b.v[x.y][0]");
        assert_eq!(r.ns, Some("ns"));
        assert_eq!(r.scope, Some("b"));
        assert_eq!(r.base, "v");
        assert_eq!(r.name, "v[x.y][0]");
        assert_eq!(r.indices, vec!["x.y", "0"]);
        let r = VarRef::parse("v");
        assert_eq!((r.ns, r.scope, r.base), (None, None, "v"));
        let r = VarRef::parse("sys.ipv4[eth0:1]");
        assert_eq!(r.scope, Some("sys"));
        assert_eq!(r.indices, vec!["eth0:1"]);
    }
}
