//! The parsed policy as JSON (`-p json`), in the shape `cf-promises -p json`
//! prints, with a `span` on every node so that the JSON describes the tree
//! completely and reads back into the same tree (`from_json`).
//!
//! Differences from cf-promises, on purpose: naked symbols and naked
//! variables keep their own `type` (`symbol`, `variable`) instead of
//! becoming strings, and strings record their `quote`. A string's `value`
//! is its value, escapes resolved; cf-promises prints it with `\`, `"` and
//! `'` escaped again.

use super::ast::*;
use super::source::{SourceFile, Span};
use serde_json::{Map, Value, json};

fn span_json(span: Span, src: &SourceFile) -> Value {
    let (line, column) = src.line_col(span.start);
    json!({ "start": span.start, "end": span.end, "line": line, "column": column })
}

fn rval_json(r: &Rval, src: &SourceFile) -> Value {
    match r {
        Rval::String(s) => json!({
            "type": "string",
            "value": s.value,
            "quote": match s.quote { Quote::Double => "double", Quote::Single => "single", Quote::Backtick => "backtick" },
            "span": span_json(s.span, src),
        }),
        Rval::Symbol(i) => {
            json!({ "type": "symbol", "value": i.name, "span": span_json(i.span, src) })
        }
        Rval::NakedVar { text, span } => {
            json!({ "type": "variable", "value": text, "span": span_json(*span, src) })
        }
        Rval::List { items, span } => json!({
            "type": "list",
            "value": items.iter().map(|i| rval_json(i, src)).collect::<Vec<_>>(),
            "span": span_json(*span, src),
        }),
        Rval::Call(c) => json!({
            "type": "functionCall",
            "name": c.name.name,
            "nameSpan": span_json(c.name.span, src),
            "arguments": c.args.iter().map(|a| rval_json(a, src)).collect::<Vec<_>>(),
            "span": span_json(c.span, src),
        }),
    }
}

fn attr_json(a: &Attribute, src: &SourceFile) -> Value {
    // cf-promises gives an attribute the line its value ends on.
    let value = a.value.span();
    json!({
        "line": src.line_of(value.end.saturating_sub(1).max(value.start)),
        "lval": a.name.name,
        "lvalSpan": span_json(a.name.span, src),
        "rval": rval_json(&a.value, src),
        "span": span_json(a.span, src),
    })
}

fn guard_json(g: &ClassGuard, src: &SourceFile) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(g.expr.to_string()));
    m.insert("quoted".into(), Value::Bool(g.quoted));
    m.insert("span".into(), span_json(g.span, src));
    m
}

fn idents(v: &[Ident]) -> Value {
    Value::Array(
        v.iter()
            .map(|i| Value::String(i.name.as_str().to_owned()))
            .collect(),
    )
}

fn ident_spans(v: &[Ident], src: &SourceFile) -> Value {
    Value::Array(v.iter().map(|i| span_json(i.span, src)).collect())
}

/// Groups consecutive items that share a guard, as cf-promises' "contexts".
fn contexts<'a, T>(
    items: &'a [T],
    guard: impl Fn(&T) -> &ClassGuard,
) -> Vec<(&'a ClassGuard, Vec<&'a T>)>
where
    T: 'a,
{
    let mut out: Vec<(&ClassGuard, Vec<&T>)> = Vec::new();
    for it in items {
        let g = guard(it);
        match out.last_mut() {
            Some((lg, v)) if *lg == g => v.push(it),
            _ => out.push((g, vec![it])),
        }
    }
    out
}

fn bundle_json(b: &Bundle, src: &SourceFile) -> Value {
    let types: Vec<Value> = b
        .sections
        .iter()
        .map(|s| {
            let ctxs: Vec<Value> = contexts(&s.promises, |p| &p.guard)
                .into_iter()
                .map(|(g, ps)| {
                    let mut m = guard_json(g, src);
                    m.insert(
                        "promises".into(),
                        Value::Array(
                            ps.into_iter()
                                .map(|p| {
                                    let mut pm = Map::new();
                                    pm.insert(
                                        "attributes".into(),
                                        Value::Array(
                                            p.attributes
                                                .iter()
                                                .map(|a| attr_json(a, src))
                                                .collect(),
                                        ),
                                    );
                                    pm.insert(
                                        "line".into(),
                                        json!(src.line_of(p.promiser.span.start)),
                                    );
                                    if let Some(pe) = &p.promisee {
                                        pm.insert("promisee".into(), rval_json(pe, src));
                                    }
                                    pm.insert(
                                        "promiser".into(),
                                        Value::String(p.promiser.value.as_str().to_owned()),
                                    );
                                    pm.insert("promiserQuote".into(), quote_json(p.promiser.quote));
                                    pm.insert(
                                        "promiserSpan".into(),
                                        span_json(p.promiser.span, src),
                                    );
                                    pm.insert("span".into(), span_json(p.span, src));
                                    Value::Object(pm)
                                })
                                .collect(),
                        ),
                    );
                    Value::Object(m)
                })
                .collect();
            json!({
                "contexts": ctxs,
                "line": src.line_of(s.promise_type.span.start),
                "name": s.promise_type.name,
                "nameSpan": span_json(s.promise_type.span, src),
                "span": span_json(s.span, src),
            })
        })
        .collect();
    json!({
        "arguments": idents(&b.params),
        "argumentSpans": ident_spans(&b.params, src),
        "bundleType": b.bundle_type.name,
        "bundleTypeSpan": span_json(b.bundle_type.span, src),
        "line": src.line_of(b.name.span.start),
        "name": b.name.name,
        "nameSpan": span_json(b.name.span, src),
        "namespace": b.namespace,
        "promiseTypes": types,
        "sourcePath": src.path,
        "span": span_json(b.span, src),
    })
}

