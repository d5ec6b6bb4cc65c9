//! The agent run: the bundlesequence, each bundle's promise types in
//! normal ordering, three passes, and the bookkeeping that makes a
//! promise act once per run (reports, methods, actuators) while vars and
//! classes converge across passes.

mod bundles;
pub mod graph;
mod methods;
mod promise;
pub mod schedule;
pub mod transaction;
mod verbose;
pub mod why;

use crate::eval::bodies::reference_parts;
use crate::eval::classes::ClassInfo;
use crate::eval::context::{EvalContext, Frame};
use crate::eval::expanded::MAX_PASSES;
use crate::eval::promises::EvalMessage;
use crate::eval::vars::Variable;
use crate::host::clock::Clock;
use crate::host::{ChangeJournal, Host};
use crate::load::{LoadedFile, PolicySet};
use crate::promises::custom::PromiseModules;
use crate::promises::{ActContext, actuator};
use crate::report::Outcome;
use crate::report::change::{Changes, Mode};
use crate::report::json::JsonEvent;
use crate::report::{Counts, Sink};
use crate::state::journal::{Header, Journal};
use crate::state::{PersistentClass, StateStore};
use crate::syntax::ast::{Bundle, Promise, Rval};
use crate::values::value::{Origin, Value};
use indexmap::IndexMap;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use thiserror::Error;
use transaction::{order_by_priority, order_methods, priority_of_bundle, transaction_of};
use why::WhyLog;

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
    /// A broken `inherit_from` chain stops cf-agent at the first promise
    /// that uses the body.
    #[error("{0}")]
    BrokenBody(Box<FatalAt>),
    /// So does a function giving one value to an attribute that takes a
    /// list ("Attempted to give a scalar to a non-scalar type"), or a
    /// call whose arguments do not fit once the lists of the calls in
    /// them are spread ("Bad arguments").
    #[error("{0}")]
    Evaluation(Box<FatalAt>),
    /// So does an option attribute whose value, once expanded, is not one
    /// of its words ("Selection is out of bounds").
    #[error("{0}")]
    OptionOutOfRange(Box<FatalAt>),
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
    /// Agent control's `agentaccess` does not list the user running the
    /// agent, and a policy file's owner is not listed either...
    #[error("File '{0}' is not owned by an authorized user (security exception)")]
    NotOwned(String),
    /// ... or all are: cf-agent's CheckAgentAccess stops the run all the
    /// same.
    #[error("You are denied access to run this policy")]
    AccessDenied,
}

/// What stopped the run at a promise, and where the promise is written.
#[derive(Debug, PartialEq, Error)]
#[error("{what} (in a {promise_type} promise at {file}:{line}); aborting")]
pub struct FatalAt {
    pub what: String,
    pub promise_type: String,
    pub file: String,
    pub line: usize,
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
    /// With `-p`/`--profile`: the time of each bundle and promise.
    pub profile: Option<Vec<crate::report::profile::Event>>,
}

