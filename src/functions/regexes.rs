//! Regular-expression functions. Every pattern is PCRE, compiled once per
//! run through the context's cache. `regarray`, `reglist`,
//! `regline`, `countlinesmatching` and the list predicates use cf-agent's
//! full match; `regextract`, `regex_replace` and `data_regextract` search
//! anywhere.

use super::args::{Args, collect, element_texts};
use super::{FnError, FnResult, FnSpec, class_result, spec};
use crate::eval::EvalContext;
use crate::eval::vars::Variable;
use crate::values::regex::Regex;
use crate::values::{DataType, Origin, Value};
use serde_json::Value as Json;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("regextract", 3, Some(3), regextract).pure(),
    spec("regex_replace", 4, Some(4), regex_replace).pure(),
    spec("regarray", 2, Some(2), regarray).pure(),
    spec("reglist", 2, Some(2), reglist).pure(),
    spec("data_regextract", 2, Some(2), data_regextract).pure(),
    spec("regline", 2, Some(2), regline),
    spec("countlinesmatching", 2, Some(2), countlinesmatching),
];

/// Defines `name` (possibly `bundle.name`) in the current bundle, or in
/// the bundle it names, as functions with side effects on variables do.
pub fn define_var(
    ctx: &mut EvalContext,
    name: &str,
    value: Value,
    dtype: DataType,
    function: &str,
) {
    let (ns, scope, var) = match name.split_once('.') {
        Some((scope, var)) if !scope.contains('[') => {
            let (ns, scope) = match scope.split_once(':') {
                Some((ns, s)) => (ns.to_string(), s.to_string()),
                None => (ctx.current_ns().to_string(), scope.to_string()),
            };
            (ns, scope, var)
        }
        _ => (
            ctx.current_ns().to_string(),
            ctx.current_bundle().to_string(),
            name,
        ),
    };
    let v = Variable::new(value, dtype, Origin::Agent).with_tags(vec![
        "source=function".to_string(),
        format!("function={function}"),
    ]);
    ctx.vars.put(&ns, &scope, var, v);
}

/// The groups of a match as (name, text): a named group under its name,
/// the others under their number.
fn groups(re: &Regex, caps: &[Option<String>]) -> Vec<(String, String)> {
    let names = re.group_names();
    caps.iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let t = c.as_ref()?;
            let key = match names.get(i) {
                Some(Some(n)) => n.clone(),
                _ => i.to_string(),
            };
            Some((key, t.clone()))
        })
        .collect()
}

fn regextract(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("regextract", a);
    // A pattern that does not compile matches nothing, without a word
    // (cf-agent's StringMatchCaptures gives no captures).
    let re = match args.regex(ctx, 0, "regex") {
        Ok(re) => re,
        Err(FnError::Failed(m)) => {
            crate::debug!("{m}");
            return Ok(class_result(false));
        }
        Err(e) => return Err(e),
    };
    let text = args.str(1, "string")?;
    let array = args.str(2, "array")?;
    let Some(caps) = re.captures(text) else {
        return Ok(class_result(false));
    };
    for (k, v) in groups(&re, &caps) {
        define_var(
            ctx,
            &format!("{array}[{k}]"),
            Value::Scalar(v),
            DataType::String,
            "regextract",
        );
    }
    Ok(class_result(true))
}

fn data_regextract(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("data_regextract", a);
    // A pattern that does not compile fails the call without a word, as
    // one that does not match does.
    let re = match args.regex(ctx, 0, "regex") {
        Ok(re) => re,
        Err(FnError::Failed(m)) => return Err(FnError::Quiet(m)),
        Err(e) => return Err(e),
    };
    let text = args.str(1, "string")?;
    let Some(caps) = re.captures(text) else {
        // cf-agent fails the call without a word (FnCallRegExtract).
        return Err(args.fail_quietly(format!("the regex does not match '{text}'")));
    };
    let mut m = serde_json::Map::new();
    for (k, v) in groups(&re, &caps) {
        m.insert(k, Json::String(v));
    }
    Ok(Value::data(Json::Object(m)))
}

