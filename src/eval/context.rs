//! The evaluation context: variables, classes, the stack of bundle frames,
//! iteration bindings, and the caches that make repeated work cheap.

use super::classes::{ClassInfo, ClassStore};

use super::vars::{VarStore, Variable};
use crate::syntax::classexpr::{ClassExpr, ClassExprError};
use crate::values::canon::class_key;
use crate::values::refs::{RefSpan, VarRef, is_special_scope, next_ref};
use crate::values::value::{Origin, Value};
use indexmap::IndexMap;
use serde_json::Value as Json;
use std::sync::Arc;

/// One bundle (or body) being evaluated.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    /// Shared, not copied: every vars promise names its variable's
    /// namespace and scope with them.
    pub ns: Arc<str>,
    pub bundle: Arc<str>,
    pub bundle_type: String,
    /// Classes local to this bundle run (agent bundles), in the order they
    /// were defined: cf-agent keeps a bundle's few classes in definition
    /// order, and `classesmatching` lists them (reversed) in that order.
    pub local_classes: IndexMap<String, ClassInfo>,
    /// `this.*` for the promise being evaluated.
    pub this: super::this::ThisVars,
    /// Parameters of a body being expanded, looked up before the bundle.
    pub body_params: Option<crate::values::hash::FastMap<String, Value>>,
    /// The policy file whose promise last set the `this.*` entries that
    /// stay the same for every promise of one file in one frame (file,
    /// directory, bundle, namespace, process ids): only `enter_promise`
    /// writes them, so the next promise of that file skips them.
    pub this_fixed_for: Option<String>,
}

impl Frame {
    pub fn new(ns: &str, bundle: &str, bundle_type: &str) -> Frame {
        Frame {
            ns: Arc::from(ns),
            bundle: Arc::from(bundle),
            bundle_type: bundle_type.to_string(),
            ..Frame::default()
        }
    }
}

/// Where a reference with a bundle but no namespace is looked for, when it
/// is made in a bundle of a named namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsSearch {
    /// Scalars: the default namespace, then the bundle's own.
    DefaultThenOwn,
    /// `@(bundle.list)`: the default namespace only.
    DefaultOnly,
    /// Lists and containers a promise iterates over: the bundle's own
    /// namespace only.
    OwnOnly,
}

/// Settings that change how evaluation behaves.
#[derive(Debug, Clone, Default)]
pub struct EvalSettings {
    /// Never run side-effecting functions (`--syntax-only`, `-c`).
    pub no_side_effects: bool,
    pub dry_run: bool,
    /// The fuzzer's sandbox: the functions and promise types that could
    /// run a program, reach the network or signal a process fail instead
    /// of running (see `functions::refused_in_sandbox` and
    /// `agent::refused_in_sandbox`). Off except in `pipeline::Sandbox`.
    pub sandbox: bool,
    /// When evaluation must stop: past it, function calls fail, iteration
    /// stops and the agent runs no more promises, so that one input's work
    /// is bounded (the fuzzer's). `None`: no limit.
    pub deadline: Option<std::time::Instant>,
    /// Whether a command `returnszero` runs without a shell writes to the
    /// agent's own output: cf-agent lets it at inform level and above
    /// (`-I`), and sends it to /dev/null below.
    pub command_output_shown: bool,
    /// The directory policy file names are given relative to, when the
    /// entry was named relative to the current directory (see
    /// `Config::source_base`).
    pub source_base: Option<std::path::PathBuf>,
    /// cf-promises' `--eval-functions=no`: no function is called, so what
    /// a call would give stays undefined.
    pub no_functions: bool,
    /// Refuse a policy file that its group or others may write, as every
    /// CFEngine component but cf-promises does before it parses one
    /// (`load::refuse_writable_by_others`): the agent's runs.
    pub refuse_writable_policy: bool,
}

impl EvalSettings {
    /// A policy file's name as cf-agent keeps it: relative to the
    /// directory the entry was named from, when it was so named
    /// (`./t/x.cf`), else as loaded.
    pub fn source_name<'a>(&self, path: &'a str) -> &'a str {
        self.source_base
            .as_deref()
            .and_then(|b| b.to_str())
            .and_then(|b| path.strip_prefix(b))
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(path)
    }
}

/// The text of an expansion and whether some reference stayed unresolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub text: String,
    /// Some reference did not resolve: one written in the text, or one
    /// that a value's text brought (`$(x)` where `x` is `"$(nope)"`).
    pub unresolved: bool,
    /// A reference written in the text itself did not resolve. cf-agent's
    /// expansion calls a text whose own references all have values fully
    /// expanded, whatever those values hold: `$(const.dollar)(pwd)` hands
    /// `$(pwd)` on to a command's shell.
    pub own_unresolved: bool,
}

/// One remembered `mergedata` call: what it merged and what it gave.
#[derive(Debug)]
pub struct MergedData {
    pub parts: Vec<std::sync::Arc<serde_json::Value>>,
    pub result: std::sync::Arc<serde_json::Value>,
}

