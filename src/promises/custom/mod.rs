//! Custom promise types: a `promise agent NAME { path => ...;
//! interpreter => ...; }` block hands the promises of type NAME to a
//! promise module, a program the agent talks to through its standard input
//! and output (see [`protocol`]). As cf-agent 3.21 does it:
//!
//! * one process per module path, started at its first promise and kept
//!   for the whole run, then told to terminate;
//! * every promise validated, then evaluated, each time it is evaluated;
//! * the attributes the agent handles itself (class guards, `if`,
//!   `unless`, `classes`, `depends_on`, `meta`, `with`, `log_level`) are
//!   not sent; an `action` body is sent as its own attributes;
//! * a run that must not change anything (`--dry-run`, `action_policy =>
//!   "warn"` or `"nop"`) sends `action_policy => "warn"` to modules that
//!   declare the `action_policy` feature, and fails the promise without
//!   asking modules that do not;
//! * the module's log lines are printed at their levels, its result
//!   classes are defined in the bundle, and what it does wrong is reported
//!   in cf-agent's words.
//!
//! Beyond cf-agent: a module that gives no answer for `--module-timeout`
//! seconds is killed (with its process group) and its promise times out;
//! its later promises fail at once. cf-agent waits for it forever.

pub mod protocol;

use super::ActContext;
use crate::report::change::{Change, Decision};

use crate::eval::expanded::{AttrValue, ExpandedPromise};

use crate::eval::classes::ClassInfo;
use crate::host::coprocess::{Coprocess, ReadLine};
use crate::host::exec::{CommandSpec, split_command_line};
use crate::report::Outcome;
use crate::report::log::{CRITICAL_TARGET, NOTICE_TARGET};
use crate::syntax::ast::{Body, BodyKind};
use crate::values::Value;
use crate::values::canon::canonify;
use crate::values::value::Origin;
use indexmap::IndexMap;
use protocol::{Level, LineIn, ModuleHeader, Note, Protocol, ProtocolNote, Received, Request};
use serde_json::Value as Json;
use std::time::Duration;

/// How long a module may stay silent by default before it is taken for
/// hung.
pub const DEFAULT_TIMEOUT: Duration = crate::config::DEFAULT_MODULE_TIMEOUT;

/// How long a module may take to exit after it was told to terminate.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// The attributes of a classes body: the agent sets outcome classes
/// itself, so a module never sees them.
const CLASSES_BODY_ATTRIBUTES: &[&str] = &[
    "classes",
    "classes_name",
    "scope",
    "promise_repaired",
    "repair_failed",
    "repair_denied",
    "repair_timeout",
    "promise_kept",
    "cancel_repaired",
    "cancel_kept",
    "cancel_notkept",
    "kept_returncodes",
    "repaired_returncodes",
    "failed_returncodes",
    "persist_time",
    "timer_policy",
];

/// Attributes that neither reach the module nor are checked for
/// unresolved variables (cf-agent drops them before it looks).
const NEVER_SEEN: &[&str] = &["log_level", "unless", "meta", "with"];

/// Attributes the agent decides on and does not send, although cf-agent
/// checks them for unresolved variables first.
const DECIDED_BY_AGENT: &[&str] = &["if", "ifvarclass", "depends_on"];

/// The run's settings for promise modules.
#[derive(Debug, Clone, Copy)]
pub struct ModuleSettings {
    /// The run's log level, as requests name it.
    pub log_level: Level,
    /// How long a module may stay silent before it is killed.
    pub timeout: Duration,
}

