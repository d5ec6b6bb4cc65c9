//! Built-in functions: a registry of specifications, one module per family.
//!
//! A function receives its arguments already evaluated (strings expanded,
//! `@(list)` turned into lists, nested calls done) except those its
//! specification marks raw, which arrive unexpanded (`maplist`'s pattern).
//! When an argument cannot be resolved yet, the call is deferred to a later
//! pass instead of failing.
//!
//! Every function reads its arguments through [`args::Args`], which names
//! the function and the parameter in its errors, and builds its table
//! entry with [`spec`], [`raw`], [`effect`] or [`cached`].

pub mod args;
mod core;
pub mod data;
pub use data::read_data_file;
mod exec;
mod files;
pub mod introspect;
mod lists;
mod math;
mod modules;
pub mod mustache;
mod net;
mod newer;
mod regexes;
mod sorting;
mod strings;
mod system;
pub mod time;

use crate::values::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

pub use crate::eval::call::{Builtins, FnError, FnImpl, FnResult, FnSpec};
/// Digests by CFEngine's algorithm names, for `changes` bodies too.
pub use strings::{digest, hex};

/// The built-ins as evaluation calls them (`EvalContext::with_builtins`).
pub const BUILTINS: Builtins = Builtins {
    lookup,
    maplist: lists::maplist_call,
    refused_in_sandbox,
};

/// Every family's table of functions.
fn families() -> &'static [&'static [FnSpec]] {
    static FAMILIES: &[&[FnSpec]] = &[
        core::FUNCTIONS,
        files::FUNCTIONS,
        introspect::FUNCTIONS,
        modules::FUNCTIONS,
        net::FUNCTIONS,
        system::FUNCTIONS,
        time::FUNCTIONS,
        strings::FUNCTIONS,
        lists::FUNCTIONS,
        regexes::FUNCTIONS,
        math::FUNCTIONS,
        data::FUNCTIONS,
        newer::FUNCTIONS,
    ];
    FAMILIES
}

/// By name; looked up for every call evaluated, hence the faster hash.
type Registry = HashMap<&'static str, &'static FnSpec, foldhash::fast::RandomState>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        families()
            .iter()
            .flat_map(|f| f.iter())
            .map(|s| (s.name, s))
            .collect()
    })
}

pub fn lookup(name: &str) -> Option<&'static FnSpec> {
    registry().get(name).copied()
}

/// The functions that exist only to say they are not supported (they
/// need a CFEngine hub, LDAP or Windows).
pub fn not_supported() -> &'static [&'static str] {
    net::NOT_SUPPORTED
}

/// Every implemented function name, sorted.
pub fn implemented() -> Vec<&'static str> {
    let mut v: Vec<_> = registry().keys().copied().collect();
    v.sort_unstable();
    v
}

/// Functions the sandbox refuses although they change nothing: they
/// resolve names (which may ask a DNS server), look up netgroups (which
/// may ask NIS or LDAP) or tell of other hosts (`hostsseen`, which keeps no
/// record today, but would read what peers did).
const SANDBOX_REFUSED: &[&str] = &["host2ip", "ip2host", "hostinnetgroup", "hostsseen"];

/// Whether the fuzzer's sandbox (`EvalSettings::sandbox`) refuses a
/// function: every one that runs a program, talks to the network or
/// changes something (`side_effects`), those of [`SANDBOX_REFUSED`], and
/// those that would need a hub, LDAP or peers.
pub fn refused_in_sandbox(spec: &FnSpec) -> bool {
    spec.side_effects
        || SANDBOX_REFUSED.contains(&spec.name)
        || net::NOT_SUPPORTED.contains(&spec.name)
}

// ---- helpers shared by the families -------------------------------------

/// A context-returning function's result.
pub fn class_result(b: bool) -> Value {
    Value::str(if b { "any" } else { "!any" })
}

/// An integer result.
pub fn int_value(i: i64) -> Value {
    Value::str(i.to_string())
}

// ---- the constructors of the families' tables ----------------------------

/// A function without side effects taking `min` to `max` arguments (`None`:
/// any number), all of them expanded.
pub const fn spec(name: &'static str, min: usize, max: Option<usize>, imp: FnImpl) -> FnSpec {
    FnSpec {
        name,
        min_args: min,
        max_args: max,
        raw_args: &[],
        side_effects: false,
        cached: false,
        pure: false,
        quiet: false,
        parses_file: None,
        imp,
    }
}

/// A function whose arguments at the positions `raw_args` arrive
/// unexpanded (a pattern it expands itself for each element).
pub const fn raw(
    name: &'static str,
    min: usize,
    max: Option<usize>,
    raw_args: &'static [usize],
    imp: FnImpl,
) -> FnSpec {
    FnSpec {
        raw_args,
        ..spec(name, min, max, imp)
    }
}

/// A function that runs commands, talks to the network or changes state.
pub const fn effect(
    name: &'static str,
    min: usize,
    max: Option<usize>,
    cached: bool,
    imp: FnImpl,
) -> FnSpec {
    FnSpec {
        side_effects: true,
        cached,
        ..spec(name, min, max, imp)
    }
}

/// A function without side effects whose result cf-agent computes once per
/// run for the same arguments.
pub const fn cached(name: &'static str, min: usize, max: Option<usize>, imp: FnImpl) -> FnSpec {
    FnSpec {
        cached: true,
        ..spec(name, min, max, imp)
    }
}

/// A function that reads the file named by argument `file_arg` and parses
/// it (see `FnSpec::parses_file`).
pub const fn parses_file(
    name: &'static str,
    min: usize,
    max: Option<usize>,
    file_arg: usize,
    imp: FnImpl,
) -> FnSpec {
    FnSpec {
        parses_file: Some(file_arg),
        ..spec(name, min, max, imp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two families defining the same name would silently shadow one
    /// another in the registry.
    #[test]
    fn every_function_is_defined_once() {
        let mut seen = std::collections::HashSet::new();
        for f in families().iter().flat_map(|f| f.iter()) {
            assert!(
                seen.insert(f.name),
                "function '{}' is defined twice",
                f.name
            );
        }
    }
}