#[derive(Debug, Default)]
pub struct EvalContext {
    pub vars: VarStore,
    pub classes: ClassStore,
    pub frames: Vec<Frame>,
    /// Iteration bindings: the reference as written (inner references
    /// expanded) → current element. `$(l)` and `$(main.l)` are different
    /// bindings, as they are different iteration wheels in cf-agent.
    overlay: Vec<(String, Value)>,
    expr_cache: crate::values::hash::FastMap<String, Result<Arc<ClassExpr>, ClassExprError>>,
    pub settings: EvalSettings,
    /// The built-in functions calls go to (none until given).
    builtins: super::call::Builtins,
    /// How functions reach files and run commands: the run's host, the
    /// one its promises act through (the real system until given).
    host: crate::host::Host,
    /// cf-agent's default package inventory (`package_inventory` of body
    /// common control) as `packagesmatching` sees it: unset until the entry
    /// file alone is resolved, then that file's value (its inputs not yet
    /// loaded: the MPF's names `$(package_module_knowledge...)` unresolved)
    /// through the rest of pre-evaluation, then the resolved value once the
    /// agent starts its bundles.
    pub default_inventory: Option<Value>,
    /// Results of `cached` functions by call signature.
    pub fn_cache: crate::values::hash::FastMap<String, Value>,
    /// The promise being evaluated has `ifelapsed => "0"`: its functions
    /// run again instead of giving what `fn_cache` holds.
    pub fn_cache_bypass: bool,
    /// `mergedata`'s last result for each list of arguments, with the
    /// containers it merged (kept alive here, so that the same pointers
    /// mean the same contents): a later pass that finds the very same
    /// containers reuses the result instead of copying them again, and
    /// the variable it sets is then told unchanged without a deep compare.
    pub merged: crate::values::hash::FastMap<String, MergedData>,
    /// Compiled regular expressions by pattern.
    pub regexes: crate::values::regex::RegexCache,
    /// Function calls (by their address in the loaded policy, which stays
    /// put, and their place in its file) whose literal arguments were
    /// found to fit the function's template: they are not checked again at
    /// each call.
    pub fitting_calls: std::collections::HashSet<(usize, u32, u32), foldhash::fast::RandomState>,
    /// The `if`/`unless` that made the last promise's condition false
    /// (the promise's address, the attribute's place, its value), for
    /// the reason a skipped iteration is recorded with.
    pub(crate) false_condition: Option<(usize, usize, Value)>,
    /// The references of each text expanded so far (those that hold one),
    /// by the text: a promise's strings are expanded again for every
    /// iteration, and finding the references is most of the work.
    ref_spans: std::cell::RefCell<crate::values::hash::FastMap<Box<str>, Arc<[RefSpan]>>>,
    /// Whether the agent is in its last pass over the current bundle: an
    /// `unless` that cannot be decided waits until then, and then lets the
    /// promise run.
    pub last_pass: bool,
    /// The agent's pass over the current bundle (1 to 3), which verbose
    /// lines name; 0 outside the agent's passes (pre-evaluation).
    pub pass: usize,
    /// Vars promises say, under -v, that their value is computed (the
    /// agent's own vars passes, not the resolutions between them).
    pub announce_vars: bool,
    /// Under -v, while an edit bundle runs: cf-agent's stack path down to
    /// it, and the arguments of the bundle whose promise runs it, as
    /// banners write them. Its variables and classes are then shown as
    /// promises, with a banner each.
    pub banner_stack: Option<(String, Option<String>)>,
    /// Under -v, the skip lines of a promise's iterations, held while the
    /// scheduler expands them all, to be told in turn as it acts on each.
    pub held_skips: Option<Vec<String>>,
    /// The bundles of the loaded policy, in the order their files were
    /// read, for the functions that look at the policy itself
    /// (`bundlesmatching`). Pre-evaluation notes each file as it arrives.
    pub policy_bundles: Vec<BundleRef>,
    /// `body agent control`, resolved when an agent run starts.
    pub agent_control: super::control::AgentControl,
    /// The destinations copied to this run that `files_single_copy`
    /// keeps from being copied to again.
    pub single_copied: std::collections::HashSet<String>,
    /// Classes defined since the scheduler last looked, kept only when
    /// agent control names abort classes.
    pub newly_defined: Vec<String>,
    /// Classes that classes promises asked to keep (`persistence`), with
    /// their minutes and tags; the agent run stores them.
    pub persist_requests: Vec<(String, i64, Vec<String>)>,
    /// Of those, the ones whose classes promise says `timer_policy =>
    /// "absolute"` (CFEngine 3.28): a stored expiry stays.
    pub persist_absolute: std::collections::HashSet<String>,
    /// Persistent classes a classes promise cancelled (`cancel`, CFEngine
    /// 3.28); the agent run forgets them.
    pub persist_cancels: Vec<String>,
    noted_files: std::collections::HashSet<String>,
    /// Promises (file:line) already refused for iterating too often.
    refused_iterations: std::collections::HashSet<String>,
    /// Variables whose stored value still holds references that did not
    /// resolve, by `ns:scope.name`, with where they were promised and the
    /// value: what is left of them at the end is reported.
    pub unresolved_vars: std::collections::BTreeMap<String, (String, usize, String)>,
    /// Handles of the promises that are done (kept or repaired, or, for
    /// vars and classes promises, evaluated): a promise whose `depends_on`
    /// names a handle not in here is skipped, as cf-agent skips it.
    pub done_handles: std::collections::HashSet<String>,
    /// The vars promises pre-evaluation left settled, for the agent's
    /// first pass (keyed by promise address: valid with this policy only).
    pub preeval_settled: Option<super::preeval::Settled>,
    /// The edit_xml operations that acted this run, by cf-agent's lock
    /// (operation, promiser, file and the promise): each acts once per
    /// run, whichever files promise edits the file.
    pub edit_locks: std::collections::HashSet<String>,
    /// The last policy file a promise was entered from, with its
    /// `this.promise_dirname` and its name canonified (for handles):
    /// promises come file by file, so each is worked out once per file.
    pub promise_file: Option<(String, String, String)>,
    /// The file of the last promise an [`Origin`] was made for, shared by
    /// the variables and classes its promises define.
    origin_file: Option<Arc<str>>,
    /// An error on which cf-agent stops the whole run, found while
    /// evaluating a promise; the agent takes it after the promise.
    pub fatal: Option<String>,
    /// While a files promise's attributes are expanded as a template for
    /// each file it names: the references bound per file stay as written
    /// (see [`super::expanded::ExpandedPromise::for_file`]).
    pub per_file_refs: Option<PerFileRefs>,
}

