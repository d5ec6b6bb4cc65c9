//! Promise types that act: each checks what differs, describes each
//! change it would make as a [`Change`], and makes it when the promise's
//! [`Changes`] says so (the scheduler decides the mode: apply, dry run,
//! warn only; an actuator never looks at it). The scheduler hands them a
//! promise already expanded for one iteration.

pub mod commands;
pub mod custom;
pub mod files;
pub mod packages;
pub mod port;
pub mod processes;
pub mod reports;
pub mod services;
pub mod storage;
pub mod users;

use crate::eval::expanded::{AttrValue, ExpandedPromise};
use crate::report::Outcome;
use crate::report::change::{Change, Changes, Decision};

/// What an actuator may use besides the promise: the host, the clock, the
/// evaluation through its port (variables to read, classes to set), the
/// bundle runner, the sink, and the promise's changes (whose mode the
/// scheduler set).
pub struct ActContext<'a> {
    /// Variables to read, classes to set: never the evaluator itself.
    pub ctx: port::EvalPort<'a>,
    pub policy: &'a crate::load::PolicySet,
    pub host: &'a crate::host::Host,
    /// The promise's changes: whether each is made, what was said.
    pub changes: Changes,
    /// Runs the bundles an actuator calls (edit bundles).
    pub bundles: &'a dyn BundleRunner,
    pub output: &'a mut dyn crate::report::Sink,
    /// Persistent classes (for classes bodies of promises inside edit
    /// bundles); `None` in tests.
    pub state: Option<&'a mut crate::state::StateStore>,
    /// The run's clock, seconds since the epoch.
    pub now: i64,
    /// `-K`: locks do not hold across runs.
    pub no_lock: bool,
    /// Whether locks taken are recorded for later runs (not under `-K` or
    /// a dry run).
    pub record_locks: bool,
    /// What this run knows of the package modules' caches.
    pub packages: &'a mut packages::Session,
    /// The run's connections to servers (`copy_from` with `servers`): one
    /// session per server for the whole run.
    pub remote: &'a mut crate::remote::client::Sessions,
    /// The outcomes the promise reported along the way, when they are not
    /// just the one it returns: cf-agent defines the classes of each
    /// outcome a promise reports (a processes promise that signalled is
    /// repaired, and kept for its "no restart" step; a volume short of
    /// space is kept for its sensible content and failed for its space)
    /// and of none when it reported nothing. When set, exactly these
    /// outcomes' classes are defined.
    pub reported_outcomes: Option<Vec<Outcome>>,
    /// A bundle the scheduler runs right after the promise (a new user's
    /// `home_bundle`), then logs `then_inform`.
    pub followup: Option<Followup>,
}

/// A bundle to run after a promise acted, as a methods promise would.
#[derive(Debug, Clone, PartialEq)]
pub struct Followup {
    /// An [`AttrValue::Bundle`].
    pub bundle: AttrValue,
    /// Whether the bundle sees the caller's classes (`inherit`).
    pub inherit: bool,
    /// What to log at inform level once the bundle ran.
    pub then_inform: String,
}

/// A bundle an actuator has run (an edit bundle) and how: the scheduler's
/// part of it, which [`BundleRunner`] does.
pub struct BundleCall<'b> {
    pub file: &'b std::sync::Arc<crate::load::LoadedFile>,
    pub bundle: &'b crate::syntax::ast::Bundle,
    pub args: &'b [crate::values::Value],
    /// The frame's bundle type (`edit_line`).
    pub frame_type: &'b str,
    /// Its promise types in the order each pass takes them.
    pub order: &'b [&'static str],
    /// The caller's local classes are seen inside (`inherit`).
    pub inherit: bool,
    /// Promise types whose unresolved promiser acts as written.
    pub promiser_acts: &'b [&'b str],
    /// Variables of the default namespace the bundle sees while it runs
    /// (`edit.filename`), as (scope, name, variable): set before its first
    /// pass, put back as they were after its last.
    pub vars: Vec<(&'static str, String, crate::eval::vars::Variable)>,
}

/// What an actuator acts on for each iteration a [`BundleRunner`] hands it:
/// `None` when it did not act (it acted in an earlier pass).
pub type Visit<'v> = dyn FnMut(&mut ActContext<'_>, &ExpandedPromise) -> Option<Outcome> + 'v;

/// Runs a bundle for an actuator, as the scheduler runs agent bundles: its
/// parameters and frame, three passes, its promise types in order, vars
/// and classes, each promise's iterations and their guards; each other
/// promise's iteration goes to `visit`, and the outcome it returns sets the
/// promise's classes. `agent/` implements it.
pub trait BundleRunner {
    fn run(&self, act: &mut ActContext<'_>, call: &BundleCall<'_>, visit: &mut Visit<'_>);
}

/// What became of a change an actuator asked for.
#[derive(Debug)]
pub enum Applied<T, E = std::io::Error> {
    /// Made (and said).
    Made(T),
    /// Not made, and said so; the promise ends `outcome`. `as_if_made`:
    /// the run goes on as if it had been (a dry run).
    Withheld { outcome: Outcome, as_if_made: bool },
    /// Making it failed; nothing was said.
    Failed(E),
}

impl ActContext<'_> {
    /// Asks for a change: makes it with `make` when the promise's mode
    /// allows, and says what was done or what should have been.
    pub fn change<T, E>(
        &mut self,
        change: Change,
        make: impl FnOnce(&crate::host::Host) -> Result<T, E>,
    ) -> Applied<T, E> {
        match self.changes.plan(&change) {
            Decision::Make => match make(self.host) {
                Ok(t) => {
                    self.changes.made(change);
                    Applied::Made(t)
                }
                Err(e) => Applied::Failed(e),
            },
            Decision::Withheld {
                outcome,
                as_if_made,
            } => Applied::Withheld {
                outcome,
                as_if_made,
            },
        }
    }
}

/// A promise type that acts on the system (or the output).
pub trait Actuator {
    /// Brings the promise about (or checks it under dry-run) and says how
    /// it ended.
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome;

    /// Checks that run each time the scheduler meets the promise, in every
    /// pass, even when it has already acted (cf-agent's sanity checks of
    /// processes promises warn once per pass).
    fn check_each_pass(&self, _p: &ExpandedPromise) {}

    /// cf-agent's sanity check of a promise, made each time the scheduler
    /// meets it, before its lock: `false` when it fails (having said why),
    /// and the promise is then skipped without an outcome.
    fn sane(&self, _p: &ExpandedPromise) -> bool {
        true
    }

    /// Whether, once its lock is taken, the promise ends without an
    /// outcome (having said why): cf-agent's "skipped" result.
    fn skipped(&self, _p: &ExpandedPromise) -> bool {
        false
    }

    /// Whether [`Actuator::check_each_pass`] may say something: the
    /// scheduler then takes such promises in every pass, even once the
    /// bundle's state has settled, so that what is said each pass is said
    /// as often as cf-agent says it.
    fn speaks_each_pass(&self) -> bool {
        false
    }
}

/// The actuator for a promise type, if we have one.
pub fn actuator(promise_type: &str) -> Option<&'static dyn Actuator> {
    match promise_type {
        "reports" => Some(&reports::Reports),
        "files" => Some(&files::Files),
        "commands" => Some(&commands::Commands),
        "processes" => Some(&processes::Processes),
        "users" => Some(&users::Users),
        "services" => Some(&services::Services),
        "storage" => Some(&storage::Storage),
        "packages" => Some(&packages::Packages),
        _ => None,
    }
}
