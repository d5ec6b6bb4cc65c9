//! Turning right-hand values into values: expansion, lists, function calls,
//! and the iteration over lists that a promise's references ask for.

use super::call::{Builtins, FnError};
use super::context::{EvalContext, Found, NsSearch, scalar_text};
use crate::syntax::ast::{FnCall, Rval};
use crate::values::refs::next_ref;
use crate::values::value::Value;
use serde_json::Value as Json;

/// cf-agent's "Bad arguments", which stops cf-promises and cf-agent in any
/// bundle, called or not.
pub const BAD_ARGUMENTS: &str =
    "its arguments do not fit it once the lists of the calls in them are spread";

/// cf-agent's check of a call's literal arguments against the function's
/// template, which also stops cf-promises and cf-agent in any bundle.
pub const ARGUMENT_MISFIT: &str = "the function's template refuses the argument";

/// A function's own failure on which cf-agent stops ("Could not convert
/// token to int"), in any bundle.
pub const STOPS_CF_AGENT: &str = "cf-agent stops on this";

/// An evaluated value and whether some reference in it stayed unresolved
/// (the value then holds the unexpanded text, as CFEngine keeps it).
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    pub value: Value,
    pub unresolved: bool,
}

impl Evaluated {
    fn done(value: Value) -> Evaluated {
        Evaluated {
            value,
            unresolved: false,
        }
    }
}

/// A whole-string list reference `@(x)` (or naked `$(x)` naming a list).
fn whole_ref(s: &str) -> Option<(bool, &str)> {
    // Only a reference at the start can be the whole text: no scan of
    // text that does not start with a sigil (every literal evaluated).
    if !matches!(s.as_bytes().first(), Some(b'$' | b'@')) {
        return None;
    }
    let r = next_ref(s, 0)?;
    if r.start == 0 && r.end == s.len() {
        Some((r.list_sigil, &s[r.inner_start..r.inner_end]))
    } else {
        None
    }
}

impl EvalContext {
    /// Evaluates an rval. A function whose arguments are unresolved, or that
    /// fails, returns the error; unresolved text is not an error.
    pub fn eval_rval(&mut self, r: &Rval) -> Result<Evaluated, FnError> {
        match r {
            Rval::String(s) => Ok(self.eval_string(&s.value)),
            Rval::Symbol(i) => Ok(Evaluated::done(Value::str(i.name.clone()))),
            Rval::NakedVar { text, .. } => Ok(self.eval_string(text)),
            Rval::List { items, .. } => {
                let mut out = Vec::with_capacity(items.len());
                let mut unresolved = false;
                for item in items {
                    // In a list, `@(x)` of a scalar is the scalar.
                    if let Some(text) = list_ref_text(item)
                        && let Some((_, inner)) = whole_ref(text)
                        && let name = self.expand(inner)
                        && !name.unresolved
                        && let Some(Value::Scalar(v)) =
                            self.lookup_in(&name.text, NsSearch::DefaultOnly)
                    {
                        out.push(v);
                        continue;
                    }
                    // And `$(x)` alone of a list is the list's items, as
                    // cf-agent expands a list item: the MPF's `servers =>
                    // { "$(server)" }` in a body given `@(policy_servers)`.
                    if let Rval::String(s) = item
                        && let Some((false, inner)) = whole_ref(&s.value)
                        && let name = self.expand(inner)
                        && !name.unresolved
                        && let Some(Value::List(l)) =
                            self.lookup_in(&name.text, NsSearch::DefaultOnly)
                    {
                        out.extend(l);
                        continue;
                    }
                    let e = self.eval_rval(item)?;
                    unresolved |= e.unresolved;
                    match e.value {
                        Value::Scalar(s) => out.push(s),
                        Value::List(l) => out.extend(l),
                        // `@(container)` splices nothing into a list:
                        // cf-agent warns that the variable is not a list.
                        Value::Data(_) if is_list_ref(item) => {
                            crate::warn!(
                                "'{}' failed - variable is not list but data",
                                list_ref_text(item).unwrap_or_default()
                            );
                        }
                        Value::Data(d) => out.extend(json_scalars(&d)),
                    }
                }
                Ok(Evaluated {
                    value: Value::List(out),
                    unresolved,
                })
            }
            Rval::Call(c) => self.call(c),
        }
    }

    /// A string: `@(x)` alone yields the list or data itself; anything else
    /// is expanded as text.
    pub fn eval_string(&mut self, s: &str) -> Evaluated {
        if let Some((true, inner)) = whole_ref(s) {
            let name = self.expand(inner);
            // `@(x)` of a scalar stays as written, as cf-agent keeps it.
            if !name.unresolved
                && let Some(v) = self.lookup_in(&name.text, NsSearch::DefaultOnly)
                && !matches!(v, Value::Scalar(_))
            {
                return Evaluated::done(v);
            }
            return Evaluated {
                value: Value::str(s),
                unresolved: true,
            };
        }
        let e = self.expand(s);
        Evaluated {
            value: Value::Scalar(e.text),
            unresolved: e.unresolved,
        }
    }

