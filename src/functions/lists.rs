//! List functions over collecting arguments: selection, ordering, set
//! operations, mapping, statistics, and variable queries.

use super::args::{Args, collected_node, element_texts, value_to_arc_json};
use super::sorting::{self, SortMode};
use super::{FnError, FnResult, FnSpec, class_result, raw, spec};
use crate::eval::EvalContext;
use crate::syntax::ast::FnCall;
use crate::values::Value;
use crate::values::canon::canonify;
use crate::values::hash::{TableEntry, oat_hash, table_order, var_ref_hash};
use crate::values::json;
use crate::values::number::parse_c_double;
use crate::values::refs::VarRef;
use serde_json::Value as Json;
use std::borrow::Cow;
use std::collections::HashSet;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("filter", 5, Some(5), filter).pure(),
    spec("grep", 2, Some(2), grep).pure(),
    spec("getindices", 1, Some(1), getindices).pure(),
    spec("getvalues", 1, Some(1), getvalues).pure(),
    spec("length", 1, Some(1), length).pure(),
    spec("nth", 2, Some(2), nth).pure(),
    spec("sort", 1, Some(2), sort).pure(),
    spec("reverse", 1, Some(1), reverse).pure(),
    spec("shuffle", 2, Some(2), shuffle),
    spec("unique", 1, Some(1), unique).pure(),
    spec("difference", 2, Some(2), difference).pure(),
    spec("intersection", 2, Some(2), intersection).pure(),
    spec("some", 2, Some(2), some).pure(),
    spec("every", 2, Some(2), every).pure(),
    spec("none", 2, Some(2), none).pure(),
    spec("sublist", 3, Some(3), sublist).pure(),
    raw("maplist", 2, Some(2), &[0], maplist).pure(),
    raw("maparray", 2, Some(2), &[0], maparray).pure(),
    raw("mapdata", 3, Some(3), &[1], mapdata),
    spec("max", 2, Some(2), max).pure(),
    spec("min", 2, Some(2), min).pure(),
    spec("sum", 1, Some(1), sum).pure(),
    spec("product", 1, Some(1), product).pure(),
    spec("mean", 1, Some(1), mean).pure(),
    spec("variance", 1, Some(1), variance).pure(),
    spec("expandrange", 2, Some(2), expandrange).pure(),
    spec("irange", 2, Some(2), irange).pure(),
    spec("rrange", 2, Some(2), rrange).pure(),
    spec("variablesmatching", 1, None, variablesmatching),
    spec(
        "variablesmatching_as_data",
        1,
        None,
        variablesmatching_as_data,
    ),
];

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l.clone(),
        other => element_texts(other, false)
            .into_iter()
            .map(Cow::into_owned)
            .collect(),
    }
}

fn filter(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("filter", a);
    let pattern = args.str(0, "filter")?;
    let v = args.collect(ctx, 1, "list")?;
    let is_regex = args.boolean(2, "is_regex")?;
    let invert = args.boolean(3, "invert")?;
    let max = args.int(4, "max")?.max(0) as usize;
    let re = if is_regex {
        Some(args.regex(ctx, 0, "filter")?)
    } else {
        None
    };
    let out: Vec<String> = element_texts(&v, false)
        .into_iter()
        .filter(|s| {
            let m = match &re {
                Some(re) => re.is_full_match(s),
                None => s == pattern,
            };
            m != invert
        })
        .take(max)
        .map(Cow::into_owned)
        .collect();
    Ok(Value::List(out))
}

fn grep(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("grep", a);
    let re = args.regex(ctx, 0, "regex")?;
    let v = args.collect(ctx, 1, "list")?;
    Ok(Value::List(
        element_texts(&v, false)
            .into_iter()
            .filter(|s| re.is_full_match(s))
            .map(Cow::into_owned)
            .collect(),
    ))
}

