//! The expanded-promise vocabulary: one iteration of a promise with its
//! attributes evaluated (bodies resolved, bundle references with their
//! arguments), and what both the scheduler and the edit bundles do with
//! one: expand its attributes, define the classes of its outcome.

use super::EvalContext;
use super::bodies::{
    BODY_ATTRIBUTES, BUNDLE_ATTRIBUTES, BodyError, ResolvedBody, default_body, reference_parts,
    resolve_body,
};
use super::classes::ClassInfo;
use crate::load::PolicySet;
use crate::report::Outcome;
use crate::state::{PersistentClass, StateStore};
use crate::syntax::ast::{Promise, Rval};
use crate::values::canon::canonify_class;
use crate::values::number::parse_bool;
use crate::values::{Origin, Value};
use indexmap::IndexMap;
use std::sync::Arc;

/// The most passes over a bundle, as cf-agent does.
pub const MAX_PASSES: usize = 3;

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
    /// The type, bundle, namespace and file are shared by every iteration
    /// of the promise (one may have thousands).
    pub promise_type: Arc<str>,
    pub promiser: String,
    pub attrs: IndexMap<String, AttrValue>,
    pub bundle: Arc<str>,
    pub namespace: Arc<str>,
    pub file: Arc<str>,
    pub line: usize,
    pub handle: Option<String>,
    /// Some reference in the promise could not be resolved (yet). Only
    /// custom promise types act on such a promise: cf-agent fails it until
    /// it resolves.
    pub unresolved: bool,
    /// Which iteration of the promise this is, from 1, counting those
    /// its condition excluded (cf-agent's stack path shows it).
    pub iteration: usize,
    /// A files promise that names several files (a regex promiser, a
    /// depth search) whose attributes refer to `$(this.promiser)` or a
    /// regex promiser's `$(match.N)`: its attributes with those references
    /// as written, bound for each file by [`ExpandedPromise::for_file`].
    pub per_file: Option<std::sync::Arc<IndexMap<String, AttrValue>>>,
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

    /// ` (in a commands promise at FILE:LINE)` under `-v`, nothing
    /// otherwise: where cf-agent's own message is the whole line (the
    /// examples and tests compare it), the place is added only when
    /// verbose, as cf-agent adds it.
    pub fn located_when_verbose(&self) -> String {
        if crate::report::log::verbose() {
            format!(" {}", self.located())
        } else {
            String::new()
        }
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

    /// A body with the references bound per file as written, when the
    /// promise binds some (see [`ExpandedPromise::for_file`]); the body
    /// otherwise. A `file_select` body's `exec_program` names each file it
    /// selects by `$(this.promiser)`, as cf-agent's does.
    pub fn written_body(&self, name: &str) -> Option<&ResolvedBody> {
        match self.per_file.as_ref().and_then(|t| t.get(name)) {
            Some(AttrValue::Body(b)) => Some(b),
            _ => self.body(name),
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

impl ExpandedPromise {
    /// The promise as cf-agent acts on one of the files it names (each
    /// file a regex promiser matched, each a depth search found): its
    /// attributes expanded again with `$(this.promiser)` the file's path
    /// and `$(match.N)` the groups of the promiser's pattern on that path
    /// (`groups[0]` the whole match; none: those bound now). `None` when
    /// no attribute refers to them: the promise is the same for every
    /// file.
    pub fn for_file(
        &self,
        ctx: &mut EvalContext,
        path: &str,
        groups: &[Option<String>],
    ) -> Option<ExpandedPromise> {
        let template = self.per_file.as_ref()?;
        let old_promiser = ctx.lookup("this.promiser");
        ctx.set_this("promiser", Value::str(path));
        // The groups stay bound after, as cf-agent's match scope keeps the
        // last file's: the promise's own classes, set for its promiser
        // once it is done, read them (04_match/match_scope.cf).
        for (i, g) in groups.iter().enumerate() {
            if let Some(g) = g {
                let var = crate::eval::vars::Variable::new(
                    Value::str(g.clone()),
                    crate::values::DataType::String,
                    Origin::Agent,
                );
                ctx.vars.put("default", "match", &i.to_string(), var);
            }
        }
        let expand = |ctx: &EvalContext, v: &Value| -> Value {
            let one = |s: &String| {
                if super::context::may_hold_reference(s) {
                    ctx.expand(s).text
                } else {
                    s.clone()
                }
            };
            match v {
                Value::Scalar(s) => Value::Scalar(one(s)),
                Value::List(l) => Value::List(l.iter().map(one).collect()),
                other => other.clone(),
            }
        };
        let attrs = template
            .iter()
            .map(|(name, v)| {
                let v = match v {
                    AttrValue::Value(v) => AttrValue::Value(expand(ctx, v)),
                    AttrValue::Body(b) => AttrValue::Body(ResolvedBody {
                        name: b.name.clone(),
                        attrs: b
                            .attrs
                            .iter()
                            .map(|(k, v)| (k.clone(), expand(ctx, v)))
                            .collect(),
                        bundle_args: b
                            .bundle_args
                            .iter()
                            .map(|(k, args)| {
                                (k.clone(), args.iter().map(|a| expand(ctx, a)).collect())
                            })
                            .collect(),
                    }),
                    AttrValue::Bundle { name, args } => AttrValue::Bundle {
                        name: name.clone(),
                        args: args.iter().map(|a| expand(ctx, a)).collect(),
                    },
                };
                (name.clone(), v)
            })
            .collect();
        if let Some(old) = old_promiser {
            ctx.set_this("promiser", old);
        }
        Some(ExpandedPromise {
            attrs,
            per_file: None,
            ..self.clone()
        })
    }
}

/// Whether a files promise's promiser names files by a pattern: its
/// `pathtype`, or, when it guesses (the default), whether the path holds
/// a regular expression's characters.
pub fn is_regex_path(promiser: &str, pathtype: Option<&str>) -> bool {
    match pathtype.unwrap_or("guess") {
        "regex" => true,
        "literal" => false,
        _ => path_looks_like_regex(promiser),
    }
}

/// Characters that make a promiser a regular expression (`pathtype => "guess"`).
pub fn path_looks_like_regex(s: &str) -> bool {
    s.contains(['*', '+', '?', '[', ']', '(', ')', '|', '^', '$', '\\'])
}

/// A files promise's attributes with the references it binds per file
/// as written (see [`ExpandedPromise::for_file`]), when it names several
/// files and some attribute refers to them; `attrs` are the same
/// attributes expanded for the promiser itself.
pub fn per_file_template(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    promise: &Promise,
    promiser: &str,
    attrs: &IndexMap<String, AttrValue>,
) -> Option<std::sync::Arc<IndexMap<String, AttrValue>>> {
    let pathtype = match attrs.get("pathtype") {
        Some(AttrValue::Value(Value::Scalar(s))) => Some(s.as_str()),
        _ => None,
    };
    let regex = is_regex_path(promiser, pathtype);
    let searched = matches!(attrs.get("depth_search"), Some(AttrValue::Body(_)));
    if !regex && !searched {
        return None;
    }
    ctx.per_file_refs = Some(super::context::PerFileRefs { matches: regex });
    let template = expand_attributes(ctx, policy, "files", promise);
    ctx.per_file_refs = None;
    // A regex promiser's `$(match.N)` reads the same in both when no
    // group was bound before: its template is kept whatever it reads.
    template
        .ok()
        .filter(|t| regex || t != attrs)
        .map(std::sync::Arc::new)
}

/// Evaluates every attribute of a promise for the current iteration.
pub fn expand_attributes(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    promise_type: &str,
    promise: &Promise,
) -> Result<IndexMap<String, AttrValue>, BodyError> {
    let mut attrs = IndexMap::new();
    for a in &promise.attributes {
        let name = a.name.name.as_str();
        let v = if BODY_ATTRIBUTES.contains(&name)
            && matches!(a.value, Rval::Symbol(_) | Rval::Call(_))
        {
            AttrValue::Body(resolve_body(ctx, policy, name, &a.value)?)
        } else if BUNDLE_ATTRIBUTES.contains(&name) {
            let (bname, args) = reference_parts(ctx, &a.value, true)?;
            AttrValue::Bundle { name: bname, args }
        } else if matches!(name, "if" | "ifvarclass" | "unless") {
            // Already decided by `promise_condition`; an `unless` that runs
            // in the last pass with unresolved arguments is not an error.
            match ctx.eval_rval(&a.value) {
                Ok(e) => AttrValue::Value(e.value),
                Err(_) => continue,
            }
        } else if name == "with" {
            // cf-agent defines `this.with` only from a value it computed: a
            // call that fails leaves `$(with)` as written and the promise
            // goes on (a report prints the text), the call's error told.
            match ctx.eval_rval(&a.value) {
                Ok(e) => AttrValue::Value(e.value),
                Err(super::call::FnError::Failed(m)) => {
                    let this = |n: &str| {
                        ctx.lookup(&format!("this.{n}"))
                            .and_then(|v| v.as_scalar().map(str::to_string))
                            .unwrap_or_default()
                    };
                    let at = format!(
                        "{}:{}",
                        this("promise_filename"),
                        this("promise_linenumber")
                    );
                    if ctx.note_refused_iteration(&format!("with {at} {m}")) {
                        crate::error!("{m} (in the 'with' of a promise at {at})");
                    }
                    continue;
                }
                Err(_) => continue,
            }
        } else {
            let e = ctx.eval_rval(&a.value)?;
            AttrValue::Value(e.value)
        };
        attrs.insert(name.to_string(), v);
    }
    if let Some(def) = crate::schema::promise_type(promise_type) {
        for a in def.attributes {
            if a.ty != crate::schema::ValueType::Body || attrs.contains_key(a.name) {
                continue;
            }
            if let Some(body) = default_body(ctx, policy, promise_type, a.name) {
                attrs.insert(a.name.to_string(), AttrValue::Body(body?));
            }
        }
    }
    Ok(attrs)
}

/// A stable text for the attributes of an iteration, so that two
/// iterations with the same promiser but different attributes are told
/// apart.
pub(crate) fn attrs_key(attrs: &IndexMap<String, AttrValue>) -> String {
    let mut k = String::new();
    for (n, v) in attrs {
        k.push_str(n);
        k.push('=');
        match v {
            AttrValue::Value(Value::Scalar(s)) => k.push_str(s),
            AttrValue::Value(Value::List(l)) => k.push_str(&l.join(",")),
            AttrValue::Value(Value::Data(d)) => k.push_str(&d.to_string()),
            AttrValue::Body(b) => k.push_str(&body_key(b)),
            AttrValue::Bundle { name, args } => {
                k.push_str(name);
                for a in args {
                    k.push('|');
                    k.push_str(&format!("{a:?}"));
                }
            }
        }
        k.push(';');
    }
    k
}

fn body_key(b: &ResolvedBody) -> String {
    format!("{}{:?}", b.name, b.attrs)
}

/// Defines (and cancels) the classes a `classes` body asks for on an
/// outcome, persisting them when it says so. Shared by the scheduler and
/// the promises inside edit bundles. Returns whether a new class appeared.
pub fn define_outcome_classes(
    ctx: &mut EvalContext,
    mut state: Option<&mut StateStore>,
    now: i64,
    body: &ResolvedBody,
    outcome: Outcome,
) -> bool {
    let (define, cancel) = match outcome {
        Outcome::Kept => ("promise_kept", "cancel_kept"),
        Outcome::Repaired => ("promise_repaired", "cancel_repaired"),
        Outcome::Denied => ("repair_denied", "cancel_notkept"),
        Outcome::Timeout => ("repair_timeout", "cancel_notkept"),
        Outcome::Failed | Outcome::Interrupted | Outcome::Warned => {
            ("repair_failed", "cancel_notkept")
        }
    };
    let names = body.list(define);
    let local = body.scalar("scope") == Some("bundle");
    let persist = body
        .scalar("persist_time")
        .and_then(|v| crate::values::number::parse_int(v).ok())
        .filter(|&m| m > 0);
    let reset = body.scalar("timer_policy") != Some("absolute");
    let mut changed = false;
    for n in names {
        let name = canonify_class(&n);
        if let (Some(minutes), Some(st)) = (persist, state.as_deref_mut()) {
            let class = PersistentClass {
                name: name.clone(),
                expires: now + minutes * 60,
                tags: Vec::new(),
            };
            if let Err(e) = st.persist_class(&class, reset) {
                crate::error!("{e}");
            }
        }
        // cf-agent tags outcome classes with nothing at all.
        let info = ClassInfo::soft(Origin::Agent, Vec::new());
        changed |= ctx.define_class(&name, local, info);
    }
    for n in body.list(cancel) {
        let name = canonify_class(&n);
        ctx.undefine_class(&name);
        if let Some(st) = state.as_deref_mut()
            && let Err(e) = st.forget_class(&name)
        {
            crate::error!("{e}");
        }
    }
    changed
}