impl Default for ModuleSettings {
    fn default() -> Self {
        ModuleSettings {
            log_level: Level::Notice,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// The promise modules of one run, by path.
#[derive(Debug, Default)]
pub struct PromiseModules {
    pub settings: ModuleSettings,
    modules: IndexMap<String, ModuleState>,
}

#[derive(Debug)]
enum ModuleState {
    Running(Module),
    /// Killed after it stopped answering; its promises fail at once.
    Stopped {
        reason: String,
    },
}

#[derive(Debug)]
struct Module {
    process: Coprocess,
    interpreter: Option<String>,
    protocol: Protocol,
    action_policy: bool,
}

/// How a custom promise ended. `once` is false when it ended before the
/// agent took its once-per-run lock (the module could not be started, the
/// promise has unresolved variables): cf-agent then tries it again in the
/// bundle's next pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustomOutcome {
    /// `None` when the promise type has no definition at all: it has no
    /// outcome (cf-agent sets no classes for it).
    pub outcome: Option<Outcome>,
    pub once: bool,
}

impl CustomOutcome {
    fn retry(outcome: Option<Outcome>) -> CustomOutcome {
        CustomOutcome {
            outcome,
            once: false,
        }
    }

    fn done(outcome: Outcome) -> CustomOutcome {
        CustomOutcome {
            outcome: Some(outcome),
            once: true,
        }
    }
}

/// The `promise agent NAME` block that defines a custom promise type.
pub fn definition<'p>(policy: &'p crate::load::PolicySet, promise_type: &str) -> Option<&'p Body> {
    policy
        .bodies()
        .map(|(_, b)| b)
        .find(|b| b.kind == BodyKind::Promise && b.name.name == promise_type)
}

/// What the promise's attributes amount to for a module.
struct Attributes {
    /// Sent to the module, in the promise's order.
    sent: Vec<(String, Json)>,
    /// Checked for unresolved variables, in the promise's order.
    checked: Vec<(String, Json)>,
    log_level: Option<String>,
}

impl Attributes {
    /// The promise's attributes with bodies of known types (an `action`
    /// body, say) spread into their own attributes, as cf-agent expands a
    /// promise; a body of a type the agent does not know (a custom body)
    /// becomes an object.
    fn of(p: &ExpandedPromise) -> Attributes {
        let mut all: Vec<(String, Json)> = Vec::new();
        for (name, v) in &p.attrs {
            match v {
                AttrValue::Value(v) => all.push((name.clone(), json_of(v))),
                AttrValue::Body(b)
                    if crate::eval::bodies::BODY_ATTRIBUTES.contains(&name.as_str()) =>
                {
                    for (k, v) in &b.attrs {
                        all.push((k.clone(), json_of(v)));
                    }
                }
                AttrValue::Body(b) => all.push((
                    name.clone(),
                    Json::Object(
                        b.attrs
                            .iter()
                            .map(|(k, v)| (k.clone(), json_of(v)))
                            .collect(),
                    ),
                )),
                AttrValue::Bundle { name: bundle, .. } => {
                    all.push((name.clone(), Json::from(bundle.as_str())))
                }
            }
        }
        let last = |key: &str| {
            all.iter()
                .rev()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| v.as_str())
                .map(str::to_string)
        };
        let log_level = last("log_level");
        let hidden = |k: &str| CLASSES_BODY_ATTRIBUTES.contains(&k) || NEVER_SEEN.contains(&k);
        let checked = all.iter().filter(|(k, _)| !hidden(k)).cloned().collect();
        let sent = all
            .into_iter()
            .filter(|(k, _)| !hidden(k) && !DECIDED_BY_AGENT.contains(&k.as_str()))
            .collect();
        Attributes {
            sent,
            checked,
            log_level,
        }
    }
}

/// The last value the promise block gives an attribute, expanded.
fn block_value(ctx: &mut super::port::EvalPort<'_>, block: &Body, name: &str) -> Option<String> {
    let a = block.attributes_named(name).last()?;
    Some(match &a.attr.value {
        crate::syntax::ast::Rval::String(s) => ctx.expand(&s.value).text,
        other => ctx
            .eval_rval(other)
            .and_then(|v| v.as_scalar().map(str::to_string))
            .unwrap_or_default(),
    })
}

fn json_of(v: &Value) -> Json {
    match v {
        Value::Scalar(s) => Json::from(s.as_str()),
        Value::List(l) => Json::Array(l.iter().map(|s| Json::from(s.as_str())).collect()),
        Value::Data(d) => (**d).clone(),
    }
}

