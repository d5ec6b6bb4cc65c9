//! The parsed policy as `cf-promises -p` prints it: `json` and `cf` (the
//! entry file), `json-full` and `cf-full` (every file loaded). Built from
//! our own JSON of the tree (`syntax::json`, which `-p json-spans` prints
//! whole), with what cf-promises does not print taken away: spans, quote
//! styles, the block kind.

use crate::values::json as data_json;
use serde_json::{Map, Value};
use std::path::Path;

/// Keys of our JSON that cf-promises does not print.
fn ours_only(key: &str) -> bool {
    key == "span"
        || key.ends_with("Span")
        || key.ends_with("Spans")
        || matches!(key, "quote" | "quoted" | "promiserQuote" | "blockKind")
}

/// Our JSON of the policy in cf-promises' shape: keys sorted, naked
/// variables (and symbols inside lists and calls) as strings, a `data`
/// string as the JSON it holds, a promisee as plain strings, consecutive
/// contexts of one class expression merged. String values keep their
/// escapes resolved; `json_text` escapes them as cf-promises does.
pub fn cf_promises_shape(ours: &Value) -> Value {
    let mut ours = ours.clone();
    if let Some(Value::Array(bundles)) = ours.get_mut("bundles") {
        bundles.iter_mut().for_each(shape_sections);
    }
    // Custom promise type blocks (`promise agent x`) are not printed.
    if let Some(Value::Array(bodies)) = ours.get_mut("bodies") {
        bodies.retain(|b| b.get("blockKind").and_then(Value::as_str) != Some("promise"));
    }
    let mut v = strip(&ours);
    for key in ["bodies", "bundles"] {
        if let Some(Value::Array(blocks)) = v.get_mut(key) {
            for b in blocks {
                shape_block(b);
            }
        }
    }
    v
}

/// A quoted class guard, or one naming a variable, is kept by cf-promises
/// as an `ifvarclass` attribute (first, at line 0) under `any`.
fn shape_sections(bundle: &mut Value) {
    let Some(Value::Array(types)) = bundle.get_mut("promiseTypes") else {
        return;
    };
    // Sections of custom promise types are not printed either.
    types.retain(|t| crate::schema::promise_type(str_of(t, "name")).is_some());
    for c in types.iter_mut().flat_map(|t| items_mut(t, "contexts")) {
        let name = str_of(c, "name").to_string();
        let quoted = c.get("quoted").and_then(Value::as_bool) == Some(true);
        if !quoted && !name.contains("$(") && !name.contains("${") {
            continue;
        }
        for p in items_mut(c, "promises") {
            let guard = serde_json::json!({
                "line": 0,
                "lval": "ifvarclass",
                "rval": { "type": "symbol", "value": name },
            });
            if let Some(Value::Array(a)) = p.get_mut("attributes") {
                a.insert(0, guard);
            }
        }
        c["name"] = Value::String("any".into());
    }
}

fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().filter(|k| !ours_only(k)).collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), strip(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

fn shape_block(b: &mut Value) {
    if let Some(Value::Array(ctxs)) = b.get_mut("contexts") {
        // A body's attributes start in an `any` context, empty when the
        // first one is guarded.
        if ctxs
            .first()
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            != Some("any")
        {
            let any = serde_json::json!({ "attributes": [], "name": "any" });
            ctxs.insert(0, any);
        }
        merge_contexts(ctxs, "attributes");
        for c in ctxs.iter_mut() {
            shape_attributes(c);
        }
    }
    if let Some(Value::Array(types)) = b.get_mut("promiseTypes") {
        for t in types {
            if let Some(Value::Array(ctxs)) = t.get_mut("contexts") {
                merge_contexts(ctxs, "promises");
                for p in ctxs.iter_mut().flat_map(|c| items_mut(c, "promises")) {
                    shape_attributes(p);
                    if let Some(pe) = p.get_mut("promisee") {
                        *pe = promisee(pe);
                    }
                }
            }
        }
    }
}

fn items_mut<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    match v.get_mut(key) {
        Some(Value::Array(a)) => a.iter_mut(),
        _ => [].iter_mut(),
    }
}

/// cf-promises keeps one class expression per promise or attribute and
/// groups runs of equal ones; `any::` written twice in a row is one group.
fn merge_contexts(ctxs: &mut Vec<Value>, items: &str) {
    let mut out: Vec<Value> = Vec::with_capacity(ctxs.len());
    for mut c in ctxs.drain(..) {
        match out.last_mut() {
            Some(last) if last.get("name") == c.get("name") => {
                let moved: Vec<Value> = items_mut(&mut c, items).map(Value::take).collect();
                if let Some(Value::Array(a)) = last.get_mut(items) {
                    a.extend(moved);
                }
            }
            _ => out.push(c),
        }
    }
    *ctxs = out;
}

fn shape_attributes(holder: &mut Value) {
    for a in items_mut(holder, "attributes") {
        let is_data = a.get("lval").and_then(Value::as_str) == Some("data");
        if let Some(r) = a.get_mut("rval") {
            *r = top_rval(r, is_data);
        }
    }
}