/// The variable of `getindices` and `getvalues`; `None` when it is not
/// defined, which has no indices or values: an empty list, as cf-agent
/// gives (the MPF's def.cf relies on it).
fn defined_or_none(ctx: &EvalContext, args: &Args) -> Result<Option<Value>, FnError> {
    match args.collect_or_scalar(ctx, 0, "variable") {
        Err(FnError::Defer) => Ok(None),
        r => r.map(Some),
    }
}

fn getindices(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    fn indices(d: &Json) -> Vec<String> {
        match d {
            Json::Object(m) => m.keys().cloned().collect(),
            Json::Array(arr) => (0..arr.len()).map(|i| i.to_string()).collect(),
            _ => Vec::new(),
        }
    }
    // A part of a container (`d[k]`) is read in place, not copied.
    if let Some(d) = collected_node(ctx, a.first()) {
        return Ok(Value::List(indices(d)));
    }
    let Some(v) = defined_or_none(ctx, &Args::new("getindices", a))? else {
        return Ok(Value::List(Vec::new()));
    };
    Ok(Value::List(match &v {
        Value::Data(d) => indices(d),
        _ => Vec::new(),
    }))
}

fn getvalues(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    // Every primitive below the top, depth first; nulls skipped.
    fn walk(j: &Json, out: &mut Vec<String>) {
        match j {
            Json::Array(a) => a.iter().for_each(|v| walk(v, out)),
            Json::Object(m) => m.values().for_each(|v| walk(v, out)),
            prim => out.extend(json::expansion_text(prim)),
        }
    }
    let values = |d: &Json| {
        let mut out = Vec::new();
        walk(d, &mut out);
        out
    };
    // A part of a container (`d[k]`) is read in place, not copied.
    if let Some(d) = collected_node(ctx, a.first()) {
        return Ok(Value::List(values(d)));
    }
    let Some(v) = defined_or_none(ctx, &Args::new("getvalues", a))? else {
        return Ok(Value::List(Vec::new()));
    };
    Ok(Value::List(match &v {
        Value::Scalar(s) => vec![s.clone()],
        Value::List(l) => l.clone(),
        Value::Data(d) => values(d),
    }))
}

fn length(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    // A part of a container (`d[k]`) is measured in place, not copied.
    if let Some(d) = collected_node(ctx, a.first()) {
        let n = match d {
            Json::Object(m) => m.len(),
            Json::Array(arr) => arr.len(),
            _ => 1,
        };
        return Ok(Value::str(n.to_string()));
    }
    let args = Args::new("length", a);
    let v = args.collect(ctx, 0, "variable")?;
    let n = match &v {
        Value::Scalar(_) => 1,
        Value::List(l) => l.len(),
        Value::Data(d) => match d.as_ref() {
            Json::Object(m) => m.len(),
            Json::Array(arr) => arr.len(),
            _ => 1,
        },
    };
    Ok(Value::str(n.to_string()))
}

fn nth(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("nth", a);
    let v = args.collect(ctx, 0, "list")?;
    let key = args.str(1, "position")?;
    let index = |len: usize| -> Result<usize, FnError> {
        let i: i64 = key
            .trim()
            .parse()
            .map_err(|_| args.fail(format!("position '{key}' is not an integer")))?;
        let i = if i < 0 { len as i64 + i } else { i };
        if i < 0 || i as usize >= len {
            return Err(args.fail_quietly(format!("position {key} is out of range")));
        }
        Ok(i as usize)
    };
    match &v {
        Value::List(l) => Ok(Value::str(l[index(l.len())?].clone())),
        Value::Scalar(s) => {
            index(1)?;
            Ok(Value::str(s.clone()))
        }
        Value::Data(d) => {
            let elem = match d.as_ref() {
                Json::Array(arr) => &arr[index(arr.len())?],
                Json::Object(m) => m
                    .get(key)
                    .ok_or_else(|| args.fail_quietly(format!("no key '{key}'")))?,
                _ => return Err(args.fail("the container is not an array or object")),
            };
            json::primitive_text(elem)
                .map(|t| Value::str(t.into_owned()))
                // Neither a missing key nor a container there is
                // reported by cf-agent 3.21.
                .ok_or_else(|| args.fail_quietly(format!("the element at '{key}' is a container")))
        }
    }
}

