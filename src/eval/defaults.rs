//! `defaults` promises: a variable of the bundle gets the promised value
//! (`string` or `slist`, as a vars promise gives it) when it is not
//! defined, or when its value matches `if_match_regex`.
//!
//! As cf-agent 3.21 decides it: a defined scalar is replaced only when the
//! regular expression is given and matches all of it; a defined list when
//! the expression matches one of its items, or when there is no
//! expression; anything else (undefined, a data container) always. The
//! scheduler runs these promises after the bundle's vars, and again after
//! its classes in each pass (01_vars/05_defaults/basics.cf).

use super::context::EvalContext;
use super::promises::{EvalMessage, PromiseResult};
use super::rval::Evaluated;
use crate::load::{LoadedFile, PolicySet};
use crate::syntax::ast::Promise;
use crate::values::value::Value;

impl EvalContext {
    /// Evaluates one `defaults` promise of the current bundle.
    pub fn eval_defaults_promise(
        &mut self,
        file: &LoadedFile,
        promise: &Promise,
        policy: Option<&PolicySet>,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        let mut res = PromiseResult::default();
        self.enter_promise(file, promise);
        let name = self.expand_promiser(&promise.promiser.value);
        if name.unresolved {
            res.deferred = true;
            return (res, vec![]);
        }
        self.set_this("promiser", Value::str(name.text.clone()));
        if let Some(stop) = self.condition_stops(promise) {
            return (stop, vec![]);
        }
        // A name a vars promise would refuse is refused by it below.
        let Ok((ns, scope, var)) = self.vars_target(&name.text) else {
            return self.eval_vars_promise(file, promise, policy);
        };
        let regex = match promise.attribute("if_match_regex") {
            None => None,
            Some(a) => match self.eval_rval(&a.value) {
                Ok(Evaluated {
                    value: Value::Scalar(r),
                    unresolved: false,
                }) => Some(r),
                _ => {
                    res.deferred = true;
                    return (res, vec![]);
                }
            },
        };
        let current = self.vars.get(&ns, &scope, var).map(|v| v.value.clone());
        if !self.default_replaces(current.as_ref(), regex.as_deref()) {
            return (res, vec![]);
        }
        self.vars.remove(&ns, &scope, var);
        let (mut r, msgs) = self.eval_vars_promise(file, promise, policy);
        let now = self.vars.get(&ns, &scope, var).map(|v| &v.value);
        // Putting the same default back each pass changes nothing.
        r.changed = now != current.as_ref();
        (r, msgs)
    }

    /// Whether a variable's current value gives way to the default.
    fn default_replaces(&mut self, current: Option<&Value>, regex: Option<&str>) -> bool {
        let matches = |ctx: &mut EvalContext, r: &str, s: &str| {
            ctx.regexes.get(r).is_ok_and(|re| re.is_full_match(s))
        };
        match (current, regex) {
            (Some(Value::Scalar(s)), Some(r)) => matches(self, r, s),
            (Some(Value::Scalar(_)), None) => false,
            (Some(Value::List(items)), Some(r)) => items.iter().any(|s| matches(self, r, s)),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::context::Frame;

    fn run(policy_text: &str) -> EvalContext {
        let file = LoadedFile::from_text("/t/x.cf", policy_text.to_string());
        let mut ctx = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        ctx.push_frame(Frame::new("default", "b", "agent"));
        let bundle = file.tree.bundles().next().expect("a bundle").clone();
        for kind in ["vars", "defaults"] {
            for s in bundle
                .sections
                .iter()
                .filter(|s| s.promise_type.name == kind)
            {
                for p in &s.promises {
                    if kind == "vars" {
                        ctx.eval_vars_promise(&file, p, None);
                    } else {
                        ctx.eval_defaults_promise(&file, p, None);
                    }
                }
            }
        }
        ctx
    }

    fn value(ctx: &EvalContext, name: &str) -> Option<Value> {
        ctx.vars.get("default", "b", name).map(|v| v.value.clone())
    }

    #[test]
    fn defaults_replace_as_cf_agent_decides() {
        let ctx = run(r#"bundle agent b
{
  vars:
      "kept" string => "x";
      "matched" string => "one";
      "unmatched" string => "x";
      "list" slist => { "p", "q" };
      "list_matched" slist => { "p", "q" };
      "list_unmatched" slist => { "p", "q" };
  defaults:
      "kept" string => "d";
      "matched" string => "d", if_match_regex => "o.e";
      "unmatched" string => "d", if_match_regex => "nomatch";
      "list" slist => { "d" };
      "list_matched" slist => { "d" }, if_match_regex => "q";
      "list_unmatched" slist => { "d" }, if_match_regex => "nomatch";
      "undefined" string => "d";
}
"#);
        let s = |v: &str| Some(Value::str(v));
        let l = |v: &[&str]| Some(Value::List(v.iter().map(|s| s.to_string()).collect()));
        assert_eq!(value(&ctx, "kept"), s("x"));
        assert_eq!(value(&ctx, "matched"), s("d"));
        assert_eq!(value(&ctx, "unmatched"), s("x"));
        assert_eq!(value(&ctx, "list"), l(&["d"]));
        assert_eq!(value(&ctx, "list_matched"), l(&["d"]));
        assert_eq!(value(&ctx, "list_unmatched"), l(&["p", "q"]));
        assert_eq!(value(&ctx, "undefined"), s("d"));
    }
}
