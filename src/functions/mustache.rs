//! Mustache templates with CFEngine's extensions, for `string_mustache`
//! (and later the files promise's mustache templates).
//!
//! Supported: `{{name}}` (HTML-escaped), `{{{name}}}` and `{{&name}}`,
//! dotted names, `{{.}}`, `{{-top-}}` (the whole data), sections and inverted sections, comments, set
//! delimiters, standalone tag lines, and CFEngine's additions: `{{@}}` (the
//! key while a section iterates over an object), `{{$name}}` (compact
//! JSON) and `{{%name}}` (indented JSON). A section over an object renders
//! once, or once per entry when its body uses `{{@}}`; a section over a
//! string or number is an error, as in cf-agent. Partials are not supported.

use crate::syntax::MAX_NESTING;
use crate::values::json;
use serde_json::Value as Json;

#[derive(Debug)]
enum Node {
    Text(String),
    Var {
        name: String,
        kind: VarKind,
        /// The template line of the tag, for errors.
        line: usize,
    },
    Section {
        name: String,
        inverted: bool,
        children: Vec<Node>,
        line: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum VarKind {
    Escaped,
    Raw,
    JsonCompact,
    JsonPretty,
}

/// How loud cf-agent is about a template that does not render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
    /// Only under `-v`.
    Quiet,
}

/// Why a template does not render, and how loud cf-agent is about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RenderError {
    pub level: Level,
    pub message: String,
}

impl RenderError {
    fn new(level: Level, message: String) -> RenderError {
        RenderError { level, message }
    }
}

impl From<String> for RenderError {
    fn from(message: String) -> RenderError {
        RenderError::new(Level::Error, message)
    }
}

/// Renders `template` against `data`. An error names the template line
/// it is about (`line 3: section 'a' is not closed`).
pub fn render(template: &str, data: &Json) -> Result<String, RenderError> {
    let nodes = parse(template)?;
    let mut out = String::with_capacity(template.len());
    let mut stack: Vec<Frame> = vec![Frame {
        value: data,
        key: None,
    }];
    render_nodes(&nodes, &mut stack, &mut out, false)?;
    Ok(out)
}

struct Frame<'a> {
    value: &'a Json,
    key: Option<String>,
}

// ---- parsing ------------------------------------------------------------------

enum Tok {
    Text(String),
    /// A tag and the line it is on.
    Var(String, VarKind, usize),
    Open(String, bool, usize),
    Close(String, usize),
}