/// A top-level rval: a naked symbol stays a symbol (a body or bundle
/// name); a `data` string becomes its JSON.
fn top_rval(r: &Value, is_data: bool) -> Value {
    match r.get("type").and_then(Value::as_str) {
        Some("symbol") => r.clone(),
        Some("string") if is_data => {
            let text = r.get("value").and_then(Value::as_str).unwrap_or("");
            data_json::parse(text).unwrap_or_else(|_| inner_rval(r))
        }
        _ => inner_rval(r),
    }
}

/// An rval inside a list or a call, where cf-promises keeps no symbols or
/// variables, only strings.
fn inner_rval(r: &Value) -> Value {
    let mut m = match r {
        Value::Object(m) => m.clone(),
        other => return other.clone(),
    };
    match m.get("type").and_then(Value::as_str) {
        Some("symbol") | Some("variable") => {
            m.insert("type".into(), Value::String("string".into()));
        }
        Some("list") => {
            if let Some(Value::Array(a)) = m.get("value") {
                let items = a.iter().map(inner_rval).collect();
                m.insert("value".into(), Value::Array(items));
            }
        }
        Some("functionCall") => {
            if let Some(Value::Array(a)) = m.get("arguments") {
                let args = a.iter().map(inner_rval).collect();
                m.insert("arguments".into(), Value::Array(args));
            }
        }
        _ => {}
    }
    Value::Object(m)
}

/// A promisee is printed as its text: a string, or a list of strings.
fn promisee(pe: &Value) -> Value {
    match pe.get("type").and_then(Value::as_str) {
        Some("list") => Value::Array(
            pe.get("value")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(promisee).collect())
                .unwrap_or_default(),
        ),
        _ => pe.get("value").cloned().unwrap_or(Value::Null),
    }
}

/// Source paths as cf-promises prints them: the entry as the command line
/// gave it (`given`: `./promises.cf`, `/x/./promises.cf`), the files it
/// loads under the entry's directory as given (`./lib/x.cf`), unnormalised.
pub fn paths_as_given(shaped: &mut Value, given: &str, entry: &Path, cwd: &Path) {
    // By text: `Path::parent` would drop a `/.` that cf-promises keeps.
    let given_dir = given.rsplit_once('/').map_or(".", |(dir, _)| dir);
    let real_dir = crate::config::normalize(&cwd.join(given_dir));
    for key in ["bodies", "bundles"] {
        for b in items_mut(shaped, key) {
            let Some(Value::String(path)) = b.get_mut("sourcePath") else {
                continue;
            };
            let p = Path::new(path.as_str());
            let shown = if p == entry {
                given.to_string()
            } else if let Ok(rest) = p.strip_prefix(&real_dir) {
                format!("{given_dir}/{}", rest.display())
            } else {
                continue;
            };
            *path = shown;
        }
    }
}

/// `-p json`: cf-promises' text, byte for byte. Its writer escapes `"` and
/// `'` in string values before JSON escapes them again, indents by two
/// from an offset of four, and ends without a newline.
pub fn json_text(shaped: &Value) -> String {
    let escaped = escape_values(shaped);
    let pretty = serde_json::to_string_pretty(&escaped).unwrap_or_default();
    let mut out = String::with_capacity(pretty.len() * 2);
    for (i, line) in pretty.lines().enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str("    ");
        }
        out.push_str(line);
    }
    out
}

/// String rvals (not promisers, promisees or data) with `"` and `'`
/// backslashed.
fn escape_values(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let is_string = m.get("type").and_then(Value::as_str) == Some("string");
            let mut out = Map::new();
            for (k, x) in m {
                let x = match (k.as_str(), x) {
                    ("value", Value::String(s)) if is_string => {
                        Value::String(s.replace('"', "\\\"").replace('\'', "\\'"))
                    }
                    // A data rval is the user's JSON: left as it is.
                    ("rval", x) if x.get("type").is_none() => x.clone(),
                    _ => escape_values(x),
                };
                out.insert(k.clone(), x);
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(escape_values).collect()),
        other => other.clone(),
    }
}

/// `-p cf`: the policy printed back as CFEngine syntax, the way
/// cf-promises prints it: bundles first, then bodies.
pub fn cf_text(shaped: &Value) -> String {
    let mut out = String::new();
    for b in blocks(shaped, "bundles") {
        bundle_text(b, &mut out);
    }
    for b in blocks(shaped, "bodies") {
        body_text(b, &mut out);
    }
    out
}

fn blocks<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn header(kind: &str, b: &Value, type_key: &str) -> String {
    let args: Vec<&str> = blocks(b, "arguments")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    format!(
        "{kind} {} {}({})\n{{\n",
        str_of(b, type_key),
        str_of(b, "name"),
        args.join(", ")
    )
}

