//! Pre-evaluation, as cf-promises and cf-agent do it before running
//! anything: load the entry file and its inputs (which may be computed from
//! variables), and for each file evaluate, bundle by bundle, the vars and
//! classes of common bundles and the vars of every bundle; then once more
//! over all files, so that definitions in later files reach earlier ones.

use super::context::{EvalContext, Frame};
use super::promises::EvalMessage;
use super::value::{DataType, Origin, Value};
use super::vars::Variable;
use crate::load::{LoadError, LoadedFile, PolicySet, load_file};
use crate::syntax::ast::{Body, BodyKind};
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
}

/// Loads `entry` and everything its inputs name into `policy`, and
/// pre-evaluates it into `ctx`.
pub fn load_and_preevaluate(
    ctx: &mut EvalContext,
    policy: &mut PolicySet,
    entry: &Path,
) -> Result<PreEvalReport, LoadError> {
    let entry_dir = entry.parent().map(Path::to_path_buf).unwrap_or_default();
    policy.add(load_file(entry)?);
    let mut report = PreEvalReport::default();
    let mut done = 0;
    let mut failed_paths: Vec<PathBuf> = Vec::new();
    for _ in 0..MAX_INPUT_ROUNDS {
        // Files loaded in this round, each pre-evaluated as it arrives.
        while done < policy.files.len() {
            let file = policy.files[done].clone();
            preevaluate_file(ctx, &file, &mut report);
            for path in file_inputs(ctx, &file, &entry_dir, &mut false) {
                let key = path.display().to_string();
                if policy.contains_path(&key) || failed_paths.contains(&path) {
                    continue;
                }
                match load_file(&path) {
                    Ok(f) => {
                        policy.add(f);
                    }
                    Err(e) => {
                        failed_paths.push(path);
                        report.load_errors.push(e);
                    }
                }
            }
            done += 1;
        }
        // Once more over everything; stop when that adds no file.
        let before = policy.files.len();
        for i in 0..policy.files.len() {
            let file = policy.files[i].clone();
            preevaluate_file(ctx, &file, &mut report);
        }
        // Whether inputs are complete is decided by this last look.
        let mut unresolved = false;
        for i in 0..policy.files.len() {
            let file = policy.files[i].clone();
            for path in file_inputs(ctx, &file, &entry_dir, &mut unresolved) {
                let key = path.display().to_string();
                if policy.contains_path(&key) || failed_paths.contains(&path) {
                    continue;
                }
                match load_file(&path) {
                    Ok(f) => {
                        policy.add(f);
                    }
                    Err(e) => {
                        failed_paths.push(path);
                        report.load_errors.push(e);
                    }
                }
            }
        }
        report.inputs_incomplete = unresolved;
        if policy.files.len() == before {
            break;
        }
    }
    // Messages of deferred promises may repeat over passes; keep one each.
    report.messages.dedup();
    Ok(report)
}

/// One file's pre-evaluation: control bodies, then per bundle the vars and
/// classes of common bundles and the vars of all.
fn preevaluate_file(ctx: &mut EvalContext, file: &LoadedFile, report: &mut PreEvalReport) {
    ctx.note_policy_file(&file.source.path, &file.tree);
    for body in file.tree.bodies() {
        if body.kind == BodyKind::Body && body.name.name == "control" {
            eval_control_body(ctx, file, body);
        }
    }
    for bundle in file.tree.bundles() {
        let common = bundle.bundle_type.name == "common";
        ctx.push_frame(Frame::new(
            &bundle.namespace,
            &bundle.name.name,
            &bundle.bundle_type.name,
        ));
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
                    let (_, msgs) = if kind == "vars" {
                        ctx.eval_vars_promise(file, promise)
                    } else {
                        ctx.eval_classes_promise(file, promise, true)
                    };
                    report.messages.extend(msgs);
                }
            }
        }
        ctx.pop_frame();
    }
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
                file: file.source.path.clone(),
                line,
            },
        )
        .with_tags(vec!["source=promise".to_string()]);
        ctx.vars
            .put(&body.namespace, &scope, &a.attr.name.name, var);
    }
    ctx.pop_frame();
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
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for body in file.tree.bodies() {
        if body.kind != BodyKind::Body || body.name.name != "control" {
            continue;
        }
        if body.body_type.name != "common" && body.body_type.name != "file" {
            continue;
        }
        ctx.push_frame(Frame::new(&body.namespace, "control_inputs", "common"));
        // Inputs may be named relative to the file that lists them, as
        // `$(this.promise_dirname)/x.cf` (the MPF's lib/stdlib.cf does).
        let path = Path::new(&file.source.path);
        let dir = path.parent().map(|p| p.display().to_string());
        ctx.set_this("promise_filename", Value::str(file.source.path.clone()));
        ctx.set_this("promise_dirname", Value::str(dir.unwrap_or_default()));
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
                if item.contains("$(") || item.contains("${") || item.contains("@(") {
                    *unresolved = true;
                    continue;
                }
                if item.is_empty() {
                    continue;
                }
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