    /// Calls a function with its arguments evaluated (raw ones unexpanded).
    pub fn call(&mut self, c: &FnCall) -> Result<Evaluated, FnError> {
        let name_text = self.expand(&c.name.name);
        if name_text.unresolved {
            return Err(FnError::Defer);
        }
        let Some(spec) = (self.builtins().lookup)(&name_text.text) else {
            return Err(FnError::Failed(format!(
                "function '{}' is not implemented",
                name_text.text
            )));
        };
        if c.args.len() < spec.min_args || spec.max_args.is_some_and(|m| c.args.len() > m) {
            return Err(FnError::Failed(format!(
                "function '{}' takes {} arguments, got {}",
                spec.name,
                match spec.max_args {
                    Some(m) if m == spec.min_args => m.to_string(),
                    Some(m) => format!("{} to {m}", spec.min_args),
                    None => format!("at least {}", spec.min_args),
                },
                c.args.len()
            )));
        }
        if self.settings.sandbox && (self.builtins().refused_in_sandbox)(spec) {
            return Err(FnError::Failed(format!(
                "function '{}' is refused in the sandbox: it could run a program or reach \
                 the network",
                spec.name
            )));
        }
        if self.out_of_time() {
            return Err(FnError::Failed(format!(
                "function '{}' not called: the evaluation ran out of time",
                spec.name
            )));
        }
        if spec.name == "maplist"
            && let [Rval::Call(pattern), list] = c.args.as_slice()
        {
            let list = self.eval_rval(list)?;
            if list.unresolved {
                return Err(FnError::Defer);
            }
            return (self.builtins().maplist)(self, pattern, &list.value).map(Evaluated::done);
        }
        let mut args = Vec::with_capacity(c.args.len());
        let mut unresolved = false;
        // A function that does not collect lists gets the elements of a
        // list a nested call returns as arguments of their own, as
        // cf-agent passes them: `and(splitstring("a,b", ",", 9))` is
        // `and("a", "b")` (a `@(list)` argument is not spread).

        for (i, a) in c.args.iter().enumerate() {
            if spec.raw_args.contains(&i) {
                args.push(match a {
                    Rval::String(s) => Value::str(s.value.clone()),
                    Rval::Symbol(s) => Value::str(s.name.clone()),
                    Rval::NakedVar { text, .. } => Value::str(text.clone()),
                    other => self.eval_rval(other)?.value,
                });
                continue;
            }
            let e = self.eval_rval(a)?;
            if e.unresolved && !names_mapping_variable(&e.value) && !shell_substitution(&e.value) {
                unresolved = true;
            }
            push_argument(spec.name, a, e.value, &mut args);
        }
        if args.len() != c.args.len() && !arity_fits(spec, args.len()) {
            let m = format!(
                "function '{}': {BAD_ARGUMENTS}: {} arguments",
                spec.name,
                args.len()
            );
            self.fatal = Some(m.clone());
            return Err(FnError::Failed(m));
        }
        if unresolved && !ifelse_may_go_on(spec.name, &args) {
            return Err(FnError::Defer);
        }
        // Its literal arguments must fit the function's template, or
        // cf-agent stops ("In function 'readdata', error in variable
        // 'bogus', 'Selection is out of bounds'").
        let site = (c as *const FnCall as usize, c.span.start, c.span.end);
        if !self.fitting_calls.contains(&site)
            && let Some(f) = crate::schema::function(spec.name)
            && let Some((_, text, m)) =
                crate::schema::values::misfit_literal_arguments(f, &c.args, &mut self.regexes)
                    .into_iter()
                    .next()
        {
            let m = format!(
                "function '{}': {ARGUMENT_MISFIT} '{text}': {}",
                spec.name, m.message
            );
            // The first one met is the one cf-agent stops on.
            self.fatal.get_or_insert_with(|| m.clone());
            return Err(FnError::Failed(m));
        }
        self.fitting_calls.insert(site);
        if self.settings.no_functions || (spec.side_effects && self.settings.no_side_effects) {
            return Err(FnError::Defer);
        }
        let cache_key = if spec.cached {
            // Common control's `cache_system_functions => "false"` makes
            // cf-agent call them again each time.
            let off = self
                .common_control("cache_system_functions")
                .and_then(Value::as_scalar)
                .and_then(crate::values::number::parse_bool)
                == Some(false);
            (!off).then(|| cache_key(spec.name, &args))
        } else {
            spec.parses_file
                .and_then(|i| file_stamp(self.host(), args.get(i)?.as_scalar()?))
                .map(|stamp| format!("{}\u{3}{stamp}", cache_key(spec.name, &args)))
        };
        if let Some(k) = &cache_key
            && !self.fn_cache_bypass
            && let Some(v) = self.fn_cache.get(k)
        {
            if crate::report::log::debug() {
                trace_call(spec.name, &args, Ok(v), " (cached)");
            }
            return Ok(Evaluated::done(v.clone()));
        }
        let r = (spec.imp)(self, &args);
        if crate::report::log::debug() {
            trace_call(spec.name, &args, r.as_ref(), "");
        }
        let v = r?;
        if let Some(k) = cache_key {
            self.fn_cache.insert(k, v.clone());
        }
        Ok(Evaluated::done(v))
    }

