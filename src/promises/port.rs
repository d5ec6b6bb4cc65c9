//! What an actuator may ask of the evaluation: read variables, expand
//! strings, evaluate class expressions, set classes (and, for a commands
//! module, the variables its protocol defines). It cannot push frames,
//! evaluate promises, or reach the evaluator's other state: the scheduler
//! does that, through [`EvalPort::scheduler`], which no actuator calls
//! (`tests/it/architecture.rs` checks it).

use std::sync::Arc;

use crate::eval::EvalContext;
use crate::eval::classes::ClassInfo;
use crate::eval::context::Expanded;
use crate::eval::control::AgentControl;
use crate::eval::vars::Variable;
use crate::values::regex::{Regex, RegexError};
use crate::values::value::{DataType, Origin, Value};

/// The evaluation as an actuator sees it.
pub struct EvalPort<'a> {
    ctx: &'a mut EvalContext,
}

impl<'a> EvalPort<'a> {
    pub fn new(ctx: &'a mut EvalContext) -> Self {
        EvalPort { ctx }
    }

    /// The whole evaluator, for the scheduler's own work on an actuator's
    /// behalf (the bundles a [`super::BundleRunner`] runs). Never called
    /// from `promises/`.
    pub fn scheduler(&mut self) -> &mut EvalContext {
        self.ctx
    }

    /// A variable's value (`sys.workdir`, `scope.name`).
    pub fn lookup(&self, name: &str) -> Option<Value> {
        self.ctx.lookup(name)
    }

    /// A string with its variables expanded.
    pub fn expand(&self, s: &str) -> Expanded {
        self.ctx.expand(s)
    }

    /// A string expanded with `scope.name` bound to the given values for
    /// this expansion only (`$(match.1)` in a replacement).
    pub fn expand_with(&mut self, scope: &str, bindings: &[(String, String)], s: &str) -> String {
        let saved: Vec<Option<Variable>> = bindings
            .iter()
            .map(|(name, value)| {
                let var = Variable::new(Value::str(value.clone()), DataType::String, Origin::Agent);
                let old = self.ctx.vars.get("default", scope, name).cloned();
                self.ctx.vars.put("default", scope, name, var);
                old
            })
            .collect();
        let out = self.ctx.expand(s).text;
        for ((name, _), old) in bindings.iter().zip(saved) {
            match old {
                Some(old) => {
                    self.ctx.vars.put("default", scope, name, old);
                }
                None => {
                    self.ctx.vars.remove("default", scope, name);
                }
            }
        }
        out
    }

    /// A value of the policy's language (a body's attribute as written),
    /// evaluated; `None` when it does not evaluate.
    pub fn eval_rval(&mut self, rval: &crate::syntax::ast::Rval) -> Option<Value> {
        self.ctx.eval_rval(rval).ok().map(|e| e.value)
    }

    /// Whether a class expression holds now.
    pub fn class_holds(&mut self, expr: &str) -> bool {
        self.ctx.eval_class_expr(expr).unwrap_or(false)
    }

    /// Defines a class, local to the current bundle or global; true when
    /// it is new.
    pub fn define_class(&mut self, name: &str, local: bool, info: ClassInfo) -> bool {
        self.ctx.define_class(name, local, info)
    }

    /// Keeps a class defined for `minutes` across runs (the run stores
    /// it when it ends), as a classes body's `persist_time` does.
    pub fn persist_class(&mut self, name: &str, minutes: i64, tags: Vec<String>) {
        self.ctx
            .persist_requests
            .push((name.to_string(), minutes, tags));
    }

    /// What a commands module printed, as its protocol defines it:
    /// variables of `scope`, classes, tags.
    pub fn apply_module_output(
        &mut self,
        scope: &str,
        output: &str,
    ) -> crate::eval::module_protocol::ModuleResult {
        crate::eval::module_protocol::apply(
            self.ctx,
            scope,
            output,
            &mut crate::functions::read_data_file,
        )
    }

    /// The run's regular expressions, compiled once.
    pub fn regex(&mut self, pattern: &str) -> Result<Arc<Regex>, RegexError> {
        self.ctx.regexes.get(pattern)
    }

    pub fn agent_control(&self) -> &AgentControl {
        &self.ctx.agent_control
    }

    /// Whether a `files_single_copy` destination was copied to this run.
    pub fn was_single_copied(&self, path: &str) -> bool {
        self.ctx.single_copied.contains(path)
    }

    /// Notes a destination copied to, for `files_single_copy`.
    pub fn note_single_copied(&mut self, path: String) {
        self.ctx.single_copied.insert(path);
    }

    pub fn common_control(&self, attr: &str) -> Option<&Value> {
        self.ctx.common_control(attr)
    }

    /// A policy file's name as cf-agent hands it on (relative to the
    /// directory the entry was named from).
    pub fn source_name<'p>(&self, path: &'p str) -> &'p str {
        self.ctx.settings.source_name(path)
    }

    /// Whether this is the bundle's last pass.
    pub fn last_pass(&self) -> bool {
        self.ctx.last_pass
    }

    /// The edit locks taken in this run (an edit acts once per file).
    pub fn edit_locks(&mut self) -> &mut std::collections::HashSet<String> {
        &mut self.ctx.edit_locks
    }

    /// Classes and variables as one JSON document (`datastate()`).
    pub fn datastate(&self) -> serde_json::Value {
        crate::functions::introspect::datastate_json(self.ctx)
    }

    /// The promise as it acts on one of the files it names, its
    /// per-file references bound (see
    /// [`crate::eval::expanded::ExpandedPromise::for_file`]); `None` when
    /// it is the same for every file.
    pub fn for_file(
        &mut self,
        p: &crate::eval::expanded::ExpandedPromise,
        path: &str,
        groups: &[Option<String>],
    ) -> Option<crate::eval::expanded::ExpandedPromise> {
        p.for_file(self.ctx, path, groups)
    }

    /// Defines (and cancels) the classes a `classes` body asks for on an
    /// outcome, as the scheduler does for a whole promise: for a promise
    /// that sets them for each file it acts on.
    pub fn define_outcome_classes(
        &mut self,
        state: Option<&mut crate::state::StateStore>,
        now: i64,
        body: &crate::eval::bodies::ResolvedBody,
        outcome: crate::report::Outcome,
    ) -> bool {
        crate::eval::expanded::define_outcome_classes(self.ctx, state, now, body, outcome)
    }

    /// A body the policy defines, resolved with its arguments.
    pub fn named_body(
        &mut self,
        policy: &crate::load::PolicySet,
        body_type: &str,
        name: &str,
    ) -> Option<crate::eval::bodies::ResolvedBody> {
        crate::eval::bodies::resolve_named_body(self.ctx, policy, body_type, name).ok()
    }
}