/// Which references a files promise binds per file, as cf-agent leaves
/// them unexpanded until it knows the file: `$(this.promiser)` always, and
/// `$(match.N)` for a regex promiser (its groups on each file's path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerFileRefs {
    pub matches: bool,
}

impl PerFileRefs {
    /// Whether a reference (its name, inner references expanded) is bound
    /// per file.
    pub fn holds(&self, name: &str) -> bool {
        name == "this.promiser"
            || (self.matches
                && name
                    .strip_prefix("match.")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
    }
}

/// A bundle of the loaded policy, as introspection sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleRef {
    pub ns: String,
    pub name: String,
    pub bundle_type: String,
    /// The literal `tags` of the bundle's `meta:` promises
    /// (`getbundlemetatags`).
    pub meta_tags: Vec<String>,
}

impl EvalContext {
    pub fn new(settings: EvalSettings) -> EvalContext {
        EvalContext {
            settings,
            ..EvalContext::default()
        }
    }

    /// The same context, calling `builtins` for function calls.
    pub fn with_builtins(mut self, builtins: super::call::Builtins) -> EvalContext {
        self.builtins = builtins;
        self
    }

    /// The same context, its functions reaching files and commands
    /// through `host`.
    pub fn with_host(mut self, host: crate::host::Host) -> EvalContext {
        self.host = host;
        self
    }

    /// The host functions reach files and run commands through.
    pub fn host(&self) -> &crate::host::Host {
        &self.host
    }

    /// The built-in functions this context calls.
    pub fn builtins(&self) -> super::call::Builtins {
        self.builtins
    }

    /// Notes a promise refused for iterating too often; false when it was
    /// already noted.
    pub fn note_refused_iteration(&mut self, at: &str) -> bool {
        self.refused_iterations.insert(at.to_string())
    }

    /// Records the bundles of a loaded policy file, once per file.
    pub fn note_policy_file(&mut self, path: &str, tree: &crate::syntax::ast::PolicyFile) {
        if !self.noted_files.insert(path.to_string()) {
            return;
        }
        for b in tree.bundles() {
            self.policy_bundles.push(BundleRef {
                ns: b.namespace.clone(),
                name: b.name.name.as_str().to_owned(),
                bundle_type: b.bundle_type.name.as_str().to_owned(),
                meta_tags: literal_meta_tags(b),
            });
        }
    }

    /// Whether the deadline of `settings` has passed.
    pub fn out_of_time(&self) -> bool {
        self.settings
            .deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
    }

    // ---- frames --------------------------------------------------------

    pub fn push_frame(&mut self, frame: Frame) {
        self.note_local_classes_moved();
        self.frames.push(frame);
        self.note_local_classes_moved();
    }

    pub fn pop_frame(&mut self) -> Option<Frame> {
        self.note_local_classes_moved();
        let popped = self.frames.pop();
        self.note_local_classes_moved();
        popped
    }

    /// The local classes in sight change with the frame on top: those of
    /// the frames on either side of a push or pop count as changed, for
    /// an evaluation that read them (by name, whatever the frame) to be
    /// done again.
    fn note_local_classes_moved(&mut self) {
        let Some(f) = self.frames.last() else {
            return;
        };
        for name in f.local_classes.keys() {
            self.classes.reads.note_change(|| local_class_entry(name));
        }
    }

    pub fn frame(&self) -> Option<&Frame> {
        self.frames.last()
    }

    pub fn frame_mut(&mut self) -> Option<&mut Frame> {
        self.frames.last_mut()
    }

    pub fn current_ns(&self) -> &str {
        self.frame().map_or("default", |f| &*f.ns)
    }

    pub fn current_bundle(&self) -> &str {
        self.frame().map_or("", |f| &*f.bundle)
    }

    pub fn set_this(&mut self, name: &str, value: Value) {
        if let Some(f) = self.frame_mut() {
            f.this.set(name, value);
        }
    }

    // ---- iteration bindings ---------------------------------------------

    pub fn bind(&mut self, key: String, value: Value) {
        self.overlay.push((key, value));
    }

    pub fn unbind(&mut self) {
        self.overlay.pop();
    }

    pub fn bindings_len(&self) -> usize {
        self.overlay.len()
    }

    pub fn truncate_bindings(&mut self, len: usize) {
        self.overlay.truncate(len);
    }

