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

use crate::values::Value;
use indexmap::IndexMap;

/// How one promise iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Kept,
    Repaired,
    Failed,
    Denied,
    Timeout,
    Interrupted,
    /// Something differs and was not changed (dry-run or `action_policy
    /// => "warn"`): a repair that would have been made.
    Warned,
}

impl Outcome {
    pub fn is_not_kept(self) -> bool {
        !matches!(self, Outcome::Kept | Outcome::Repaired)
    }

    /// The worse of two outcomes, for aggregating (a method's bundle, the
    /// steps of one promise), as cf-agent's PromiseResultUpdate: a warning
    /// is worse than a repair, a failure worse than a warning; of two
    /// failures the first stays.
    pub fn worst(self, other: Outcome) -> Outcome {
        let rank = |o: Outcome| match o {
            Outcome::Kept => 0,
            Outcome::Repaired => 1,
            Outcome::Warned => 2,
            _ => 3,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Kept => "kept",
            Outcome::Repaired => "repaired",
            Outcome::Failed => "failed",
            Outcome::Denied => "denied",
            Outcome::Timeout => "timeout",
            Outcome::Interrupted => "interrupted",
            Outcome::Warned => "warned",
        }
    }
}

/// A body's attributes after parameters and guards were applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResolvedBody {
    pub name: String,
    pub attrs: IndexMap<String, Value>,
    /// The arguments given to the bundles the body names (`service_bundle
    /// => b("x")`), by attribute; the name itself is in `attrs`.
    pub bundle_args: IndexMap<String, Vec<Value>>,
}

impl ResolvedBody {
    pub fn scalar(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).and_then(Value::as_scalar)
    }

    /// A bundle the body names, with its arguments.
    pub fn bundle_call(&self, name: &str) -> Option<(String, Vec<Value>)> {
        let bundle = self.scalar(name)?.to_string();
        let args = self.bundle_args.get(name).cloned().unwrap_or_default();
        Some((bundle, args))
    }

    pub fn list(&self, name: &str) -> Vec<String> {
        match self.attrs.get(name) {
            Some(Value::List(l)) => l.clone(),
            Some(Value::Scalar(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    }
}

/// An attribute's value for one iteration.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Value(Value),
    Body(ResolvedBody),
    /// A bundle reference (`usebundle`, `edit_line`, ...) with its
    /// evaluated arguments.
    Bundle {
        name: String,
        args: Vec<Value>,
    },
}

/// One iteration of a promise, fully expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpandedPromise {
    pub promise_type: String,
    pub promiser: String,
    pub attrs: IndexMap<String, AttrValue>,
    pub bundle: String,
    pub namespace: String,
    pub file: String,
    pub line: usize,
    pub handle: Option<String>,
    /// Some reference in the promise could not be resolved (yet). Only
    /// custom promise types act on such a promise: cf-agent fails it until
    /// it resolves.
    pub unresolved: bool,
}

impl ExpandedPromise {
    /// Where the promise is written, to end an error line with: cf-agent
    /// names it only under `-v`, we at every level.
    pub fn located(&self) -> String {
        format!(
            "(in a {} promise at {}:{})",
            self.promise_type, self.file, self.line
        )
    }

    /// Whether the promise only warns (`action_policy => "warn"` or
    /// `"nop"`): it says what differs and changes nothing, even in a real
    /// run.
    pub fn warn_only(&self) -> bool {
        self.body("action")
            .and_then(|a| a.scalar("action_policy"))
            .is_some_and(|p| p == "warn" || p == "nop")
    }

    pub fn scalar(&self, name: &str) -> Option<&str> {
        match self.attrs.get(name) {
            Some(AttrValue::Value(Value::Scalar(s))) => Some(s),
            _ => None,
        }
    }

    pub fn body(&self, name: &str) -> Option<&ResolvedBody> {
        match self.attrs.get(name) {
            Some(AttrValue::Body(b)) => Some(b),
            _ => None,
        }
    }

    pub fn value(&self, name: &str) -> Option<&Value> {
        match self.attrs.get(name) {
            Some(AttrValue::Value(v)) => Some(v),
            _ => None,
        }
    }

    /// Where the promise is, in cf-agent's words (its `PromiseRef`).
    pub fn reference(&self) -> String {
        format!(
            "Promise belongs to bundle '{}' in file '{}' near line {}",
            self.bundle, self.file, self.line
        )
    }

    /// A boolean option (`true/yes/on` or `false/no/off`).
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.scalar(name).and_then(parse_bool)
    }
}

pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

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