    // ---- iteration -------------------------------------------------------

    /// Finds the first reference in `texts` that names a list or a data
    /// container not yet bound, looking inside nested references first.
    #[cfg(test)]
    fn find_iterable(&self, texts: &[&str]) -> Wheel {
        self.find_iterable_planned(&ScanPlan::new(texts))
    }

    #[cfg(test)]
    fn find_iterable_in(&self, s: &str, special: &mut bool) -> Wheel {
        self.scan_refs(&ScanPlan::new(&[s]).refs, special)
    }

    /// [`Self::find_iterable`] over texts already split into references:
    /// the texts stay the same for every combination, so they are scanned
    /// once per promise, not once per combination.
    fn find_iterable_planned(&self, plan: &ScanPlan<'_>) -> Wheel {
        self.scan_refs(&plan.refs, &mut false)
    }

    /// `special` is set once a reference to one of the variables mapping
    /// functions bind (`$(this.k)`, ...) is met: cf-agent never skips a
    /// combination for a wheel that comes after one of those, so
    /// `"$(a[$(this.k)])"` stays as written instead of being skipped.
    fn scan_refs(&self, refs: &[ScanRef<'_>], special: &mut bool) -> Wheel {
        for r in refs {
            let inner = r.inner;
            let skip = if *special { Wheel::None } else { Wheel::Skip };
            if r.mapping && !self.is_bound(inner) {
                *special = true;
            }
            // A reference whose name is built from other references
            // (`$(a[$(k)])`) is a wheel of its own in cf-agent: when its
            // name does not resolve to a variable, the iteration is skipped.
            let dependent = r.dependent;
            // A plain name is taken as written, without a copy: this scan
            // runs again for every combination.
            let name = if r.nested {
                let e = self.expand(inner);
                ScannedName {
                    text: std::borrow::Cow::Owned(e.text),
                    unresolved: e.unresolved,
                }
            } else {
                ScannedName {
                    text: std::borrow::Cow::Borrowed(inner),
                    unresolved: false,
                }
            };
            if name.unresolved {
                if dependent && matches!(skip, Wheel::Skip) {
                    return skip;
                }
                continue;
            }
            if self.is_bound(&name.text) {
                continue;
            }
            let found = if dependent {
                self.lookup_dependent(inner, &name.text)
            } else {
                self.lookup_ref_in(&name.text, NsSearch::OwnOnly)
            };
            let Some(v) = found else {
                if dependent && matches!(skip, Wheel::Skip) {
                    return skip;
                }
                continue;
            };
            let d: &Json = match v {
                Found::Value(Value::List(l)) => {
                    let elems: Vec<Value> = l.iter().map(|s| Value::str(s.clone())).collect();
                    if elems.is_empty() && *special {
                        continue;
                    }
                    return Wheel::Found(name.text.into_owned(), elems);
                }
                Found::Value(Value::Data(d)) => d,
                Found::Element(j) => j,
                Found::Value(Value::Scalar(_)) => continue,
            };
            let elems: Vec<Value> = match d {
                Json::Array(_) | Json::Object(_) => {
                    json_scalars(d).into_iter().map(Value::Scalar).collect()
                }
                // A reference to null has no value to iterate with: the
                // promise is skipped.
                Json::Null => Vec::new(),
                _ => continue,
            };
            if elems.is_empty() && *special {
                continue;
            }
            return Wheel::Found(name.text.into_owned(), elems);
        }
        Wheel::None
    }

    /// Looks up a reference whose name was built from other references, as
    /// cf-agent's iteration looks such a wheel up: a namespace or bundle
    /// written literally before the first inner reference is kept apart from
    /// the rest, so `$(ns:$(b).v)` names a variable `b.v` of the current
    /// bundle (and so nothing), and `$(b.$(v))` means the current namespace.
    fn lookup_dependent(&self, written: &str, name: &str) -> Option<Found<'_>> {
        // The first `$(`, `${` or `[`: one pass over the bytes (this runs
        // for every combination, and a substring search sets up a searcher
        // each time).
        let b = written.as_bytes();
        let cut = (0..b.len())
            .find(|&i| b[i] == b'[' || (b[i] == b'$' && matches!(b.get(i + 1), Some(b'(' | b'{'))))
            .unwrap_or(b.len());
        let head = &written[..cut];
        let (literal_ns, scope_part) = match head.split_once(':') {
            Some((_, rest)) => (true, rest),
            None => (false, head),
        };
        let literal_scope = scope_part.contains('.');
        let name_head = &name[..name.find('[').unwrap_or(name.len())];
        match (literal_ns, literal_scope) {
            (true, false) => {
                let after_ns = name_head.split_once(':').map_or(name_head, |(_, r)| r);
                if after_ns.contains('.') {
                    None
                } else {
                    self.lookup_ref(name)
                }
            }
            (false, true) => self.lookup_ref_in(name, NsSearch::OwnOnly),
            _ => self.lookup_ref(name),
        }
    }

