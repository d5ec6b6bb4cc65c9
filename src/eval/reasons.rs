//! Why a promise does not act in an iteration, in words: the part of its
//! guard, `if` or `unless` that decided, and the variables that did not
//! resolve. Used by the scheduler and the edit bundles' runner (`--why`).

use crate::eval::context::{EvalContext, scalar_text};
use crate::eval::promises::condition_negates;
use crate::eval::rval::iteration_texts;
use crate::syntax::ast::{Promise, Rval};
use crate::syntax::classexpr::ClassExpr;
use crate::values::refs::next_ref;
use crate::values::value::Value;

/// Why a promise's guard, `if`/`ifvarclass` or `unless` keeps it from
/// running in the current iteration, naming the part that decided.
pub fn condition_reason(ctx: &mut EvalContext, promise: &Promise) -> String {
    // The condition just found false names the attribute and its value:
    // the guard held, and the attributes before it did not stop it.
    if let Some((at, index, value)) = ctx.false_condition.take()
        && at == promise as *const Promise as usize
        && let Some(attr) = promise.attributes.get(index)
        && let Some(negate) = condition_negates(&attr.name.name)
        && let Some(reason) = attribute_reason(ctx, attr, value, negate)
    {
        return reason;
    }
    let guard = ctx.expand(&promise.guard.expr).text;
    if !holds(ctx, &guard) {
        return format!(
            "its class guard '{}::' is false: {}",
            guard.trim(),
            why_false(ctx, &guard)
        );
    }
    for attr in &promise.attributes {
        let Some(negate) = condition_negates(&attr.name.name) else {
            continue;
        };
        let value = match ctx.eval_rval(&attr.value) {
            Ok(e) => e.value,
            Err(_) => continue,
        };
        if let Some(reason) = attribute_reason(ctx, attr, value, negate) {
            return reason;
        }
    }
    "its condition is false".to_string()
}

/// Why an `if`/`unless` (`negate`) whose value is `value` stops a promise,
/// if it does.
fn attribute_reason(
    ctx: &mut EvalContext,
    attr: &crate::syntax::ast::Attribute,
    value: Value,
    negate: bool,
) -> Option<String> {
    let texts = match value {
        Value::Scalar(s) => vec![s],
        Value::List(l) => l,
        Value::Data(_) => return None,
    };
    for t in texts {
        let truth = holds(ctx, &t);
        if truth == negate {
            let detail = if negate {
                why_true(ctx, &t)
            } else {
                why_false(ctx, &t)
            };
            let verdict = if negate { "true" } else { "false" };
            return Some(format!(
                "{} => \"{}\" is {verdict}: {detail}",
                attr.name.name,
                t.trim()
            ));
        }
    }
    None
}

/// A value as the policy writes it, in cf-agent's words for it in log
/// lines: a string bare, a call with its arguments quoted and no blanks
/// (`and("a","b")`), a list in braces.
pub fn rval_written(r: &Rval) -> String {
    let mut out = String::new();
    write_rval(r, false, &mut out);
    out
}

fn write_rval(r: &Rval, quoted: bool, out: &mut String) {
    match r {
        Rval::String(s) if quoted => {
            out.push('"');
            out.push_str(&s.value);
            out.push('"');
        }
        Rval::String(s) => out.push_str(&s.value),
        Rval::Symbol(i) if quoted => {
            out.push('"');
            out.push_str(&i.name);
            out.push('"');
        }
        Rval::Symbol(i) => out.push_str(&i.name),
        Rval::NakedVar { text, .. } if quoted => {
            out.push('"');
            out.push_str(text);
            out.push('"');
        }
        Rval::NakedVar { text, .. } => out.push_str(text),
        Rval::List { items, .. } => {
            out.push('{');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_rval(item, true, out);
            }
            out.push('}');
        }
        Rval::Call(c) => {
            out.push_str(&c.name.name);
            out.push('(');
            for (i, a) in c.args.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_rval(a, true, out);
            }
            out.push(')');
        }
    }
}

fn holds(ctx: &mut EvalContext, expr: &str) -> bool {
    let t = expr.trim();
    !t.is_empty() && ctx.eval_class_expr(t).unwrap_or(false)
}

fn parse(expr: &str) -> Option<ClassExpr> {
    ClassExpr::parse(expr.trim()).ok()
}

