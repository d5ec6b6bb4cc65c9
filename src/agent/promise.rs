//! One promise in a pass: vars, classes and meta promises converge; the
//! others act once per run per iteration, each expanded, gated (the
//! transaction, `depends_on`, locks), acted on and recorded.

use super::verbose;
use super::why::{self, Status};
use super::{
    AgentRun, DEFAULT_IFELAPSED_MINUTES, FatalAt, PassState, RunError, done_key, fnv1a,
    refused_in_sandbox,
};
use crate::eval::call::Builtins;
use crate::eval::context::Frame;
use crate::eval::expanded::{AttrValue, ExpandedPromise};
use crate::eval::expanded::{attrs_key, define_outcome_classes};
use crate::eval::iterations::{Unresolved, expand_iterations};
use crate::eval::promises::EvalMessage;
use crate::load::LoadedFile;
use crate::promises::actuator;
use crate::report::change::{Change, Mode};
use crate::report::{Outcome, PromiseEvent};
use crate::schema::ValueType;
use crate::schema::values::{check_literal, has_var_ref};
use crate::state::LockStatus;
use crate::syntax::ast::{Bundle, Promise, Rval};
use crate::values::Value;
use std::sync::Arc;

/// The names under which an iteration is done for this run and holds its
/// `ifelapsed` lock across runs.
struct IterationKeys {
    done: u128,
    lock: String,
}

/// What acting on one iteration gave.
struct Acted {
    /// `None` when no actuator handles the promise type.
    outcome: Option<Outcome>,
    duration: std::time::Duration,
    changes: Vec<Change>,
}