    // ---- variables -----------------------------------------------------

    /// Whether an iteration binding exists for a reference text.
    pub fn is_bound(&self, text: &str) -> bool {
        self.overlay.iter().any(|(k, _)| k == text)
    }

    /// The canonical `ns:scope.name` key of a reference in the current
    /// context.
    pub fn canonical_ref(&self, text: &str) -> String {
        let r = VarRef::parse(text);
        let (ns, scope) = self.resolve_scope(&r);
        format!("{ns}:{scope}.{}", r.name)
    }

    fn resolve_scope<'a>(&'a self, r: &VarRef<'a>) -> (&'a str, &'a str) {
        match (r.ns, r.scope) {
            (Some(ns), Some(scope)) => (ns, scope),
            (None, Some(scope)) if is_special_scope(scope) => ("default", scope),
            (None, Some(scope)) => (self.current_ns(), scope),
            (Some(ns), None) => (ns, self.current_bundle()),
            (None, None) => (self.current_ns(), self.current_bundle()),
        }
    }

    /// Looks up a reference (already free of nested references) in the
    /// current context. A reference with a bundle but no namespace made in a
    /// named namespace means the default namespace's bundle first, then the
    /// bundle's own namespace, as cf-agent expands scalars.
    pub fn lookup(&self, text: &str) -> Option<Value> {
        self.lookup_in(text, NsSearch::DefaultThenOwn)
    }

    /// Looks up a reference, searching namespaces for `bundle.name` as
    /// `search` says: cf-agent looks differently for scalars, for `@(...)`
    /// lists and for the lists a promise iterates over.
    pub fn lookup_in(&self, text: &str, search: NsSearch) -> Option<Value> {
        self.lookup_ref_in(text, search).map(Found::to_value)
    }

    /// [`lookup`](Self::lookup) without the copy: the value as the context
    /// holds it, for a caller that only reads it (a whole list or a part of
    /// a data container is not copied to learn its length or its text).
    pub fn lookup_ref(&self, text: &str) -> Option<Found<'_>> {
        self.lookup_ref_in(text, NsSearch::DefaultThenOwn)
    }

    /// [`lookup_in`](Self::lookup_in) without the copy.
    pub fn lookup_ref_in(&self, text: &str, search: NsSearch) -> Option<Found<'_>> {
        let r = VarRef::parse(text);
        if let (None, Some(scope)) = (r.ns, r.scope)
            && !is_special_scope(scope)
            && self.current_ns() != "default"
            && !self.overlay.iter().any(|(k, _)| k == text)
        {
            let first = match search {
                NsSearch::OwnOnly => self.current_ns(),
                _ => "default",
            };
            let found = self.lookup_ref(&format!("{first}:{text}"));
            if found.is_some() || search != NsSearch::DefaultThenOwn {
                return found;
            }
            return self.lookup_ref(&format!("{}:{text}", self.current_ns()));
        }
        if let Some((_, v)) = self.overlay.iter().rev().find(|(k, _)| k == text) {
            return Some(Found::Value(v));
        }
        if r.scope.is_none()
            && r.ns.is_none()
            && let Some(f) = self.frame()
            && let Some(params) = &f.body_params
            && let Some(v) = params.get(r.name)
        {
            return Some(Found::Value(v));
        }
        if r.scope == Some("this") && r.ns.is_none() {
            if let Some(v) = self.frame().and_then(|f| f.this.get(r.name)) {
                return Some(Found::Value(v));
            }
            // cf-agent qualifies a `this.` name it does not know into the
            // current bundle: `$(this.x)` is the bundle's own `x`.
            let (ns, scope) = (self.current_ns(), self.current_bundle());
            if let Some(v) = self.vars.get(ns, scope, r.name) {
                return Some(Found::Value(&v.value));
            }
            return self.container_element(ns, scope, &r).map(Found::Element);
        }
        let (ns, scope) = self.resolve_scope(&r);
        if let Some(v) = self.vars.get(ns, scope, r.name) {
            return Some(Found::Value(&v.value));
        }
        self.container_element(ns, scope, &r).map(Found::Element)
    }

    /// The node of a data container a reference with indices names
    /// (`d[k][0]`); None for a whole variable or a classic array entry.
    fn container_element<'s>(&'s self, ns: &str, scope: &str, r: &VarRef) -> Option<&'s Json> {
        if !r.has_indices() {
            return None;
        }
        let base = self.vars.get(ns, scope, r.base)?;
        let Value::Data(d) = &base.value else {
            return None;
        };
        let mut cur: &Json = d;
        for idx in r.index_iter() {
            cur = match cur {
                Json::Object(m) => m.get(idx)?,
                Json::Array(a) => a.get(idx.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// The JSON node inside a data container that `text` names, kept as
    /// JSON even when it is a string or a number: cf-agent's typed lookup
    /// gives such an element the container type (so `format("%S",
    /// "d[s]")` writes `"text"` quoted). None when `text` names a whole
    /// variable, a classic array entry or nothing.
    pub fn lookup_container_element(&self, text: &str) -> Option<Json> {
        let r = VarRef::parse(text);
        if !r.has_indices() {
            return None;
        }
        let (ns, scope) = self.resolve_scope(&r);
        if self.vars.get(ns, scope, r.name).is_some() {
            return None;
        }
        self.container_element(ns, scope, &r).cloned()
    }

    /// An attribute of the default namespace's `body common control`, as
    /// pre-evaluation resolved it (`package_module`, `package_inventory`).
    pub fn common_control(&self, attr: &str) -> Option<&Value> {
        self.vars
            .get("default", "control_common", attr)
            .map(|v| &v.value)
    }

    /// Whether a boolean attribute of `body common control` is set
    /// (`ignore_missing_inputs => "on"`); unset or not a boolean is false.
    pub fn common_control_flag(&self, attr: &str) -> bool {
        self.common_control(attr)
            .and_then(Value::as_scalar)
            .and_then(crate::values::number::parse_bool)
            .unwrap_or(false)
    }

    pub fn lookup_variable(&self, text: &str) -> Option<&Variable> {
        let r = VarRef::parse(text);
        let (ns, scope) = self.resolve_scope(&r);
        self.vars.get(ns, scope, r.name)
    }

    /// cf-agent's JSON writer sorts the objects of a container it writes
    /// in place: once `format("%S", d)` has written the container `d`
    /// names, `getindices(d)` gives its keys sorted. Does
    /// that to the variable `text` names (a whole variable, not an element).
    pub fn sort_written_container(&mut self, text: &str) {
        let r = VarRef::parse(text);
        if r.has_indices() {
            return;
        }
        let (ns, scope) = self.resolve_scope(&r);
        let (ns, scope, name) = (ns.to_string(), scope.to_string(), r.name.to_string());
        if let Some(var) = self.vars.get_mut(&ns, &scope, &name)
            && let Value::Data(d) = &mut var.value
            && !crate::values::json::keys_sorted(d)
        {
            crate::values::json::sort_keys(std::sync::Arc::make_mut(d));
        }
    }

    /// Expands every `$(...)`/`${...}` in `s`. References that cannot be
    /// resolved to a scalar stay as written and mark the result unresolved.
    pub fn expand(&self, s: &str) -> Expanded {
        self.expand_at(s, 0, MAX_EXPANSION_DEPTH, NsSearch::DefaultThenOwn)
    }

    /// Expands a promiser. Unlike the promise's attributes, a promiser's
    /// `bundle.name` reference made in a named namespace means that
    /// namespace's bundle, as cf-agent expands promisers.
    pub fn expand_promiser(&self, s: &str) -> Expanded {
        self.expand_at(s, 0, MAX_EXPANSION_DEPTH, NsSearch::OwnOnly)
    }

    /// [`Self::expand_promiser`], borrowing a promiser that holds no
    /// reference (most do) instead of copying it: whether a reference did
    /// not resolve, and the text.
    pub fn expand_promiser_borrowed<'s>(&self, s: &'s str) -> (bool, std::borrow::Cow<'s, str>) {
        if !may_hold_reference(s) {
            return (false, std::borrow::Cow::Borrowed(s));
        }
        let e = self.expand_promiser(s);
        (e.unresolved, std::borrow::Cow::Owned(e.text))
    }

    /// Expands references once, leaving references inside the values found
    /// as they are: augments files expand this way, as cf-agent reads them.
    pub fn expand_once(&self, s: &str) -> Expanded {
        self.expand_at(s, 0, 0, NsSearch::DefaultThenOwn)
    }

    fn expand_at(&self, s: &str, depth: usize, max: usize, search: NsSearch) -> Expanded {
        if !may_hold_reference(s) {
            return Expanded {
                text: s.to_string(),
                unresolved: false,
                own_unresolved: false,
            };
        }
        // Expansion recurses into nested references; text nested deeper
        // than the parser allows (built at run time: a value read from a
        // file) stays as written, as an undefined reference does, instead
        // of exhausting the stack.
        if crate::syntax::reference_too_deep(s).is_some() {
            return Expanded {
                text: s.to_string(),
                unresolved: true,
                own_unresolved: true,
            };
        }
        let mut out = String::with_capacity(s.len());
        // `own`: a reference written here that did not resolve; `brought`:
        // one inside a value's text.
        let mut own = false;
        let mut brought = false;
        let mut pos = 0;
        let spans = self.ref_spans_of(s);
        let mut next = 0;
        loop {
            // The reference `next_ref(s, pos)` finds: `pos` only moves
            // forward, to a reference's end or into the text before the
            // next one (see `ref_spans_of`).
            while spans.get(next).is_some_and(|r| r.start < pos) {
                next += 1;
            }
            let r = spans.get(next).copied();
            // An opening `$(` or `${` that nothing closes loses the name
            // after it: cf-agent expands `a $(x b` to `a $() b`.
            let upto = r.map_or(s.len(), |r| r.start);
            if let Some(q) = unclosed_dollar(&s[pos..upto]) {
                let q = pos + q;
                out.push_str(&s[pos..q]);
                let brace = s.as_bytes()[q + 1] == b'{';
                out.push_str(if brace { "${}" } else { "$()" });
                let name_len = s[q + 2..]
                    .bytes()
                    .take_while(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':') || *b >= 0x80
                    })
                    .count();
                pos = q + 2 + name_len;
                own = true;
                continue;
            }
            let Some(r) = r else { break };
            out.push_str(&s[pos..r.start]);
            if r.list_sigil {
                // `@(x)` inside a string is never expanded, and cf-agent
                // treats it as not (yet) resolved.
                own = true;
                out.push_str(&s[r.start..r.end]);
                pos = r.end;
                continue;
            }
            // A plain name (the common case) is looked up as written,
            // without a copy.
            let written = &s[r.inner_start..r.inner_end];
            let inner = if may_hold_reference(written) {
                let e = self.expand_at(written, depth, max, search);
                InnerName {
                    text: std::borrow::Cow::Owned(e.text),
                    unresolved: e.unresolved,
                }
            } else {
                InnerName {
                    text: std::borrow::Cow::Borrowed(written),
                    unresolved: false,
                }
            };
            if !inner.unresolved && self.per_file_refs.is_some_and(|k| k.holds(&inner.text)) {
                out.push_str(&s[r.start..r.end]);
                pos = r.end;
                continue;
            }
            if inner.unresolved {
                own = true;
                out.push_str(&s[r.start..r.end]);
            } else {
                match self
                    .lookup_ref_in(&inner.text, search)
                    .and_then(Found::scalar_str)
                {
                    // A value that holds references is expanded in turn, as
                    // cf-agent does (`"d" string => "$(c)+d"` stored before
                    // `c` resolved still reads as its final text).
                    Some(text) if max == 0 => out.push_str(&text),
                    Some(text) if depth < max && has_reference(&text) => {
                        let again = self.expand_at(&text, depth + 1, max, search);
                        brought |= again.unresolved;
                        out.push_str(&again.text);
                    }
                    Some(text) if depth >= max && has_reference(&text) => {
                        brought = true;
                        out.push_str(&text);
                    }
                    Some(text) => out.push_str(&text),
                    None => {
                        // Keep what did expand inside: `$(sys.$(sys.os))`
                        // becomes `$(sys.linux)`, as cf-promises prints it.
                        own = true;
                        out.push_str(&s[r.start..r.inner_start]);
                        out.push_str(&inner.text);
                        out.push_str(&s[r.inner_end..r.end]);
                    }
                }
            }
            pos = r.end;
        }
        out.push_str(&s[pos..]);
        Expanded {
            text: out,
            unresolved: own || brought,
            own_unresolved: own,
        }
    }

    /// The references `next_ref` finds in `s` one after the other, from
    /// its start. From any place in the text before a reference of this
    /// list, or at the end of one, `next_ref` finds the next one of the
    /// list: it fails at the same places whatever it starts from.
    fn ref_spans_of(&self, s: &str) -> Arc<[RefSpan]> {
        /// Texts built at run time may hold references too: the cache
        /// stops growing at this many.
        const MAX_CACHED: usize = 16 * 1024;
        if let Some(spans) = self.ref_spans.borrow().get(s) {
            return spans.clone();
        }
        let mut spans = Vec::new();
        let mut pos = 0;
        while let Some(r) = next_ref(s, pos) {
            pos = r.end;
            spans.push(r);
        }
        let spans: Arc<[RefSpan]> = spans.into();
        let mut cache = self.ref_spans.borrow_mut();
        if cache.len() < MAX_CACHED {
            cache.insert(s.into(), spans.clone());
        }
        spans
    }

    // ---- classes -------------------------------------------------------

    /// Whether one class name is defined, seen from the current bundle.
    ///
    /// Inside a named namespace an unqualified name means a class of that
    /// namespace (or a local one, or a hard class): as in cf-agent, soft
    /// classes of the default namespace, `-D` ones included, need their
    /// `default:` prefix there.
    pub fn class_is_set(&self, name: &str) -> bool {
        let qualified_default = name.strip_prefix("default:");
        let bare = qualified_default.unwrap_or(name);
        if bare == "any" {
            return true;
        }
        if let Some(f) = self.frame()
            && (qualified_default.is_none() || &*f.ns == "default")
        {
            self.classes.reads.note_read(|| local_class_entry(bare));
            if f.local_classes.contains_key(bare) {
                return true;
            }
        }
        if bare.contains(':') {
            return self.classes.is_defined(bare);
        }
        let ns = self.current_ns();
        if ns == "default" || qualified_default.is_some() {
            return self.classes.is_defined(bare);
        }
        // `-D` classes are kept as hard ones (nothing cancels them), but
        // a namespace sees them as the soft classes cf-agent makes them.
        self.classes.is_defined(&class_key(ns, bare))
            || self
                .classes
                .get(bare)
                .is_some_and(|c| c.hard && c.origin != Origin::CommandLine)
    }

    /// Whether a class is one of the host's hard classes (which nothing
    /// in policy undefines).
    pub fn is_hard_class(&self, name: &str) -> bool {
        let bare = name.strip_prefix("default:").unwrap_or(name);
        self.classes.get(bare).is_some_and(|c| c.hard)
    }

    /// Parses (once) and evaluates a class expression that is already free
    /// of variable references.
    pub fn eval_class_expr(&mut self, expr: &str) -> Result<bool, ClassExprError> {
        // The guard of every promise written without one, asked twice a
        // promise: always set, and nothing to read or cache for it.
        if expr == "any" {
            return Ok(true);
        }
        let parsed = match self.expr_cache.get(expr) {
            Some(p) => p.clone(),
            None => {
                let p = ClassExpr::parse_lenient(expr).map(Arc::new);
                self.expr_cache.insert(expr.to_string(), p.clone());
                p
            }
        };
        let parsed = parsed?;
        Ok(parsed.eval(&mut |n| self.class_is_set(n)))
    }

    /// Defines a class: local to the current agent bundle, or global in the
    /// current namespace.
    pub fn define_class(&mut self, name: &str, local: bool, info: ClassInfo) -> bool {
        let new = if local && let Some(f) = self.frames.last_mut() {
            self.classes.reads.note_change(|| local_class_entry(name));
            f.local_classes.insert(name.to_string(), info).is_none()
        } else {
            let key = if name.contains(':') {
                name.strip_prefix("default:").unwrap_or(name).to_string()
            } else {
                class_key(self.current_ns(), name)
            };
            self.classes.define(&key, info)
        };
        if new && self.agent_control.watches_classes() {
            self.newly_defined.push(name.to_string());
        }
        new
    }

    pub fn undefine_class(&mut self, name: &str) {
        if let Some(f) = self.frames.last_mut()
            && f.local_classes.shift_remove(name).is_some()
        {
            self.classes.reads.note_change(|| local_class_entry(name));
            return;
        }
        let key = class_key(self.current_ns(), name);
        self.classes.undefine(&key);
    }

    pub fn origin_here(&mut self, file: &str, line: usize) -> Origin {
        let file = match &self.origin_file {
            Some(f) if **f == *file => f.clone(),
            _ => self.origin_file.insert(Arc::from(file)).clone(),
        };
        Origin::Promise { file, line }
    }
}

