//! Typed access to the arguments of the functions of the system-facing
//! families (files, io, system, net, time, introspection), with errors that
//! name the function and the argument.
//!
//! Kept small on purpose: it is the argument reader these families share,
//! and it can give way to a common one for every family without changing
//! the functions' behaviour.

use super::FnError;
use crate::eval::promises::parse_int;
use crate::eval::regex::Regex;
use crate::eval::{EvalContext, Value};
use std::sync::Arc;

/// The arguments of one call of the function `name`.
#[derive(Clone, Copy)]
pub struct Params<'a> {
    pub name: &'static str,
    pub args: &'a [Value],
}

impl<'a> Params<'a> {
    pub fn new(name: &'static str, args: &'a [Value]) -> Params<'a> {
        Params { name, args }
    }

    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// A failure of this function with a message.
    pub fn fail(&self, msg: impl std::fmt::Display) -> FnError {
        FnError::Failed(format!("function '{}': {msg}", self.name))
    }

    /// A string argument.
    pub fn str(&self, i: usize) -> Result<&'a str, FnError> {
        match self.args.get(i) {
            Some(Value::Scalar(s)) => Ok(s),
            Some(other) => Err(self.fail(format!(
                "argument {} must be a string, got a {}",
                i + 1,
                other.natural_type().as_str()
            ))),
            None => Err(self.fail(format!("missing argument {}", i + 1))),
        }
    }

    pub fn opt_str(&self, i: usize) -> Result<Option<&'a str>, FnError> {
        if i < self.args.len() {
            self.str(i).map(Some)
        } else {
            Ok(None)
        }
    }

    /// An integer argument in CFEngine's syntax (sign, digits, unit suffix).
    pub fn int(&self, i: usize) -> Result<i64, FnError> {
        let s = self.str(i)?;
        parse_int(s)
            .map_err(|_| self.fail(format!("argument {} must be an integer, got '{s}'", i + 1)))
    }

    pub fn opt_int(&self, i: usize, default: i64) -> Result<i64, FnError> {
        if i < self.args.len() {
            self.int(i)
        } else {
            Ok(default)
        }
    }

    /// One of a fixed set of words.
    pub fn option(&self, i: usize, choices: &[&str]) -> Result<&'a str, FnError> {
        let s = self.str(i)?;
        if choices.contains(&s) {
            Ok(s)
        } else {
            Err(self.fail(format!(
                "argument {} must be one of {}, got '{s}'",
                i + 1,
                choices.join(", ")
            )))
        }
    }

    /// A boolean option (`true`, `yes`, `on` / `false`, `no`, `off`).
    pub fn boolean(&self, i: usize) -> Result<bool, FnError> {
        match self.option(i, &["true", "false", "yes", "no", "on", "off"])? {
            "true" | "yes" | "on" => Ok(true),
            _ => Ok(false),
        }
    }

    /// A regular expression from the per-run cache.
    pub fn regex(&self, ctx: &mut EvalContext, i: usize) -> Result<Arc<Regex>, FnError> {
        let p = self.str(i)?;
        ctx.regexes.get(p).map_err(|e| self.fail(e))
    }

    /// A list of strings: a list value, or a single string as a list of one.
    pub fn list(&self, ctx: &EvalContext, i: usize) -> Result<Vec<String>, FnError> {
        match self.args.get(i) {
            Some(Value::List(l)) => Ok(l.clone()),
            Some(v @ Value::Scalar(_)) => match super::args::collect(ctx, v)? {
                Value::List(l) => Ok(l),
                Value::Scalar(s) => Ok(vec![s]),
                Value::Data(d) => Ok(crate::eval::rval::json_scalars(&d)),
            },
            Some(Value::Data(d)) => Ok(crate::eval::rval::json_scalars(d)),
            None => Err(self.fail(format!("missing argument {}", i + 1))),
        }
    }
}
