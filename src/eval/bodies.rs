//! Resolving a body reference (`perms => m("644")`, `classes => results`)
//! into its attributes: parameters bound, class guards applied, and
//! `inherit_from` parents merged underneath.

use super::call::FnError;
use super::context::EvalContext;
use crate::load::PolicySet;
use crate::syntax::ast::Rval;
use crate::values::value::Value;
use indexmap::IndexMap;

/// A body's attributes after parameters and guards were applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResolvedBody {
    pub name: String,
    pub attrs: IndexMap<String, Value>,
    /// The arguments given to the bundles the body names (`service_bundle
    /// => b("x")`), by attribute; the name itself is in `attrs`.
    pub bundle_args: IndexMap<String, Vec<Value>>,
}

impl ResolvedBody {
    /// Whether this is a promise type's default body (see [`default_body`]):
    /// cf-agent copies its attributes into the promise, which then has them
    /// but not the body.
    pub fn is_default(&self) -> bool {
        self.name
            .strip_prefix(DEFAULT_BODY_NAMESPACE)
            .is_some_and(|r| r.starts_with(':'))
    }

    pub fn scalar(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).and_then(Value::as_scalar)
    }

    /// A bundle the body names, with its arguments.
    pub fn bundle_call(&self, name: &str) -> Option<(String, Vec<Value>)> {
        let bundle = self.scalar(name)?.to_string();
        let args = self.bundle_args.get(name).cloned().unwrap_or_default();
        Some((bundle, args))
    }

    pub fn list(&self, name: &str) -> Vec<String> {
        match self.attrs.get(name) {
            Some(Value::List(l)) => l.clone(),
            Some(Value::Scalar(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    }
}

/// Body types whose name is also the attribute that refers to them.
pub const BODY_ATTRIBUTES: &[&str] = &[
    "acl",
    "action",
    "changes",
    "classes",
    "contain",
    "copy_from",
    "database_server",
    "delete",
    "delete_select",
    "depth_search",
    "edit_defaults",
    "edit_field",
    "environment_interface",
    "environment_resources",
    "file_select",
    "fsattrs",
    "insert_select",
    "link_from",
    "location",
    "match_value",
    "mount",
    "package_method",
    "package_module",
    "password",
    "perms",
    "printfile",
    "process_count",
    "process_select",
    "rename",
    "replace_with",
    "report_data_select",
    "select_region",
    "service_method",
    "volume",
];

/// Attributes that name a bundle to call.
pub const BUNDLE_ATTRIBUTES: &[&str] = &[
    "usebundle",
    "edit_line",
    "edit_xml",
    "home_bundle",
    "service_bundle",
];

/// How deep `inherit_from` chains may go before we call it a cycle.
const MAX_INHERIT_DEPTH: usize = 16;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BodyError {
    #[error("undefined body '{name}' of type '{body_type}'")]
    Undefined { body_type: String, name: String },
    #[error("body '{name}' takes {expected} arguments, got {got}")]
    Arity {
        name: String,
        expected: usize,
        got: usize,
    },
    #[error("body '{0}' inherits from itself (or the chain is too deep)")]
    InheritCycle(String),
    /// `inherit_from` gives a body other arguments than it takes; cf-agent
    /// stops the run there, where a promise naming a body wrongly only
    /// fails.
    #[error(
        "body '{parent}' takes {expected} arguments, but '{child}' inherits from it with {got}"
    )]
    InheritArity {
        child: String,
        parent: String,
        expected: usize,
        got: usize,
    },
    #[error("an argument is not resolved yet")]
    Defer,
    #[error("{0}")]
    Function(String),
}

impl BodyError {
    /// Whether cf-agent stops the whole run on this error: a broken
    /// `inherit_from` chain is, a body a promise names wrongly is not.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            BodyError::InheritCycle(_) | BodyError::InheritArity { .. }
        )
    }
}

impl From<FnError> for BodyError {
    fn from(e: FnError) -> BodyError {
        match e {
            FnError::Defer => BodyError::Defer,
            FnError::Failed(m) | FnError::Quiet(m) => BodyError::Function(m),
        }
    }
}

/// The name and arguments an rval refers to: `name` or `name(args)`.
///
/// Arguments with unresolved variables are passed as written, as cf-agent
/// does (a method is called with the text `$(x)`, a classes body defines
/// classes named after it). An unresolved name is kept as written when
/// `literal_name` is set (a method then names a bundle that does not
/// exist); otherwise the reference waits for a later pass.
pub fn reference_parts(
    ctx: &mut EvalContext,
    r: &Rval,
    literal_name: bool,
) -> Result<(String, Vec<Value>), BodyError> {
    let name_of = |e: super::context::Expanded| {
        if e.unresolved && !literal_name {
            Err(BodyError::Defer)
        } else {
            Ok(e.text)
        }
    };
    match r {
        Rval::Symbol(i) => Ok((i.name.as_str().to_owned(), Vec::new())),
        Rval::String(s) => Ok((name_of(ctx.expand(&s.value))?, Vec::new())),
        Rval::NakedVar { text, .. } => Ok((name_of(ctx.expand(text))?, Vec::new())),
        Rval::Call(c) => {
            let name = name_of(ctx.expand(&c.name.name))?;
            let mut args = Vec::with_capacity(c.args.len());
            for a in &c.args {
                // Unresolved arguments, `$(match.N)` of edit promises among
                // them, pass on as written and bind later if they can.
                args.push(ctx.eval_rval(a)?.value);
            }
            Ok((name, args))
        }
        Rval::List { .. } => Err(BodyError::Function(
            "a list cannot name a body or bundle".into(),
        )),
    }
}

