//! The properties the parser promises for any input whatsoever. The
//! property tests (tests/it/proptest_parse.rs) and the fuzz target (fuzz/)
//! hold it to them through [`check`], so both test the same thing.

use super::ast::*;
use super::json::{from_json, policy_json};
use super::source::{SourceFile, Span};
use super::{Parsed, parse};

/// Parses `text` and checks that
/// - every diagnostic's span and every node's span lies within the text
///   and starts and ends on character boundaries,
/// - every diagnostic renders,
/// - the tree survives the `-p json` round trip unchanged.
///
/// Returns the parse, or a description of the first broken property.
/// A panic inside the parser is, of course, also a failure.
pub fn check(text: &str) -> Result<Parsed, String> {
    let parsed = parse("fuzz.cf", text);
    let source = SourceFile::new("fuzz.cf", text);
    for (i, d) in parsed.diagnostics.iter().enumerate() {
        span_ok(text, d.span).map_err(|e| format!("diagnostic {:?}: {e}", d.message))?;
        // Rendered as the product renders them: the first ones of a file
        // (rendering each of thousands on one long line was the fuzzer's
        // time, not the parser's).
        if i >= super::diagnostic::SHOWN_PER_FILE {
            continue;
        }
        let rendered = d.render(&source);
        if !rendered.contains(&d.message) {
            return Err(format!("rendering lost the message: {rendered}"));
        }
    }
    let mut spans = Vec::new();
    for block in &parsed.file.blocks {
        block_spans(block, &mut spans);
    }
    for (what, span) in spans {
        span_ok(text, span).map_err(|e| format!("{what}: {e}"))?;
    }
    let json = policy_json([(&parsed.file, &source)]);
    let back = from_json(&json).map_err(|e| format!("from_json failed: {e}"))?;
    // A file's JSON is its blocks, so a file without any reads back as none.
    let blocks: Vec<&Block> = back.iter().flat_map(|f| &f.blocks).collect();
    if blocks.len() != parsed.file.blocks.len()
        || blocks.iter().zip(&parsed.file.blocks).any(|(a, b)| *a != b)
    {
        return Err("the -p json round trip changed the tree".to_string());
    }
    Ok(parsed)
}

fn span_ok(text: &str, span: Span) -> Result<(), String> {
    let (start, end) = (span.start as usize, span.end as usize);
    if start > end || end > text.len() {
        return Err(format!(
            "span {start}..{end} outside the text of {} bytes",
            text.len()
        ));
    }
    if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
        return Err(format!("span {start}..{end} splits a character"));
    }
    Ok(())
}

fn block_spans(block: &Block, out: &mut Vec<(&'static str, Span)>) {
    match block {
        Block::Bundle(b) => {
            out.extend([
                ("bundle", b.span),
                ("bundle type", b.bundle_type.span),
                ("bundle name", b.name.span),
            ]);
            out.extend(b.params.iter().map(|p| ("parameter", p.span)));
            for s in &b.sections {
                out.extend([("section", s.span), ("promise type", s.promise_type.span)]);
                for p in &s.promises {
                    out.extend([
                        ("promise", p.span),
                        ("promiser", p.promiser.span),
                        ("guard", p.guard.span),
                    ]);
                    if let Some(pe) = &p.promisee {
                        rval_spans(pe, out);
                    }
                    for a in &p.attributes {
                        attribute_spans(a, out);
                    }
                }
            }
        }
        Block::Body(b) => {
            out.extend([
                ("body", b.span),
                ("body type", b.body_type.span),
                ("body name", b.name.span),
            ]);
            out.extend(b.params.iter().map(|p| ("parameter", p.span)));
            for a in &b.attributes {
                out.push(("guard", a.guard.span));
                attribute_spans(&a.attr, out);
            }
        }
    }
}

fn attribute_spans(a: &Attribute, out: &mut Vec<(&'static str, Span)>) {
    out.extend([("attribute", a.span), ("attribute name", a.name.span)]);
    rval_spans(&a.value, out);
}

fn rval_spans(r: &Rval, out: &mut Vec<(&'static str, Span)>) {
    out.push(("value", r.span()));
    match r {
        Rval::List { items, .. } => items.iter().for_each(|i| rval_spans(i, out)),
        Rval::Call(c) => {
            out.push(("function name", c.name.span));
            c.args.iter().for_each(|a| rval_spans(a, out));
        }
        Rval::String(_) | Rval::Symbol(_) | Rval::NakedVar { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_for_good_and_broken_text() {
        for text in [
            "bundle agent x { vars: \"a\" string => f(\"b\", { \"c\" }); }",
            "bundle agent x(a,) { reports: linux:: \"é\" -> { @(l) }; }",
            "body perms p { linux:: mode => \"0644\" }",
            "\"unterminated",
            "@if minimum_version(3.7)\nbundle",
            "größe ) } ( { ; , => -> :: :",
            "",
        ] {
            check(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        }
    }
}