    /// Calls `f` once per combination of the lists that `texts` iterate
    /// over, the first-mentioned list varying slowest, as cf-agent does.
    /// Each reference text is a wheel of its own (`$(l)` and `$(main.l)`
    /// iterate independently), and a combination in which a dependent
    /// reference names no variable is skipped. More than
    /// [`MAX_ITERATIONS`] combinations is an error, found before the first
    /// one is evaluated when the lists do not depend on each other.
    pub fn for_each_iteration(
        &mut self,
        texts: &[&str],
        f: &mut dyn FnMut(&mut EvalContext),
    ) -> Result<(), TooManyIterations> {
        let mark = self.bindings_len();
        let plan = ScanPlan::new(texts);
        let r = self.iterate(&plan, f, 1, &mut 0);
        self.truncate_bindings(mark);
        r
    }

    /// One wheel of [`Self::for_each_iteration`]: `planned` is the product
    /// of the sizes of the wheels bound so far, `done` the combinations
    /// evaluated.
    fn iterate(
        &mut self,
        plan: &ScanPlan<'_>,
        f: &mut dyn FnMut(&mut EvalContext),
        planned: usize,
        done: &mut usize,
    ) -> Result<(), TooManyIterations> {
        // Past the deadline, no more combinations (they could be many).
        if self.out_of_time() {
            return Ok(());
        }
        match self.find_iterable_planned(plan) {
            Wheel::None => {
                *done += 1;
                if *done > MAX_ITERATIONS {
                    return Err(TooManyIterations {
                        combinations: *done,
                        at_least: true,
                    });
                }
                f(self);
            }
            Wheel::Skip => {}
            Wheel::Found(key, elems) => {
                let planned = planned.saturating_mul(elems.len());
                if planned > MAX_ITERATIONS {
                    return Err(TooManyIterations {
                        combinations: planned,
                        at_least: false,
                    });
                }
                for e in elems {
                    self.bind(key.clone(), e);
                    let r = self.iterate(plan, f, planned, done);
                    self.unbind();
                    r?;
                }
            }
        }
        Ok(())
    }
}

/// The most combinations of its lists one promise may be evaluated for.
/// cf-agent has no limit, and three lists of 200 items ground through 8
/// million combinations until memory ran out: the agent keeps every
/// expanded promise of a pass (some hundreds of bytes to kilobytes each)
/// before it acts, so 100,000 is already some 100 MB, and takes seconds to
/// minutes to act on; no policy we know iterates one promise that often
/// (a list of every package or every line of a large file is some
/// thousands).
pub const MAX_ITERATIONS: usize = 100_000;

/// A promise whose lists combine into more than [`MAX_ITERATIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyIterations {
    /// How many combinations its lists make (or, with `at_least`, how
    /// many were evaluated before the count passed the limit: lists that
    /// depend on others are only known one combination at a time).
    pub combinations: usize,
    pub at_least: bool,
}

impl std::fmt::Display for TooManyIterations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its lists combine into {}{} iterations, more than the limit of {MAX_ITERATIONS}; the promise is not evaluated",
            if self.at_least { "at least " } else { "" },
            self.combinations
        )
    }
}

/// Adds an evaluated argument. A call in the arguments that gives a list
/// gives its items as arguments of their own to a function that does not
/// collect lists (cf-agent: `and(splitstring("a b"))` is `and("a", "b")`,
/// `concat(sort(l))` joins the sorted items); a collecting function
/// (`sort`, `join`, ...) takes the list whole.
fn push_argument(name: &str, written: &Rval, v: Value, args: &mut Vec<Value>) {
    match v {
        Value::List(items)
            if matches!(written, Rval::Call(_))
                && !crate::schema::function(name).is_some_and(|f| f.collecting) =>
        {
            args.extend(items.into_iter().map(Value::Scalar));
        }
        v => args.push(v),
    }
}