fn why_false(ctx: &EvalContext, expr: &str) -> String {
    match parse(expr) {
        Some(e) => false_parts(ctx, &e),
        None => format!("'{}' is not a valid class expression", expr.trim()),
    }
}

fn why_true(ctx: &EvalContext, expr: &str) -> String {
    match parse(expr) {
        Some(e) => true_parts(ctx, &e),
        None => format!("'{}' is not a valid class expression", expr.trim()),
    }
}

fn eval(ctx: &EvalContext, e: &ClassExpr) -> bool {
    e.eval(&mut |n| ctx.class_is_set(n))
}

/// The smallest parts of a false expression that make it false.
fn false_parts(ctx: &EvalContext, e: &ClassExpr) -> String {
    match e {
        ClassExpr::Name(n) => format!("class '{n}' is not defined"),
        ClassExpr::Not(inner) => true_parts(ctx, inner),
        ClassExpr::And(es) => es
            .iter()
            .filter(|x| !eval(ctx, x))
            .map(|x| false_parts(ctx, x))
            .collect::<Vec<_>>()
            .join("; "),
        ClassExpr::Or(es) => format!(
            "none of its alternatives holds ({})",
            es.iter()
                .map(|x| false_parts(ctx, x))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

/// The parts of a true expression that make it true.
fn true_parts(ctx: &EvalContext, e: &ClassExpr) -> String {
    match e {
        ClassExpr::Name(n) => format!("class '{n}' is defined"),
        ClassExpr::Not(inner) => false_parts(ctx, inner),
        ClassExpr::And(es) => es
            .iter()
            .map(|x| true_parts(ctx, x))
            .collect::<Vec<_>>()
            .join("; "),
        ClassExpr::Or(es) => es
            .iter()
            .filter(|x| eval(ctx, x))
            .map(|x| true_parts(ctx, x))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// The variables a promise refers to (in its promiser, guard and
/// attributes) that do not resolve now, each once.
pub fn unresolved_variables(ctx: &EvalContext, promise: &Promise) -> Vec<String> {
    let mut texts: Vec<&str> = vec![promise.promiser.value.as_str()];
    if promise.guard.quoted {
        texts.push(&*promise.guard.expr);
    }
    for a in &promise.attributes {
        iteration_texts(ctx.builtins(), &a.value, &mut texts);
    }
    let mut out = Vec::new();
    for t in texts {
        unresolved_in(ctx, t, &mut out, 0);
    }
    out
}

/// How deep a variable's value is followed into the references it holds.
const MAX_REF_DEPTH: usize = 8;

fn unresolved_in(ctx: &EvalContext, text: &str, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_REF_DEPTH {
        return;
    }
    let mut pos = 0;
    while let Some(r) = next_ref(text, pos) {
        let inner_text = &text[r.inner_start..r.inner_end];
        let inner = ctx.expand(inner_text);
        if inner.unresolved {
            unresolved_in(ctx, inner_text, out, depth + 1);
        } else {
            match ctx.lookup(&inner.text) {
                // A value that itself holds references that do not resolve
                // (`"$(undefined)"` stored as written): name those.
                Some(v) if !r.list_sigil && scalar_text(&v).is_some() => {
                    let t = scalar_text(&v).unwrap_or_default();
                    if ctx.expand(&t).unresolved {
                        unresolved_in(ctx, &t, out, depth + 1);
                    }
                }
                Some(Value::Data(_)) if !r.list_sigil => {
                    if !out.contains(&inner.text) {
                        out.push(inner.text);
                    }
                }
                Some(_) => {}
                None => {
                    if !out.contains(&inner.text) {
                        out.push(inner.text);
                    }
                }
            }
        }
        pos = r.end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::classes::ClassInfo;
    use crate::values::value::Origin;

    #[test]
    fn false_and_true_parts_name_what_decided() {
        let mut ctx = EvalContext::default();
        ctx.classes
            .define("linux", ClassInfo::soft(Origin::Agent, vec![]));
        assert_eq!(
            why_false(&ctx, "linux.debian.!linux"),
            "class 'debian' is not defined; class 'linux' is defined"
        );
        assert_eq!(
            why_false(&ctx, "debian|redhat"),
            "none of its alternatives holds (class 'debian' is not defined; class 'redhat' is not defined)"
        );
        assert_eq!(why_true(&ctx, "linux|debian"), "class 'linux' is defined");
    }
}