/// The state of one agent run over a loaded, pre-evaluated policy.
pub struct AgentRun<'a> {
    ctx: &'a mut EvalContext,
    policy: &'a PolicySet,
    sink: &'a mut dyn Sink,
    dry_run: bool,
    /// Where promise locks and persistent classes live; `None` with `-K`
    /// for locks (persistent classes still need it) or in tests.
    state: Option<&'a mut StateStore>,
    /// How promises reach the system.
    host: crate::host::Host,
    /// Print diffs of file content changes.
    diff: bool,
    /// Ignore `ifelapsed` locks (`-K`).
    no_lock: bool,
    /// The run's clock, seconds since the epoch, read once at its start.
    now: i64,
    /// Promise iterations finished for this run, by key.
    /// (see [`done_key`]).
    done: HashSet<u128, foldhash::fast::RandomState>,
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
    summary: RunSummary,
    /// Where transactional bundles keep their undo journals (the state
    /// directory); `None` runs transactions without one, which refuses them.
    state_dir: Option<std::path::PathBuf>,
    /// The transaction being run, if any (an inner one joins it).
    tx: Option<ActiveTx>,
    /// What became of each promise, for `--why`.
    why: WhyLog,
    /// The class of `abortclasses` that stopped the run.
    abort_run: Option<String>,
    /// A class of `abortbundleclasses` was defined: the bundle stops.
    abort_bundle: bool,
    /// The promise modules of custom promise types, running for the run.
    modules: PromiseModules,
    /// The promise just acted ended before its once-per-run lock.
    again_next_pass: bool,
    /// The vars and classes promises whose last evaluation in the passes
    /// read nothing that changed since: each pass resolves a bundle's
    /// variables twice, three passes, and such a promise would give the
    /// same again.
    settled: crate::eval::preeval::Settled,
    /// The acting promises whose every iteration is done for the run, by
    /// the promise's address: what their last expansion read from the
    /// variables and the classes. While none of it changes, expanding
    /// them again would only find each iteration done.
    settled_acting: HashMap<usize, (crate::eval::reads::Reads, crate::eval::reads::Reads)>,
    /// Set by `gate` when it passes over an iteration already done.
    gate_found_done: bool,
    /// The promise just met ended without an outcome as cf-agent's
    /// "skipped" (its actuator's [`crate::promises::Actuator::skipped`]):
    /// it is done for the run all the same.
    skipped_here: bool,
    /// What this run knows of the package modules' caches.
    packages: crate::promises::packages::Session,
    /// Connections to servers, kept for the run.
    remote: crate::remote::client::Sessions,
    /// The changes the last actuator made or would have made.
    last_changes: Vec<crate::report::change::Change>,
    /// The outcomes the last actuator reported, when not just its own
    /// (see [`ActContext::reported_outcomes`]).
    reported_outcomes: Option<Vec<Outcome>>,
    /// The arguments of the bundle being run, as verbose lines write them:
    /// set when a bundle with arguments starts, cleared when a method
    /// returns, as cf-agent keeps them.
    bundle_args: Option<String>,
    /// cf-agent's stack path down to the bundle being run, one entry per
    /// bundle and per method that called one, for verbose lines.
    stack: Vec<String>,
    /// The arguments of the method about to call a bundle, as written,
    /// which verbose lines show for those that are whole list or data
    /// references (`@(l)`), as cf-agent does.
    written_args: Option<Vec<Rval>>,
    /// `-p`/`--profile`: the bundles and promises timed.
    profiler: Option<crate::report::profile::Profiler>,
    /// Runs the bundles actuators run (edit bundles); under -v it knows
    /// where the promise that runs one is.
    runner: bundles::Runner,
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

/// Where a bundle's passes are.
#[derive(Debug, Default, Clone, Copy)]
struct PassState {
    /// The third pass, in which what never resolved is told.
    last: bool,
    /// Something changed that a later pass would see: a variable or class
    /// set, a promise repaired or tried again, a handle's outcome.
    changed: bool,
    /// Something waits for a variable, class or handle that may appear.
    deferred: bool,
}

/// How a run is to be made: everything an [`AgentRun`] takes besides the
/// evaluated policy and where its events go.
pub struct RunSetup<'a> {
    /// Change nothing; say what would change.
    pub dry_run: bool,
    /// Ignore `ifelapsed` locks and leave none (`-K`).
    pub no_lock: bool,
    /// Print diffs of file content changes.
    pub diff: bool,
    /// Where promise locks and persistent classes live.
    pub state: Option<&'a mut StateStore>,
    /// Where transactional bundles keep their undo journals.
    pub state_dir: Option<std::path::PathBuf>,
    /// The promise modules of custom promise types.
    pub modules: PromiseModules,
    /// How promises reach the system.
    pub host: Host,
    /// Where the run reads the time.
    pub clock: Clock,
    /// `-p`/`--profile`: time each bundle and promise.
    pub profile: bool,
}

impl RunSetup<'_> {
    /// A run on this host without locks, state or modules: what tests
    /// and the sandbox start from. A dry run remembers what it would have
    /// written, so that its later promises (and diffs) see the files as a
    /// real run would.
    pub fn new(dry_run: bool) -> Self {
        RunSetup {
            dry_run,
            no_lock: true,
            diff: false,
            state: None,
            state_dir: None,
            modules: PromiseModules::default(),
            host: if dry_run {
                Host::real().with_dry_run_overlay()
            } else {
                Host::real()
            },
            clock: Clock::System,
            profile: false,
        }
    }
}

