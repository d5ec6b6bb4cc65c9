//! The ground floor of values: what every other floor reads and none of it
//! reads back. A value and its type, provenance, JSON as CFEngine keeps it
//! (and the lenient reader CFEngine's own parser is), variable references,
//! class-name canonical forms, the regex cache and a small directed graph.
//! Nothing here imports anything of ours.

pub mod canon;
pub mod digraph;
pub mod hash;
pub mod json;
pub mod json_fast;
pub mod lenient_json;
pub mod number;
pub mod refs;
pub mod regex;
pub mod value;

pub use value::{AugmentsLayer, DataType, Origin, Value};
