//! Evaluating the promise types that only change the evaluation state:
//! `vars` and `classes`. Pre-evaluation and the agent run share these.

use super::bodies::{default_body, resolve_body};
use super::call::FnError;
use super::classes::ClassInfo;
use super::context::EvalContext;
use super::rval::{Evaluated, iteration_texts};
use super::this::Slot;
use super::vars::{PutResult, VarPolicy, Variable};
use crate::eval::expanded::define_outcome_classes;
use crate::load::{LoadedFile, PolicySet};
use crate::report::Outcome;
use crate::syntax::ast::{Promise, Rval};
use crate::values::canon::{canonify, canonify_class};
use crate::values::number::{convert, parse_int};
use crate::values::value::{DataType, Origin, Value};
use std::path::Path;
use std::sync::Arc;

/// What became of one promise (all its iterations together).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromiseResult {
    /// Something was defined or changed.
    pub changed: bool,
    /// Some iteration is waiting for a variable or function argument.
    pub deferred: bool,
    /// Some iteration failed.
    pub failed: bool,
    /// Some iteration stored its variable (new or not).
    pub stored: bool,
}

impl PromiseResult {
    fn merge(&mut self, o: PromiseResult) {
        self.changed |= o.changed;
        self.deferred |= o.deferred;
        self.failed |= o.failed;
        self.stored |= o.stored;
    }
}

/// A problem met while evaluating, reported at the end or at once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EvalMessage {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// Under -v, cf-agent's line for a promise its condition excludes: the
/// promiser and the constraint as written; held for the caller when it
/// holds them.
fn skipping(held: &mut Option<Vec<String>>, promise: &Promise, lval: &str, rval: &str) {
    if crate::report::log::verbose() {
        let line = format!(
            "Skipping promise '{}' because constraint '{lval} => {rval}' is not met",
            promise.promiser.value
        );
        match held {
            Some(h) => h.push(line),
            None => crate::debug!("{line}"),
        }
    }
}

/// A condition as cf-agent writes it in a skip line: an `ifvarclass` of a
/// promise under a quoted guard is the two joined, as cf-agent's parser
/// joins them (`(guard).(condition)`, or `and("guard",call(...))`).
fn condition_written(promise: &Promise, attr: &crate::syntax::ast::Attribute) -> String {
    let written = super::reasons::rval_written(&attr.value);
    if !promise.guard.quoted || attr.name.name != "ifvarclass" {
        return written;
    }
    let guard = &promise.guard.expr;
    match &attr.value {
        Rval::Call(_) => format!("and(\"{guard}\",{written})"),
        _ => format!("({guard}).({written})"),
    }
}

/// A quoted guard as cf-agent writes it in a skip line: joined with the
/// promise's `ifvarclass`, if it has one.
fn guard_written(promise: &Promise) -> String {
    match promise.attribute("ifvarclass") {
        Some(attr) => condition_written(promise, attr),
        None => promise.guard.expr.to_string(),
    }
}

/// Under -v, cf-agent's line for a promise waiting for a handle.
pub fn skipping_for_dependency(promiser: &str, handle: &str) {
    if crate::report::log::verbose() {
        crate::debug!(
            "Skipping promise '{promiser}', as promise dependency '{handle}' has not yet been kept"
        );
    }
}

/// A promiser as expanded for one iteration, borrowed when it is as written.
struct ExpandedName<'s> {
    text: &'s str,
    unresolved: bool,
}

/// Where a vars promise stores its variable: namespace, scope, name.
pub(super) type VarTarget<'n> = (Arc<str>, Arc<str>, &'n str);

impl EvalContext {
    /// Sets the `this.*` variables for a promise.
    pub fn enter_promise(&mut self, file: &LoadedFile, promise: &Promise) {
        // cf-agent's line of a promise is that of its promiser's end (a
        // promiser of several lines is at its last).
        let span = promise.promiser.span;
        let line = file
            .source
            .line_of(span.end.saturating_sub(1).max(span.start));
        if !matches!(&self.promise_file, Some(f) if f.0 == file.source.path) {
            self.promise_file = None;
        }
        let (path, dir, _) = self.promise_file.get_or_insert_with(|| {
            let path = Path::new(&file.source.path);
            let dir = crate::load::dirname_text(path).display().to_string();
            let base = path.file_name().map(|n| n.to_string_lossy());
            (
                file.source.path.clone(),
                dir,
                canonify(&base.unwrap_or_default()),
            )
        });
        let Some(frame) = self.frames.last_mut() else {
            return;
        };
        // Most of these are what the previous promise had: each is written
        // over the old text in place, with no allocation when it is equal.
        let this = &mut frame.this;
        // Written once, for the line number and the handle.
        let line_text = Decimal::new(line);
        this.put_text(Slot::LineNumber, line_text.as_str());
        // The rest change only with the file: a frame's promises mostly
        // share one.
        if frame.this_fixed_for.as_deref() != Some(path.as_str()) {
            this.put_text(Slot::FileName, path);
            this.put_text(Slot::DirName, dir);
            this.put_text(Slot::Bundle, &frame.bundle);
            this.put_text(Slot::Namespace, &frame.ns);
            // cf-agent tells every promise who runs it (ncf names its scratch
            // files after this.promiser_pid).
            for (slot, id) in [Slot::Uid, Slot::Gid, Slot::Pid, Slot::Ppid]
                .into_iter()
                .zip(process_ids())
            {
                this.put_text(slot, id);
            }
            match &mut frame.this_fixed_for {
                Some(p) => {
                    p.clear();
                    p.push_str(path);
                }
                none => *none = Some(path.clone()),
            }
        }
        // this.handle is the handle canonified, as expanded before any
        // iteration, or cf-agent's id for a promise without one.
        match promise.attribute("handle").map(|h| &h.value) {
            Some(Rval::String(s)) => {
                let handle = canonify(&self.expand(&s.value).text);
                if let Some(frame) = self.frames.last_mut() {
                    frame.this.put_text(Slot::Handle, &handle);
                }
            }
            _ => {
                let base = self.promise_file.as_ref().map_or("", |f| f.2.as_str());
                if let Some(frame) = self.frames.last_mut() {
                    frame.this.put_with(Slot::Handle, |t| {
                        t.push_str("promise_");
                        t.push_str(base);
                        t.push('_');
                        t.push_str(line_text.as_str());
                    });
                }
            }
        }
    }

