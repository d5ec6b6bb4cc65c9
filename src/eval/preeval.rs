//! Pre-evaluation, as cf-promises and cf-agent do it before running
//! anything: load the entry file and its inputs (which may be computed from
//! variables), and for each file evaluate, bundle by bundle, the vars and
//! classes of common bundles and the vars of every bundle; then once more
//! over all files, so that definitions in later files reach earlier ones.

use super::call::{Builtins, FnSpec};
use super::context::{EvalContext, Frame};
use super::promises::{EvalMessage, PromiseResult};
use super::reads::Reads;
use super::vars::Variable;
use crate::load::{LoadError, LoadedFile, PolicySet, load_file};
use crate::syntax::ast::{Body, BodyKind, Promise, Rval};
use crate::values::hash::FastMap;
use crate::values::value::{DataType, Origin, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// How many times inputs are recomputed before giving up on ones that
/// never resolve.
const MAX_INPUT_ROUNDS: usize = 8;

/// What pre-evaluation found wrong, beyond parse errors of files.
#[derive(Debug, Default)]
pub struct PreEvalReport {
    /// Files that could not be read, with the file that named them.
    pub load_errors: Vec<LoadError>,
    pub messages: Vec<EvalMessage>,
    /// Some `inputs` entry never resolved, so files of the policy may be
    /// missing from what was loaded.
    pub inputs_incomplete: bool,
    /// The `inputs` entries that never resolved, as written after
    /// expansion (`$(g.nosuch)`): cf-promises names each in an error and
    /// goes on without it.
    pub unresolved_inputs: Vec<String>,
    /// Variables left with references to variables that were never
    /// defined (bundles with parameters aside: their arguments come later).
    pub unresolved: Vec<EvalMessage>,
    /// An error on which cf-promises and cf-agent stop while evaluating
    /// (a call whose arguments do not fit once the lists of the calls in
    /// them are spread: "Bad arguments"; a literal argument the function's
    /// template refuses), met in any bundle, called or not.
    pub fatal: Option<String>,
}

/// Loads `entry` and everything its inputs name into `policy`, and
/// pre-evaluates it into `ctx`.
pub fn load_and_preevaluate(
    ctx: &mut EvalContext,
    policy: &mut PolicySet,
    entry: &Path,
) -> Result<PreEvalReport, LoadError> {
    load_entry(ctx, policy, entry)?;
    Ok(preevaluate_entry(ctx, policy, entry))
}

/// Reads the entry file into `policy`, refusing one others may write when
/// the settings say so.
pub fn load_entry(
    ctx: &EvalContext,
    policy: &mut PolicySet,
    entry: &Path,
) -> Result<(), LoadError> {
    if ctx.settings.refuse_writable_policy {
        crate::load::refuse_writable_by_others(entry)?;
    }
    policy.add_entry(load_file(entry)?);
    Ok(())
}

/// Loads one input unless it is loaded already, by its path or by its
/// text: cf-agent skips a file whose content it has parsed before (the
/// same library reached through a link or copied under a second name).
fn load_input(
    policy: &mut PolicySet,
    path: PathBuf,
    read: &mut ReadPaths,
    report: &mut PreEvalReport,
    refuse_writable: bool,
) {
    if read.already_read(policy, &path) {
        return;
    }
    let loaded = match refuse_writable {
        true => crate::load::refuse_writable_by_others(&path).and_then(|()| load_file(&path)),
        false => load_file(&path),
    };
    match loaded {
        Ok(mut f) => {
            if policy.contains_text(&f.source.text) {
                return;
            }
            f.settle_main(false);
            policy.add(f);
        }
        Err(e) => {
            read.failed.push(normalize(&path));
            report.load_errors.push(e);
        }
    }
}

/// `load_and_preevaluate` for an entry file already read and added to
/// `policy` with [`PolicySet::add_entry`] (its `inputs` are still looked
/// for beside `entry`).
pub fn preevaluate_entry(
    ctx: &mut EvalContext,
    policy: &mut PolicySet,
    entry: &Path,
) -> PreEvalReport {
    let entry_dir = crate::load::dirname_text(entry);
    let mut report = PreEvalReport::default();
    let mut done = 0;
    let mut read_paths = ReadPaths::default();
    let refuse = ctx.settings.refuse_writable_policy;
    let mut settled = Settled::default();
    ctx.vars.reads.set_tracking(true);
    ctx.classes.reads.set_tracking(true);
    for _ in 0..MAX_INPUT_ROUNDS {
        // Files loaded in this round, each pre-evaluated as it arrives.
        while done < policy.files.len() {
            let file = policy.files[done].clone();
            preevaluate_file(ctx, policy, &file, &mut report, &mut settled);
            if done == 0 {
                ctx.default_inventory = entry_inventory(ctx, &file);
            }
            for path in file_inputs(ctx, &file, &entry_dir, &mut false, &mut Vec::new()) {
                load_input(policy, path, &mut read_paths, &mut report, refuse);
            }
            done += 1;
        }
        // Once more over everything; stop when that adds no file.
        let before = policy.files.len();
        for i in 0..policy.files.len() {
            let file = policy.files[i].clone();
            preevaluate_file(ctx, policy, &file, &mut report, &mut settled);
        }
        // Whether inputs are complete is decided by this last look.
        let mut unresolved = false;
        report.unresolved_inputs.clear();
        for i in 0..policy.files.len() {
            let file = policy.files[i].clone();
            let texts = &mut report.unresolved_inputs;
            for path in file_inputs(ctx, &file, &entry_dir, &mut unresolved, texts) {
                load_input(policy, path, &mut read_paths, &mut report, refuse);
            }
        }
        report.inputs_incomplete = unresolved;
        if policy.files.len() == before {
            break;
        }
    }
    ctx.vars.reads.set_tracking(false);
    ctx.classes.reads.set_tracking(false);
    // The run's first pass would evaluate each of them again for the
    // same value: the run starts from what is settled here.
    ctx.preeval_settled = Some(settled);
    // With ignore_missing_inputs, cf-agent runs the policy without the
    // inputs it cannot read (missing files, directories), and says nothing.
    if ctx.common_control_flag("ignore_missing_inputs") {
        report
            .load_errors
            .retain(|e| !matches!(e, LoadError::Read { .. }));
    }
    // A promise that fails in every pass says so once.
    let mut seen = std::collections::HashSet::new();
    report.messages.retain(|m| seen.insert(m.clone()));
    report.unresolved = unresolved_at_end(ctx, policy);
    // Only these: a scalar given to a list variable is cf-agent's to
    // stop on when it runs the promise, not cf-promises'.
    report.fatal = ctx.fatal.clone().filter(|m| {
        [
            super::rval::BAD_ARGUMENTS,
            super::rval::ARGUMENT_MISFIT,
            super::rval::STOPS_CF_AGENT,
        ]
        .iter()
        .any(|marker| m.contains(marker))
    });
    report
}

/// Whether a reference is, or holds, one to a variable the mapping
/// functions bind.
fn names_mapping_variable(reference: &str) -> bool {
    ["this", "this.k", "this.k[1]", "this.v"]
        .iter()
        .any(|n| reference.contains(&format!("$({n})")) || reference.contains(&format!("${{{n}}}")))
}

/// The variables that still refer to undefined variables once
/// pre-evaluation is over, each with the references that did not resolve.
fn unresolved_at_end(ctx: &EvalContext, policy: &PolicySet) -> Vec<EvalMessage> {
    // Bundles with parameters: their variables resolve when they are called.
    let parametrised: std::collections::HashSet<(&str, &str)> = policy
        .files
        .iter()
        .flat_map(|f| f.tree.bundles())
        .filter(|b| !b.params.is_empty())
        .map(|b| (b.namespace.as_str(), b.name.name.as_str()))
        .collect();
    let with_params = |ns: &str, scope: &str| parametrised.contains(&(ns, scope));
    let mut out = Vec::new();
    for (key, (file, line, text)) in &ctx.unresolved_vars {
        let (ns, rest) = key.split_once(':').unwrap_or(("default", key));
        let scope = rest.split_once('.').map_or(rest, |(s, _)| s);
        if with_params(ns, scope) {
            continue;
        }
        let mut refs = Vec::new();
        let mut pos = 0;
        while let Some(r) = crate::values::refs::next_ref(text, pos) {
            // `@(...)` inside a longer string is never expanded (a regex's
            // `@([\d.]+)` is text), so it refers to nothing.
            let whole = r.start == 0 && r.end == text.len();
            // A pattern for maparray, mapdata or maplist names the
            // variables they bind (`$(this.k)`, `$(a[$(this.v)])`): those
            // resolve only when the pattern is mapped.
            let reference = &text[r.start..r.end];
            if (!r.list_sigil || whole) && !names_mapping_variable(reference) {
                refs.push(format!("'{reference}'"));
            }
            pos = r.end;
        }
        if refs.is_empty() {
            continue;
        }
        out.push(EvalMessage {
            file: file.clone(),
            line: *line,
            message: format!(
                "variable '{key}' refers to {}, which is not defined; its value stays '{text}'",
                refs.join(", ")
            ),
        });
    }
    out.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    out
}

/// One file's pre-evaluation: control bodies, then per bundle the vars and
/// classes of common bundles and the vars of all.
fn preevaluate_file(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    file: &LoadedFile,
    report: &mut PreEvalReport,
    settled: &mut Settled,
) {
    ctx.note_policy_file(&file.source.path, &file.tree);
    for body in file.tree.bodies() {
        if body.kind == BodyKind::Body && body.name.name == "control" {
            eval_control_body(ctx, file, body);
        }
    }
    // The `this.*` table of the last bundle's frame, for the next one: a
    // fresh table and its dozen entries cost more than a bundle's vars.
    let mut spare_this = None;
    for bundle in file.tree.bundles() {
        let common = bundle.bundle_type.name == "common";
        let mut frame = Frame::new(
            &bundle.namespace,
            &bundle.name.name,
            &bundle.bundle_type.name,
        );
        if let Some(this) = spare_this.take() {
            frame.this = this;
        }
        ctx.push_frame(frame);
        let mut order: Vec<&str> = Vec::new();
        if common {
            order.extend(["vars", "classes"]);
        }
        order.push("vars");
        for kind in order {
            for section in bundle
                .sections
                .iter()
                .filter(|s| s.promise_type.name == kind)
            {
                for promise in &section.promises {
                    let msgs = if kind == "vars" {
                        settled.eval_vars(ctx, policy, file, promise).1
                    } else {
                        ctx.eval_classes_promise(file, promise, true).1
                    };
                    report.messages.extend(msgs);
                }
            }
        }
        if let Some(mut done) = ctx.pop_frame() {
            spare_this = Some(recycled_this(&mut done));
        }
    }
}

/// A popped frame's `this.*` table, made ready for the next frame: every
/// promise sets its entries before anything reads them (`enter_promise`
/// comes first, and `this_fixed_for` is not carried over, so the entries
/// fixed per file are written again), except `this.promiser`, which a
/// promise whose promiser does not resolve leaves unset: it goes.
fn recycled_this(frame: &mut Frame) -> super::this::ThisVars {
    let mut this = std::mem::take(&mut frame.this);
    this.unset(super::this::Slot::Promiser);
    this
}

/// The vars promises whose last evaluation defined what it had to and read
/// only variables and classes that have not changed since: evaluating
/// them again in a later sweep would give the same, so they are left as
/// they are (the sweeps over every file are most of a check's work).
#[derive(Debug, Default)]
pub struct Settled {
    /// By the promise's address in the loaded policy, which stays put:
    /// what its last evaluation read from the variables and the classes,
    /// and whether it calls only pure functions.
    reads: FastMap<usize, (Reads, Reads, bool)>,
    /// Only promises whose functions compute from their arguments and the
    /// stores alone are kept: the agent's passes act between two
    /// evaluations (a file read, a command run, the clock may differ).
    pure_only: bool,
}

impl Settled {
    /// For the agent's passes: the caller keeps both stores' change
    /// tracking on while it runs.
    pub fn for_the_run() -> Settled {
        Settled {
            reads: FastMap::default(),
            pure_only: true,
        }
    }

    /// `for_the_run`, starting from what pre-evaluation settled (its
    /// promises whose functions are pure): the stores' change tracking
    /// tells whether anything changed since.
    pub fn for_the_run_after(preeval: Option<Settled>) -> Settled {
        let mut run = Settled::for_the_run();
        if let Some(mut p) = preeval {
            p.reads.retain(|_, (_, _, pure)| *pure);
            run.reads = p.reads;
        }
        run
    }

    /// Evaluates a vars promise unless its last evaluation read only what
    /// has not changed since (then nothing changes and nothing is said).
    pub fn eval_vars(
        &mut self,
        ctx: &mut EvalContext,
        policy: &PolicySet,
        file: &LoadedFile,
        promise: &Promise,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        self.settle(ctx, policy, promise, |ctx| {
            ctx.eval_vars_promise(file, promise, Some(policy))
        })
    }

    /// The same for a classes promise: one that defined nothing and read
    /// nothing changed since would define nothing again.
    pub fn eval_classes(
        &mut self,
        ctx: &mut EvalContext,
        policy: &PolicySet,
        file: &LoadedFile,
        promise: &Promise,
        common: bool,
    ) -> (PromiseResult, Vec<EvalMessage>) {
        self.settle(ctx, policy, promise, |ctx| {
            ctx.eval_classes_promise(file, promise, common)
        })
    }

    fn settle(
        &mut self,
        ctx: &mut EvalContext,
        policy: &PolicySet,
        promise: &Promise,
        eval: impl FnOnce(&mut EvalContext) -> (PromiseResult, Vec<EvalMessage>),
    ) -> (PromiseResult, Vec<EvalMessage>) {
        let id = promise as *const Promise as usize;
        if let Some((vars, classes, _)) = self.reads.get(&id)
            && ctx.vars.reads.unchanged_since(vars)
            && ctx.classes.reads.unchanged_since(classes)
            && !crate::report::log::verbose()
        {
            return (PromiseResult::default(), Vec::new());
        }
        // Bodies come from the policy, which grows as files load, and -v
        // tells each evaluation: such promises are evaluated every time.
        let bodies = ["action", "classes", "depends_on"]
            .iter()
            .any(|a| promise.attribute(a).is_some())
            || policy.has_bodies_in("bodydefault");
        let pure = !bodies && calls_only_pure_functions(ctx.builtins(), promise);
        let logged = !bodies && !crate::report::log::verbose() && (!self.pure_only || pure);
        if logged {
            ctx.vars.reads.start();
            ctx.classes.reads.start();
        }
        // What an evaluation logs (a function's error) is said again in
        // each pass, as cf-agent says it: such a promise is not kept.
        let said = crate::report::log::said();
        let (result, msgs) = eval(ctx);
        if logged {
            let read = (ctx.vars.reads.finish(), ctx.classes.reads.finish());
            match read {
                (Some(vars), Some(classes))
                    if msgs.is_empty()
                        && crate::report::log::said() == said
                        && !result.deferred
                        && !result.failed
                        && ctx.fatal.is_none() =>
                {
                    self.reads.insert(id, (vars, classes, pure));
                }
                _ => {
                    self.reads.remove(&id);
                }
            }
        }
        (result, msgs)
    }
}

/// Whether every function a promise calls (its value, its conditions)
/// gives the same for the same arguments and stores, and says nothing
/// else: no file, command, clock, randomness or network.
pub fn calls_only_pure_functions(builtins: Builtins, promise: &Promise) -> bool {
    promise
        .attributes
        .iter()
        .all(|a| calls_only(builtins, &a.value, |f| f.pure, true))
}

/// Whether every call in `r` is of a built-in that `allowed` accepts;
/// lists and references (`@(x)`, symbols) only where `lists_and_refs`.
fn calls_only(
    builtins: Builtins,
    r: &crate::syntax::ast::Rval,
    allowed: fn(&FnSpec) -> bool,
    lists_and_refs: bool,
) -> bool {
    use crate::syntax::ast::Rval;
    let only = |r| calls_only(builtins, r, allowed, lists_and_refs);
    match r {
        Rval::Call(c) => {
            (builtins.lookup)(&c.name.name).is_some_and(allowed) && c.args.iter().all(only)
        }
        Rval::List { items, .. } => lists_and_refs && items.iter().all(only),
        Rval::String(_) => true,
        Rval::NakedVar { .. } | Rval::Symbol(_) => lists_and_refs,
    }
}

/// cf-agent's "preliminary convergence", done by the agent alone (not by
/// cf-promises) before the bundlesequence runs: every promise of every
/// bundle, called or not, is expanded once as it stands (bundles with
/// their parameters unset), so that the function calls of its condition
/// and its attributes are evaluated. Nothing acts and no class is defined,
/// but functions with effects run (`returnszero` in a classes promise of
/// a bundle nobody calls), and their results are cached for the run.
/// Variables (`vars`, `meta`) are left to the rest of pre-evaluation.
pub fn preliminary_convergence(ctx: &mut EvalContext, policy: &PolicySet) {
    use super::iterations::{Unresolved, expand_iterations};
    for file in &policy.files {
        for bundle in file.tree.bundles() {
            ctx.push_frame(Frame::new(
                &bundle.namespace,
                &bundle.name.name,
                &bundle.bundle_type.name,
            ));
            for section in &bundle.sections {
                let ptype = section.promise_type.name.as_str();
                if matches!(ptype, "vars" | "meta") {
                    continue;
                }
                for promise in &section.promises {
                    // A guard of plain classes that does not hold skips
                    // the promise before anything is expanded.
                    if !promise.guard.quoted
                        && !ctx
                            .eval_class_expr(promise.guard.expr.trim())
                            .unwrap_or(false)
                    {
                        continue;
                    }
                    // A class already set is not evaluated again, here
                    // as in the run (02_classes/01_basic/avoid_reevaluation.cf).
                    if ptype == "classes" {
                        let name = ctx.expand_promiser(&promise.promiser.value);
                        let name = crate::values::canon::canonify(&name.text);
                        if ctx.class_is_set(&name) {
                            continue;
                        }
                    }
                    // Without a function call or a body to evaluate, the
                    // expansion would find only what the run finds again:
                    // it is left to the run (`-v` still tells every step).
                    if !crate::report::log::verbose() && !calls_anything(promise) {
                        continue;
                    }
                    // Functions that neither act nor say anything give the
                    // run nothing to find here: only the iteration is
                    // walked, for the error a promise with too many
                    // combinations gets (said here, as before).
                    if !crate::report::log::debug()
                        && !crate::report::log::verbose()
                        && calls_only_quiet_functions(ctx.builtins(), promise)
                    {
                        ctx.enter_promise(file, promise);
                        let texts = ctx.promise_texts(promise, &["depends_on"]);
                        ctx.for_each_promise_iteration(promise, &texts, &mut |_| {});
                        continue;
                    }
                    let line = file.source.line_of(promise.promiser.span.start);
                    // A promiser that does not resolve does not keep its
                    // attributes from being evaluated.
                    let unresolved = Unresolved {
                        promiser_acts: true,
                        custom: false,
                    };
                    // What the expansion found is the run's to tell: here
                    // only the evaluation counts.
                    let _ = expand_iterations(
                        ctx, policy, file, bundle, ptype, promise, line, unresolved,
                    );
                }
            }
            ctx.pop_frame();
        }
    }
    // A fatal error met here is met again, and placed, by the run.
    ctx.fatal = None;
}

/// Whether every attribute of a promise is a call of a function that
/// neither acts, nor caches, nor logs, whatever its arguments (an error is
/// returned, not said), with only quoted strings and such calls as
/// arguments: no body, no list (an `@(container)` in a list warns).
fn calls_only_quiet_functions(builtins: Builtins, promise: &crate::syntax::ast::Promise) -> bool {
    promise.attributes.iter().all(|a| {
        matches!(a.value, crate::syntax::ast::Rval::Call(_))
            && calls_only(builtins, &a.value, |f| f.quiet, false)
    })
}

/// Whether expanding a promise may call a function: one of its
/// attributes holds a call, or names a body (whose attributes may).
fn calls_anything(promise: &crate::syntax::ast::Promise) -> bool {
    fn calls(r: &crate::syntax::ast::Rval) -> bool {
        use crate::syntax::ast::Rval;
        match r {
            Rval::Call(_) | Rval::Symbol(_) => true,
            Rval::List { items, .. } => items.iter().any(calls),
            Rval::String(_) | Rval::NakedVar { .. } => false,
        }
    }
    promise.attributes.iter().any(|a| calls(&a.value))
}

/// The `meta` promises of every bundle, as the variables of its
/// `<bundle>_meta` scope, before any bundle runs: cf-agent has them then
/// (the acceptance framework reads `test_meta.test_soft_fail` before
/// `test` runs), though cf-promises does not show them.
pub fn evaluate_meta(ctx: &mut EvalContext, policy: &PolicySet) {
    for file in policy.files.clone() {
        for bundle in file.tree.bundles() {
            let meta = format!("{}_meta", bundle.name.name);
            ctx.push_frame(Frame::new(&bundle.namespace, &meta, "meta"));
            for section in bundle
                .sections
                .iter()
                .filter(|s| s.promise_type.name == "meta")
            {
                for promise in &section.promises {
                    ctx.eval_vars_promise(&file, promise, Some(policy));
                }
            }
            ctx.pop_frame();
        }
    }
}

/// The `package_inventory` of the entry file's body common control once
/// that file alone is resolved (cf-agent resolves control bodies after the
/// bundles), which cf-agent keeps as its default inventory until it starts
/// its bundles.
fn entry_inventory(ctx: &mut EvalContext, file: &LoadedFile) -> Option<Value> {
    let mut found = None;
    for body in file.tree.bodies() {
        if body.kind != BodyKind::Body
            || body.name.name != "control"
            || body.body_type.name != "common"
        {
            continue;
        }
        ctx.push_frame(Frame::new(&body.namespace, "control_common", "common"));
        for a in &body.attributes {
            if a.attr.name.name == "package_inventory"
                && ctx.eval_class_expr(a.guard.expr.trim()).unwrap_or(false)
                && let Ok(v) = ctx.eval_rval(&a.attr.value)
            {
                found = Some(v.value);
            }
        }
        ctx.pop_frame();
    }
    found
}

/// Defines `control_<type>.<attr>` (`control_common.inputs`,
/// `control_agent.ifelapsed`, ...) for each attribute of a control body
/// whose guard holds, typed as the schema types the attribute. As in
/// cf-promises, a value of the wrong shape (a string where a list belongs,
/// or the reverse) defines nothing.
fn eval_control_body(ctx: &mut EvalContext, file: &LoadedFile, body: &Body) {
    let scope = format!("control_{}", body.body_type.name);
    let schema = crate::schema::body_type(&body.body_type.name);
    ctx.push_frame(Frame::new(&body.namespace, &scope, "common"));
    for a in &body.attributes {
        if !ctx.eval_class_expr(a.guard.expr.trim()).unwrap_or(false) {
            continue;
        }
        // A bundlesequence holding calls (`b("x")`) is expanded, not
        // evaluated: its calls stay calls, as cf-promises keeps them.
        if scope == "control_common"
            && a.attr.name.name == "bundlesequence"
            && let Rval::List { items, .. } = &a.attr.value
            && items.iter().any(|i| matches!(i, Rval::Call(_)))
        {
            let (list, calls) = sequence_with_calls(ctx, items);
            let line = file.source.line_of(a.attr.span.start);
            let mut var = Variable::new(
                Value::List(list),
                DataType::Slist,
                Origin::Promise {
                    file: file.source.path.as_str().into(),
                    line,
                },
            )
            .with_tags(vec!["source=promise".to_string()]);
            var.call_items = Some(calls.into_boxed_slice());
            ctx.vars.put("default", &scope, "bundlesequence", var);
            continue;
        }
        let Ok(e) = ctx.eval_rval(&a.attr.value) else {
            continue;
        };
        let declared = schema
            .and_then(|b| b.attribute(&a.attr.name.name))
            .map(|d| d.ty);
        let dtype = match declared {
            Some(ty) => match control_data_type(ty) {
                t if t.is_list() == matches!(e.value, Value::List(_)) => t,
                _ => continue,
            },
            None => e.value.natural_type(),
        };
        let line = file.source.line_of(a.attr.span.start);
        let var = Variable::new(
            e.value,
            dtype,
            Origin::Promise {
                file: file.source.path.as_str().into(),
                line,
            },
        )
        .with_tags(vec!["source=promise".to_string()]);
        // Control bodies' variables live in the default namespace, whatever
        // namespace the file declares, as in cf-promises.
        ctx.vars.put("default", &scope, &a.attr.name.name, var);
    }
    ctx.pop_frame();
}

/// The items of a bundlesequence that holds calls, as cf-promises expands
/// it without evaluating anything: strings expanded (a reference that
/// does not resolve kept as written, `@(list)` alone spliced in), each
/// call kept as a call written out, its name and its string arguments
/// expanded, an argument that is `@(list)` alone kept as written, a call
/// among its arguments left uncalled. The flags tell which items are
/// calls.
fn sequence_with_calls(ctx: &mut EvalContext, items: &[Rval]) -> (Vec<String>, Vec<bool>) {
    let mut list = Vec::new();
    let mut calls = Vec::new();
    for item in items {
        if let Rval::Call(c) = item {
            list.push(written_call(ctx, c));
            calls.push(true);
            continue;
        }
        let Ok(e) = ctx.eval_rval(&Rval::List {
            items: vec![item.clone()],
            span: item.span(),
        }) else {
            continue;
        };
        if let Value::List(l) = e.value {
            calls.extend(l.iter().map(|_| false));
            list.extend(l);
        }
    }
    (list, calls)
}

/// A call of a bundlesequence as cf-promises writes it: `name("a","b")`,
/// each argument in double quotes with its `"` escaped.
fn written_call(ctx: &EvalContext, c: &crate::syntax::ast::FnCall) -> String {
    let args: Vec<String> = c.args.iter().map(|a| written_arg(ctx, a)).collect();
    format!("{}({})", ctx.expand(&c.name.name).text, args.join(","))
}

fn written_arg(ctx: &EvalContext, arg: &Rval) -> String {
    let quoted = |s: &str| format!("\"{}\"", s.replace('"', "\\\""));
    match arg {
        Rval::Call(inner) => written_call(ctx, inner),
        Rval::String(s)
            if s.value.starts_with('@') && crate::schema::values::is_naked_var(&s.value) =>
        {
            quoted(&s.value)
        }
        Rval::String(s) => quoted(&ctx.expand(&s.value).text),
        Rval::NakedVar { text, .. } => quoted(text),
        Rval::Symbol(i) => quoted(&i.name),
        Rval::List { items, .. } => {
            let inner: Vec<String> = items.iter().map(|i| written_arg(ctx, i)).collect();
            format!("{{{}}}", inner.join(","))
        }
    }
}

/// The variable type of a control attribute of schema type `ty` (a body
/// or bundle name is a string).
fn control_data_type(ty: crate::schema::ValueType) -> DataType {
    use crate::schema::ValueType as T;
    match ty {
        T::String | T::Option | T::Context | T::Irange | T::Rrange | T::Body | T::Bundle => {
            DataType::String
        }
        T::Int => DataType::Int,
        T::Real => DataType::Real,
        T::Slist | T::Olist | T::Clist => DataType::Slist,
        T::Ilist => DataType::Ilist,
        T::Rlist => DataType::Rlist,
        T::Data => DataType::Data,
    }
}

/// The input files a file names in its control bodies, resolved against
/// the entry file's directory. Entries that do not resolve yet are left
/// for a later round.
/// The files a file's control bodies list as inputs; `unresolved` is set
/// when an entry could not be resolved (yet).
fn file_inputs(
    ctx: &mut EvalContext,
    file: &LoadedFile,
    entry_dir: &Path,
    unresolved: &mut bool,
    unresolved_texts: &mut Vec<String>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for body in file.tree.bodies() {
        if body.kind != BodyKind::Body || body.name.name != "control" {
            continue;
        }
        if body.body_type.name != "common" && body.body_type.name != "file" {
            continue;
        }
        // A control body is no promise: `this.promise_dirname` does not
        // resolve in its inputs, as in cf-promises (policies name inputs
        // relative to themselves through a common bundle's variable).
        ctx.push_frame(Frame::new(&body.namespace, "control_inputs", "common"));
        for a in body.attributes_named("inputs") {
            if !ctx.eval_class_expr(a.guard.expr.trim()).unwrap_or(false) {
                continue;
            }
            let Ok(e) = ctx.eval_rval(&a.attr.value) else {
                *unresolved = true;
                continue;
            };
            let items = match e.value {
                Value::List(l) => l,
                Value::Scalar(s) => vec![s],
                Value::Data(_) => continue,
            };
            for item in items {
                if crate::values::refs::has_refs(&item) {
                    *unresolved = true;
                    if !unresolved_texts.contains(&item) {
                        unresolved_texts.push(item);
                    }
                    continue;
                }
                if item.is_empty() {
                    continue;
                }
                // Kept as written (`DIR/../x.cf`): cf-agent's
                // `this.promise_filename` and `promise_dirname` show the
                // path so (01_vars/deep_delayed_expansion/main.cf compares
                // them); `already_read` compares paths normalised.
                let p = Path::new(&item);
                out.push(if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    entry_dir.join(p)
                });
            }
        }
        ctx.pop_frame();
    }
    out
}

