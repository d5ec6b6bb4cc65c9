//! Introspection: the defined classes, the variables' and classes' tags,
//! the bundles of the policy, the state of bundles, the call stack, and
//! the version tests (`cf_version_*`, answered for CFEngine 3.21.0).

use super::args::{Args, value_to_json};
use super::{FnError, FnResult, FnSpec, class_result, int_value, spec};
use crate::eval::EvalContext;
use crate::eval::context::scalar_text;
use crate::values::Value;
use crate::values::value::Tags;
use serde_json::{Map, Value as Json};

pub static FUNCTIONS: &[FnSpec] = &[
    spec("classesmatching", 0, None, classesmatching),
    spec("classmatch", 0, None, classmatch),
    spec("countclassesmatching", 0, None, countclassesmatching),
    spec("getclassmetatags", 1, Some(2), getclassmetatags),
    spec("getvariablemetatags", 1, Some(2), getvariablemetatags),
    spec("bundlesmatching", 1, None, bundlesmatching),
    spec("bundlestate", 1, Some(1), bundlestate),
    spec("datastate", 0, Some(0), datastate),
    spec("callstack_callers", 0, Some(0), callstack_callers),
    spec("callstack_promisers", 0, Some(0), callstack_promisers),
    spec("cf_version_maximum", 1, Some(1), cf_version_maximum),
    spec("cf_version_minimum", 1, Some(1), cf_version_minimum),
    spec("cf_version_after", 1, Some(1), cf_version_after),
    spec("cf_version_before", 1, Some(1), cf_version_before),
    spec("cf_version_at", 1, Some(1), cf_version_at),
    spec("cf_version_between", 2, Some(2), cf_version_between),
];

// ---- classes ---------------------------------------------------------------

/// Every defined class as policy names it (`ns:name` outside the default
/// namespace), with its tags: first those local to the bundle being
/// evaluated, latest defined first, then the global ones, sorted.
///
/// cf-agent builds the list by prepending the global matches, then the
/// local ones: a bundle's classes come out in reverse definition order
/// (it keeps a few in a plain array), before the global ones, which come
/// in hash-table order; that order we do not imitate and sort instead
/// (02_classes/02_functions/iprange.cf compares the local order).
fn all_classes(ctx: &EvalContext) -> Vec<(String, Tags)> {
    let mut global: Vec<(String, Tags)> = ctx
        .classes
        .iter()
        .map(|(k, i)| (k.clone(), i.tags.clone()))
        .collect();
    global.sort();
    let mut out: Vec<(String, Tags)> = Vec::new();
    if let Some(f) = ctx.frame() {
        for (k, i) in f.local_classes.iter().rev() {
            if !global.iter().any(|(n, _)| n == k) {
                out.push((k.clone(), i.tags.clone()));
            }
        }
    }
    out.extend(global);
    out
}

/// The classes whose name fully matches the first argument (default `.*`)
/// and, when tag patterns follow, that carry a tag matching one of them.
/// An invalid pattern matches nothing, as in cf-agent (which logs it).
fn matching_classes(ctx: &mut EvalContext, p: &Args) -> Result<Vec<String>, FnError> {
    let pattern = p.opt_str(0, "regex")?.unwrap_or(".*");
    let Ok(re) = ctx.regexes.get(pattern) else {
        crate::error!(
            "function '{}': invalid regular expression '{pattern}'",
            p.name
        );
        return Ok(Vec::new());
    };
    let mut tag_res = Vec::new();
    for i in 1..p.len() {
        let t = p.str(i, "tag_regex")?;
        match ctx.regexes.get(t) {
            Ok(r) => tag_res.push(r),
            Err(e) => crate::error!("function '{}': {e}", p.name),
        }
    }
    let tags_wanted = p.len() > 1;
    let prefix = re.literal_prefix();
    let wanted = |name: &str, tags: &[String]| {
        name.starts_with(prefix)
            && re.is_full_match(name)
            && (!tags_wanted
                || tag_res
                    .iter()
                    .any(|r| tags.iter().any(|t| r.is_full_match(t))))
    };
    // In the order of `all_classes`, choosing before copying anything.
    let mut global: Vec<&String> = ctx
        .classes
        .iter()
        .filter(|(k, i)| wanted(k, &i.tags))
        .map(|(k, _)| k)
        .collect();
    global.sort();
    let mut out: Vec<String> = Vec::new();
    if let Some(f) = ctx.frame() {
        for (k, i) in f.local_classes.iter().rev() {
            if ctx.classes.get(k).is_none() && wanted(k, &i.tags) {
                out.push(k.clone());
            }
        }
    }
    out.extend(global.into_iter().cloned());
    Ok(out)
}

