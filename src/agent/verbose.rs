//! Under `-v`, cf-agent's account of a run, in its words and order: the
//! bundles entered and left, each pass over the variables and classes,
//! each promise it is about to act on (its handle or id, promiser, bundle,
//! class guard, condition and stack path) and what became of it.
//!
//! Every function here returns at once unless verbose lines are printed,
//! so a run without `-v` pays one load of the level per call.

use crate::eval::context::EvalContext;
use crate::eval::expanded::ExpandedPromise;
use crate::report::Outcome;
use crate::report::log::verbose;
use crate::syntax::ast::{Promise, Rval};
use crate::values::Value;

/// A section title between two rules, as cf-agent's `Banner`.
pub(super) fn banner(title: &str) {
    if !verbose() {
        return;
    }
    crate::debug!("----------------------------------------------------------------");
    crate::debug!(" {title} ");
    crate::debug!("----------------------------------------------------------------");
}

/// The bundlesequence about to run, as cf-agent writes a list.
pub(super) fn bundlesequence(names: &[String]) {
    if !verbose() {
        return;
    }
    let items: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    crate::debug!("Using bundlesequence =>  {{{}}}", items.join(","));
}

/// How cf-agent shows a written argument, when not as its value: a whole
/// list or data reference (`@(l)`) as written, and a lone reference to a
/// variable whose value names `this.` variables as that value (cf-agent
/// expands them only when it calls the bundle: the acceptance suite's
/// `default("$(this.promise_filename)")` passes its `$(filename)` on so).
fn shown_as_written(ctx: &EvalContext, written: Option<&Rval>) -> Option<String> {
    let text = match written? {
        Rval::NakedVar { text, .. } => text.as_str(),
        Rval::String(s) => s.value.as_str(),
        _ => return None,
    };
    if text.starts_with('@') {
        return Some(text.to_string());
    }
    let name = text
        .strip_prefix("$(")
        .and_then(|t| t.strip_suffix(')'))
        .or_else(|| text.strip_prefix("${").and_then(|t| t.strip_suffix('}')))?;
    if name.contains(['$', '(', ')', '{', '}']) {
        return None;
    }
    match ctx.lookup(name)? {
        Value::Scalar(v) if v.contains("$(this.") || v.contains("${this.") => Some(v),
        _ => None,
    }
}

/// A bundle's arguments as cf-agent writes them in a banner: ` {"a","b"}`,
/// a list argument as `{"x","y"}` inside, one given as `@(l)` as written.
pub(super) fn args_text(ctx: &EvalContext, args: &[Value], written: Option<&[Rval]>) -> String {
    let items: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            _ if let Some(w) = shown_as_written(ctx, written.and_then(|w| w.get(i))) => {
                format!("\"{w}\"")
            }
            Value::Scalar(s) => quoted(s),
            Value::List(l) => {
                let inner: Vec<String> = l.iter().map(|s| quoted(s)).collect();
                format!("{{{}}}", inner.join(","))
            }
            Value::Data(j) => crate::values::json::write_compact(j),
        })
        .collect();
    format!(" {{{}}}", items.join(","))
}

/// A string as cf-agent writes it in a list: in double quotes, those
/// inside escaped.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\\\""))
}

/// `B: BEGIN bundle name` (with its arguments when it has some).
pub(super) fn bundle_begin(name: &str, args: Option<&str>) {
    if !verbose() {
        return;
    }
    crate::debug!("B: *****************************************************************");
    match args {
        Some(a) => crate::debug!("B: BEGIN bundle {name}({a})"),
        None => crate::debug!("B: BEGIN bundle {name}"),
    }
    crate::debug!("B: *****************************************************************");
}

/// `B: END bundle name`.
pub(super) fn bundle_end(name: &str) {
    if !verbose() {
        return;
    }
    crate::debug!("B: *****************************************************************");
    crate::debug!("B: END bundle {name}");
    crate::debug!("B: *****************************************************************");
}

/// The start of a pass over a bundle's variables or classes; other
/// promise types have no such line.
pub(super) fn pass_begin(promise_type: &str, pass: usize) {
    if !verbose() {
        return;
    }
    match promise_type {
        "vars" => {
            crate::debug!("V: .........................................................");
            crate::debug!("V: BEGIN variables (pass {pass})");
        }
        "classes" => {
            crate::debug!("C: .........................................................");
            crate::debug!("C: BEGIN classes / conditions (pass {pass})");
        }
        _ => {}
    }
}

