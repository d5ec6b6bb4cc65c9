//! Mustache templates as cf-agent 3.21 renders them: HTML escaping of
//! `{{x}}` (`&`, `<`, `>`, `"`), `{{{x}}}`/`{{&x}}` raw, sections over
//! booleans, lists and maps, inverted sections, comments, delimiter
//! changes, standalone tag lines, and CFEngine's extensions: `-top-` (the
//! whole data), `{{%x}}`/`{{$x}}` (multi-line/compact JSON) and `{{@}}`
//! (the key or index being iterated; a map section iterates over its keys
//! only when its body uses `{{@}}`, else it renders once inside the map).
//!
//! Written here rather than taken from a crate: the extensions, cf-agent's
//! number formatting and its errors are not what general mustache crates
//! do, and the whole renderer is small.

use serde_json::Value as Json;

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Var {
        name: String,
        escape: bool,
        json: Option<bool>,
    },
    Section {
        name: String,
        inverted: bool,
        children: Vec<Node>,
    },
}

/// Renders `template` over `data`.
pub fn render(template: &str, data: &Json) -> Result<String, String> {
    let nodes = parse(template)?;
    let mut out = String::new();
    let mut stack = vec![Frame {
        value: data,
        key: None,
    }];
    render_nodes(&nodes, data, &mut stack, &mut out)?;
    Ok(out)
}

struct Frame<'a> {
    value: &'a Json,
    key: Option<String>,
}

#[derive(Debug)]
enum Tok {
    Text(String),
    Var {
        name: String,
        escape: bool,
        json: Option<bool>,
    },
    Open {
        name: String,
        inverted: bool,
    },
    Close(String),
}

fn parse(t: &str) -> Result<Vec<Node>, String> {
    let toks = tokenize(t)?;
    let mut stack: Vec<(String, bool, Vec<Node>)> = vec![(String::new(), false, Vec::new())];
    for tok in toks {
        match tok {
            Tok::Text(s) => stack.last_mut().expect("root").2.push(Node::Text(s)),
            Tok::Var { name, escape, json } => {
                stack
                    .last_mut()
                    .expect("root")
                    .2
                    .push(Node::Var { name, escape, json })
            }
            Tok::Open { name, inverted } => stack.push((name, inverted, Vec::new())),
            Tok::Close(name) => {
                if stack.len() < 2 || stack.last().expect("open").0 != name {
                    return Err(format!(
                        "Unknown section close in mustache template '{name}'"
                    ));
                }
                let (name, inverted, children) = stack.pop().expect("open");
                stack.last_mut().expect("root").2.push(Node::Section {
                    name,
                    inverted,
                    children,
                });
            }
        }
    }
    if stack.len() != 1 {
        return Err("Unexpected end to Mustache template".into());
    }
    Ok(stack.pop().expect("root").2)
}

