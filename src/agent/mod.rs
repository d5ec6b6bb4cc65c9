//! The agent run: the bundlesequence, each bundle's promise types in
//! normal ordering, up to three passes, and the bookkeeping that makes a
//! promise act once per run (reports, methods, actuators) while vars and
//! classes converge across passes.

pub mod graph;
pub mod transaction;
pub mod why;

use crate::eval::bodies::{BodyError, reference_parts};
use crate::eval::classes::ClassInfo;
use crate::eval::context::{EvalContext, Frame};
use crate::eval::expanded::{AttrValue, ExpandedPromise};
use crate::eval::expanded::{MAX_PASSES, attrs_key, define_outcome_classes, expand_attributes};
use crate::eval::promises::EvalMessage;
use crate::eval::vars::Variable;
use crate::host::{ChangeJournal, Host};
use crate::load::{LoadedFile, PolicySet};
use crate::promises::custom::PromiseModules;
use crate::promises::{ActContext, actuator};
use crate::report::Outcome;
use crate::report::json::JsonEvent;
use crate::report::{Counts, PromiseEvent, Sink};
use crate::state::journal::{Header, Journal};
use crate::state::{LockStatus, PersistentClass, StateStore};
use crate::syntax::ast::{Bundle, Promise, Rval};
use crate::values::value::{DataType, Origin, Value};
use indexmap::IndexMap;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use thiserror::Error;
use transaction::{order_by_priority, order_methods, priority_of_bundle, transaction_of};
use why::{Status, WhyLog};

/// Agent bundles' promise types in the order cf-agent evaluates them;
/// custom promise types follow in the order they are written.
pub const NORMAL_ORDER: &[&str] = &[
    "meta",
    "vars",
    "defaults",
    "classes",
    "users",
    "files",
    "packages",
    "guest_environments",
    "methods",
    "processes",
    "services",
    "commands",
    "storage",
    "databases",
    "reports",
];

/// cf-agent's default `ifelapsed`, in minutes.
pub const DEFAULT_IFELAPSED_MINUTES: u64 = 1;

/// How deeply methods may call bundles before we stop a runaway recursion.
const MAX_CALL_DEPTH: usize = 64;

#[derive(Debug, Error, PartialEq)]
pub enum RunError {
    #[error("no bundlesequence in body common control and no bundle 'main' to run")]
    NoBundlesequence,
    #[error("bundle '{0}' in the bundlesequence is not defined")]
    UndefinedBundle(String),
    #[error("bundle '{name}' takes {expected} arguments, but the bundlesequence gives {got}")]
    Arity {
        name: String,
        expected: usize,
        got: usize,
    },
    /// cf-agent aborts the whole run when a method names a bundle that does
    /// not exist ("Aborting due to missing bundle").
    #[error("aborting due to missing bundle '{0}'")]
    MethodMissingBundle(String),
    /// ... and when a method's arguments do not match the bundle's
    /// parameters ("formal and actual parameter mismatch is fatal").
    #[error("bundle '{name}' takes {expected} arguments, but a method gives {got}; aborting")]
    MethodArity {
        name: String,
        expected: usize,
        got: usize,
    },
}

/// One entry of the bundlesequence: a bundle name and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleCall {
    pub name: String,
    pub args: Vec<Value>,
}

/// What the run did, for the summary and the exit code.
#[derive(Debug, Default, Clone)]
pub struct RunSummary {
    pub counts: Counts,
    pub messages: Vec<EvalMessage>,
    /// The `abortclasses` class that stopped the run early.
    pub aborted: Option<String>,
}

