//! Evaluation: scopes, classes, expansion, pre-evaluation and the
//! bundle scheduler.

pub mod agent;
pub mod bodies;
pub mod call;
pub mod classes;
pub mod context;
pub mod control;
pub mod expanded;
pub mod module_protocol;
pub mod preeval;
pub mod promises;
pub mod rval;
pub mod transaction;
pub mod vars;
pub mod why;

pub use context::{EvalContext, EvalSettings, Frame};
