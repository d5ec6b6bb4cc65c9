//! The parser never panics and keeps its invariants
//! (`convergent::syntax::invariants::check`) on any input: random bytes,
//! random sequences of policy fragments, and real policies with tokens
//! deleted, inserted, duplicated or swapped.

use convergent::syntax::invariants::check;
use convergent::syntax::lexer::lex;
use proptest::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

/// The valid corpus: real, tricky policies to mutate.
fn policies() -> &'static [String] {
    static POLICIES: OnceLock<Vec<String>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/valid");
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("tests/corpus/valid")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "cf"))
            .collect();
        paths.sort();
        let texts: Vec<String> = paths
            .iter()
            .map(|p| String::from_utf8_lossy(&std::fs::read(p).expect("read")).into_owned())
            .collect();
        assert!(texts.len() >= 30, "the valid corpus is missing");
        texts
    })
}

/// Pieces of policy text, so that random sequences reach deep into the
/// parser instead of failing at the first byte.
const FRAGMENTS: &[&str] = &[
    "bundle",
    "body",
    "promise",
    "agent",
    "common",
    "edit_line",
    "perms",
    "control",
    "main",
    "x",
    "ns:x",
    "{",
    "}",
    "(",
    ")",
    ";",
    ",",
    "=>",
    "->",
    ":",
    "::",
    "vars:",
    "reports:",
    "files:",
    "linux::",
    "!x.(y|z)::",
    "a..b::",
    "\"$(x)\"::",
    "'q'::",
    "\"s\"",
    "'s'",
    "`s`",
    "\"a\\\"b\"",
    "\"multi\nline\"",
    "\"",
    "'",
    "`",
    "$(x)",
    "${x}",
    "@(l)",
    "$(x",
    "@",
    "$",
    "string",
    "slist",
    "f",
    "concat",
    "#c\n",
    "\n",
    " ",
    "\t",
    "\r\n",
    "\r",
    "\x0c",
    "é",
    "größe",
    "→",
    "\u{0}",
    "@if minimum_version(3.7)\n",
    "@if before_version(3.0)\n",
    "@if feature(yaml)\n",
    "@else\n",
    "@endif\n",
    "@if  bogus\n",
    "  @endif\n",
    "%",
    "\\",
];

fn fragments() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..80).prop_map(|v| v.concat())
}

/// One edit of a token sequence, by index (taken modulo the length).
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    Duplicate(usize),
    /// Insert a copy of token `from` before token `at`.
    Insert {
        at: usize,
        from: usize,
    },
    Swap(usize, usize),
    /// Insert a fragment before token `at`.
    Fragment {
        at: usize,
        text: &'static str,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(at, from)| Edit::Insert { at, from }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        (any::<usize>(), prop::sample::select(FRAGMENTS))
            .prop_map(|(at, text)| Edit::Fragment { at, text }),
    ]
}

/// Applies edits to the policy's tokens. The text between tokens (blanks,
/// comments, macro lines) stays attached to the token after it, and token
/// spans lie on character boundaries, so the result is valid UTF-8.
fn mutate(text: &str, edits: &[Edit]) -> String {
    let tokens = lex(text).tokens;
    let mut pieces: Vec<String> = Vec::with_capacity(tokens.len() + 1);
    let mut last = 0;
    for t in &tokens {
        let end = t.span.end as usize;
        pieces.push(text[last..end].to_string());
        last = end;
    }
    let tail = text[last..].to_string();
    for e in edits {
        let n = pieces.len();
        if n == 0 {
            break;
        }
        match *e {
            Edit::Delete(i) => {
                pieces.remove(i % n);
            }
            Edit::Duplicate(i) => {
                let p = pieces[i % n].clone();
                pieces.insert(i % n, p);
            }
            Edit::Insert { at, from } => {
                let p = pieces[from % n].clone();
                pieces.insert(at % n, p);
            }
            Edit::Swap(a, b) => pieces.swap(a % n, b % n),
            Edit::Fragment { at, text } => pieces.insert(at % n, text.to_string()),
        }
    }
    pieces.concat() + &tail
}

fn holds(text: &str) -> Result<(), TestCaseError> {
    check(text)
        .map(|_| ())
        .map_err(|e| TestCaseError::fail(format!("{e}\n--- input:\n{text:?}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        holds(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_fragments(text in fragments()) {
        holds(&text)?;
    }

    #[test]
    fn mutated_policies(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let policy = which.get(policies());
        holds(&mutate(policy, &edits))?;
    }
}

/// The mutation machinery itself: no edits give the policy back.
#[test]
fn mutate_without_edits_is_identity() {
    for p in policies() {
        assert_eq!(&mutate(p, &[]), p);
        holds(p).unwrap_or_else(|e| panic!("{e:?}"));
    }
}