impl<'a> AgentRun<'a> {
    pub fn new(
        ctx: &'a mut EvalContext,
        policy: &'a PolicySet,
        sink: &'a mut dyn Sink,
        setup: RunSetup<'a>,
    ) -> AgentRun<'a> {
        let preeval_settled = ctx.preeval_settled.take();
        AgentRun {
            ctx,
            policy,
            sink,
            dry_run: setup.dry_run,
            state: setup.state,
            host: setup.host,
            diff: setup.diff,
            no_lock: setup.no_lock,
            now: setup.clock.now_secs(),
            done: HashSet::default(),
            handles: HashMap::new(),
            unsupported: HashSet::new(),
            bundle_outcomes: Vec::new(),
            return_values: Vec::new(),
            last_return_values: None,
            fatal: None,
            summary: RunSummary::default(),
            state_dir: setup.state_dir,
            tx: None,
            why: WhyLog::default(),
            abort_run: None,
            abort_bundle: false,
            modules: setup.modules,
            again_next_pass: false,
            settled: crate::eval::preeval::Settled::for_the_run_after(preeval_settled),
            settled_acting: HashMap::new(),
            gate_found_done: false,
            skipped_here: false,
            last_changes: Vec::new(),
            packages: Default::default(),
            remote: Default::default(),
            reported_outcomes: None,
            bundle_args: None,
            stack: Vec::new(),
            written_args: None,
            profiler: setup.profile.then(Default::default),
            runner: bundles::Runner::default(),
        }
    }

    /// What the run did, once it is over.
    pub fn into_summary(mut self) -> RunSummary {
        self.summary.profile = self.profiler.take().map(|p| p.finish());
        self.summary
    }

    /// What became of each promise, for `--why`.
    pub fn why_mut(&mut self) -> &mut WhyLog {
        &mut self.why
    }

    /// The bundles to run: `-b` if given, else body common control's
    /// bundlesequence, else `main`.
    pub fn bundlesequence(
        &mut self,
        override_seq: Option<&[String]>,
    ) -> Result<Vec<BundleCall>, RunError> {
        bundlesequence(self.ctx, self.policy, override_seq)
    }

    /// Runs the whole sequence. Bundles that are missing stop the run
    /// before anything acts, as cf-agent refuses such a policy. The
    /// promise modules the run started are told to terminate at its end,
    /// however it ends.
    pub fn run(&mut self, seq: &[BundleCall]) -> Result<(), RunError> {
        // Changes are stamped for the whole run, for `settled`.
        self.ctx.vars.reads.set_tracking(true);
        self.ctx.classes.reads.set_tracking(true);
        let r = self.run_sequence(seq);
        self.ctx.vars.reads.set_tracking(false);
        self.ctx.classes.reads.set_tracking(false);
        self.modules.terminate_all();
        // As cf-agent waits for the children it forked for promises with
        // `background` before its end-of-run reports.
        crate::host::exec::wait_for_background();
        if self.ctx.agent_control.allclassesreport {
            self.all_classes_report();
        }
        r
    }

    /// Agent control's `allclassesreport`: every class defined at the end
    /// of the run, one a line, in the state directory's `allclasses.txt`
    /// (cf-agent's AllClassesReport).
    fn all_classes_report(&self) {
        let Some(dir) = self
            .ctx
            .lookup_variable("sys.statedir")
            .and_then(|v| v.value.as_scalar().map(str::to_string))
        else {
            return;
        };
        let path = std::path::Path::new(&dir).join("allclasses.txt");
        let mut text = String::new();
        for (name, _) in self.ctx.classes.iter() {
            text.push_str(name);
            text.push('\n');
        }
        if let Err(e) = self.host.write_atomic(&path, text.as_bytes(), 0o600) {
            crate::info!(
                "Could not open allclasses cache file '{}' (fopen: {e})",
                path.display()
            );
        }
    }

    fn run_sequence(&mut self, seq: &[BundleCall]) -> Result<(), RunError> {
        // cf-agent sets its default package inventory again, resolved,
        // when it keeps its control promises, before any bundle.
        self.ctx.default_inventory = self.ctx.common_control("package_inventory").cloned();
        verbose::banner("Preliminary variable/class-context convergence");
        crate::eval::preeval::preliminary_convergence(self.ctx, self.policy);
        let ignore_missing = self.ctx.common_control_flag("ignore_missing_bundles");
        for call in seq {
            let Some((_, bundle)) = self.policy.bundle("default", &call.name) else {
                // cf-agent skips such a bundle when told to (the loop below
                // runs only the bundles that exist).
                if ignore_missing {
                    crate::info!("Ignoring missing bundle '{}'", call.name);
                    continue;
                }
                return Err(RunError::UndefinedBundle(call.name.clone()));
            };
            // Named without arguments, a bundle that takes some runs with
            // its parameters unset, as in cf-agent; other counts are fatal.
            if !call.args.is_empty() && bundle.params.len() != call.args.len() {
                return Err(RunError::Arity {
                    name: call.name.clone(),
                    expected: bundle.params.len(),
                    got: call.args.len(),
                });
            }
        }
        // Classes of common bundles that pre-evaluation asked to persist.
        self.store_persistent_classes();
        verbose::banner("Begin policy/promise evaluation");
        verbose::bundlesequence(&seq.iter().map(|c| c.name.clone()).collect::<Vec<_>>());
        let policy = self.policy;
        crate::eval::preeval::evaluate_meta(self.ctx, policy);
        self.ctx.agent_control = crate::eval::control::AgentControl::resolve(self.ctx, policy);
        self.apply_default_directory_create_mode();
        // `dryrun` in body agent control makes the run a dry run, as
        // `--dry-run` does (10_files/mustache_respects_dryryn.cf).
        if self.ctx.agent_control.dryrun && !self.dry_run {
            self.dry_run = true;
            self.ctx.settings.dry_run = true;
            if self.host.changes_chroot().is_none() {
                self.host = self.host.with_dry_run_overlay();
            }
        }
        self.check_policy_owners()?;
        // cf-agent sets it in its own environment, for every child after.
        if let Some(path) = &self.ctx.agent_control.childlibpath {
            crate::host::exec::set_run_env("LD_LIBRARY_PATH", path);
        }
        // So does it with `environment`'s `NAME=value` entries (the
        // schema's pattern `[A-Za-z0-9_]+=.*` holds the name and the '=').
        for entry in &self.ctx.agent_control.environment {
            if let Some((name, value)) = entry.split_once('=') {
                crate::host::exec::set_run_env(name, value);
            }
        }
        if self.preevaluated_abort() {
            return Ok(());
        }
        self.apply_common_domain();
        self.apply_policy_version();
        // A fatal error pre-evaluation met is met again, and placed, when
        // the run evaluates that promise.
        self.ctx.fatal = None;
        let prios: Vec<Option<i64>> = seq
            .iter()
            .map(|c| priority_of_bundle(self.ctx, policy, "default", &c.name))
            .collect();
        let ordered = order_by_priority(seq.iter().enumerate().collect(), |(i, _)| prios[*i]);
        for (_, call) in ordered {
            // Borrowed from the policy, which outlives the run: a bundle
            // is never copied to be run (the copy was most of a big
            // policy's memory).
            if let Some((file, bundle)) = policy.bundle("default", &call.name) {
                self.bundle_args =
                    (!call.args.is_empty()).then(|| verbose::args_text(self.ctx, &call.args, None));
                verbose::bundle_begin(&bundle.name.name, self.bundle_args.as_deref());
                self.run_bundle(file, bundle, &call.args, None, false);
                if self.fatal.is_none() {
                    verbose::bundle_end(&bundle.name.name);
                }
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

    /// Whether a class common bundles defined while the policy was
    /// pre-evaluated is one of `abortclasses`: cf-agent checks each class
    /// as it is defined, so such a policy runs no bundle at all. Agent
    /// control was not known then, so they are looked at now.
    fn preevaluated_abort(&mut self) -> bool {
        if self.ctx.agent_control.abortclasses.is_empty() {
            return false;
        }
        let mut defined: Vec<String> = self
            .ctx
            .classes
            .iter()
            .filter(|(_, info)| matches!(info.origin, Origin::Promise { .. }))
            .map(|(k, _)| k.clone())
            .collect();
        defined.sort_unstable();
        let patterns = self.ctx.agent_control.abortclasses.clone();
        let hit = defined.into_iter().find(|class| {
            let bare = class.rsplit(':').next().unwrap_or(class);
            patterns.iter().any(|p| {
                self.ctx
                    .regexes
                    .get(p)
                    .is_ok_and(|re| re.is_full_match(bare))
            })
        });
        let Some(class) = hit else {
            return false;
        };
        crate::info!(
            target: crate::report::log::NOTICE_TARGET,
            "cf-agent aborted on defined class '{class}'"
        );
        self.abort_run = Some(class);
        self.summary.aborted = self.abort_run.clone();
        true
    }

    /// `domain` of body common control names the host's domain: cf-agent
    /// sets `sys.domain` from it and defines its canonified name as a hard
    /// class. (It also rebuilds `sys.fqhost`, but 3.21 pads it with
    /// blanks, so we leave that one as discovered.)
    fn apply_common_domain(&mut self) {
        let Some(domain) = self
            .ctx
            .common_control("domain")
            .and_then(Value::as_scalar)
            .filter(|d| !d.is_empty())
            .map(str::to_string)
        else {
            return;
        };
        let dtype = crate::values::value::DataType::String;
        let class = crate::values::canon::canonify(&domain);
        let var = Variable::new(Value::str(domain), dtype, Origin::Agent);
        self.ctx.vars.put("default", "sys", "domain", var);
        let hard = ClassInfo {
            hard: true,
            ..ClassInfo::soft(
                Origin::Agent,
                vec!["source=agent".into(), "hardclass".into()],
            )
        };
        self.ctx.classes.define(&class, hard);
    }

    /// CFEngine 3.27's `default_directory_create_mode` of body agent
    /// control: cf-agent's 0700 for the directories it makes, changed as
    /// the mode says (`0755`, `a+rx`); a mode that does not parse is an
    /// error and leaves 0700.
    fn apply_default_directory_create_mode(&mut self) {
        let Some(mode) = self.ctx.agent_control.default_directory_create_mode.clone() else {
            return;
        };
        match crate::promises::files::perms::ModeSpec::parse(&mode) {
            Ok(spec) => {
                let m = spec.apply(0o700);
                crate::debug!(
                    "Changed default directory create mode to {m:o} \
                     (default_directory_create_mode => \"{mode}\")"
                );
                self.ctx.agent_control.default_dir_mode = Some(m);
            }
            Err(e) => crate::error!(
                "Failed to parse mode string for overriding default directory create mode \
                 (default_directory_create_mode => \"{mode}\"): {e}"
            ),
        }
    }

    /// CFEngine 3.27's `sys.policy_version`: `version` of body common
    /// control, once the policy is loaded (cf-agent only, not
    /// cf-promises; crate::schema::newer::NEWER_SYS_VARS).
    fn apply_policy_version(&mut self) {
        let Some(version) = self
            .ctx
            .common_control("version")
            .and_then(Value::as_scalar)
            .map(str::to_string)
        else {
            return;
        };
        let dtype = crate::values::value::DataType::String;
        let tags = "inventory,source=agent,attribute_name=CFEngine policy version,\
                    derived-from=default:control_common.version";
        let var = Variable::new(Value::str(version), dtype, Origin::Agent)
            .with_tags(tags.split(',').map(str::to_string).collect());
        self.ctx.vars.put("default", "sys", "policy_version", var);
    }

    /// cf-agent refreshes the package inventory after the bundles ran.
    fn update_package_inventory(&mut self) {
        // It asks the package modules, which are programs.
        if self.ctx.settings.sandbox {
            return;
        }
        let mode = Mode::of(self.dry_run, false);
        crate::promises::packages::update_inventory(&mut self.act_context(mode));
    }

    /// What an actuator may use of the run; `mode` decides its changes.
    fn act_context(&mut self, mode: Mode) -> ActContext<'_> {
        ActContext {
            ctx: crate::promises::port::EvalPort::new(self.ctx),
            policy: self.policy,
            host: &self.host,
            changes: Changes::new(mode, self.diff),
            bundles: &self.runner,
            output: self.sink,
            state: self.state.as_deref_mut(),
            now: self.now,
            no_lock: self.no_lock,
            record_locks: !self.no_lock && !self.dry_run,
            packages: &mut self.packages,
            remote: &mut self.remote,
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
                crate::info!(
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
                crate::error!("Bundle '{bundle}' aborted on defined class '{class}'");
                self.abort_bundle = true;
            }
            // An entry is also a class expression, checked whenever a
            // class is set, as cf-agent checks it ("a.b" holds once both
            // are defined).
            if !self.abort_bundle
                && let Some(p) = control
                    .abortbundleclasses
                    .iter()
                    .find(|p| self.ctx.eval_class_expr(p).unwrap_or(false))
            {
                crate::error!("Setting abort for '{p}' when setting class '{class}'");
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
        inherit: Option<IndexMap<String, ClassInfo>>,
        called: bool,
    ) -> Option<Outcome> {
        if self.profiler.is_none() {
            return self.run_bundle_timed(file, bundle, args, inherit, called);
        }
        let frame = crate::report::profile::Frame {
            component: "bundle",
            kind: bundle.bundle_type.name.as_str().to_owned(),
            name: bundle.name.name.as_str().to_owned(),
            namespace: bundle.namespace.clone(),
            source: profile_source(file),
            offset: crate::report::profile::Offset {
                start: bundle.span.start,
                end: bundle.span.end,
                context: bundle.span.start,
                line: file.source.line_of(bundle.span.start),
            },
        };
        if let Some(p) = self.profiler.as_mut() {
            p.begin(frame);
        }
        let outcome = self.run_bundle_timed(file, bundle, args, inherit, called);
        if let Some(p) = self.profiler.as_mut() {
            p.end();
        }
        outcome
    }

    /// Profiling a promise: its frame, as cf-agent 3.27 records it.
    pub(super) fn profile_promise(&mut self, file: &LoadedFile, ptype: &str, promise: &Promise) {
        let Some(p) = self.profiler.as_mut() else {
            return;
        };
        p.begin(crate::report::profile::Frame {
            component: "promise",
            kind: ptype.to_string(),
            name: "x".into(),
            namespace: "x".into(),
            source: profile_source(file),
            offset: crate::report::profile::Offset {
                start: promise.span.start,
                end: promise.span.end,
                context: if promise.guard.span.end > promise.guard.span.start {
                    promise.guard.span.start
                } else {
                    promise.span.start
                },
                line: file.source.line_of(promise.span.start),
            },
        });
    }

    pub(super) fn profile_end(&mut self) {
        if let Some(p) = self.profiler.as_mut() {
            p.end();
        }
    }

    fn run_bundle_timed(
        &mut self,
        file: &Arc<LoadedFile>,
        bundle: &Bundle,
        args: &[Value],
        inherit: Option<IndexMap<String, ClassInfo>>,
        called: bool,
    ) -> Option<Outcome> {
        let mut frame = Frame::new(
            &bundle.namespace,
            &bundle.name.name,
            &bundle.bundle_type.name,
        );
        if let Some(classes) = inherit {
            frame.local_classes = classes;
        }
        if bundle.bundle_type.name == "agent" {
            self.ctx
                .vars
                .clear_arrays(&bundle.namespace, &bundle.name.name);
        }
        let written = self.written_args.take();
        for (i, (p, v)) in bundle.params.iter().zip(args).enumerate() {
            let w = written.as_ref().and_then(|w| w.get(i));
            verbose::parameter(&p.name, &bundle.name.name, v, w, self.ctx.pass);
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
        self.stack
            .push(format!("/{}/{}", bundle.namespace, bundle.name.name));
        self.bundle_outcomes.push(None);
        self.return_values.push(HashMap::new());
        let common = bundle.bundle_type.name == "common";
        let top_down = crate::eval::control::file_evaluation_order(&file.tree, bundle)
            .or(self.ctx.agent_control.top_down)
            .unwrap_or(false);
        let order = if top_down {
            written_sections(bundle)
        } else {
            ordered_sections(bundle)
        };
        let policy = self.policy;
        // cf-agent resolves a bundle a method calls once before its first
        // pass (its arrays cleared above), which -v shows as the skip lines
        // of its variables whose condition fails. We do it under -v only:
        // the first pass resolves them all again, so elsewhere it would
        // only cost (about a tenth of a run of the MPF).
        if called && crate::report::log::verbose() {
            let last = std::mem::replace(&mut self.ctx.last_pass, false);
            self.resolve(file, &order, common);
            self.ctx.last_pass = last;
        }
        // Three passes always, as cf-agent: variables are resolved again
        // in each (a function says what it says three times), and a
        // promise that acted is not acted on again. After a pass that
        // changed nothing and left nothing waiting, the promises that act
        // would all find themselves done: unless this pass's variables or
        // classes change something, they are not expanded again (bundles
        // whose checks speak in every pass, processes and storage, excepted).
        // Under -v every pass is gone through, as cf-agent tells each.
        let every_pass = crate::report::log::verbose()
            || order
                .iter()
                .any(|s| actuator(s.0).is_some_and(|a| a.speaks_each_pass()))
            // A report returning a value with too many constraints has
            // cf-agent's error in every pass.
            || order.iter().any(|s| {
                s.0 == "reports"
                    && s.1.iter().any(|p| {
                        p.attribute("bundle_return_value_index").is_some()
                            && ["printfile", "showstate", "report_to_file", "lastseen"]
                                .iter()
                                .any(|a| p.attribute(a).is_some())
                    })
            });
        let mut settled = false;
        let mut pass = 1;
        'passes: while pass <= MAX_PASSES {
            let mut state = PassState {
                last: pass == MAX_PASSES,
                changed: false,
                deferred: false,
            };
            let mut announced: Vec<&str> = Vec::new();
            for (i, section) in order.iter().enumerate() {
                if settled
                    && !every_pass
                    && !state.changed
                    && !matches!(section.0, "meta" | "vars" | "defaults" | "classes")
                {
                    continue;
                }
                if !section.1.is_empty() && !announced.contains(&section.0) {
                    announced.push(section.0);
                    verbose::pass_begin(section.0, pass);
                }
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
                    self.ctx.pass = pass;
                    self.eval_promise(file, bundle, section.0, promise, common, &mut state);
                    if self.check_aborts() {
                        break 'passes;
                    }
                }
                // cf-agent carries out what the old package promises of
                // the pass scheduled once the pass's package promises are
                // done.
                if section.0 == "packages" {
                    state.changed |= self.run_package_schedule();
                }
                // Once the classes are settled, cf-agent resolves the
                // bundle's variables again, so a variable guarded by a class
                // of this pass is there for the promises that follow, and
                // then its defaults. Not in top_down order (CFEngine 3.27),
                // which takes each promise once a pass where it is written
                // (15_control/01_common/top_down_evaluation_long_policy.cf).
                let last_classes = !top_down
                    && section.0 == "classes"
                    && order.get(i + 1).is_none_or(|n| n.0 != "classes");
                if last_classes {
                    self.ctx.last_pass = state.last;
                    state.changed |= self.resolve(file, &order, common);
                    for (_, promises) in order.iter().filter(|s| s.0 == "defaults") {
                        for promise in *promises {
                            let (r, _) =
                                self.ctx.eval_defaults_promise(file, promise, Some(policy));
                            state.changed |= r.changed;
                        }
                    }
                }
            }
            if self.fatal.is_some() {
                break;
            }
            settled = !state.changed && !state.deferred;
            pass += 1;
        }
        // A bundle abort ends this bundle only; its caller goes on.
        self.abort_bundle = false;
        self.written_args = None;
        self.stack.pop();
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

    /// cf-agent's resolution of a bundle's variables outside its passes
    /// (before a called bundle's first pass, after each pass's classes): a
    /// common bundle's classes are resolved once more between two rounds
    /// of its variables. True when it changed something.
    fn resolve(
        &mut self,
        file: &Arc<LoadedFile>,
        order: &[(&str, &[Promise])],
        common: bool,
    ) -> bool {
        let policy = self.policy;
        let rounds: &[&str] = if common {
            &["vars", "classes", "vars"]
        } else {
            &["vars"]
        };
        let mut changed = false;
        for round in rounds {
            for (_, promises) in order.iter().filter(|s| s.0 == *round) {
                for promise in *promises {
                    let (r, _) = if *round == "vars" {
                        self.settled.eval_vars(self.ctx, policy, file, promise)
                    } else {
                        self.settled
                            .eval_classes(self.ctx, policy, file, promise, true)
                    };
                    changed |= r.changed;
                }
            }
        }
        changed
    }

    /// Starts a transaction when the bundle is one and none is running:
    /// opens its journal and attaches it to the host.
    fn begin_transaction(&mut self, bundle: &Bundle) -> TxStart {
        if self.tx.is_some() || transaction_of(self.ctx, bundle).is_none() {
            return TxStart::No;
        }
        let name = format!("{}:{}", bundle.namespace, bundle.name.name);
        if self.dry_run {
            crate::info!(
                "Bundle '{name}' is a transaction; a dry run changes nothing, so nothing is journaled"
            );
            return TxStart::No;
        }
        let Some(dir) = self.state_dir.clone() else {
            crate::error!(
                "Bundle '{name}' is a transaction, but this run has no state directory for its \
                 undo journal; it is not run"
            );
            return TxStart::Refused;
        };
        let header = Header {
            bundle: bundle.name.name.as_str().to_owned(),
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
                    bundle: bundle.name.name.as_str().to_owned(),
                    journal: j,
                    base_host,
                    failure: None,
                });
                TxStart::Started
            }
            Err(e) => {
                crate::error!(
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
                crate::error!("Cannot remove the undo journal of '{name}': {e}");
            }
            return;
        };
        crate::error!(
            "Transaction '{name}' failed: {reason}; undoing its changes to {} path(s)",
            tx.journal.len()
        );
        let undo = tx.journal.rollback();
        for r in &undo.restored {
            crate::info!(target: crate::report::log::NOTICE_TARGET, "Rolled back ({name}): {r}");
        }
        for f in &undo.failed {
            crate::error!("Could not roll back ({name}): {f}");
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
}

impl AgentRun<'_> {
    /// Agent control's `agentaccess`, as cf-agent's CheckAgentAccess: a
    /// user it does not list may not run the policy. The run stops, naming
    /// the first policy file owned by an unlisted user if there is one.
    fn check_policy_owners(&self) -> Result<(), RunError> {
        let control = &self.ctx.agent_control;
        if control.agentaccess.is_empty() {
            return Ok(());
        }
        let allowed: Vec<u32> = control
            .agentaccess
            .iter()
            .filter_map(|u| crate::promises::files::perms::uid_of(u))
            .collect();
        if allowed.contains(&crate::host::fs::real_uid()) {
            return Ok(());
        }
        for f in &self.policy.files {
            let path = &f.source.path;
            let Ok(Some(meta)) = self.host.stat(std::path::Path::new(path)) else {
                continue;
            };
            if !allowed.contains(&meta.uid) {
                return Err(RunError::NotOwned(path.clone()));
            }
        }
        Err(RunError::AccessDenied)
    }

    /// Stores the classes that classes promises asked to persist, with
    /// their tags (their timers restart, as cf-agent's default `reset`
    /// policy does).
    fn store_persistent_classes(&mut self) {
        let absolute = std::mem::take(&mut self.ctx.persist_absolute);
        for (name, minutes, tags) in std::mem::take(&mut self.ctx.persist_requests) {
            let Some(st) = self.state.as_deref_mut() else {
                continue;
            };
            let reset = !absolute.contains(&name);
            let class = PersistentClass {
                name,
                expires: self.now + minutes * 60,
                tags,
            };
            if let Err(e) = st.persist_class(&class, reset) {
                crate::error!("{e}");
            }
        }
        for name in std::mem::take(&mut self.ctx.persist_cancels) {
            if let Some(st) = self.state.as_deref_mut()
                && let Err(e) = st.forget_class(&name)
            {
                crate::error!("{e}");
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

/// The sections of a bundle as written: `evaluation_order => "top_down"`
/// (CFEngine 3.27), each pass going down the bundle.
fn written_sections(bundle: &Bundle) -> Vec<(&str, &[Promise])> {
    bundle
        .sections
        .iter()
        .map(|s| (s.promise_type.name.as_str(), s.promises.as_slice()))
        .collect()
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
/// The key under which a promise iteration is done for this run: its
/// once-per-run lock name (`text`) reduced to two independent 64-bit
/// hashes, FNV-1a (`fnv`, the lock file's name uses it too) and foldhash
/// with a fixed seed. Like cf-agent's digest of a promise for its locks,
/// it stands for the name at a fraction of its size (a run keeps one per
/// promise iteration); two names meeting in both hashes is beyond any
/// policy's reach in practice.
fn done_key(text: &str, fnv: u64) -> u128 {
    use std::hash::BuildHasher;
    let fold = foldhash::fast::FixedState::with_seed(0x6a09_e667_f3bc_c908).hash_one(text);
    (u128::from(fnv) << 64) | u128::from(fold)
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
/// The bundles a run of `policy` calls: `-b` if given, else body common
/// control's bundlesequence (the last of its attributes whose guard holds),
/// else `main` when it is defined.
pub fn bundlesequence(
    ctx: &mut EvalContext,
    policy: &PolicySet,
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
    let control = policy
        .bodies()
        .find(|(_, b)| {
            b.body_type.name == "common" && b.name.name == "control" && b.namespace == "default"
        })
        .map(|(_, b)| b);
    if let Some(control) = control {
        let mut seq = None;
        for a in control.attributes_named("bundlesequence") {
            let guard = ctx.expand(&a.guard.expr).text;
            if ctx.eval_class_expr(guard.trim()).unwrap_or(false) {
                seq = Some(&a.attr.value);
            }
        }
        if let Some(r) = seq {
            return Ok(calls_from_rval(ctx, r));
        }
    }
    if policy.bundle("default", "main").is_some() {
        return Ok(vec![BundleCall {
            name: "main".into(),
            args: Vec::new(),
        }]);
    }
    Err(RunError::NoBundlesequence)
}

fn calls_from_rval(ctx: &mut EvalContext, r: &Rval) -> Vec<BundleCall> {
    let items: Vec<&Rval> = match r {
        Rval::List { items, .. } => items.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for item in items {
        match item {
            Rval::Call(_) => {
                if let Ok((name, args)) = reference_parts(ctx, item, true) {
                    out.push(BundleCall { name, args });
                }
            }
            other => {
                if let Ok(e) = ctx.eval_rval(other) {
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

/// What `cf-promises -c` (and cf-agent before a run) says of the
/// bundlesequence of a policy that passed the other checks: each name
/// that is no bundle of the policy (of any type, in any namespace, as
/// cf-promises looks it up), and `main` when there is no bundlesequence
/// and no such bundle. Nothing when `ignore_missing_bundles` is on.
pub fn missing_sequence_bundles(ctx: &mut EvalContext, policy: &PolicySet) -> Vec<String> {
    if ctx.common_control_flag("ignore_missing_bundles") {
        return Vec::new();
    }
    let names: Vec<String> = match bundlesequence(ctx, policy, None) {
        Ok(seq) => seq.into_iter().map(|c| c.name).collect(),
        Err(_) => vec!["main".to_string()],
    };
    let strip = |n: &str| n.rsplit_once(':').map_or(n, |(_, b)| b).to_string();
    let defined: HashSet<&str> = policy
        .files
        .iter()
        .flat_map(|f| f.tree.bundles())
        .map(|b| b.name.name.as_str())
        .collect();
    names
        .into_iter()
        .filter(|n| !defined.contains(n.as_str()) && !defined.contains(strip(n).as_str()))
        .collect()
}

/// A policy file's path as the profile names it: absolute.
fn profile_source(file: &LoadedFile) -> String {
    use std::path::{Component, Path, PathBuf};
    let p = Path::new(&file.source.path);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out.to_string_lossy().into_owned()
}
