//! The module protocol: `usemodule` runs a program from the work
//! directory's `modules/` and reads what it prints; `read_module_protocol`
//! reads the same protocol from a file.
//!
//! Each line is one instruction:
//!
//! | line | effect |
//! | --- | --- |
//! | `+name` | define the class `name` (global) |
//! | `-name` | undefine the class `name` |
//! | `=name=value` | a string variable `context.name` (`name[k]` for arrays) |
//! | `@name= { "a", "b" }` | a list variable |
//! | `%name={json}` / `%name=[json]` | a data variable |
//! | `^context=name` | later variables go into scope `name` |
//! | `^meta=t1,t2` | later variables and classes carry these tags (and `source=module`) |
//! | `^persistence=minutes` | later classes persist (accepted; we do not keep them across runs yet) |
//!
//! Any other line is output of the module, logged.

use super::exec::{self, Capture, Shell};
use super::params::{Params, effect, spec};
use super::{FnResult, FnSpec, class_result};
use crate::eval::classes::{ClassInfo, canonify};
use crate::eval::vars::Variable;
use crate::eval::{DataType, EvalContext, Origin, Value};

pub static FUNCTIONS: &[FnSpec] = &[
    effect("usemodule", 1, Some(2), false, usemodule),
    spec("read_module_protocol", 1, Some(1), read_module_protocol),
];

/// One instruction of the protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Instruction {
    DefineClass(String),
    UndefineClass(String),
    Variable(String, Value),
    Context(String),
    Meta(Vec<String>),
    Persistence(u64),
    Output(String),
    /// A protocol line that is malformed, with the reason.
    Invalid(String, String),
}

/// Parses `{ "a", 'b', c }` into its items; quotes group, commas separate.
pub fn parse_list(text: &str) -> Option<Vec<String>> {
    let t = text.trim();
    let inner = t.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        let Some(&c) = chars.peek() else { break };
        let mut item = String::new();
        if c == '"' || c == '\'' {
            chars.next();
            let mut closed = false;
            while let Some(d) = chars.next() {
                if d == '\\' && chars.peek() == Some(&c) {
                    item.push(c);
                    chars.next();
                    continue;
                }
                if d == c {
                    closed = true;
                    break;
                }
                item.push(d);
            }
            if !closed {
                return None;
            }
        } else {
            while let Some(&d) = chars.peek() {
                if d == ',' {
                    break;
                }
                item.push(d);
                chars.next();
            }
            item = item.trim().to_string();
        }
        out.push(item);
    }
    Some(out)
}

fn valid_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || b == b'_'
                || b == b'.'
                || b == b':'
                || b == b'-'
                || b == b'['
                || b == b']'
        })
}

/// Reads one line of module output.
pub fn parse_line(line: &str) -> Instruction {
    let line = line.trim_end_matches('\r');
    let Some(first) = line.chars().next() else {
        return Instruction::Output(String::new());
    };
    let rest = &line[first.len_utf8()..];
    match first {
        '+' | '-' => {
            let name = rest.trim();
            if !valid_identifier(name) {
                return Instruction::Invalid(
                    line.to_string(),
                    format!("'{name}' is not a valid class name"),
                );
            }
            if first == '+' {
                Instruction::DefineClass(name.to_string())
            } else {
                Instruction::UndefineClass(name.to_string())
            }
        }
        '=' | '@' | '%' => {
            let Some((name, value)) = rest.split_once('=') else {
                return Instruction::Output(line.to_string());
            };
            if name.is_empty() {
                return Instruction::Invalid(line.to_string(), "no variable name".into());
            }
            let v = match first {
                '=' => Value::str(value),
                '@' => match parse_list(value) {
                    Some(l) => Value::List(l),
                    None => {
                        return Instruction::Invalid(
                            line.to_string(),
                            format!("'{value}' is not a list like {{ \"a\", \"b\" }}"),
                        );
                    }
                },
                _ => match serde_json::from_str::<serde_json::Value>(value.trim()) {
                    Ok(j) if j.is_object() || j.is_array() => Value::data(j),
                    _ => {
                        return Instruction::Invalid(
                            line.to_string(),
                            format!("'{value}' is not a JSON object or array"),
                        );
                    }
                },
            };
            Instruction::Variable(name.to_string(), v)
        }
        '^' => {
            let Some((key, value)) = rest.split_once('=') else {
                return Instruction::Output(line.to_string());
            };
            match key {
                "context" => {
                    if !value.is_empty()
                        && value
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    {
                        Instruction::Context(value.to_string())
                    } else {
                        Instruction::Invalid(
                            line.to_string(),
                            format!("'{value}' is not a valid context name"),
                        )
                    }
                }
                "meta" => Instruction::Meta(
                    value
                        .split(',')
                        .map(|t| t.trim().to_string())
                        .filter(|t| !t.is_empty())
                        .collect(),
                ),
                "persistence" => match value.trim().parse() {
                    Ok(m) => Instruction::Persistence(m),
                    Err(_) => Instruction::Invalid(
                        line.to_string(),
                        format!("'{value}' is not a number of minutes"),
                    ),
                },
                _ => Instruction::Invalid(line.to_string(), format!("unknown setting '^{key}'")),
            }
        }
        _ => Instruction::Output(line.to_string()),
    }
}

