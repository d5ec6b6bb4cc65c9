//! Transactional bundles (after Vyatta's commits): a bundle whose `meta`
//! tags hold `transaction` is all-or-nothing for the files it changes.
//!
//! ```cf3
//! bundle agent web_config
//! {
//!   meta:
//!       "tags" slist => { "transaction", "priority=20" };
//!   ...
//! }
//! ```
//!
//! Before each file-system change the prior state of the path goes into an
//! undo journal (see [`crate::state::journal`]). When a promise of the
//! bundle (or of a bundle it calls) ends not kept — failed, denied, timed
//! out or interrupted; a validation command such as `nginx -t` that exits
//! non-zero fails — the rest of the bundle is skipped, and every change is
//! undone in reverse order. Other bundles go on. A transactional bundle
//! called by one that is already a transaction joins the caller's.
//!
//! `priority=N` orders transactional bundles where the policy leaves the
//! order open: among bundles that are adjacent in the bundlesequence (or
//! methods promises adjacent in one `methods:` section) and are all
//! transactional with a priority, lower numbers run first; equal ones keep
//! the written order. Anything else (a bundle that is not a transaction, or
//! one without a priority) stays where it is written and separates runs.

use crate::eval::context::{EvalContext, Frame};
use crate::load::PolicySet;
use crate::syntax::ast::{Bundle, Promise, Rval};
use crate::values::value::Value;

/// The tag that makes a bundle a transaction.
pub const TRANSACTION_TAG: &str = "transaction";
/// The tag prefix of a transaction's priority.
pub const PRIORITY_TAG: &str = "priority=";

/// What a bundle's `meta` tags say: `None` when it is not a transaction,
/// else its priority (if any).
pub fn transaction_of(ctx: &mut EvalContext, bundle: &Bundle) -> Option<Option<i64>> {
    let mut tags: Vec<String> = Vec::new();
    ctx.push_frame(Frame::new(
        &bundle.namespace,
        &bundle.name.name,
        &bundle.bundle_type.name,
    ));
    for section in bundle
        .sections
        .iter()
        .filter(|s| s.promise_type.name == "meta")
    {
        for p in section
            .promises
            .iter()
            .filter(|p| p.promiser.value == "tags")
        {
            for a in &p.attributes {
                if let Ok(e) = ctx.eval_rval(&a.value) {
                    match e.value {
                        Value::List(l) => tags.extend(l),
                        Value::Scalar(s) => tags.push(s),
                        Value::Data(_) => {}
                    }
                }
            }
        }
    }
    ctx.pop_frame();
    if !tags.iter().any(|t| t == TRANSACTION_TAG) {
        return None;
    }
    Some(
        tags.iter()
            .find_map(|t| t.strip_prefix(PRIORITY_TAG))
            .and_then(|p| p.trim().parse::<i64>().ok()),
    )
}

/// Reorders items by priority within each run of adjacent items that have
/// one (stable, so equal priorities keep their order).
pub fn order_by_priority<T>(items: Vec<T>, priority: impl Fn(&T) -> Option<i64>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    let mut run: Vec<(i64, T)> = Vec::new();
    let flush = |run: &mut Vec<(i64, T)>, out: &mut Vec<T>| {
        run.sort_by_key(|(p, _)| *p);
        out.extend(run.drain(..).map(|(_, t)| t));
    };
    for item in items {
        match priority(&item) {
            Some(p) => run.push((p, item)),
            None => {
                flush(&mut run, &mut out);
                out.push(item);
            }
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The priority of the transactional bundle a bundle name refers to.
pub fn priority_of_bundle(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    ns: &str,
    name: &str,
) -> Option<i64> {
    let (_, bundle) = policy.bundle(ns, name)?;
    transaction_of(ctx, bundle).flatten()
}

/// The bundle a methods promise calls, when it can be known without
/// running it (a literal name, with or without arguments).
fn static_method_target(p: &Promise) -> Option<String> {
    match p.attribute("usebundle").map(|a| &a.value) {
        Some(Rval::Symbol(i)) => Some(i.name.as_str().to_owned()),
        Some(Rval::Call(c)) if !c.name.name.contains('$') => Some(c.name.name.as_str().to_owned()),
        Some(Rval::String(s)) if !s.value.contains('$') => Some(s.value.as_str().to_owned()),
        Some(_) => None,
        None if !p.promiser.value.contains('$') => Some(p.promiser.value.as_str().to_owned()),
        None => None,
    }
}

/// A `methods:` section's promises, with adjacent calls of transactional
/// bundles that have priorities ordered by them.
pub fn order_methods<'p>(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    ns: &str,
    promises: &'p [Promise],
) -> Vec<&'p Promise> {
    let prios: Vec<Option<i64>> = promises
        .iter()
        .map(|p| {
            // A guarded call is conditional, so its place stays as written.
            if !p.guard.is_any() {
                return None;
            }
            static_method_target(p).and_then(|b| priority_of_bundle(ctx, policy, ns, &b))
        })
        .collect();
    let items: Vec<(usize, &Promise)> = promises.iter().enumerate().collect();
    order_by_priority(items, |(i, _)| prios[*i])
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_order_only_adjacent_prioritized_items() {
        let items = vec![
            ("a", Some(20)),
            ("b", Some(10)),
            ("c", None),
            ("d", Some(5)),
            ("e", Some(5)),
            ("f", Some(1)),
        ];
        let names: Vec<&str> = order_by_priority(items, |i| i.1)
            .into_iter()
            .map(|i| i.0)
            .collect();
        assert_eq!(names, vec!["b", "a", "c", "f", "d", "e"]);
    }
}
