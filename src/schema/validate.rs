//! The validator: checks parsed policy files against the schema, with the
//! verdict cf-promises 3.21 gives.
//!
//! Only what cf-promises rejects is an error here. Mistakes it lets through
//! but which fail later (a function with the wrong argument count outside
//! what cf-promises evaluates, an undeclared custom promise type, an
//! unknown function inside another call) are warnings, so the verdict stays
//! the same while the message still reaches the writer.
//!
//! What cf-promises checks, as found by experiment:
//! - bundles: the bundle type, reserved names, duplicates (same namespace,
//!   name and type), which promise types the bundle type allows;
//! - promises: unknown attributes; values of the promise type's own
//!   attributes against type and range (variable references deferred);
//!   a list given to any attribute that does not take one; body references
//!   written as quoted strings; `if`/`ifvarclass` class syntax; vars
//!   promises with two types or an invalid variable name; duplicate
//!   handles; the argument count of bundles called by `usebundle`;
//! - bodies: unknown attributes, values against type and range, duplicate
//!   bodies (`body file control` excepted), quoted class guards; custom
//!   promise blocks only for agent and not for a built-in type;
//! - class guards written without quotes;
//! - functions: unknown at the top of a checked value, returning the wrong
//!   type, and the argument count where cf-promises evaluates the call
//!   (vars promises, and classes promises of common bundles);
//! - when the policy is runnable (it has `body common control`), or in a
//!   full check (`cf-promises -c`, cf-agent before a run): bodies
//!   referenced from promises must exist.

use super::values::{
    ClassLiteralError, Misfit, check_class_literal, check_literal, has_var_ref,
    misfit_literal_arguments,
};
use super::{
    AttrDef, BUNDLE_CALL_ATTRIBUTES, BundleType, CUSTOM_PROMISE_BLOCK_ATTRIBUTES, FunctionDef,
    PromiseTypeDef, RESERVED_BUNDLE_NAMES, RESERVED_VARIABLE_NAMES, Status, VARIABLE_TYPES,
    ValueType, Visibility, body_type, bundle_type, bundle_type_names, function, promise_type,
    promise_types,
};
use crate::syntax::MAX_NESTING;
use crate::syntax::ast::{
    Attribute, Body, BodyKind, Bundle, ClassGuard, FnCall, PolicyFile, Promise, Rval, Section,
};
use crate::syntax::diagnostic::suggest;
use crate::syntax::{Diagnostic, Span};
use crate::values::regex::RegexCache;
use std::collections::{HashMap, HashSet};

/// The sets asked once per promise (guards met, handles): foldhash hashes
/// a number or two short names several times faster than SipHash.
type FastSet<T> = HashSet<T, foldhash::fast::RandomState>;
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Checks `files` together (duplicates and references are looked for
/// across all of them) and returns each diagnostic with the index of the
/// file it belongs to, in file and source order.
pub fn validate(files: &[&PolicyFile]) -> Vec<(usize, Diagnostic)> {
    validate_with(files, Scope::WholePolicy)
}

/// How much of the policy the files given to the validator are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything the policy loads: references must resolve among them.
    WholePolicy,
    /// Files taken on their own (their inputs not followed): what they
    /// reference may be defined elsewhere, so that is not checked.
    Fragment,
    /// Everything the policy loads, checked as `cf-promises -c` checks it
    /// (and cf-agent before it runs): references must resolve even without
    /// `body common control`.
    FullCheck,
}

pub fn validate_with(files: &[&PolicyFile], scope: Scope) -> Vec<(usize, Diagnostic)> {
    let mut v = Validator::new(files);
    match scope {
        Scope::Fragment => v.runnable = false,
        Scope::WholePolicy => {}
        Scope::FullCheck => v.runnable = true,
    }
    v.run();
    let mut out = v.out;
    out.sort_by_key(|(f, d)| (*f, d.span.start, d.span.end));
    out
}

/// Whether a `body common control` says `require_comments` is true (a
/// literal, as cf-promises reads it before evaluating anything).
fn requires_comments(b: &Body) -> bool {
    b.attributes.iter().any(|ba| {
        ba.attr.name.name == "require_comments"
            && matches!(&ba.attr.value, Rval::String(s)
                if crate::values::number::parse_bool(&s.value) == Some(true))
    })
}

/// A call argument written as a plain value: neither a reference nor a
/// nested call.
fn is_literal(a: &Rval) -> bool {
    match a {
        Rval::String(s) => !has_var_ref(&s.value),
        Rval::Symbol(_) => true,
        _ => false,
    }
}

/// Where a function call sits, which decides whether cf-promises evaluates
/// it while checking (and so whether a wrong argument count is fatal).
#[derive(Clone, Copy, PartialEq, Eq)]
enum CallSite {
    Evaluated,
    NotEvaluated,
}

struct Validator<'a> {
    files: &'a [&'a PolicyFile],
    out: Vec<(usize, Diagnostic)>,
    /// The file being checked.
    file: usize,
    regexes: RegexCache,
    /// Names declared by `promise agent NAME { ... }` blocks.
    custom_types: FastSet<&'a str>,
    /// Bodies by (type, name), with the namespace of each definition.
    bodies: FastMap<(&'a str, &'a str), Vec<&'a str>>,
    /// Bundles of type agent or common by (namespace, name): their
    /// parameter count.
    callable: FastMap<(&'a str, &'a str), usize>,
    /// The policy has `body common control`, so cf-promises checks that
    /// referenced bodies exist (and the files are the whole policy).
    runnable: bool,
    /// Handles seen so far, with the class guard of their promise.
    handles: FastSet<(&'a str, &'a str)>,
    /// `body common control` says `require_comments => "true"`: every
    /// promise must have a `comment`, as cf-promises requires then.
    require_comments: bool,
    /// Each promise type's definition of an attribute name, by the type's
    /// address and the name: one hash lookup instead of a binary search
    /// (a memcmp per step) for each of a policy's tens of thousands of
    /// attributes.
    promise_attr_defs: FastMap<(usize, &'a str), Option<&'static AttrDef>>,
}