/// Whether a function takes `n` arguments.
fn arity_fits(spec: &crate::eval::call::FnSpec, n: usize) -> bool {
    n >= spec.min_args && spec.max_args.is_none_or(|m| n <= m)
}

/// cf-agent defers a call whose arguments hold unresolved references, but
/// lets every three-argument `ifelse` through (made for
/// `ifelse(isvariable("x"), $(x), "default")`): its result may then hold
/// the unresolved text, and an unresolved condition is simply false.
fn ifelse_may_go_on(name: &str, args: &[Value]) -> bool {
    name == "ifelse" && args.len() == 3
}

impl EvalContext {
    /// `for_each_iteration` for a promise: in each iteration its `with`
    /// attribute, once it resolves to a string, is what `$(with)` reads.
    pub fn for_each_promise_iteration(
        &mut self,
        promise: &crate::syntax::ast::Promise,
        texts: &[&str],
        f: &mut dyn FnMut(&mut EvalContext),
    ) {
        // A promise whose class guard does not hold is skipped before
        // anything of it is expanded, as cf-agent skips it: its `with`
        // (an `execresult` for another platform, say) is never evaluated.
        let guarded_out = !promise.guard.quoted
            && !self
                .eval_class_expr(promise.guard.expr.trim())
                .unwrap_or(true);
        let with = promise.attribute("with").filter(|_| !guarded_out);
        let mut rounds = 0usize;
        let mut result = self.for_each_iteration(texts, &mut |ctx| {
            rounds += 1;
            let mark = ctx.bindings_len();
            if let Some(a) = with
                && let Ok(Evaluated {
                    value: Value::Scalar(s),
                    unresolved: false,
                }) = ctx.eval_rval(&a.value)
            {
                ctx.bind("with".to_string(), Value::Scalar(s));
            }
            f(ctx);
            ctx.truncate_bindings(mark);
        });
        // A promise with an attribute that is an `ifelse` call is evaluated
        // once even when its iteration yields nothing (a reference like
        // `$($(missing))` names no variable), as cf-agent does, so
        // `ifelse(isvariable("x"), "$($(x))", "fallback")` still falls back.
        if result.is_ok() && rounds == 0 && has_ifelse_attribute(promise) {
            let mark = self.bindings_len();
            f(self);
            self.truncate_bindings(mark);
            result = Ok(());
        }
        if let Err(e) = result {
            // Pre-evaluation and the passes meet the promise again: one
            // error for it is enough.
            let this = |name: &str| self.lookup(&format!("this.{name}"));
            let file = this("promise_filename").and_then(|v| v.as_scalar().map(str::to_string));
            let line = this("promise_linenumber").and_then(|v| v.as_scalar().map(str::to_string));
            let at = format!("{}:{}", file.unwrap_or_default(), line.unwrap_or_default());
            if self.note_refused_iteration(&at) {
                crate::error!(
                    "{at}: the promise '{}' is refused: {e}",
                    promise.promiser.value
                );
            }
        }
    }
}

/// The variables `maparray`, `mapdata` and `maplist` bind while they map
/// (cf-agent's iteration treats their wheels apart).
fn is_mapping_variable(name: &str) -> bool {
    matches!(
        name,
        "this" | "this.k" | "this.v" | "this.k[1]" | "this.this"
    )
}

/// Whether an argument's text still names a variable the mapping
/// functions bind: cf-agent calls a function with such an argument even
/// when other references in it did not resolve, for the mapping function
/// to expand it (`mapdata("none", concat("$(spec)"), d)` where `spec` is
/// `key = $(this.k)`).
/// Whether an argument that still holds a reference is taken as it is:
/// cf-agent holds a call back for a reference in its arguments, but takes
/// a `/` inside the brackets of one as a shell's command substitution
/// (`$(/bin/cat file)`) and the whole argument as resolved, as ncf's
/// `returnszero("/usr/bin/test $(/usr/bin/perl ...) = 640", "useshell")`
/// expects (libpromises/vars.c, IsCf3Scalar).
fn shell_substitution(v: &Value) -> bool {
    let Value::Scalar(s) = v else {
        return false;
    };
    let bytes = s.as_bytes();
    let mut open = false;
    let mut depth = 0i32;
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'$' if matches!(bytes.get(i + 1), Some(b'(' | b'{')) => open = true,
            b'(' | b'{' if open => depth += 1,
            b')' | b'}' if open => {
                depth -= 1;
                if depth == 0 {
                    open = false;
                }
            }
            b'/' if depth > 0 => return true,
            _ => {}
        }
    }
    false
}