/// The inputs read already, or that failed to be, by their normal paths:
/// one file named two ways (`x.cf`, `./x.cf`) is read once. Asked for every
/// input of every file in each round, so the policy's paths are normalised
/// once each, as its files are added.
#[derive(Default)]
struct ReadPaths {
    read: HashSet<PathBuf>,
    /// How many of the policy's files `read` holds (files are only added).
    upto: usize,
    failed: Vec<PathBuf>,
}

impl ReadPaths {
    fn already_read(&mut self, policy: &PolicySet, path: &Path) -> bool {
        for f in policy.files.iter().skip(self.upto) {
            let p = &f.source.path;
            // A plain name is its own normal form.
            self.read.insert(match is_plain(p) {
                true => PathBuf::from(p),
                false => normalize(Path::new(p)),
            });
        }
        self.upto = policy.files.len();
        let key = normalize(path);
        self.failed.contains(&key) || self.read.contains(&key)
    }
}

/// Whether `normalize` would give `p` back unchanged: no `.`, `..` or empty
/// component, no trailing `/`.
fn is_plain(p: &str) -> bool {
    !p.is_empty()
        && !p.ends_with('/')
        && p.split('/').enumerate().all(|(i, seg)| match seg {
            "" => i == 0,
            "." | ".." => false,
            _ => true,
        })
}

