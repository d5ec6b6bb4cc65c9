//! Templates in cf-agent's own format (`template_method => "cfengine"`),
//! which become an edit_line bundle of insertions. Mustache templates are
//! rendered by `functions::mustache`, shared with `string_mustache()`.

use super::super::ActContext;
use crate::load::LoadedFile;
use crate::syntax::ast::{
    Attribute, Bundle, ClassGuard, Ident, PolicyFile, Promise, Quote, Rval, Section, StringLit,
};
use crate::syntax::source::{SourceFile, Span};
use std::path::Path;

/// Reads a cfengine template into an edit_line bundle, as cf-agent does:
/// every line outside `[%CFEngine BEGIN %]`/`[%CFEngine END %]` is one
/// insertion, every block is one multi-line insertion, all of type
/// `preserve_all_lines`, each guarded by the class of the last
/// `[%CFEngine class:: %]` line (lines whose class is not defined are
/// left out). Errors carry `{promiser}` for the caller to fill in.
pub fn cfengine_bundle(
    act: &mut ActContext<'_>,
    path: &Path,
) -> Result<(LoadedFile, Bundle), String> {
    let shown = path.display().to_string();
    let text = match act.host.read(path) {
        Ok(b) => super::bytes::decode(&b),
        Err(_) => {
            return Err(format!(
                "Unable to open template file '{shown}' to make '{{promiser}}'"
            ));
        }
    };
    let mut promises = Vec::new();
    let mut context = "any".to_string();
    let mut stack: Vec<String> = Vec::new();
    let mut level = 0usize;
    let mut block = String::new();
    let mut offset = 0usize;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let lineno = n + 1;
        let at = offset;
        offset += line.len();
        if let Some(rest) = line.strip_prefix("[%CFEngine") {
            let mut words = rest.split_whitespace();
            let op = words.next().unwrap_or("").to_string();
            let brack: String = words.next().unwrap_or("").chars().take(3).collect();
            if brack != "%]" {
                return Err(format!(
                    "Template file '{shown}' syntax error, missing close \"%]\" at line {lineno}"
                ));
            }
            if op == "BEGIN" {
                stack.push(context.clone());
                level += 1;
                if level > 1 {
                    return Err(format!(
                        "Template file '{shown}' contains nested blocks which are not allowed, near line {lineno}"
                    ));
                }
                continue;
            }
            if op == "END" {
                level = level.saturating_sub(1);
                if let Some(c) = stack.pop() {
                    context = c;
                }
            }
            if let Some(class) = op.strip_suffix("::") {
                context = class.to_string();
                continue;
            }
            let promiser = block.strip_suffix('\n').unwrap_or(&block).to_string();
            promises.push(insertion(promiser, &context, at));
            block.clear();
        } else if act.ctx.class_holds(&context) {
            if level > 0 {
                block.push_str(line);
            } else {
                let l = line.strip_suffix('\n').unwrap_or(line).to_string();
                promises.push(insertion(l, &context, at));
            }
        }
    }
    let bundle = Bundle {
        namespace: "default".into(),
        bundle_type: ident("edit_line"),
        name: ident(&format!(
            "temp_cf_bundle_{}",
            crate::values::canon::canonify(&shown)
        )),
        params: Vec::new(),
        sections: vec![Section {
            promise_type: ident("insert_lines"),
            promises,
            span: Span::default(),
        }],
        span: Span::default(),
    };
    let file = LoadedFile {
        source: SourceFile::new(shown.clone(), text),
        tree: PolicyFile {
            path: shown,
            blocks: Vec::new(),
        },
        diagnostics: Vec::new(),
    };
    Ok((file, bundle))
}

fn ident(name: &str) -> Ident {
    Ident {
        name: name.into(),
        span: Span::default(),
    }
}

/// One insertion of the template, spanning the template line it came
/// from (its line number tells repeated lines apart, as in cf-agent).
fn insertion(text: String, context: &str, at: usize) -> Promise {
    let span = Span {
        start: at as u32,
        end: at as u32,
    };
    Promise {
        guard: ClassGuard {
            expr: context.into(),
            span,
            quoted: false,
        },
        promiser: StringLit {
            value: text.into(),
            quote: Quote::Double,
            span,
        },
        promisee: None,
        attributes: vec![Attribute {
            name: ident("insert_type"),
            value: Rval::String(StringLit {
                value: "preserve_all_lines".into(),
                quote: Quote::Double,
                span,
            }),
            span,
        }],
        span,
    }
}