fn quote_json(q: Quote) -> Value {
    Value::String(
        match q {
            Quote::Double => "double",
            Quote::Single => "single",
            Quote::Backtick => "backtick",
        }
        .into(),
    )
}

fn body_json(b: &Body, src: &SourceFile) -> Value {
    let ctxs: Vec<Value> = contexts(&b.attributes, |a| &a.guard)
        .into_iter()
        .map(|(g, attrs)| {
            let mut m = guard_json(g, src);
            m.insert(
                "attributes".into(),
                Value::Array(attrs.into_iter().map(|a| attr_json(&a.attr, src)).collect()),
            );
            Value::Object(m)
        })
        .collect();
    json!({
        "arguments": idents(&b.params),
        "argumentSpans": ident_spans(&b.params, src),
        "blockKind": match b.kind { BodyKind::Body => "body", BodyKind::Promise => "promise" },
        "bodyType": b.body_type.name,
        "bodyTypeSpan": span_json(b.body_type.span, src),
        "contexts": ctxs,
        "line": src.line_of(b.name.span.start),
        "name": b.name.name,
        "nameSpan": span_json(b.name.span, src),
        "namespace": b.namespace,
        "sourcePath": src.path,
        "span": span_json(b.span, src),
    })
}

/// The JSON of several parsed files, bodies and bundles in file order.
pub fn policy_json<'a>(files: impl IntoIterator<Item = (&'a PolicyFile, &'a SourceFile)>) -> Value {
    let mut bodies = Vec::new();
    let mut bundles = Vec::new();
    for (f, src) in files {
        for b in &f.blocks {
            match b {
                Block::Body(b) => bodies.push(body_json(b, src)),
                Block::Bundle(b) => bundles.push(bundle_json(b, src)),
            }
        }
    }
    json!({ "bodies": bodies, "bundles": bundles })
}

// ---- reading it back --------------------------------------------------------

/// What was wrong with JSON that `from_json` could not read.
#[derive(Debug, thiserror::Error)]
#[error("policy JSON: {0}")]
pub struct JsonShapeError(String);

fn field<'a>(v: &'a Value, k: &str) -> Result<&'a Value, JsonShapeError> {
    v.get(k)
        .ok_or_else(|| JsonShapeError(format!("missing field '{k}'")))
}

fn str_field(v: &Value, k: &str) -> Result<String, JsonShapeError> {
    field(v, k)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| JsonShapeError(format!("field '{k}' is not a string")))
}

fn arr_field<'a>(v: &'a Value, k: &str) -> Result<&'a Vec<Value>, JsonShapeError> {
    field(v, k)?
        .as_array()
        .ok_or_else(|| JsonShapeError(format!("field '{k}' is not an array")))
}

fn span_from(v: &Value) -> Result<Span, JsonShapeError> {
    let n = |k: &str| {
        field(v, k)?
            .as_u64()
            .ok_or_else(|| JsonShapeError(format!("span field '{k}' is not a number")))
    };
    Ok(Span::new(n("start")? as usize, n("end")? as usize))
}

fn quote_from(s: &str) -> Quote {
    match s {
        "single" => Quote::Single,
        "backtick" => Quote::Backtick,
        _ => Quote::Double,
    }
}

fn rval_from(v: &Value) -> Result<Rval, JsonShapeError> {
    let span = span_from(field(v, "span")?)?;
    Ok(match str_field(v, "type")?.as_str() {
        "string" => Rval::String(StringLit {
            value: str_field(v, "value")?.into(),
            quote: quote_from(&str_field(v, "quote")?),
            span,
        }),
        "symbol" => Rval::Symbol(Ident {
            name: str_field(v, "value")?.into(),
            span,
        }),
        "variable" => Rval::NakedVar {
            text: str_field(v, "value")?,
            span,
        },
        "list" => Rval::List {
            items: arr_field(v, "value")?
                .iter()
                .map(rval_from)
                .collect::<Result<_, _>>()?,
            span,
        },
        "functionCall" => Rval::Call(Box::new(FnCall {
            name: Ident {
                name: str_field(v, "name")?.into(),
                span: span_from(field(v, "nameSpan")?)?,
            },
            args: arr_field(v, "arguments")?
                .iter()
                .map(rval_from)
                .collect::<Result<_, _>>()?,
            span,
        })),
        other => return Err(JsonShapeError(format!("unknown rval type '{other}'"))),
    })
}

