//! Typed access to a function's arguments, with errors that name the
//! function, the parameter and the type it expects, and the resolution of
//! collecting arguments (a list, a data container, a variable name, a
//! classic array, or inline JSON).

use super::FnError;
use crate::eval::EvalContext;
use crate::values::Value;
use crate::values::hash::{TableEntry, table_order, var_ref_hash};
use crate::values::json;
use crate::values::number::{parse_int, parse_real};
use crate::values::refs::VarRef;
use serde_json::{Map, Value as Json};
use std::borrow::Cow;
use std::sync::Arc;

/// The arguments of one call of the function `name`.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    pub name: &'static str,
    pub args: &'a [Value],
}

impl<'a> Args<'a> {
    pub fn new(name: &'static str, args: &'a [Value]) -> Args<'a> {
        Args { name, args }
    }

    pub fn len(&self) -> usize {
        self.args.len()
    }

    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    pub fn fail(&self, msg: impl std::fmt::Display) -> FnError {
        FnError::Failed(format!("function '{}': {msg}", self.name))
    }

    /// A failure cf-agent does not report (see [`FnError::Quiet`]).
    pub fn fail_quietly(&self, msg: impl std::fmt::Display) -> FnError {
        FnError::Quiet(format!("function '{}': {msg}", self.name))
    }

    fn bad(&self, i: usize, param: &str, expected: &str, got: &str) -> FnError {
        self.fail(format!(
            "parameter '{param}' (argument {}) must be {expected}, got '{got}'",
            i + 1
        ))
    }

    /// A string argument.
    pub fn str(&self, i: usize, param: &str) -> Result<&'a str, FnError> {
        match self.args.get(i) {
            Some(Value::Scalar(s)) => Ok(s),
            Some(other) => Err(self.fail(format!(
                "parameter '{param}' (argument {}) must be a string, got a {}",
                i + 1,
                other.natural_type().as_str()
            ))),
            None => Err(self.fail(format!("missing parameter '{param}' (argument {})", i + 1))),
        }
    }

    pub fn opt_str(&self, i: usize, param: &str) -> Result<Option<&'a str>, FnError> {
        if i < self.args.len() {
            self.str(i, param).map(Some)
        } else {
            Ok(None)
        }
    }

    /// An integer argument (CFEngine's syntax: sign, digits, unit suffix).
    pub fn int(&self, i: usize, param: &str) -> Result<i64, FnError> {
        let s = self.str(i, param)?;
        parse_int(s).map_err(|_| self.bad(i, param, "an integer", s))
    }

    pub fn opt_int(&self, i: usize, param: &str, default: i64) -> Result<i64, FnError> {
        if i < self.args.len() {
            self.int(i, param)
        } else {
            Ok(default)
        }
    }

    pub fn real(&self, i: usize, param: &str) -> Result<f64, FnError> {
        let s = self.str(i, param)?;
        parse_real(s).map_err(|_| self.bad(i, param, "a real number", s))
    }

    /// One of a fixed set of words.
    pub fn option(&self, i: usize, param: &str, choices: &[&str]) -> Result<&'a str, FnError> {
        let s = self.str(i, param)?;
        if choices.contains(&s) {
            Ok(s)
        } else {
            Err(self.bad(i, param, &format!("one of {}", choices.join(", ")), s))
        }
    }

    /// One of a fixed set of words, `default` when the argument is absent.
    pub fn opt_option(
        &self,
        i: usize,
        param: &str,
        choices: &[&str],
        default: &'a str,
    ) -> Result<&'a str, FnError> {
        if i < self.args.len() {
            self.option(i, param, choices)
        } else {
            Ok(default)
        }
    }

    /// A boolean option (`true`, `yes`, `on` / `false`, `no`, `off`).
    pub fn boolean(&self, i: usize, param: &str) -> Result<bool, FnError> {
        match self.option(i, param, &["true", "false", "yes", "no", "on", "off"])? {
            "true" | "yes" | "on" => Ok(true),
            _ => Ok(false),
        }
    }

    /// A regular expression from the per-run cache.
    pub fn regex(
        &self,
        ctx: &mut EvalContext,
        i: usize,
        param: &str,
    ) -> Result<Arc<crate::values::regex::Regex>, FnError> {
        let p = self.str(i, param)?;
        ctx.regexes
            .get(p)
            .map_err(|e| self.fail(format!("parameter '{param}': {e}")))
    }

    /// A list of strings: a collecting argument (see `collect`) as a list,
    /// a single string as a list of one, a data container as its scalars.
    pub fn list(&self, ctx: &EvalContext, i: usize, param: &str) -> Result<Vec<String>, FnError> {
        Ok(match self.collect(ctx, i, param)? {
            Value::List(l) => l,
            Value::Scalar(s) => vec![s],
            Value::Data(d) => crate::eval::rval::json_scalars(&d),
        })
    }

    /// A collecting argument, resolved (see `collect`).
    pub fn collect(&self, ctx: &EvalContext, i: usize, param: &str) -> Result<Value, FnError> {
        match self.args.get(i) {
            Some(v) => collect(ctx, v).map_err(|e| match e {
                FnError::Failed(m) => self.fail(format!("parameter '{param}': {m}")),
                FnError::Quiet(m) => self.fail_quietly(format!("parameter '{param}': {m}")),
                d => d,
            }),
            None => Err(self.fail(format!("missing parameter '{param}' (argument {})", i + 1))),
        }
    }

    /// A collecting argument where the name of a plain string variable is
    /// that string rather than an error: `getvalues("s")` is `{ s }` and
    /// `getindices("s")` is empty in cf-agent, which reads such names
    /// allowing scalars (the other collecting functions fail on them).
    pub fn collect_or_scalar(
        &self,
        ctx: &EvalContext,
        i: usize,
        param: &str,
    ) -> Result<Value, FnError> {
        if let Some(Value::Scalar(name)) = self.args.get(i) {
            let t = name.trim_start();
            if !t.starts_with('[')
                && !t.starts_with('{')
                && classic_array(ctx, name).is_none()
                && let Some(v @ Value::Scalar(_)) = ctx.lookup(name)
            {
                return Ok(v);
            }
        }
        self.collect(ctx, i, param)
    }
}