// ---- ordering -------------------------------------------------------------

const SORT_MODES: &[&str] = &["lex", "int", "real", "IP", "ip", "MAC", "mac"];

fn sort_mode(args: &Args, i: usize) -> Result<SortMode, FnError> {
    Ok(match args.opt_option(i, "mode", SORT_MODES, "lex")? {
        "lex" => SortMode::Lex,
        "int" => SortMode::Int,
        "real" => SortMode::Real,
        "IP" | "ip" => SortMode::Ip,
        _ => SortMode::Mac,
    })
}

fn sort(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("sort", a);
    let v = args.collect(ctx, 0, "list")?;
    let mode = sort_mode(&args, 1)?;
    Ok(Value::List(sorting::sort(strings(&v), mode)))
}

/// `min` or `max` (`want_max`), chosen as cf-agent chooses: an item
/// replaces the minimum so far unless that one is less than it (so the
/// last of equal items wins), and replaces the maximum so far when that
/// one is less than it (the first wins).
fn extreme(name: &'static str, a: &[Value], ctx: &EvalContext, want_max: bool) -> FnResult {
    let args = Args::new(name, a);
    let v = args.collect(ctx, 0, "list")?;
    let mode = sort_mode(&args, 1)?;
    // Reals of a container compare and come back as `%.2f`, as cf-agent
    // reads them.
    let items: Vec<String> = match &v {
        Value::Data(d) => {
            let members: Box<dyn Iterator<Item = &Json>> = match d.as_ref() {
                Json::Array(arr) => Box::new(arr.iter()),
                Json::Object(m) => Box::new(m.values()),
                other => Box::new(std::iter::once(other)),
            };
            members.filter_map(json::expansion_text).collect()
        }
        other => strings(other),
    };
    let mut best: Option<&String> = None;
    for it in &items {
        best = match best {
            Some(b) if want_max && !sorting::less(mode, b, it) => Some(b),
            Some(b) if !want_max && sorting::less(mode, b, it) => Some(b),
            _ => Some(it),
        };
    }
    best.map(|b| Value::str(b.clone()))
        .ok_or_else(|| args.fail_quietly("the list is empty"))
}

fn max(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    extreme("max", a, ctx, true)
}

fn min(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    extreme("min", a, ctx, false)
}

fn reverse(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let v = Args::new("reverse", a).collect(ctx, 0, "list")?;
    let mut items = strings(&v);
    items.reverse();
    Ok(Value::List(items))
}

/// glibc's `rand()` (the additive feedback generator behind `srand`), so
/// that `shuffle` orders a list as cf-agent does for the same seed.
pub struct GlibcRand {
    r: Vec<u32>,
}

impl GlibcRand {
    pub fn new(seed: u32) -> GlibcRand {
        let seed = if seed == 0 { 1 } else { seed };
        let mut r: Vec<u32> = Vec::with_capacity(400);
        r.push(seed);
        for i in 1..31 {
            let prev = r[i - 1] as i32 as i64;
            let hi = prev / 127_773;
            let lo = prev % 127_773;
            let mut word = 16_807 * lo - 2_836 * hi;
            if word < 0 {
                word += 2_147_483_647;
            }
            r.push(word as u32);
        }
        for i in 31..34 {
            r.push(r[i - 31]);
        }
        let mut g = GlibcRand { r };
        for _ in 34..344 {
            g.step();
        }
        g
    }

    fn step(&mut self) -> u32 {
        let n = self.r.len();
        let v = self.r[n - 31].wrapping_add(self.r[n - 3]);
        self.r.push(v);
        // Only the last 34 values are needed.
        if self.r.len() > 256 {
            self.r.drain(..self.r.len() - 34);
        }
        v
    }