/// A path with its `.` components dropped and `..` applied, so that one
/// file named two ways (`x.cf`, `./x.cf`) is read once.
fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_named_two_ways_is_one_path() {
        assert_eq!(
            normalize(Path::new("/a/./b/../c.cf")),
            PathBuf::from("/a/c.cf")
        );
        assert_eq!(
            normalize(Path::new("/a/./x.cf")),
            normalize(Path::new("/a/x.cf"))
        );
        assert_eq!(normalize(Path::new("../x.cf")), PathBuf::from("../x.cf"));
        for plain in ["/a/b.cf", "a/b.cf", "x.cf", "/a.b/.c.cf"] {
            assert!(is_plain(plain), "{plain}");
            assert_eq!(normalize(Path::new(plain)).as_os_str(), plain);
        }
        for not in ["/a//b.cf", "./x.cf", "a/../b", "a/", "/", ""] {
            assert!(!is_plain(not), "{not}");
        }
    }

    #[test]
    fn dirname_keeps_the_path_as_written() {
        let d = |p: &str| crate::load::dirname_text(Path::new(p));
        assert_eq!(d("/a/./x.cf"), PathBuf::from("/a/."));
        assert_eq!(d("/a/b/../x.cf"), PathBuf::from("/a/b/.."));
        assert_eq!(d("/x.cf"), PathBuf::from("/"));
    }
}
