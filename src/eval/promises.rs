//! Evaluating the promise types that only change the evaluation state:
//! `vars` and `classes`. Pre-evaluation and the agent run share these.

use super::classes::{ClassInfo, canonify_class};
use super::context::EvalContext;
use super::rval::{Evaluated, iteration_texts};
use super::value::{DataType, Origin, Value};
use super::vars::{PutResult, VarPolicy, Variable};
use crate::functions::FnError;
use crate::load::LoadedFile;
use crate::syntax::ast::{Promise, Rval};
use std::path::Path;

/// What became of one promise (all its iterations together).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromiseResult {
    /// Something was defined or changed.
    pub changed: bool,
    /// Some iteration is waiting for a variable or function argument.
    pub deferred: bool,
    /// Some iteration failed.
    pub failed: bool,
}

impl PromiseResult {
    fn merge(&mut self, o: PromiseResult) {
        self.changed |= o.changed;
        self.deferred |= o.deferred;
        self.failed |= o.failed;
    }
}

/// A problem met while evaluating, reported at the end or at once.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalMessage {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl EvalContext {
    /// Sets the `this.*` variables for a promise.
    pub fn enter_promise(&mut self, file: &LoadedFile, promise: &Promise) {
        let path = Path::new(&file.source.path);
        let line = file.source.line_of(promise.promiser.span.start);
        let dir = path
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let (ns, bundle) = self
            .frame()
            .map(|f| (f.ns.clone(), f.bundle.clone()))
            .unwrap_or_default();
        self.set_this("promise_filename", Value::str(file.source.path.clone()));
        self.set_this("promise_dirname", Value::str(dir));
        self.set_this("promise_linenumber", Value::str(line.to_string()));
        self.set_this("bundle", Value::str(bundle));
        self.set_this("namespace", Value::str(ns));
        if let Some(h) = promise.attribute("handle")
            && let Rval::String(s) = &h.value
        {
            let handle = self.expand(&s.value).text;
            self.set_this("handle", Value::str(handle));
        } else if let Some(f) = self.frame_mut() {
            f.this.remove("handle");
        }
    }

    /// Whether a promise's guard and its `if`/`ifvarclass`/`unless` allow it
    /// in the current iteration. `None` when a condition cannot be decided yet.
    pub fn promise_condition(&mut self, promise: &Promise) -> Option<bool> {
        let guard = if promise.guard.quoted {
            let e = self.expand(&promise.guard.expr);
            if e.unresolved {
                return None;
            }
            e.text
        } else {
            promise.guard.expr.clone()
        };
        if !self.class_text_true(&guard)? {
            return Some(false);
        }
        for attr in &promise.attributes {
            let negate = match attr.name.name.as_str() {
                "if" | "ifvarclass" => false,
                "unless" => true,
                _ => continue,
            };
            let truth = match self.eval_rval(&attr.value) {
                Ok(Evaluated {
                    value: Value::Scalar(s),
                    unresolved: false,
                }) => self.class_text_true(&s)?,
                Ok(Evaluated {
                    value: Value::List(l),
                    unresolved: false,
                }) => {
                    let mut all = true;
                    for s in l {
                        all &= self.class_text_true(&s)?;
                    }
                    all
                }
                // `if` with an unresolved expression blocks the promise;
                // `unless` waits for the last pass and then does not block
                // it (cf-agent runs such a promise in its third pass).
                Ok(_) | Err(FnError::Defer) => {
                    if negate && self.last_pass {
                        continue;
                    }
                    return None;
                }
                Err(FnError::Failed(_)) => false,
            };
            if truth == negate {
                return Some(false);
            }
        }
        Some(true)
    }

    fn class_text_true(&mut self, expr: &str) -> Option<bool> {
        let t = expr.trim();
        if t.is_empty() {
            return Some(false);
        }
        Some(self.eval_class_expr(t).unwrap_or(false))
    }

    /// A promise's `meta` tags (after `source=promise`) and `comment`, as
    /// the variables and classes it defines carry them.
    fn promise_meta(&mut self, promise: &Promise) -> (Vec<String>, Option<String>) {
        let mut tags = vec!["source=promise".to_string()];
        if let Some(meta) = promise.attribute("meta")
            && let Ok(e) = self.eval_rval(&meta.value)
        {
            match e.value {
                Value::List(l) => tags.extend(l),
                Value::Scalar(s) => tags.push(s),
                Value::Data(_) => {}
            }
        }
        let comment = promise
            .attribute("comment")
            .and_then(|a| self.eval_rval(&a.value).ok())
            .and_then(|e| e.value.as_scalar().map(str::to_string));
        (tags, comment)
    }

    /// The texts whose references decide how a promise iterates.
    pub(crate) fn promise_texts<'a>(promise: &'a Promise, skip: &[&str]) -> Vec<&'a str> {
        let mut texts = vec![promise.promiser.value.as_str()];
        for a in &promise.attributes {
            if !skip.contains(&a.name.name.as_str()) {
                iteration_texts(&a.value, &mut texts);
            }
        }
        // A quoted class guard naming a list iterates too ("$(l)":: holds
        // for the elements that are defined classes).
        if promise.guard.quoted {
            texts.push(promise.guard.expr.as_str());
        }
        texts
    }

    /// Evaluates one `vars` promise in the current frame.
    pub fn eval_vars_promise(
        &mut self,
        file: &LoadedFile,
        promise: &Promise,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        self.enter_promise(file, promise);
        let line = file.source.line_of(promise.promiser.span.start);
        let origin = self.origin_here(&file.source.path, line);
        let texts = Self::promise_texts(promise, &["meta", "comment"]);
        let mut result = PromiseResult::default();
        let mut messages = Vec::new();
        self.for_each_promise_iteration(promise, &texts, &mut |ctx| {
            let (r, m) = ctx.eval_vars_iteration(promise, &origin, &file.source.path, line);
            result.merge(r);
            messages.extend(m);
        });
        (result, messages)
    }

    fn eval_vars_iteration(
        &mut self,
        promise: &Promise,
        origin: &Origin,
        path: &str,
        line: usize,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        let mut res = PromiseResult::default();
        let msg = |m: String| EvalMessage {
            file: path.to_string(),
            line,
            message: m,
        };
        // `this.promiser` is the expanded name, which conditions may use
        // (the MPF's `unless => isvariable($(this.promiser))`).
        let name = self.expand(&promise.promiser.value);
        if !name.unresolved {
            self.set_this("promiser", Value::str(name.text.clone()));
        }
        match self.promise_condition(promise) {
            Some(true) => {}
            Some(false) => return (res, vec![]),
            None => {
                res.deferred = true;
                return (res, vec![]);
            }
        }
        if name.unresolved {
            res.deferred = true;
            return (res, vec![]);
        }
        let Some((dtype, attr)) = promise
            .attributes
            .iter()
            .find_map(|a| DataType::from_attribute(&a.name.name).map(|t| (t, a)))
        else {
            // A vars promise without a value (e.g. only `policy`) defines nothing.
            return (res, vec![]);
        };
        let evaluated = match self.eval_rval(&attr.value) {
            Ok(e) => e,
            Err(FnError::Defer) => {
                res.deferred = true;
                return (res, vec![]);
            }
            Err(FnError::Failed(m)) => {
                res.failed = true;
                return (res, vec![msg(m)]);
            }
        };
        let policy = match promise
            .attribute("policy")
            .map(|a| self.eval_rval(&a.value))
        {
            Some(Ok(Evaluated {
                value: Value::Scalar(p),
                ..
            })) => match p.as_str() {
                "constant" => VarPolicy::Constant,
                "ifdefined" => VarPolicy::IfDefined,
                _ => VarPolicy::Free,
            },
            _ => VarPolicy::Free,
        };
        let mut evaluated = evaluated;
        if evaluated.unresolved {
            res.deferred = true;
            // `ifdefined` drops the list references (`@(x)`) that name no
            // variable; everything else stays as written, as without it.
            if policy == VarPolicy::IfDefined
                && let Value::List(items) = &mut evaluated.value
            {
                items.retain(|i| !is_naked_list_ref(i));
            }
        }
        let value = match convert(dtype, evaluated.value) {
            Ok(v) => v,
            Err(m) => {
                if evaluated.unresolved {
                    return (res, vec![]);
                }
                res.failed = true;
                return (res, vec![msg(format!("variable '{}': {m}", name.text))]);
            }
        };
        let (tags, comment) = self.promise_meta(promise);
        let var = Variable {
            value,
            dtype,
            tags,
            comment,
            origin: origin.clone(),
            policy,
        };
        let (ns, scope) = self
            .frame()
            .map(|f| (f.ns.clone(), f.bundle.clone()))
            .unwrap_or_else(|| ("default".into(), "".into()));
        match self.vars.put(&ns, &scope, &name.text, var) {
            PutResult::New | PutResult::Changed => res.changed = true,
            PutResult::Unchanged => {}
            PutResult::Refused => {
                return (
                    res,
                    vec![msg(format!(
                        "variable '{}' is constant and cannot be redefined",
                        name.text
                    ))],
                );
            }
        }
        (res, vec![])
    }

    /// Evaluates one `classes` promise. `common` selects the default scope:
    /// classes of common bundles are global, those of agent bundles local.
    pub fn eval_classes_promise(
        &mut self,
        file: &LoadedFile,
        promise: &Promise,
        common: bool,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        self.enter_promise(file, promise);
        let line = file.source.line_of(promise.promiser.span.start);
        let origin = self.origin_here(&file.source.path, line);
        let texts = Self::promise_texts(promise, &["meta", "comment"]);
        let mut result = PromiseResult::default();
        let mut messages = Vec::new();
        self.for_each_promise_iteration(promise, &texts, &mut |ctx| {
            let (r, m) =
                ctx.eval_classes_iteration(promise, common, &origin, &file.source.path, line);
            result.merge(r);
            messages.extend(m);
        });
        (result, messages)
    }

    fn eval_classes_iteration(
        &mut self,
        promise: &Promise,
        common: bool,
        origin: &Origin,
        path: &str,
        line: usize,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        let mut res = PromiseResult::default();
        let name = self.expand(&promise.promiser.value);
        if !name.unresolved {
            self.set_this("promiser", Value::str(name.text.clone()));
        }
        match self.promise_condition(promise) {
            Some(true) => {}
            Some(false) => return (res, vec![]),
            None => {
                res.deferred = true;
                return (res, vec![]);
            }
        }
        if name.unresolved {
            res.deferred = true;
            return (res, vec![]);
        }
        let name = canonify_class(&name.text);
        let truth = match self.class_promise_truth(promise) {
            Ok(Some(t)) => t,
            Ok(None) => {
                res.deferred = true;
                return (res, vec![]);
            }
            Err(m) => {
                res.failed = true;
                return (
                    res,
                    vec![EvalMessage {
                        file: path.to_string(),
                        line,
                        message: format!("class '{name}': {m}"),
                    }],
                );
            }
        };
        if !truth {
            return (res, vec![]);
        }
        let (tags, comment) = self.promise_meta(promise);
        let scope = promise
            .attribute("scope")
            .and_then(|a| self.eval_rval(&a.value).ok())
            .and_then(|e| e.value.as_scalar().map(str::to_string));
        let local = match scope.as_deref() {
            Some("bundle") => true,
            Some("namespace") => false,
            _ => !common,
        };
        let persistence = promise
            .attribute("persistence")
            .and_then(|a| self.eval_rval(&a.value).ok())
            .and_then(|e| e.value.as_scalar().and_then(|v| parse_int(v).ok()))
            .filter(|&m| m > 0);
        let info = ClassInfo {
            tags,
            comment,
            origin: origin.clone(),
            hard: false,
        };
        res.changed = self.define_class(&name, local, info);
        if let Some(minutes) = persistence {
            self.persist_requests.push((name, minutes));
        }
        (res, vec![])
    }

    /// The truth of a classes promise's value attributes. `Ok(None)` when it
    /// cannot be decided yet.
    fn class_promise_truth(&mut self, promise: &Promise) -> Result<Option<bool>, String> {
        for attr in &promise.attributes {
            let kind = attr.name.name.as_str();
            if !matches!(
                kind,
                "expression" | "and" | "or" | "xor" | "not" | "dist" | "select_class"
            ) {
                continue;
            }
            let e = match self.eval_rval(&attr.value) {
                Ok(e) if e.unresolved => return Ok(None),
                Ok(e) => e,
                Err(FnError::Defer) => return Ok(None),
                Err(FnError::Failed(m)) => return Err(m),
            };
            let items: Vec<String> = match e.value {
                Value::Scalar(s) => vec![s],
                Value::List(l) => l,
                Value::Data(_) => return Err(format!("'{kind}' cannot take a data container")),
            };
            let mut truths = Vec::with_capacity(items.len());
            for i in &items {
                truths.push(
                    self.eval_class_expr(i.trim())
                        .map_err(|err| format!("invalid class expression '{i}': {err}"))?,
                );
            }
            return Ok(Some(match kind {
                "expression" | "and" => truths.iter().all(|&t| t),
                "or" => truths.iter().any(|&t| t),
                "xor" => truths.iter().filter(|&&t| t).count() % 2 == 1,
                "not" => !truths.first().copied().unwrap_or(false),
                // Random distributions define a class; which one is chosen
                // is the job of the agent run, not of pre-evaluation.
                _ => return Ok(None),
            }));
        }
        // A classes promise without a value attribute defines the class.
        Ok(Some(true))
    }
}

