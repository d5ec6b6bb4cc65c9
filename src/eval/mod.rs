//! Evaluation: values, scopes, classes, expansion, pre-evaluation and the
//! bundle scheduler.

pub mod value;

pub use value::{AugmentsLayer, DataType, Origin, Value};