/// The line (from 1) of a byte offset in the template.
fn line_at(t: &str, offset: usize) -> usize {
    t.as_bytes()[..offset.min(t.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn parse(t: &str) -> Result<Vec<Node>, RenderError> {
    let mut open = "{{".to_string();
    let mut close = "}}".to_string();
    let mut toks: Vec<Tok> = Vec::new();
    // Sections open at the current tag: rendering and the tree's walks
    // recurse per level, so there are at most `MAX_NESTING`.
    let mut depth = 0usize;
    let mut pos = 0;
    let mut text = String::new();
    // No tag yet on the current output line.
    let mut line_clean = true;
    while pos < t.len() {
        let Some(rel) = t[pos..].find(open.as_str()) else {
            text.push_str(&t[pos..]);
            break;
        };
        let start = pos + rel;
        text.push_str(&t[pos..start]);
        let mut inner_start = start + open.len();
        let triple = open == "{{" && t[inner_start..].starts_with('{');
        let end_delim = if triple {
            format!("}}{close}")
        } else {
            close.clone()
        };
        if triple {
            inner_start += 1;
        }
        let Some(rel_end) = t[inner_start..].find(end_delim.as_str()) else {
            return Err(format!(
                "line {}: tag '{open}' is not closed by '{end_delim}'",
                line_at(t, start)
            )
            .into());
        };
        let inner = t[inner_start..inner_start + rel_end].trim();
        let mut after = inner_start + rel_end + end_delim.len();
        let (sigil, rest) = match inner.chars().next() {
            Some(c) if !triple && "#^/!=&$%>".contains(c) => (Some(c), inner[1..].trim()),
            _ => (None, inner),
        };
        // A standalone tag takes its whole line with it.
        let (seg_start, clean) = match text.rfind('\n') {
            Some(i) => (i + 1, true),
            None => (0, line_clean),
        };
        let before_ws = clean && text[seg_start..].chars().all(|c| c == ' ' || c == '\t');
        let rest_line = &t[after..];
        let eol = rest_line.find('\n').map_or(rest_line.len(), |i| i + 1);
        let after_ws = rest_line[..eol]
            .trim_end_matches(['\n', '\r'])
            .chars()
            .all(|c| c == ' ' || c == '\t');
        let can_stand = matches!(sigil, Some('#' | '^' | '/' | '!' | '=' | '>'));
        if can_stand && before_ws && after_ws {
            text.truncate(seg_start);
            after += eol;
            line_clean = true;
        } else {
            line_clean = false;
        }
        if !text.is_empty() {
            toks.push(Tok::Text(std::mem::take(&mut text)));
        }
        let line = line_at(t, start);
        match sigil {
            Some('#' | '^') => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(format!(
                        "line {line}: sections nested too deeply: expected at most {MAX_NESTING} levels of sections, found more"
                    )
                    .into());
                }
                toks.push(Tok::Open(rest.to_string(), sigil == Some('^'), line));
            }
            Some('/') => {
                depth = depth.saturating_sub(1);
                toks.push(Tok::Close(rest.to_string(), line));
            }
            Some('!') | Some('>') => {}
            // A variable tag naming nothing renders as its delimiters, as
            // cf-agent's does (10_files/templating/mustache_abuse.cf).
            None | Some('&' | '$' | '%') if rest.is_empty() => {
                toks.push(Tok::Text(format!("{open}{close}")));
            }
            Some('=') => {
                let spec = rest.trim_end_matches('=').trim();
                let mut parts = spec.split_whitespace();
                match (parts.next(), parts.next()) {
                    (Some(o), Some(c)) => {
                        open = o.to_string();
                        close = c.to_string();
                    }
                    _ => return Err(format!("line {line}: bad delimiter change '{inner}'").into()),
                }
            }
            Some('&') => toks.push(Tok::Var(rest.to_string(), VarKind::Raw, line)),
            Some('$') => toks.push(Tok::Var(rest.to_string(), VarKind::JsonCompact, line)),
            Some('%') => toks.push(Tok::Var(rest.to_string(), VarKind::JsonPretty, line)),
            _ => toks.push(Tok::Var(
                rest.to_string(),
                if triple {
                    VarKind::Raw
                } else {
                    VarKind::Escaped
                },
                line,
            )),
        }
        pos = after;
    }
    if !text.is_empty() {
        toks.push(Tok::Text(text));
    }
    let mut iter = toks.into_iter();
    let nodes = build(&mut iter, None)?;
    Ok(nodes)
}

/// The nodes up to the end of `section` (its name and line), or of the
/// template.
fn build(
    iter: &mut impl Iterator<Item = Tok>,
    section: Option<(&str, usize)>,
) -> Result<Vec<Node>, RenderError> {
    let mut out = Vec::new();
    while let Some(tok) = iter.next() {
        match tok {
            Tok::Text(s) => out.push(Node::Text(s)),
            Tok::Var(name, kind, line) => out.push(Node::Var { name, kind, line }),
            Tok::Open(name, inverted, line) => {
                let children = build(iter, Some((&name, line)))?;
                out.push(Node::Section {
                    name,
                    inverted,
                    children,
                    line,
                });
            }
            Tok::Close(name, line) => {
                // Any closing tag ends the innermost section, whatever it
                // names: cf-agent does not compare the names.
                // cf-agent only warns of this one.
                return match section {
                    Some(_) => Ok(out),
                    None => Err(RenderError::new(
                        Level::Warning,
                        format!("line {line}: '{{{{/{name}}}}}' closes no section"),
                    )),
                };
            }
        }
    }
    match section {
        Some((s, line)) => Err(format!("line {line}: section '{s}' is not closed").into()),
        None => Ok(out),
    }
}

// ---- rendering ----------------------------------------------------------------

fn lookup<'a>(stack: &[Frame<'a>], name: &str) -> Option<&'a Json> {
    if name == "." {
        return stack.last().map(|f| f.value);
    }
    // CFEngine's `-top-` names the whole data, wherever the tag is.
    if name == "-top-" {
        return stack.first().map(|f| f.value);
    }
    let mut parts = name.split('.');
    let first = parts.next()?;
    let mut cur = stack.iter().rev().find_map(|f| match f.value {
        Json::Object(m) => m.get(first),
        _ => None,
    })?;
    for p in parts {
        cur = match cur {
            Json::Object(m) => m.get(p)?,
            Json::Array(a) => a.get(p.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn uses_key(nodes: &[Node]) -> bool {
    nodes.iter().any(|n| match n {
        Node::Var { name, .. } => name == "@",
        Node::Section { children, .. } => uses_key(children),
        Node::Text(_) => false,
    })
}

fn escape_html(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

fn render_nodes<'a>(
    nodes: &[Node],
    stack: &mut Vec<Frame<'a>>,
    out: &mut String,
    skip: bool,
) -> Result<(), RenderError> {
    for n in nodes {
        match n {
            Node::Text(s) => {
                if !skip {
                    out.push_str(s)
                }
            }
            Node::Var { .. } if skip => {}
            Node::Var { name, kind, line } => {
                if name == "@" {
                    if let Some(k) = stack.iter().rev().find_map(|f| f.key.clone()) {
                        out.push_str(&k);
                    }
                    continue;
                }
                let Some(v) = lookup(stack, name) else {
                    continue;
                };
                match kind {
                    VarKind::JsonCompact => out.push_str(&json::write_compact(v)),
                    VarKind::JsonPretty => out.push_str(&json::write_pretty(v)),
                    _ => {
                        let text = match v {
                            Json::Null => String::new(),
                            // cf-agent warns of `{{.}}` on a container and
                            // fails a named one without a word.
                            Json::Array(_) | Json::Object(_) => {
                                let level = match name.as_str() {
                                    "." => Level::Warning,
                                    _ => Level::Quiet,
                                };
                                return Err(RenderError::new(
                                    level,
                                    format!(
                                        "line {line}: '{name}' is a container; use {{{{${name}}}}}"
                                    ),
                                ));
                            }
                            // Reals with two decimals, as in `$(d[k])`.
                            prim => json::expansion_text(prim).unwrap_or_default(),
                        };
                        if *kind == VarKind::Escaped {
                            escape_html(&text, out);
                        } else {
                            out.push_str(&text);
                        }
                    }
                }
            }
            Node::Section {
                name,
                inverted,
                children,
                line,
            } => {
                // As cf-agent's renderer, a section that does not show
                // is still walked (skipping its text and variables), so
                // the sections inside it are checked all the same.
                let inverted = *inverted;
                // cf-agent looks a section's name up in the data only:
                // `{{#.}}` names nothing there.
                let value = match name.as_str() {
                    "." => None,
                    _ => lookup(stack, name),
                };
                match value {
                    None => render_nodes(children, stack, out, skip || !inverted)?,
                    Some(Json::Bool(b)) => {
                        render_nodes(children, stack, out, skip || (*b == inverted))?
                    }
                    // cf-agent renders an empty list's inverted section
                    // even inside a section that does not show.
                    Some(Json::Array(a)) if a.is_empty() => {
                        render_nodes(children, stack, out, !inverted)?
                    }
                    Some(Json::Array(a)) => {
                        for (i, item) in a.iter().enumerate() {
                            stack.push(Frame {
                                value: item,
                                key: Some(i.to_string()),
                            });
                            let r = render_nodes(children, stack, out, skip || inverted);
                            stack.pop();
                            r?;
                        }
                    }
                    // An object section renders once with the object as
                    // context, or once per entry when it asks for `{{@}}`.
                    Some(obj @ Json::Object(m)) => {
                        stack.push(Frame {
                            value: obj,
                            key: None,
                        });
                        let r = if uses_key(children) {
                            m.iter().try_for_each(|(k, item)| {
                                stack.push(Frame {
                                    value: item,
                                    key: Some(k.clone()),
                                });
                                let r = render_nodes(children, stack, out, skip || inverted);
                                stack.pop();
                                r
                            })
                        } else {
                            render_nodes(children, stack, out, skip || inverted)
                        };
                        stack.pop();
                        r?;
                    }
                    // cf-agent's words (it warns with them, then fails),
                    // for an inverted section too.
                    Some(_) => {
                        return Err(RenderError::new(
                            Level::Warning,
                            format!(
                                "line {line}: Mustache sections can only take a boolean or a container (array or map) value, but section '{name}' isn't getting one of those."
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(t: &str, d: &str) -> Result<String, String> {
        render(t, &json::parse(d).unwrap()).map_err(|e| e.message)
    }

    #[test]
    fn variables_and_sections() {
        let d = r#"{"name":"a<b>&c","n":1.5,"t":true,"f":false,"o":{"x":"1","y":"2"},"l":["p","q"],"e":[]}"#;
        assert_eq!(
            r("{{name}}|{{{name}}}|{{&name}}|{{n}}|{{t}}", d).unwrap(),
            "a&lt;b&gt;&amp;c|a<b>&c|a<b>&c|1.50|true"
        );
        assert_eq!(
            r("{{#o}}[{{@}}={{.}}]{{/o}}{{#l}}<{{.}}>{{/l}}{{^e}}empty{{/e}}{{#t}}T{{/t}}{{#f}}F{{/f}}{{^f}}notF{{/f}}", d).unwrap(),
            "[x=1][y=2]<p><q>emptyTnotF"
        );
        assert_eq!(
            r("{{$o}}|{{$l}}", d).unwrap(),
            r#"{"x":"1","y":"2"}|["p","q"]"#
        );
        assert_eq!(
            r("{{o.x}}{{#o}}{{x}}{{/o}}{{=<% %>=}}<%name%>", d).unwrap(),
            "11a&lt;b&gt;&amp;c"
        );
        assert_eq!(
            r("{{#o}}({{x}}|{{.}}|{{@}}){{/o}}", d).unwrap(),
            "(1|1|x)(1|2|y)"
        );
        assert!(r("{{#o}}({{.}}){{/o}}", d).is_err());
        assert_eq!(
            r("a\n  {{#l}}\n  - {{.}}\n  {{/l}}\nb", d).unwrap(),
            "a\n  - p\n  - q\nb"
        );
        assert!(r("{{#name}}x{{/name}}", d).is_err());
        assert!(r("{{#l}}x", d).is_err());
        assert!(r("{{/l}}", d).is_err());
        assert!(r("{{name", d).is_err());
    }

    #[test]
    fn a_tag_naming_nothing_is_its_delimiters() {
        assert_eq!(r("a{{}}b{{ }}", "{}").unwrap(), "a{{}}b{{}}");
        assert_eq!(r("{{=<% %>=}}<%%>", "{}").unwrap(), "<%%>");
    }

    #[test]
    fn errors_name_the_template_line() {
        let d = r#"{"a":true,"s":"x","o":{"k":1}}"#;
        assert_eq!(
            r("x\n{{#a}}\ny\n", d).unwrap_err(),
            "line 2: section 'a' is not closed"
        );
        // As in cf-agent, a closing tag need not name its section.
        assert_eq!(r("{{#a}}x{{/b}}y", d).unwrap(), "xy");
        assert_eq!(r("{{^a}}x{{/b}}y", d).unwrap(), "y");
        assert_eq!(
            r("\n{{/b}}", d).unwrap_err(),
            "line 2: '{{/b}}' closes no section"
        );
        assert_eq!(
            r("a\nb {{s", d).unwrap_err(),
            "line 2: tag '{{' is not closed by '}}'"
        );
        assert_eq!(
            r("\n\n{{#s}}{{/s}}", d).unwrap_err(),
            "line 3: Mustache sections can only take a boolean or a container (array or map) value, but section 's' isn't getting one of those."
        );
        assert!(
            r("\n{{o}}", d)
                .unwrap_err()
                .starts_with("line 2: 'o' is a container")
        );
    }

    /// As cf-agent's renderer: a section that does not show is walked all
    /// the same (a section over a string inside it fails the template),
    /// an empty list's inverted section shows even there, `{{#.}}` names
    /// nothing, and each failure is as loud as cf-agent's.
    #[test]
    fn hidden_sections_are_checked_as_cf_agent_checks_them() {
        let d = r#"{"t":true,"f":false,"s":"x","n":null,"e":[],"l":[1,2],"o":{"k":1}}"#;
        let level = |t: &str| render(t, &json::parse(d).unwrap()).unwrap_err().level;
        assert_eq!(level("{{^t}}{{#s}}a{{/s}}{{/t}}"), Level::Warning);
        assert_eq!(level("{{^s}}a{{/s}}"), Level::Warning);
        assert_eq!(level("{{#n}}a{{/n}}"), Level::Warning);
        assert_eq!(level("{{/s}}"), Level::Warning);
        assert_eq!(level("{{o}}"), Level::Quiet);
        assert_eq!(level("{{#o}}{{.}}{{/o}}"), Level::Warning);
        assert_eq!(level("{{#t}}a"), Level::Error);
        assert_eq!(r("[{{#f}}{{^e}}in{{/e}}{{/f}}]", d).unwrap(), "[in]");
        assert_eq!(r("[{{#l}}{{^.}}a{{/.}}{{/l}}]", d).unwrap(), "[aa]");
        assert_eq!(r("[{{^t}}{{o}}{{/t}}]", d).unwrap(), "[]");
    }

    /// Sections nest up to the limit; deeper is an error naming the line,
    /// not a stack overflow (the renderer recurses per section).
    #[test]
    fn sections_nested_deeper_than_the_limit_are_an_error() {
        let d = r#"{"a":true}"#;
        let nest = |n: usize| format!("{}x{}", "{{#a}}".repeat(n), "{{/a}}".repeat(n));
        assert_eq!(r(&nest(MAX_NESTING), d).unwrap(), "x");
        let e = r(&format!("\n{}", nest(100_000)), d).unwrap_err();
        assert_eq!(
            e,
            "line 2: sections nested too deeply: expected at most 128 levels of sections, found more"
        );
        let inverted = format!("{}x{}", "{{^b}}".repeat(100_000), "{{/b}}".repeat(100_000));
        assert!(r(&inverted, d).unwrap_err().contains("nested too deeply"));
    }
}
