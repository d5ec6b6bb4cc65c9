//! A promise's iterations, expanded for acting: one block for the
//! scheduler's agent bundles and the edit bundles' runner. Each iteration's
//! promiser is expanded, its condition read, and its attributes expanded;
//! those that do not get as far are kept with why (`--why`).

use super::bodies::BodyError;
use super::context::EvalContext;
use super::expanded::{AttrValue, ExpandedPromise, expand_attributes, per_file_template};
use super::reasons::{condition_reason, unresolved_variables};
use crate::load::{LoadedFile, PolicySet};
use crate::syntax::ast::{Bundle, Promise};
use crate::values::value::Value;
use indexmap::IndexMap;
use std::sync::Arc;

/// Why an iteration whose promiser never resolved is not acted on (the
/// names follow it).
pub const PROMISER_UNRESOLVED: &str = "its promiser refers to variables that did not resolve";

/// The iterations of one acting promise after expansion.
#[derive(Default)]
pub struct Expansion {
    /// Expanded iterations, ready to act.
    pub work: Vec<ExpandedPromise>,
    /// Iterations that did not get as far as acting, and why (`--why`).
    pub skipped: Vec<(String, String)>,
    /// Iterations whose attributes failed to expand, and the error.
    pub failures: Vec<(String, String)>,
    /// Something waits for a variable that may still appear.
    pub deferred: bool,
    /// An error that stops the run (a broken `inherit_from`).
    pub fatal: Option<BodyError>,
    /// Under -v, when the caller holds them (`EvalContext::held_skips`):
    /// the skip lines of the iterations, each with the number of
    /// iterations to act on before it, for the caller to print in
    /// cf-agent's order (it tells each iteration as it comes to it).
    pub held: Vec<(usize, String)>,
}

/// What a promise whose parts do not resolve yet may still do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unresolved {
    /// An unresolved promiser acts as written (methods, the last pass's
    /// reports, an edit bundle's lines to insert).
    pub promiser_acts: bool,
    /// A custom promise acts even when its attributes do not resolve: its
    /// module code fails it until they do (see `promises::custom`).
    pub custom: bool,
}

/// Every iteration of an acting promise, expanded, and those that did not
/// get as far as acting, with why.
#[allow(clippy::too_many_arguments)]
pub fn expand_iterations(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    file: &Arc<LoadedFile>,
    bundle: &Bundle,
    ptype: &str,
    promise: &Promise,
    line: usize,
    unresolved: Unresolved,
) -> Expansion {
    ctx.enter_promise(file, promise);
    let texts = ctx.promise_texts(promise, &["depends_on"]);
    let mut out = Expansion::default();
    let mut iteration = 0usize;
    let (ptype_shared, bundle_name, namespace, path): (Arc<str>, Arc<str>, Arc<str>, Arc<str>) = (
        ptype.into(),
        bundle.name.name.as_str().into(),
        bundle.namespace.as_str().into(),
        file.source.path.as_str().into(),
    );
    let expanded =
        |promiser: String, attrs: IndexMap<String, AttrValue>, per_file, unresolved, iteration| {
            let handle = match attrs.get("handle") {
                Some(AttrValue::Value(Value::Scalar(h))) => Some(h.clone()),
                _ => None,
            };
            ExpandedPromise {
                promise_type: ptype_shared.clone(),
                promiser,
                attrs,
                bundle: bundle_name.clone(),
                namespace: namespace.clone(),
                file: path.clone(),
                line,
                handle,
                unresolved,
                iteration,
                per_file,
            }
        };
    // The skip lines held so far come before the next iteration to act on.
    let flush = |ctx: &mut EvalContext, out: &mut Expansion| {
        if let Some(held) = ctx.held_skips.as_mut() {
            let at = out.work.len();
            out.held.extend(held.drain(..).map(|l| (at, l)));
        }
    };
    ctx.for_each_promise_iteration(promise, &texts, &mut |ctx| {
        flush(ctx, &mut out);
        iteration += 1;
        let names = |ctx: &EvalContext| unresolved_variables(ctx, promise).join(", ");
        // `this.promiser` is set before the condition is read: an `if` may
        // name it (`if => isplain("$(this.promiser)")`), as in cf-agent
        // (01_vars/01_basic/this_promiser_ifvarclass.cf).
        let promiser = ctx.expand_promiser(&promise.promiser.value);
        if crate::report::log::debug() && promiser.text != promise.promiser.value {
            crate::trace!(
                "Expanded promiser '{}' to '{}' (iteration {iteration})",
                promise.promiser.value,
                promiser.text
            );
        }
        ctx.set_this("promiser", Value::str(promiser.text.clone()));
        match ctx.promise_condition(promise) {
            Some(true) => {}
            Some(false) => {
                out.skipped
                    .push((promiser.text, condition_reason(ctx, promise)));
                return;
            }
            None => {
                out.deferred = true;
                let reason = format!(
                    "its condition refers to variables that did not resolve: {}",
                    names(ctx)
                );
                out.skipped.push((promiser.text, reason));
                return;
            }
        }
        // A promiser waits while a reference written in it does not
        // resolve; one a variable's value brought is text, as in cf-agent
        // (`$(const.dollar)(pwd)` is a command's `$(pwd)`). A report waits
        // for the last pass while its text looks like a reference, even one
        // a value brought (cf-agent's VerifyReportPromise).
        let waits = promiser.own_unresolved
            || (ptype == "reports" && crate::values::refs::looks_like_reference(&promiser.text));
        if waits && !unresolved.promiser_acts && !unresolved.custom {
            out.deferred = true;
            let reason = format!("{PROMISER_UNRESOLVED}: {}", names(ctx));
            out.skipped.push((promiser.text, reason));
            return;
        }
        ctx.set_this("promiser", Value::str(promiser.text.clone()));
        match expand_attributes(ctx, policy, ptype, promise) {
            Ok(attrs) => {
                // A files promise naming several files binds some
                // references per file, as cf-agent leaves them unexpanded
                // until it knows each file.
                let per_file = if ptype == "files" {
                    let t = per_file_template(ctx, policy, promise, &promiser.text, &attrs);
                    ctx.set_this("promiser", Value::str(promiser.text.clone()));
                    t
                } else {
                    None
                };
                out.work
                    .push(expanded(promiser.text, attrs, per_file, false, iteration))
            }
            Err(BodyError::Defer) if unresolved.custom => out.work.push(expanded(
                promiser.text,
                IndexMap::new(),
                None,
                true,
                iteration,
            )),
            Err(BodyError::Defer) => {
                out.deferred = true;
                let reason = format!(
                    "its attributes refer to variables or bodies that did not resolve: {}",
                    names(ctx)
                );
                out.skipped.push((promiser.text, reason));
            }
            Err(e) if e.is_fatal() => out.fatal = Some(e),
            Err(e) => out.failures.push((promiser.text, e.to_string())),
        }
    });
    flush(ctx, &mut out);
    out
}
