//! The module protocol that `commands` with `module => "true"` (and the
//! `usemodule` function) speak: each output line may set a variable, a
//! list or a data container, define or cancel a class, or change the
//! context, tags or persistence of what follows.
//!
//! `=name=value`, `@name= { "a", "b" }`, `%name={json}`, `&name=file`
//! (a JSON, YAML, CSV or env file, by its suffix), `+class`, `-class`,
//! `^context=scope`, `^meta=tag1,tag2`, `^persistence=minutes`.

use super::EvalContext;
use super::classes::ClassInfo;
use super::vars::Variable;
use crate::values::canon::{canonify, canonify_class};
use crate::values::value::{DataType, Origin, Value};

/// What one module run left beyond variables and classes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ModuleResult {
    /// Lines that were not protocol lines (printed by the caller).
    pub other_lines: Vec<String>,
}

/// Parses a `{ "a", "b" }` list as the protocol writes it.
fn parse_list(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        let Some(q) = chars.next() else { break };
        if q != '"' && q != '\'' {
            return None;
        }
        let mut item = String::new();
        loop {
            match chars.next()? {
                '\\' => item.push(chars.next()?),
                c if c == q => break,
                c => item.push(c),
            }
        }
        out.push(item);
    }
    Some(out)
}

/// Reads the data file an `&name=file` line names (the evaluator does not
/// read files itself; the functions' `readdata` does, as cf-agent's
/// module protocol reads the file by its suffix).
pub type DataFileReader<'a> = &'a mut dyn FnMut(&mut EvalContext, &str) -> Result<Value, String>;

