//! Under `-v`, cf-agent's account of a run, in its words and order: the
//! bundles entered and left, each pass over the variables and classes,
//! each promise it is about to act on (its handle or id, promiser, bundle,
//! class guard, condition and stack path) and what became of it.
//!
//! Every function here returns at once unless verbose lines are printed,
//! so a run without `-v` pays one load of the level per call.

use crate::eval::expanded::ExpandedPromise;
use crate::report::Outcome;
use crate::report::log::verbose;
use crate::syntax::ast::Rval;
use crate::values::Value;

/// A section title between two rules, as cf-agent's `Banner`.
pub(super) fn banner(title: &str) {
    if !verbose() {
        return;
    }
    tracing::debug!("----------------------------------------------------------------");
    tracing::debug!(" {title} ");
    tracing::debug!("----------------------------------------------------------------");
}

/// The bundlesequence about to run, as cf-agent writes a list.
pub(super) fn bundlesequence(names: &[String]) {
    if !verbose() {
        return;
    }
    let items: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    tracing::debug!("Using bundlesequence =>  {{{}}}", items.join(","));
}

/// A written argument that cf-agent shows as written: a whole list or
/// data reference (`@(l)`), and one naming `this.` (which it expands only
/// in the called bundle), which a bundle's banner keeps unexpanded.
fn shown_as_written(written: Option<&Rval>) -> Option<&str> {
    let text = match written? {
        Rval::NakedVar { text, .. } => text.as_str(),
        Rval::String(s) => s.value.as_str(),
        _ => return None,
    };
    (text.starts_with('@') || text.contains("$(this.") || text.contains("${this.")).then_some(text)
}

/// A bundle's arguments as cf-agent writes them in a banner: ` {"a","b"}`,
/// a list argument as `{"x","y"}` inside, one given as `@(l)` as written.
pub(super) fn args_text(args: &[Value], written: Option<&[Rval]>) -> String {
    let items: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            _ if let Some(w) = shown_as_written(written.and_then(|w| w.get(i))) => {
                format!("\"{w}\"")
            }
            Value::Scalar(s) => format!("\"{s}\""),
            Value::List(l) => {
                let inner: Vec<String> = l.iter().map(|s| format!("\"{s}\"")).collect();
                format!("{{{}}}", inner.join(","))
            }
            Value::Data(j) => crate::values::json::write_compact(j),
        })
        .collect();
    format!(" {{{}}}", items.join(","))
}

/// `B: BEGIN bundle name` (with its arguments when it has some).
pub(super) fn bundle_begin(name: &str, args: Option<&str>) {
    if !verbose() {
        return;
    }
    tracing::debug!("B: *****************************************************************");
    match args {
        Some(a) => tracing::debug!("B: BEGIN bundle {name}({a})"),
        None => tracing::debug!("B: BEGIN bundle {name}"),
    }
    tracing::debug!("B: *****************************************************************");
}

/// `B: END bundle name`.
pub(super) fn bundle_end(name: &str) {
    if !verbose() {
        return;
    }
    tracing::debug!("B: *****************************************************************");
    tracing::debug!("B: END bundle {name}");
    tracing::debug!("B: *****************************************************************");
}

/// The start of a pass over a bundle's variables or classes; other
/// promise types have no such line.
pub(super) fn pass_begin(promise_type: &str, pass: usize) {
    if !verbose() {
        return;
    }
    match promise_type {
        "vars" => {
            tracing::debug!("V: .........................................................");
            tracing::debug!("V: BEGIN variables (pass {pass})");
        }
        "classes" => {
            tracing::debug!("C: .........................................................");
            tracing::debug!("C: BEGIN classes / conditions (pass {pass})");
        }
        _ => {}
    }
}

/// A bundle parameter set for a call.
pub(super) fn parameter(
    name: &str,
    bundle: &str,
    value: &Value,
    written: Option<&Rval>,
    pass: usize,
) {
    if !verbose() {
        return;
    }
    // cf-agent names the type of the argument as written.
    let kind = match (written, value) {
        (Some(Rval::List { .. }), _) => 'l',
        (Some(Rval::Call(_)), _) => 'f',
        (Some(_), _) | (None, Value::Scalar(_)) => 's',
        (None, Value::List(_)) => 'l',
        (None, Value::Data(_)) => 'c',
    };
    tracing::debug!(
        "V:     +  Private parameter: '{name}' in scope '{bundle}' (type: {kind}) in pass {pass}"
    );
}

