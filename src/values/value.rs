//! Variable values and their declared types.

use serde_json::Value as Json;
use std::sync::{Arc, OnceLock};

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

/// A value made at its first read, once, and shared by every clone:
/// discovery's `sys.inet`, `sys.inet6` and `sys.interfaces_data` parse
/// ~350 kernel counters that most policies never read, and making them at
/// every start cost a third of an empty policy's check.
#[derive(Clone)]
pub struct Deferred(Arc<DeferredCell>);

struct DeferredCell {
    value: OnceLock<Value>,
    make: Box<dyn Fn() -> Value + Send + Sync>,
}

impl Deferred {
    pub fn new(make: impl Fn() -> Value + Send + Sync + 'static) -> Deferred {
        Deferred(Arc::new(DeferredCell {
            value: OnceLock::new(),
            make: Box::new(make),
        }))
    }

    /// The value, made now if this is its first read.
    pub fn get(&self) -> &Value {
        self.0.value.get_or_init(|| (self.0.make)())
    }
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.value.get() {
            Some(v) => f.debug_tuple("Deferred").field(v).finish(),
            None => f.write_str("Deferred(not made yet)"),
        }
    }
}

impl PartialEq for Deferred {
    fn eq(&self, other: &Deferred) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.get() == other.get()
    }
}

/// A class's tags. Shared: discovery gives its ~80 hard classes some 17
/// different lists, made once each (a list split and copied per class was
/// 4% of the instructions of a policy check).
pub type Tags = std::sync::Arc<[String]>;

/// Where a variable or class binding came from, for `--show-vars` tags and
/// for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Discovered by the agent itself (hard classes, `sys.*`, `const.*`).
    Agent,
    /// Given on the command line with `-D`.
    CommandLine,
    /// A promise in a policy file (path and 1-based line).
    /// The path is shared by all that one file's promises define.
    Promise {
        file: std::sync::Arc<str>,
        line: usize,
    },
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