fn tokenize(t: &str) -> Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let (mut open, mut close) = ("{{".to_string(), "}}".to_string());
    let mut pos = 0;
    let mut text = String::new();
    while pos < t.len() {
        let Some(rel) = t[pos..].find(&open) else {
            text.push_str(&t[pos..]);
            break;
        };
        let start = pos + rel;
        text.push_str(&t[pos..start]);
        let inner_start = start + open.len();
        let triple = open == "{{" && t[inner_start..].starts_with('{');
        let (body, end) = if triple {
            let Some(e) = t[inner_start + 1..].find("}}}") else {
                return Err(format!(
                    "Broken mustache template, couldn't find end tag for quoted begin tag at '{}'...",
                    &t[start..(start + 20).min(t.len())]
                ));
            };
            let b = &t[inner_start + 1..inner_start + 1 + e];
            (format!("&{b}"), inner_start + 1 + e + 3)
        } else {
            let Some(e) = t[inner_start..].find(&close) else {
                return Err(format!(
                    "Broken Mustache template, could not find end delimiter after reading start delimiter at '{}'...",
                    &t[start..(start + 20).min(t.len())]
                ));
            };
            (
                t[inner_start..inner_start + e].to_string(),
                inner_start + e + close.len(),
            )
        };
        let body = body.trim();
        let sigil = body.chars().next().unwrap_or(' ');
        let standalone_kind = matches!(sigil, '#' | '^' | '/' | '!' | '=' | '>');
        let mut next = end;
        if standalone_kind {
            let line_start = t[..start].rfind('\n').map_or(0, |i| i + 1);
            let before_ok = t[line_start..start].chars().all(|c| c == ' ' || c == '\t');
            let line_end = t[end..].find('\n').map_or(t.len(), |i| end + i);
            let after_ok = t[end..line_end]
                .trim_end_matches('\r')
                .chars()
                .all(|c| c == ' ' || c == '\t');
            // Only the start of the text on this line may be removed: the
            // part after the last newline of what came before.
            let emitted_on_line = start - line_start;
            if before_ok && after_ok && text.len() >= emitted_on_line {
                text.truncate(text.len() - emitted_on_line);
                next = if line_end < t.len() {
                    line_end + 1
                } else {
                    t.len()
                };
            }
        }
        if !text.is_empty() {
            toks.push(Tok::Text(std::mem::take(&mut text)));
        }
        let name = |s: &str| s.trim().to_string();
        match sigil {
            '#' => toks.push(Tok::Open {
                name: name(&body[1..]),
                inverted: false,
            }),
            '^' => toks.push(Tok::Open {
                name: name(&body[1..]),
                inverted: true,
            }),
            '/' => toks.push(Tok::Close(name(&body[1..]))),
            '!' | '>' => {}
            '=' => {
                let inner = body.trim_start_matches('=').trim_end_matches('=');
                let parts: Vec<&str> = inner.split_whitespace().collect();
                if parts.len() != 2 {
                    return Err(format!(
                        "Could not parse delimiter mustache, number of tokens is {}, expected 2 in '{body}'",
                        parts.len()
                    ));
                }
                open = parts[0].to_string();
                close = parts[1].to_string();
            }
            '&' => toks.push(Tok::Var {
                name: name(&body[1..]),
                escape: false,
                json: None,
            }),
            '%' => toks.push(Tok::Var {
                name: name(&body[1..]),
                escape: false,
                json: Some(true),
            }),
            '$' => toks.push(Tok::Var {
                name: name(&body[1..]),
                escape: false,
                json: Some(false),
            }),
            _ => toks.push(Tok::Var {
                name: name(body),
                escape: true,
                json: None,
            }),
        }
        pos = next;
    }
    if !text.is_empty() {
        toks.push(Tok::Text(text));
    }
    Ok(toks)
}

