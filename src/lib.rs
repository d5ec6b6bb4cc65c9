//! convergent: a convergent configuration agent for the CFEngine 3 policy
//! language.
//!
//! The pipeline runs one way: CLI → config → augments → parse → evaluate →
//! actuate → report. See DESIGN.md for the map of modules.

pub mod agent;
pub mod augments;
pub mod bootstrap;
pub mod cli;
pub mod config;
pub mod discover;
pub mod eval;
pub mod functions;
pub mod host;
pub mod load;
pub mod pipeline;
pub mod promises;
pub mod remote;
pub mod report;
pub mod schema;
pub mod show;
pub mod state;
pub mod syntax;
pub mod values;

/// The CFEngine version whose language and behaviour we follow.
pub const COMPAT_VERSION: &str = "3.21.0";

/// What `-V` prints.
pub const VERSION_LINE: &str = concat!(
    "convergent ",
    env!("CARGO_PKG_VERSION"),
    " (CFEngine 3.21.0 compatible)"
);
