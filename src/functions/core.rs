//! The functions that evaluation cannot do without: string comparison,
//! regex matching, class and variable tests, and the boolean helpers.

use super::{FnError, FnResult, FnSpec, class_result, scalar_arg, spec};
use crate::eval::classes::canonify;
use crate::eval::{EvalContext, Value};

pub static FUNCTIONS: &[FnSpec] = &[
    spec("strcmp", 2, Some(2), strcmp),
    spec("regcmp", 2, Some(2), regcmp),
    spec("isvariable", 1, Some(1), isvariable),
    spec("canonify", 1, Some(1), canonify_fn),
    spec("concat", 0, None, concat),
    spec("and", 0, None, and),
    spec("or", 0, None, or),
    spec("not", 1, Some(1), not),
    spec("ifelse", 1, None, ifelse),
];

fn strcmp(_: &mut EvalContext, a: &[Value]) -> FnResult {
    Ok(class_result(
        scalar_arg("strcmp", a, 0)? == scalar_arg("strcmp", a, 1)?,
    ))
}

fn regcmp(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let pattern = scalar_arg("regcmp", a, 0)?;
    let text = scalar_arg("regcmp", a, 1)?;
    let re = ctx
        .regexes
        .get(pattern)
        .map_err(|e| FnError::Failed(format!("regcmp: {e}")))?;
    Ok(class_result(re.is_full_match(text)))
}

fn isvariable(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let name = scalar_arg("isvariable", a, 0)?;
    Ok(class_result(ctx.lookup(name).is_some()))
}

fn canonify_fn(_: &mut EvalContext, a: &[Value]) -> FnResult {
    Ok(Value::str(canonify(scalar_arg("canonify", a, 0)?)))
}

fn concat(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let mut out = String::new();
    for i in 0..a.len() {
        out.push_str(scalar_arg("concat", a, i)?);
    }
    Ok(Value::str(out))
}

fn truth(ctx: &mut EvalContext, name: &str, a: &[Value], i: usize) -> Result<bool, FnError> {
    let expr = scalar_arg(name, a, i)?;
    ctx.eval_class_expr(expr)
        .map_err(|e| FnError::Failed(format!("{name}: invalid class expression '{expr}': {e}")))
}

fn and(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    for i in 0..a.len() {
        if !truth(ctx, "and", a, i)? {
            return Ok(class_result(false));
        }
    }
    Ok(class_result(true))
}

fn or(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    for i in 0..a.len() {
        if truth(ctx, "or", a, i)? {
            return Ok(class_result(true));
        }
    }
    Ok(class_result(false))
}

fn not(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    Ok(class_result(!truth(ctx, "not", a, 0)?))
}

/// `ifelse(c1, v1, c2, v2, ..., default)`: the value after the first true
/// class expression, else the last argument.
fn ifelse(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    if a.len().is_multiple_of(2) {
        return Err(FnError::Failed(
            "ifelse: needs an odd number of arguments (pairs of condition and value, then a default)".into(),
        ));
    }
    let mut i = 0;
    while i + 1 < a.len() {
        if truth(ctx, "ifelse", a, i)? {
            return Ok(a[i + 1].clone());
        }
        i += 2;
    }
    Ok(a[a.len() - 1].clone())
}