/// Builds the regex for `regex_replace` options: `i`, `m`, `s`, `x`, `U`
/// switch PCRE options on (the others are off), `g` replaces every match.
fn replace_pattern(pattern: &str, options: &str) -> Result<(String, bool), String> {
    let mut on = String::new();
    let mut off = String::from("ms");
    let mut global = false;
    for c in options.chars() {
        match c {
            'g' => global = true,
            'i' | 'x' | 'U' => on.push(c),
            'm' | 's' => {
                on.push(c);
                off.retain(|o| o != c);
            }
            'T' => {}
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    let mut flags = String::from("(?");
    flags.push_str(&on);
    if !off.is_empty() {
        flags.push('-');
        flags.push_str(&off);
    }
    flags.push(')');
    Ok((format!("{flags}{pattern}"), global))
}

/// Expands `$1`, `${1}` and `\1` in a replacement.
fn substitute(repl: &str, text: &str, groups: &[Option<(usize, usize)>], out: &mut String) {
    let b = repl.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if (c == b'$' || c == b'\\') && i + 1 < b.len() {
            let (digits_start, braced) = if c == b'$' && b[i + 1] == b'{' {
                (i + 2, true)
            } else {
                (i + 1, false)
            };
            let mut j = digits_start;
            while j < b.len() && b[j].is_ascii_digit() && (braced || j == digits_start) {
                j += 1;
            }
            if j > digits_start && (!braced || b.get(j) == Some(&b'}')) {
                let n: usize = repl[digits_start..j].parse().unwrap_or(usize::MAX);
                if let Some(Some((s, e))) = groups.get(n) {
                    out.push_str(&text[*s..*e]);
                }
                i = if braced { j + 1 } else { j };
                continue;
            }
        }
        let ch = repl[i..].chars().next().unwrap_or('\0');
        out.push(ch);
        i += ch.len_utf8();
    }
}

fn regex_replace(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("regex_replace", a);
    let text = args.str(0, "string")?;
    let pattern = args.str(1, "regex")?;
    let repl = args.str(2, "replacement")?;
    let options = args.str(3, "options")?;
    let (full, global) = replace_pattern(pattern, options)
        .map_err(|e| args.fail(format!("parameter 'options': {e}")))?;
    let re = ctx.regexes.get(&full).map_err(|e| {
        args.fail(format!(
            "parameter 'regex': invalid regular expression '{pattern}': {}",
            e.message
        ))
    })?;
    let matches = re.captures_all(text);
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for groups in matches.iter().take(if global { usize::MAX } else { 1 }) {
        let Some(Some((s, e))) = groups.first() else {
            continue;
        };
        out.push_str(&text[pos..*s]);
        substitute(repl, text, groups, &mut out);
        pos = *e;
    }
    out.push_str(&text[pos..]);
    Ok(Value::str(out))
}

fn regarray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("regarray", a);
    let v = args.collect(ctx, 0, "array")?;
    let re = args.regex(ctx, 1, "regex")?;
    Ok(class_result(
        element_texts(&v, false).iter().any(|s| re.is_full_match(s)),
    ))
}

fn reglist(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("reglist", a);
    let v = match a.first() {
        Some(Value::Scalar(s)) => {
            // `reglist(@(list), ...)` arrives as a list; a name is looked up.
            let name = s.trim_start_matches("@(").trim_end_matches(')');
            collect(ctx, &Value::str(name))?
        }
        Some(other) => other.clone(),
        None => return Err(args.fail("missing parameter 'list'")),
    };
    let re = args.regex(ctx, 1, "regex")?;
    Ok(class_result(
        element_texts(&v, false).iter().any(|s| re.is_full_match(s)),
    ))
}

fn read_lines(ctx: &EvalContext, args: &Args, path: &str) -> Result<String, FnError> {
    ctx.host()
        .plain()
        .read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| args.fail(format!("cannot read '{path}': {e}")))
}

fn regline(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("regline", a);
    let re = args.regex(ctx, 0, "regex")?;
    let path = args.str(1, "file")?;
    let Ok(text) = read_lines(ctx, &args, path) else {
        return Ok(class_result(false));
    };
    Ok(class_result(text.lines().any(|l| re.is_full_match(l))))
}

fn countlinesmatching(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("countlinesmatching", a);
    let re = args.regex(ctx, 0, "regex")?;
    let path = args.str(1, "file")?;
    // A file that cannot be read counts no line, with an error as in
    // cf-agent 3.21 (its acceptance test
    // countlinesmatching_returns_0_on_inaccessable_file.cf).
    let n = match ctx.host().plain().read(path) {
        Ok(b) => String::from_utf8_lossy(&b)
            .lines()
            .filter(|l| re.is_full_match(l))
            .count(),
        Err(e) => {
            crate::error!("File '{path}' could not be read in countlinesmatching(): {e}");
            0
        }
    };
    Ok(Value::str(n.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replace(text: &str, re: &str, repl: &str, opts: &str) -> FnResult {
        let mut ctx = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        regex_replace(
            &mut ctx,
            &[
                Value::str(text),
                Value::str(re),
                Value::str(repl),
                Value::str(opts),
            ],
        )
    }

    #[test]
    fn replace_backreferences_and_options() {
        assert_eq!(
            replace("abcabc", "b(c)", "X$1\\1", "g"),
            Ok(Value::str("aXccaXcc"))
        );
        assert_eq!(
            replace("abcabc", "b(c)", "X${1}", ""),
            Ok(Value::str("aXcabc"))
        );
        assert_eq!(replace("ABC", "b", "x", "gi"), Ok(Value::str("AxC")));
        assert_eq!(replace("abc", "x*", "-", "g"), Ok(Value::str("-a-b-c-")));
        assert!(replace("abc", "(", "", "g").is_err());
        assert!(replace("abc", "a", "", "q").is_err());
    }
}