/// Applies a module's output: variables go to `scope` (changed by
/// `^context=`), classes are global.
pub fn apply(
    ctx: &mut EvalContext,
    scope: &str,
    output: &str,
    read_file: DataFileReader<'_>,
) -> ModuleResult {
    let mut scope = scope.to_string();
    let mut tags: Vec<String> = Vec::new();
    let mut persistence: Option<u64> = None;
    let mut result = ModuleResult::default();
    for line in output.lines() {
        let Some(first) = line.chars().next() else {
            continue;
        };
        let rest = &line[1..];
        // cf-agent tags what a module defines only after a `^meta=` line:
        // the meta tags, then `source=module`; before one, nothing.
        let module_tags = || {
            let mut t = tags.clone();
            if !t.is_empty() {
                t.push("source=module".to_string());
            }
            t
        };
        match first {
            '^' => {
                if let Some(c) = rest.strip_prefix("context=") {
                    // A context must be a plain name; anything else is
                    // refused and the context stays, as with cf-agent.
                    if !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
                    {
                        scope = canonify(c);
                    } else {
                        crate::error!(
                            "Module protocol was given an unacceptable ^context directive '{c}', skipping"
                        );
                    }
                } else if let Some(m) = rest.strip_prefix("meta=") {
                    // A set, as cf-agent keeps them: each tag once, an
                    // empty one (`a,,b`) included.
                    crate::debug!("Module set meta tags to '{m}'");
                    tags.clear();
                    for t in m.split(',').map(str::trim) {
                        if !tags.iter().any(|x| x == t) {
                            tags.push(t.to_string());
                        }
                    }
                } else if let Some(p) = rest.strip_prefix("persistence=") {
                    persistence = p.trim().parse().ok().filter(|&m| m > 0);
                    if let Some(m) = persistence {
                        crate::debug!("Module set persistence to {m} minutes");
                    }
                } else {
                    crate::info!("Unknown extended module command '{line}'");
                }
            }
            '+' => {
                let name = canonify_class(rest.trim());
                if name.is_empty() {
                    continue;
                }
                ctx.classes
                    .define(&name, ClassInfo::soft(Origin::Agent, module_tags()));
                // Stored with the run's other persistent classes when it
                // ends.
                if let Some(m) = persistence {
                    crate::debug!("Module set persistent class '{name}' for {m} minutes");
                    ctx.persist_requests
                        .push((name.clone(), m as i64, module_tags()));
                }
            }
            '-' => {
                // A comma-separated list; each class goes from every
                // bundle on the stack as well as from the global ones, as
                // cf-agent removes it (02_classes/02_functions/usemodule.cf
                // cancels a class local to the calling bundle).
                for name in rest.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let name = canonify_class(name);
                    for f in &mut ctx.frames {
                        f.local_classes.shift_remove(&name);
                    }
                    let entry = super::context::local_class_entry(&name);
                    ctx.classes.reads.note_change(|| entry);
                    ctx.classes.undefine(&name);
                }
            }
            '&' => {
                let Some((name, path)) = rest.split_once('=') else {
                    continue;
                };
                match read_file(ctx, path) {
                    Ok(value) => {
                        let var = Variable::new(value, DataType::Data, Origin::Agent)
                            .with_tags(module_tags());
                        ctx.vars.put("default", &scope, name, var);
                    }
                    Err(e) => crate::error!("could not load module file '{path}': {e}"),
                }
            }
            '=' | '@' | '%' => {
                let Some((name, text)) = rest.split_once('=') else {
                    result.other_lines.push(line.to_string());
                    continue;
                };
                let (value, dtype) = match first {
                    '=' => (Some(Value::str(text)), DataType::String),
                    '@' => (parse_list(text).map(Value::List), DataType::Slist),
                    _ => match serde_json::from_str::<serde_json::Value>(text) {
                        Ok(j) if !j.is_object() && !j.is_array() => {
                            crate::info!(
                                "Module protocol JSON '{text}' should be object or array; wasn't"
                            );
                            continue;
                        }
                        j => (j.ok().map(Value::data), DataType::Data),
                    },
                };
                let Some(value) = value else {
                    // cf-agent's words for a list that does not parse; for
                    // data, its parser's reason.
                    if first == '@' {
                        crate::error!("Parsing error : Malformed string");
                        crate::error!(
                            "Module protocol could not parse variable {name}'s data content {text}"
                        );
                    } else {
                        let reason = serde_json::from_str::<serde_json::Value>(text)
                            .err()
                            .map(|e| e.to_string())
                            .unwrap_or_default();
                        crate::info!("Failed to parse JSON '{text}' for module protocol: {reason}");
                    }
                    continue;
                };
                let var = Variable::new(value, dtype, Origin::Agent).with_tags(module_tags());
                ctx.vars.put("default", &scope, name, var);
            }
            _ => result.other_lines.push(line.to_string()),
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_lines() {
        let mut ctx = EvalContext::default();
        let out = "=v=hello\n@l= { \"a\", \"b,c\" }\n%d={\"k\":1}\n+cls\n^context=other\n^meta=t1,t2\n=w=x\nnoise\n";
        let r = apply(&mut ctx, "mod", out, &mut |_, _| Err("no".into()));
        assert_eq!(
            ctx.vars.get("default", "mod", "v").unwrap().value,
            Value::str("hello")
        );
        assert_eq!(
            ctx.vars.get("default", "mod", "l").unwrap().value,
            Value::List(vec!["a".into(), "b,c".into()])
        );
        assert!(
            ctx.vars
                .get("default", "mod", "d")
                .unwrap()
                .value
                .as_data()
                .is_some()
        );
        assert!(ctx.classes.is_defined("cls"));
        let w = ctx.vars.get("default", "other", "w").unwrap();
        assert_eq!(w.tags, vec!["t1", "t2", "source=module"]);
        assert!(ctx.vars.get("default", "mod", "v").unwrap().tags.is_empty());
        assert_eq!(r.other_lines, vec!["noise"]);
    }

    #[test]
    fn cancelled_classes_leave_the_bundles_on_the_stack_too() {
        let mut ctx = EvalContext::default();
        ctx.push_frame(super::super::context::Frame::new("default", "b", "agent"));
        let soft = || ClassInfo::soft(Origin::Agent, vec![]);
        ctx.define_class("local_one", true, soft());
        ctx.define_class("global_one", false, soft());
        ctx.define_class("kept", true, soft());
        apply(&mut ctx, "mod", "-local_one, global_one\n", &mut |_, _| {
            Err("no".into())
        });
        assert!(!ctx.class_is_set("local_one"));
        assert!(!ctx.class_is_set("global_one"));
        assert!(ctx.class_is_set("kept"));
    }
}
