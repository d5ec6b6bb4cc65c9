//! Methods promises: a bundle called with arguments, as a promise.

use super::{AgentRun, MAX_CALL_DEPTH, RunError, verbose};
use crate::eval::expanded::{AttrValue, ExpandedPromise};
use crate::eval::vars::Variable;
use crate::report::Outcome;
use crate::values::{DataType, Origin, Value};

impl AgentRun<'_> {
    /// `methods`: run the named bundle and take its outcome.
    pub(super) fn eval_method(&mut self, ep: &ExpandedPromise) -> Option<Outcome> {
        let (name, args) = match ep.attrs.get("usebundle") {
            Some(AttrValue::Bundle { name, args }) => (name.clone(), args.clone()),
            // Without usebundle, the promiser names the bundle.
            _ => (ep.promiser.clone(), Vec::new()),
        };
        // Borrowed from the policy (which outlives the run), not copied.
        let policy = self.policy;
        let Some((file, bundle)) = policy.bundle(&ep.namespace, &name) else {
            crate::error!(
                "A method attempted to use a bundle '{name}' that was apparently not defined ({}:{})",
                ep.file,
                ep.line
            );
            self.fatal = Some(RunError::MethodMissingBundle(name));
            return None;
        };
        // Only warning: the bundle is not run, and the promise is not kept
        // (cf-agent's WARN outcome, which sets repair_failed classes).
        if ep.warn_only() {
            crate::warn!(
                "Bundle '{name}' should be invoked, but only a warning was promised! ({}:{})",
                ep.file,
                ep.line
            );
            // cf-agent ends the bundle it did not begin.
            verbose::bundle_end(&bundle.name.name);
            return Some(Outcome::Failed);
        }
        // A method naming a bundle without arguments runs it with its
        // parameters unset, as cf-agent does; other counts are fatal.
        if !args.is_empty() && bundle.params.len() != args.len() {
            crate::error!(
                "Bundle '{name}' takes {} arguments, but the method at {}:{} gives {}",
                bundle.params.len(),
                ep.file,
                ep.line,
                args.len()
            );
            self.fatal = Some(RunError::MethodArity {
                name,
                expected: bundle.params.len(),
                got: args.len(),
            });
            return None;
        }
        if self.bundle_outcomes.len() >= MAX_CALL_DEPTH {
            crate::error!(
                "methods nest deeper than {MAX_CALL_DEPTH} bundles at {}:{}; not calling '{name}'",
                ep.file,
                ep.line
            );
            return Some(Outcome::Failed);
        }
        let inherit = ep.flag("inherit").unwrap_or(false).then(|| {
            self.ctx
                .frame()
                .map(|f| f.local_classes.clone())
                .unwrap_or_default()
        });
        self.bundle_args = (!args.is_empty())
            .then(|| verbose::args_text(self.ctx, &args, self.written_args.as_deref()));
        verbose::bundle_begin(&bundle.name.name, self.bundle_args.as_deref());
        self.stack.push(format!(
            "/{}/'{}'",
            ep.promise_type,
            verbose::stack_promiser(&ep.promiser)
        ));
        let outcome = self.run_bundle(file, bundle, &args, inherit, true);
        self.stack.pop();
        self.bundle_args = None;
        if self.fatal.is_none() {
            verbose::bundle_end(&bundle.name.name);
        }
        // cf-agent's verdict on the call, in its words.
        match outcome {
            Some(Outcome::Warned) => {
                crate::warn!(
                    "Method '{}' invoked repairs, but only warnings promised",
                    bundle.name.name
                )
            }
            Some(Outcome::Failed | Outcome::Denied) => {
                crate::error!("Method '{}' failed in some repairs", bundle.name.name)
            }
            Some(Outcome::Timeout | Outcome::Interrupted) => {
                crate::info!("Method '{}' aborted in some repairs", bundle.name.name)
            }
            _ => {}
        }
        if let Some(AttrValue::Value(Value::Scalar(result))) = ep.attrs.get("useresult") {
            let returned = self.last_return_values.take().unwrap_or_default();
            let (ns, scope) = (ep.namespace.clone(), ep.bundle.clone());
            for (k, v) in returned {
                let var = Variable::new(Value::str(v), DataType::String, Origin::Agent)
                    .with_tags(vec!["source=promise".into()]);
                self.ctx
                    .vars
                    .put(&ns, &scope, &format!("{result}[{k}]"), var);
            }
        }
        Some(outcome.unwrap_or(Outcome::Kept))
    }
}