/// Converts an evaluated value to the declared type, as cf-agent stores it.
pub fn convert(dtype: DataType, v: Value) -> Result<Value, String> {
    match (dtype, v) {
        (DataType::String, Value::Scalar(s)) => Ok(Value::Scalar(s)),
        (DataType::Int, Value::Scalar(s)) => parse_int(&s).map(|i| Value::Scalar(i.to_string())),
        (DataType::Real, Value::Scalar(s)) => {
            parse_real(&s).map(|r| Value::Scalar(format!("{r:.6}")))
        }
        (DataType::Slist, Value::List(l)) => Ok(Value::List(l)),
        (DataType::Ilist, Value::List(l)) => l
            .iter()
            .map(|s| {
                if s.contains("$(") {
                    Ok(s.clone())
                } else {
                    parse_int(s).map(|i| i.to_string())
                }
            })
            .collect::<Result<_, _>>()
            .map(Value::List),
        (DataType::Rlist, Value::List(l)) => l
            .iter()
            .map(|s| {
                // cf-agent keeps the text of each real in a list.
                if s.contains("$(") {
                    Ok(s.clone())
                } else {
                    parse_real(s).map(|_| s.clone())
                }
            })
            .collect::<Result<_, _>>()
            .map(Value::List),
        (t, Value::Scalar(s)) if t.is_list() => Ok(Value::List(vec![s])),
        (DataType::Data, Value::Data(mut d)) => {
            // Stored containers hold numbers as cf-agent stores them.
            if crate::functions::json::needs_normalizing(&d) {
                crate::functions::json::normalize(std::sync::Arc::make_mut(&mut d));
            }
            Ok(Value::Data(d))
        }
        (DataType::Data, Value::List(l)) => Ok(Value::data(serde_json::Value::Array(
            l.into_iter().map(serde_json::Value::String).collect(),
        ))),
        (DataType::Data, Value::Scalar(s)) => crate::functions::json::parse(&s)
            .map(|mut j| {
                crate::functions::json::normalize(&mut j);
                Value::data(j)
            })
            .map_err(|e| format!("'{s}' is not valid JSON: {e}")),
        (t, v) => Err(format!(
            "a {} value cannot be stored as {}",
            v.natural_type().as_str(),
            t.as_str()
        )),
    }
}