impl AgentRun<'_> {
    pub(super) fn eval_promise(
        &mut self,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        ptype: &str,
        promise: &Promise,
        common: bool,
        state: &mut PassState,
    ) {
        if self.profiler.is_none() {
            return self.eval_promise_timed(file, bundle, ptype, promise, common, state);
        }
        self.profile_promise(file, ptype, promise);
        self.eval_promise_timed(file, bundle, ptype, promise, common, state);
        self.profile_end();
    }

    fn eval_promise_timed(
        &mut self,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        ptype: &str,
        promise: &Promise,
        common: bool,
        state: &mut PassState,
    ) {
        if crate::report::log::debug() {
            self.trace_guard_skip(ptype, promise);
        }
        match ptype {
            "vars" => {
                self.ctx.announce_vars = true;
                let (r, msgs) = self.settled.eval_vars(self.ctx, self.policy, file, promise);
                self.ctx.announce_vars = false;
                if self.ctx.fatal.is_some() {
                    return self.take_evaluation_fatal(file, ptype, promise);
                }
                state.changed |= r.changed;
                state.deferred |= r.deferred;
                // A failure is final; what waits is told in the last pass.
                if state.last || r.failed {
                    self.note_messages(msgs);
                }
            }
            "defaults" => {
                let (r, msgs) = self
                    .ctx
                    .eval_defaults_promise(file, promise, Some(self.policy));
                // cf-agent tells each defaults promise as kept.
                if crate::report::log::verbose() {
                    let name = self.ctx.expand(&promise.promiser.value).text;
                    verbose::promise_end("defaults", &name, crate::report::Outcome::Kept);
                }
                state.changed |= r.changed;
                state.deferred |= r.deferred;
                if state.last || r.failed {
                    self.note_messages(msgs);
                }
            }
            "classes" => {
                let (r, msgs) =
                    self.settled
                        .eval_classes(self.ctx, self.policy, file, promise, common);
                if self.ctx.fatal.is_some() {
                    return self.take_evaluation_fatal(file, ptype, promise);
                }
                self.store_persistent_classes();
                state.changed |= r.changed;
                state.deferred |= r.deferred;
                if state.last || r.failed {
                    self.note_messages(msgs);
                }
            }
            "meta" => {
                // meta promises are variables of the `<bundle>_meta` scope.
                let name = format!("{}_meta", bundle.name.name);
                let ns = bundle.namespace.clone();
                self.ctx.push_frame(Frame::new(&ns, &name, "meta"));
                self.ctx.announce_vars = true;
                let (r, _) = self.ctx.eval_vars_promise(file, promise, Some(self.policy));
                self.ctx.announce_vars = false;
                self.ctx.pop_frame();
                state.changed |= r.changed;
            }
            _ => self.eval_acting_promise(file, bundle, ptype, promise, state),
        }
        self.take_evaluation_fatal(file, ptype, promise);
    }

    /// An error evaluating the promise met on which cf-agent stops the
    /// whole run (a function's value that does not fit), placed at it.
    fn take_evaluation_fatal(&mut self, file: &Arc<LoadedFile>, ptype: &str, promise: &Promise) {
        if let Some(what) = self.ctx.fatal.take() {
            self.fatal
                .get_or_insert(RunError::Evaluation(Box::new(FatalAt {
                    what,
                    promise_type: ptype.to_string(),
                    file: file.source.path.clone(),
                    line: file.source.line_of(promise.promiser.span.start),
                })));
        }
    }

    /// Promises that act (reports, methods, files, commands, ...): once
    /// per run per iteration. Each iteration is expanded, gated (the
    /// transaction, `depends_on`, locks), acted on and recorded.
    fn eval_acting_promise(
        &mut self,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        ptype: &str,
        promise: &Promise,
        state: &mut PassState,
    ) {
        let line = file.source.line_of(promise.promiser.span.start);
        // An unresolved promiser waits; reports print it as written in the
        // last pass, and methods run at once, as cf-agent does.
        let unresolved = Unresolved {
            promiser_acts: ptype == "methods" || (state.last && ptype == "reports"),
            custom: crate::schema::promise_type(ptype).is_none(),
        };
        // cf-agent tells an iteration its condition excludes as it comes
        // to it, between those it acts on: the skip lines are held while
        // all are expanded.
        if crate::report::log::verbose() {
            self.ctx.held_skips = Some(Vec::new());
        }
        let id = promise as *const Promise as usize;
        let memo = settles(self.ctx.builtins(), ptype, promise);
        if memo
            && let Some((vars, classes)) = self.settled_acting.get(&id)
            && self.ctx.vars.reads.unchanged_since(vars)
            && self.ctx.classes.reads.unchanged_since(classes)
        {
            return;
        }
        if memo {
            self.ctx.vars.reads.start();
            self.ctx.classes.reads.start();
        }
        // An expansion that logs (a function's error) logs again in each
        // pass, as cf-agent's does: it is not kept.
        let said = crate::report::log::said();
        let mut expansion = expand_iterations(
            self.ctx,
            self.policy,
            file,
            bundle,
            ptype,
            promise,
            line,
            unresolved,
        );
        self.ctx.held_skips = None;
        let reads = if memo {
            match (
                self.ctx.vars.reads.finish(),
                self.ctx.classes.reads.finish(),
            ) {
                (Some(v), Some(c))
                    if !expansion.deferred
                        && crate::report::log::said() == said
                        && expansion.failures.is_empty()
                        && expansion.fatal.is_none() =>
                {
                    Some((v, c))
                }
                _ => None,
            }
        } else {
            None
        };
        self.settled_acting.remove(&id);
        let mut all_done = true;
        let mut held = std::mem::take(&mut expansion.held).into_iter().peekable();
        let mut tell_held = |before: usize| {
            while let Some((_, l)) = held.next_if(|(at, _)| *at <= before) {
                crate::debug!("{l}");
            }
        };
        let site = why::Site {
            file: &file.source.path,
            line,
            namespace: &bundle.namespace,
            bundle: &bundle.name.name,
            promise_type: ptype,
            promise,
        };
        // A failure to expand is told in the last pass, which must take it.
        state.deferred |= expansion.deferred || !expansion.failures.is_empty();
        self.record_unexpanded(&site, expansion.skipped, expansion.failures, state.last);
        if let Some(error) = expansion.fatal {
            tell_held(usize::MAX);
            self.fatal = Some(RunError::BrokenBody(Box::new(FatalAt {
                what: error.to_string(),
                promise_type: ptype.to_string(),
                file: file.source.path.clone(),
                line,
            })));
            return;
        }
        for (i, ep) in expansion.work.into_iter().enumerate() {
            tell_held(i);
            if self.fatal.is_none() {
                self.fatal = self.option_out_of_range(&ep);
            }
            if self.fatal.is_some() {
                return;
            }
            self.gate_found_done = false;
            let Some(keys) = self.gate(&site, &ep, state) else {
                all_done &= self.gate_found_done;
                continue;
            };
            let done = keys.done;
            // A report that returns a value to its method is not shown.
            let returns_value =
                ptype == "reports" && ep.attrs.contains_key("bundle_return_value_index");
            if !verbose::shown_before_lock(ptype) && !returns_value {
                self.promise_banner(promise, &ep);
            }
            if ptype == "methods" && crate::report::log::verbose() {
                self.written_args = match promise.attribute("usebundle").map(|a| &a.value) {
                    Some(Rval::Call(c)) => Some(c.args.clone()),
                    _ => None,
                };
            }
            if ptype == "files" && crate::report::log::verbose() {
                // An edit bundle's promises are shown under the files
                // promise, its arguments as written.
                self.runner.stack = format!(
                    "{}/{ptype}/'{}'",
                    self.stack.concat(),
                    verbose::stack_promiser(&ep.promiser)
                );
                let call = ["edit_line", "edit_xml"]
                    .iter()
                    .find_map(|a| promise.attribute(a))
                    .map(|a| &a.value);
                self.runner.bundle_args = self.bundle_args.clone();
                self.runner.written = match call {
                    Some(Rval::Call(c)) => Some(c.args.clone()),
                    _ => None,
                };
            }
            let noted = self.note_acting(&ep, &keys.lock, true);
            let acted = self.act_once(&ep);
            if noted {
                self.note_acting(&ep, &keys.lock, false);
            }
            self.record(&site, &ep, keys, acted, state);
            all_done &= self.done.contains(&done);
        }
        tell_held(usize::MAX);
        if let Some(reads) = reads
            && all_done
            && self.fatal.is_none()
        {
            self.settled_acting.insert(id, reads);
        }
    }

    /// Under -v, cf-agent's banner of a promise about to be looked at.
    fn promise_banner(&self, promise: &Promise, ep: &ExpandedPromise) {
        if !crate::report::log::verbose() {
            return;
        }
        let stack = self.stack.concat();
        verbose::banner_of(self.ctx, promise, ep, self.bundle_args.as_deref(), &stack);
    }

    /// Under -d, cf-agent's line for a promise its class guard excludes.
    fn trace_guard_skip(&mut self, ptype: &str, promise: &Promise) {
        if promise.guard.quoted {
            return;
        }
        let guard = promise.guard.expr.trim();
        if !self.ctx.eval_class_expr(guard).unwrap_or(false) {
            crate::trace!(
                "Skipping {ptype} promise expansion with promiser '{}' due to class guard '{guard}::' (pass {})",
                promise.promiser.value,
                self.ctx.pass
            );
        }
    }

    /// Records the iterations that were skipped or failed before acting;
    /// a failure is an error line in the last pass.
    fn record_unexpanded(
        &mut self,
        site: &why::Site,
        skipped: Vec<(String, String)>,
        failures: Vec<(String, String)>,
        last: bool,
    ) {
        // The handle as written, for iterations that were not expanded.
        let written_handle = match site.promise.attribute("handle").map(|a| &a.value) {
            Some(Rval::String(h)) => Some(self.ctx.expand(&h.value).text),
            _ => None,
        };
        for (shown, reason) in skipped {
            // Under -v the last pass says so, in the shape of cf-agent's
            // skip lines (cf-agent itself acts on the text as written).
            if last
                && reason.starts_with(crate::eval::iterations::PROMISER_UNRESOLVED)
                && crate::report::log::verbose()
            {
                crate::debug!("Skipping promise '{shown}' because {reason}");
            }
            let status = Status::Skipped { reason };
            self.why
                .record(site, written_handle.as_deref(), &shown, status);
        }
        for (shown, f) in failures {
            if last {
                crate::error!(
                    "{f} (in a {} promise at {}:{})",
                    site.promise_type,
                    site.file,
                    site.line
                );
            }
            let status = Status::Skipped { reason: f };
            self.why
                .record(site, written_handle.as_deref(), &shown, status);
        }
    }

    /// Whether an expanded iteration may act now: not done already this
    /// run, its transaction not abandoned, its dependencies met, no lock
    /// held. Returns its once-per-run key and lock name when it may.
    fn gate(
        &mut self,
        site: &why::Site,
        ep: &ExpandedPromise,
        state: &mut PassState,
    ) -> Option<IterationKeys> {
        let ptype = &ep.promise_type;
        // cf-agent's once-per-run lock names the bundle, the type, the
        // promiser and the attributes, not where the promise is written:
        // two identical promises act once, and a bundle called again does
        // not repeat what it did.
        // Built by hand, not with `format!`: this runs for every iteration
        // of every acting promise.
        let attrs = attrs_key(&ep.attrs);
        let mut done_text = String::with_capacity(
            ep.namespace.len()
                + ep.bundle.len()
                + ptype.len()
                + ep.promiser.len()
                + attrs.len()
                + 4,
        );
        for (part, sep) in [
            (&*ep.namespace, ":"),
            (&*ep.bundle, "\u{1}"),
            (&**ptype, "\u{1}"),
            (ep.promiser.as_str(), "\u{1}"),
            (attrs.as_str(), ""),
        ] {
            done_text.push_str(part);
            done_text.push_str(sep);
        }
        let lock_hash = fnv1a(&done_text);
        let done = done_key(&done_text, lock_hash);
        drop(done_text);
        if let Some(a) = actuator(ptype) {
            a.check_each_pass(ep);
            if !a.sane(ep) {
                return None;
            }
        }
        let early_banner = verbose::shown_before_lock(ptype);
        if self.done.contains(&done) {
            self.gate_found_done = true;
            if early_banner && self.unmet_dependencies(ep).is_none() {
                self.promise_banner(site.promise, ep);
            }
            // cf-agent sets a returned value again in every pass.
            if &**ptype == "reports" && ep.attrs.contains_key("bundle_return_value_index") {
                return_value_constraints(ep);
                verbose::promise_end(ptype, &ep.promiser, Outcome::Kept);
            }
            return None;
        }
        let handle = ep.handle.as_deref();
        if let Some(tx) = &self.tx
            && let Some(failure) = &tx.failure
        {
            let reason = format!(
                "the transaction '{}:{}' was abandoned after {failure}",
                tx.namespace, tx.bundle
            );
            self.why
                .record(site, handle, &ep.promiser, Status::Skipped { reason });
            return None;
        }
        if let Some(reason) = self.unmet_dependencies(ep) {
            state.deferred = true;
            self.why
                .record(site, handle, &ep.promiser, Status::Skipped { reason });
            return None;
        }
        if early_banner {
            self.promise_banner(site.promise, ep);
        }
        let mut lock =
            String::with_capacity(ep.namespace.len() + ep.bundle.len() + ptype.len() + 19);
        for part in [&*ep.namespace, ":", &*ep.bundle, "/", &**ptype, "/"] {
            lock.push_str(part);
        }
        push_hex16(&mut lock, lock_hash);
        if let Some(reason) = self
            .lock_held(ep, &lock)
            .or_else(|| self.still_running(ep, &lock))
        {
            self.done.insert(done);
            self.why
                .record(site, handle, &ep.promiser, Status::Skipped { reason });
            return None;
        }
        Some(IterationKeys { done, lock })
    }

    /// Acts on one iteration: a method, a services promise handled by a
    /// bundle, or the promise type's actuator; with how long it took and
    /// the changes it made or would have made.
    fn act_once(&mut self, ep: &ExpandedPromise) -> Acted {
        // An action body's `report_level` raises what the promise shows
        // while it acts (never lowers it), as cf-agent's does.
        let level = ep
            .body("action")
            .and_then(|a| a.scalar("report_level"))
            .and_then(|l| match l {
                "verbose" => Some(crate::config::LogLevel::Verbose),
                "inform" => Some(crate::config::LogLevel::Info),
                "error" => Some(crate::config::LogLevel::Notice),
                _ => None,
            });
        crate::report::log::with_raised_level(level, || self.act_once_at_level(ep))
    }

    fn act_once_at_level(&mut self, ep: &ExpandedPromise) -> Acted {
        let started = std::time::Instant::now();
        let skipped = actuator(&ep.promise_type).is_some_and(|a| a.skipped(ep));
        self.skipped_here = skipped;
        let outcome = if skipped {
            None
        } else if &*ep.promise_type == "methods" {
            self.eval_method(ep)
        } else if let Some((bundle, args)) = self.service_bundle(ep) {
            // A services promise handled by a bundle, as cf-agent hands it
            // to standard_services(service, policy), or to the
            // service_method's bundle with the arguments it gives.
            let policy = ep.scalar("service_policy").unwrap_or("start").to_string();
            let args =
                args.unwrap_or_else(|| vec![Value::str(ep.promiser.clone()), Value::str(policy)]);
            let mut call = ep.clone();
            call.attrs
                .insert("usebundle".into(), AttrValue::Bundle { name: bundle, args });
            self.eval_method(&call)
        } else {
            self.act(ep)
        };
        let duration = started.elapsed();
        let changes = std::mem::take(&mut self.last_changes);
        Acted {
            outcome,
            duration,
            changes,
        }
    }

    /// Records what an iteration's acting came to: the why-record, the
    /// transaction's first failure, the once-per-run and `ifelapsed`
    /// locks, the outcome classes, the handle's outcome for `depends_on`,
    /// the bundle's outcome and the event.
    fn record(
        &mut self,
        site: &why::Site,
        ep: &ExpandedPromise,
        keys: IterationKeys,
        acted: Acted,
        state: &mut PassState,
    ) {
        let handle = ep.handle.as_deref();
        // A promise that ended before its once-per-run lock is tried again
        // in the next pass, as cf-agent's passes do.
        let again = std::mem::take(&mut self.again_next_pass);
        state.changed |= again;
        let Some(outcome) = acted.outcome else {
            let ptype = &ep.promise_type;
            let reason = if std::mem::take(&mut self.skipped_here) {
                if !again {
                    self.done.insert(keys.done);
                }
                "skipped on this platform, as cf-agent skips it".to_string()
            } else if crate::schema::promise_type(ptype).is_none() {
                format!("promise type '{ptype}' is not defined by any 'promise agent' block")
            } else {
                format!("promise type '{ptype}' is not supported yet")
            };
            self.why
                .record(site, handle, &ep.promiser, Status::Skipped { reason });
            return;
        };
        self.why.record(
            site,
            handle,
            &ep.promiser,
            Status::Ran {
                outcome: std::borrow::Cow::Borrowed(outcome.as_str()),
                changes: acted.changes.iter().flat_map(Change::said).collect(),
            },
        );
        // cf-agent's files promise has dropped a directory's `/.` by then.
        let shown = match &*ep.promise_type {
            "files" => ep.promiser.strip_suffix("/.").unwrap_or(&ep.promiser),
            _ => &ep.promiser,
        };
        verbose::promise_end(&ep.promise_type, shown, outcome);
        self.note_transaction_failure(ep, outcome);
        // Under -K cf-agent neither honours nor leaves promise locks.
        if !again {
            self.done.insert(keys.done);
            if !self.no_lock
                && let Some(st) = self.state.as_deref_mut()
            {
                st.record_done(&keys.lock, self.now);
            }
        }
        state.changed |= outcome == Outcome::Repaired;
        match self.reported_outcomes.take() {
            Some(reported) => {
                for o in reported {
                    state.changed |= self.set_outcome_classes(ep, o);
                }
            }
            None => state.changed |= self.set_outcome_classes(ep, outcome),
        }
        self.log_transaction(ep, outcome);
        if let Some(h) = &ep.handle {
            if matches!(outcome, Outcome::Kept | Outcome::Repaired) {
                self.ctx.done_handles.insert(h.clone());
            }
            let prev = self.handles.get(h).copied();
            self.handles
                .insert(h.clone(), prev.map_or(outcome, |p| p.worst(outcome)));
            state.changed = true;
        }
        self.record_bundle_outcome(outcome);
        self.sink.promise_event(&PromiseEvent {
            bundle: ep.bundle.clone(),
            namespace: ep.namespace.clone(),
            promise_type: ep.promise_type.clone(),
            promiser: ep.promiser.clone(),
            handle: ep.handle.clone(),
            file: ep.file.clone(),
            line: ep.line,
            outcome,
            changes: acted.changes,
            duration: acted.duration,
        });
    }

    /// The first promise of a transaction that ends not kept abandons it.
    fn note_transaction_failure(&mut self, ep: &ExpandedPromise, outcome: Outcome) {
        if let Some(tx) = self.tx.as_mut()
            && tx.failure.is_none()
            && matches!(
                outcome,
                Outcome::Failed | Outcome::Denied | Outcome::Timeout | Outcome::Interrupted
            )
        {
            tx.failure = Some(format!(
                "the {} promise '{}' ({}:{}) was not kept ({})",
                ep.promise_type,
                ep.promiser,
                ep.file,
                ep.line,
                outcome.as_str()
            ));
        }
    }

    /// Whether the promise acted less than `ifelapsed` minutes ago (in an
    /// earlier run), and so waits, in words; says so under `-I`.
    fn lock_held(&self, ep: &ExpandedPromise, lock_key: &str) -> Option<String> {
        if self.no_lock {
            return None;
        }
        let st = self.state.as_deref()?;
        let ifelapsed = ep
            .body("action")
            .and_then(|a| a.scalar("ifelapsed"))
            .and_then(|v| crate::values::number::parse_int(v).ok())
            .map(|v| v.max(0) as u64)
            .or(self.ctx.agent_control.ifelapsed)
            .unwrap_or(DEFAULT_IFELAPSED_MINUTES);
        match st.lock_status(lock_key, self.now, ifelapsed) {
            LockStatus::Free => None,
            LockStatus::TooSoon { minutes_left } => {
                crate::info!(
                    "Skipping {} promise '{}' in bundle '{}': it ran less than {ifelapsed} minute(s) ago (ifelapsed), {minutes_left} minute(s) left",
                    ep.promise_type,
                    ep.promiser,
                    ep.bundle
                );
                Some(format!(
                    "it ran less than {ifelapsed} minute(s) ago (ifelapsed); its lock has \
                     {minutes_left} minute(s) left (-K ignores locks)"
                ))
            }
        }
    }

    /// `expireafter` (the action body's, else agent control's, else 120
    /// minutes): a promise an earlier agent began and never finished (it
    /// was killed) is skipped until that long after it began, as cf-agent's
    /// lock says "already running"; after that the lock expires and the
    /// promise acts. One agent runs at a time on a work directory, so the
    /// holder is gone: there is nothing to kill.
    fn still_running(&mut self, ep: &ExpandedPromise, lock_key: &str) -> Option<String> {
        if self.no_lock || !holds_running_lock(&ep.promise_type) {
            return None;
        }
        let st = self.state.as_deref_mut()?;
        let started = st.running_since(lock_key)?;
        let expireafter = ep
            .body("action")
            .and_then(|a| a.scalar("expireafter"))
            .and_then(|v| crate::values::number::parse_int(v).ok())
            .map(|v| v.max(0) as u64)
            .or(self.ctx.agent_control.expireafter)
            .unwrap_or(DEFAULT_EXPIREAFTER_MINUTES);
        let elapsed = (self.now - started).max(0) as u64 / 60;
        if elapsed >= expireafter {
            crate::info!("Lock expired after {elapsed}/{expireafter} minutes: {lock_key}");
            if let Err(e) = st.finished(lock_key) {
                crate::error!("{e}");
            }
            return None;
        }
        crate::debug!("Couldn't obtain lock for {lock_key} (already running!)");
        Some(format!(
            "an agent began it {elapsed} minute(s) ago and did not finish; its lock expires after \
             {expireafter} minute(s) (expireafter; -K ignores locks)"
        ))
    }

    /// Notes in the state that the promise is acting (`true`) or done; the
    /// note outlives an agent killed meanwhile. Whether a note was taken.
    fn note_acting(&mut self, ep: &ExpandedPromise, lock_key: &str, acting: bool) -> bool {
        if self.no_lock || self.dry_run || !holds_running_lock(&ep.promise_type) {
            return false;
        }
        let Some(st) = self.state.as_deref_mut() else {
            return false;
        };
        let r = if acting {
            st.acting(lock_key, self.now)
        } else {
            st.finished(lock_key)
        };
        if let Err(e) = r {
            crate::error!("{e}");
            return false;
        }
        true
    }

    /// The bundle that implements a services promise, with the arguments
    /// the service_method gives it: its `service_bundle`, else a
    /// `standard_services` bundle the policy defines (called with the
    /// service and the policy); `None` means our built-in service manager.
    fn service_bundle(&self, ep: &ExpandedPromise) -> Option<(String, Option<Vec<Value>>)> {
        if &*ep.promise_type != "services" {
            return None;
        }
        if let Some((b, args)) = ep
            .body("service_method")
            .and_then(|m| m.bundle_call("service_bundle"))
        {
            return Some((b, (!args.is_empty()).then_some(args)));
        }
        self.policy
            .bundle(&ep.namespace, "standard_services")
            .map(|_| ("standard_services".to_string(), None))
    }

    /// The first option attribute of an expanded promise (or of a body it
    /// names) whose value is not one of the option's words: the policy's
    /// check let it through because a variable gave it, and cf-agent stops
    /// the run when it sees it expanded.
    fn option_out_of_range(&mut self, ep: &ExpandedPromise) -> Option<RunError> {
        // cf-agent checks these values once, in its preliminary pass over
        // every bundle before the run, where a bundle's parameters have no
        // value yet: what a parameter gives is never checked there, and
        // an option it makes wrong is taken as not given (ncf's
        // file_symlink_present_option with enforce "dummy", its test
        // 30_generic_methods/file_symlink_present_invalid_wrong_enforce_arg.cf).
        if self
            .policy
            .bundle(&ep.namespace, &ep.bundle)
            .is_some_and(|(_, b)| !b.params.is_empty())
        {
            return None;
        }
        let ptype = crate::schema::promise_type(&ep.promise_type)?;
        let mut checks: Vec<(&'static crate::schema::AttrDef, &Value)> = Vec::new();
        for (name, v) in &ep.attrs {
            match v {
                AttrValue::Value(val) => checks.extend(ptype.attribute(name).map(|d| (d, val))),
                AttrValue::Body(b) => {
                    let Some(bt) = crate::schema::body_type(name) else {
                        continue;
                    };
                    for (an, av) in &b.attrs {
                        checks.extend(bt.attribute(an).map(|d| (d, av)));
                    }
                }
                AttrValue::Bundle { .. } => {}
            }
        }
        for (def, val) in checks {
            if !matches!(def.ty, ValueType::Option | ValueType::Olist) {
                continue;
            }
            let items: Vec<&str> = match val {
                Value::Scalar(s) => vec![s.as_str()],
                Value::List(l) => l.iter().map(String::as_str).collect(),
                Value::Data(_) => continue,
            };
            for item in items {
                let fits = check_literal(def.name, item, def.ty, def.range, &mut self.ctx.regexes);
                // A value still holding a reference is not the policy's
                // final word; it is left to the actuator.
                if fits.is_err() && !has_var_ref(item) {
                    return Some(RunError::OptionOutOfRange(Box::new(FatalAt {
                        what: format!(
                            "in attribute '{}', '{item}' is not one of {}",
                            def.name, def.range
                        ),
                        promise_type: ep.promise_type.to_string(),
                        file: ep.file.to_string(),
                        line: ep.line,
                    })));
                }
            }
        }
        None
    }

    /// The `depends_on` handles that are not (yet) kept or repaired, in
    /// words; `None` when every one is.
    fn unmet_dependencies(&self, ep: &ExpandedPromise) -> Option<String> {
        let deps = match ep.attrs.get("depends_on") {
            Some(AttrValue::Value(Value::List(l))) => l.clone(),
            Some(AttrValue::Value(Value::Scalar(s))) => vec![s.clone()],
            _ => return None,
        };
        let unmet: Vec<(&String, String)> = deps
            .iter()
            .filter(|d| !self.ctx.done_handles.contains(*d))
            .filter_map(|d| match self.handles.get(d) {
                Some(Outcome::Kept | Outcome::Repaired) => None,
                Some(o) => Some((d, format!("'{d}' ended {}", o.as_str()))),
                None => Some((d, format!("'{d}' has not run"))),
            })
            .collect();
        let (first, _) = unmet.first()?;
        crate::eval::promises::skipping_for_dependency(&ep.promiser, first);
        let said: Vec<&str> = unmet.iter().map(|(_, s)| s.as_str()).collect();
        Some(format!("depends_on is not met: {}", said.join(", ")))
    }

    /// Runs an actuator. `None` when the promise type has none yet.
    fn act(&mut self, ep: &ExpandedPromise) -> Option<Outcome> {
        // A report that returns a value to the calling method prints nothing.
        if &*ep.promise_type == "reports"
            && let Some(idx) = ep.scalar("bundle_return_value_index")
        {
            return_value_constraints(ep);
            if let Some(rv) = self.return_values.last_mut() {
                rv.insert(idx.to_string(), ep.promiser.clone());
            }
            return Some(Outcome::Kept);
        }
        if self.ctx.settings.sandbox && refused_in_sandbox(&ep.promise_type) {
            crate::error!(
                "promises of type '{}' are refused in the sandbox: they could run programs \
                 ({}:{})",
                ep.promise_type,
                ep.file,
                ep.line
            );
            return Some(Outcome::Failed);
        }
        if let Some(why) = refused_attribute(ep) {
            crate::error!("{why} {}", ep.located());
            return Some(Outcome::Failed);
        }
        if !matches!(&*ep.promise_type, "reports" | "meta" | "defaults") {
            // A promise that may take long shows what was said before it.
            crate::host::out::flush();
        }
        if crate::schema::promise_type(&ep.promise_type).is_none() {
            // The modules are taken out while they act, since the context
            // they act in borrows the rest of the run.
            let mut modules = std::mem::take(&mut self.modules);
            // A custom promise may say `action_policy` itself.
            let warn_only =
                ep.warn_only() || matches!(ep.scalar("action_policy"), Some("warn" | "nop"));
            let mut act_ctx = self.act_context(Mode::of(self.dry_run, warn_only));
            let r = modules.evaluate(&mut act_ctx, ep);
            let changes = act_ctx.changes.take();
            self.last_changes.extend(changes);
            self.modules = modules;
            self.again_next_pass = !r.once;
            return r.outcome;
        }
        let Some(act) = actuator(&ep.promise_type) else {
            if self.unsupported.insert(ep.promise_type.to_string()) {
                crate::error!(
                    "promise type '{}' is not supported yet; its promises are skipped ({}:{})",
                    ep.promise_type,
                    ep.file,
                    ep.line
                );
            }
            return None;
        };
        // Under --simulate, files promises act, in the changes chroot;
        // everything else only says what it would do, as in a dry run.
        let in_chroot = &*ep.promise_type == "files" && self.host.changes_chroot().is_some();
        let dry_run = self.dry_run && !in_chroot;
        let mut act_ctx = self.act_context(Mode::of(dry_run, ep.warn_only()));
        let outcome = act.evaluate(&mut act_ctx, ep);
        let (followup, reported) = (act_ctx.followup.take(), act_ctx.reported_outcomes.take());
        let changes = act_ctx.changes.take();
        // Classes an actuator persists (a changes body's checksum_alerts).
        self.store_persistent_classes();
        let mut reported = reported;
        if let Some(f) = followup {
            // As cf-agent's VerifyMethod: the bundle's own outcome does not
            // change the promise's, but it is reported for the promise, so
            // its classes body defines that outcome's classes too (a home
            // bundle that changed nothing: kept as well as repaired).
            let mut call = ep.clone();
            call.attrs.insert("usebundle".into(), f.bundle);
            if f.inherit {
                call.attrs
                    .insert("inherit".into(), AttrValue::Value(Value::str("true")));
            }
            let called = self.eval_method(&call);
            crate::info!("{}", f.then_inform);
            if let Some(called) = called {
                let mut all = reported.take().unwrap_or_else(|| vec![outcome]);
                all.push(called);
                reported = Some(all);
            }
        }
        // After the follow-up, whose own promises report theirs.
        self.reported_outcomes = reported;
        self.last_changes.extend(changes);
        Some(outcome)
    }

    /// Keeps messages for the end of the run, each once: a promise that
    /// fails in every pass says so once.
    fn note_messages(&mut self, msgs: Vec<EvalMessage>) {
        for m in msgs {
            if !self.summary.messages.contains(&m) {
                self.summary.messages.push(m);
            }
        }
    }

    /// The action body's `log_string`, written where its `log_kept`,
    /// `log_repaired` or `log_failed` says for the promise's outcome, as
    /// cf-agent writes it (a new log file is made 0600,
    /// 00_basics/03_bodies/log_file_permissions.cf). Promises
    /// that only support evaluation log nothing.
    fn log_transaction(&self, ep: &ExpandedPromise, outcome: Outcome) {
        if NOT_LOGGED_TYPES.contains(&&*ep.promise_type) {
            return;
        }
        let Some(action) = ep.body("action") else {
            return;
        };
        let attr = match outcome {
            Outcome::Kept => "log_kept",
            Outcome::Repaired => "log_repaired",
            Outcome::Warned => return,
            Outcome::Failed | Outcome::Denied | Outcome::Timeout | Outcome::Interrupted => {
                "log_failed"
            }
        };
        let (Some(dest), Some(text)) = (action.scalar(attr), action.scalar("log_string")) else {
            return;
        };
        match dest {
            "stdout" => crate::info!("L: {text}"),
            "udp_syslog" => crate::error!(
                "{attr} => \"udp_syslog\" is not supported yet; '{text}' is not logged {}",
                ep.located()
            ),
            path => {
                crate::debug!("Logging string '{text}' to '{path}'");
                let line = format!("{text}\n");
                if let Err(e) = self
                    .host
                    .append(std::path::Path::new(path), line.as_bytes())
                {
                    crate::error!("Unable to open private log '{path}': {e}");
                }
            }
        }
    }

    /// Runs the operations the old package promises of a pass scheduled
    /// (`package_method`), and gives each promise the outcomes its
    /// command came to. True when a new class appeared.
    pub(super) fn run_package_schedule(&mut self) -> bool {
        let Some(workdir) = self
            .ctx
            .lookup("sys.workdir")
            .and_then(|v| v.as_scalar().map(std::path::PathBuf::from))
        else {
            return false;
        };
        let reported = crate::promises::packages::method::execute_schedule(
            &self.host,
            &workdir,
            &mut self.packages.legacy,
            self.dry_run,
        );
        let mut changed = false;
        for r in reported {
            for o in r.outcomes {
                changed |= self.set_outcome_classes(&r.promise, o);
                self.log_transaction(&r.promise, o);
            }
        }
        changed
    }

    /// Defines (and cancels) the classes a `classes` body asks for.
    /// Returns whether a new class appeared.
    /// A files promise that named several files sets its own for its
    /// promiser, with the groups its last file bound, as cf-agent does.
    fn set_outcome_classes(&mut self, ep: &ExpandedPromise, outcome: Outcome) -> bool {
        let own = ep.for_file(self.ctx, &ep.promiser, &[]);
        let Some(body) = own.as_ref().unwrap_or(ep).body("classes") else {
            return false;
        };
        define_outcome_classes(self.ctx, self.state.as_deref_mut(), self.now, body, outcome)
    }
}