    /// Whether a promise's guard and its `if`/`ifvarclass`/`unless` allow it
    /// in the current iteration. `None` when a condition cannot be decided yet.
    pub fn promise_condition(&mut self, promise: &Promise) -> Option<bool> {
        self.false_condition = None;
        // A quoted guard is cf-agent's `ifvarclass`, and said as one.
        let guard = if promise.guard.quoted {
            let e = self.expand(&promise.guard.expr);
            if e.unresolved {
                skipping(
                    &mut self.held_skips,
                    promise,
                    "ifvarclass",
                    &guard_written(promise),
                );
                return None;
            }
            std::borrow::Cow::Owned(e.text)
        } else {
            std::borrow::Cow::Borrowed(&*promise.guard.expr)
        };
        if !self.class_text_true(&guard)? {
            if promise.guard.quoted {
                skipping(
                    &mut self.held_skips,
                    promise,
                    "ifvarclass",
                    &guard_written(promise),
                );
            }
            return Some(false);
        }
        for (index, attr) in promise.attributes.iter().enumerate() {
            let Some(negate) = condition_negates(&attr.name.name) else {
                continue;
            };
            let mut decided = None;
            let truth = match self.eval_rval(&attr.value) {
                Ok(Evaluated {
                    value: Value::Scalar(s),
                    unresolved: false,
                }) => {
                    let truth = self.class_text_true(&s)?;
                    decided = Some(Value::Scalar(s));
                    truth
                }
                Ok(Evaluated {
                    value: Value::List(l),
                    unresolved: false,
                }) => {
                    let mut all = true;
                    for s in &l {
                        all &= self.class_text_true(s)?;
                    }
                    decided = Some(Value::List(l));
                    all
                }
                // `if` with an unresolved expression blocks the promise;
                // `unless` waits for the last pass and then does not block
                // it (cf-agent runs such a promise in its third pass).
                Ok(_) | Err(FnError::Defer) => {
                    if negate && self.last_pass {
                        continue;
                    }
                    skipping(
                        &mut self.held_skips,
                        promise,
                        &attr.name.name,
                        &condition_written(promise, attr),
                    );
                    return None;
                }
                Err(FnError::Failed(_) | FnError::Quiet(_)) => false,
            };
            if truth == negate {
                // Why it is false is told from this value, not evaluated
                // again (see reasons::condition_reason).
                self.false_condition =
                    decided.map(|v| (promise as *const Promise as usize, index, v));
                skipping(
                    &mut self.held_skips,
                    promise,
                    &attr.name.name,
                    &condition_written(promise, attr),
                );
                return Some(false);
            }
        }
        Some(true)
    }

    /// Whether every handle a promise's `depends_on` names is done. A
    /// list that does not resolve yet is not.
    pub fn dependencies_done(&mut self, promise: &Promise) -> bool {
        let Some(attr) = promise.attribute("depends_on") else {
            return true;
        };
        let handles = match self.eval_rval(&attr.value) {
            Ok(Evaluated {
                value: Value::List(l),
                unresolved: false,
            }) => l,
            Ok(Evaluated {
                value: Value::Scalar(h),
                unresolved: false,
            }) => vec![h],
            _ => return false,
        };
        match handles.iter().find(|h| !self.done_handles.contains(*h)) {
            Some(missing) => {
                let promiser = self.expand_promiser(&promise.promiser.value).text;
                skipping_for_dependency(&promiser, missing);
                false
            }
            None => true,
        }
    }

    /// A promise's condition (`if`, `ifvarclass`, `unless`) as a gate:
    /// `None` to go on, else what the promise comes to now: nothing when
    /// the condition is false, deferred when it cannot be decided yet.
    pub(crate) fn condition_stops(&mut self, promise: &Promise) -> Option<PromiseResult> {
        match self.promise_condition(promise) {
            Some(true) => None,
            Some(false) => Some(PromiseResult::default()),
            None => Some(PromiseResult {
                deferred: true,
                ..PromiseResult::default()
            }),
        }
    }

    /// Under -v, while an edit bundle runs, cf-agent's banner of one of
    /// its variables or classes promises about to be evaluated.
    fn edit_banner(&mut self, promise: &Promise, ptype: &str, promiser: &str, iteration: usize) {
        let Some((stack, bundle_args)) = self.banner_stack.clone() else {
            return;
        };
        let this = |ctx: &EvalContext, name: &str| match ctx.frame().and_then(|f| f.this.get(name))
        {
            Some(Value::Scalar(s)) => s.clone(),
            _ => String::new(),
        };
        let id = this(self, "handle");
        let bundle = self.frame().map(|f| f.bundle.clone()).unwrap_or_default();
        let scalar = |ctx: &mut EvalContext, name: &str| {
            let attr = promise.attribute(name)?;
            match ctx.eval_rval(&attr.value) {
                Ok(Evaluated {
                    value: Value::Scalar(s),
                    ..
                }) => Some(s),
                _ => None,
            }
        };
        // cf-agent makes a quoted guard an `ifvarclass` under `any`.
        let quoted = promise
            .guard
            .quoted
            .then(|| self.expand(&promise.guard.expr).text);
        let condition = scalar(self, "if")
            .or_else(|| scalar(self, "ifvarclass"))
            .or(quoted.clone())
            .map(|c| ("if", c))
            .or_else(|| scalar(self, "unless").map(|c| ("unless", c)));
        let comment = scalar(self, "comment");
        let guard = if quoted.is_some() {
            "any"
        } else {
            promise.guard.expr.trim()
        };
        crate::report::banner::promise_begin(&crate::report::banner::Banner {
            id: &id,
            promise_type: ptype,
            promiser,
            bundle: &bundle,
            bundle_args: bundle_args.as_deref(),
            guard,
            condition,
            stack: &stack,
            iteration,
            comment: comment.as_deref(),
            pass: self.pass,
        });
    }