fn bundle_text(b: &Value, out: &mut String) {
    out.push_str(&header("bundle", b, "bundleType"));
    let types = blocks(b, "promiseTypes");
    for t in types {
        out.push_str(str_of(t, "name"));
        out.push_str(":\n");
        for c in blocks(t, "contexts") {
            out.push_str(&format!("  {}::\n", str_of(c, "name")));
            for p in blocks(c, "promises") {
                out.push_str(&format!(
                    "    \"{}\"",
                    str_of(p, "promiser").replace('"', "\\\"")
                ));
                for (i, a) in blocks(p, "attributes").iter().enumerate() {
                    out.push_str(if i == 0 { "        " } else { ",\n        " });
                    attribute_text(a, out);
                }
                out.push_str(";\n");
            }
        }
        out.push('\n');
    }
    if !types.is_empty() {
        out.push('\n');
    }
    out.push_str("}\n\n");
}

fn body_text(b: &Value, out: &mut String) {
    out.push_str(&header("body", b, "bodyType"));
    let mut any_attribute = false;
    let mut previous_had_attributes = false;
    for (i, c) in blocks(b, "contexts").iter().enumerate() {
        let name = str_of(c, "name");
        // The first context is always `any`, opened by the body itself.
        if i > 0 {
            if previous_had_attributes {
                out.push('\n');
            }
            if name != "any" {
                out.push('\n');
                out.push_str(name);
                out.push_str("::");
            }
        }
        let attributes = blocks(c, "attributes");
        previous_had_attributes = !attributes.is_empty();
        for a in attributes {
            any_attribute = true;
            out.push_str("  ");
            attribute_text(a, out);
            out.push_str(";\n");
        }
    }
    if any_attribute {
        out.push('\n');
    }
    out.push_str("}\n\n");
}

fn attribute_text(a: &Value, out: &mut String) {
    out.push_str(str_of(a, "lval"));
    out.push_str(" => ");
    rval_text(a.get("rval").unwrap_or(&Value::Null), out);
}

fn rval_text(r: &Value, out: &mut String) {
    match r.get("type").and_then(Value::as_str) {
        Some("string") => {
            out.push('"');
            out.push_str(&str_of(r, "value").replace('"', "\\\""));
            out.push('"');
        }
        Some("symbol") => out.push_str(str_of(r, "value")),
        // cf-promises prints an empty list as nothing at all.
        Some("list") if blocks(r, "value").is_empty() => {}
        Some("list") => {
            out.push_str(" {");
            rvals_text(blocks(r, "value"), out);
            out.push('}');
        }
        Some("functionCall") => {
            out.push_str(str_of(r, "name"));
            out.push('(');
            rvals_text(blocks(r, "arguments"), out);
            out.push(')');
        }
        // A data rval: the JSON itself, as cf-promises prints it.
        _ => out.push_str(&serde_json::to_string_pretty(r).unwrap_or_default()),
    }
}

/// List items or call arguments, separated by commas without blanks.
fn rvals_text(items: &[Value], out: &mut String) {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        rval_text(x, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::json::policy_json;
    use crate::syntax::parse;

    fn shaped(text: &str) -> Value {
        let src = crate::syntax::source::SourceFile::new("/p.cf", text);
        let parsed = parse("/p.cf", text);
        cf_promises_shape(&policy_json([(&parsed.file, &src)]))
    }

    #[test]
    fn the_cf_text_is_cf_promises_text() {
        let v = shaped(
            "bundle agent test(x, y)\n{\nvars:\n \"s\" string => \"a \\\"q\\\"\", comment => \"c\";\n \
             \"l\" slist => { @(x), sym };\n \"d\" data => '{ \"a\": 1 }';\n}\n\
             body classes y { linux:: promise_kept => { \"k\" }; any:: promise_repaired => { \"r\" }; }\n",
        );
        let expected = "bundle agent test(x, y)\n{\nvars:\n  any::\n    \"s\"        string => \"a \\\"q\\\"\",\n        comment => \"c\";\n    \"l\"        slist =>  {\"@(x)\",\"sym\"};\n    \"d\"        data => {\n  \"a\": 1\n};\n\n\n}\n\nbody classes y()\n{\n\nlinux::  promise_kept =>  {\"k\"};\n\n  promise_repaired =>  {\"r\"};\n\n}\n\n";
        assert_eq!(cf_text(&v), expected);
    }

    #[test]
    fn the_json_text_is_cf_promises_text() {
        let v = shaped(
            "bundle agent b\n{\nreports:\n \"it's\" -> { \"me\" } handle => \"'h'\", classes => x;\n}\n",
        );
        let text = json_text(&v);
        assert!(
            text.starts_with("{\n      \"bodies\": [],\n      \"bundles\": [\n        {\n"),
            "{text}"
        );
        assert!(text.ends_with("\n    }"), "{text}");
        assert!(text.contains(r#""value": "\\'h\\'""#), "{text}");
        assert!(text.contains("\"promiser\": \"it's\""), "{text}");
        assert!(
            text.contains("\"promisee\": [\n                        \"me\"\n"),
            "{text}"
        );
        assert!(
            text.contains("\"type\": \"symbol\",\n                            \"value\": \"x\""),
            "{text}"
        );
    }
}