/// How a bundle-local class is named in the class store's read log.
pub(crate) fn local_class_entry(name: &str) -> u64 {
    crate::eval::reads::entry_hash(("local", name))
}

/// How many times a value found by expansion is itself expanded before a
/// self-referring value (`"a" string => "$(a)"`) counts as unresolved.
const MAX_EXPANSION_DEPTH: usize = 16;

/// The name inside a reference, expanded (borrowed when it held nothing
/// to expand).
struct InnerName<'a> {
    text: std::borrow::Cow<'a, str>,
    unresolved: bool,
}

/// Where the first `$(` or `${` of a text that holds no complete
/// reference starts.
fn unclosed_dollar(s: &str) -> Option<usize> {
    // Asked of the text between every two references expanded: a byte
    // search, not a step per byte.
    let b = s.as_bytes();
    crate::scan::memchr_iter(b'$', b).find(|&i| matches!(b.get(i + 1), Some(b'(' | b'{')))
}

/// Whether `s` holds `$(` or `${`: asked of every value an expansion puts
/// in, so a byte search for `$` rather than two substring searches.
pub(crate) fn has_reference(s: &str) -> bool {
    let b = s.as_bytes();
    crate::scan::memchr_iter(b'$', b).any(|i| matches!(b.get(i + 1), Some(b'(' | b'{')))
}

