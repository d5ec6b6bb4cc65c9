//! What the inspection flags print: the `--show-vars` / `--show-classes`
//! tables, `--explain`'s account of where a value came from, `-p`'s policy,
//! `--why`'s answers and `--graph`'s drawing. The renderers live here; the
//! records they read are kept by the evaluator and the scheduler.

pub mod explain;
pub mod graph;
pub mod policy;
pub mod tables;
pub mod why;