    /// Notes a promise's handle, if it has one, as done for `depends_on`.
    fn note_handle_done(&mut self, promise: &Promise) {
        if let Some(Rval::String(s)) = promise.attribute("handle").map(|h| &h.value) {
            let e = self.expand(&s.value);
            if !e.unresolved {
                self.done_handles.insert(e.text);
            }
        }
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
            let given = match e.value {
                Value::List(l) => l,
                Value::Scalar(s) => vec![s],
                Value::Data(_) => vec![],
            };
            // Tags are a set: a repeated tag is kept once.
            for t in given {
                if !tags.contains(&t) {
                    tags.push(t);
                }
            }
        }
        let comment = promise
            .attribute("comment")
            .and_then(|a| self.eval_rval(&a.value).ok())
            .and_then(|e| e.value.as_scalar().map(str::to_string));
        (tags, comment)
    }

    /// The texts whose references decide how a promise iterates.
    pub(crate) fn promise_texts<'a>(&self, promise: &'a Promise, skip: &[&str]) -> Vec<&'a str> {
        // Room for a typical promise's texts at once, not grown twice.
        let mut texts = Vec::with_capacity(8);
        texts.push(promise.promiser.value.as_str());
        for a in &promise.attributes {
            if !skip.contains(&a.name.name.as_str()) {
                iteration_texts(self.builtins(), &a.value, &mut texts);
            }
        }
        // A quoted class guard naming a list iterates too ("$(l)":: holds
        // for the elements that are defined classes).
        if promise.guard.quoted {
            texts.push(&*promise.guard.expr);
        }
        texts
    }

    /// Evaluates one `vars` promise in the current frame.
    /// Evaluates one `vars` promise in the current frame. With the policy
    /// at hand, a `classes` body on it defines its outcome classes.
    pub fn eval_vars_promise(
        &mut self,
        file: &LoadedFile,
        promise: &Promise,
        policy: Option<&PolicySet>,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        self.enter_promise(file, promise);
        let line = file.source.line_of(promise.promiser.span.start);
        let origin = self.origin_here(&file.source.path, line);
        let texts = self.promise_texts(promise, &["meta", "comment"]);
        let mut result = PromiseResult::default();
        let mut messages = Vec::new();
        let immediate = policy.is_some_and(|p| self.is_immediate(promise, p));
        let outer = std::mem::replace(&mut self.fn_cache_bypass, immediate);
        let mut iteration = 0;
        self.for_each_promise_iteration(promise, &texts, &mut |ctx| {
            iteration += 1;
            let (r, m) =
                ctx.eval_vars_iteration(promise, &origin, &file.source.path, line, iteration);
            if let (Some(policy), true) = (policy, r.stored) {
                // cf-agent audits a vars promise only when it got as far as
                // storing its variable, and calls that kept; a promise that
                // failed earlier defines no outcome class. A body that does
                // not resolve yet defines nothing now.
                let body = match promise.attribute("classes") {
                    Some(attr) => resolve_body(ctx, policy, "classes", &attr.value).ok(),
                    None => default_body(ctx, policy, "vars", "classes").and_then(Result::ok),
                };
                if let Some(body) = body {
                    define_outcome_classes(ctx, None, 0, &body, Outcome::Kept);
                }
            }
            result.merge(r);
            messages.extend(m);
        });
        self.fn_cache_bypass = outer;
        (result, messages)
    }

    /// Whether a promise's `action` body says `ifelapsed => "0"` (as the
    /// standard library's `immediate` does): cf-agent then calls its
    /// functions again instead of taking what it cached (ENT-7478,
    /// 01_vars/02_functions/execresult_action_immediate.cf).
    fn is_immediate(&mut self, promise: &Promise, policy: &PolicySet) -> bool {
        let Some(attr) = promise.attribute("action") else {
            return false;
        };
        resolve_body(self, policy, "action", &attr.value)
            .ok()
            .and_then(|b| b.scalar("ifelapsed").map(|v| v.trim() == "0"))
            .unwrap_or(false)
    }

    fn eval_vars_iteration(
        &mut self,
        promise: &Promise,
        origin: &Origin,
        path: &str,
        line: usize,
        iteration: usize,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        let mut res = PromiseResult::default();
        let msg = |m: String| EvalMessage {
            file: path.to_string(),
            line,
            message: m,
        };
        // `this.promiser` is the expanded name, which conditions may use
        // (the MPF's `unless => isvariable($(this.promiser))`).
        let (unresolved_name, name_text) = self.expand_promiser_borrowed(&promise.promiser.value);
        let name = ExpandedName {
            text: &name_text,
            unresolved: unresolved_name,
        };
        if !name.unresolved
            && let Some(frame) = self.frames.last_mut()
        {
            // Over the last promiser's text: no copy of the name a promise.
            frame.this.put_text(Slot::Promiser, name.text);
        }
        if let Some(stop) = self.condition_stops(promise) {
            return (stop, vec![]);
        }
        if !self.dependencies_done(promise) {
            res.deferred = true;
            return (res, vec![]);
        }
        self.edit_banner(promise, "vars", name.text, iteration);
        // cf-agent says it computes a variable whose name it cannot
        // resolve yet, then leaves it for a later pass.
        if self.announce_vars && crate::report::log::verbose() {
            crate::debug!("V:     Computing value of '{}'", name.text);
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
        let (ns, scope, var_name) = match self.vars_target(name.text) {
            Ok(t) => t,
            Err((m, refused_when_stored)) => {
                res.failed = true;
                // cf-agent refuses an injection only when it stores the
                // variable, so the promise counts as having got that far.
                res.stored = refused_when_stored;
                return (res, vec![msg(m)]);
            }
        };
        let evaluated = self.eval_rval(&attr.value);
        if evaluated.is_err()
            && let Some(m) = self.unmade_call_of_another_type(&attr.value, dtype)
        {
            self.fatal.get_or_insert_with(|| m.clone());
            res.failed = true;
            return (res, vec![msg(m)]);
        }
        let evaluated = match evaluated {
            Ok(e) => e,
            Err(FnError::Defer) => {
                res.deferred = true;
                return (res, vec![]);
            }
            Err(FnError::Failed(m)) => {
                res.failed = true;
                return (res, vec![msg(m)]);
            }
            Err(FnError::Quiet(m)) => {
                res.failed = true;
                crate::debug!("{path}:{line}: {m}");
                return (res, vec![]);
            }
        };
        let policy = self.vars_policy(promise);
        // A constant keeps a value that is complete; one that still waits
        // for references is completed, as cf-agent does.
        if policy == VarPolicy::Constant
            && let Some(old) = self.vars.get(&ns, &scope, var_name)
            && !value_has_references(&old.value)
        {
            return (res, vec![]);
        }
        let Evaluated {
            mut value,
            unresolved,
        } = evaluated;
        if refers_to_itself(&value, &ns, &scope, var_name) {
            res.failed = true;
            return (
                res,
                vec![msg(format!(
                    "variable '{}' refers to itself ({}), so its value cannot converge; it is not defined",
                    name.text,
                    super::context::scalar_text(&value)
                        .or_else(|| value.as_list().map(|l| l.join(", ")))
                        .unwrap_or_default()
                ))],
            );
        }
        // `ifdefined` drops the list items that are whole `@(...)`
        // references to lists that do not exist.
        if policy == VarPolicy::IfDefined
            && let Value::List(items) = &mut value
        {
            items.retain(|i| !is_naked_list_ref(i));
        }
        if unresolved {
            res.deferred = true;
        }
        if let Some(m) = self.indexed_data_error(name.text, dtype, (&*ns, &*scope, var_name)) {
            res.failed = true;
            return (res, vec![msg(m)]);
        }
        // A function giving one value to a list variable stops cf-agent
        // ("Attempted to give a scalar to a non-scalar type"), where a
        // literal would not have passed the parser
        // (01_vars/01_basic/fncall-invalid-type.x.cf).
        if matches!(attr.value, Rval::Call(_))
            && matches!(dtype, DataType::Slist | DataType::Ilist | DataType::Rlist)
            && !unresolved
            && let Value::Scalar(s) = &value
        {
            let m = format!(
                "in attribute '{}', a function gave the single value '{s}' where a list is needed",
                attr.name.name
            );
            self.fatal = Some(m.clone());
            res.failed = true;
            return (res, vec![msg(m)]);
        }
        // A literal data value that starts with `---` is YAML: cf-agent's
        // parser makes it `parseyaml(...)` (01_vars/04_containers/inline_yaml.cf).
        let value = match (&attr.value, value) {
            (Rval::String(lit), Value::Scalar(text))
                if dtype == DataType::Data
                    && lit.value.len() > 3
                    && lit.value.starts_with("---") =>
            {
                match self.inline_yaml(text) {
                    Ok(v) => v,
                    Err(m) => {
                        res.failed = true;
                        return (res, vec![msg(format!("variable '{}': {m}", name.text))]);
                    }
                }
            }
            (_, v) => v,
        };
        let value = match convert(dtype, value) {
            Ok(v) => v,
            Err(m) => {
                // cf-agent reads a real from the text as it stands, and says
                // it cannot while a reference in it is unresolved (an
                // integer it lets wait without a word).
                if unresolved && dtype == DataType::Real {
                    return (res, vec![msg(format!("variable '{}': {m}", name.text))]);
                }
                if unresolved {
                    return (res, vec![]);
                }
                res.failed = true;
                return (res, vec![msg(format!("variable '{}': {m}", name.text))]);
            }
        };
        let (tags, comment) = self.promise_meta(promise);
        if let Some(c) = &comment {
            crate::debug!("Added variable '{var_name}' with comment '{c}'");
        }
        if self.announce_vars && crate::report::log::debug() {
            let shown = match &value {
                Value::Scalar(s) => s.clone(),
                Value::List(l) => l.join(", "),
                Value::Data(j) => crate::values::json::write_compact(j),
            };
            crate::trace!("V: '{}' => '{shown}'", name.text);
        }
        let var = Variable {
            value,
            dtype,
            tags,
            comment,
            origin: origin.clone(),
            policy,
            call_items: None,
        };
        res.changed = self.store_variable((&*ns, &*scope, var_name), var, unresolved, (path, line));
        res.stored = true;
        self.note_handle_done(promise);
        // cf-agent tells a meta promise's outcome as it tells an acting
        // promise's (not a vars promise's).
        if self.announce_vars
            && crate::report::log::verbose()
            && self.frame().is_some_and(|f| f.bundle_type == "meta")
        {
            let short: String = name.text.chars().take(30).collect();
            let more = if name.text.chars().count() > 30 {
                "..."
            } else {
                ""
            };
            crate::debug!("A: Promise was KEPT");
            crate::debug!("P: END meta promise ({short}{more})");
        }
        (res, vec![])
    }

    /// Inline YAML data, read as the `parseyaml` function reads it.
    fn inline_yaml(&mut self, text: String) -> Result<Value, String> {
        let Some(spec) = (self.builtins().lookup)("parseyaml") else {
            return Err("inline YAML data is not supported yet".into());
        };
        match (spec.imp)(self, &[Value::Scalar(text)]) {
            Ok(v) => Ok(v),
            Err(FnError::Failed(m) | FnError::Quiet(m)) => Err(m),
            Err(FnError::Defer) => Err("inline YAML data did not resolve".into()),
        }
    }

    /// The `policy` of a vars promise (`free` unless it says otherwise).
    fn vars_policy(&mut self, promise: &Promise) -> VarPolicy {
        match promise
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
        }
    }

    /// Why a variable of type `dtype` cannot be stored under an indexed
    /// name: a data container is never an array entry, and an array entry
    /// whose name is a path inside a data container of the same name
    /// cannot be set.
    fn indexed_data_error(
        &self,
        shown: &str,
        dtype: DataType,
        (ns, scope, var_name): (&str, &str, &str),
    ) -> Option<String> {
        let i = crate::scan::memchr(b'[', var_name.as_bytes())?;
        if dtype == DataType::Data {
            return Some(format!(
                "a data container cannot be assigned to the indexed name '{shown}'; assign it to '{}'",
                &var_name[..i]
            ));
        }
        // An array entry whose name is a path inside a data container of
        // the same name cannot be set.
        if self
            .vars
            .get(ns, scope, &var_name[..i])
            .is_some_and(|v| v.dtype == DataType::Data)
            && self.lookup(&format!("{ns}:{scope}.{var_name}")).is_some()
        {
            return Some(format!(
                "'{shown}' cannot be set: '{}' is a data container",
                &var_name[..i]
            ));
        }
        None
    }

    /// Stores a vars promise's variable, noting it while it still waits
    /// for references; whether the store changed.
    fn store_variable(
        &mut self,
        (ns, scope, var_name): (&str, &str, &str),
        var: Variable,
        unresolved: bool,
        (path, line): (&str, usize),
    ) -> bool {
        let key = || format!("{ns}:{scope}.{var_name}");
        if unresolved {
            let shown = super::context::scalar_text(&var.value)
                .or_else(|| {
                    var.value
                        .as_list()
                        .map(|l| format!("{{ {} }}", l.join(", ")))
                })
                .unwrap_or_default();
            self.unresolved_vars
                .insert(key(), (path.to_string(), line, shown));
        } else if !self.unresolved_vars.is_empty() {
            // The key is made only when there may be something to forget.
            self.unresolved_vars.remove(&key());
        }
        matches!(
            self.vars.put(ns, scope, var_name, var),
            PutResult::New | PutResult::Changed
        )
    }

    /// Where a vars promise's expanded promiser puts its variable: the
    /// promiser is a variable reference, so `other.x` names the scope
    /// `other` (which must not be another bundle of the policy), and a
    /// namespace prefix or characters outside cf-agent's variable names
    /// make it illegal.
    /// The error says whether the name was refused only when storing (an
    /// injection into another bundle). The namespace and the frame's scope
    /// are shared with the frame and the name is borrowed: no copies for
    /// each vars promise.
    pub(super) fn vars_target<'n>(&self, name: &'n str) -> Result<VarTarget<'n>, (String, bool)> {
        // Byte searches: a `char` pattern costs a hundred instructions a
        // call, and every vars promise comes here.
        let head_end = crate::scan::memchr(b'[', name.as_bytes()).unwrap_or(name.len());
        let (head, indices) = name.split_at(head_end);
        let valid_head = !head.is_empty()
            && head
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b >= 0x80);
        let valid_indices = indices.is_empty()
            || (indices.len() > 2
                && indices.starts_with('[')
                && indices.ends_with(']')
                && crate::scan::memchr(b'\n', indices.as_bytes()).is_none());
        if !valid_head || !valid_indices {
            return Err((format!("variable identifier '{name}' is not legal"), false));
        }
        let (ns, bundle) = self
            .frame()
            .map(|f| (f.ns.clone(), f.bundle.clone()))
            .unwrap_or_else(|| (Arc::from("default"), Arc::from("")));
        let Some(dot) = crate::scan::memchr(b'.', &name.as_bytes()[..head_end]) else {
            return Ok((ns, bundle, name));
        };
        let (scope, rest) = (&name[..dot], &name[dot + 1..]);
        if scope != &*bundle
            && self
                .policy_bundles
                .iter()
                .any(|b| b.ns == *ns && b.name == scope)
        {
            return Err((
                format!(
                    "variable identifier '{name}' is not legal: only the bundle '{scope}' itself may set its variables"
                ),
                true,
            ));
        }
        let scope = if scope == &*bundle {
            bundle
        } else {
            Arc::from(scope)
        };
        Ok((ns, scope, rest))
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
        let texts = self.promise_texts(promise, &["meta", "comment"]);
        let mut result = PromiseResult::default();
        let mut messages = Vec::new();
        let mut iteration = 0;
        self.for_each_promise_iteration(promise, &texts, &mut |ctx| {
            iteration += 1;
            let (r, m) = ctx.eval_classes_iteration(
                promise,
                common,
                (&origin, &file.source.path, line),
                iteration,
            );
            result.merge(r);
            messages.extend(m);
        });
        (result, messages)
    }

    fn eval_classes_iteration(
        &mut self,
        promise: &Promise,
        common: bool,
        (origin, path, line): (&Origin, &str, usize),
        iteration: usize,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        let mut res = PromiseResult::default();
        let name = self.expand_promiser(&promise.promiser.value);
        if !name.unresolved {
            self.set_this("promiser", Value::str(name.text.clone()));
        }
        // A class already set is not evaluated again, as in cf-agent: a
        // `select_class` iterated over a list picks once
        // (02_classes/01_basic/common_bundle_select_class_multiple_classes_as_scalar_variable.cf).
        // Its conditions are not looked at either, so -v says nothing of it.
        // (`cancel` and `timer_policy`, of CFEngine 3.28, act on a class
        // already set: they are taken below, once the guard is known.)
        let acts_on_set_class =
            promise.attribute("cancel").is_some() || promise.attribute("timer_policy").is_some();
        if !name.unresolved && !acts_on_set_class && self.class_is_set(&canonify(&name.text)) {
            crate::trace!(
                "Skipping evaluation of classes promise as class '{}' is already set",
                canonify(&name.text)
            );
            self.note_handle_done(promise);
            return (res, vec![]);
        }
        if let Some(stop) = self.condition_stops(promise) {
            return (stop, vec![]);
        }
        // Its dependencies are looked at (and -v says which is missing)
        // even when its name does not resolve yet.
        if !self.dependencies_done(promise) || name.unresolved {
            res.deferred = true;
            return (res, vec![]);
        }
        self.edit_banner(promise, "classes", &name.text, iteration);
        let name = canonify(&name.text);
        let fail = |res: &mut PromiseResult, message: String| {
            res.failed = true;
            vec![EvalMessage {
                file: path.to_string(),
                line,
                message,
            }]
        };
        // One attribute says whether the class holds, as in cf-agent; two
        // (or one with CFEngine 3.28's `cancel`) fail the promise.
        let deciding = promise
            .attributes
            .iter()
            .filter(|a| {
                matches!(
                    a.name.name.as_str(),
                    "expression"
                        | "and"
                        | "or"
                        | "xor"
                        | "not"
                        | "dist"
                        | "select_class"
                        | "cancel"
                )
            })
            .count();
        if deciding > 1 {
            let m = fail(
                &mut res,
                format!("Irreconcilable constraints in classes for '{name}'"),
            );
            return (res, m);
        }
        // `cancel` (CFEngine 3.28) undefines the class when the promise's
        // guard holds; it goes with none of the attributes that say how a
        // class is kept.
        if let Some(cancel) = promise.attribute("cancel") {
            if ["persistence", "scope", "timer_policy"]
                .iter()
                .any(|a| promise.attribute(a).is_some())
            {
                let m = fail(
                    &mut res,
                    format!(
                        "The 'cancel' attribute cannot be combined with 'persistence', 'scope', or 'timer_policy' (class '{name}')"
                    ),
                );
                return (res, m);
            }
            let on = self
                .eval_rval(&cancel.value)
                .ok()
                .and_then(|e| {
                    e.value
                        .as_scalar()
                        .map(|v| matches!(v, "true" | "yes" | "on"))
                })
                .unwrap_or(false);
            self.note_handle_done(promise);
            if on && self.class_is_set(&name) {
                if self.is_hard_class(&name) {
                    crate::warn!("Cannot cancel reserved hard class '{name}'");
                } else {
                    crate::debug!("C:     -  Cancelling class: {name}");
                    self.undefine_class(&name);
                    self.persist_cancels.push(name.clone());
                }
            }
            return (res, vec![]);
        }
        let timer_policy = match promise.attribute("timer_policy") {
            None => None,
            Some(a) => self
                .eval_rval(&a.value)
                .ok()
                .and_then(|e| e.value.as_scalar().map(str::to_string)),
        };
        if timer_policy.is_some() && promise.attribute("persistence").is_none() {
            let m = fail(
                &mut res,
                format!(
                    "Cannot use 'timer_policy' without 'persistence' in classes promise for '{name}'"
                ),
            );
            return (res, m);
        }
        // A class already set is not evaluated again, as in cf-agent: a
        // `select_class` iterated over a list picks once
        // (02_classes/01_basic/common_bundle_select_class_multiple_classes_as_scalar_variable.cf).
        if self.class_is_set(&name) {
            self.note_handle_done(promise);
            // Asked for, `timer_policy => "reset"` (CFEngine 3.28) restarts
            // the timer of a persistent class already set; without it the
            // promise is skipped, as cf-agent 3.21 skips it.
            let resets = timer_policy.as_deref() == Some("reset");
            if !resets {
                crate::trace!(
                    "Skipping evaluation of classes promise as class '{name}' is already set"
                );
            }
            if resets && let Some(minutes) = self.persistence_minutes(promise) {
                crate::debug!(
                    "C:     +  Resetting persistent class timer: '{name}' ({minutes} minutes)"
                );
                let (tags, _) = self.promise_meta(promise);
                self.persist_requests.push((name.clone(), minutes, tags));
            }
            return (res, vec![]);
        }
        let mut chosen = None;
        let truth = match self.class_promise_truth(promise, &name, &mut chosen) {
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
        // Evaluated, true or false: cf-agent counts the promise as kept.
        self.note_handle_done(promise);
        if !truth {
            return (res, vec![]);
        }
        let (tags, comment) = self.promise_meta(promise);
        let scope = promise
            .attribute("scope")
            .and_then(|a| self.eval_rval(&a.value).ok())
            .and_then(|e| e.value.as_scalar().map(str::to_string));
        let persistence = self.persistence_minutes(promise);
        // Persistent classes are always global, whatever the scope says.
        let local = persistence.is_none()
            && match scope.as_deref() {
                Some("bundle") => true,
                Some("namespace") => false,
                _ => !common,
            };
        // The class a distribution or selection picked: a distribution's
        // is global in common bundles and local elsewhere, a selection's
        // always global; both carry only `source=promise`.
        if let Some((picked, global)) = chosen {
            let picked_info = ClassInfo::soft(origin.clone(), vec!["source=promise".into()]);
            self.define_class(&picked, !global && !common, picked_info);
        }
        if let Some(c) = &comment {
            crate::debug!("Added class '{name}' with comment '{c}'");
        }
        if let Some(minutes) = persistence {
            if timer_policy.as_deref() == Some("absolute") {
                self.persist_absolute.insert(name.clone());
            }
            self.persist_requests
                .push((name.clone(), minutes, tags.clone()));
        }
        let info = ClassInfo {
            tags: tags.into(),
            comment,
            origin: origin.clone(),
            hard: false,
        };
        res.changed = self.define_class(&name, local, info);
        if res.changed && crate::report::log::verbose() {
            let kind = if local { "Private" } else { "Global" };
            crate::debug!("C:     +  {kind} class: {name}");
        }
        (res, vec![])
    }

    /// A classes promise's `persistence` in minutes, when positive.
    fn persistence_minutes(&mut self, promise: &Promise) -> Option<i64> {
        promise
            .attribute("persistence")
            .and_then(|a| self.eval_rval(&a.value).ok())
            .and_then(|e| e.value.as_scalar().and_then(|v| parse_int(v).ok()))
            .filter(|&m| m > 0)
    }

    /// The truth of a classes promise's value attributes. `Ok(None)` when it
    /// cannot be decided yet. `dist` and `select_class` also name the class
    /// they picked in `chosen` (with whether it is global regardless of the
    /// bundle).
    fn class_promise_truth(
        &mut self,
        promise: &Promise,
        name: &str,
        chosen: &mut Option<(String, bool)>,
    ) -> Result<Option<bool>, String> {
        for attr in &promise.attributes {
            let kind = attr.name.name.as_str();
            if !matches!(
                kind,
                "expression" | "and" | "or" | "xor" | "not" | "dist" | "select_class"
            ) {
                continue;
            }
            let e = match self.eval_rval(&attr.value) {
                Ok(e) if !e.unresolved => e,
                Ok(_) | Err(FnError::Defer) => {
                    // cf-agent does not wait: what did not resolve counts as
                    // a class not set, and a class that is true even so is
                    // defined at once (it never goes away again). One that
                    // is false waits for a later pass, as it may turn true.
                    return Ok(self
                        .truth_with_unresolved_unset(kind, &attr.value)
                        .then_some(true));
                }
                Err(FnError::Failed(m) | FnError::Quiet(m)) => return Err(m),
            };
            // A function giving one value where the attribute takes a list
            // passes the check (a literal does not) but stops cf-agent:
            // "Attempted to give a scalar to a non-scalar type".
            if kind != "expression"
                && kind != "not"
                && matches!(attr.value, Rval::Call(_))
                && let Value::Scalar(s) = &e.value
            {
                let m = format!(
                    "in attribute '{kind}', a function gave the single value '{s}' where a list is needed"
                );
                self.fatal = Some(m.clone());
                return Err(m);
            }
            let items: Vec<String> = match e.value {
                Value::Scalar(s) => vec![s],
                Value::List(l) => l,
                Value::Data(_) => return Err(format!("'{kind}' cannot take a data container")),
            };
            match kind {
                "dist" => {
                    *chosen = Some((distribute(name, &items)?, false));
                    return Ok(Some(true));
                }
                "select_class" => {
                    let Some(pick) = self.select_class(&items) else {
                        return Err("select_class needs at least one class".into());
                    };
                    *chosen = Some((canonify_class(&pick), true));
                    return Ok(Some(true));
                }
                _ => {}
            }
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
                _ => !truths.first().copied().unwrap_or(false),
            }));
        }
        // A classes promise without a value attribute defines the class.
        Ok(Some(true))
    }
}

