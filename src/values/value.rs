//! Variable values and their declared types.

use serde_json::Value as Json;
use std::sync::Arc;

/// The declared type of a variable, as in `vars:` promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    String,
    Int,
    Real,
    Slist,
    Ilist,
    Rlist,
    Data,
}

impl DataType {
    pub fn as_str(self) -> &'static str {
        match self {
            DataType::String => "string",
            DataType::Int => "int",
            DataType::Real => "real",
            DataType::Slist => "slist",
            DataType::Ilist => "ilist",
            DataType::Rlist => "rlist",
            DataType::Data => "data",
        }
    }

    pub fn from_attribute(name: &str) -> Option<DataType> {
        Some(match name {
            "string" => DataType::String,
            "int" => DataType::Int,
            "real" => DataType::Real,
            "slist" => DataType::Slist,
            "ilist" => DataType::Ilist,
            "rlist" => DataType::Rlist,
            "data" => DataType::Data,
            _ => return None,
        })
    }

    pub fn is_list(self) -> bool {
        matches!(self, DataType::Slist | DataType::Ilist | DataType::Rlist)
    }

    pub fn is_scalar(self) -> bool {
        matches!(self, DataType::String | DataType::Int | DataType::Real)
    }
}

/// A value. Scalars of every type are kept as the text CFEngine would print;
/// lists hold scalars; data containers are shared, never deep-copied.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar(String),
    List(Vec<String>),
    Data(Arc<Json>),
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Scalar(s.into())
    }

    pub fn data(j: Json) -> Value {
        Value::Data(Arc::new(j))
    }

    pub fn as_scalar(&self) -> Option<&str> {
        match self {
            Value::Scalar(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[String]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_data(&self) -> Option<&Arc<Json>> {
        match self {
            Value::Data(d) => Some(d),
            _ => None,
        }
    }

    /// The natural declared type of a value when none was written.
    pub fn natural_type(&self) -> DataType {
        match self {
            Value::Scalar(_) => DataType::String,
            Value::List(_) => DataType::Slist,
            Value::Data(_) => DataType::Data,
        }
    }
}

/// Where a variable or class binding came from, for `--show-vars` tags and
/// for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Discovered by the agent itself (hard classes, `sys.*`, `const.*`).
    Agent,
    /// Given on the command line with `-D`.
    CommandLine,
    /// A promise in a policy file (path and 1-based line).
    Promise { file: String, line: usize },
    /// An augments file: which layer, which file, which key.
    Augments {
        layer: AugmentsLayer,
        file: String,
        key: String,
    },
    /// Loaded from the persistent class store.
    Persistent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AugmentsLayer {
    /// `host_specific.json` (tagged `source=cmdb`).
    HostSpecific,
    /// `def.json` or `def_preferred.json`.
    Def,
    /// A file named by an `augments` key.
    Included,
}
