//! Output: the `--show-*` tables (and, later, events and their sinks).

pub mod tables;