/// `classesmatching(regex, tag...)`, in the order of `all_classes`.
fn classesmatching(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("classesmatching", a);
    Ok(Value::List(matching_classes(ctx, &p)?))
}

fn classmatch(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("classmatch", a);
    Ok(class_result(!matching_classes(ctx, &p)?.is_empty()))
}

fn countclassesmatching(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("countclassesmatching", a);
    Ok(int_value(matching_classes(ctx, &p)?.len() as i64))
}

/// The tags, or with a key only the values of its `key=value` tags.
fn select_tags(tags: &[String], key: Option<&str>) -> Vec<String> {
    match key {
        None => tags.to_vec(),
        Some(k) => tags
            .iter()
            .filter_map(|t| t.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
            .map(str::to_string)
            .collect(),
    }
}

fn getclassmetatags(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getclassmetatags", a);
    let name = p.str(0, "class")?;
    let key = p.opt_str(1, "tag_key")?;
    let bare = name.strip_prefix("default:").unwrap_or(name);
    let entry = crate::eval::context::local_class_entry(bare);
    ctx.classes.reads.note_read(|| entry);
    let local = ctx.frame().and_then(|f| f.local_classes.get(bare).cloned());
    let info = local.or_else(|| ctx.classes.get(bare).cloned());
    match info {
        Some(i) => Ok(Value::List(select_tags(&i.tags, key))),
        None => Err(FnError::Quiet(format!("class '{name}' is not defined"))),
    }
}

fn getvariablemetatags(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("getvariablemetatags", a);
    let name = p.str(0, "variable")?;
    let key = p.opt_str(1, "tag_key")?;
    match ctx.lookup_variable(name) {
        Some(v) => Ok(Value::List(select_tags(&v.tags, key))),
        None => Err(FnError::Quiet(format!("variable '{name}' is not defined"))),
    }
}

// ---- bundles and state ----------------------------------------------------

/// `bundlesmatching(regex, tag...)`: the qualified names of the policy's
/// bundles that match, last defined first (cf-agent's order). Tags are
/// the bundle's `meta: "tags"`, known once the bundle has run.
fn bundlesmatching(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("bundlesmatching", a);
    let re = p.regex(ctx, 0, "regex")?;
    let mut tag_res = Vec::new();
    for i in 1..p.len() {
        tag_res.push(p.regex(ctx, i, "tag_regex")?);
    }
    let mut out = Vec::new();
    // The policy's bundles grow as files load: no read of a store names them.
    ctx.vars.reads.note_unnamed();
    for b in ctx.policy_bundles.iter().rev() {
        let qualified = format!("{}:{}", b.ns, b.name);
        if !re.is_full_match(&qualified) {
            continue;
        }
        if !tag_res.is_empty() {
            let tags: Vec<String> = ctx
                .vars
                .get(&b.ns, &format!("{}_meta", b.name), "tags")
                .map(|v| match &v.value {
                    Value::List(l) => l.clone(),
                    Value::Scalar(s) => s.split(',').map(str::to_string).collect(),
                    Value::Data(d) => crate::eval::rval::json_scalars(d),
                })
                .unwrap_or_default();
            // cf-agent 3.21 means every tag regex to match a tag, but
            // checks the first one as many times as there are: only the
            // first counts.
            if !tags.iter().any(|t| tag_res[0].is_full_match(t)) {
                continue;
            }
        }
        if !out.contains(&qualified) {
            out.push(qualified);
        }
    }
    Ok(Value::List(out))
}

/// The variables of one scope as an object with sorted keys.
fn scope_object(ctx: &EvalContext, ns: &str, scope: &str) -> Map<String, Json> {
    let mut vars: Vec<(&String, Json)> = ctx
        .vars
        .iter()
        .filter(|(k, _, _)| k.ns == ns && k.scope == scope)
        .map(|(_, n, v)| (n, value_to_json(&v.value)))
        .collect();
    vars.sort_by(|a, b| a.0.cmp(b.0));
    vars.into_iter().map(|(n, v)| (n.clone(), v)).collect()
}

/// `bundlestate(bundle)`: the variables of a bundle as a data container.
/// cf-agent compares the argument with each variable's scope written as
/// `datastate()` writes it, bare in the default namespace: so `init`
/// names default's `init` but `default:init` names nothing. A bundle
/// without variables (or unknown) fails without a message, as there.
fn bundlestate(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("bundlestate", a);
    let name = p.str(0, "bundle")?;
    let (ns, bundle) = match name.split_once(':') {
        Some(("default", _)) => {
            return Err(p.fail_quietly(format!(
                "'{name}': the default namespace's bundles are named without it"
            )));
        }
        Some((n, b)) => (n.to_string(), b.to_string()),
        None => ("default".to_string(), name.to_string()),
    };
    let obj = scope_object(ctx, &ns, &bundle);
    if obj.is_empty() {
        return Err(p.fail_quietly(format!("bundle '{name}' has no variables")));
    }
    Ok(Value::data(Json::Object(obj)))
}

/// `datastate()`: every class (as `true`) and every variable by scope
/// (`ns:bundle` outside the default namespace), keys sorted.
fn datastate(ctx: &mut EvalContext, _: &[Value]) -> FnResult {
    Ok(Value::data(datastate_json(ctx)))
}

/// The state of the run as `datastate()` gives it; also the data of a
/// mustache template that names none.
pub fn datastate_json(ctx: &EvalContext) -> Json {
    let classes: Map<String, Json> = all_classes(ctx)
        .into_iter()
        .map(|(n, _)| (n, Json::Bool(true)))
        .collect();
    let mut scopes: Vec<(String, String)> = ctx
        .vars
        .iter()
        .map(|(k, _, _)| (k.ns.clone(), k.scope.clone()))
        .collect();
    scopes.sort();
    scopes.dedup();
    let mut named: Vec<(String, Json)> = scopes
        .into_iter()
        .map(|(ns, scope)| {
            let key = if ns == "default" {
                scope.clone()
            } else {
                format!("{ns}:{scope}")
            };
            (key, Json::Object(scope_object(ctx, &ns, &scope)))
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Map::new();
    out.insert("classes".into(), Json::Object(classes));
    out.insert("vars".into(), Json::Object(named.into_iter().collect()));
    Json::Object(out)
}

// ---- call stack -------------------------------------------------------------

/// `callstack_promisers()`: the promisers of the promises that called the
/// bundles on the stack (the `methods` promises), outermost first.
fn callstack_promisers(ctx: &mut EvalContext, _: &[Value]) -> FnResult {
    let n = ctx.frames.len();
    let out: Vec<String> = ctx.frames[..n.saturating_sub(1)]
        .iter()
        .filter_map(|f| f.this.get("promiser").and_then(scalar_text))
        .collect();
    Ok(Value::List(out))
}

/// `callstack_callers()`: the frames of the stack, outermost first, each
/// with its `depth` (from 0) and `frame` (counting down to 1), as cf-agent
/// numbers them: a `bundle` frame per bundle (its name, namespace and
/// type), followed by a `promise` frame with the promiser when that
/// bundle is evaluating a promise. cf-agent also has promise-type and
/// iteration frames and embeds each bundle's whole syntax tree; we do not.
fn callstack_callers(ctx: &mut EvalContext, _: &[Value]) -> FnResult {
    let mut entries: Vec<Map<String, Json>> = Vec::new();
    for f in &ctx.frames {
        let mut bundle = Map::new();
        bundle.insert("bundleType".into(), Json::String(f.bundle_type.clone()));
        bundle.insert("name".into(), Json::String(f.bundle.to_string()));
        bundle.insert("namespace".into(), Json::String(f.ns.to_string()));
        let mut e = Map::new();
        e.insert("bundle".into(), Json::Object(bundle));
        e.insert("type".into(), Json::String("bundle".into()));
        entries.push(e);
        if let Some(promiser) = f.this.get("promiser").and_then(scalar_text) {
            let mut p = Map::new();
            p.insert("promiser".into(), Json::String(promiser));
            p.insert("type".into(), Json::String("promise".into()));
            entries.push(p);
        }
    }
    let total = entries.len();
    let out = entries
        .into_iter()
        .enumerate()
        .map(|(depth, mut e)| {
            e.insert("depth".into(), Json::from(depth));
            e.insert("frame".into(), Json::from(total - depth));
            Json::Object(e)
        })
        .collect();
    Ok(Value::data(Json::Array(out)))
}

// ---- versions ----------------------------------------------------------------

/// The version whose behaviour we follow, as numbers.
const VERSION: [i64; 3] = [3, 21, 0];

/// A C `%d`: optional leading white space, an optional sign, digits.
fn scan_int(s: &str) -> Option<(i64, &str)> {
    let t = s.trim_start();
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1, &t[1..]),
        Some(b'+') => (1, &t[1..]),
        _ => (1, t),
    };
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let n: i64 = body[..digits].parse().unwrap_or(i64::MAX);
    Some((sign * n, &body[digits..]))
}

/// Up to three components of a version, read as cf-agent reads them
/// (`sscanf("%d.%d.%d")`): reading stops at the first component that is
/// not a number (`3.x` is `3`); a version without even the first fails.
fn parse_version(p: &Args, s: &str) -> Result<Vec<i64>, FnError> {
    let Some((first, mut rest)) = scan_int(s) else {
        return Err(p.fail(format!(
            "format of version comparison string '{s}' is incorrect"
        )));
    };
    let mut out = vec![first];
    while out.len() < 3 {
        match rest.strip_prefix('.').and_then(scan_int) {
            Some((n, r)) => {
                out.push(n);
                rest = r;
            }
            None => break,
        }
    }
    Ok(out)
}

/// Our version compared with a (possibly partial) version: only the
/// components given count.
fn compare_version(given: &[i64]) -> std::cmp::Ordering {
    VERSION[..given.len().min(3)].cmp(given)
}

fn version_test(name: &'static str, a: &[Value], ok: fn(std::cmp::Ordering) -> bool) -> FnResult {
    let p = Args::new(name, a);
    let v = parse_version(&p, p.str(0, "version")?)?;
    Ok(class_result(ok(compare_version(&v))))
}

fn cf_version_maximum(_: &mut EvalContext, a: &[Value]) -> FnResult {
    version_test("cf_version_maximum", a, |o| o.is_le())
}

fn cf_version_minimum(_: &mut EvalContext, a: &[Value]) -> FnResult {
    version_test("cf_version_minimum", a, |o| o.is_ge())
}

fn cf_version_after(_: &mut EvalContext, a: &[Value]) -> FnResult {
    version_test("cf_version_after", a, |o| o.is_gt())
}

fn cf_version_before(_: &mut EvalContext, a: &[Value]) -> FnResult {
    version_test("cf_version_before", a, |o| o.is_lt())
}

fn cf_version_at(_: &mut EvalContext, a: &[Value]) -> FnResult {
    version_test("cf_version_at", a, |o| o.is_eq())
}

fn cf_version_between(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("cf_version_between", a);
    let low = parse_version(&p, p.str(0, "lower")?)?;
    let high = parse_version(&p, p.str(1, "upper")?)?;
    Ok(class_result(
        compare_version(&low).is_ge() && compare_version(&high).is_le(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Frame;
    use crate::eval::classes::ClassInfo;
    use crate::values::Origin;

    fn s(v: &[&str]) -> Vec<Value> {
        v.iter().map(|x| Value::str(*x)).collect()
    }

    #[test]
    fn call_stack_outermost_first() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        c.push_frame(Frame::new("default", "main", "agent"));
        c.set_this("promiser", Value::str("call sub"));
        c.push_frame(Frame::new("default", "sub", "agent"));
        assert_eq!(
            callstack_promisers(&mut c, &[]),
            Ok(Value::List(vec!["call sub".into()]))
        );
        let d = callstack_callers(&mut c, &[]).unwrap();
        let a = d.as_data().unwrap();
        assert_eq!(a[0]["bundle"]["name"], "main");
        assert_eq!(a[0]["frame"], 3);
        assert_eq!(a[1]["promiser"], "call sub");
        assert_eq!(a[2]["bundle"]["name"], "sub");
        assert_eq!(a[2]["depth"], 2);
    }

    #[test]
    fn versions_compare_given_components() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let t = |c: &mut EvalContext, f: FnImpl, v: &[&str]| f(c, &s(v));
        type FnImpl = super::super::FnImpl;
        let yes = Ok(class_result(true));
        let no = Ok(class_result(false));
        assert_eq!(t(&mut c, cf_version_at, &["3.21"]), yes);
        assert_eq!(t(&mut c, cf_version_at, &["3.x"]), yes);
        assert_eq!(t(&mut c, cf_version_after, &["3.21"]), no);
        assert_eq!(t(&mut c, cf_version_after, &["3.20"]), yes);
        assert_eq!(t(&mut c, cf_version_before, &["3.21.1"]), yes);
        assert_eq!(t(&mut c, cf_version_between, &["3.20", "3.22"]), yes);
        assert_eq!(t(&mut c, cf_version_between, &["3.22", "3.20"]), no);
        assert!(t(&mut c, cf_version_minimum, &["x"]).is_err());
        assert_eq!(t(&mut c, cf_version_minimum, &["-1"]), yes);
        assert_eq!(t(&mut c, cf_version_at, &[" 3.21"]), yes);
        assert_eq!(t(&mut c, cf_version_at, &["3..21"]), yes);
        assert!(t(&mut c, cf_version_at, &["v3"]).is_err());
        assert!(t(&mut c, cf_version_minimum, &[""]).is_err());
    }

    #[test]
    fn classes_match_by_name_and_tag() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        c.push_frame(Frame::new("default", "b", "agent"));
        c.define_class(
            "t_one",
            false,
            ClassInfo::soft(Origin::Agent, vec!["k=v".into()]),
        );
        c.define_class("t_two", true, ClassInfo::soft(Origin::Agent, vec![]));
        c.define_class("t_three", true, ClassInfo::soft(Origin::Agent, vec![]));
        // Local classes first, latest defined first, as cf-agent lists
        // them; then the global ones.
        assert_eq!(
            classesmatching(&mut c, &s(&["t_.*"])),
            Ok(Value::List(vec![
                "t_three".into(),
                "t_two".into(),
                "t_one".into()
            ]))
        );
        assert_eq!(
            classesmatching(&mut c, &s(&["t_.*", "k=.*"])),
            Ok(Value::List(vec!["t_one".into()]))
        );
        assert_eq!(classesmatching(&mut c, &s(&["("])), Ok(Value::List(vec![])));
        assert_eq!(
            getclassmetatags(&mut c, &s(&["t_one", "k"])),
            Ok(Value::List(vec!["v".into()]))
        );
        assert!(getclassmetatags(&mut c, &s(&["nope"])).is_err());
        assert_eq!(
            countclassesmatching(&mut c, &s(&["t_t.*"])),
            Ok(Value::str("2"))
        );
    }
}
