//! The scheduler's part of the bundles an actuator runs (edit bundles):
//! parameters and frame, three passes, promise types in the order the call
//! gives, vars and classes, iterations and their guards, and the outcome
//! classes of each promise. What the promises do to the file is the
//! actuator's (`promises::files::edit`).

use crate::eval::context::Frame;
use crate::eval::expanded::{MAX_PASSES, define_outcome_classes};
use crate::eval::iterations::{Unresolved, expand_iterations};
use crate::eval::vars::Variable;
use crate::promises::{ActContext, BundleCall, BundleRunner, Visit};
use crate::syntax::ast::Rval;
use crate::values::value::Origin;

/// Runs bundles for actuators.
#[derive(Default)]
pub struct Runner {
    /// Under -v, cf-agent's stack path down to the promise whose actuator
    /// runs a bundle (`/default/main/files/'/etc/motd'`).
    pub stack: String,
    /// Under -v, the arguments of that promise's bundle call, as written.
    pub written: Option<Vec<Rval>>,
    /// Under -v, the arguments of the bundle that promise is in, as its
    /// banner writes them: cf-agent's banners of the edit bundle's
    /// promises show them.
    pub bundle_args: Option<String>,
}

impl BundleRunner for Runner {
    fn run(&self, act: &mut ActContext<'_>, call: &BundleCall<'_>, visit: &mut Visit<'_>) {
        let bundle = call.bundle;
        let verbose = crate::report::log::verbose();
        for (i, (param, value)) in bundle.params.iter().zip(call.args).enumerate() {
            if verbose {
                let written = self.written.as_ref().and_then(|w| w.get(i));
                let pass = act.ctx.scheduler().pass;
                super::verbose::parameter(&param.name, &bundle.name.name, value, written, pass);
            }
            let var = Variable::new(value.clone(), value.natural_type(), Origin::Agent)
                .with_tags(vec!["source=promise".into()]);
            act.ctx
                .scheduler()
                .vars
                .put(&bundle.namespace, &bundle.name.name, &param.name, var);
        }
        let mut frame = Frame::new(&bundle.namespace, &bundle.name.name, call.frame_type);
        if call.inherit
            && let Some(caller) = act.ctx.scheduler().frame()
        {
            frame.local_classes = caller.local_classes.clone();
        }
        let saved: Vec<_> = call
            .vars
            .iter()
            .map(|(scope, name, var)| {
                let ctx = act.ctx.scheduler();
                let old = ctx.vars.get("default", scope, name).cloned();
                ctx.vars.put("default", scope, name, var.clone());
                old
            })
            .collect();
        act.ctx.scheduler().push_frame(frame);
        // cf-agent shows each promise of the bundle it is about to act on
        // (its variables and classes too) in each of its passes.
        let stack = verbose.then(|| {
            let stack = format!("{}/{}/{}", self.stack, bundle.namespace, bundle.name.name);
            (stack, self.bundle_args.clone())
        });
        let mut reported = std::collections::HashSet::new();
        let outer_banner = std::mem::replace(&mut act.ctx.scheduler().banner_stack, stack.clone());
        for _pass in 0..MAX_PASSES {
            for ptype in call.order {
                for section in bundle
                    .sections
                    .iter()
                    .filter(|s| s.promise_type.name == *ptype)
                {
                    for promise in &section.promises {
                        match *ptype {
                            "vars" => {
                                act.ctx.scheduler().eval_vars_promise(
                                    call.file,
                                    promise,
                                    Some(act.policy),
                                );
                            }
                            "classes" => {
                                act.ctx
                                    .scheduler()
                                    .eval_classes_promise(call.file, promise, false);
                            }
                            _ => {
                                let line = call.file.source.line_of(promise.promiser.span.start);
                                let unresolved = Unresolved {
                                    promiser_acts: call.promiser_acts.contains(ptype),
                                    custom: false,
                                };
                                let work = expand_iterations(
                                    act.ctx.scheduler(),
                                    act.policy,
                                    call.file,
                                    bundle,
                                    ptype,
                                    promise,
                                    line,
                                    unresolved,
                                )
                                .work;
                                for ep in work {
                                    if let Some((stack, args)) = &stack {
                                        let ctx = act.ctx.scheduler();
                                        let args = args.as_deref();
                                        super::verbose::banner_of(ctx, promise, &ep, args, stack);
                                        // A report says it once more the
                                        // one time it is made.
                                        let key = (ep.promiser.clone(), ep.line);
                                        if *ptype == "reports" && reported.insert(key) {
                                            super::verbose::banner_of(
                                                ctx, promise, &ep, None, stack,
                                            );
                                        }
                                    }
                                    let Some(outcome) = visit(act, &ep) else {
                                        continue;
                                    };
                                    // Each outcome the promise reported, when
                                    // it reported more than the one it ended.
                                    let outcomes = act
                                        .reported_outcomes
                                        .take()
                                        .unwrap_or_else(|| vec![outcome]);
                                    if let Some(body) = ep.body("classes") {
                                        for o in outcomes {
                                            let state = act.state.as_deref_mut();
                                            define_outcome_classes(
                                                act.ctx.scheduler(),
                                                state,
                                                act.now,
                                                body,
                                                o,
                                            );
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        act.ctx.scheduler().banner_stack = outer_banner;
        act.ctx.scheduler().pop_frame();
        for ((scope, name, _), old) in call.vars.iter().zip(saved) {
            let ctx = act.ctx.scheduler();
            match old {
                Some(old) => {
                    ctx.vars.put("default", scope, name, old);
                }
                None => {
                    ctx.vars.remove("default", scope, name);
                }
            }
        }
    }
}