/// The array or object inside a data container that a collecting argument
/// names (`d[k]`), borrowed: what [`collect`] (and
/// [`Args::collect_or_scalar`]) would give as a copy, for a function that
/// only reads it. None for anything else, which the caller collects as
/// usual.
pub fn collected_node<'a>(ctx: &'a EvalContext, v: Option<&Value>) -> Option<&'a Json> {
    let Some(Value::Scalar(s)) = v else {
        return None;
    };
    let t = s.trim_start();
    if t.starts_with('[') || t.starts_with('{') {
        return None;
    }
    match ctx.lookup_ref(s)? {
        crate::eval::context::Found::Element(j @ (Json::Object(_) | Json::Array(_))) => Some(j),
        _ => None,
    }
}

/// A collecting argument: a list or data value passed directly (`@(x)`, a
/// function call), inline JSON, or the name of a variable: a list, a data
/// container or a part of one (`d[k]`), a scalar, or a classic array
/// (`a[k]` entries gathered into an object). An unknown name defers.
pub fn collect(ctx: &EvalContext, v: &Value) -> Result<Value, FnError> {
    match v {
        Value::Scalar(s) => {
            let t = s.trim_start();
            if t.starts_with('[') || t.starts_with('{') {
                return match json::parse(t) {
                    Ok(j) => Ok(Value::data(j)),
                    // A bare name in a value's place is a variable whose
                    // value goes there (`mergedata('{ "state": s }')`), as
                    // CFEngine's inline JSON reads it.
                    // Text that does not parse is then the name of a
                    // variable, which none has: cf-agent fails the call
                    // without a word.
                    Err(e) => match with_variables(ctx, t)? {
                        Some(text) => json::parse(&text)
                            .map(Value::data)
                            .map_err(|_| FnError::Quiet(format!("invalid inline JSON '{s}': {e}"))),
                        None => Err(FnError::Quiet(format!("invalid inline JSON '{s}': {e}"))),
                    },
                };
            }
            match ctx.lookup(s) {
                // cf-agent reads the name of a scalar as the classic array
                // beside it (`sys.ipv4` names `sys.ipv4[eth0]`, ...), and
                // fails when there is none: without a word for a plain
                // string (3.21 logs it at debug level: `mergedata("s")`),
                // with an error for a primitive inside a data container
                // (`mergedata("d[k]")`: "not a container").
                Some(Value::Scalar(_)) => classic_array(ctx, s).ok_or_else(|| {
                    let in_data = s
                        .find('[')
                        .is_some_and(|i| matches!(ctx.lookup(&s[..i]), Some(Value::Data(_))));
                    let m = format!("'{s}' is a string, not a list, a data container or an array");
                    if in_data {
                        FnError::Failed(m)
                    } else {
                        FnError::Quiet(m)
                    }
                }),
                Some(v) => Ok(v),
                None => classic_array(ctx, s).ok_or(FnError::Defer),
            }
        }
        other => Ok(other.clone()),
    }
}

