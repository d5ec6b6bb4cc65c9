//! The `classes` key of `def.json` and its includes.
//!
//! Each class is defined (as a soft class, in the namespace its name names,
//! `default` otherwise) when one of its conditions holds, tried in order:
//!
//! - a condition ending in `::` is a class expression (without the `::`);
//! - any other condition is a regular expression that must match the whole
//!   name of some defined class (`ns:name` outside the default namespace);
//!
//! The conditions come as a list, as a single string, or as an object with
//! either `class_expressions` or `regular_expressions` (not both, not
//! neither) plus optional `comment` and `tags`. CFEngine 3.21 applies the
//! same `::` rule inside both of those lists, so `"regular_expressions":
//! ["linux::"]` is an expression and `"class_expressions": ["linux"]` is a
//! regular expression; we keep that.
//!
//! Conditions see every class defined so far: hard classes, `-D` classes,
//! the CMDB's, and the classes of earlier entries and earlier files.

use super::{AUGMENTS_TAG, AugmentsReport, FileCtx, class_info, comment_of, tags_of};
use crate::eval::EvalContext;
use crate::values::canon::{canonify, class_key};
use crate::values::lenient_json::{Json, Node};
use crate::values::refs::has_refs;

/// The store key of a class named in augments: `ns:name` splits at the
/// first `:`, each part canonified; no namespace means `default_ns`.
pub(crate) fn class_target(name: &str, default_ns: &str) -> Option<String> {
    let (ns, bare) = match name.split_once(':') {
        Some((ns, bare)) => (canonify(ns), canonify(bare)),
        None => (default_ns.to_string(), canonify(name)),
    };
    if ns.is_empty() || bare.is_empty() {
        return None;
    }
    Some(class_key(&ns, &bare))
}

pub(crate) fn install(
    ctx: &mut EvalContext,
    file: &FileCtx,
    classes: &Node,
    report: &mut AugmentsReport,
) {
    let Json::Object(members) = &classes.value else {
        report.errors.push(file.invalid(
            classes.pos,
            "the \"classes\" key must be a JSON object; it is ignored",
        ));
        return;
    };
    for m in members {
        let name = &m.key;
        let Some(key) = class_target(name, "default") else {
            report
                .errors
                .push(file.invalid(m.key_pos, format!("invalid class name '{name}'")));
            continue;
        };
        let (conditions, tags, comment): (&[Node], _, _) = match &m.node.value {
            Json::Array(items) => (items.as_slice(), vec![AUGMENTS_TAG.to_string()], None),
            Json::Object(_) => {
                let ce = m.node.get("class_expressions");
                let re = m.node.get("regular_expressions");
                let list = match (ce, re) {
                    (Some(l), None) | (None, Some(l)) => l,
                    _ => {
                        report.errors.push(file.invalid(
                            m.node.pos,
                            format!(
                                "the class '{name}' needs either \"class_expressions\" or \
                                 \"regular_expressions\" (exactly one); skipped"
                            ),
                        ));
                        continue;
                    }
                };
                let Json::Array(items) = &list.value else {
                    report.errors.push(file.invalid(
                        list.pos,
                        format!("the conditions of the class '{name}' must be a list; skipped"),
                    ));
                    continue;
                };
                let tags = tags_of(file, "class", name, &m.node, AUGMENTS_TAG, report);
                let comment = comment_of(file, "class", name, &m.node, report);
                (items.as_slice(), tags, comment)
            }
            Json::Null => {
                report.errors.push(file.invalid(
                    m.node.pos,
                    format!("the class '{name}' has no conditions (null); skipped"),
                ));
                continue;
            }
            _ => (
                std::slice::from_ref(&m.node),
                vec![AUGMENTS_TAG.to_string()],
                None,
            ),
        };
        if let Some(bad) = conditions.iter().find(|c| !c.is_primitive()) {
            report.errors.push(file.invalid(
                bad.pos,
                format!(
                    "the conditions of the class '{name}' must be strings, not lists or \
                     objects; skipped"
                ),
            ));
            continue;
        }
        let mut holds = false;
        for c in conditions {
            let Some(text) = c.primitive_text() else {
                continue;
            };
            match condition_holds(ctx, &text) {
                Ok(true) => {
                    holds = true;
                    break;
                }
                Ok(false) => {}
                Err(message) => report
                    .errors
                    .push(file.invalid(c.pos, format!("in the class '{name}': {message}"))),
            }
        }
        if !holds {
            continue;
        }
        // A class keeps its first definition: a later one adds nothing.
        if ctx.classes.is_defined(&key) {
            continue;
        }
        crate::debug!(
            "installing augments class '{key}' from '{}'",
            file.display()
        );
        ctx.classes
            .define(&key, class_info(file.origin("classes"), tags, comment));
    }
}

/// Whether one condition holds now.
pub(crate) fn condition_holds(ctx: &mut EvalContext, text: &str) -> Result<bool, String> {
    if has_refs(text) {
        // A reference that did not expand: CFEngine quietly skips it.
        return Ok(false);
    }
    if let Some(expr) = text.strip_suffix("::") {
        return ctx
            .eval_class_expr(expr)
            .map_err(|e| format!("cannot parse the class expression '{expr}': {e}"));
    }
    let re = ctx.regexes.get(text).map_err(|e| e.to_string())?;
    if re.is_full_match("any") {
        return Ok(true);
    }
    Ok(ctx.classes.iter().any(|(k, _)| re.is_full_match(k)))
}