/// The state of one agent run over a loaded, pre-evaluated policy.
pub struct AgentRun<'a> {
    pub ctx: &'a mut EvalContext,
    pub policy: &'a PolicySet,
    pub sink: &'a mut dyn Sink,
    pub dry_run: bool,
    /// Where promise locks and persistent classes live; `None` with `-K`
    /// for locks (persistent classes still need it) or in tests.
    pub state: Option<&'a mut StateStore>,
    /// How promises reach the system.
    pub host: crate::host::Host,
    /// Print diffs of file content changes.
    pub diff: bool,
    /// Ignore `ifelapsed` locks (`-K`).
    pub no_lock: bool,
    /// The run's clock, seconds since the epoch.
    pub now: i64,
    /// Promise iterations finished for this run, by key.
    done: HashSet<String>,
    /// Outcomes of promises with a handle, for `depends_on`.
    handles: HashMap<String, Outcome>,
    /// Promise types we have no actuator for, reported once each.
    unsupported: HashSet<String>,
    /// Outcomes of the bundles being run, innermost last (for methods).
    bundle_outcomes: Vec<Option<Outcome>>,
    /// Return values set by `bundle_return_value_index` reports.
    return_values: Vec<HashMap<String, String>>,
    /// The return values of the bundle that finished last.
    last_return_values: Option<HashMap<String, String>>,
    /// An error that ends the run at once, as cf-agent's fatal errors do.
    fatal: Option<RunError>,
    pub summary: RunSummary,
    /// Where transactional bundles keep their undo journals (the state
    /// directory); `None` runs transactions without one, which refuses them.
    pub state_dir: Option<std::path::PathBuf>,
    /// The transaction being run, if any (an inner one joins it).
    tx: Option<ActiveTx>,
    /// What became of each promise, for `--why`.
    pub why: WhyLog,
    /// The class of `abortclasses` that stopped the run.
    abort_run: Option<String>,
    /// A class of `abortbundleclasses` was defined: the bundle stops.
    abort_bundle: bool,
    /// The promise modules of custom promise types, running for the run.
    pub modules: PromiseModules,
    /// The promise just acted ended before its once-per-run lock.
    again_next_pass: bool,
    /// What this run knows of the package modules' caches.
    packages: crate::promises::packages::Session,
    /// The outcomes the last actuator reported, when not just its own
    /// (see [`ActContext::reported_outcomes`]).
    reported_outcomes: Option<Vec<Outcome>>,
}

/// A transactional bundle being run.
struct ActiveTx {
    namespace: String,
    bundle: String,
    journal: Arc<Journal>,
    /// The host as it was before the journal was attached.
    base_host: Host,
    /// The first promise that ended not kept, in words.
    failure: Option<String>,
}

/// Whether a bundle starts a transaction.
enum TxStart {
    /// Not a transaction, or already inside one.
    No,
    Started,
    /// A transaction whose journal could not be started: not run.
    Refused,
}

/// Whether anything in a pass changed the state another pass would see.
#[derive(Debug, Default, Clone, Copy)]
struct PassState {
    changed: bool,
    /// Something waits for a variable or class that may still appear.
    deferred: bool,
    last: bool,
}