impl<'a> Validator<'a> {
    fn new(files: &'a [&'a PolicyFile]) -> Validator<'a> {
        let mut v = Validator {
            files,
            out: Vec::new(),
            file: 0,
            regexes: RegexCache::default(),
            custom_types: FastSet::default(),
            bodies: FastMap::default(),
            callable: FastMap::default(),
            runnable: false,
            handles: FastSet::default(),
            require_comments: false,
            promise_attr_defs: FastMap::default(),
        };
        for f in files {
            for b in f.bodies() {
                match b.kind {
                    BodyKind::Promise => {
                        v.custom_types.insert(b.name.name.as_str());
                    }
                    BodyKind::Body => {
                        let (ns, name) = split_ns(&b.namespace, &b.name.name);
                        v.bodies
                            .entry((b.body_type.name.as_str(), name))
                            .or_default()
                            .push(ns);
                        if b.body_type.name == "common" && name == "control" {
                            v.runnable = true;
                            v.require_comments |= requires_comments(b);
                        }
                    }
                }
            }
            for b in f.bundles() {
                if matches!(b.bundle_type.name.as_str(), "agent" | "common") {
                    let (ns, name) = split_ns(&b.namespace, &b.name.name);
                    v.callable.entry((ns, name)).or_insert(b.params.len());
                }
            }
        }
        v
    }

    fn error(&mut self, span: Span, message: impl Into<String>) -> &mut Diagnostic {
        self.push(Diagnostic::error(span, message))
    }

    fn warning(&mut self, span: Span, message: impl Into<String>) -> &mut Diagnostic {
        self.push(Diagnostic::warning(span, message))
    }

    fn push(&mut self, d: Diagnostic) -> &mut Diagnostic {
        self.out.push((self.file, d));
        let last = self.out.len() - 1;
        &mut self.out[last].1
    }

    fn run(&mut self) {
        self.duplicates();
        for (i, f) in self.files.iter().enumerate() {
            self.file = i;
            for b in f.bundles() {
                self.bundle(b);
            }
            for b in f.bodies() {
                self.body(b);
            }
        }
    }

    /// Bundles with the same namespace, name and type, and bodies with the
    /// same namespace, type and name, in any of the files. Every definition
    /// after the first is reported.
    fn duplicates(&mut self) {
        let mut bundles: FastMap<(&str, &str, &str), usize> = FastMap::default();
        let mut bodies: FastMap<(&str, &str, &str), usize> = FastMap::default();
        for (i, f) in self.files.iter().enumerate() {
            self.file = i;
            for b in f.bundles() {
                let (ns, name) = split_ns(&b.namespace, &b.name.name);
                let key = (ns, name, b.bundle_type.name.as_str());
                if let Some(&first) = bundles.get(&key) {
                    let help = self.first_definition(first);
                    self.error(
                        b.name.span,
                        format!(
                            "bundle '{}' of type {} is defined more than once",
                            b.name.name, b.bundle_type.name
                        ),
                    )
                    .help = Some(help);
                } else {
                    bundles.insert(key, i);
                }
            }
            for b in f.bodies().filter(|b| b.kind == BodyKind::Body) {
                // Every file may have its own `body file control`.
                if b.body_type.name == "file" {
                    continue;
                }
                let (ns, name) = split_ns(&b.namespace, &b.name.name);
                let key = (ns, b.body_type.name.as_str(), name);
                if let Some(&first) = bodies.get(&key) {
                    let help = self.first_definition(first);
                    self.error(
                        b.name.span,
                        format!(
                            "body '{}' of type {} is defined more than once",
                            b.name.name, b.body_type.name
                        ),
                    )
                    .help = Some(help);
                } else {
                    bodies.insert(key, i);
                }
            }
        }
    }

    fn first_definition(&self, file: usize) -> String {
        if file == self.file {
            "the first definition is earlier in this file".to_string()
        } else {
            format!("the first definition is in {}", self.files[file].path)
        }
    }

    // ---- bundles ---------------------------------------------------------

    fn bundle(&mut self, b: &'a Bundle) {
        let (_, short_name) = split_ns(&b.namespace, &b.name.name);
        if RESERVED_BUNDLE_NAMES.contains(&short_name) {
            self.error(
                b.name.span,
                format!("'{short_name}' is a reserved scope name and cannot name a bundle"),
            );
        }
        let Some(bt) = bundle_type(&b.bundle_type.name) else {
            let help = suggest(&b.bundle_type.name, bundle_type_names()).map_or_else(
                || {
                    format!(
                        "bundle types are {}",
                        bundle_type_names().collect::<Vec<_>>().join(", ")
                    )
                },
                |s| format!("did you mean '{s}'?"),
            );
            // cf-promises' words, which tests grep for
            // (00_basics/04_bundles/wrong-bundle-type.cf).
            self.error(
                b.bundle_type.span,
                format!("Unknown bundle type '{}'", b.bundle_type.name),
            )
            .help = Some(help);
            return;
        };
        let mut guards_seen = FastSet::default();
        for s in &b.sections {
            self.section(b, bt, s, &mut guards_seen);
        }
    }

    fn section(
        &mut self,
        b: &'a Bundle,
        bt: BundleType,
        s: &'a Section,
        guards_seen: &mut FastSet<u32>,
    ) {
        let name = s.promise_type.name.as_str();
        let builtin = promise_type(name);
        let def = match builtin {
            Some(def) if bt.allows(name) => Some(def),
            Some(_) => {
                self.error(
                    s.promise_type.span,
                    format!(
                        "promise type '{name}' is not allowed in a bundle of type {}",
                        bt.name()
                    ),
                )
                .help = Some(format!(
                    "{} bundles take: {}",
                    bt.name(),
                    allowed_promise_types(bt).join(", ")
                ));
                None
            }
            None => {
                if !self.custom_types.contains(name) {
                    let mut d = Diagnostic::warning(
                        s.promise_type.span,
                        format!(
                            "promise type '{name}' is not built in, and no 'promise agent {name}' block declares it"
                        ),
                    );
                    let allowed = allowed_promise_types(bt);
                    d.help = Some(match suggest(name, allowed.iter().copied()) {
                        Some(s) => format!("did you mean '{s}'?"),
                        None => {
                            "cf-promises accepts it as a custom promise type declared elsewhere"
                                .to_string()
                        }
                    });
                    self.push(d);
                }
                None
            }
        };
        for p in &s.promises {
            if guards_seen.insert(p.guard.span.start) {
                self.bundle_guard(&p.guard);
            }
            if self.require_comments && p.attribute("comment").is_none() {
                // cf-promises 3.21's words (libpromises/policy.c
                // PolicyCheckRequiredComments): the policy is rejected.
                self.error(
                    p.promiser.span,
                    "Promise is missing a comment attribute, and comments are required by policy",
                );
            }
            self.promise(b, bt, name, def, builtin.is_none(), p);
        }
    }

    fn promise(
        &mut self,
        b: &'a Bundle,
        bt: BundleType,
        type_name: &str,
        def: Option<&'static PromiseTypeDef>,
        custom_type: bool,
        p: &'a Promise,
    ) {
        // cf-promises evaluates vars everywhere, and classes in common
        // bundles, while it checks; a broken call there fails the check.
        // Whether it gets to a call also depends on the promise's class
        // guard and on `if`/`unless`, which only the host can answer: a
        // call is taken as evaluated when nothing guards it.
        let evaluating_type =
            type_name == "vars" || (type_name == "classes" && bt.name() == "common");
        let unguarded = p.guard.expr.trim() == "any";
        let conditional = p
            .attributes
            .iter()
            .any(|a| matches!(a.name.name.as_str(), "if" | "ifvarclass" | "unless"));
        // The promise type is looked up once for its section (`custom_type`:
        // not built in), and each attribute's definition once for all the
        // checks below (a policy has tens of thousands).
        for a in &p.attributes {
            let attr_def = def.and_then(|d| self.promise_attr_def(d, &a.name.name));
            // cf-promises refuses the old spelling for custom promise types.
            if a.name.name == "ifvarclass" && custom_type {
                self.error(
                    a.name.span,
                    format!(
                        "Common attribute 'ifvarclass' not supported for custom promises, use 'if' instead ({type_name} promises)"
                    ),
                )
                .help = Some("write: if => ...".into());
            }
            let is_condition = matches!(a.name.name.as_str(), "if" | "ifvarclass" | "unless");
            let site = if evaluating_type && unguarded && (is_condition || !conditional) {
                CallSite::Evaluated
            } else {
                CallSite::NotEvaluated
            };
            let checked_top = match def {
                Some(def) => self.promise_attribute(def, attr_def, a),
                None => false,
            };
            if matches!(a.name.name.as_str(), "if" | "ifvarclass") {
                self.class_literal_value(&a.value);
            }
            let refs = is_reference_attribute(attr_def, &a.name.name)
                || (custom_type && self.names_custom_body(a));
            self.calls(&a.value, site, checked_top, refs);
            if a.name.name == "handle"
                && let Rval::String(h) = &a.value
                && !has_var_ref(&h.value)
            {
                // Promises under different class guards may share a
                // handle: at most one of them is in force.
                let key = (h.value.as_str(), p.guard.expr.trim());
                if self.handles.contains(&key) {
                    self.error(
                        h.span,
                        format!("promise handle '{}' is used more than once", h.value),
                    )
                    .help = Some(
                        "a handle names one promise in the whole policy (under one class guard)"
                            .to_string(),
                    );
                } else {
                    self.handles.insert(key);
                }
            }
        }
        if def.is_none() {
            return;
        }
        match type_name {
            "delete_lines" | "replace_patterns" | "field_edits" => self.regex_promiser(p),
            "vars" => self.vars_promise(p),
            "methods" => self.methods_promise(b, p),
            _ => {}
        }
    }

    /// `def.attribute(name)`, looked up once per promise type and name.
    fn promise_attr_def(
        &mut self,
        def: &'static PromiseTypeDef,
        name: &'a str,
    ) -> Option<&'static AttrDef> {
        *self
            .promise_attr_defs
            .entry((std::ptr::from_ref(def) as usize, name))
            .or_insert_with(|| def.attribute(name))
    }

    /// The promiser of an edit_line promise that is a regular expression:
    /// one that cannot compile fails the promise when the agent runs it,
    /// and the agent's error there names the pattern but not the promise.
    /// cf-promises lets it through, so this is a warning, at the promise.
    fn regex_promiser(&mut self, p: &Promise) {
        let pattern = &p.promiser.value;
        if has_var_ref(pattern) {
            return;
        }
        if let Err(e) = self.regexes.get(pattern) {
            self.warning(p.promiser.span, e.to_string()).help = Some(
                "cf-promises accepts it, but the promise fails when the agent runs it".to_string(),
            );
        }
    }

    /// Checks one attribute of a built-in promise type; returns whether the
    /// value's top-level function call (if any) was checked already.
    /// `attr_def` is `def`'s definition of the attribute, if it has one.
    fn promise_attribute(
        &mut self,
        def: &'static PromiseTypeDef,
        attr_def: Option<&'static AttrDef>,
        a: &'a Attribute,
    ) -> bool {
        let Some(ad) = attr_def else {
            let help = suggest(&a.name.name, def.attributes.iter().map(|x| x.name))
                .map(|s| format!("did you mean '{s}'?"));
            self.error(
                a.name.span,
                format!(
                    "unknown attribute '{}' for promise type '{}'",
                    a.name.name, def.name
                ),
            )
            .help = help;
            return false;
        };
        if let Some(n) = super::newer::of_def(ad)
            && !n.implemented
        {
            self.error(a.name.span, super::newer::refusal(n));
            return true;
        }
        if ad.status == Status::Deprecated {
            self.warning(
                a.name.span,
                format!(
                    "attribute '{}' of promise type '{}' is deprecated",
                    ad.name, def.name
                ),
            );
        }
        let own = ad.visibility == Visibility::PromiseType;
        let mut checked_top = false;
        if own && !matches!(ad.ty, ValueType::Body | ValueType::Bundle) {
            self.value(ad, &a.value, true);
            checked_top = true;
        } else if let Rval::List { span, .. } = &a.value
            && !ad.ty.is_list()
        {
            self.error(
                *span,
                format!(
                    "attribute '{}' takes a single {}, not a list",
                    ad.name,
                    type_word(ad.ty)
                ),
            );
        }
        if ad.ty == ValueType::Body {
            if own && let Rval::String(s) = &a.value {
                self.error(
                    s.span,
                    format!("the body reference '{}' must not be quoted", s.value),
                )
                .help = Some(format!("write {} => {}", ad.name, s.value));
            } else if self.runnable {
                self.body_reference(ad.name, &a.value);
            }
        }
        checked_top
    }

    /// A body referenced from a promise must exist once the policy is
    /// runnable. An unqualified name matches a body of that type in any
    /// namespace; `ns:name` only the one in `ns`.
    fn body_reference(&mut self, body_type: &str, value: &Rval) {
        let (name, span) = match value {
            Rval::Symbol(i) => (i.name.as_str(), i.span),
            Rval::String(s) => (s.value.as_str(), s.span),
            Rval::NakedVar { text, span } => (text.as_str(), *span),
            Rval::Call(c) => (c.name.name.as_str(), c.name.span),
            Rval::List { .. } => return,
        };
        let (want_ns, short) = match split_at_colon(name) {
            Some((ns, n)) => (Some(ns), n),
            None => (None, name),
        };
        let found = self
            .bodies
            .get(&(body_type, short))
            .is_some_and(|nss| want_ns.is_none_or(|w| nss.contains(&w)));
        if found {
            return;
        }
        let candidates: Vec<&str> = self
            .bodies
            .keys()
            .filter(|(t, _)| *t == body_type)
            .map(|(_, n)| *n)
            .collect();
        let help =
            suggest(short, candidates.iter().copied()).map(|s| format!("did you mean '{s}'?"));
        // cf-promises' words, which tests and users grep for.
        self.error(span, format!("Undefined body {name} with type {body_type}"))
            .help = help;
    }

    fn vars_promise(&mut self, p: &'a Promise) {
        let name = &p.promiser.value;
        if !valid_variable_name(name) {
            self.error(
                p.promiser.span,
                format!("'{name}' is not a valid variable name"),
            )
            .help = Some(if RESERVED_VARIABLE_NAMES.contains(&name.as_str()) {
                format!("'{name}' is reserved")
            } else {
                "a name has at most one '.', between a bundle name and a variable name".to_string()
            });
        }
        let typed: Vec<&Attribute> = p
            .attributes
            .iter()
            .filter(|a| VARIABLE_TYPES.contains(&a.name.name.as_str()))
            .collect();
        match typed.first() {
            None => {
                self.warning(
                    p.promiser.span,
                    format!("vars promise '{name}' gives the variable no value"),
                )
                .help = Some(format!("add one of {}", VARIABLE_TYPES.join(", ")));
            }
            Some(first) => {
                if let Some(other) = typed.iter().find(|a| a.name.name != first.name.name) {
                    self.error(
                        other.name.span,
                        format!(
                            "variable '{name}' is already given type {}; it cannot also be {}",
                            first.name.name, other.name.name
                        ),
                    );
                }
            }
        }
        // A function whose result has another type than the variable's
        // passes the parser but stops evaluation.
        for a in typed {
            if let Rval::Call(c) = &a.value
                && let Some(f) = function(&c.name.name)
            {
                let declared = a.name.name.as_str();
                let bad = matches!(
                    (f.return_type, declared),
                    (ValueType::Int | ValueType::Real, "string")
                        | (ValueType::Int, "ilist")
                        | (ValueType::Real, "rlist")
                );
                if bad {
                    self.error(
                        c.name.span,
                        format!(
                            "variable '{name}' is declared {declared}, but function '{}' returns {}",
                            f.name,
                            f.return_type.as_str()
                        ),
                    );
                }
            }
        }
    }

    /// `usebundle => b(args)`: when `b` is an agent or common bundle of
    /// this policy, the argument count must match its parameters.
    fn methods_promise(&mut self, b: &'a Bundle, p: &'a Promise) {
        for a in p.attributes.iter().filter(|a| a.name.name == "usebundle") {
            let Rval::Call(c) = &a.value else { continue };
            let (ns, name) = split_ns(&b.namespace, &c.name.name);
            if let Some(&want) = self.callable.get(&(ns, name))
                && want != c.args.len()
            {
                self.error(
                    c.span,
                    format!(
                        "bundle '{}' takes {} but is called with {}",
                        c.name.name,
                        count(want, "argument"),
                        c.args.len()
                    ),
                );
            }
        }
    }

    // ---- values ------------------------------------------------------------

    /// Checks a value of an attribute whose type cf-promises checks.
    fn value(&mut self, ad: &AttrDef, value: &Rval, top: bool) {
        match value {
            Rval::List { items, span } => {
                if !ad.ty.is_list() {
                    self.error(
                        *span,
                        format!(
                            "attribute '{}' takes a single {}, not a list",
                            ad.name,
                            type_word(ad.ty)
                        ),
                    );
                    return;
                }
                for item in items {
                    self.value(ad, item, false);
                }
            }
            Rval::Call(c) => {
                if !BUNDLE_CALL_ATTRIBUTES.contains(&ad.name) {
                    self.call_type(ad, c);
                }
            }
            Rval::String(_) | Rval::Symbol(_) | Rval::NakedVar { .. } => {
                let (text, span) = scalar(value);
                if top && ad.ty.is_list() {
                    self.error(
                        span,
                        format!(
                            "attribute '{}' takes a list ({}), not a single value",
                            ad.name,
                            ad.ty.as_str()
                        ),
                    )
                    .help = Some("write the value in braces: { ... }".to_string());
                    return;
                }
                if let Err(m) = check_literal(ad.name, text, ad.ty, ad.range, &mut self.regexes) {
                    self.misfit(span, ad.name, m);
                }
            }
        }
    }

    fn misfit(&mut self, span: Span, lval: &str, m: Misfit) {
        self.error(span, format!("{} for '{lval}'", m.message)).help = m.help;
    }

    /// A function call given as the value of a checked attribute: the
    /// function must exist and return a type the attribute can take.
    fn call_type(&mut self, ad: &AttrDef, c: &FnCall) {
        let Some(f) = function(&c.name.name) else {
            let help = suggest(&c.name.name, super::functions().iter().map(|f| f.name))
                .map(|s| format!("did you mean '{s}'?"));
            self.error(c.name.span, format!("unknown function '{}'", c.name.name))
                .help = help;
            return;
        };
        if !returns_fit(f.return_type, ad.ty) {
            self.error(
                c.name.span,
                format!(
                    "function '{}' returns {}, but '{}' takes {}",
                    f.name,
                    f.return_type.as_str(),
                    ad.name,
                    ad.ty.as_str()
                ),
            );
        }
    }

    /// Every function call in a value: argument counts, and unknown
    /// functions cf-promises does not reject (it only complains when it
    /// evaluates them). `checked_top` says the value's own call was
    /// type-checked already.
    /// With `refs`, calls at the top or in a top-level list are body or
    /// bundle references, and only their arguments are looked into.
    fn calls(&mut self, value: &Rval, site: CallSite, checked_top: bool, refs: bool) {
        match value {
            Rval::List { items, .. } => {
                for item in items {
                    self.calls(item, site, checked_top, refs);
                }
            }
            Rval::Call(c) if refs => {
                for a in &c.args {
                    self.calls(a, site, false, false);
                }
            }
            Rval::Call(c) => {
                match function(&c.name.name) {
                    Some(f) if !f.accepts_arity(c.args.len()) => {
                        let msg = format!(
                            "function '{}' takes {}, but {} given",
                            f.name,
                            count(f.params.len(), "argument"),
                            c.args.len()
                        );
                        self.bad_call(c.span, site, msg, None);
                    }
                    Some(f) if f.name == "ifelse" && even_ifelse(c) => {
                        // cf-promises 3.21 stops on it when it evaluates
                        // the call ("in built-in FnCall ifelse: even number
                        // of arguments"), and exits 1.
                        let msg = "function 'ifelse': needs an odd number of arguments (pairs of condition and value, then a default)";
                        self.bad_call(c.span, site, msg, None);
                    }
                    Some(f) => self.literal_args(f, c, site),
                    None if checked_top || c.name.name.contains('$') => {}
                    None => {
                        let help = suggest(&c.name.name, super::functions().iter().map(|f| f.name))
                            .map(|s| format!("did you mean '{s}'?"));
                        self.warning(c.name.span, format!("unknown function '{}'", c.name.name))
                            .help = help;
                    }
                }
                for a in &c.args {
                    self.calls(a, site, false, false);
                }
            }
            _ => {}
        }
    }

    /// A call the agent will fail on: an error (with `help`) where
    /// cf-promises evaluates it and fails too, else a warning.
    fn bad_call(
        &mut self,
        span: Span,
        site: CallSite,
        msg: impl Into<String>,
        help: Option<String>,
    ) {
        match site {
            CallSite::Evaluated => self.error(span, msg).help = help,
            CallSite::NotEvaluated => {
                self.warning(span, msg).help = Some(
                    "cf-promises does not evaluate this call, but the agent will fail on it"
                        .to_string(),
                );
            }
        }
    }

    /// Literal arguments must fit their parameter's type and range: cf-agent
    /// checks every evaluated call's literal arguments against the
    /// function's template and stops the run ("In function 'accumulated',
    /// error in variable '1001', 'Integer is out of range'"; "In function
    /// 'readdata', error in variable 'bogus', 'Selection is out of bounds'";
    /// "... 'Filename is not an absolute path'"). A value naming a variable
    /// is not checked there, nor here; class expressions are checked as the
    /// call reads them.
    fn literal_args(&mut self, f: &FunctionDef, c: &FnCall, site: CallSite) {
        // A call with an argument that is not literal may never be
        // evaluated (a reference that never resolves): the evaluation
        // checks it when it calls it.
        if site == CallSite::Evaluated && c.args.iter().any(|a| !is_literal(a)) {
            return;
        }
        for (i, _, m) in misfit_literal_arguments(f, &c.args, &mut self.regexes) {
            let span = match &c.args[i] {
                Rval::String(s) => s.span,
                Rval::Symbol(s) => s.span,
                _ => c.span,
            };
            let msg = format!("function '{}': {}", f.name, m.message);
            self.bad_call(span, site, msg, m.help);
        }
    }

    fn class_literal_value(&mut self, value: &Rval) {
        let (text, span) = match value {
            Rval::String(s) => (s.value.as_str(), s.span),
            Rval::Symbol(i) => (i.name.as_str(), i.span),
            _ => return,
        };
        if let Err(e) = check_class_literal(text) {
            self.class_syntax_error(span, text, e);
        }
    }

    fn class_syntax_error(&mut self, span: Span, text: &str, e: ClassLiteralError) {
        if e.too_deep {
            // The text may be huge: the message names the limit, the caret
            // the expression.
            self.error(
                span,
                format!(
                    "class expression nested too deeply: expected at most {MAX_NESTING} levels of '(' and '!', found more at character {}",
                    e.at + 1
                ),
            )
            .help = Some(
                "the agent refuses deeper nesting rather than exhaust its stack".to_string(),
            );
            return;
        }
        let at = e.at;
        let help = if text.contains("&&") {
            "'&' is written once: a&b or a.b".to_string()
        } else {
            format!("the expression cannot be read from character {}", at + 1)
        };
        self.error(span, format!("syntax error in class expression '{text}'"))
            .help = Some(help);
    }

    /// A class guard in a bundle; quoted ones may hold variables and are
    /// checked once expanded.
    fn bundle_guard(&mut self, g: &ClassGuard) {
        if g.quoted || g.span == Span::default() {
            return;
        }
        self.unquoted_guard(g);
    }

    fn unquoted_guard(&mut self, g: &ClassGuard) {
        if blank_between_names(&g.expr) {
            self.error(
                g.span,
                format!(
                    "class names in guard '{}::' are separated by a blank",
                    g.expr.trim()
                ),
            )
            .help = Some("join class names with an operator: '.', '&' or '|'".to_string());
            return;
        }
        // Most guards have no blank: no copy for them.
        let compact: std::borrow::Cow<str> = if g.expr.contains(char::is_whitespace) {
            g.expr.chars().filter(|c| !c.is_whitespace()).collect()
        } else {
            std::borrow::Cow::Borrowed(&g.expr)
        };
        if let Err(e) = check_class_literal(&compact) {
            self.class_syntax_error(g.span, &compact, e);
        }
    }

    // ---- bodies ------------------------------------------------------------

    fn body(&mut self, b: &'a Body) {
        if b.kind == BodyKind::Promise {
            self.custom_promise_block(b);
            return;
        }
        let mut guards_seen = FastSet::default();
        for ba in &b.attributes {
            let g = &ba.guard;
            if g.span != Span::default() && guards_seen.insert(g.span.start) {
                if g.quoted {
                    self.error(
                        g.span,
                        format!(
                            "body attributes cannot be guarded by a quoted class expression (\"{}\")",
                            g.expr
                        ),
                    )
                    .help = Some(format!("write the guard without quotes: {}::", g.expr));
                } else {
                    self.unquoted_guard(g);
                }
            }
        }
        let Some(def) = body_type(&b.body_type.name) else {
            // cf-promises accepts bodies of any type; only the ones it
            // knows are checked.
            let names = super::body_types().iter().map(|t| t.name);
            if let Some(s) = suggest(&b.body_type.name, names) {
                self.warning(
                    b.body_type.span,
                    format!("'{}' is not a built-in body type", b.body_type.name),
                )
                .help = Some(format!("did you mean '{s}'?"));
            }
            return;
        };
        let control = b.name.name == "control";
        if def.name == "action" {
            self.action_logs_something(b);
        }
        for ba in &b.attributes {
            let a = &ba.attr;
            let Some(ad) = def.attribute(&a.name.name) else {
                if super::is_removed_body_attribute(def.name, &a.name.name) {
                    self.warning(
                        a.name.span,
                        format!(
                            "Removed constraint '{}' in promise type '{}'; it is ignored",
                            a.name.name, def.name
                        ),
                    );
                    continue;
                }
                let help = suggest(&a.name.name, def.attributes.iter().map(|x| x.name))
                    .map(|s| format!("did you mean '{s}'?"));
                self.error(
                    a.name.span,
                    format!(
                        "unknown attribute '{}' for body {} {}",
                        a.name.name, b.body_type.name, b.name.name
                    ),
                )
                .help = help;
                continue;
            };
            if let Some(n) = super::newer::of_def(ad)
                && !n.implemented
            {
                self.error(a.name.span, super::newer::refusal(n));
                continue;
            }
            // A control attribute the agent does not support is refused
            // where it is written, as a promise's is where it runs.
            if control
                && let Some(why) =
                    super::support::refused(super::support::Owner::Body, def.name, ad.name)
            {
                self.error(
                    a.name.span,
                    format!(
                        "attribute '{}' of body {} control is not supported yet: {why}",
                        ad.name, def.name
                    ),
                );
            }
            if ad.status == Status::Deprecated {
                self.warning(
                    a.name.span,
                    format!(
                        "attribute '{}' of body type '{}' is deprecated",
                        ad.name, def.name
                    ),
                );
            }
            let checked = !matches!(ad.ty, ValueType::Body | ValueType::Bundle);
            if checked {
                self.value(ad, &a.value, true);
            }
            // Control bodies are evaluated while checking, other bodies
            // only when a promise uses them.
            let site = if control && ba.guard.expr.trim() == "any" {
                CallSite::Evaluated
            } else {
                CallSite::NotEvaluated
            };
            let refs = is_reference_attribute(Some(ad), ad.name);
            self.calls(&a.value, site, checked, refs);
        }
    }

    /// Whether an attribute of a custom promise names a body: a common one
    /// (`action`, `classes`), or one of a type named after the attribute
    /// (a custom body, which modules of the JSON protocol receive).
    /// An action body that names where to log must say what to log.
    fn action_logs_something(&mut self, b: &Body) {
        let has = |n: &str| b.attributes.iter().any(|ba| ba.attr.name.name == n);
        if ["log_kept", "log_repaired", "log_failed"]
            .iter()
            .any(|n| has(n))
            && !has("log_string")
        {
            // cf-promises' words.
            self.error(
                b.name.span,
                "An action body with log_kept, log_repaired or log_failed is required to have a log_string attribute",
            );
        }
    }

    fn names_custom_body(&self, a: &Attribute) -> bool {
        let n = a.name.name.as_str();
        let called = match &a.value {
            Rval::Call(c) => c.name.name.as_str(),
            Rval::Symbol(s) => s.name.as_str(),
            _ => return false,
        };
        matches!(n, "action" | "classes")
            || self
                .bodies
                .contains_key(&(n, split_ns("default", called).1))
    }

    /// `promise agent NAME { path => ...; interpreter => ...; }`.
    fn custom_promise_block(&mut self, b: &'a Body) {
        if b.body_type.name != "agent" {
            self.error(
                b.body_type.span,
                format!(
                    "custom promise types can only be declared for agent bundles, not {}",
                    b.body_type.name
                ),
            )
            .help = Some(format!("write: promise agent {}", b.name.name));
        }
        if promise_type(&b.name.name).is_some() {
            self.error(
                b.name.span,
                format!(
                    "'{}' is a built-in promise type and cannot be declared custom",
                    b.name.name
                ),
            );
        }
        for ba in &b.attributes {
            let n = ba.attr.name.name.as_str();
            if !CUSTOM_PROMISE_BLOCK_ATTRIBUTES.contains(&n) {
                let help = suggest(n, CUSTOM_PROMISE_BLOCK_ATTRIBUTES.iter().copied())
                    .map(|s| format!("did you mean '{s}'?"));
                self.error(
                    ba.attr.name.span,
                    format!(
                        "unknown attribute '{n}' for promise block '{}'",
                        b.name.name
                    ),
                )
                .help = help;
            }
        }
    }
}

