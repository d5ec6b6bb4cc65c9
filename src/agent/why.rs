//! What `--why` needs: for each promise the run reached, per iteration,
//! whether it ran (and how it ended, with what it logged) or why it was
//! skipped — which part of its class guard was false, which `if`/`unless`
//! decided, how many minutes of its lock were left, which variables did
//! not resolve, which `depends_on` handles were not met. The run keeps
//! this in [`WhyLog`]; the pipeline saves it in WORKDIR/state/why.json
//! after every run (dry runs included), and `agent --why` reads it back.

use crate::eval::context::{EvalContext, scalar_text};
use crate::eval::rval::iteration_texts;
use crate::syntax::ast::Promise;
use crate::syntax::classexpr::ClassExpr;
use crate::values::refs::next_ref;
use crate::values::value::Value;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The file the last run's log is saved in, under the state directory.
pub const WHY_FILE: &str = "why.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    Ran {
        outcome: String,
        /// What the promise logged while acting.
        changes: Vec<String>,
    },
    Skipped {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    /// The promiser as expanded for this iteration (as written when it
    /// could not be expanded).
    pub promiser: String,
    #[serde(flatten)]
    pub status: Status,
}

/// One promise as written, and what became of each of its iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromiseRecord {
    pub file: String,
    pub line: usize,
    pub namespace: String,
    pub bundle: String,
    pub promise_type: String,
    /// The promiser as written.
    pub promiser: String,
    pub handle: Option<String>,
    pub iterations: Vec<Iteration>,
}

/// The whole run, as saved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WhyLog {
    pub time: i64,
    pub policy: String,
    pub dry_run: bool,
    pub promises: Vec<PromiseRecord>,
    #[serde(skip)]
    index: IndexMap<(String, usize), usize>,
    /// Where each (promise, expanded promiser) is in its record's
    /// iterations: a promise may iterate thousands of times.
    #[serde(skip)]
    iteration_index: HashMap<(usize, String), usize>,
}

/// Which promise an iteration belongs to.
pub struct Site<'a> {
    pub file: &'a str,
    pub line: usize,
    pub namespace: &'a str,
    pub bundle: &'a str,
    pub promise_type: &'a str,
    pub promise: &'a Promise,
}

impl WhyLog {
    /// Notes what became of one iteration. A later status replaces an
    /// earlier one (a promise deferred in one pass may run in the next),
    /// except that once an iteration ran, being passed over later (it is
    /// done for this run) does not hide that it ran.
    pub fn record(&mut self, site: &Site, handle: Option<&str>, promiser: &str, status: Status) {
        let key = (site.file.to_string(), site.line);
        let idx = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                self.promises.push(PromiseRecord {
                    file: site.file.to_string(),
                    line: site.line,
                    namespace: site.namespace.to_string(),
                    bundle: site.bundle.to_string(),
                    promise_type: site.promise_type.to_string(),
                    promiser: site.promise.promiser.value.clone(),
                    handle: None,
                    iterations: Vec::new(),
                });
                self.index.insert(key, self.promises.len() - 1);
                self.promises.len() - 1
            }
        };
        let rec = &mut self.promises[idx];
        if let Some(h) = handle {
            rec.handle = Some(h.to_string());
        }
        match self.iteration_index.get(&(idx, promiser.to_string())) {
            Some(&i) => {
                let it = &mut rec.iterations[i];
                if matches!(status, Status::Ran { .. }) || !matches!(it.status, Status::Ran { .. })
                {
                    it.status = status;
                }
            }
            None => {
                self.iteration_index
                    .insert((idx, promiser.to_string()), rec.iterations.len());
                rec.iterations.push(Iteration {
                    promiser: promiser.to_string(),
                    status,
                });
            }
        }
    }

    /// The promises a query names: a handle, or FILE:LINE (FILE may be a
    /// path suffix; LINE may be any line of the promise, which is taken to
    /// be the last promise of that file starting at or before it).
    pub fn find(&self, query: &str) -> Vec<&PromiseRecord> {
        let by_handle: Vec<&PromiseRecord> = self
            .promises
            .iter()
            .filter(|p| p.handle.as_deref() == Some(query))
            .collect();
        if !by_handle.is_empty() {
            return by_handle;
        }
        let Some((file, line)) = query.rsplit_once(':') else {
            return Vec::new();
        };
        let Ok(line) = line.parse::<usize>() else {
            return Vec::new();
        };
        let same_file = |p: &&PromiseRecord| {
            p.file == file
                || p.file
                    .ends_with(&format!("/{}", file.trim_start_matches("./")))
        };
        let best = self
            .promises
            .iter()
            .filter(same_file)
            .filter(|p| p.line <= line)
            .map(|p| p.line)
            .max();
        self.promises
            .iter()
            .filter(same_file)
            .filter(|p| Some(p.line) == best)
            .collect()
    }
}

/// Why a promise's guard, `if`/`ifvarclass` or `unless` keeps it from
/// running in the current iteration, naming the part that decided.
pub fn condition_reason(ctx: &mut EvalContext, promise: &Promise) -> String {
    let guard = ctx.expand(&promise.guard.expr).text;
    if !holds(ctx, &guard) {
        return format!(
            "its class guard '{}::' is false: {}",
            guard.trim(),
            why_false(ctx, &guard)
        );
    }
    for attr in &promise.attributes {
        let negate = match attr.name.name.as_str() {
            "if" | "ifvarclass" => false,
            "unless" => true,
            _ => continue,
        };
        let texts: Vec<String> = match ctx.eval_rval(&attr.value) {
            Ok(e) => match e.value {
                Value::Scalar(s) => vec![s],
                Value::List(l) => l,
                Value::Data(_) => continue,
            },
            Err(_) => continue,
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
                return format!(
                    "{} => \"{}\" is {verdict}: {detail}",
                    attr.name.name,
                    t.trim()
                );
            }
        }
    }
    "its condition is false".to_string()
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
        texts.push(promise.guard.expr.as_str());
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

/// `--why`'s answer for the promises a query found.
pub fn render(log: &WhyLog, query: &str, found: &[&PromiseRecord]) -> String {
    let mut out = String::new();
    let run = if log.dry_run { "dry run" } else { "run" };
    for p in found {
        let handle = p
            .handle
            .as_ref()
            .map(|h| format!(", handle '{h}'"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{} promise '{}' in bundle {}:{} ({}:{}{handle}), in the last {run} of {}:\n",
            p.promise_type, p.promiser, p.namespace, p.bundle, p.file, p.line, log.policy
        ));
        for it in &p.iterations {
            match &it.status {
                Status::Ran { outcome, changes } => {
                    let verb = match outcome.as_str() {
                        "kept" => "ran; it was already as promised (kept)".to_string(),
                        "repaired" => "ran and repaired".to_string(),
                        "warned" => "ran; it would have changed something (warned: dry run or \
                             action_policy => \"warn\")"
                            .to_string(),
                        other => format!("ran and failed ({other})"),
                    };
                    out.push_str(&format!("  '{}': {verb}\n", it.promiser));
                    for c in changes {
                        out.push_str(&format!("      {c}\n"));
                    }
                }
                Status::Skipped { reason } => {
                    out.push_str(&format!("  '{}': skipped: {reason}\n", it.promiser));
                }
            }
        }
    }
    if found.is_empty() {
        out.push_str(&format!(
            "no promise matching '{query}' was reached in the last {run} of {} (its bundle did not \
             run, or the handle or FILE:LINE is not a promise's; vars, classes and meta promises \
             are not recorded)\n",
            log.policy
        ));
    }
    out
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
