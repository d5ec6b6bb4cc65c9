//! What the inspection flags print: the `--show-vars` / `--show-classes`
//! tables and `--explain`'s account of where a value came from.

pub mod explain;
pub mod policy;
pub mod tables;