fn names_mapping_variable(v: &Value) -> bool {
    let Value::Scalar(s) = v else {
        return false;
    };
    MAPPING_REFERENCES.iter().any(|r| s.contains(r))
}

/// The references to the variables the mapping functions bind, in both
/// spellings (written out: formatting them for each argument was most of
/// the cost of a call whose arguments wait).
const MAPPING_REFERENCES: [&str; 8] = [
    "$(this)",
    "${this}",
    "$(this.k)",
    "${this.k}",
    "$(this.k[1])",
    "${this.k[1]}",
    "$(this.v)",
    "${this.v}",
];

/// Whether one of a promise's attributes is written as an `ifelse` call.
fn has_ifelse_attribute(promise: &crate::syntax::ast::Promise) -> bool {
    promise
        .attributes
        .iter()
        .any(|a| matches!(&a.value, Rval::Call(c) if c.name.name == "ifelse"))
}

/// Whether a list item is written as nothing but an `@(...)` reference.
fn is_list_ref(item: &Rval) -> bool {
    list_ref_text(item).is_some()
}

/// The text of a list item written as nothing but an `@(...)` reference.
fn list_ref_text(item: &Rval) -> Option<&str> {
    let text = match item {
        Rval::String(s) => s.value.as_str(),
        Rval::NakedVar { text, .. } => text.as_str(),
        _ => return None,
    };
    matches!(whole_ref(text), Some((true, _))).then_some(text)
}

/// What the next step of iteration is.
/// A reference's name as the iteration scan expanded it.
struct ScannedName<'a> {
    text: std::borrow::Cow<'a, str>,
    unresolved: bool,
}

/// The references of a promise's texts in the order the iteration scan
/// meets them: the references inside a reference's name first, then the
/// reference itself (an `@(x)` only for what is inside it). Text nested too
/// deeply is never expanded, so it holds nothing to iterate over.
struct ScanPlan<'a> {
    refs: Vec<ScanRef<'a>>,
}

struct ScanRef<'a> {
    /// The name as written, between the brackets.
    inner: &'a str,
    /// The name holds a reference to expand first.
    nested: bool,
    /// The name is one the mapping functions bind (`this.k`, ...).
    mapping: bool,
    /// The name is built from other references (`a[$(k)]`).
    dependent: bool,
}

impl<'a> ScanPlan<'a> {
    fn new(texts: &[&'a str]) -> Self {
        let mut refs = Vec::new();
        for t in texts {
            Self::add(t, &mut refs);
        }
        ScanPlan { refs }
    }

    fn add(s: &'a str, refs: &mut Vec<ScanRef<'a>>) {
        if crate::syntax::reference_too_deep(s).is_some() {
            return;
        }
        let mut pos = 0;
        while let Some(r) = next_ref(s, pos) {
            pos = r.end;
            let inner = &s[r.inner_start..r.inner_end];
            // A plain name holds no reference to look into.
            let nested = super::context::may_hold_reference(inner);
            if nested {
                Self::add(inner, refs);
            }
            // `@(x)` passes the list whole, but a list named inside it
            // iterates: `"@($(bundles).d)"` once per bundle
            // (01_vars/04_containers/pass_variable_container.cf).
            if r.list_sigil {
                continue;
            }
            refs.push(ScanRef {
                inner,
                nested,
                mapping: is_mapping_variable(inner),
                dependent: super::context::has_reference(inner),
            });
        }
    }
}

enum Wheel {
    /// Nothing left to iterate: evaluate the promise.
    None,
    /// A dependent reference names no variable: skip this combination.
    Skip,
    /// A reference (as written, inner references expanded) and its elements.
    Found(String, Vec<Value>),
}

/// The primitive members of a JSON array or object, as text, in order;
/// nested containers are skipped, as cf-agent skips them when iterating.
pub fn json_scalars(j: &Json) -> Vec<String> {
    let items: Box<dyn Iterator<Item = &Json>> = match j {
        Json::Array(a) => Box::new(a.iter()),
        Json::Object(m) => Box::new(m.values()),
        other => {
            return scalar_text(&Value::Data(std::sync::Arc::new(other.clone())))
                .into_iter()
                .collect();
        }
    };
    items
        .filter_map(crate::values::json::expansion_text)
        .collect()
}

/// What tells one version of a file from another, for functions that
/// parse files: size, modification time and inode.
fn file_stamp(host: &crate::host::Host, path: &str) -> Option<String> {
    use crate::host::plain::MetadataExt;
    let m = host.plain().metadata(path).ok()?;
    Some(format!(
        "{}:{}.{}:{}",
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ino()
    ))
}

fn cache_key(name: &str, args: &[Value]) -> String {
    let mut k = String::from(name);
    for a in args {
        k.push('\u{1}');
        match a {
            Value::Scalar(s) => k.push_str(s),
            Value::List(l) => k.push_str(&l.join("\u{2}")),
            Value::Data(d) => k.push_str(&d.to_string()),
        }
    }
    k
}

/// Every text in an rval that may hold references that drive iteration:
/// strings, naked variables, list items and function arguments (except the
/// raw ones, which their function expands itself).
pub fn iteration_texts<'a>(builtins: Builtins, r: &'a Rval, out: &mut Vec<&'a str>) {
    match r {
        Rval::String(s) => out.push(&s.value),
        Rval::NakedVar { text, .. } => out.push(text),
        Rval::Symbol(_) => {}
        Rval::List { items, .. } => items.iter().for_each(|i| iteration_texts(builtins, i, out)),
        Rval::Call(c) => {
            // A bundle or body named by a variable (`usebundle =>
            // $(bundles)("z")`) iterates over it too
            // (00_basics/04_bundles/bundle-iteration.cf).
            if c.name.name.contains(['$', '@']) {
                out.push(&c.name.name);
            }
            let raw = (builtins.lookup)(&c.name.name).map_or(&[][..], |s| s.raw_args);
            for (i, a) in c.args.iter().enumerate() {
                if !raw.contains(&i) {
                    iteration_texts(builtins, a, out);
                }
            }
        }
    }
}