/// An `ifelse` call whose arguments, as written, come in an even number:
/// none of them a list reference (`@(x)`), which could stand for any count.
fn even_ifelse(c: &FnCall) -> bool {
    let list_ref = |a: &Rval| match a {
        Rval::String(s) => s.value.starts_with('@'),
        Rval::NakedVar { text, .. } => text.starts_with('@'),
        _ => false,
    };
    c.args.len().is_multiple_of(2) && !c.args.iter().any(list_ref)
}

/// Whether an attribute's value names a body or bundle (so that a call
/// in it is a reference with arguments, not a function).
fn is_reference_attribute(def: Option<&AttrDef>, name: &str) -> bool {
    def.is_some_and(|d| matches!(d.ty, ValueType::Body | ValueType::Bundle))
        || BUNDLE_CALL_ATTRIBUTES.contains(&name)
}

/// The promise types a bundle type takes, sorted.
fn allowed_promise_types(bt: BundleType) -> Vec<&'static str> {
    promise_types()
        .iter()
        .map(|p| p.name)
        .filter(|n| bt.allows(n))
        .collect()
}

/// Whether a function returning `ret` may give the value of an attribute
/// of type `want`, as the parser of cf-promises decides it.
fn returns_fit(ret: ValueType, want: ValueType) -> bool {
    use ValueType as T;
    ret == want
        || matches!(
            (ret, want),
            (T::String, T::Slist | T::Context)
                | (T::Context, T::String | T::Clist)
                | (T::Int, T::Ilist | T::String)
                | (T::Real, T::Rlist | T::String)
                | (T::Option, T::Olist)
        )
}

