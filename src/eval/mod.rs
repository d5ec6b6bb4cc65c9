//! Evaluation: the store (variables, classes, frames, namespaces),
//! expansion and iteration, bodies, pre-evaluation, and the
//! expanded-promise vocabulary the scheduler (`agent/`) and the actuators
//! share.

pub mod bodies;
pub mod call;
pub mod classes;
pub mod context;
pub mod control;
pub mod defaults;
pub mod expanded;
pub mod iterations;
pub mod module_protocol;
pub mod preeval;
pub mod promises;
pub mod reads;
pub mod reasons;
pub mod rval;
pub mod this;
pub mod vars;

pub use context::{EvalContext, EvalSettings, Frame};
