//! `host_specific.json`, the CMDB layer, read first.
//!
//! Only `vars`, `variables` and `classes` are read (other keys are skipped
//! with a warning). Nothing is expanded: a key holding any variable
//! reference is refused as a whole. Variables default to the `variables`
//! bundle of the `data` namespace (`data:variables.x`; `b.x` is
//! `data:b.x`), classes to the `data` namespace. Classes are not
//! conditional here: a class is defined by `"any::"`, `["any::"]`, or an
//! object whose `class_expressions` is `[]`/`["any::"]` and whose
//! `regular_expressions` is `[]`/`["any"]`; anything else is an error.
//! Everything is tagged `source=cmdb`, and no later augments file can
//! replace these variables (see [`super::put_var`]).

use super::classes::class_target;
use super::{
    AugmentsError, AugmentsReport, CMDB_TAG, FileCtx, class_info, comment_of, json_value, put_var,
    read_json, tags_of, var_target,
};
use crate::eval::EvalContext;
use crate::eval::vars::Variable;
use crate::values::lenient_json::{Json, Node};
use crate::values::refs::has_refs;
use crate::values::value::AugmentsLayer;
use std::path::Path;

const NS: &str = "data";
const BUNDLE: &str = "variables";

pub(crate) fn load(ctx: &mut EvalContext, path: &Path, report: &mut AugmentsReport) {
    let (text, root) = match read_json(path) {
        Ok(Some(x)) => x,
        Ok(None) => {
            crate::debug!("no host-specific data at '{}'", path.display());
            return;
        }
        Err(e) => {
            report.errors.push(e);
            return;
        }
    };
    let file = FileCtx {
        path,
        lines: crate::values::lenient_json::LineIndex::new(&text),
        layer: AugmentsLayer::HostSpecific,
    };
    let Json::Object(members) = &root.value else {
        report.errors.push(file.invalid(
            root.pos,
            "host-specific data must be a JSON object, file ignored",
        ));
        return;
    };
    for m in members {
        if !matches!(m.key.as_str(), "vars" | "variables" | "classes") {
            report.warnings.push(file.invalid_cmdb(
                m.key_pos,
                format!(
                    "Invalid key '{}' in the CMDB data file '{}', skipping it",
                    m.key,
                    path.display()
                ),
            ));
        }
    }
    report.files_loaded.push(path.to_path_buf());
    for key in ["vars", "variables", "classes"] {
        let Some(node) = root.get(key) else { continue };
        if node.value == Json::Null {
            continue;
        }
        let Json::Object(members) = &node.value else {
            report.errors.push(file.invalid_cmdb(
                node.pos,
                format!("Invalid '{key}' CMDB data, must be a JSON object"),
            ));
            continue;
        };
        if node.any_string(&has_refs) {
            report.errors.push(file.invalid_cmdb(
                node.pos,
                format!("Invalid '{key}' CMDB data, cannot contain variable references"),
            ));
            continue;
        }
        for m in members {
            let r = match key {
                "classes" => install_class(ctx, &file, &m.key, &m.node, report),
                _ => install_var(ctx, &file, key, &m.key, &m.node, report),
            };
            if let Err(e) = r {
                report.errors.push(e);
            }
        }
    }
}

fn install_var(
    ctx: &mut EvalContext,
    file: &FileCtx,
    key: &str,
    name: &str,
    spec: &Node,
    report: &mut AugmentsReport,
) -> Result<(), AugmentsError> {
    // A variable of "variables" is an object with its value, tags and
    // comment, or a bare value as in "vars"
    // (00_basics/06_host_specific_data/02-variables.cf).
    let described = key == "variables" && matches!(spec.value, Json::Object(_));
    let (value_node, tags, comment) = if described {
        let Some(v) = spec.get("value") else {
            return Err(file.invalid_cmdb(
                spec.pos,
                format!(
                    "Missing value in '{name}' variable specification in CMDB data (value \
                     field is required)"
                ),
            ));
        };
        let tags = tags_of(file, "variable", name, spec, CMDB_TAG, report);
        let comment = comment_of(file, "variable", name, spec, report);
        (v, tags, comment)
    } else {
        (spec, vec![CMDB_TAG.to_string()], None)
    };
    let Some((ns, scope, var_name)) = var_target(name, NS, BUNDLE) else {
        return Err(file.invalid(
            spec.pos,
            format!("invalid variable name '{name}' (a namespace needs a bundle: ns:bundle.name)"),
        ));
    };
    let Some((value, dtype)) = json_value(value_node) else {
        return Err(file.invalid(
            value_node.pos,
            format!("the variable '{name}' is null; skipped"),
        ));
    };
    let mut var = Variable::new(value, dtype, file.origin(key)).with_tags(tags);
    var.comment = comment;
    put_var(ctx, (&ns, &scope, &var_name), var, file.layer);
    Ok(())
}

fn install_class(
    ctx: &mut EvalContext,
    file: &FileCtx,
    name: &str,
    spec: &Node,
    report: &mut AugmentsReport,
) -> Result<(), AugmentsError> {
    let Some(key) = class_target(name, NS) else {
        return Err(file.invalid(spec.pos, format!("invalid class name '{name}'")));
    };
    let only = |list: Option<&Node>, allowed: &str| match list.map(|l| &l.value) {
        None => true,
        Some(Json::Array(items)) => {
            items.is_empty() || (items.len() == 1 && items[0].as_str() == Some(allowed))
        }
        Some(_) => false,
    };
    let (tags, comment) = match &spec.value {
        Json::Str(s) if s == "any::" => (vec![CMDB_TAG.to_string()], None),
        Json::Array(items) if items.len() == 1 && items[0].as_str() == Some("any::") => {
            (vec![CMDB_TAG.to_string()], None)
        }
        Json::Object(_) => {
            if !only(spec.get("class_expressions"), "any::") {
                return Err(file.invalid_cmdb(
                    spec.pos,
                    format!(
                        "Invalid class expression rules for class '{name}' in CMDB data, only \
                         '[]' or '[\"any::\"]' allowed"
                    ),
                ));
            }
            if !only(spec.get("regular_expressions"), "any") {
                return Err(file.invalid_cmdb(
                    spec.pos,
                    format!(
                        "Invalid regular expression rules for class '{name}' in CMDB data, \
                         only '[]' or '[\"any\"]' allowed"
                    ),
                ));
            }
            (
                tags_of(file, "class", name, spec, CMDB_TAG, report),
                comment_of(file, "class", name, spec, report),
            )
        }
        _ => {
            return Err(file.invalid(
                spec.pos,
                format!(
                    "the class '{name}' in host-specific data must be \"any::\" or \
                     [\"any::\"] (classes there are unconditional); skipped"
                ),
            ));
        }
    };
    if !ctx.classes.is_defined(&key) {
        ctx.classes
            .define(&key, class_info(file.origin("classes"), tags, comment));
    }
    Ok(())
}
