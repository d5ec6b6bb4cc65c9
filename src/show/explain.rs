//! `--explain NAME`: how a property, variable or class got its value —
//! every layer that defined it, in order, with file and key (or policy
//! file:line), what each one overrode, and the final value. It reads the
//! provenance the stores keep anyway (each variable's history of replaced
//! definitions, each class's origin, each property's linearization), so it
//! costs nothing at run time.

use crate::augments::properties::Properties;
use crate::eval::EvalContext;
use crate::eval::vars::{VarPolicy, Variable};
use crate::values::canon::{canonify_class, class_key};
use crate::values::refs::VarRef;
use crate::values::value::{AugmentsLayer, Origin, Value};
use std::fmt::Write as _;

/// Everything `NAME` can mean (a property, a variable, a class), each
/// explained; `None` when it names nothing known.
pub fn explain(ctx: &EvalContext, properties: &Properties, name: &str) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(p) = properties.explain(name) {
        parts.push(p);
    }
    if parts.is_empty()
        && let Some(v) = explain_variable(ctx, name)
    {
        parts.push(v);
    }
    if let Some(c) = explain_class(ctx, name) {
        parts.push(c);
    }
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// Where a binding came from, in words.
pub fn describe_origin(o: &Origin) -> String {
    match o {
        Origin::Agent => "discovered by the agent".to_string(),
        Origin::CommandLine => "given on the command line (-D)".to_string(),
        Origin::Promise { file, line } => format!("policy promise at {file}:{line}"),
        Origin::Augments { layer, file, key } => {
            let what = match layer {
                AugmentsLayer::HostSpecific => "host-specific data",
                AugmentsLayer::Def => "augments file",
                AugmentsLayer::Included => "included augments file",
            };
            format!("{what} {file}, key \"{key}\"")
        }
        Origin::Persistent => "the persistent class store (an earlier run)".to_string(),
    }
}

fn render(v: &Value) -> String {
    match v {
        Value::Scalar(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::List(l) => {
            let items: Vec<String> = l
                .iter()
                .map(|s| serde_json::to_string(s).unwrap_or_default())
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Data(d) => serde_json::to_string(d.as_ref()).unwrap_or_default(),
    }
}

fn policy_note(v: &Variable) -> &'static str {
    match v.policy {
        VarPolicy::Free => "",
        VarPolicy::Constant => " (policy => \"constant\")",
        VarPolicy::IfDefined => " (policy => \"ifdefined\")",
    }
}

fn explain_variable(ctx: &EvalContext, name: &str) -> Option<String> {
    let r = VarRef::parse(name);
    let scope = r.scope?;
    let ns = r.ns.unwrap_or("default");
    let current = ctx.vars.get(ns, scope, r.name)?;
    let history = ctx.vars.history(ns, scope, r.name);
    let mut times: Vec<usize> = Vec::new();
    let mut out = format!(
        "variable {ns}:{scope}.{} ({}), every definition in the order it took effect:\n",
        r.name,
        current.dtype.as_str()
    );
    let all: Vec<&Variable> = history
        .iter()
        .map(|o| &o.variable)
        .chain(std::iter::once(current))
        .collect();
    // Pre-evaluation and the passes evaluate a bundle several times, so
    // two promises that both set a variable alternate in the history. Each
    // distinct definition is listed once, where it last took effect.
    let mut defs: Vec<(&Variable, usize)> = Vec::new();
    for v in all {
        match defs
            .iter()
            .position(|(d, _)| d.origin == v.origin && d.value == v.value)
        {
            Some(i) => {
                let (_, n) = defs.remove(i);
                defs.push((v, n + 1));
            }
            None => defs.push((v, 1)),
        }
    }
    let defs: Vec<&Variable> = defs
        .into_iter()
        .map(|(v, n)| {
            times.push(n);
            v
        })
        .collect();
    for (i, v) in defs.iter().enumerate() {
        let _ = write!(
            out,
            "  {}. {}{}\n       value {}",
            i + 1,
            describe_origin(&v.origin),
            policy_note(v),
            render(&v.value)
        );
        if times[i] > 1 {
            let _ = write!(out, " (set {} times over the passes)", times[i]);
        }
        if i > 0 {
            let prev = defs[i - 1];
            let why = match (&prev.origin, &v.origin) {
                (Origin::Augments { .. }, Origin::Promise { .. }) => {
                    "the policy wins over augments"
                }
                (Origin::Promise { .. }, Origin::Promise { .. }) => {
                    "a later promise redefines it (policy => \"free\", the default)"
                }
                (Origin::Augments { .. }, Origin::Augments { .. }) => {
                    "a later augments layer replaces it"
                }
                _ => "a later definition replaces it",
            };
            let _ = write!(out, "   overrides {} ({why})", i);
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "  final value: {}   from {}",
        render(&current.value),
        describe_origin(&current.origin)
    );
    if !current.tags.is_empty() {
        let _ = writeln!(out, "  tags: {}", current.tags.join(","));
    }
    Some(out)
}

fn explain_class(ctx: &EvalContext, name: &str) -> Option<String> {
    if name.contains('.') && !name.contains(':') {
        return None;
    }
    let canon = canonify_class(name);
    let key = match canon.split_once(':') {
        Some((ns, n)) => class_key(ns, n),
        None => canon.clone(),
    };
    let info = ctx.classes.get(&key)?;
    let mut out = format!(
        "class {key}: defined, {}{}\n",
        if info.hard { "a hard class " } else { "" },
        describe_origin(&info.origin)
    );
    if !info.tags.is_empty() {
        let _ = writeln!(out, "  tags: {}", info.tags.join(","));
    }
    if let Some(c) = &info.comment {
        let _ = writeln!(out, "  comment: {c}");
    }
    out.push_str("  (a class keeps its first definition; later ones change nothing)\n");
    Some(out)
}