/// A value as `-d` lines show it: a string quoted, a list in braces, a
/// container as compact JSON.
fn value_shown(v: &Value) -> String {
    match v {
        Value::Scalar(s) => format!("\"{s}\""),
        Value::List(l) => {
            let items: Vec<String> = l.iter().map(|s| format!("\"{s}\"")).collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Data(j) => crate::values::json::write_compact(j),
    }
}

/// Under `-d`, a function call with its arguments and what it gave.
fn trace_call(name: &str, args: &[Value], result: Result<&Value, &FnError>, note: &str) {
    let args: Vec<String> = args.iter().map(value_shown).collect();
    let said = match result {
        Ok(v) => format!("gave {}", value_shown(v)),
        Err(FnError::Defer) => "waits for a value that is not there yet".to_string(),
        Err(FnError::Failed(m) | FnError::Quiet(m)) => format!("failed: {m}"),
    };
    crate::trace!("Function call {name}({}) {said}{note}", args.join(","));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Frame;
    use crate::eval::vars::Variable;
    use crate::syntax::parse;
    use crate::values::{DataType, Origin};

    fn ctx() -> EvalContext {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        for (n, v) in [
            ("a", Value::List(vec!["1".into(), "2".into()])),
            ("b", Value::List(vec!["x".into(), "y".into()])),
            ("s", Value::str("S")),
        ] {
            c.vars.put(
                "default",
                "main",
                n,
                Variable::new(v, DataType::Slist, Origin::Agent),
            );
        }
        c.push_frame(Frame::new("default", "main", "agent"));
        c
    }

    fn rval(text: &str) -> Rval {
        let src = format!("bundle agent x {{ vars: \"v\" slist => {text}; }}");
        let p = parse("t.cf", &src);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let b = p.file.bundles().next().unwrap().clone();
        b.sections[0].promises[0].attributes[0].value.clone()
    }

    #[test]
    fn lists_splice() {
        let mut c = ctx();
        let e = c
            .eval_rval(&rval("{ \"$(s)\", @(a), \"@(b)\", concat(\"p\", \"q\") }"))
            .unwrap();
        assert_eq!(
            e.value,
            Value::List(vec![
                "S".into(),
                "1".into(),
                "2".into(),
                "x".into(),
                "y".into(),
                "pq".into()
            ])
        );
    }

    /// The deepest nesting the parser lets through evaluates inside a test
    /// thread's 2 MiB stack, in a debug build: the limit leaves headroom.
    /// Deeper text built at run time is left unexpanded, not followed.
    #[test]
    fn nesting_up_to_the_limit_fits_a_small_stack() {
        use crate::syntax::MAX_NESTING;
        let n = MAX_NESTING;
        let mut c = ctx();
        let call = format!("{}\"$(s)\"{}", "concat(".repeat(n), ")".repeat(n));
        let e = c.eval_rval(&rval(&call)).unwrap();
        assert_eq!(e.value, Value::str("S"));
        // `$($(...$(s)...))`: each level names a variable that is not there.
        let refs = format!("{}s{}", "$(".repeat(n), ")".repeat(n));
        assert!(c.expand(&refs).unresolved);
        assert!(matches!(
            c.find_iterable_in(&refs, &mut false),
            Wheel::None | Wheel::Skip
        ));
        let deep = format!("{}s{}", "$(".repeat(100_000), ")".repeat(100_000));
        let e = c.expand(&deep);
        assert!(e.unresolved);
        assert_eq!(e.text, deep);
        assert!(matches!(c.find_iterable_in(&deep, &mut false), Wheel::None));
    }

    #[test]
    fn list_results_spread_into_functions_that_do_not_collect() {
        let mut c = ctx();
        let e = c.eval_rval(&rval("concat(reverse(a), \"-\")")).unwrap();
        assert_eq!(e.value, Value::str("21-"));
        // `sort` collects: it takes the list whole.
        let e = c.eval_rval(&rval("join(\",\", sort(b, \"lex\"))")).unwrap();
        assert_eq!(e.value, Value::str("x,y"));
        assert!(c.fatal.is_none());
        // Two items for canonify's one parameter stop the run.
        assert!(matches!(
            c.eval_rval(&rval("canonify(reverse(a))")),
            Err(FnError::Failed(_))
        ));
        assert!(c.fatal.is_some());
    }

    #[test]
    fn arguments_naming_mapping_variables_do_not_defer() {
        let mut c = ctx();
        let e = c.eval_rval(&rval("concat(\"$(this.k) $(nope)\")")).unwrap();
        assert_eq!(e.value, Value::str("$(this.k) $(nope)"));
    }

    #[test]
    fn mapping_variables_keep_dependent_references_from_skipping() {
        let c = ctx();
        assert!(matches!(c.find_iterable(&["$(x[$(nope)])"]), Wheel::Skip));
        assert!(matches!(c.find_iterable(&["$(x[$(this.k)])"]), Wheel::None));
        assert!(matches!(
            c.find_iterable(&["$(this.v)", "$(x[$(nope)])"]),
            Wheel::None
        ));
    }

    #[test]
    fn unresolved_arguments_defer() {
        let mut c = ctx();
        assert_eq!(
            c.eval_rval(&rval("concat(\"$(nope)\")")),
            Err(FnError::Defer)
        );
    }

    /// Issue 15: three lists of 200 items are 8 million combinations;
    /// the count is known from the first wheels, so none is evaluated.
    #[test]
    fn too_many_combinations_are_refused_before_any_is_evaluated() {
        let mut c = ctx();
        let big: Vec<String> = (0..200).map(|i| i.to_string()).collect();
        for name in ["a", "b", "c"] {
            let v = Variable::new(Value::List(big.clone()), DataType::Slist, Origin::Agent);
            c.vars.put("default", "main", name, v);
        }
        let mut calls = 0usize;
        let r = c.for_each_iteration(&["$(a) $(b) $(c)"], &mut |_| calls += 1);
        assert_eq!(
            r,
            Err(TooManyIterations {
                combinations: 8_000_000,
                at_least: false
            })
        );
        assert_eq!(calls, 0);
        assert_eq!(c.bindings_len(), 0);
        // Two of them (40,000) are within the limit.
        let r = c.for_each_iteration(&["$(a) $(b)"], &mut |_| calls += 1);
        assert_eq!((r, calls), (Ok(()), 40_000));
    }

    #[test]
    fn iteration_order_matches_cf_agent() {
        let mut c = ctx();
        let mut seen = Vec::new();
        c.for_each_iteration(&["$(a) $(b)"], &mut |c| {
            seen.push(c.expand("$(a) $(b)").text)
        })
        .unwrap();
        assert_eq!(seen, vec!["1 x", "1 y", "2 x", "2 y"]);
    }

    #[test]
    fn qualified_reference_is_its_own_wheel() {
        let mut c = ctx();
        let mut seen = Vec::new();
        c.for_each_iteration(&["$(a)$(main.a)"], &mut |c| {
            seen.push(c.expand("$(a)$(main.a)").text)
        })
        .unwrap();
        assert_eq!(seen, vec!["11", "12", "21", "22"]);
    }

    #[test]
    fn dependent_reference_without_a_variable_skips_the_iteration() {
        let mut c = ctx();
        c.vars.put(
            "default",
            "main",
            "arr[1]",
            Variable::new(Value::str("one"), DataType::String, Origin::Agent),
        );
        let mut seen = Vec::new();
        let text = "$(a):$(arr[$(a)])";
        c.for_each_iteration(&[text], &mut |c| seen.push(c.expand(text).text))
            .unwrap();
        assert_eq!(seen, vec!["1:one"]);
        seen.clear();
        c.for_each_iteration(&["$(arr[$(nope)]) $(s)"], &mut |c| {
            seen.push(c.expand("$(s)").text)
        })
        .unwrap();
        assert!(seen.is_empty());
        // A plain unresolved reference does not skip: it stays as written.
        c.for_each_iteration(&["$(nope) $(s)"], &mut |c| seen.push(c.expand("$(s)").text))
            .unwrap();
        assert_eq!(seen, vec!["S"]);
    }
}