/// Whether a string still holds a variable reference.
fn unresolved_text(s: &str) -> bool {
    ["$(", "${", "@(", "@{"].iter().any(|r| s.contains(r))
}

/// Whether a data value holds a reference, in an object's keys or in any
/// scalar.
fn unresolved_data(v: &Json) -> bool {
    match v {
        Json::String(s) => unresolved_text(s),
        Json::Array(a) => a.iter().any(unresolved_data),
        Json::Object(m) => m
            .iter()
            .any(|(k, v)| unresolved_text(k) || unresolved_data(v)),
        other => unresolved_text(&other.to_string()),
    }
}

/// Whether the promise is fully resolved, as cf-agent judges it: the
/// promiser and the attributes hold no variable reference, and lists and
/// data are only for modules of the JSON protocol. As in cf-agent, the
/// first data attribute decides for the attributes after it.
fn fully_resolved(p: &ExpandedPromise, attrs: &Attributes, json: bool) -> bool {
    if p.unresolved || unresolved_text(&p.promiser) {
        return false;
    }
    for (_, v) in &attrs.checked {
        match v {
            Json::String(s) => {
                if unresolved_text(s) {
                    return false;
                }
            }
            Json::Array(items) if json => {
                if items.iter().any(unresolved_data) {
                    return false;
                }
            }
            Json::Object(_) if json => return !unresolved_data(v),
            _ => return false,
        }
    }
    true
}

/// A promise's own `log_level`, as cf-agent reads it: `inform` and
/// `verbose`, anything else is `error`.
fn promise_log_level(value: &str) -> Level {
    match value {
        "inform" => Level::Info,
        "verbose" => Level::Verbose,
        _ => Level::Error,
    }
}

/// Prints a log line at a CFEngine level.
fn log_at(level: Level, message: &str) {
    match level {
        Level::Critical => crate::error!(target: CRITICAL_TARGET, "{message}"),
        Level::Error => crate::error!("{message}"),
        Level::Warning => crate::warn!("{message}"),
        Level::Notice => crate::info!(target: NOTICE_TARGET, "{message}"),
        Level::Info => crate::info!("{message}"),
        Level::Verbose => crate::debug!("{message}"),
        Level::Debug => crate::trace!("{message}"),
    }
}

/// What the module logged while answering, for the checks cf-agent makes
/// on a module's manners. Messages count whether or not the promise's
/// `log_level` let them through.
#[derive(Debug, Default, Clone, Copy)]
struct Logged {
    error: bool,
    warning: bool,
    info: bool,
}

/// Where the current promise is, for messages.
struct Site<'a> {
    promise_type: &'a str,
    promiser: &'a str,
    file: &'a str,
    line: usize,
}

impl Site<'_> {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

impl PromiseModules {
    pub fn new(settings: ModuleSettings) -> PromiseModules {
        PromiseModules {
            settings,
            modules: IndexMap::new(),
        }
    }

