//! The variable and class tables of `cf-promises --show-vars` and
//! `--show-classes`, with the same columns, ordering and value rendering.

use crate::eval::EvalContext;
use crate::values::Value;
use crate::values::regex::{Regex, RegexError};
use std::fmt::Write as _;

/// A value as the table shows it: scalars with `"` escaped, lists as
/// ` {"a","b"}`, data as compact JSON; `<non-printable>` instead when the
/// text holds a byte that is not printable ASCII (cf-promises asks
/// isprint() of every byte in the C locale, so control characters and
/// every non-ASCII byte count).
pub fn render_value(v: &Value) -> String {
    render_with_calls(v, None)
}

/// A variable's value as the table shows it; the items of a list that are
/// calls kept as written (see [`Variable::call_items`]) are not quoted.
///
/// [`Variable::call_items`]: crate::eval::vars::Variable::call_items
pub fn render_variable(var: &crate::eval::vars::Variable) -> String {
    render_with_calls(&var.value, var.call_items.as_deref())
}

fn render_with_calls(v: &Value, calls: Option<&[bool]>) -> String {
    let text = match v {
        Value::Scalar(s) => s.replace('"', "\\\""),
        Value::List(l) if l.is_empty() => String::new(),
        Value::List(l) => {
            let items: Vec<String> = l
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if calls.and_then(|c| c.get(i)).copied().unwrap_or(false) {
                        s.clone()
                    } else {
                        format!("\"{}\"", s.replace('"', "\\\""))
                    }
                })
                .collect();
            format!(" {{{}}}", items.join(","))
        }
        Value::Data(d) => crate::values::json::write_compact(d),
    };
    if text.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        "<non-printable>".to_string()
    } else {
        text
    }
}

/// A filter: unanchored, as cf-promises matches it. An empty pattern
/// matches everything.
pub fn compile_filter(pattern: &str) -> Result<Option<Regex>, RegexError> {
    if pattern.is_empty() {
        Ok(None)
    } else {
        Regex::new(pattern).map(Some)
    }
}

pub fn vars_table(ctx: &EvalContext, filter: Option<&Regex>) -> String {
    let mut rows: Vec<(String, String, String, String)> = ctx
        .vars
        .iter()
        .map(|(scope, name, var)| {
            (
                format!("{}:{}.{}", scope.ns, scope.scope, name),
                render_variable(var),
                var.tags.join(","),
                var.comment.clone().unwrap_or_default(),
            )
        })
        .filter(|(n, ..)| filter.is_none_or(|f| f.is_match(n)))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<40} {:<60} {:<40} {:<40}",
        "Variable name", "Variable value", "Meta tags", "Comment"
    );
    for (n, v, t, c) in rows {
        let _ = writeln!(out, "{n:<40} {v:<60} {t:<40} {c:<40}");
    }
    out
}

pub fn classes_table(ctx: &EvalContext, filter: Option<&Regex>) -> String {
    let mut rows: Vec<(String, String, String)> = ctx
        .classes
        .iter()
        .map(|(name, info)| {
            (
                name.clone(),
                info.tags.join(","),
                info.comment.clone().unwrap_or_default(),
            )
        })
        .filter(|(n, ..)| filter.is_none_or(|f| f.is_match(n)))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<60} {:<40} {:<40}",
        "Class name", "Meta tags", "Comment"
    );
    for (n, t, c) in rows {
        let _ = writeln!(out, "{n:<60} {t:<40} {c:<40}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_cf_promises() {
        assert_eq!(render_value(&Value::str("x\"y\\z")), "x\\\"y\\z");
        assert_eq!(render_value(&Value::str("a\nb")), "<non-printable>");
        assert_eq!(
            render_value(&Value::List(vec!["a".into(), "b".into()])),
            " {\"a\",\"b\"}"
        );
        assert_eq!(render_value(&Value::List(vec![])), "");
        assert_eq!(
            render_value(&Value::data(serde_json::json!({"a":[1,2],"b":"x\ty"}))),
            "{\"a\":[1,2],\"b\":\"x\\ty\"}"
        );
    }

    #[test]
    fn calls_of_a_list_are_shown_unquoted() {
        let mut var = crate::eval::vars::Variable::new(
            Value::List(vec!["a".into(), "b(\"x\")".into()]),
            crate::values::value::DataType::Slist,
            crate::values::value::Origin::Agent,
        );
        assert_eq!(render_variable(&var), " {\"a\",\"b(\\\"x\\\")\"}");
        var.call_items = Some(vec![false, true].into_boxed_slice());
        assert_eq!(render_variable(&var), " {\"a\",b(\"x\")}");
    }
}