impl<'a> AgentRun<'a> {
    pub fn new(
        ctx: &'a mut EvalContext,
        policy: &'a PolicySet,
        sink: &'a mut dyn Sink,
        dry_run: bool,
    ) -> AgentRun<'a> {
        AgentRun {
            ctx,
            policy,
            sink,
            dry_run,
            state: None,
            // A dry run remembers what it would have written, so that its
            // later promises (and diffs) see the files as a real run would.
            host: if dry_run {
                crate::host::Host::real().with_dry_run_overlay()
            } else {
                crate::host::Host::real()
            },
            diff: false,
            no_lock: true,
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
            done: HashSet::new(),
            handles: HashMap::new(),
            unsupported: HashSet::new(),
            bundle_outcomes: Vec::new(),
            return_values: Vec::new(),
            last_return_values: None,
            fatal: None,
            summary: RunSummary::default(),
            state_dir: None,
            tx: None,
            why: WhyLog::default(),
            abort_run: None,
            abort_bundle: false,
            modules: PromiseModules::default(),
            again_next_pass: false,
            packages: Default::default(),
            reported_outcomes: None,
        }
    }

    /// The bundles to run: `-b` if given, else body common control's
    /// bundlesequence, else `main`.
    pub fn bundlesequence(
        &mut self,
        override_seq: Option<&[String]>,
    ) -> Result<Vec<BundleCall>, RunError> {
        if let Some(names) = override_seq {
            return Ok(names
                .iter()
                .map(|n| BundleCall {
                    name: n.clone(),
                    args: Vec::new(),
                })
                .collect());
        }
        let control = self
            .policy
            .bodies()
            .find(|(_, b)| {
                b.body_type.name == "common" && b.name.name == "control" && b.namespace == "default"
            })
            .map(|(_, b)| b);
        if let Some(control) = control {
            let mut seq = None;
            for a in control.attributes_named("bundlesequence") {
                let guard = self.ctx.expand(&a.guard.expr).text;
                if self.ctx.eval_class_expr(guard.trim()).unwrap_or(false) {
                    seq = Some(&a.attr.value);
                }
            }
            if let Some(r) = seq {
                return Ok(self.calls_from_rval(r));
            }
        }
        if self.policy.bundle("default", "main").is_some() {
            return Ok(vec![BundleCall {
                name: "main".into(),
                args: Vec::new(),
            }]);
        }
        Err(RunError::NoBundlesequence)
    }

    fn calls_from_rval(&mut self, r: &Rval) -> Vec<BundleCall> {
        let items: Vec<&Rval> = match r {
            Rval::List { items, .. } => items.iter().collect(),
            other => vec![other],
        };
        let mut out = Vec::new();
        for item in items {
            match item {
                Rval::Call(_) => {
                    if let Ok((name, args)) = reference_parts(self.ctx, item, true) {
                        out.push(BundleCall { name, args });
                    }
                }
                other => {
                    if let Ok(e) = self.ctx.eval_rval(other) {
                        match e.value {
                            Value::Scalar(s) => out.push(BundleCall {
                                name: s,
                                args: Vec::new(),
                            }),
                            Value::List(l) => out.extend(l.into_iter().map(|name| BundleCall {
                                name,
                                args: Vec::new(),
                            })),
                            Value::Data(_) => {}
                        }
                    }
                }
            }
        }
        out
    }

    /// Runs the whole sequence. Bundles that are missing stop the run
    /// before anything acts, as cf-agent refuses such a policy. The
    /// promise modules the run started are told to terminate at its end,
    /// however it ends.
    pub fn run(&mut self, seq: &[BundleCall]) -> Result<(), RunError> {
        let r = self.run_sequence(seq);
        self.modules.terminate_all();
        r
    }

    fn run_sequence(&mut self, seq: &[BundleCall]) -> Result<(), RunError> {
        for call in seq {
            let Some((_, bundle)) = self.policy.bundle("default", &call.name) else {
                return Err(RunError::UndefinedBundle(call.name.clone()));
            };
            if bundle.params.len() != call.args.len() {
                return Err(RunError::Arity {
                    name: call.name.clone(),
                    expected: bundle.params.len(),
                    got: call.args.len(),
                });
            }
        }
        // Classes of common bundles that pre-evaluation asked to persist.
        self.store_persistent_classes();
        let policy = self.policy;
        crate::eval::preeval::evaluate_meta(self.ctx, policy);
        self.ctx.agent_control = crate::eval::control::AgentControl::resolve(self.ctx, policy);
        let prios: Vec<Option<i64>> = seq
            .iter()
            .map(|c| priority_of_bundle(self.ctx, policy, "default", &c.name))
            .collect();
        let ordered = order_by_priority(seq.iter().enumerate().collect(), |(i, _)| prios[*i]);
        for (_, call) in ordered {
            if let Some((file, bundle)) = self.policy.bundle("default", &call.name) {
                let (file, bundle) = (file.clone(), bundle.clone());
                self.run_bundle(&file, &bundle, &call.args, None);
            }
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
            if self.abort_run.is_some() {
                self.summary.aborted = self.abort_run.clone();
                break;
            }
        }
        self.update_package_inventory();
        Ok(())
    }

    /// cf-agent refreshes the package inventory after the bundles ran.
    fn update_package_inventory(&mut self) {
        // It asks the package modules, which are programs.
        if self.ctx.settings.sandbox {
            return;
        }
        let dry_run = self.dry_run;
        crate::promises::packages::update_inventory(&mut self.act_context(dry_run));
    }

    /// What an actuator may use of the run; `dry_run` changes nothing.
    fn act_context(&mut self, dry_run: bool) -> ActContext<'_> {
        ActContext {
            ctx: self.ctx,
            policy: self.policy,
            host: &self.host,
            dry_run,
            diff: self.diff,
            output: self.sink,
            state: self.state.as_deref_mut(),
            now: self.now,
            no_lock: self.no_lock,
            packages: &mut self.packages,
            reported_outcomes: None,
            followup: None,
        }
    }

    /// Checks the classes defined since the last look against agent
    /// control's `abortclasses` and `abortbundleclasses`; true when the
    /// current bundle must stop.
    fn check_aborts(&mut self) -> bool {
        if self.abort_run.is_some() {
            return true;
        }
        if self.ctx.newly_defined.is_empty() {
            return self.abort_bundle;
        }
        let fresh = std::mem::take(&mut self.ctx.newly_defined);
        let control = self.ctx.agent_control.clone();
        let matches = |ctx: &mut EvalContext, patterns: &[String], class: &str| {
            let bare = class.rsplit(':').next().unwrap_or(class);
            patterns
                .iter()
                .any(|p| ctx.regexes.get(p).is_ok_and(|re| re.is_full_match(bare)))
        };
        for class in fresh {
            if matches(self.ctx, &control.abortclasses, &class) {
                tracing::info!(
                    target: crate::report::log::NOTICE_TARGET,
                    "cf-agent aborted on defined class '{class}'"
                );
                self.abort_run = Some(class);
                return true;
            }
            if !self.abort_bundle && matches(self.ctx, &control.abortbundleclasses, &class) {
                let bundle = self
                    .ctx
                    .frame()
                    .map(|f| f.bundle.clone())
                    .unwrap_or_default();
                tracing::error!("Bundle '{bundle}' aborted on defined class '{class}'");
                self.abort_bundle = true;
            }
        }
        self.abort_bundle || self.abort_run.is_some()
    }

    /// Runs one bundle with its arguments. `inherit` carries the caller's
    /// local classes in (methods with `inherit => "true"`). Returns the
    /// aggregate outcome of its promises (None if nothing acted).
    pub fn run_bundle(
        &mut self,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        args: &[Value],
        inherit: Option<HashMap<String, ClassInfo>>,
    ) -> Option<Outcome> {
        let mut frame = Frame::new(
            &bundle.namespace,
            &bundle.name.name,
            &bundle.bundle_type.name,
        );
        if let Some(classes) = inherit {
            frame.local_classes = classes;
        }
        for (p, v) in bundle.params.iter().zip(args) {
            let dtype = v.natural_type();
            let var = Variable::new(v.clone(), dtype, Origin::Agent)
                .with_tags(vec!["source=promise".into()]);
            self.ctx
                .vars
                .put(&bundle.namespace, &bundle.name.name, &p.name, var);
        }
        let tx = self.begin_transaction(bundle);
        if matches!(tx, TxStart::Refused) {
            return Some(Outcome::Failed);
        }
        self.ctx.push_frame(frame);
        self.bundle_outcomes.push(None);
        self.return_values.push(HashMap::new());
        let common = bundle.bundle_type.name == "common";
        let order = ordered_sections(bundle);
        let policy = self.policy;
        // cf-agent always makes three passes; we stop when a pass changed
        // nothing, unless the bundle has promises whose checks speak in
        // every pass (processes, storage), where the output would show
        // the skip.
        let every_pass = order
            .iter()
            .any(|s| actuator(s.0).is_some_and(|a| a.speaks_each_pass()));
        let mut pass = 1;
        'passes: while pass <= MAX_PASSES {
            let mut state = PassState {
                last: pass == MAX_PASSES,
                ..PassState::default()
            };
            for (i, section) in order.iter().enumerate() {
                let promises: Vec<&Promise> = if section.0 == "methods" {
                    order_methods(self.ctx, policy, &bundle.namespace, section.1)
                } else {
                    section.1.iter().collect()
                };
                for promise in promises {
                    if self.fatal.is_some() {
                        break;
                    }
                    if self.ctx.out_of_time() {
                        break 'passes;
                    }
                    self.ctx.last_pass = state.last;
                    self.eval_promise(file, bundle, section.0, promise, common, &mut state);
                    if self.check_aborts() {
                        break 'passes;
                    }
                }
                // Once the classes are settled, cf-agent resolves the
                // bundle's variables again, so a variable guarded by a class
                // of this pass is there for the promises that follow.
                let last_classes =
                    section.0 == "classes" && order.get(i + 1).is_none_or(|n| n.0 != "classes");
                if last_classes {
                    self.ctx.last_pass = state.last;
                    for (_, promises) in order.iter().filter(|s| s.0 == "vars") {
                        for promise in *promises {
                            let (r, _) = self.ctx.eval_vars_promise(file, promise, Some(policy));
                            state.changed |= r.changed;
                        }
                    }
                }
            }
            if self.fatal.is_some() {
                break;
            }
            if !state.changed && !every_pass {
                if !state.deferred || state.last {
                    break;
                }
                // Nothing changed, so the passes in between would repeat
                // this one; go straight to the last, which prints what
                // never resolved.
                pass = MAX_PASSES;
                continue;
            }
            pass += 1;
        }
        // A bundle abort ends this bundle only; its caller goes on.
        self.abort_bundle = false;
        self.ctx.pop_frame();
        // cf-agent drops a bundle's parameters when the bundle returns:
        // `$(bundle.param)` does not resolve after the call.
        for p in &bundle.params {
            self.ctx
                .vars
                .remove(&bundle.namespace, &bundle.name.name, &p.name);
        }
        if matches!(tx, TxStart::Started) {
            self.end_transaction();
        }
        self.last_return_values = self.return_values.pop();
        self.bundle_outcomes.pop().flatten()
    }

    /// Starts a transaction when the bundle is one and none is running:
    /// opens its journal and attaches it to the host.
    fn begin_transaction(&mut self, bundle: &Bundle) -> TxStart {
        if self.tx.is_some() || transaction_of(self.ctx, bundle).is_none() {
            return TxStart::No;
        }
        let name = format!("{}:{}", bundle.namespace, bundle.name.name);
        if self.dry_run {
            tracing::info!(
                "Bundle '{name}' is a transaction; a dry run changes nothing, so nothing is journaled"
            );
            return TxStart::No;
        }
        let Some(dir) = self.state_dir.clone() else {
            tracing::error!(
                "Bundle '{name}' is a transaction, but this run has no state directory for its \
                 undo journal; it is not run"
            );
            return TxStart::Refused;
        };
        let header = Header {
            bundle: bundle.name.name.clone(),
            namespace: bundle.namespace.clone(),
            pid: std::process::id(),
            started: self.now,
        };
        match Journal::begin(&dir, &header) {
            Ok(j) => {
                let j = Arc::new(j);
                let base_host = self.host.clone();
                let journal: Arc<dyn ChangeJournal> = j.clone();
                self.host = self.host.with_journal(Some(journal));
                self.tx = Some(ActiveTx {
                    namespace: bundle.namespace.clone(),
                    bundle: bundle.name.name.clone(),
                    journal: j,
                    base_host,
                    failure: None,
                });
                TxStart::Started
            }
            Err(e) => {
                tracing::error!(
                    "Cannot start the undo journal of the transaction '{name}' in '{}': {e}; \
                     the bundle is not run",
                    dir.display()
                );
                TxStart::Refused
            }
        }
    }

    /// Ends the running transaction: forgets its journal when every
    /// promise was kept or repaired, else undoes its changes and says
    /// which and why.
    fn end_transaction(&mut self) {
        let Some(tx) = self.tx.take() else { return };
        self.host = tx.base_host;
        let name = format!("{}:{}", tx.namespace, tx.bundle);
        let Some(reason) = tx.failure else {
            if let Err(e) = tx.journal.commit() {
                tracing::error!("Cannot remove the undo journal of '{name}': {e}");
            }
            return;
        };
        tracing::error!(
            "Transaction '{name}' failed: {reason}; undoing its changes to {} path(s)",
            tx.journal.len()
        );
        let undo = tx.journal.rollback();
        for r in &undo.restored {
            tracing::info!(target: crate::report::log::NOTICE_TARGET, "Rolled back ({name}): {r}");
        }
        for f in &undo.failed {
            tracing::error!("Could not roll back ({name}): {f}");
        }
        self.sink.event(&JsonEvent::Rollback {
            bundle: tx.bundle,
            namespace: tx.namespace,
            reason,
            restored: undo.restored,
            failed: undo.failed,
            recovered: false,
        });
    }

    fn record_bundle_outcome(&mut self, o: Outcome) {
        if let Some(slot) = self.bundle_outcomes.last_mut() {
            *slot = Some(slot.map_or(o, |prev| prev.worst(o)));
        }
    }

    fn eval_promise(
        &mut self,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        ptype: &str,
        promise: &Promise,
        common: bool,
        state: &mut PassState,
    ) {
        match ptype {
            "vars" => {
                let (r, msgs) = self.ctx.eval_vars_promise(file, promise, Some(self.policy));
                state.changed |= r.changed;
                state.deferred |= r.deferred;
                // A failure is final; what waits is told in the last pass.
                if state.last || r.failed {
                    self.note_messages(msgs);
                }
            }
            "classes" => {
                let (r, msgs) = self.ctx.eval_classes_promise(file, promise, common);
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
                let (r, _) = self.ctx.eval_vars_promise(file, promise, Some(self.policy));
                self.ctx.pop_frame();
                state.changed |= r.changed;
            }
            _ => self.eval_acting_promise(file, bundle, ptype, promise, state),
        }
    }

    /// Promises that act (reports, methods, files, commands, ...): once
    /// per run per iteration.
    fn eval_acting_promise(
        &mut self,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        ptype: &str,
        promise: &Promise,
        state: &mut PassState,
    ) {
        self.ctx.enter_promise(file, promise);
        let texts = self.ctx.promise_texts(promise, &["depends_on"]);
        let mut work: Vec<ExpandedPromise> = Vec::new();
        let mut deferred = false;
        let last = state.last;
        let policy = self.policy;
        let line = file.source.line_of(promise.promiser.span.start);
        let mut failures: Vec<(String, String)> = Vec::new();
        // Iterations that did not get as far as acting, and why (`--why`).
        let mut skipped: Vec<(String, String)> = Vec::new();
        // cf-agent hands a custom promise to its module code even while
        // parts of it are unresolved; that code fails it until they
        // resolve (see `promises::custom`).
        let custom = crate::schema::promise_type(ptype).is_none();
        self.ctx.for_each_promise_iteration(promise, &texts, &mut |ctx| {
            match ctx.promise_condition(promise) {
                Some(true) => {}
                Some(false) => {
                    let shown = ctx.expand_promiser(&promise.promiser.value).text;
                    skipped.push((shown, why::condition_reason(ctx, promise)));
                    return;
                }
                None => {
                    deferred = true;
                    let shown = ctx.expand_promiser(&promise.promiser.value).text;
                    let names = why::unresolved_variables(ctx, promise).join(", ");
                    skipped.push((
                        shown,
                        format!("its condition refers to variables that did not resolve: {names}"),
                    ));
                    return;
                }
            }
            let promiser = ctx.expand_promiser(&promise.promiser.value);
            // An unresolved promiser waits; reports print it as written in
            // the last pass, and methods run at once, as cf-agent does.
            if promiser.unresolved
                && ptype != "methods"
                && !custom
                && !(last && ptype == "reports")
            {
                deferred = true;
                let names = why::unresolved_variables(ctx, promise).join(", ");
                skipped.push((
                    promiser.text,
                    format!("its promiser refers to variables that did not resolve: {names}"),
                ));
                return;
            }
            ctx.set_this("promiser", Value::str(promiser.text.clone()));
            match expand_attributes(ctx, policy, promise) {
                Ok(attrs) => {
                    let handle = match attrs.get("handle") {
                        Some(AttrValue::Value(Value::Scalar(h))) => Some(h.clone()),
                        _ => None,
                    };
                    work.push(ExpandedPromise {
                        promise_type: ptype.to_string(),
                        promiser: promiser.text,
                        attrs,
                        bundle: bundle.name.name.clone(),
                        namespace: bundle.namespace.clone(),
                        file: file.source.path.clone(),
                        line,
                        handle,
                        unresolved: false,
                    });
                }
                Err(BodyError::Defer) if custom => work.push(ExpandedPromise {
                    promise_type: ptype.to_string(),
                    promiser: promiser.text,
                    attrs: IndexMap::new(),
                    bundle: bundle.name.name.clone(),
                    namespace: bundle.namespace.clone(),
                    file: file.source.path.clone(),
                    line,
                    handle: None,
                    unresolved: true,
                }),
                Err(BodyError::Defer) => {
                    deferred = true;
                    let names = why::unresolved_variables(ctx, promise).join(", ");
                    skipped.push((
                        promiser.text,
                        format!(
                            "its attributes refer to variables or bodies that did not resolve: {names}"
                        ),
                    ));
                }
                Err(e) => failures.push((promiser.text, e.to_string())),
            }
        });
        state.deferred |= deferred;
        let site = why::Site {
            file: &file.source.path,
            line,
            namespace: &bundle.namespace,
            bundle: &bundle.name.name,
            promise_type: ptype,
            promise,
        };
        // The handle as written, for iterations that were not expanded.
        let written_handle = match promise.attribute("handle").map(|a| &a.value) {
            Some(Rval::String(h)) => Some(self.ctx.expand(&h.value).text),
            _ => None,
        };
        for (shown, reason) in skipped {
            self.why.record(
                &site,
                written_handle.as_deref(),
                &shown,
                Status::Skipped { reason },
            );
        }
        for (shown, f) in failures {
            if last {
                tracing::error!("{f} (in a {ptype} promise at {}:{line})", file.source.path);
            }
            self.why.record(
                &site,
                written_handle.as_deref(),
                &shown,
                Status::Skipped { reason: f },
            );
        }
        for ep in work {
            if self.fatal.is_some() {
                return;
            }
            // cf-agent's once-per-run lock names the bundle, the type, the
            // promiser and the attributes, not where the promise is written:
            // two identical promises act once, and a bundle called again
            // does not repeat what it did.
            let key = format!(
                "{}:{}\u{1}{ptype}\u{1}{}\u{1}{}",
                ep.namespace,
                ep.bundle,
                ep.promiser,
                attrs_key(&ep.attrs)
            );
            if let Some(a) = actuator(ptype) {
                a.check_each_pass(&ep);
            }
            if self.done.contains(&key) {
                continue;
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
                    .record(&site, handle, &ep.promiser, Status::Skipped { reason });
                continue;
            }
            if let Some(reason) = self.unmet_dependencies(&ep) {
                state.deferred = true;
                self.why
                    .record(&site, handle, &ep.promiser, Status::Skipped { reason });
                continue;
            }
            let lock_key = format!(
                "{}:{}/{ptype}/{:016x}",
                ep.namespace,
                ep.bundle,
                fnv1a(&key)
            );
            if let Some(reason) = self.lock_held(&ep, &lock_key) {
                self.done.insert(key);
                self.why
                    .record(&site, handle, &ep.promiser, Status::Skipped { reason });
                continue;
            }
            let span = tracing::info_span!(crate::report::log::PROMISE_SPAN);
            let entered = span.enter();
            let started = std::time::Instant::now();
            let outcome = if ptype == "methods" {
                self.eval_method(&ep)
            } else if let Some((bundle, args)) = self.service_bundle(&ep) {
                // A services promise handled by a bundle, as cf-agent hands
                // it to standard_services(service, policy), or to the
                // service_method's bundle with the arguments it gives.
                let policy = ep.scalar("service_policy").unwrap_or("start").to_string();
                let args = args
                    .unwrap_or_else(|| vec![Value::str(ep.promiser.clone()), Value::str(policy)]);
                let mut call = ep.clone();
                call.attrs
                    .insert("usebundle".into(), AttrValue::Bundle { name: bundle, args });
                self.eval_method(&call)
            } else {
                self.act(&ep)
            };
            let duration = started.elapsed();
            let changes = crate::report::log::take_captured();
            drop(entered);
            // A promise that ended before its once-per-run lock is tried
            // again in the next pass, as cf-agent's passes do.
            let again = std::mem::take(&mut self.again_next_pass);
            state.changed |= again;
            let Some(outcome) = outcome else {
                let reason = if custom {
                    format!("promise type '{ptype}' is not defined by any 'promise agent' block")
                } else {
                    format!("promise type '{ptype}' is not supported yet")
                };
                self.why
                    .record(&site, handle, &ep.promiser, Status::Skipped { reason });
                continue;
            };
            self.why.record(
                &site,
                handle,
                &ep.promiser,
                Status::Ran {
                    outcome: outcome.as_str().to_string(),
                    changes: changes.clone(),
                },
            );
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
            // Under -K cf-agent neither honours nor leaves promise locks.
            if !again {
                self.done.insert(key);
                if !self.no_lock
                    && let Some(st) = self.state.as_deref_mut()
                {
                    st.record_done(&lock_key, self.now);
                }
            }
            state.changed |= outcome == Outcome::Repaired;
            match self.reported_outcomes.take() {
                Some(reported) => {
                    for o in reported {
                        state.changed |= self.set_outcome_classes(&ep, o);
                    }
                }
                None => state.changed |= self.set_outcome_classes(&ep, outcome),
            }
            if let Some(h) = &ep.handle {
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
                changes,
                duration,
            });
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
                tracing::info!(
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

    /// The bundle that implements a services promise, with the arguments
    /// the service_method gives it: its `service_bundle`, else a
    /// `standard_services` bundle the policy defines (called with the
    /// service and the policy); `None` means our built-in service manager.
    fn service_bundle(&self, ep: &ExpandedPromise) -> Option<(String, Option<Vec<Value>>)> {
        if ep.promise_type != "services" {
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

    /// The `depends_on` handles that are not (yet) kept or repaired, in
    /// words; `None` when every one is.
    fn unmet_dependencies(&self, ep: &ExpandedPromise) -> Option<String> {
        let deps = match ep.attrs.get("depends_on") {
            Some(AttrValue::Value(Value::List(l))) => l.clone(),
            Some(AttrValue::Value(Value::Scalar(s))) => vec![s.clone()],
            _ => return None,
        };
        let unmet: Vec<String> = deps
            .iter()
            .filter_map(|d| match self.handles.get(d) {
                Some(Outcome::Kept | Outcome::Repaired) => None,
                Some(o) => Some(format!("'{d}' ended {}", o.as_str())),
                None => Some(format!("'{d}' has not run")),
            })
            .collect();
        (!unmet.is_empty()).then(|| format!("depends_on is not met: {}", unmet.join(", ")))
    }

    /// Runs an actuator. `None` when the promise type has none yet.
    fn act(&mut self, ep: &ExpandedPromise) -> Option<Outcome> {
        // A report that returns a value to the calling method prints nothing.
        if ep.promise_type == "reports"
            && let Some(idx) = ep.scalar("bundle_return_value_index")
        {
            if let Some(rv) = self.return_values.last_mut() {
                rv.insert(idx.to_string(), ep.promiser.clone());
            }
            return Some(Outcome::Kept);
        }
        if self.ctx.settings.sandbox && refused_in_sandbox(&ep.promise_type) {
            tracing::error!(
                "promises of type '{}' are refused in the sandbox: they could run programs \
                 ({}:{})",
                ep.promise_type,
                ep.file,
                ep.line
            );
            return Some(Outcome::Failed);
        }
        if crate::schema::promise_type(&ep.promise_type).is_none() {
            // The modules are taken out while they act, since the context
            // they act in borrows the rest of the run.
            let mut modules = std::mem::take(&mut self.modules);
            let dry_run = self.dry_run;
            let r = modules.evaluate(&mut self.act_context(dry_run), ep);
            self.modules = modules;
            self.again_next_pass = !r.once;
            return r.outcome;
        }
        let Some(act) = actuator(&ep.promise_type) else {
            if self.unsupported.insert(ep.promise_type.clone()) {
                tracing::error!(
                    "promise type '{}' is not supported yet; its promises are skipped ({}:{})",
                    ep.promise_type,
                    ep.file,
                    ep.line
                );
            }
            return None;
        };
        let dry_run = self.dry_run || ep.warn_only();
        let mut act_ctx = self.act_context(dry_run);
        let outcome = act.evaluate(&mut act_ctx, ep);
        let (followup, reported) = (act_ctx.followup.take(), act_ctx.reported_outcomes.take());
        if let Some(f) = followup {
            // As cf-agent's VerifyMethod: the bundle's own outcome does not
            // change the promise's.
            let mut call = ep.clone();
            call.attrs.insert("usebundle".into(), f.bundle);
            if f.inherit {
                call.attrs
                    .insert("inherit".into(), AttrValue::Value(Value::str("true")));
            }
            self.eval_method(&call);
            tracing::info!("{}", f.then_inform);
        }
        // After the follow-up, whose own promises report theirs.
        self.reported_outcomes = reported;
        Some(outcome)
    }

    /// `methods`: run the named bundle and take its outcome.
    fn eval_method(&mut self, ep: &ExpandedPromise) -> Option<Outcome> {
        let (name, args) = match ep.attrs.get("usebundle") {
            Some(AttrValue::Bundle { name, args }) => (name.clone(), args.clone()),
            // Without usebundle, the promiser names the bundle.
            _ => (ep.promiser.clone(), Vec::new()),
        };
        let Some((file, bundle)) = self.policy.bundle(&ep.namespace, &name) else {
            tracing::error!(
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
            tracing::warn!(
                "Bundle '{name}' should be invoked, but only a warning was promised! ({}:{})",
                ep.file,
                ep.line
            );
            return Some(Outcome::Failed);
        }
        if bundle.params.len() != args.len() {
            tracing::error!(
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
            tracing::error!(
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
        let (file, bundle) = (file.clone(), bundle.clone());
        let outcome = self.run_bundle(&file, &bundle, &args, inherit);
        // cf-agent's verdict on the call, in its words.
        match outcome {
            Some(Outcome::Warned) => {
                tracing::warn!(
                    "Method '{}' invoked repairs, but only warnings promised",
                    bundle.name.name
                )
            }
            Some(Outcome::Failed | Outcome::Denied) => {
                tracing::error!("Method '{}' failed in some repairs", bundle.name.name)
            }
            Some(Outcome::Timeout | Outcome::Interrupted) => {
                tracing::info!("Method '{}' aborted in some repairs", bundle.name.name)
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

    /// Keeps messages for the end of the run, each once: a promise that
    /// fails in every pass says so once.
    fn note_messages(&mut self, msgs: Vec<EvalMessage>) {
        for m in msgs {
            if !self.summary.messages.contains(&m) {
                self.summary.messages.push(m);
            }
        }
    }

    /// Defines (and cancels) the classes a `classes` body asks for.
    /// Returns whether a new class appeared.
    fn set_outcome_classes(&mut self, ep: &ExpandedPromise, outcome: Outcome) -> bool {
        let Some(body) = ep.body("classes") else {
            return false;
        };
        define_outcome_classes(self.ctx, self.state.as_deref_mut(), self.now, body, outcome)
    }
}

impl AgentRun<'_> {
    /// Stores the classes that classes promises asked to persist (their
    /// timers restart, as cf-agent's default `reset` policy does).
    fn store_persistent_classes(&mut self) {
        for (name, minutes) in std::mem::take(&mut self.ctx.persist_requests) {
            let Some(st) = self.state.as_deref_mut() else {
                continue;
            };
            let class = PersistentClass {
                name,
                expires: self.now + minutes * 60,
                tags: Vec::new(),
            };
            if let Err(e) = st.persist_class(&class, true) {
                tracing::error!("{e}");
            }
        }
    }
}

/// The sections of a bundle in normal order; within a type, sections and
/// promises in the order written. Custom types follow in written order.
/// Whether the fuzzer's sandbox (`EvalSettings::sandbox`) refuses a
/// promise type: those whose actuators run programs or signal processes,
/// even to check (package modules, `systemctl`, `mount`), and custom
/// promise types, whose modules are programs.
pub fn refused_in_sandbox(promise_type: &str) -> bool {
    matches!(
        promise_type,
        "commands" | "packages" | "services" | "users" | "processes" | "storage"
    ) || crate::schema::promise_type(promise_type).is_none()
}

fn ordered_sections(bundle: &Bundle) -> Vec<(&str, &[Promise])> {
    let mut types: Vec<&str> = NORMAL_ORDER.to_vec();
    for s in &bundle.sections {
        let n = s.promise_type.name.as_str();
        if !types.contains(&n) {
            types.push(n);
        }
    }
    types
        .into_iter()
        .flat_map(|t| {
            bundle
                .sections
                .iter()
                .filter(move |s| s.promise_type.name == t)
                .map(|s| (s.promise_type.name.as_str(), s.promises.as_slice()))
        })
        .collect()
}

/// FNV-1a: a small hash that is the same in every build, for lock names
/// stored across runs.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