    /// Evaluates one custom promise: starts its module if need be, checks
    /// that the promise is resolved, then asks the module to validate and
    /// to evaluate it.
    pub fn evaluate(&mut self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> CustomOutcome {
        let Some(block) = definition(act.policy, &p.promise_type) else {
            crate::error!("Undefined promise type '{}'", p.promise_type);
            return CustomOutcome::retry(None);
        };
        // The block's values may name variables (`$(sys.workdir)`), which
        // are read where the promise is.
        let interpreter = block_value(&mut act.ctx, block, "interpreter");
        let Some(path) = block_value(&mut act.ctx, block, "path") else {
            crate::error!("Custom promise type '{}' missing path", p.promise_type);
            return CustomOutcome::retry(Some(Outcome::Failed));
        };
        let site = Site {
            promise_type: &p.promise_type,
            promiser: &p.promiser,
            file: &p.file,
            line: p.line,
        };
        match self.modules.get(&path) {
            Some(ModuleState::Stopped { reason }) => {
                crate::error!(
                    "Promise module '{path}' was stopped earlier in this run ({reason}); the {} promise with promiser '{}' is not evaluated ({})",
                    site.promise_type,
                    site.promiser,
                    site.at()
                );
                return CustomOutcome::done(Outcome::Failed);
            }
            Some(ModuleState::Running(m)) => {
                if m.interpreter != interpreter {
                    crate::error!(
                        "Conflicting interpreter specifications for custom promise module '{path}' (started with '{}' and '{}' requested for promise '{}' of type '{}')",
                        m.interpreter.as_deref().unwrap_or("(null)"),
                        interpreter.as_deref().unwrap_or("(null)"),
                        p.promiser,
                        p.promise_type
                    );
                    return CustomOutcome::retry(Some(Outcome::Failed));
                }
            }
            None => match self.start(act, interpreter, &path, &site) {
                Ok(m) => {
                    self.modules.insert(path.clone(), ModuleState::Running(m));
                }
                Err(outcome) => return outcome,
            },
        }
        let timeout = self.settings.timeout;
        let global = self.settings.log_level;
        let Some(ModuleState::Running(module)) = self.modules.get_mut(&path) else {
            return CustomOutcome::retry(Some(Outcome::Failed));
        };
        let attrs = Attributes::of(p);
        if !fully_resolved(p, &attrs, module.protocol == Protocol::Json) {
            if act.ctx.last_pass() {
                crate::error!(
                    "{} promise with promiser '{}' has unresolved/unexpanded variables",
                    p.promise_type,
                    p.promiser
                );
            }
            return CustomOutcome::retry(Some(Outcome::Failed));
        }
        // From here on the promise acts once per run.
        // The module makes its changes itself; the run's mode says whether
        // it may, and a dry run tells it to only warn.
        let change = Change::new("module", &p.promiser).after(path.clone());
        let (make_changes, tell_to_warn) = match act.changes.plan(&change) {
            Decision::Make => (true, false),
            Decision::Withheld { as_if_made, .. } => (false, as_if_made),
        };
        if !make_changes && !module.action_policy {
            crate::error!(
                "Not making changes to the system, but the custom promise module '{path}' doesn't support action_policy"
            );
            return CustomOutcome::done(Outcome::Failed);
        }
        let mut sent = attrs.sent.clone();
        if tell_to_warn {
            match sent.iter_mut().find(|(k, _)| k == "action_policy") {
                Some((_, v)) => *v = Json::from("warn"),
                None => sent.push(("action_policy".into(), Json::from("warn"))),
            }
        }
        let specific = attrs.log_level.as_deref().map(promise_log_level);
        let requested = specific.map_or(global, |s| s.min(global)).max(Level::Error);
        let mut talk = Talk {
            module,
            path: &path,
            timeout,
            filter: specific,
            site: &site,
        };
        let request = |operation| Request {
            operation,
            log_level: Some(requested.name()),
            promise: Some(protocol::PromiseRequest {
                promise_type: &p.promise_type,
                promiser: &p.promiser,
                line_number: p.line,
                filename: act.ctx.source_name(&p.file),
                attributes: &sent,
            }),
        };

        let (response, logged) = match talk.exchange(&request("validate_promise")) {
            Exchange::Answered(r, logged) => (r, logged),
            Exchange::Broken => return CustomOutcome::done(Outcome::Failed),
            Exchange::Hung(reason) => return self.stop(&path, reason),
        };
        if response.result.as_deref() != Some("valid") {
            crate::debug!(
                "{} promise with promiser '{}' failed validation ({})",
                site.promise_type,
                site.promiser,
                site.at()
            );
            if !logged.error {
                crate::error!(
                    target: CRITICAL_TARGET,
                    "Bug in promise module - No error(s) logged for invalid {} promise with promiser '{}' ({})",
                    site.promise_type,
                    site.promiser,
                    site.at()
                );
            }
            crate::debug!(
                "{} promise with promiser '{}' will be skipped because it failed validation",
                site.promise_type,
                site.promiser
            );
            return CustomOutcome::done(Outcome::Failed);
        }

        let (response, logged) = match talk.exchange(&request("evaluate_promise")) {
            Exchange::Answered(r, logged) => (r, logged),
            Exchange::Broken => return CustomOutcome::done(Outcome::Failed),
            Exchange::Hung(reason) => return self.stop(&path, reason),
        };
        for class in response.result_classes.iter().filter(|c| !c.is_empty()) {
            let info = ClassInfo::soft(Origin::Agent, vec!["source=promise-module".into()]);
            act.ctx.define_class(&canonify(class), true, info);
        }
        CustomOutcome::done(judge(&response, logged, make_changes, &site, &path))
    }

    /// Starts the module at `path` and exchanges headers. On failure, says
    /// why in cf-agent's words; the promise fails, and the next promise of
    /// the module tries again (a module that does not answer at all is
    /// stopped for the run instead).
    fn start(
        &mut self,
        act: &ActContext<'_>,
        interpreter: Option<String>,
        path: &str,
        site: &Site<'_>,
    ) -> Result<Module, CustomOutcome> {
        let fail = Err(CustomOutcome::retry(Some(Outcome::Failed)));
        let host = act.host;
        if let Some(i) = &interpreter
            && !host.is_executable(i)
        {
            crate::error!("Promise module interpreter '{i}' is not an executable file");
            return fail;
        }
        if interpreter.is_none() && !host.is_executable(path) {
            crate::error!("Promise module path '{path}' is not an executable file");
            return fail;
        }
        if !host.path_exists(path) {
            crate::error!("Promise module '{path}' does not exist");
            return fail;
        }
        let command = match &interpreter {
            Some(i) => format!("{i} {path}"),
            None => path.to_string(),
        };
        crate::debug!("Starting custom promise module '{path}' with command '{command}'");
        // Unlike commands, cf-agent runs modules with its own umask.
        let spec = CommandSpec {
            argv: split_command_line(&command),
            ..CommandSpec::default()
        };
        let mut process = match host.start_coprocess(&spec) {
            Ok(p) => p,
            Err(e) => {
                crate::error!(
                    "Could not start promise module '{path}' with command '{command}': {e}"
                );
                return fail;
            }
        };
        let timeout = self.settings.timeout;
        let shown = format!("{} {path}", interpreter.as_deref().unwrap_or("(null)"));
        // A module that is gone already cannot read: what it printed first
        // (nothing, most likely) says so below.
        let _ = process.send(protocol::agent_header().as_bytes(), timeout);
        let header = match process.read_line(timeout) {
            Ok(ReadLine::Line {
                text,
                newline: true,
            }) => text,
            Ok(ReadLine::Line {
                text,
                newline: false,
            }) => {
                crate::error!(
                    "Promise module '{shown}' sent an invalid header with no newline: '{text}'"
                );
                return fail;
            }
            Ok(ReadLine::Eof) | Err(_) => {
                crate::error!("Did not receive header from promise module '{path}'");
                return fail;
            }
            Ok(ReadLine::TimedOut) => {
                return Err(self.stop_at_start(path, site));
            }
        };
        crate::trace!("Received header from promise module: '{header}'");
        match process.read_line(timeout) {
            Ok(ReadLine::Line {
                text,
                newline: true,
            }) if text.is_empty() => {}
            Ok(ReadLine::TimedOut) => return Err(self.stop_at_start(path, site)),
            other => {
                // cf-agent quotes the line it got with its newline.
                let got = match other {
                    Ok(ReadLine::Line { text, newline }) => {
                        format!("{text}{}", if newline { "\n" } else { "" })
                    }
                    _ => String::new(),
                };
                crate::error!(
                    "Promise module '{shown}' failed to send empty line after header: '{got}'"
                );
                return fail;
            }
        }
        let ModuleHeader {
            protocol,
            action_policy,
            note,
        } = protocol::parse_header(&header);
        match note {
            Some(ProtocolNote::Unspecified) => crate::warn!(
                "Custom promise module '{path}' didn't fully specify protocol. Using 'line_based' as the default. Please report this as a bug in the module"
            ),
            Some(ProtocolNote::Ambiguous) => crate::warn!(
                "Ambiguous protocol specification from the custom promise module '{path}'. Please report this as a bug in the module"
            ),
            None => {}
        }
        Ok(Module {
            process,
            interpreter,
            protocol,
            action_policy,
        })
    }

    /// A module that sent no header in time: stopped for the run.
    fn stop_at_start(&mut self, path: &str, site: &Site<'_>) -> CustomOutcome {
        let secs = self.settings.timeout.as_secs();
        crate::error!(
            "Promise module '{path}' sent no header within {secs} seconds, so it was killed ({} promise with promiser '{}', {})",
            site.promise_type,
            site.promiser,
            site.at()
        );
        let reason = format!("it sent no header within {secs} seconds");
        self.modules
            .insert(path.to_string(), ModuleState::Stopped { reason });
        CustomOutcome::done(Outcome::Timeout)
    }

    /// Kills a module that stopped answering; its later promises fail.
    fn stop(&mut self, path: &str, reason: String) -> CustomOutcome {
        if let Some(ModuleState::Running(m)) = self.modules.get_mut(path) {
            m.process.kill();
        }
        self.modules
            .insert(path.to_string(), ModuleState::Stopped { reason });
        CustomOutcome::done(Outcome::Timeout)
    }

    /// Tells every running module to terminate, in the order they were
    /// started, prints what they say, and waits for them to exit.
    pub fn terminate_all(&mut self) {
        let timeout = self.settings.timeout;
        for (path, state) in self.modules.drain(..) {
            let ModuleState::Running(mut m) = state else {
                continue;
            };
            let request = Request {
                operation: "terminate",
                log_level: None,
                promise: None,
            };
            let _ = m
                .process
                .send(request.encode(m.protocol).as_bytes(), timeout);
            let received = protocol::receive(
                &mut || next_line(&mut m.process, timeout),
                m.protocol,
                &mut |n| print_note(&n, &path, None, &mut Logged::default()),
            );
            if received == Received::TimedOut {
                crate::error!(
                    "Promise module '{path}' did not answer 'terminate' within {} seconds, so it was killed",
                    timeout.as_secs()
                );
                m.process.kill();
                continue;
            }
            if m.process.finish(EXIT_GRACE).is_none() {
                crate::debug!(
                    "Promise module '{path}' did not exit after 'terminate'; it was killed"
                );
            }
        }
    }
}

impl Drop for PromiseModules {
    /// Modules still running when the run ends early are terminated too.
    fn drop(&mut self) {
        self.terminate_all();
    }
}

/// One module and the promise it is being asked about.
struct Talk<'a> {
    module: &'a mut Module,
    path: &'a str,
    timeout: Duration,
    filter: Option<Level>,
    site: &'a Site<'a>,
}