/// Integers as CFEngine reads them: optional sign, digits, and an optional
/// unit suffix (k, m, g are powers of 1000; K, M, G powers of 1024), or
/// `inf`.
pub fn parse_int(s: &str) -> Result<i64, String> {
    let t = s.trim();
    if t == "inf" {
        return Ok(999_999_999);
    }
    if t == "-inf" {
        return Ok(-999_999_999);
    }
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1_000),
        Some('m') => (&t[..t.len() - 1], 1_000_000),
        Some('g') => (&t[..t.len() - 1], 1_000_000_000),
        Some('K') => (&t[..t.len() - 1], 1_024),
        Some('M') => (&t[..t.len() - 1], 1_048_576),
        Some('G') => (&t[..t.len() - 1], 1_073_741_824),
        _ => (t, 1),
    };
    num.parse::<i64>()
        .map(|n| n.saturating_mul(mult))
        .map_err(|_| format!("'{s}' is not an integer"))
}

pub fn parse_real(s: &str) -> Result<f64, String> {
    let t = s.trim();
    t.parse::<f64>()
        .ok()
        .or_else(|| parse_int(t).ok().map(|i| i as f64))
        .ok_or_else(|| format!("'{s}' is not a real number"))
}

/// Whether a list item is a whole `@(name)` reference left unexpanded.
fn is_naked_list_ref(item: &str) -> bool {
    super::refs::next_ref(item, 0)
        .is_some_and(|r| r.list_sigil && r.start == 0 && r.end == item.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_like_cfengine() {
        assert_eq!(parse_int("1k"), Ok(1000));
        assert_eq!(parse_int("2K"), Ok(2048));
        assert_eq!(parse_int("-5"), Ok(-5));
        assert!(parse_int("x").is_err());
        assert_eq!(
            convert(DataType::Real, Value::str("1.50")),
            Ok(Value::str("1.500000"))
        );
    }

    #[test]
    fn unresolved_unless_waits_for_the_last_pass() {
        let src = r#"bundle agent x { reports: "u" unless => "$(nope)"; "i" if => "$(nope)"; }"#;
        let p = crate::syntax::parse("t.cf", src);
        let b = p.file.bundles().next().unwrap().clone();
        let (unless, iff) = (&b.sections[0].promises[0], &b.sections[0].promises[1]);
        let mut c = EvalContext::default();
        c.push_frame(super::super::Frame::new("default", "x", "agent"));
        assert_eq!(c.promise_condition(unless), None);
        assert_eq!(c.promise_condition(iff), None);
        c.last_pass = true;
        assert_eq!(c.promise_condition(unless), Some(true));
        assert_eq!(c.promise_condition(iff), None);
    }
}