/// Whether cf-agent shows a promise of this type before it looks at its
/// locks, and so in every pass even once it is done: files, storage,
/// users, packages and databases; the others only when they act.
pub(super) fn shown_before_lock(promise_type: &str) -> bool {
    matches!(
        promise_type,
        "files" | "storage" | "users" | "packages" | "databases"
    )
}

/// What the banner of a promise needs besides the expanded promise.
pub(super) struct Place<'a> {
    pub pass: usize,
    /// The arguments of the bundle being run, as a banner writes them.
    pub bundle_args: Option<&'a str>,
    /// The class guard the promise is written under.
    pub guard: &'a str,
    /// Its `if`/`ifvarclass` or `unless`, expanded, with which it is.
    pub condition: Option<(&'static str, String)>,
    /// The stack path down to the promise's bundle.
    pub stack: &'a str,
}

/// cf-agent's id of a promise without a handle: `promise_<file>_<line>`,
/// the file's last name canonified.
pub(super) fn promise_id(ep: &ExpandedPromise) -> String {
    if let Some(h) = &ep.handle {
        return crate::values::canon::canonify(h);
    }
    let base = ep.file.rsplit('/').next().unwrap_or(&ep.file);
    format!(
        "promise_{}_{}",
        crate::values::canon::canonify(base),
        ep.line
    )
}

/// The head of cf-agent's account of a promise it is about to act on.
pub(super) fn promise_begin(ep: &ExpandedPromise, at: &Place) {
    if !verbose() {
        return;
    }
    let pass = at.pass;
    tracing::debug!("P: .........................................................");
    tracing::debug!(
        "P: BEGIN promise '{}' of type \"{}\" (pass {pass})",
        promise_id(ep),
        ep.promise_type
    );
    let promiser = abbreviated(&ep.promiser);
    // The banner keeps at most 40 bytes of it.
    let mut cut = promiser.len().min(40);
    while !promiser.is_char_boundary(cut) {
        cut -= 1;
    }
    tracing::debug!("P:    Promiser/affected object: '{}'", &promiser[..cut]);
    match at.bundle_args {
        Some(a) => tracing::debug!("P:    From parameterized bundle: {}({a})", ep.bundle),
        None => tracing::debug!("P:    Part of bundle: {}", ep.bundle),
    }
    tracing::debug!("P:    Base context class: {}", at.guard);
    if let Some((word, c)) = &at.condition {
        tracing::debug!("P:    \"{word}\" class condition: {c}");
    }
    tracing::debug!(
        "P:    Stack path: {}/{}/'{}'[{}]",
        at.stack,
        ep.promise_type,
        stack_promiser(&ep.promiser),
        ep.iteration
    );
    if let Some(c) = ep.scalar("comment") {
        tracing::debug!("P:");
        tracing::debug!("P:    Comment:  {c}");
    }
}

/// What became of a promise that acted: `A: Promise ...` and `P: END`.
pub(super) fn promise_end(promise_type: &str, promiser: &str, outcome: Outcome) {
    if !verbose() {
        return;
    }
    let said = match outcome {
        Outcome::Repaired => "A: Promise REPAIRED",
        Outcome::Timeout => "A: Promise TIMED-OUT",
        Outcome::Warned | Outcome::Failed | Outcome::Interrupted => "A: Promise NOT KEPT!",
        Outcome::Denied => "A: Promise NOT KEPT - denied",
        Outcome::Kept => "A: Promise was KEPT",
    };
    tracing::debug!("{said}");
    let short: String = promiser.chars().take(30).collect();
    let more = if promiser.chars().count() > 30 {
        "..."
    } else {
        ""
    };
    tracing::debug!("P: END {promise_type} promise ({short}{more})");
}

/// A promiser as cf-agent writes it in a stack path: abbreviated, with
/// the characters it mangles names with (`#` and `*`) shown as `.` and `:`
/// wherever they are.
pub(super) fn stack_promiser(promiser: &str) -> String {
    abbreviated(promiser).replace('#', ".").replace('*', ":")
}

/// A promiser of several lines, as cf-agent shows it: its first and last
/// few characters around `...`.
fn abbreviated(promiser: &str) -> String {
    const N: usize = 19;
    let Some(nl) = promiser.find('\n') else {
        return promiser.to_string();
    };
    let head: String = promiser[..nl].chars().take(N).collect();
    let last = promiser.rsplit('\n').next().unwrap_or("");
    let count = last.chars().count();
    let tail: String = last.chars().skip(count.saturating_sub(N)).collect();
    format!("{head}...{tail}")
}
