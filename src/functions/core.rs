//! The functions that evaluation cannot do without: string comparison,
//! regex matching, class and variable tests, and the boolean helpers.

use super::args::Args;
use super::{FnError, FnResult, FnSpec, class_result, spec};
use crate::eval::EvalContext;
use crate::values::Value;
use crate::values::canon::canonify;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("strcmp", 2, Some(2), strcmp).quiet(),
    spec("regcmp", 2, Some(2), regcmp).quiet(),
    spec("isvariable", 1, Some(1), isvariable).quiet(),
    spec("canonify", 1, Some(1), canonify_fn).quiet(),
    spec("concat", 0, None, concat).quiet(),
    spec("and", 0, None, and).pure(),
    spec("or", 0, None, or).pure(),
    spec("not", 1, Some(1), not).pure(),
    spec("ifelse", 1, None, ifelse).pure(),
];

fn strcmp(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("strcmp", a);
    Ok(class_result(args.str(0, "text1")? == args.str(1, "text2")?))
}

fn regcmp(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("regcmp", a);
    let re = args.regex(ctx, 0, "regex")?;
    Ok(class_result(re.is_full_match(args.str(1, "text")?)))
}

fn isvariable(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let name = Args::new("isvariable", a).str(0, "variable")?;
    Ok(class_result(ctx.lookup(name).is_some()))
}

fn canonify_fn(_: &mut EvalContext, a: &[Value]) -> FnResult {
    Ok(Value::str(canonify(
        Args::new("canonify", a).str(0, "text")?,
    )))
}

fn concat(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("concat", a);
    let mut out = String::new();
    for i in 0..a.len() {
        out.push_str(args.str(i, "text")?);
    }
    Ok(Value::str(out))
}

/// Whether the class expression at `i` holds.
fn truth(ctx: &mut EvalContext, args: &Args, i: usize, param: &str) -> Result<bool, FnError> {
    let expr = args.str(i, param)?;
    // cf-agent tells an expression it cannot read with an error, in its
    // words, and takes it as not defined: the call goes on.
    if names_without_operator(expr) {
        crate::error!(
            "class expressions can't be separated by whitespace without an intervening operator in expression '{expr}'"
        );
        return Ok(false);
    }
    match ctx.eval_class_expr(expr) {
        Ok(b) => Ok(b),
        Err(e) => {
            crate::error!("Unable to parse class expression '{expr}'");
            crate::debug!("function '{}': class expression '{expr}': {e}", args.name);
            Ok(false)
        }
    }
}

/// Two class names with only whitespace between them (`"a b"`), which
/// cf-agent refuses in a class expression.
fn names_without_operator(expr: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if is_name(chars[i]) {
            let mut j = i + 1;
            while j < chars.len() && matches!(chars[j], ' ' | '\t') {
                j += 1;
            }
            if j > i + 1 && j < chars.len() && is_name(chars[j]) {
                return true;
            }
        }
        i += 1;
    }
    false
}

fn and(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("and", a);
    for i in 0..a.len() {
        if !truth(ctx, &args, i, "condition")? {
            return Ok(class_result(false));
        }
    }
    Ok(class_result(true))
}

fn or(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("or", a);
    for i in 0..a.len() {
        if truth(ctx, &args, i, "condition")? {
            return Ok(class_result(true));
        }
    }
    Ok(class_result(false))
}

fn not(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    Ok(class_result(!truth(
        ctx,
        &Args::new("not", a),
        0,
        "condition",
    )?))
}

/// `ifelse(c1, v1, c2, v2, ..., default)`: the value after the first true
/// class expression, else the last argument.
fn ifelse(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("ifelse", a);
    if a.len().is_multiple_of(2) {
        return Err(args.fail(
            "needs an odd number of arguments (pairs of condition and value, then a default)",
        ));
    }
    let mut i = 0;
    while i + 1 < a.len() {
        // A condition still holding an unresolved reference (the call
        // runs anyway, see `ifelse_may_go_on`) is not a defined class.
        let unresolved = args
            .str(i, "condition")
            .is_ok_and(|c| c.contains("$(") || c.contains("${"));
        if !unresolved && truth(ctx, &args, i, "condition")? {
            return Ok(a[i + 1].clone());
        }
        i += 2;
    }
    Ok(a[a.len() - 1].clone())
}