/// What one value of a type is called in messages.
fn type_word(t: ValueType) -> &'static str {
    match t {
        ValueType::Body => "body reference",
        ValueType::Bundle => "bundle reference",
        ValueType::Option => "option",
        ValueType::Context => "class expression",
        ValueType::Int => "integer",
        ValueType::Real => "real number",
        ValueType::Irange | ValueType::Rrange => "range",
        ValueType::Data => "data container",
        _ => "string",
    }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The text and span of a scalar value.
fn scalar(v: &Rval) -> (&str, Span) {
    match v {
        Rval::String(s) => (s.value.as_str(), s.span),
        Rval::Symbol(i) => (i.name.as_str(), i.span),
        Rval::NakedVar { text, span } => (text.as_str(), *span),
        other => ("", other.span()),
    }
}

/// `("ns", "x:b")` → `("x", "b")`; `("ns", "b")` → `("ns", "b")`.
fn split_ns<'s>(ns: &'s str, name: &'s str) -> (&'s str, &'s str) {
    split_at_colon(name).unwrap_or((ns, name))
}

/// `name.split_once(':')` by a byte search: asked of every body and
/// bundle reference, where a `char` pattern cost ~110 instructions.
fn split_at_colon(name: &str) -> Option<(&str, &str)> {
    let colon = crate::scan::memchr(b':', name.as_bytes())?;
    Some((&name[..colon], &name[colon + 1..]))
}

