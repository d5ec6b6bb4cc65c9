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