/// Inline JSON whose bare names (outside strings, other than `true`,
/// `false` and `null`) are replaced by their variables' values as JSON: a
/// container as it is, a list as an array of strings, a string as a
/// string. `None` when there is no bare name; a name not defined yet
/// defers the call.
fn with_variables(ctx: &EvalContext, text: &str) -> Result<Option<String>, FnError> {
    let mut out = String::with_capacity(text.len());
    let mut replaced = false;
    let mut chars = text.char_indices().peekable();
    let mut in_string = false;
    // The containers open at this point: `{` or `[`.
    let mut open: Vec<char> = Vec::new();
    while let Some((i, c)) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        out.push(n);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        if c == '"' {
            in_string = true;
            out.push(c);
            continue;
        }
        match c {
            '{' | '[' => open.push(c),
            '}' | ']' => {
                open.pop();
            }
            _ => {}
        }
        // A name starts only where a value may (not inside a number such
        // as `1e5`); one where an object's key goes is that key, as text.
        let before = out.trim_end().chars().next_back();
        let value_place = matches!(before, None | Some(':' | ',' | '[' | '{'));
        let key_place = open.last() == Some(&'{') && matches!(before, Some(',' | '{'));
        if !(value_place && (c.is_ascii_alphabetic() || c == '_')) {
            out.push(c);
            continue;
        }
        // The name with its indices (`a[x][0]`), not the brackets closing
        // an array around it.
        let mut end = i + c.len_utf8();
        let mut depth = 0usize;
        while let Some(&(j, n)) = chars.peek() {
            let takes = match n {
                '[' => {
                    depth += 1;
                    true
                }
                ']' if depth > 0 => {
                    depth -= 1;
                    true
                }
                // A key ends at its colon; a value's name may hold a namespace.
                ':' => !key_place,
                n => n.is_ascii_alphanumeric() || matches!(n, '_' | '.'),
            };
            if !takes {
                break;
            }
            end = j + n.len_utf8();
            chars.next();
        }
        let word = &text[i..end];
        if key_place {
            out.push_str(&json::write_compact_json(&Json::String(word.to_string())));
            replaced = true;
            continue;
        }
        if matches!(word, "true" | "false" | "null") {
            out.push_str(word);
            continue;
        }
        // A classic array (`vars1[c]`, ... with no `vars1`) is the object
        // of its entries, as for a collecting argument's name; not when the
        // name has a namespace, whose colon cf-agent's JSON reader takes
        // for JSON (mergedata-CFE-2551-2 expects no value then).
        let value = ctx
            .lookup(word)
            .or_else(|| {
                (!word.contains(':'))
                    .then(|| classic_array(ctx, word))
                    .flatten()
            })
            .ok_or(FnError::Defer)?;
        let j = match value {
            Value::Data(d) => (*d).clone(),
            Value::List(l) => Json::Array(l.into_iter().map(Json::String).collect()),
            Value::Scalar(s) => Json::String(s),
        };
        out.push_str(&json::write_compact_json(&j));
        replaced = true;
    }
    Ok(replaced.then_some(out))
}

/// Gathers the entries `name[k1][k2]...` of a classic array into a JSON
/// object (nested by index), keys in the order cf-agent's walk over its
/// variable table meets them (`table_order`).
pub fn classic_array(ctx: &EvalContext, name: &str) -> Option<Value> {
    let r = VarRef::parse(name);
    let (ns, scope) = match (r.ns, r.scope) {
        (Some(ns), Some(scope)) => (ns, scope),
        (None, Some(scope)) => (ctx.current_ns(), scope),
        (Some(ns), None) => (ns, ctx.current_bundle()),
        (None, None) => (ctx.current_ns(), ctx.current_bundle()),
    };
    // The name as stored: `base[i1][i2]` of the reference, then `[`.
    let mut prefix = r.base.to_string();
    let indices = r.indices();
    for idx in &indices {
        prefix.push('[');
        prefix.push_str(idx);
        prefix.push(']');
    }
    let vars = ctx.vars.scope_with_prefix(ns, scope, &prefix)?;
    let count = ctx.vars.global_table_len();
    let mut entries: Vec<(TableEntry, Vec<&str>, &Value)> = vars
        .filter_map(|(k, var)| {
            let rest = k.strip_prefix(prefix.as_str())?;
            let idx = split_indices(rest)?;
            let all: Vec<&str> = indices.iter().chain(idx.iter()).copied().collect();
            let place = ctx.vars.place(ns, scope, k)?;
            let entry = TableEntry {
                hash: var_ref_hash(ns, scope, r.base, &all),
                seq: place.seq,
                load: place.load,
            };
            Some((entry, idx, &var.value))
        })
        .collect();
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| table_order(&a.0, &b.0, count));
    let mut root = Map::new();
    for (_, idx, value) in entries {
        insert_path(&mut root, &idx, value_to_json(value));
    }
    Some(Value::data(Json::Object(root)))
}