impl EvalContext {
    /// The truth of a classes promise's `kind` attribute when part of its
    /// value does not resolve: as cf-agent's, each unresolved item (or an
    /// unresolved scalar value) is a class not set, and a function whose
    /// arguments do not resolve gives nothing true
    /// (02_classes/01_basic/invalid_function_in_list.cf:
    /// `or => { "any", classify("${never}") }` is true).
    fn truth_with_unresolved_unset(&mut self, kind: &str, value: &Rval) -> bool {
        let Rval::List { items, .. } = value else {
            // `not` of an unresolved scalar is true; of a call, or any
            // other attribute, false.
            return kind == "not" && !matches!(value, Rval::Call(_));
        };
        let mut truths = Vec::with_capacity(items.len());
        for item in items {
            match self.eval_rval(item) {
                Ok(e) if !e.unresolved => {
                    let texts = match e.value {
                        Value::Scalar(s) => vec![s],
                        Value::List(l) => l,
                        Value::Data(_) => vec![],
                    };
                    for t in texts {
                        truths.push(self.eval_class_expr(t.trim()).unwrap_or(false));
                    }
                }
                _ => truths.push(false),
            }
        }
        match kind {
            "or" => truths.iter().any(|&t| t),
            "and" => !truths.is_empty() && truths.iter().all(|&t| t),
            "xor" => truths.iter().filter(|&&t| t).count() % 2 == 1,
            _ => false,
        }
    }

