//! Promise types that act: each checks what differs and then changes it
//! (or, under dry-run, says what it would change). The scheduler hands
//! them a promise already expanded for one iteration.

pub mod commands;
pub mod custom;
pub mod files;
pub mod packages;
pub mod processes;
pub mod reports;
pub mod services;
pub mod storage;
pub mod users;

use crate::eval::EvalContext;
use crate::eval::expanded::{AttrValue, ExpandedPromise};
use crate::report::Outcome;

/// What an actuator may use besides the promise: the evaluation context
/// for classes and variables, and the run's mode.
pub struct ActContext<'a> {
    pub ctx: &'a mut EvalContext,
    pub policy: &'a crate::load::PolicySet,
    pub host: &'a crate::host::Host,
    /// Report what would change, change nothing.
    pub dry_run: bool,
    /// Print a unified diff of every file content change.
    pub diff: bool,
    pub output: &'a mut dyn crate::report::Sink,
    /// Persistent classes (for classes bodies of promises inside edit
    /// bundles); `None` in tests.
    pub state: Option<&'a mut crate::state::StateStore>,
    /// The run's clock, seconds since the epoch.
    pub now: i64,
    /// `-K`: locks do not hold across runs.
    pub no_lock: bool,
    /// What this run knows of the package modules' caches.
    pub packages: &'a mut packages::Session,
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

/// A promise type that acts on the system (or the output).
pub trait Actuator {
    /// Brings the promise about (or checks it under dry-run) and says how
    /// it ended.
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome;

    /// Checks that run each time the scheduler meets the promise, in every
    /// pass, even when it has already acted (cf-agent's sanity checks of
    /// processes promises warn once per pass).
    fn check_each_pass(&self, _p: &ExpandedPromise) {}

    /// Whether [`Actuator::check_each_pass`] may say something: a bundle
    /// with such promises makes all three passes, as cf-agent always does,
    /// so that what is said each pass is said as often.
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
