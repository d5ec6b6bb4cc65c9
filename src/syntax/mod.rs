//! Pure syntax: source text in, tree and diagnostics out. No file system,
//! no evaluation.

pub mod ast;
pub mod classexpr;
pub mod diagnostic;
pub mod invariants;
pub mod json;
pub mod lexer;
pub mod parser;
pub mod source;

pub use diagnostic::{Diagnostic, Severity};
pub use parser::{Parsed, parse};
pub use source::{SourceFile, Span};

/// How deeply anything written in a policy or a template may nest: function
/// calls and lists, parentheses in class expressions, variable references
/// inside variable references, mustache sections. Every reader and
/// evaluator of these is recursive, and a debug build spends up to about
/// 5 KiB of stack per level of nested function calls (the deepest of them:
/// the agent aborts near 1,750 levels on the 8 MiB main thread). 128 levels
/// keep that under 700 KiB, a third of the 2 MiB a test thread has, and it
/// is the depth serde_json allows a JSON document, which `parsejson` already
/// applies; no real policy comes near it. Deeper input is a located error,
/// never an abort.
pub const MAX_NESTING: usize = 128;

/// Where, in the text of a string, a variable reference opens one level
/// deeper than [`MAX_NESTING`] inside others, if one does. Brackets pair
/// up as the expansion pairs them (any `(`/`{` with any `)`/`}`). The
/// parser reports such a string where it is written; the evaluator leaves
/// one built at run time unexpanded.
pub fn reference_too_deep(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    // An opener takes two bytes (`$(`) and two cannot overlap: a text
    // this short cannot hold more than MAX_NESTING of them.
    if b.len() < 2 * (MAX_NESTING + 1) {
        return None;
    }
    // Most strings hold few references: no nesting can go too deep unless
    // there are more than MAX_NESTING of them in all.
    // memchr finds the rare `$` and `@` without a test per byte; the count
    // stops as soon as it passes the limit.
    let openers = crate::scan::memchr2_iter(b'$', b'@', b)
        .filter(|&i| matches!(b.get(i + 1), Some(b'(' | b'{')))
        .take(MAX_NESTING + 1)
        .count();
    if openers <= MAX_NESTING {
        return None;
    }
    // For each open bracket, whether it opened a reference.
    let mut open: Vec<bool> = Vec::new();
    let mut refs = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'$' | b'@' if matches!(b.get(i + 1), Some(b'(' | b'{')) => {
                refs += 1;
                if refs > MAX_NESTING {
                    return Some(i);
                }
                open.push(true);
                i += 1;
            }
            b'(' | b'{' => open.push(false),
            // The guard pops whether or not the bracket opened a reference.
            b')' | b'}' if open.pop() == Some(true) => refs -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}