/// The text a value has inside a string, if it is a scalar (or a data
/// primitive).
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::Scalar(s) => Some(s.clone()),
        Value::Data(d) => crate::values::json::expansion_text(d),
        Value::List(_) => None,
    }
}

/// Whether `s` holds `$(`, `${`, `@(` or `@{`: one pass over the text, as
/// this is asked of every string expanded.
pub(crate) fn may_hold_reference(s: &str) -> bool {
    let b = s.as_bytes();
    crate::scan::memchr2_iter(b'$', b'@', b).any(|i| matches!(b.get(i + 1), Some(b'(' | b'{')))
}

/// What a lookup found, borrowed from the context: a variable's value, or
/// the node of a data container that a reference with indices names.
#[derive(Debug, Clone, Copy)]
pub enum Found<'a> {
    Value(&'a Value),
    Element(&'a Json),
}

impl<'a> Found<'a> {
    /// The value a copying lookup gives: a container's node as
    /// [`json_to_value`] makes it.
    pub fn to_value(self) -> Value {
        match self {
            Found::Value(v) => v.clone(),
            Found::Element(j) => json_to_value(j),
        }
    }

    /// [`scalar_text`] of [`to_value`](Self::to_value), borrowed when the
    /// value is a string.
    pub fn scalar_str(self) -> Option<std::borrow::Cow<'a, str>> {
        use std::borrow::Cow;
        match self {
            Found::Value(Value::Scalar(s)) => Some(Cow::Borrowed(s)),
            Found::Element(Json::String(s)) => Some(Cow::Borrowed(s)),
            Found::Value(v) => scalar_text(v).map(Cow::Owned),
            Found::Element(j) => crate::values::json::expansion_text(j).map(Cow::Owned),
        }
    }
}