/// cf-agent's default `expireafter`, in minutes (VEXPIREAFTER).
const DEFAULT_EXPIREAFTER_MINUTES: u64 = 120;

/// Whether a promise of this type notes in the state that it is acting, so
/// that an agent killed while it acts leaves the lock `expireafter` ends:
/// the types that act on the system (reports and the evaluation types are
/// over at once).
fn holds_running_lock(ptype: &str) -> bool {
    ptype != "reports"
        && !NOT_LOGGED_TYPES.contains(&ptype)
        && ptype != "meta"
        && ptype != "defaults"
}

/// Promise types whose outcomes cf-agent neither counts nor logs: they
/// support evaluation and change nothing on the system.
const NOT_LOGGED_TYPES: &[&str] = &[
    "vars",
    "classes",
    "insert_lines",
    "delete_lines",
    "replace_patterns",
    "field_edits",
];

/// A report that returns a value to its method and also says how to print
/// (`printfile`, `showstate`, `report_to_file`, a `lastseen` other than 0)
/// has the error cf-agent 3.21 logs each time it reads the report's
/// attributes (every pass); the value is returned all the same.
fn return_value_constraints(ep: &ExpandedPromise) {
    let lastseen = ep
        .scalar("lastseen")
        .and_then(|n| crate::values::number::parse_int(n).ok())
        .unwrap_or(0);
    if ["printfile", "showstate", "report_to_file"]
        .iter()
        .any(|a| ep.attrs.contains_key(*a))
        || lastseen != 0
    {
        crate::error!(
            "bundle_return_value promise for '{}' in bundle '{}' with too many constraints (ignored)",
            ep.promiser,
            ep.bundle
        );
    }
}