    /// The item of `select_class` this host picks: chosen by a hash of the
    /// host's name, address and user, so that it stays the same from run
    /// to run, as cf-agent chooses.
    fn select_class(&self, items: &[String]) -> Option<String> {
        if items.is_empty() {
            return None;
        }
        let sys = |n: &str| {
            self.vars
                .get("default", "sys", n)
                .and_then(|v| v.value.as_scalar().map(str::to_string))
                .unwrap_or_default()
        };
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let splay = format!("{}+{}+{uid}", sys("fqhost"), sys("ipv4"));
        let n = crate::values::hash::oat_hash(&splay) as usize % items.len();
        Some(items[n].clone())
    }
}

/// The class a `dist` distribution picks: `promiser_weight` of one weight,
/// chosen at random in proportion to the weights.
fn distribute(promiser: &str, weights: &[String]) -> Result<String, String> {
    let mut parsed = Vec::with_capacity(weights.len());
    for w in weights {
        let n = parse_int(w)?;
        if n < 0 {
            return Err("a class distribution cannot have negative weights".into());
        }
        parsed.push(n as u64);
    }
    let total: u64 = parsed.iter().sum();
    if total == 0 {
        return Err("a class distribution needs a weight above zero".into());
    }
    use std::hash::{BuildHasher, Hasher};
    // A freshly keyed hasher is random enough for picking a weight.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(total);
    let mut fluct = h.finish() % total;
    for (w, n) in weights.iter().zip(&parsed) {
        if fluct < *n {
            return Ok(canonify(&format!("{promiser}_{w}")));
        }
        fluct -= n;
    }
    Err("a class distribution picked no weight".into())
}