enum Exchange {
    Answered(protocol::Response, Logged),
    /// An answer that is not the protocol (already reported).
    Broken,
    /// No answer in time; the reason, for the module's later promises.
    Hung(String),
}

impl Talk<'_> {
    /// Sends a request and reads the answer, printing the module's log
    /// lines as they come.
    fn exchange(&mut self, request: &Request<'_>) -> Exchange {
        let m = &mut *self.module;
        // A module that exited cannot read; its silence is reported below,
        // as cf-agent reports it.
        if let Err(e) = m
            .process
            .send(request.encode(m.protocol).as_bytes(), self.timeout)
            && e.kind() == std::io::ErrorKind::TimedOut
        {
            return self.hung(request.operation);
        }
        let mut logged = Logged::default();
        let (path, filter, timeout) = (self.path, self.filter, self.timeout);
        let process = &mut m.process;
        let received =
            protocol::receive(&mut || next_line(process, timeout), m.protocol, &mut |n| {
                print_note(&n, path, filter, &mut logged)
            });
        match received {
            Received::Response(r) => Exchange::Answered(r, logged),
            Received::Broken => Exchange::Broken,
            Received::TimedOut => self.hung(request.operation),
        }
    }

    fn hung(&self, operation: &str) -> Exchange {
        let secs = self.timeout.as_secs();
        crate::error!(
            "Promise module '{}' gave no answer to '{operation}' within {secs} seconds, so it was killed ({} promise with promiser '{}', {})",
            self.path,
            self.site.promise_type,
            self.site.promiser,
            self.site.at()
        );
        Exchange::Hung(format!(
            "it gave no answer to '{operation}' for the {} promise with promiser '{}' within {secs} seconds",
            self.site.promise_type, self.site.promiser
        ))
    }
}

