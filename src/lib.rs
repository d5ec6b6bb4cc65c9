//! convergent: a convergent configuration agent for the CFEngine 3 policy
//! language.
//!
//! The pipeline runs one way: CLI → config → augments → parse → evaluate →
//! actuate → report. See DESIGN.md for the map of modules.

pub mod agent;
pub mod alloc;
pub mod augments;
pub mod bootstrap;
pub mod cli;
pub mod config;
pub mod discover;
pub mod eval;
pub mod functions;
pub mod host;
pub mod load;
pub mod log;
pub mod pipeline;
pub mod promises;
pub mod remote;
pub mod report;
pub mod scan;
pub mod schema;
pub mod show;
pub mod state;
pub mod syntax;
pub mod values;

/// The CFEngine version whose language and behaviour we follow.
pub const COMPAT_VERSION: &str = "3.21.0";

/// The commit the agent was built from (build.rs: `CONVERGENT_COMMIT`, or
/// git's answer, or "unknown" for a build without either).
pub const COMMIT: &str = env!("CONVERGENT_COMMIT");

/// What `-V` prints: the version, the commit, the CFEngine it follows.
pub const VERSION_LINE: &str = concat!(
    "convergent ",
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CONVERGENT_COMMIT"),
    ", CFEngine 3.21.0 compatible)"
);