/// Why a promise is refused for an attribute it or one of its bodies has
/// (src/schema/support.tsv): an attribute the agent does not support is
/// never accepted and ignored.
fn refused_attribute(ep: &ExpandedPromise) -> Option<String> {
    use crate::schema::support::{Owner, refused};
    // The packages promise refuses the old package promise's attributes
    // and bodies in its own words (tests/it/packages.rs).
    if &*ep.promise_type == "packages" {
        return None;
    }
    // cf-agent forks a process of its own for a files promise whose action
    // body says `background` (commands run in the background as it does;
    // other promise types ignore it there too).
    if &*ep.promise_type == "files"
        && let Some(action) = ep.body("action")
        && action
            .scalar("background")
            .and_then(crate::values::number::parse_bool)
            == Some(true)
    {
        return Some(format!(
            "attribute 'background' of action body '{}' is not supported yet: files promises are not verified in a process of their own",
            action.name
        ));
    }
    // linkcopy_patterns links to the source's path, which is on this host
    // only for a local copy.
    if &*ep.promise_type == "files"
        && let Some(copy) = ep.body("copy_from")
        && !copy.list("linkcopy_patterns").is_empty()
        && copy
            .list("servers")
            .first()
            .is_some_and(|s| s != "localhost")
    {
        return Some(format!(
            "attribute 'linkcopy_patterns' of copy_from body '{}' is not supported yet with a server: it links to the source's path on this host",
            copy.name
        ));
    }
    for (name, value) in &ep.attrs {
        if let Some(why) = refused(Owner::Promise, &ep.promise_type, name) {
            return Some(format!("attribute '{name}' is not supported yet: {why}"));
        }
        if let AttrValue::Body(body) = value {
            for attr in body.attrs.keys() {
                if let Some(why) = refused(Owner::Body, name, attr) {
                    return Some(format!(
                        "attribute '{attr}' of {name} body '{}' is not supported yet: {why}",
                        body.name
                    ));
                }
            }
        }
    }
    None
}

