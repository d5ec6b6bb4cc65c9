//! What evaluation needs of the built-in functions, which live a floor
//! above it (`functions/`): their specifications and a table to look them
//! up in, handed to the context by whoever builds it
//! (`EvalContext::with_builtins`).

use super::EvalContext;
use crate::syntax::ast::FnCall;
use crate::values::Value;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum FnError {
    /// An argument is not resolved yet; try again in a later pass.
    #[error("argument not resolved yet")]
    Defer,
    /// The call failed; the message says why.
    #[error("{0}")]
    Failed(String),
    /// The call failed where cf-agent fails it without a word (`filestat`
    /// of a missing file): the message is for `-v` only.
    #[error("{0}")]
    Quiet(String),
}

pub type FnResult = Result<Value, FnError>;

pub type FnImpl = fn(&mut EvalContext, &[Value]) -> FnResult;

/// What a function needs to be called correctly.
#[derive(Debug)]
pub struct FnSpec {
    pub name: &'static str,
    pub min_args: usize,
    /// `None` for variadic functions.
    pub max_args: Option<usize>,
    /// Positions of arguments passed unexpanded.
    pub raw_args: &'static [usize],
    /// Runs commands, reads the network, or changes something: never run
    /// while only checking a policy.
    pub side_effects: bool,
    /// Run once per agent run for the same arguments.
    pub cached: bool,
    /// Gives the same result for the same arguments and the variables and
    /// classes it reads (which the stores' read logs follow) alone: no
    /// file, command, clock, randomness or network (`mapdata` is not pure:
    /// its `json_pipe` runs a command).
    pub pure: bool,
    /// Pure, and its code says nothing whatever its arguments (an error is
    /// returned, not logged).
    pub quiet: bool,
    /// Reads and parses the file named by this argument: the result is
    /// kept for the same arguments while the file stays the same (size,
    /// modification time and inode), so passes do not parse it again.
    pub parses_file: Option<usize>,
    pub imp: FnImpl,
}

impl FnSpec {
    /// The same function, marked pure (see [`FnSpec::pure`]).
    pub const fn pure(self) -> FnSpec {
        FnSpec { pure: true, ..self }
    }

    /// The same function, marked pure and quiet (see [`FnSpec::quiet`]).
    pub const fn quiet(self) -> FnSpec {
        FnSpec {
            pure: true,
            quiet: true,
            ..self
        }
    }
}

/// The table evaluation calls built-ins through.
#[derive(Clone, Copy)]
pub struct Builtins {
    /// The specification of a function by name.
    pub lookup: fn(&str) -> Option<&'static FnSpec>,
    /// `maplist(pattern, list)`: its pattern is a call evaluated once per
    /// item with `$(this)` bound, not an argument evaluated beforehand.
    pub maplist: fn(&mut EvalContext, &FnCall, &Value) -> FnResult,
    /// Whether the fuzzer's sandbox refuses a function.
    pub refused_in_sandbox: fn(&FnSpec) -> bool,
}

impl Builtins {
    /// No functions at all: every call is "not implemented". What a context
    /// has until it is given the real table.
    pub const NONE: Builtins = Builtins {
        lookup: |_| None,
        maplist: |_, _, _| {
            Err(FnError::Failed(
                "function 'maplist' is not implemented".into(),
            ))
        },
        refused_in_sandbox: |_| true,
    };
}

impl Default for Builtins {
    fn default() -> Builtins {
        Builtins::NONE
    }
}

impl std::fmt::Debug for Builtins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Builtins")
    }
}