/// A bundle parameter set for a call.
pub(super) fn parameter(
    name: &str,
    bundle: &str,
    value: &Value,
    written: Option<&Rval>,
    pass: usize,
) {
    if !verbose() {
        return;
    }
    // cf-agent names the type of the argument as written.
    let kind = match (written, value) {
        (Some(Rval::List { .. }), _) => 'l',
        (Some(Rval::Call(_)), _) => 'f',
        (Some(_), _) | (None, Value::Scalar(_)) => 's',
        (None, Value::List(_)) => 'l',
        (None, Value::Data(_)) => 'c',
    };
    crate::debug!(
        "V:     +  Private parameter: '{name}' in scope '{bundle}' (type: {kind}) in pass {pass}"
    );
}

/// Whether cf-agent shows a promise of this type before it looks at its
/// locks, and so in every pass even once it is done: files, storage,
/// users, packages and databases; the others only when they act.
pub(super) fn shown_before_lock(promise_type: &str) -> bool {
    matches!(
        promise_type,
        "files" | "storage" | "users" | "packages" | "databases"
    )
}

/// What the banner of a promise needs besides the expanded promise.
pub(super) struct Place<'a> {
    /// cf-agent's id of the promise: its handle canonified, or
    /// `promise_<file>_<line>` (its `this.handle`).
    pub id: &'a str,
    pub pass: usize,
    /// The arguments of the bundle being run, as a banner writes them.
    pub bundle_args: Option<&'a str>,
    /// The class guard the promise is written under.
    pub guard: &'a str,
    /// Its `if`/`ifvarclass` or `unless`, expanded, with which it is.
    pub condition: Option<(&'static str, String)>,
    /// The stack path down to the promise's bundle.
    pub stack: &'a str,
}

/// The head of cf-agent's account of a promise it is about to act on.
pub(super) fn promise_begin(ep: &ExpandedPromise, at: &Place) {
    if !verbose() {
        return;
    }
    crate::report::banner::promise_begin(&crate::report::banner::Banner {
        id: at.id,
        promise_type: &ep.promise_type,
        promiser: &ep.promiser,
        bundle: &ep.bundle,
        bundle_args: at.bundle_args,
        guard: at.guard,
        condition: at.condition.clone(),
        stack: at.stack,
        iteration: ep.iteration,
        comment: ep.scalar("comment"),
        pass: at.pass,
    });
}

/// The banner of `ep`, an iteration of `promise`, in the bundle reached
/// by `stack`.
pub(super) fn banner_of(
    ctx: &EvalContext,
    promise: &Promise,
    ep: &ExpandedPromise,
    bundle_args: Option<&str>,
    stack: &str,
) {
    // cf-agent makes a quoted guard an `ifvarclass` under `any`.
    let quoted = promise
        .guard
        .quoted
        .then(|| ctx.expand(&promise.guard.expr).text);
    let condition = ep
        .scalar("if")
        .or_else(|| ep.scalar("ifvarclass"))
        .map(str::to_string)
        .or(quoted.clone())
        .map(|c| ("if", c))
        .or_else(|| ep.scalar("unless").map(|c| ("unless", c.to_string())))
        // An `unless` that did not resolve by the last pass, as written.
        .or_else(|| {
            let a = promise.attribute("unless")?;
            Some(("unless", crate::eval::reasons::rval_written(&a.value)))
        });
    let guard = if quoted.is_some() {
        "any"
    } else {
        promise.guard.expr.trim()
    };
    // A handle as this iteration expands it; cf-agent's id otherwise, as
    // `this.handle` has it.
    let id = match (&ep.handle, ctx.frame().and_then(|f| f.this.get("handle"))) {
        (Some(h), _) => crate::values::canon::canonify(h),
        (None, Some(Value::Scalar(h))) => h.clone(),
        (None, _) => String::new(),
    };
    let at = Place {
        id: &id,
        pass: ctx.pass,
        bundle_args,
        guard,
        condition,
        stack,
    };
    promise_begin(ep, &at);
}

/// What became of a promise that acted: `A: Promise ...` and `P: END`.
pub(super) fn promise_end(promise_type: &str, promiser: &str, outcome: Outcome) {
    if !verbose() {
        return;
    }
    let said = match outcome {
        Outcome::Repaired => "A: Promise REPAIRED",
        Outcome::Timeout => "A: Promise TIMED-OUT",
        Outcome::Warned | Outcome::Failed | Outcome::Interrupted => "A: Promise NOT KEPT!",
        Outcome::Denied => "A: Promise NOT KEPT - denied",
        Outcome::Kept => "A: Promise was KEPT",
    };
    crate::debug!("{said}");
    let short: String = promiser.chars().take(30).collect();
    let more = if promiser.chars().count() > 30 {
        "..."
    } else {
        ""
    };
    crate::debug!("P: END {promise_type} promise ({short}{more})");
}

/// A promiser as cf-agent writes it in a stack path.
pub(super) fn stack_promiser(promiser: &str) -> String {
    crate::report::banner::stack_promiser(promiser)
}