fn next_line(process: &mut Coprocess, timeout: Duration) -> LineIn {
    match process.read_line(timeout) {
        Ok(ReadLine::Line { text, .. }) => LineIn::Line(text),
        Ok(ReadLine::TimedOut) => LineIn::TimedOut,
        Ok(ReadLine::Eof) | Err(_) => LineIn::Eof,
    }
}

/// Prints what happened while reading an answer, as cf-agent prints it.
/// A promise's `log_level` hides the module's messages below it.
fn print_note(note: &Note, path: &str, filter: Option<Level>, logged: &mut Logged) {
    match note {
        Note::Log { level, message } => {
            logged.error |= *level <= Level::Error;
            logged.warning |= *level <= Level::Warning;
            logged.info |= *level == Level::Info;
            if filter.is_none_or(|f| *level <= f) {
                log_at(*level, message);
            }
        }
        Note::UnknownLevel { line } => crate::error!(
            "Promise module '{path}' sent a log message with an unknown level: '{line}'"
        ),
        Note::InvalidLogLine(l) => crate::error!("Promise module sent invalid log line: '{l}'"),
        Note::InvalidLine(l) => crate::error!("Promise module sent invalid line: '{l}'"),
        Note::InvalidJson => crate::error!("Promise module '{path}' sent invalid JSON"),
        Note::IncompleteJson => crate::error!(
            "The '{path}' promise module sent an invalid/incomplete response with JSON based protocol"
        ),
    }
}