    pub fn next(&mut self) -> u32 {
        self.step() >> 1
    }
}

fn shuffle(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("shuffle", a);
    let v = args.collect(ctx, 0, "list")?;
    let seed = args.str(1, "seed")?;
    let mut items = strings(&v);
    if items.len() > 1 {
        let mut rng = GlibcRand::new(oat_hash(seed));
        for i in (1..items.len()).rev() {
            let j = rng.next() as usize % (i + 1);
            items.swap(i, j);
        }
    }
    // cf-agent builds the result by prepending.
    items.reverse();
    Ok(Value::List(items))
}

fn unique_strings(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::with_capacity(items.len());
    items
        .into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect()
}

fn unique(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let v = Args::new("unique", a).collect(ctx, 0, "list")?;
    Ok(Value::List(unique_strings(strings(&v))))
}

fn set_op(name: &'static str, ctx: &EvalContext, a: &[Value], keep_common: bool) -> FnResult {
    let args = Args::new(name, a);
    let base = args.collect(ctx, 0, "list1")?;
    let other = args.collect(ctx, 1, "list2")?;
    let other: HashSet<String> = strings(&other).into_iter().collect();
    Ok(Value::List(unique_strings(
        strings(&base)
            .into_iter()
            .filter(|s| other.contains(s) == keep_common)
            .collect(),
    )))
}

fn difference(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    set_op("difference", ctx, a, false)
}

fn intersection(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    set_op("intersection", ctx, a, true)
}

fn count_matching(
    name: &'static str,
    ctx: &mut EvalContext,
    a: &[Value],
) -> Result<(usize, usize), FnError> {
    let args = Args::new(name, a);
    let re = args.regex(ctx, 0, "regex")?;
    let v = args.collect(ctx, 1, "list")?;
    let items = element_texts(&v, false);
    let n = items.iter().filter(|s| re.is_full_match(s)).count();
    Ok((n, items.len()))
}

fn some(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let (n, _) = count_matching("some", ctx, a)?;
    Ok(class_result(n > 0))
}

fn every(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let (n, total) = count_matching("every", ctx, a)?;
    // cf-agent: an empty list has no element that matches, so not every.
    Ok(class_result(n == total && total > 0))
}

fn none(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let (n, _) = count_matching("none", ctx, a)?;
    Ok(class_result(n == 0))
}

fn sublist(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("sublist", a);
    let v = args.collect(ctx, 0, "list")?;
    let head = args.option(1, "head_or_tail", &["head", "tail"])? == "head";
    let n = args.int(2, "max")?.max(0) as usize;
    let items = strings(&v);
    let n = n.min(items.len());
    Ok(Value::List(if head {
        items[..n].to_vec()
    } else {
        items[items.len() - n..].to_vec()
    }))
}

// ---- mapping ----------------------------------------------------------------

/// Expands `pattern` with `this` (and `this.k`, `this.v`...) bound.
fn expand_with(ctx: &mut EvalContext, pattern: &str, binds: Vec<(&str, Value)>) -> String {
    let mark = ctx.bindings_len();
    // Iteration bindings are keyed by the reference as written.
    for (name, v) in binds {
        ctx.bind(name.to_string(), v);
    }
    let out = ctx.expand(pattern).text;
    ctx.truncate_bindings(mark);
    out
}

fn maplist(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("maplist", a);
    let pattern = args.str(0, "pattern")?;
    let v = args.collect(ctx, 1, "list")?;
    let items = strings(&v);
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        out.push(expand_with(ctx, pattern, vec![("this", Value::Scalar(it))]));
    }
    Ok(Value::List(out))
}