/// Resolves a body of `body_type` named by `r`, in the current context.
pub fn resolve_body(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    body_type: &str,
    r: &Rval,
) -> Result<ResolvedBody, BodyError> {
    let (name, args) = reference_parts(ctx, r, false)?;
    let mut out = ResolvedBody {
        name: name.clone(),
        ..Default::default()
    };
    resolve_into(ctx, policy, body_type, &name, args, &mut out, 0)?;
    Ok(out)
}

/// Resolves the body of `body_type` with this name and no arguments, as
/// body common control names one (`package_module => "apt_get"`).
pub fn resolve_named_body(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    body_type: &str,
    name: &str,
) -> Result<ResolvedBody, BodyError> {
    let mut out = ResolvedBody {
        name: name.to_string(),
        ..Default::default()
    };
    resolve_into(ctx, policy, body_type, name, Vec::new(), &mut out, 0)?;
    Ok(out)
}

/// The body cf-agent gives a promise of type `promise_type` that names no
/// body of `body_type`: `bodydefault:PROMISETYPE_BODYTYPE`, when the policy
/// defines one (00_basics/03_bodies/default_files_action.cf).
pub fn default_body(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    promise_type: &str,
    body_type: &str,
) -> Option<Result<ResolvedBody, BodyError>> {
    // Asked for every promise: the name is made only for a policy with
    // default bodies at all.
    if !policy.has_bodies_in(DEFAULT_BODY_NAMESPACE) {
        return None;
    }
    let name = format!("{DEFAULT_BODY_NAMESPACE}:{promise_type}_{body_type}");
    policy.body(DEFAULT_BODY_NAMESPACE, body_type, &name)?;
    Some(resolve_named_body(ctx, policy, body_type, &name))
}

/// The namespace whose bodies are the defaults of promise types.
const DEFAULT_BODY_NAMESPACE: &str = "bodydefault";

fn resolve_into(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    body_type: &str,
    name: &str,
    args: Vec<Value>,
    out: &mut ResolvedBody,
    depth: usize,
) -> Result<(), BodyError> {
    if depth > MAX_INHERIT_DEPTH {
        return Err(BodyError::InheritCycle(name.to_string()));
    }
    let ns = ctx.current_ns().to_string();
    let Some((_, body)) = policy.body(&ns, body_type, name) else {
        return Err(BodyError::Undefined {
            body_type: body_type.to_string(),
            name: name.to_string(),
        });
    };
    if body.params.len() != args.len() {
        return Err(BodyError::Arity {
            name: name.to_string(),
            expected: body.params.len(),
            got: args.len(),
        });
    }
    let params: crate::values::hash::FastMap<String, Value> = body
        .params
        .iter()
        .map(|p| p.name.as_str().to_owned())
        .zip(args)
        .collect();
    let saved = ctx.frame_mut().map(|f| f.body_params.replace(params));
    let result = (|| {
        // The parent first, so this body's own attributes override it.
        for a in body.attributes_named("inherit_from") {
            if !guard_holds(ctx, &a.guard.expr) {
                continue;
            }
            let (parent, pargs) = reference_parts(ctx, &a.attr.value, false)?;
            if parent == name {
                return Err(BodyError::InheritCycle(name.to_string()));
            }
            match resolve_into(ctx, policy, body_type, &parent, pargs, out, depth + 1) {
                Err(BodyError::Arity {
                    name: p,
                    expected,
                    got,
                }) if p == parent => {
                    return Err(BodyError::InheritArity {
                        child: name.to_string(),
                        parent: p,
                        expected,
                        got,
                    });
                }
                r => r?,
            }
        }
        for a in &body.attributes {
            if a.attr.name.name == "inherit_from" || !guard_holds(ctx, &a.guard.expr) {
                continue;
            }
            // A bundle named inside a body (service_bundle) is a name, not a
            // function call.
            let value = if BUNDLE_ATTRIBUTES.contains(&a.attr.name.name.as_str()) {
                let (bundle, args) = reference_parts(ctx, &a.attr.value, false)?;
                out.bundle_args
                    .insert(a.attr.name.name.as_str().to_owned(), args);
                Value::Scalar(bundle)
            } else {
                ctx.eval_rval(&a.attr.value)?.value
            };
            out.attrs
                .insert(a.attr.name.name.as_str().to_owned(), value);
        }
        Ok(())
    })();
    if let (Some(f), Some(prev)) = (ctx.frame_mut(), saved) {
        f.body_params = prev;
    }
    result
}

fn guard_holds(ctx: &mut EvalContext, expr: &str) -> bool {
    let e = ctx.expand(expr);
    !e.unresolved && ctx.eval_class_expr(e.text.trim()).unwrap_or(false)
}