/// Whether a value still holds variable references.
fn value_has_references(v: &Value) -> bool {
    match v {
        Value::Scalar(s) => crate::values::refs::has_refs(s),
        Value::List(l) => l.iter().any(|s| crate::values::refs::has_refs(s)),
        Value::Data(_) => false,
    }
}

/// Whether a variable's evaluated value still refers to the variable
/// itself (`$(x)`, `${x}`, `@(x)`, also qualified as `$(bundle.x)` or
/// `$(ns:bundle.x)`, also inside another reference's index), which
/// cf-agent refuses as a value that cannot converge. cf-agent checks only
/// the unqualified spellings and lets a qualified one grow with each pass
/// (and reads freed memory for a list); we refuse every spelling, since a
/// value made of two such references doubles with each expansion.
fn refers_to_itself(v: &Value, ns: &str, scope: &str, name: &str) -> bool {
    fn refers(s: &str, ns: &str, scope: &str, name: &str) -> bool {
        if !super::context::may_hold_reference(s) {
            return false;
        }
        let mut from = 0;
        while let Some(r) = crate::values::refs::next_ref(s, from) {
            let inner = &s[r.inner_start..r.inner_end];
            let target = crate::values::refs::VarRef::parse(inner);
            if target.name == name
                && target.scope.is_none_or(|s| s == scope)
                && target.ns.is_none_or(|n| n == ns)
            {
                return true;
            }
            if refers(inner, ns, scope, name) {
                return true;
            }
            from = r.end;
        }
        false
    }
    match v {
        Value::Scalar(s) => refers(s, ns, scope, name),
        Value::List(l) => l.iter().any(|s| refers(s, ns, scope, name)),
        Value::Data(_) => false,
    }
}