/// `maplist` whose pattern is a function call: cf-agent evaluates such a
/// pattern late, once per element with `$(this)` bound, so
/// `maplist(regex_replace($(this), ":.*", "", "g"), l)` maps each element
/// (and an empty list maps to nothing, calling nothing).
pub(crate) fn maplist_call(ctx: &mut EvalContext, pattern: &FnCall, list: &Value) -> FnResult {
    let v = super::args::collect(ctx, list)?;
    let mut out = Vec::new();
    for it in strings(&v) {
        let mark = ctx.bindings_len();
        ctx.bind("this".to_string(), Value::Scalar(it));
        let r = ctx.call(pattern);
        ctx.truncate_bindings(mark);
        let e = r?;
        if e.unresolved {
            return Err(FnError::Defer);
        }
        match e.value {
            Value::Scalar(s) => out.push(s),
            other => out.extend(strings(&other)),
        }
    }
    Ok(Value::List(out))
}

/// One element `maparray` and `mapdata` visit: its key (`this.k`), its
/// value (`this.v`) and, for a primitive inside an object under the key,
/// that object's key for it (`this.k[1]`).
struct Visit {
    k: String,
    k1: Option<String>,
    v: String,
    /// Inside a nested container: equal results are kept once.
    nested: bool,
}

/// What `maparray` and `mapdata` visit, as cf-agent does: an array is
/// read as an object keyed by position; each primitive under a key once,
/// and each primitive of a container under a key (deeper containers
/// skipped).
fn visits(v: &Value) -> Vec<Visit> {
    let j: Json = match v {
        Value::Data(d) => d.as_ref().clone(),
        Value::List(l) => Json::Array(l.iter().cloned().map(Json::String).collect()),
        Value::Scalar(s) => Json::Array(vec![Json::String(s.clone())]),
    };
    let pairs: Vec<(String, &Json)> = match &j {
        Json::Object(m) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Json::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for (k, e) in pairs {
        let inner: Vec<(Option<&String>, &Json)> = match e {
            Json::Object(m) => m.iter().map(|(k1, v)| (Some(k1), v)).collect(),
            Json::Array(a) => a.iter().map(|v| (None, v)).collect(),
            prim => {
                if let Some(t) = json::primitive_text(prim) {
                    out.push(Visit {
                        k: k.clone(),
                        k1: None,
                        v: t.into_owned(),
                        nested: false,
                    });
                }
                continue;
            }
        };
        for (k1, e2) in inner {
            if let Some(t) = json::primitive_text(e2).filter(|_| !e2.is_array() && !e2.is_object())
            {
                out.push(Visit {
                    k: k.clone(),
                    k1: k1.cloned(),
                    v: t.into_owned(),
                    nested: true,
                });
            }
        }
    }
    out
}

/// The pattern of `maparray` or `mapdata` expanded for one element, as
/// cf-agent expands it: once as the function's argument and once more,
/// with `this.k`, `this.v` (and `this.k[1]`) bound, their `"` escaped in
/// `json` mode. `None` when a reference to one of them is still left.
fn map_one(ctx: &mut EvalContext, pattern: &str, e: &Visit, json_mode: bool) -> Option<String> {
    let esc = |s: &str| {
        if json_mode {
            s.replace('"', "\\\"")
        } else {
            s.to_string()
        }
    };
    let mark = ctx.bindings_len();
    ctx.bind("this.k".to_string(), Value::Scalar(esc(&e.k)));
    ctx.bind("this.v".to_string(), Value::Scalar(esc(&e.v)));
    if let Some(k1) = &e.k1 {
        ctx.bind("this.k[1]".to_string(), Value::Scalar(esc(k1)));
    }
    let once = ctx.expand(pattern).text;
    let twice = ctx.expand(&once).text;
    ctx.truncate_bindings(mark);
    let mut left = vec!["$(this.k)", "${this.k}", "$(this.v)", "${this.v}"];
    if e.k1.is_some() {
        left.extend(["$(this.k[1])", "${this.k[1]}"]);
    }
    (!left.iter().any(|r| twice.contains(r))).then_some(twice)
}

/// The texts `maparray` and `mapdata` make of `v`: one per element,
/// those of a nested container once each.
fn map_all(
    args: &Args,
    ctx: &mut EvalContext,
    pattern: &str,
    v: &Value,
    json_mode: bool,
) -> Result<Vec<String>, FnError> {
    let mut out: Vec<String> = Vec::new();
    for e in visits(v) {
        let Some(s) = map_one(ctx, pattern, &e, json_mode) else {
            return Err(args.fail_quietly("the pattern still names this.k or this.v once expanded"));
        };
        if !(e.nested && out.contains(&s)) {
            out.push(s);
        }
    }
    Ok(out)
}

fn maparray(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("maparray", a);
    let pattern = args.str(0, "pattern")?;
    let v = args.collect(ctx, 1, "array")?;
    Ok(Value::List(map_all(&args, ctx, pattern, &v, false)?))
}

fn mapdata(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("mapdata", a);
    let mode = args.option(0, "conversion", &["none", "canonify", "json", "json_pipe"])?;
    let pattern = args.str(1, "pattern")?;
    let v = args.collect(ctx, 2, "data")?;
    if mode == "json_pipe" {
        return json_pipe(ctx, &args, pattern, &v);
    }
    let mut out = Vec::new();
    for s in map_all(&args, ctx, pattern, &v, mode == "json")? {
        match mode {
            // Text that is not JSON is left out, as cf-agent leaves it.
            "json" => match json::parse(&s) {
                Ok(j) => out.push(j),
                Err(e) => crate::debug!("mapdata: '{s}' is not JSON ({e}); left out"),
            },
            "canonify" => out.push(Json::String(canonify(&s))),
            _ => out.push(Json::String(s)),
        }
    }
    Ok(Value::data(Json::Array(out)))
}

/// `mapdata("json_pipe", command, data)`: runs the command (no shell)
/// through the run's host with the data as JSON on its standard input, and
/// gives the JSON values of its output, in order: lines are gathered until
/// they parse as one value, as cf-agent reads them. Standard error is not
/// read; an exit code other than 0 is only noted. Like every function that
/// runs a program, it waits while only checking a policy and is refused in
/// the sandbox.
fn json_pipe(ctx: &mut EvalContext, args: &Args, command: &str, v: &Value) -> FnResult {
    if ctx.settings.sandbox {
        return Err(args.fail("the sandbox runs no program (json_pipe)"));
    }
    if ctx.settings.no_side_effects {
        return Err(FnError::Defer);
    }
    let command = ctx.expand(command).text;
    let input = json::write_pretty(&super::args::value_to_json(v));
    let f = super::exec::pipe(
        ctx.host(),
        &command,
        input.into_bytes(),
        super::exec::DEFAULT_TIMEOUT,
    )
    .map_err(|e| {
        args.fail(format!(
            "failed to get output from 'json_pipe' execution of '{command}': {e}"
        ))
    })?;
    if f.code != Some(0) {
        crate::debug!("'{command}' returned with exit code {:?}", f.code);
    }
    if f.output.is_empty() {
        return Err(args.fail(format!(
            "failed to get output from 'json_pipe' execution of '{command}'"
        )));
    }
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in f.output.lines() {
        if !pending.is_empty() {
            pending.push('\n');
        }
        pending.push_str(line);
        if let Ok(j) = json::parse(&pending) {
            out.push(j);
            pending.clear();
        }
    }
    Ok(Value::data(Json::Array(out)))
}

// ---- statistics ---------------------------------------------------------------

/// The primitive elements of the list as cf-agent's folding functions read
/// them (`sscanf("%lf")`): what is no number counts as 0; nulls and nested
/// containers are left out. No elements at all is a failure cf-agent does
/// not report, for `mean` and `variance` which have no value then.
fn numbers(name: &'static str, ctx: &EvalContext, a: &[Value]) -> Result<Vec<f64>, FnError> {
    let args = Args::new(name, a);
    let v = args.collect(ctx, 0, "list")?;
    let n: Vec<f64> = element_texts(&v, false)
        .iter()
        .map(|s| parse_c_double(s))
        .collect();
    if n.is_empty() && matches!(name, "mean" | "variance") {
        return Err(args.fail_quietly("the list is empty"));
    }
    Ok(n)
}

fn real(v: f64) -> Value {
    Value::str(format!("{v:.6}"))
}

fn sum(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    // Folded from +0.0: Rust's `sum` of nothing is -0.0, printed "-0.000000".
    Ok(real(numbers("sum", ctx, a)?.iter().fold(0.0, |s, x| s + x)))
}

fn product(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    Ok(real(numbers("product", ctx, a)?.iter().product()))
}

fn mean(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let n = numbers("mean", ctx, a)?;
    Ok(real(n.iter().sum::<f64>() / n.len() as f64))
}

fn variance(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let n = numbers("variance", ctx, a)?;
    if n.len() == 1 {
        return Ok(real(0.0));
    }
    let m = n.iter().sum::<f64>() / n.len() as f64;
    let ss: f64 = n.iter().map(|x| (x - m) * (x - m)).sum();
    Ok(real(ss / (n.len() - 1) as f64))
}

// ---- ranges -----------------------------------------------------------------

/// `expandrange("x[1-3]y", step)`: one item per number of the first range.
fn expandrange(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("expandrange", a);
    let t = args.str(0, "template")?;
    let step = args.int(1, "step")?.max(1);
    let range = t.find('[').and_then(|open| {
        let close = open + t[open..].find(']')?;
        let (lo, hi) = t[open + 1..close].split_once('-')?;
        Some((
            open,
            close,
            lo.trim().parse::<i64>().ok()?,
            hi.trim().parse::<i64>().ok()?,
        ))
    });
    let Some((open, close, lo, hi)) = range else {
        return Ok(Value::List(vec![t.to_string()]));
    };
    let mut out = Vec::new();
    let mut i = lo;
    while i <= hi && out.len() < 1_000_000 {
        out.push(format!("{}{i}{}", &t[..open], &t[close + 1..]));
        i += step;
    }
    Ok(Value::List(out))
}

fn irange(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("irange", a);
    // cf-agent reads the word `now` as the time (the MPF's days_older_than
    // gives irange(ago(...), now)).
    let int = |i: usize, param: &str| match args.str(i, param) {
        Ok("now") => Ok(crate::host::clock::now_secs()),
        _ => args.int(i, param),
    };
    let lo = int(0, "start")?;
    let hi = int(1, "end")?;
    Ok(Value::str(format!("{},{}", lo.min(hi), lo.max(hi))))
}

fn rrange(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("rrange", a);
    let lo = args.real(0, "start")?;
    let hi = args.real(1, "end")?;
    Ok(Value::str(format!("{:.6},{:.6}", lo.min(hi), lo.max(hi))))
}

// ---- variables ----------------------------------------------------------------

/// Every variable whose full name (`ns:scope.name`) matches the regex and
/// which carries, for each tag regex, a matching tag, in the order
/// cf-agent's walk over its variable table meets them (`table_order`).
fn matching_variables(
    name: &'static str,
    ctx: &mut EvalContext,
    a: &[Value],
) -> Result<Vec<(String, Value)>, FnError> {
    let args = Args::new(name, a);
    // An invalid pattern matches nothing, as in cf-agent (which logs it).
    let re = match args.regex(ctx, 0, "regex") {
        Ok(re) => re,
        Err(FnError::Failed(m)) => {
            crate::error!("{m}");
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut tag_res = Vec::new();
    for i in 1..a.len() {
        tag_res.push(args.regex(ctx, i, "tag")?);
    }
    let count = ctx.vars.global_table_len();
    // The name is built into one buffer, and only for variables whose tags
    // match: most of the table fails the (cheaper) tag test first.
    let mut full = String::new();
    let prefix = re.literal_prefix();
    let mut out: Vec<(TableEntry, String, Value)> = ctx
        .vars
        .iter()
        .filter_map(|(scope, n, var)| {
            if !tag_res
                .iter()
                .all(|t| var.tags.iter().any(|tag| t.is_full_match(tag)))
            {
                return None;
            }
            let parts = [&*scope.ns, ":", &*scope.scope, ".", n];
            if !parts_start_with(&parts, prefix) {
                return None;
            }
            full.clear();
            for part in parts {
                full.push_str(part);
            }
            if !re.is_full_match(&full) {
                return None;
            }
            let full = full.clone();
            let r = VarRef::parse(n);
            let place = ctx.vars.place(&scope.ns, &scope.scope, n)?;
            let entry = TableEntry {
                hash: var_ref_hash(&scope.ns, &scope.scope, r.base, &r.indices()),
                seq: place.seq,
                load: place.load,
            };
            Some((entry, full, var.value.clone()))
        })
        .collect();
    out.sort_by(|x, y| table_order(&x.0, &y.0, count));
    Ok(out.into_iter().map(|(_, n, v)| (n, v)).collect())
}

/// Whether the text made of `parts` in a row starts with `prefix`.
pub(crate) fn parts_start_with(parts: &[&str], mut prefix: &str) -> bool {
    for part in parts {
        if prefix.is_empty() {
            return true;
        }
        let n = part.len().min(prefix.len());
        if part.as_bytes()[..n] != prefix.as_bytes()[..n] {
            return false;
        }
        prefix = &prefix[n..];
    }
    prefix.is_empty()
}

/// The names come out in the reverse of the table's order, as cf-agent
/// prepends each to its result.
fn variablesmatching(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    Ok(Value::List(
        matching_variables("variablesmatching", ctx, a)?
            .into_iter()
            .rev()
            .map(|(n, _)| n)
            .collect(),
    ))
}

fn variablesmatching_as_data(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let mut m = serde_json::Map::new();
    for (n, v) in matching_variables("variablesmatching_as_data", ctx, a)? {
        m.insert(n, value_to_arc_json(v).as_ref().clone());
    }
    Ok(Value::data(Json::Object(m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No attribute of CFEngine 3.21 takes an rrange, so no differential
    /// case can show one; the text is cf-agent's `%lf,%lf`, low end first.
    #[test]
    fn ranges_are_low_then_high() {
        let mut ctx = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let r = rrange(&mut ctx, &[Value::str("2.25"), Value::str("-1")]).unwrap();
        assert_eq!(r, Value::str("-1.000000,2.250000"));
        let i = irange(&mut ctx, &[Value::str("10"), Value::str("1k")]).unwrap();
        assert_eq!(i, Value::str("10,1000"));
    }

    #[test]
    fn glibc_rand_sequence() {
        let mut r = GlibcRand::new(1);
        assert_eq!(
            [r.next(), r.next(), r.next()],
            [1_804_289_383, 846_930_886, 1_681_692_777]
        );
        let mut r = GlibcRand::new(42);
        assert_eq!(
            [r.next(), r.next(), r.next()],
            [71_876_166, 708_592_740, 1_483_128_881]
        );
        let mut r = GlibcRand::new(3_977_453_403);
        assert_eq!(
            [r.next(), r.next(), r.next()],
            [1_266_641_131, 653_295_532, 534_569_542]
        );
        // Many draws keep working after the buffer is trimmed.
        let mut r = GlibcRand::new(7);
        for _ in 0..10_000 {
            r.next();
        }
    }

    #[test]
    fn shuffle_like_cfengine() {
        let mut ctx = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let l = Value::List(
            ["b", "a", "b", "", "c"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
        let r = shuffle(&mut ctx, &[l, Value::str("seed")]).unwrap();
        assert_eq!(
            r,
            Value::List(
                ["c", "b", "b", "a", ""]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            )
        );
    }
}