/// A JSON node as a value: primitives become scalars, the rest stays data.
pub fn json_to_value(j: &Json) -> Value {
    match j {
        Json::String(s) => Value::Scalar(s.clone()),
        Json::Number(_) => {
            Value::Scalar(crate::values::json::expansion_text(j).unwrap_or_default())
        }
        Json::Bool(b) => Value::Scalar(b.to_string()),
        // null is no text: a reference to it does not expand.
        other => Value::Data(Arc::new(other.clone())),
    }
}

/// The literal strings of a bundle's `meta: "tags" slist => { ... }`.
fn literal_meta_tags(b: &crate::syntax::ast::Bundle) -> Vec<String> {
    use crate::syntax::ast::Rval;
    let mut out = Vec::new();
    for s in b.sections.iter().filter(|s| s.promise_type.name == "meta") {
        for p in s.promises.iter().filter(|p| p.promiser.value == "tags") {
            for a in &p.attributes {
                match &a.value {
                    Rval::List { items, .. } => out.extend(items.iter().filter_map(|i| match i {
                        Rval::String(s) => Some(s.value.as_str().to_owned()),
                        _ => None,
                    })),
                    Rval::String(s) if a.name.name == "string" => {
                        out.push(s.value.as_str().to_owned())
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::value::DataType;

    fn ctx() -> EvalContext {
        let mut c = EvalContext::default();
        let put = |c: &mut EvalContext, scope: &str, name: &str, v: Value| {
            let t = v.natural_type();
            c.vars
                .put("default", scope, name, Variable::new(v, t, Origin::Agent));
        };
        put(&mut c, "main", "a", Value::str("A"));
        put(&mut c, "main", "k", Value::str("x"));
        put(&mut c, "main", "arr[x]", Value::str("AX"));
        put(
            &mut c,
            "main",
            "l",
            Value::List(vec!["1".into(), "2".into()]),
        );
        put(
            &mut c,
            "main",
            "d",
            Value::data(serde_json::json!({"k": ["z", 3], "s": "S"})),
        );
        put(&mut c, "sys", "os", Value::str("linux"));
        c.push_frame(Frame::new("default", "main", "agent"));
        c
    }

    #[test]
    fn expansion() {
        let c = ctx();
        assert_eq!(c.expand("$(a)-${a}").text, "A-A");
        assert_eq!(c.expand("$(arr[$(k)])").text, "AX");
        assert_eq!(c.expand("$(main.a) $(sys.os)").text, "A linux");
        assert_eq!(c.expand("$(d[k][1]) $(d[s])").text, "3 S");
        let e = c.expand("$(nope) $(l) @(l)");
        assert_eq!(e.text, "$(nope) $(l) @(l)");
        assert!(e.unresolved);
        assert_eq!(
            c.lookup("d[k]").map(|v| v.natural_type()),
            Some(DataType::Data)
        );
    }

    #[test]
    fn per_file_references_stay_as_written() {
        let mut c = ctx();
        c.set_this("promiser", Value::str("/x/a.*"));
        c.vars.put(
            "default",
            "match",
            "1",
            Variable::new(Value::str("stale"), DataType::String, Origin::Agent),
        );
        c.per_file_refs = Some(PerFileRefs { matches: true });
        let e = c.expand("$(this.promiser)_${match.1}_$(a)_$(match.x)");
        assert_eq!(e.text, "$(this.promiser)_${match.1}_A_$(match.x)");
        assert!(e.unresolved, "match.x is no group");
        c.per_file_refs = Some(PerFileRefs { matches: false });
        assert_eq!(
            c.expand("$(this.promiser) $(match.1)").text,
            "$(this.promiser) stale"
        );
        c.per_file_refs = None;
        assert_eq!(c.expand("$(this.promiser)").text, "/x/a.*");
    }

    #[test]
    fn values_holding_references_are_expanded_again() {
        let mut c = ctx();
        let put = |c: &mut EvalContext, name: &str, v: &str| {
            c.vars.put(
                "default",
                "main",
                name,
                Variable::new(Value::str(v), DataType::String, Origin::Agent),
            );
        };
        put(&mut c, "lit", "$(a)+x");
        put(&mut c, "open", "$(nope)");
        put(&mut c, "selfref", "$(selfref)");
        assert_eq!(c.expand("$(lit)").text, "A+x");
        let e = c.expand("$(open)");
        assert!(e.unresolved);
        assert_eq!(e.text, "$(nope)");
        assert!(c.expand("$(selfref)").unresolved);
    }

    #[test]
    fn iteration_bindings_shadow() {
        let mut c = ctx();
        c.bind("l".into(), Value::str("1"));
        // A qualified reference is a binding of its own, as in cf-agent.
        assert!(c.expand("$(l) $(main.l)").unresolved);
        c.bind("main.l".into(), Value::str("2"));
        assert_eq!(c.expand("$(l) $(main.l)").text, "1 2");
        c.unbind();
        c.unbind();
        assert!(c.expand("$(l)").unresolved);
    }

    #[test]
    fn classes_local_and_namespaced() {
        let mut c = ctx();
        c.define_class("g", false, ClassInfo::soft(Origin::Agent, vec![]));
        c.define_class("l", true, ClassInfo::soft(Origin::Agent, vec![]));
        assert!(c.eval_class_expr("g.l.any").unwrap());
        let hard = ClassInfo {
            hard: true,
            ..ClassInfo::soft(Origin::Agent, vec![])
        };
        c.define_class("h", false, hard);
        c.push_frame(Frame::new("ns", "b", "agent"));
        c.define_class("n", false, ClassInfo::soft(Origin::Agent, vec![]));
        // Soft classes of the default namespace need their prefix here;
        // hard classes do not.
        assert!(c.eval_class_expr("n.default:g.ns:n.h").unwrap());
        assert!(!c.eval_class_expr("g").unwrap());
        assert!(!c.eval_class_expr("l").unwrap());
        c.pop_frame();
        assert!(c.eval_class_expr("ns:n").unwrap());
        assert!(!c.eval_class_expr("n").unwrap());
    }
}
