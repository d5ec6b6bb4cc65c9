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

use super::json;
use serde_json::Value as Json;

#[derive(Debug)]
enum Node {
    Text(String),
    Var {
        name: String,
        kind: VarKind,
    },
    Section {
        name: String,
        inverted: bool,
        children: Vec<Node>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum VarKind {
    Escaped,
    Raw,
    JsonCompact,
    JsonPretty,
}

/// Renders `template` against `data`.
pub fn render(template: &str, data: &Json) -> Result<String, String> {
    let nodes = parse(template)?;
    let mut out = String::with_capacity(template.len());
    let mut stack: Vec<Frame> = vec![Frame {
        value: data,
        key: None,
    }];
    render_nodes(&nodes, &mut stack, &mut out)?;
    Ok(out)
}

struct Frame<'a> {
    value: &'a Json,
    key: Option<String>,
}

// ---- parsing ------------------------------------------------------------------

enum Tok {
    Text(String),
    Var(String, VarKind),
    Open(String, bool),
    Close(String),
}

fn parse(t: &str) -> Result<Vec<Node>, String> {
    let mut open = "{{".to_string();
    let mut close = "}}".to_string();
    let mut toks: Vec<Tok> = Vec::new();
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
            return Err(format!("unclosed tag at byte {start}"));
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
        match sigil {
            Some('#') => toks.push(Tok::Open(rest.to_string(), false)),
            Some('^') => toks.push(Tok::Open(rest.to_string(), true)),
            Some('/') => toks.push(Tok::Close(rest.to_string())),
            Some('!') | Some('>') => {}
            Some('=') => {
                let spec = rest.trim_end_matches('=').trim();
                let mut parts = spec.split_whitespace();
                match (parts.next(), parts.next()) {
                    (Some(o), Some(c)) => {
                        open = o.to_string();
                        close = c.to_string();
                    }
                    _ => return Err(format!("bad delimiter change '{inner}'")),
                }
            }
            Some('&') => toks.push(Tok::Var(rest.to_string(), VarKind::Raw)),
            Some('$') => toks.push(Tok::Var(rest.to_string(), VarKind::JsonCompact)),
            Some('%') => toks.push(Tok::Var(rest.to_string(), VarKind::JsonPretty)),
            _ => toks.push(Tok::Var(
                rest.to_string(),
                if triple {
                    VarKind::Raw
                } else {
                    VarKind::Escaped
                },
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

fn build(iter: &mut impl Iterator<Item = Tok>, section: Option<&str>) -> Result<Vec<Node>, String> {
    let mut out = Vec::new();
    while let Some(tok) = iter.next() {
        match tok {
            Tok::Text(s) => out.push(Node::Text(s)),
            Tok::Var(name, kind) => out.push(Node::Var { name, kind }),
            Tok::Open(name, inverted) => {
                let children = build(iter, Some(&name))?;
                out.push(Node::Section {
                    name,
                    inverted,
                    children,
                });
            }
            Tok::Close(name) => {
                return match section {
                    Some(s) if s == name => Ok(out),
                    Some(s) => Err(format!("section '{s}' closed by '{name}'")),
                    None => Err(format!("'{{{{/{name}}}}}' closes no section")),
                };
            }
        }
    }
    match section {
        Some(s) => Err(format!("section '{s}' is not closed")),
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
) -> Result<(), String> {
    for n in nodes {
        match n {
            Node::Text(s) => out.push_str(s),
            Node::Var { name, kind } => {
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
                            Json::Array(_) | Json::Object(_) => {
                                return Err(format!(
                                    "'{name}' is a container; use {{{{${name}}}}}"
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
            } => {
                let v = lookup(stack, name);
                let truthy = match v {
                    None | Some(Json::Null) | Some(Json::Bool(false)) => false,
                    Some(Json::Array(a)) => !a.is_empty(),
                    Some(Json::Object(_)) | Some(Json::Bool(true)) => true,
                    Some(_) if *inverted => true,
                    Some(_) => {
                        return Err(format!("section '{name}' needs a boolean or a container"));
                    }
                };
                if *inverted {
                    if !truthy {
                        render_nodes(children, stack, out)?;
                    }
                    continue;
                }
                if !truthy {
                    continue;
                }
                match v {
                    Some(Json::Array(a)) => {
                        for (i, item) in a.iter().enumerate() {
                            stack.push(Frame {
                                value: item,
                                key: Some(i.to_string()),
                            });
                            let r = render_nodes(children, stack, out);
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
                                let r = render_nodes(children, stack, out);
                                stack.pop();
                                r
                            })
                        } else {
                            render_nodes(children, stack, out)
                        };
                        stack.pop();
                        r?;
                    }
                    _ => render_nodes(children, stack, out)?,
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
        render(t, &json::parse(d).unwrap())
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
}