fn lookup<'a>(name: &str, root: &'a Json, stack: &[Frame<'a>]) -> Option<&'a Json> {
    if name == "." {
        return stack.last().map(|f| f.value);
    }
    if name == "-top-" {
        return Some(root);
    }
    let mut parts = name.split('.');
    let first = parts.next()?;
    let mut cur = stack
        .iter()
        .rev()
        .find_map(|f| f.value.as_object().and_then(|o| o.get(first)))?;
    for p in parts {
        cur = match cur {
            Json::Object(o) => o.get(p)?,
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

fn render_nodes<'a>(
    nodes: &'a [Node],
    root: &'a Json,
    stack: &mut Vec<Frame<'a>>,
    out: &mut String,
) -> Result<(), String> {
    for n in nodes {
        match n {
            Node::Text(s) => out.push_str(s),
            Node::Var { name, escape, json } => {
                if name == "@" {
                    let key = stack.iter().rev().find_map(|f| f.key.clone()).ok_or(
                        "RenderVariable: {{@}} Mustache tag must be used in a context where there's a valid key or iteration position",
                    )?;
                    out.push_str(&key);
                    continue;
                }
                let Some(v) = lookup(name, root, stack) else {
                    continue;
                };
                let text = match json {
                    Some(pretty) => {
                        if *pretty {
                            json_pretty(v, 0)
                        } else {
                            json_compact(v)
                        }
                    }
                    None => scalar_text(v).ok_or_else(|| {
                        "{{.}} mustache tag cannot expand a container without specifying conversion - consider {{$.}} or {{%.}}".to_string()
                    })?,
                };
                if *escape {
                    out.push_str(&html_escape(&text));
                } else {
                    out.push_str(&text);
                }
            }
            Node::Section {
                name,
                inverted,
                children,
            } => {
                let v = lookup(name, root, stack);
                let truthy = match v {
                    None | Some(Json::Bool(false)) => false,
                    Some(Json::Bool(true)) => true,
                    Some(Json::Array(a)) => !a.is_empty(),
                    Some(Json::Object(o)) => !o.is_empty(),
                    Some(_) => {
                        let msg = format!(
                            "Mustache sections can only take a boolean or a container (array or map) value, but section '{name}' isn't getting one of those."
                        );
                        tracing::warn!("{msg}");
                        return Err(msg);
                    }
                };
                if *inverted {
                    if !truthy {
                        render_nodes(children, root, stack, out)?;
                    }
                    continue;
                }
                if !truthy {
                    continue;
                }
                let v = v.expect("truthy");
                match v {
                    Json::Array(a) => {
                        for (i, item) in a.iter().enumerate() {
                            stack.push(Frame {
                                value: item,
                                key: Some(i.to_string()),
                            });
                            let r = render_nodes(children, root, stack, out);
                            stack.pop();
                            r?;
                        }
                    }
                    Json::Object(o) if uses_key(children) => {
                        for (k, item) in o {
                            stack.push(Frame {
                                value: item,
                                key: Some(k.clone()),
                            });
                            let r = render_nodes(children, root, stack, out);
                            stack.pop();
                            r?;
                        }
                    }
                    other => {
                        stack.push(Frame {
                            value: other,
                            key: None,
                        });
                        let r = render_nodes(children, root, stack, out);
                        stack.pop();
                        r?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// A primitive as cf-agent prints it; `None` for containers.
fn scalar_text(v: &Json) -> Option<String> {
    Some(match v {
        Json::Null => String::new(),
        Json::Bool(b) => b.to_string(),
        Json::String(s) => s.clone(),
        Json::Number(n) => number_text(n),
        Json::Array(_) | Json::Object(_) => return None,
    })
}

/// cf-agent keeps integers in an `int` and prints reals with two decimals.
fn number_text(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        (i as i32).to_string()
    } else if let Some(u) = n.as_u64() {
        (u as i32).to_string()
    } else {
        format!("{:.2}", n.as_f64().unwrap_or(0.0))
    }
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn json_compact(v: &Json) -> String {
    match v {
        Json::Null => String::new(),
        Json::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(json_compact_item)
                .collect::<Vec<_>>()
                .join(",")
        ),
        Json::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}:{}", json_string(k), json_compact_item(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => scalar_text(other).unwrap_or_default(),
    }
}

fn json_compact_item(v: &Json) -> String {
    match v {
        Json::String(s) => json_string(s),
        Json::Null => "null".into(),
        other => json_compact(other),
    }
}

fn json_pretty(v: &Json, indent: usize) -> String {
    let pad = "  ".repeat(indent);
    let inner = "  ".repeat(indent + 1);
    match v {
        Json::Array(a) if a.is_empty() => "[]".into(),
        Json::Array(a) => {
            let items: Vec<String> = a
                .iter()
                .map(|x| format!("{inner}{}", json_pretty_item(x, indent + 1)))
                .collect();
            format!("[\n{}\n{pad}]", items.join(",\n"))
        }
        Json::Object(o) if o.is_empty() => format!("{{\n{pad}}}"),
        Json::Object(o) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, x)| {
                    format!(
                        "{inner}{}: {}",
                        json_string(k),
                        json_pretty_item(x, indent + 1)
                    )
                })
                .collect();
            format!("{{\n{}\n{pad}}}", items.join(",\n"))
        }
        other => scalar_text(other).unwrap_or_default(),
    }
}

fn json_pretty_item(v: &Json, indent: usize) -> String {
    match v {
        Json::String(s) => json_string(s),
        Json::Null => "null".into(),
        other => json_pretty(other, indent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn variables_and_escaping() {
        let d = json!({"a": "<&>\"'", "n": 3, "r": 1.5, "t": true});
        assert_eq!(
            render("{{a}}|{{{a}}}|{{&a}}|{{n}}|{{r}}|{{t}}|{{x}}", &d).unwrap(),
            "&lt;&amp;&gt;&quot;'|<&>\"'|<&>\"'|3|1.50|true|"
        );
    }

    #[test]
    fn sections_and_standalone_lines() {
        let d = json!({"l": [1, 2], "m": {"k": "v", "j": "w"}, "e": []});
        assert_eq!(
            render("{{#l}}\n- {{.}}\n{{/l}}\n{{^e}}none{{/e}}\n", &d).unwrap(),
            "- 1\n- 2\nnone\n"
        );
        assert_eq!(render("{{#m}}{{@}}={{.}};{{/m}}", &d).unwrap(), "k=v;j=w;");
        assert_eq!(render("{{#m}}<{{k}}>{{/m}}", &d).unwrap(), "<v>");
        assert!(render("{{#l}}", &d).is_err());
    }

    #[test]
    fn json_and_delimiters() {
        let d = json!({"a": [1, 2], "b": {"c": "d"}});
        assert_eq!(
            render("{{$-top-}}", &d).unwrap(),
            r#"{"a":[1,2],"b":{"c":"d"}}"#
        );
        assert_eq!(render("{{%b}}", &d).unwrap(), "{\n  \"c\": \"d\"\n}");
        assert_eq!(
            render("{{=<% %>=}}<%b.c%> {{b.c}}", &d).unwrap(),
            "d {{b.c}}"
        );
    }
}