/// `[a][b]` → `["a", "b"]`; `None` if the text is not a chain of indices.
fn split_indices(mut s: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    while !s.is_empty() {
        let inner = s.strip_prefix('[')?;
        // Indices may hold brackets of nested references; match them.
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in inner.char_indices() {
            match c {
                '[' => depth += 1,
                ']' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ']' => depth -= 1,
                _ => {}
            }
        }
        let end = end?;
        out.push(&inner[..end]);
        s = &inner[end + 1..];
    }
    if out.is_empty() { None } else { Some(out) }
}

fn insert_path(map: &mut Map<String, Json>, path: &[&str], value: Json) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        map.entry(first.to_string()).or_insert(value);
        return;
    }
    let slot = map
        .entry(first.to_string())
        .or_insert_with(|| Json::Object(Map::new()));
    if !slot.is_object() {
        *slot = Json::Object(Map::new());
    }
    if let Json::Object(m) = slot {
        insert_path(m, rest, value);
    }
}

/// A value as JSON: scalars are strings, lists arrays of strings.
pub fn value_to_json(v: &Value) -> Json {
    match v {
        Value::Scalar(s) => Json::String(s.clone()),
        Value::List(l) => Json::Array(l.iter().cloned().map(Json::String).collect()),
        Value::Data(d) => d.as_ref().clone(),
    }
}

/// A collected value as a shared JSON container, copying only when it was
/// not one already.
pub fn value_to_arc_json(v: Value) -> Arc<Json> {
    match v {
        Value::Data(d) => d,
        other => Arc::new(value_to_json(&other)),
    }
}

/// The elements of a collected value as texts: list items, or the
/// primitive members of a data array/object (stored text, `null` kept
/// when `with_null`), nested containers skipped.
pub fn element_texts(v: &Value, with_null: bool) -> Vec<Cow<'_, str>> {
    match v {
        Value::Scalar(s) => vec![Cow::Borrowed(s.as_str())],
        Value::List(l) => l.iter().map(|s| Cow::Borrowed(s.as_str())).collect(),
        Value::Data(d) => {
            let items: Box<dyn Iterator<Item = &Json>> = match d.as_ref() {
                Json::Array(a) => Box::new(a.iter()),
                Json::Object(m) => Box::new(m.values()),
                other => Box::new(std::iter::once(other)),
            };
            items
                .filter(|j| with_null || !j.is_null())
                .filter_map(json::primitive_text)
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_split() {
        assert_eq!(split_indices("[a][b]"), Some(vec!["a", "b"]));
        assert_eq!(split_indices("[$(x[1])]"), Some(vec!["$(x[1])"]));
        assert_eq!(split_indices("x[a]"), None);
        assert_eq!(split_indices(""), None);
    }

    #[test]
    fn typed_errors_name_function_and_parameter() {
        let v = [Value::str("abc")];
        let a = Args::new("string_head", &v);
        let e = a.int(0, "max").unwrap_err();
        assert_eq!(
            e,
            FnError::Failed(
                "function 'string_head': parameter 'max' (argument 1) must be an integer, got 'abc'"
                    .into()
            )
        );
        assert!(a.option(0, "mode", &["lex"]).is_err());
        assert!(a.str(1, "x").is_err());
    }

    #[test]
    fn optional_options_and_lists() {
        let v = [Value::str("int"), Value::str("[\"a\", 1]")];
        let a = Args::new("sort", &v);
        assert_eq!(a.opt_option(0, "mode", &["lex", "int"], "lex"), Ok("int"));
        assert_eq!(a.opt_option(2, "mode", &["lex", "int"], "lex"), Ok("lex"));
        assert!(a.opt_option(0, "mode", &["lex"], "lex").is_err());
        let ctx = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        assert_eq!(a.list(&ctx, 1, "items"), Ok(vec!["a".into(), "1".into()]));
        assert_eq!(a.list(&ctx, 0, "items"), Err(FnError::Defer));
    }
}