/// The outcome of an evaluation from the module's result, with cf-agent's
/// complaints about a module that did not say what it did.
fn judge(
    response: &protocol::Response,
    logged: Logged,
    make_changes: bool,
    site: &Site<'_>,
    path: &str,
) -> Outcome {
    let (t, promiser, at) = (site.promise_type, site.promiser, site.at());
    let bug =
        |what: String| crate::error!(target: CRITICAL_TARGET, "Bug in promise module - {what}");
    if !make_changes && logged.info {
        bug(format!(
            "'info:' log messages reported for {t} promise with promiser '{promiser}' ({at}) while making changes on the system disabled"
        ));
    }
    let Some(result) = response.result.as_deref() else {
        crate::error!(
            "Promise module did not return a result for promise evaluation ({t} promise, promiser: '{promiser}' module: '{path}')"
        );
        return Outcome::Failed;
    };
    match result {
        "kept" => {
            crate::debug!("Promise with promiser '{promiser}' was kept by promise module '{path}'");
            Outcome::Kept
        }
        "not_kept" => {
            crate::debug!(
                "Promise with promiser '{promiser}' was not kept by promise module '{path}'"
            );
            if !make_changes {
                if !logged.warning {
                    bug(format!(
                        "Failed to log warnings for not kept {t} promise with promiser '{promiser}' ({at}) while making changes on the system disabled"
                    ));
                }
                // cf-agent counts it as not kept, as it does in a real run.
                return Outcome::Failed;
            }
            if !logged.error {
                bug(format!(
                    "Failed to log errors for not kept {t} promise with promiser '{promiser}' ({at})"
                ));
            }
            Outcome::Failed
        }
        "repaired" => {
            crate::debug!(
                "Promise with promiser '{promiser}' was repaired by promise module '{path}'"
            );
            if !make_changes {
                bug(format!(
                    "{t} promise with promiser '{promiser}' ({at}) repaired while making changes on the system disabled"
                ));
            }
            if !logged.info {
                bug(format!(
                    "Failed to log about changes made by a repaired {t} promise with promiser '{promiser}' ({at})"
                ));
            }
            Outcome::Repaired
        }
        "error" => {
            crate::error!(
                "An unexpected error occured in promise module ({t} promise, promiser: '{promiser}' module: '{path}')"
            );
            Outcome::Failed
        }
        other => {
            crate::error!(
                "Promise module returned unacceptable result: '{other}' ({t} promise, promiser: '{promiser}' module: '{path}')"
            );
            Outcome::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::bodies::ResolvedBody;

    fn promise(attrs: Vec<(&str, AttrValue)>) -> ExpandedPromise {
        ExpandedPromise {
            promise_type: "git".into(),
            promiser: "/srv/x".into(),
            attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            bundle: "main".into(),
            namespace: "default".into(),
            file: "/p.cf".into(),
            line: 3,
            handle: None,
            unresolved: false,
            iteration: 1,
            per_file: None,
        }
    }

    fn scalar(s: &str) -> AttrValue {
        AttrValue::Value(Value::str(s))
    }

    fn body(name: &str, attrs: &[(&str, Value)]) -> AttrValue {
        AttrValue::Body(ResolvedBody {
            name: name.into(),
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            ..Default::default()
        })
    }

    #[test]
    fn what_a_module_is_sent() {
        let p = promise(vec![
            ("repo", scalar("https://x")),
            ("if", scalar("linux")),
            ("handle", scalar("h")),
            (
                "action",
                body(
                    "a",
                    &[
                        ("ifelapsed", Value::str("5")),
                        ("log_level", Value::str("verbose")),
                    ],
                ),
            ),
            (
                "classes",
                body("c", &[("promise_kept", Value::List(vec!["k".into()]))]),
            ),
            ("meta", AttrValue::Value(Value::List(vec!["m".into()]))),
            (
                "depends_on",
                AttrValue::Value(Value::List(vec!["d".into()])),
            ),
            (
                "members",
                body("mem", &[("include", Value::List(vec!["a".into()]))]),
            ),
        ]);
        let a = Attributes::of(&p);
        let names: Vec<&str> = a.sent.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["repo", "handle", "ifelapsed", "members"]);
        assert_eq!(a.sent[3].1, serde_json::json!({"include": ["a"]}));
        assert_eq!(a.log_level.as_deref(), Some("verbose"));
        // depends_on is not sent but is checked: a list, so a line-based
        // module cannot take the promise (as in cf-agent).
        assert!(fully_resolved(&p, &a, true));
        assert!(!fully_resolved(&p, &a, false));
    }

    #[test]
    fn unresolved_references() {
        let p = promise(vec![("x", scalar("a$(b)c"))]);
        assert!(!fully_resolved(&p, &Attributes::of(&p), true));
        let p = promise(vec![(
            "x",
            AttrValue::Value(Value::List(vec!["@(l)".into()])),
        )]);
        assert!(!fully_resolved(&p, &Attributes::of(&p), true));
        let mut p = promise(vec![("x", scalar("fine"))]);
        assert!(fully_resolved(&p, &Attributes::of(&p), false));
        p.promiser = "${x}".into();
        assert!(!fully_resolved(&p, &Attributes::of(&p), false));
        // The first data attribute decides, as in cf-agent.
        let p = promise(vec![
            (
                "d",
                AttrValue::Value(Value::Data(std::sync::Arc::new(
                    serde_json::json!({"k": 1}),
                ))),
            ),
            ("x", scalar("$(late)")),
        ]);
        assert!(fully_resolved(&p, &Attributes::of(&p), true));
    }

    #[test]
    fn log_levels_asked_of_modules() {
        assert_eq!(promise_log_level("inform"), Level::Info);
        assert_eq!(promise_log_level("verbose"), Level::Verbose);
        assert_eq!(promise_log_level("log"), Level::Error);
    }
}