/// A blank between two name characters, with no operator between them
/// (`a b::`), which cf-promises rejects in an unquoted guard.
fn blank_between_names(expr: &str) -> bool {
    let t = expr.trim();
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            let j = (i..b.len())
                .find(|&k| !b[k].is_ascii_whitespace())
                .unwrap_or(b.len());
            let before = b[..i].last().copied().unwrap_or(b'.');
            let after = b.get(j).copied().unwrap_or(b'.');
            let name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
            if name(before) && name(after) {
                return true;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    false
}

/// A vars promiser cf-promises takes as a variable name: not reserved, and
/// with at most one `.` outside `[...]`, between a non-empty scope and a
/// non-empty name.
fn valid_variable_name(name: &str) -> bool {
    if RESERVED_VARIABLE_NAMES.contains(&name) {
        return false;
    }
    let Some(dot) = name.find('.') else {
        return true;
    };
    let mut dots = 0;
    let mut depth: i32 = 0;
    for c in name.chars() {
        match c {
            '.' => {
                dots += 1;
                if dots > 1 && depth != 1 {
                    return false;
                }
            }
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if depth > 1 {
            return false;
        }
    }
    if dots == 1 {
        let scope = &name[..dot];
        let rest = name[dot + 1..].trim_start();
        return !scope.is_empty() && !rest.is_empty();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parse;

    fn check(src: &str) -> Vec<Diagnostic> {
        let parsed = parse("t.cf", src);
        assert!(
            parsed.diagnostics.iter().all(|d| !d.is_error()),
            "parse errors: {:?}",
            parsed.diagnostics
        );
        validate(&[&parsed.file])
            .into_iter()
            .map(|(_, d)| d)
            .collect()
    }

    fn errors(src: &str) -> Vec<String> {
        check(src)
            .into_iter()
            .filter(Diagnostic::is_error)
            .map(|d| d.message)
            .collect()
    }

    fn warnings(src: &str) -> Vec<String> {
        check(src)
            .into_iter()
            .filter(|d| !d.is_error())
            .map(|d| d.message)
            .collect()
    }

    #[test]
    fn a_removed_control_attribute_warns_and_is_ignored() {
        // cf-promises 3.21: "Removed constraint 'host_licenses_paid' in
        // promise type 'common' [-Wremoved]", and the policy runs
        // (01_vars/03_lists/013.cf still sets it).
        let src = r#"
body common control { bundlesequence => { "main" }; host_licenses_paid => "5"; }
body action a { value_kept => "1"; ifelapsed => "1"; }
bundle agent main { reports: "x" action => a; }
"#;
        assert_eq!(
            warnings(src),
            vec![
                "Removed constraint 'host_licenses_paid' in promise type 'common'; it is ignored",
                "Removed constraint 'value_kept' in promise type 'action'; it is ignored",
            ]
        );
        assert!(check(src).iter().all(|d| !d.is_error()));
    }

    #[test]
    fn a_clean_policy_passes() {
        let src = r#"
body common control { bundlesequence => { "main" }; inputs => { }; }
bundle agent main
{
  vars:
    "x" string => canonify("a b");
    "l" slist => { "a", @(x) };
  files:
    linux::
    "/tmp/x" create => "true", perms => p("600"), classes => c;
  methods:
    "m" usebundle => other("1");
}
bundle agent other(a) { reports: "$(a)" if => "linux.!windows"; }
body perms p(m) { mode => "$(m)"; }
body classes c { promise_repaired => { "r" }; }
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn unknown_attribute_suggests() {
        let d = check("bundle agent m { files: \"/x\" craete => \"true\"; }");
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].message,
            "unknown attribute 'craete' for promise type 'files'"
        );
        assert_eq!(d[0].help.as_deref(), Some("did you mean 'create'?"));
        assert_eq!(d[0].span, Span::new(29, 35));
    }

    #[test]
    fn option_out_of_range_points_at_value() {
        let d = check("bundle agent m { files: \"/x\" create => \"maybe\"; }");
        assert_eq!(d.len(), 1);
        assert!(d[0].message.contains("'maybe'"), "{}", d[0].message);
        assert_eq!(d[0].span, Span::new(39, 46));
    }

    #[test]
    fn promise_types_per_bundle_type() {
        assert_eq!(
            errors("bundle edit_line m { files: \"/x\" create => \"true\"; }").len(),
            1
        );
        assert_eq!(errors("bundle agent m { insert_lines: \"x\"; }").len(), 1);
        assert!(errors("bundle knowledge m { reports: \"x\"; }").is_empty());
        assert_eq!(errors("bundle hub m { files: \"/x\"; }").len(), 1);
        // Undeclared custom types pass, with a warning.
        assert!(errors("bundle agent m { varz: \"x\" string => \"y\"; }").is_empty());
        let w = check("bundle agent m { varz: \"x\" string => \"y\"; }");
        assert_eq!(w[0].help.as_deref(), Some("did you mean 'vars'?"));
        // Declared ones pass silently.
        assert_eq!(
            check(
                "promise agent git { path => \"/x\"; }\nbundle agent m { git: \"x\" repo => \"y\"; }"
            ),
            vec![]
        );
    }

    #[test]
    fn bundle_types_and_names() {
        assert_eq!(
            errors("bundle foo m { }"),
            vec!["Unknown bundle type 'foo'"]
        );
        assert_eq!(errors("bundle agent sys { }").len(), 1);
        assert!(errors("bundle agent default { }").is_empty());
    }

    #[test]
    fn duplicates() {
        assert_eq!(errors("bundle agent m { }\nbundle agent m { }").len(), 1);
        assert!(errors("bundle agent m { }\nbundle common m { }").is_empty());
        assert!(
            errors(
                "bundle agent m { }\nbody file control { namespace => \"n\"; }\nbundle agent m { }"
            )
            .is_empty()
        );
        assert_eq!(
            errors("body perms p { mode => \"1\"; }\nbody perms p { mode => \"2\"; }").len(),
            1
        );
        assert_eq!(
            errors("body agent control { }\nbody agent control { }").len(),
            1
        );
        assert!(errors("body file control { }\nbody file control { }").is_empty());
        // Across files.
        let a = parse("a.cf", "bundle agent m { }").file;
        let b = parse("b.cf", "bundle agent m { }").file;
        let d = validate(&[&a, &b]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, 1);
        assert_eq!(
            d[0].1.help.as_deref(),
            Some("the first definition is in a.cf")
        );
    }

    #[test]
    fn scalars_and_lists() {
        assert_eq!(
            errors("bundle agent m { vars: \"x\" slist => \"a\"; }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { vars: \"x\" slist => @(y); }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { vars: \"x\" string => { \"a\" }; }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { files: \"/x\" perms => { \"a\" }; }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { reports: \"x\" comment => { \"a\" }; }").len(),
            1
        );
        // Global attributes are not type-checked otherwise.
        assert!(errors("bundle agent m { reports: \"x\" depends_on => \"a\"; }").is_empty());
        assert_eq!(
            errors("bundle agent m { vars: \"x\" ilist => { \"1\", \"a\" }; }").len(),
            1
        );
    }

    #[test]
    fn variables_defer_range_checks() {
        assert!(errors("bundle agent m { files: \"/x\" create => \"$(c)\"; }").is_empty());
        assert!(errors("body perms p { mode => \"$(m)\"; }").is_empty());
        assert!(errors("body action a { ifelapsed => \"$(n)\"; }").is_empty());
        assert_eq!(errors("body perms p { rxdirs => \"x$(x)\"; }").len(), 1);
    }

    #[test]
    fn functions() {
        assert_eq!(
            errors("bundle agent m { vars: \"x\" string => nosuch(\"y\"); }"),
            vec!["unknown function 'nosuch'"]
        );
        assert_eq!(
            errors("bundle agent m { vars: \"x\" string => splitstring(\"a\", \",\", \"3\"); }")
                .len(),
            1
        );
        assert!(errors("bundle agent m { vars: \"x\" string => isvariable(\"a\"); }").is_empty());
        assert_eq!(
            errors("bundle agent m { vars: \"x\" string => length(\"a\"); }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { vars: \"x\" string => canonify(\"a\", \"b\"); }").len(),
            1
        );
        assert_eq!(
            errors("bundle common m { classes: \"x\" expression => strcmp(\"a\"); }").len(),
            1
        );
        // Calls cf-promises does not evaluate only warn.
        let src = "bundle agent m { reports: \"x\" if => canonify(\"a\", \"b\"); }";
        assert!(errors(src).is_empty());
        assert_eq!(warnings(src).len(), 1);
        let src = "bundle agent m { vars: \"x\" string => canonify(nosuch(\"y\")); }";
        assert!(errors(src).is_empty());
        assert_eq!(warnings(src), vec!["unknown function 'nosuch'"]);
        assert!(errors("bundle agent m { vars: \"x\" string => concat(); }").is_empty());
        // A guard or a condition may keep cf-promises from the call.
        let src = "bundle agent m { vars:\n linux:: \"x\" string => canonify(\"a\", \"b\"); }";
        assert!(errors(src).is_empty());
        let src =
            "bundle agent m { vars: \"x\" string => canonify(\"a\", \"b\"), if => \"linux\"; }";
        assert!(errors(src).is_empty());
        let src = "bundle agent m { vars: \"x\" string => \"a\", if => strcmp(\"a\"); }";
        assert_eq!(errors(src).len(), 1);
    }

    #[test]
    fn vars_promises() {
        assert_eq!(
            errors("bundle agent m { vars: \"x\" string => \"a\", slist => { \"b\" }; }").len(),
            1
        );
        assert!(
            errors("bundle agent m { vars: \"x\" string => \"a\", string => \"b\"; }").is_empty()
        );
        assert_eq!(
            errors("bundle agent m { vars: \"a.b.c\" string => \"x\"; }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { vars: \"this\" string => \"x\"; }").len(),
            1
        );
        assert!(errors("bundle agent m { vars: \"a[b.c]\" string => \"x\"; }").is_empty());
        assert!(errors("bundle agent m { vars: \"m.x\" string => \"x\"; }").is_empty());
        assert_eq!(
            warnings("bundle agent m { vars: \"x\" comment => \"a\"; }").len(),
            1
        );
    }

    #[test]
    fn invalid_regular_expressions_of_edit_promises_are_warned_where_written() {
        let src = "bundle edit_line e\n{\n delete_lines:\n  \"a(b\";\n  \"$(x)(\";\n replace_patterns:\n  \"ok.*\" replace_with => v;\n  \"x[\" replace_with => v;\n insert_lines:\n  \"(\";\n}\n";
        let w: Vec<_> = check(src).into_iter().filter(|d| !d.is_error()).collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].message.starts_with("invalid regular expression 'a(b'"),
            "{w:?}"
        );
        assert_eq!(w[0].span.start as usize, src.find("\"a(b").unwrap());
        assert!(
            w[1].message.starts_with("invalid regular expression 'x['"),
            "{w:?}"
        );
        assert_eq!(w[1].span.start as usize, src.find("\"x[").unwrap());
        assert!(errors(src).is_empty());
    }

    #[test]
    fn class_expressions() {
        assert_eq!(
            errors("bundle agent m { reports: \"x\" if => \"a.(b\"; }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { reports: \"x\" ifvarclass => \"a&&b\"; }").len(),
            1
        );
        assert!(errors("bundle agent m { reports: \"x\" unless => \"a.(b\"; }").is_empty());
        assert_eq!(
            errors("bundle agent m { reports:\n a.(b:: \"x\"; }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent m { reports:\n a b:: \"x\"; }").len(),
            1
        );
        assert!(errors("bundle agent m { reports:\n \"a.(b\":: \"x\"; }").is_empty());
        assert_eq!(
            errors("body perms p { \"linux\":: mode => \"644\"; }").len(),
            1
        );
        assert_eq!(errors("body perms p { a..b:: mode => \"644\"; }").len(), 1);
    }

    #[test]
    fn bodies() {
        assert_eq!(errors("body perms p { mdoe => \"644\"; }").len(), 1);
        assert_eq!(errors("body perms p { mode => \"999\"; }").len(), 1);
        assert_eq!(
            errors("body common control { bundlesequence => \"main\"; }").len(),
            1
        );
        assert_eq!(
            errors("body copy_from c { copy_size => \"1,2,3\"; }").len(),
            1
        );
        assert_eq!(errors("body perms p { mode => nosuch(\"a\"); }").len(), 1);
        assert!(errors("body nosuchtype x { y => \"1\"; }").is_empty());
        assert_eq!(
            warnings("body acl a { acl_directory_inherit => \"parent\"; }").len(),
            1
        );
    }

    #[test]
    fn body_references() {
        let cc = "body common control { bundlesequence => { \"main\" }; }\n";
        let quoted = "bundle agent main { processes: \"x\" process_count => \"x\"; }";
        assert_eq!(errors(quoted).len(), 1);
        let undefined = "bundle agent main { files: \"/x\" perms => nosuch; }";
        assert!(errors(undefined).is_empty());
        assert_eq!(errors(&format!("{cc}{undefined}")).len(), 1);
        let wrong_type = "bundle agent main { files: \"/x\" perms => c; }\nbody copy_from c { source => \"/x\"; }";
        assert_eq!(errors(&format!("{cc}{wrong_type}")).len(), 1);
        let elsewhere = "bundle agent main { files: \"/x\" perms => p; }\nbody file control { namespace => \"n\"; }\nbody perms p { mode => \"1\"; }";
        assert!(errors(&format!("{cc}{elsewhere}")).is_empty());
        let qualified =
            "body perms p { mode => \"1\"; }\nbundle agent main { files: \"/x\" perms => n:p; }";
        assert_eq!(errors(&format!("{cc}{qualified}")).len(), 1);
        // Bundles referenced by edit_line are not checked.
        assert!(
            errors(&format!(
                "{cc}bundle agent main {{ files: \"/x\" edit_line => nosuch; }}"
            ))
            .is_empty()
        );
    }

    /// `cf-promises -c`, and cf-agent before a run, resolve body references
    /// also without `body common control`
    /// (00_basics/03_bodies/report_error_when_body_missing.cf).
    #[test]
    fn a_full_check_resolves_references_of_any_policy() {
        let src = "bundle agent main { commands: \"/bin/echo\" action => nosuch(\"x\"); }";
        let parsed = parse("t.cf", src);
        let found = validate_with(&[&parsed.file], Scope::FullCheck);
        let msgs: Vec<&str> = found.iter().map(|(_, d)| d.message.as_str()).collect();
        assert_eq!(msgs, ["Undefined body nosuch with type action"]);
        assert!(validate_with(&[&parsed.file], Scope::WholePolicy).is_empty());
    }

    #[test]
    fn fragments_do_not_resolve_references() {
        let src = "body common control { bundlesequence => { \"main\" }; }\nbundle agent main { files: \"/x\" perms => nosuch; }";
        let f = parse("t.cf", src).file;
        assert_eq!(validate(&[&f]).len(), 1);
        assert!(validate_with(&[&f], Scope::Fragment).is_empty());
    }

    #[test]
    fn methods_arity() {
        let src = "bundle agent main { methods: \"x\" usebundle => other(\"a\"); }\nbundle agent other { }";
        assert_eq!(errors(src).len(), 1);
        let src = "bundle agent main { methods: \"x\" usebundle => other; }\nbundle agent other(a, b) { }";
        assert!(errors(src).is_empty());
    }

    #[test]
    fn handles() {
        let src = "bundle agent m { reports: \"x\" handle => \"h\"; \"y\" handle => \"h\"; }";
        assert_eq!(errors(src).len(), 1);
        let src = "bundle agent m { reports: \"x\" handle => \"$(a)\"; \"y\" handle => \"$(a)\"; }";
        assert!(errors(src).is_empty());
        let src =
            "bundle agent m { reports:\n a:: \"x\" handle => \"h\";\n b:: \"y\" handle => \"h\"; }";
        assert!(errors(src).is_empty());
        let src =
            "bundle agent m { reports:\n a:: \"x\" handle => \"h\";\n a:: \"y\" handle => \"h\"; }";
        assert_eq!(errors(src).len(), 1);
    }

    #[test]
    fn custom_promise_blocks() {
        assert_eq!(errors("promise agent foo { nosuch => \"/x\"; }").len(), 1);
        assert_eq!(errors("promise common foo { path => \"/x\"; }").len(), 1);
        assert_eq!(errors("promise agent vars { path => \"/x\"; }").len(), 1);
    }

    proptest::proptest! {
        /// Whatever the parser makes of any text, validating it does not
        /// panic.
        #[test]
        fn never_panics(src in "(bundle|body|promise|agent|common|edit_line|perms|control|files|vars|\"[^\"]{0,6}\"|=>|[{};:,()$@.!&|]|[a-z_]{1,6}|\\s){0,60}") {
            let parsed = parse("p.cf", &src);
            let _ = validate(&[&parsed.file]);
        }
    }

    #[test]
    fn variable_names() {
        assert!(valid_variable_name("x"));
        assert!(valid_variable_name("a[b.c]"));
        assert!(valid_variable_name("a[b][c]"));
        assert!(valid_variable_name("a[b[c]]"));
        assert!(!valid_variable_name("a.b.c"));
        assert!(!valid_variable_name("$(a.b).$(c.d)"));
        assert!(!valid_variable_name(".x"));
        assert!(!valid_variable_name("x."));
        assert!(!valid_variable_name("promiser"));
    }
}