/// A list item that is nothing but an `@(...)` reference.
fn is_naked_list_ref(s: &str) -> bool {
    crate::values::refs::next_ref(s, 0)
        .is_some_and(|r| r.list_sigil && r.start == 0 && r.end == s.len())
}

/// The agent's uid, gid, pid and parent's pid, read once.
/// This process's uid, gid, pid and parent pid, as text.
fn process_ids() -> &'static [String; 4] {
    static IDS: std::sync::OnceLock<[String; 4]> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        // SAFETY: these calls have no preconditions and cannot fail.
        let (uid, gid, ppid) = unsafe { (libc::getuid(), libc::getgid(), libc::getppid()) };
        [
            uid.to_string(),
            gid.to_string(),
            std::process::id().to_string(),
            ppid.to_string(),
        ]
    })
}

/// A number's decimal digits, written without the formatting machinery
/// (the line of every promise is written twice).
struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    fn new(mut n: usize) -> Decimal {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.digits[self.start..]).unwrap_or_default()
    }
}

impl EvalContext {
    /// A call that was not made (its arguments wait, or it failed) whose
    /// function's type is not the variable's (`string => fileexists(...)`,
    /// which the parser lets through): cf-agent stops on it ("variable
    /// declared type 'string' but function 'fileexists' returns type
    /// 'context'"). A call held back only because this run does not make
    /// calls, or calls with side effects, is not one.
    fn unmade_call_of_another_type(&self, value: &Rval, dtype: DataType) -> Option<String> {
        let Rval::Call(c) = value else { return None };
        let f = crate::schema::function(&c.name.name)?;
        let spec = (self.builtins().lookup)(&c.name.name)?;
        if self.settings.no_functions || (spec.side_effects && self.settings.no_side_effects) {
            return None;
        }
        (f.return_type.as_str() != dtype.as_str()).then(|| {
            format!(
                "variable declared {} but function '{}' returns {}, and the call was not made; {}",
                dtype.as_str(),
                f.name,
                f.return_type.as_str(),
                super::rval::STOPS_CF_AGENT
            )
        })
    }
}

/// For a condition attribute (`if`, `ifvarclass`, `unless`), whether it
/// negates its class expression; None for any other attribute.
pub(crate) fn condition_negates(attribute: &str) -> Option<bool> {
    match attribute {
        "if" | "ifvarclass" => Some(false),
        "unless" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