/// Whether an acting promise whose every iteration is done may be passed
/// over while what its expansion read stays the same: not under -v or -d
/// (which tell each pass), not a type that checks or speaks in every pass
/// or that a module carries out, not a report returning a value (set again
/// each pass), and with no function that reads more than its arguments and
/// the stores.
fn settles(builtins: Builtins, ptype: &str, promise: &Promise) -> bool {
    !crate::report::log::verbose()
        && actuator(ptype).is_some_and(|a| !a.speaks_each_pass())
        && promise.attribute("bundle_return_value_index").is_none()
        && crate::eval::preeval::calls_only_pure_functions(builtins, promise)
}

/// Appends `n` as 16 lowercase hex digits (`{:016x}` without the
/// formatting machinery).
fn push_hex16(s: &mut String, n: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..16).rev() {
        s.push(char::from(DIGITS[((n >> (shift * 4)) & 0xf) as usize]));
    }
}

#[cfg(test)]
mod hex_tests {
    #[test]
    fn push_hex16_is_016x() {
        for n in [0u64, 1, 0xdead_beef, u64::MAX, 0x0123_4567_89ab_cdef] {
            let mut s = String::from("x/");
            super::push_hex16(&mut s, n);
            assert_eq!(s, format!("x/{n:016x}"));
        }
    }
}