/// Applies a module's output to the context: variables go into scope
/// `context` (until `^context` changes it), classes are global.
pub fn apply(ctx: &mut EvalContext, module: &str, context: &str, text: &str) {
    let mut scope = context.to_string();
    let mut tags: Vec<String> = Vec::new();
    for line in text.lines() {
        match parse_line(line) {
            Instruction::DefineClass(name) => {
                let mut info = ClassInfo::soft(Origin::Agent, tags.clone());
                info.hard = false;
                ctx.classes.define(&canonify_class_name(&name), info);
            }
            Instruction::UndefineClass(name) => {
                ctx.classes.undefine(&canonify_class_name(&name));
            }
            Instruction::Variable(name, value) => {
                let dtype = match &value {
                    Value::Scalar(_) => DataType::String,
                    Value::List(_) => DataType::Slist,
                    Value::Data(_) => DataType::Data,
                };
                let var = Variable::new(value, dtype, Origin::Agent).with_tags(tags.clone());
                ctx.vars.put("default", &scope, &name, var);
            }
            Instruction::Context(c) => scope = c,
            Instruction::Meta(t) => {
                tags = t;
                if !tags.is_empty() {
                    tags.push("source=module".to_string());
                }
            }
            Instruction::Persistence(_) => {}
            Instruction::Output(l) => {
                if !l.is_empty() {
                    tracing::info!("M '{module}': {l}");
                }
            }
            Instruction::Invalid(l, why) => {
                tracing::error!("module '{module}' gave an invalid line '{l}': {why}");
            }
        }
    }
}

fn canonify_class_name(name: &str) -> String {
    match name.split_once(':') {
        Some((ns, n)) if ns != "default" => format!("{ns}:{}", canonify(n)),
        Some((_, n)) => canonify(n),
        None => canonify(name),
    }
}

fn modules_dir(ctx: &EvalContext) -> Option<std::path::PathBuf> {
    ctx.lookup("sys.workdir")
        .and_then(|v| v.as_scalar().map(std::path::PathBuf::from))
        .map(|w| w.join("modules"))
}

/// `usemodule(module, args)`: runs `<workdir>/modules/<module> args` (no
/// shell; the module must be owned by root or by us) and applies its
/// output, variables going into the scope named after the module.
fn usemodule(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Params::new("usemodule", a);
    let module = p.str(0)?;
    let args = p.opt_str(1)?.unwrap_or("");
    let Some(dir) = modules_dir(ctx) else {
        return Err(p.fail("the work directory is not known"));
    };
    let path = dir.join(module);
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&path)
        .map_err(|_| p.fail(format!("plug-in module '{}' not found", path.display())))?;
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    if meta.uid() != 0 && meta.uid() != me {
        return Err(p.fail(format!(
            "module '{}' is not owned by root or by uid {me}",
            path.display()
        )));
    }
    let line = format!("\"{}\" {args}", path.display());
    let f = exec::run(&line, Shell::No, Capture::Stdout, exec::DEFAULT_TIMEOUT)
        .map_err(|e| p.fail(e))?;
    let context = canonify(module);
    apply(ctx, module, &context, &f.output);
    Ok(class_result(true))
}

/// `read_module_protocol(file)`: applies the protocol lines of a file;
/// variables go into the scope named after the file's base name.
fn read_module_protocol(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Params::new("read_module_protocol", a);
    let path = p.str(0)?;
    let text = std::fs::read(path).map_err(|e| p.fail(format!("cannot read '{path}': {e}")))?;
    let text = String::from_utf8_lossy(&text);
    let base = std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    apply(ctx, path, &canonify(&base), &text);
    Ok(class_result(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_lines() {
        assert_eq!(parse_line("+a_b"), Instruction::DefineClass("a_b".into()));
        assert_eq!(parse_line("-x"), Instruction::UndefineClass("x".into()));
        assert_eq!(
            parse_line("=v=a=b"),
            Instruction::Variable("v".into(), Value::str("a=b"))
        );
        assert_eq!(
            parse_line("@l= { \"a\", 'b', \"c d\" }"),
            Instruction::Variable(
                "l".into(),
                Value::List(vec!["a".into(), "b".into(), "c d".into()])
            )
        );
        assert!(matches!(
            parse_line("%d={\"k\":1}"),
            Instruction::Variable(_, Value::Data(_))
        ));
        assert!(matches!(parse_line("%d=1"), Instruction::Invalid(..)));
        assert_eq!(parse_line("^context=x"), Instruction::Context("x".into()));
        assert!(matches!(
            parse_line("^context=a b"),
            Instruction::Invalid(..)
        ));
        assert_eq!(
            parse_line("^meta=a, b"),
            Instruction::Meta(vec!["a".into(), "b".into()])
        );
        assert_eq!(parse_line("hello"), Instruction::Output("hello".into()));
        assert!(matches!(parse_line("+bad name"), Instruction::Invalid(..)));
        assert_eq!(parse_line(""), Instruction::Output(String::new()));
    }

    #[test]
    fn applying_defines_variables_and_classes() {
        let mut c = EvalContext::default();
        apply(
            &mut c,
            "m",
            "m",
            "+c1\n=x=1\n^context=other\n^meta=inventory\n=y=2\n+c2\n-c1\n",
        );
        assert!(!c.classes.is_defined("c1"));
        assert_eq!(
            c.classes.get("c2").map(|i| i.tags.clone()),
            Some(vec!["inventory".to_string(), "source=module".to_string()])
        );
        assert_eq!(
            c.vars.get("default", "m", "x").map(|v| v.value.clone()),
            Some(Value::str("1"))
        );
        let y = c.vars.get("default", "other", "y").unwrap();
        assert_eq!(y.tags, vec!["inventory", "source=module"]);
    }
}