fn attr_from(v: &Value) -> Result<Attribute, JsonShapeError> {
    Ok(Attribute {
        name: Ident {
            name: str_field(v, "lval")?.into(),
            span: span_from(field(v, "lvalSpan")?)?,
        },
        value: rval_from(field(v, "rval")?)?,
        span: span_from(field(v, "span")?)?,
    })
}

fn guard_from(v: &Value) -> Result<ClassGuard, JsonShapeError> {
    Ok(ClassGuard {
        expr: str_field(v, "name")?.into(),
        span: span_from(field(v, "span")?)?,
        quoted: field(v, "quoted")?.as_bool().unwrap_or(false),
    })
}

fn idents_from(v: &Value) -> Result<Vec<Ident>, JsonShapeError> {
    let names = arr_field(v, "arguments")?;
    let spans = arr_field(v, "argumentSpans")?;
    names
        .iter()
        .zip(spans)
        .map(|(n, s)| {
            Ok(Ident {
                name: n.as_str().unwrap_or_default().into(),
                span: span_from(s)?,
            })
        })
        .collect()
}

fn named(v: &Value, name: &str, span: &str) -> Result<Ident, JsonShapeError> {
    Ok(Ident {
        name: str_field(v, name)?.into(),
        span: span_from(field(v, span)?)?,
    })
}

/// Rebuilds the trees that `policy_json` printed, one per source path, in
/// the order the paths first appear. Bodies and bundles of one file that
/// were interleaved come back ordered by their position in the file.
pub fn from_json(v: &Value) -> Result<Vec<PolicyFile>, JsonShapeError> {
    let mut files: Vec<PolicyFile> = Vec::new();
    let mut push = |path: String, block: Block| match files.iter_mut().find(|f| f.path == path) {
        Some(f) => f.blocks.push(block),
        None => files.push(PolicyFile {
            path,
            blocks: vec![block],
        }),
    };
    for b in arr_field(v, "bodies")? {
        let mut attributes = Vec::new();
        for c in arr_field(b, "contexts")? {
            let guard = guard_from(c)?;
            for a in arr_field(c, "attributes")? {
                attributes.push(BodyAttribute {
                    guard: guard.clone(),
                    attr: attr_from(a)?,
                });
            }
        }
        let body = Body {
            kind: if str_field(b, "blockKind")? == "promise" {
                BodyKind::Promise
            } else {
                BodyKind::Body
            },
            namespace: str_field(b, "namespace")?,
            body_type: named(b, "bodyType", "bodyTypeSpan")?,
            name: named(b, "name", "nameSpan")?,
            params: idents_from(b)?,
            attributes,
            span: span_from(field(b, "span")?)?,
        };
        push(str_field(b, "sourcePath")?, Block::Body(body));
    }
    for b in arr_field(v, "bundles")? {
        let mut sections = Vec::new();
        for t in arr_field(b, "promiseTypes")? {
            let mut promises = Vec::new();
            for c in arr_field(t, "contexts")? {
                let guard = guard_from(c)?;
                for p in arr_field(c, "promises")? {
                    promises.push(Promise {
                        guard: guard.clone(),
                        promiser: StringLit {
                            value: str_field(p, "promiser")?.into(),
                            quote: quote_from(&str_field(p, "promiserQuote")?),
                            span: span_from(field(p, "promiserSpan")?)?,
                        },
                        promisee: p.get("promisee").map(rval_from).transpose()?.map(Box::new),
                        attributes: arr_field(p, "attributes")?
                            .iter()
                            .map(attr_from)
                            .collect::<Result<_, _>>()?,
                        span: span_from(field(p, "span")?)?,
                    });
                }
            }
            sections.push(Section {
                promise_type: named(t, "name", "nameSpan")?,
                promises,
                span: span_from(field(t, "span")?)?,
            });
        }
        let bundle = Bundle {
            namespace: str_field(b, "namespace")?,
            bundle_type: named(b, "bundleType", "bundleTypeSpan")?,
            name: named(b, "name", "nameSpan")?,
            params: idents_from(b)?,
            sections,
            span: span_from(field(b, "span")?)?,
        };
        push(str_field(b, "sourcePath")?, Block::Bundle(bundle));
    }
    for f in &mut files {
        f.blocks.sort_by_key(|b| b.span().start);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parse;

    #[test]
    fn round_trip() {
        let text = "body common control { linux:: inputs => { \"a.cf\", @(x) }; }\n\
                    bundle agent main(p) {\n vars:\n  any::\n  \"v\" -> { \"me\" } slist => { 'a', `b`, sym, f(1, $(y), g(\"h\")) }, comment => \"c\";\n reports:\n  \"$(v)\";\n}\n\
                    promise agent git { path => \"/x\"; }\n";
        let parsed = parse("p.cf", text);
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        let src = SourceFile::new("p.cf", text);
        let v = policy_json([(&parsed.file, &src)]);
        let back = from_json(&v).unwrap();
        assert_eq!(back, vec![parsed.file]);
    }
}
