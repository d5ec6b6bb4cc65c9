//! The promise dependency graph (after Puppet's catalog relationships):
//! `depends_on` naming another promise's `handle`, the classes one promise
//! sets (a `classes:` promise, or a `classes` body's outcome classes) and
//! another's guard, `if` or `unless` reads, and `methods` calling bundles.
//!
//! It is read from the policy after pre-evaluation, so a handle or class
//! name made of variables counts when those variables resolve by then.
//! `agent --graph` prints it as DOT; every run (and `-c`) first checks the
//! `depends_on` edges for a cycle, whose promises could never run, and
//! refuses the policy naming the shortest cycle once, with each promise's
//! file:line.

use crate::eval::bodies::{reference_parts, resolve_body};
use crate::eval::{EvalContext, Frame};
use crate::load::PolicySet;
use crate::syntax::ast::{Promise, Rval};
use crate::syntax::classexpr::ClassExpr;
use crate::values::Value;
use crate::values::canon::canonify_class;
use crate::values::digraph::{Adjacency, reachability, shortest_cycle};

/// The outcome classes a `classes` body can define.
const OUTCOME_ATTRIBUTES: &[&str] = &[
    "promise_kept",
    "promise_repaired",
    "repair_failed",
    "repair_denied",
    "repair_timeout",
];

/// One promise as the graph sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub namespace: String,
    pub bundle: String,
    pub promise_type: String,
    pub promiser: String,
    pub file: String,
    pub line: usize,
    pub handle: Option<String>,
    pub depends_on: Vec<String>,
    /// Classes this promise defines (by being a classes promise, or through
    /// its classes body).
    pub sets: Vec<String>,
    /// Classes its guard, `if`/`ifvarclass` and `unless` read.
    pub reads: Vec<String>,
    /// The bundle a methods promise calls.
    pub calls: Option<String>,
}

/// Why one promise comes after another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeKind {
    DependsOn(String),
    Class(String),
}

#[derive(Debug, Default)]
pub struct PromiseGraph {
    pub nodes: Vec<Node>,
    /// Bundles in the order they are written: (namespace, name, type, file).
    pub bundles: Vec<(String, String, String, String)>,
}

/// A `depends_on` cycle, as the promises on it in order: each depends on
/// the one before it, and the first on the last.
#[derive(Debug, Clone, PartialEq)]
pub struct DependsCycle(pub Vec<Node>);

impl std::fmt::Display for DependsCycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "these promises depend on each other in a cycle (depends_on), so none of them could \
             ever run; the policy is refused before anything runs:"
        )?;
        let n = self.0.len();
        for (i, p) in self.0.iter().enumerate() {
            let before = &self.0[(i + n - 1) % n];
            write!(
                f,
                "\n      {}:{}: {} promise '{}' (handle '{}') depends on '{}'",
                p.file,
                p.line,
                p.promise_type,
                p.promiser,
                p.handle.as_deref().unwrap_or(""),
                before.handle.as_deref().unwrap_or("")
            )?;
        }
        Ok(())
    }
}

impl PromiseGraph {
    /// Reads every promise of every bundle. With `full` false only handles
    /// and `depends_on` are evaluated (all a cycle check needs).
    pub fn build(ctx: &mut EvalContext, policy: &PolicySet, full: bool) -> PromiseGraph {
        let mut g = PromiseGraph::default();
        // A cycle needs a `depends_on`: without one anywhere, the cycle
        // check has nothing to find, and evaluating every handle (2,726
        // frames and nodes for a large policy) is skipped. A handle that
        // is not a plain string (a call) is still evaluated as before, in
        // case evaluating it says something.
        if !full && !may_depend(policy) {
            return g;
        }
        for (file, bundle) in policy.bundles() {
            g.bundles.push((
                bundle.namespace.clone(),
                bundle.name.name.as_str().to_owned(),
                bundle.bundle_type.name.as_str().to_owned(),
                file.source.path.clone(),
            ));
            ctx.push_frame(Frame::new(
                &bundle.namespace,
                &bundle.name.name,
                &bundle.bundle_type.name,
            ));
            for section in &bundle.sections {
                let ptype = section.promise_type.name.as_str();
                if matches!(ptype, "vars" | "meta" | "defaults") {
                    continue;
                }
                for p in &section.promises {
                    let handle = p.attribute("handle").and_then(|a| string_of(ctx, &a.value));
                    let depends_on = p
                        .attribute("depends_on")
                        .map(|a| strings_of(ctx, &a.value))
                        .unwrap_or_default();
                    if !full && handle.is_none() && depends_on.is_empty() {
                        continue;
                    }
                    let mut node = Node {
                        namespace: bundle.namespace.clone(),
                        bundle: bundle.name.name.as_str().to_owned(),
                        promise_type: ptype.to_string(),
                        promiser: ctx.expand_promiser(&p.promiser.value).text,
                        file: file.source.path.clone(),
                        line: file.source.line_of(p.promiser.span.start),
                        handle,
                        depends_on,
                        sets: Vec::new(),
                        reads: Vec::new(),
                        calls: None,
                    };
                    if full {
                        describe_classes(ctx, policy, ptype, p, &mut node);
                        if ptype == "methods" {
                            node.calls = match p.attribute("usebundle") {
                                Some(a) => {
                                    reference_parts(ctx, &a.value, true).ok().map(|(n, _)| n)
                                }
                                None => Some(node.promiser.clone()),
                            };
                        }
                    }
                    g.nodes.push(node);
                }
            }
            ctx.pop_frame();
        }
        g
    }

    /// Every edge between promises, from the one that comes first.
    pub fn edges(&self) -> Vec<(usize, usize, EdgeKind)> {
        let mut out = Vec::new();
        for (to, n) in self.nodes.iter().enumerate() {
            for d in &n.depends_on {
                for (from, m) in self.nodes.iter().enumerate() {
                    if m.handle.as_deref() == Some(d.as_str()) {
                        out.push((from, to, EdgeKind::DependsOn(d.clone())));
                    }
                }
            }
            for c in &n.reads {
                for (from, m) in self.nodes.iter().enumerate() {
                    if from != to && m.sets.contains(c) {
                        out.push((from, to, EdgeKind::Class(c.clone())));
                    }
                }
            }
        }
        out
    }

    /// The shortest `depends_on` cycle of each group of promises that
    /// depend on each other, each reported once.
    pub fn depends_cycles(&self) -> Vec<DependsCycle> {
        let mut adj: Adjacency = vec![Vec::new(); self.nodes.len()];
        for (from, to, kind) in self.edges() {
            if matches!(kind, EdgeKind::DependsOn(_)) && !adj[from].contains(&to) {
                adj[from].push(to);
            }
        }
        // Only a promise that depends on another can be on a cycle, and a
        // path between two such promises passes through such promises
        // alone: the reachability table, quadratic, covers those (over
        // every promise with a handle it took 7.4 MB for 2,726 handles).
        let dependents: Vec<usize> = (0..adj.len()).filter(|&v| !adj[v].is_empty()).collect();
        let mut position = vec![None; adj.len()];
        for (i, &v) in dependents.iter().enumerate() {
            position[v] = Some(i);
        }
        let adj: Adjacency = dependents
            .iter()
            .map(|&v| adj[v].iter().filter_map(|&t| position[t]).collect())
            .collect();
        let reach = reachability(&adj);
        let mut seen = vec![false; adj.len()];
        let mut out = Vec::new();
        for v in 0..adj.len() {
            if seen[v] || !reach[v][v] {
                continue;
            }
            // The strongly connected group of v, and the cycle within it.
            let members: Vec<usize> = (0..adj.len())
                .filter(|&u| u == v || (reach[v][u] && reach[u][v]))
                .collect();
            for &m in &members {
                seen[m] = true;
            }
            let sub: Adjacency = members
                .iter()
                .map(|&m| {
                    adj[m]
                        .iter()
                        .filter_map(|t| members.iter().position(|x| x == t))
                        .collect()
                })
                .collect();
            if let Some(c) = shortest_cycle(&sub) {
                out.push(DependsCycle(
                    c.into_iter()
                        .map(|i| self.nodes[dependents[members[i]]].clone())
                        .collect(),
                ));
            }
        }
        out
    }
}

/// Whether a cycle check of the policy has anything to evaluate: some
/// promise the graph reads has a `depends_on`, or a handle that is more
/// than a string to expand.
fn may_depend(policy: &PolicySet) -> bool {
    policy.bundles().any(|(_, bundle)| {
        bundle
            .sections
            .iter()
            .filter(|s| !matches!(s.promise_type.name.as_str(), "vars" | "meta" | "defaults"))
            .flat_map(|s| &s.promises)
            .any(|p| {
                p.attribute("depends_on").is_some()
                    || p.attribute("handle")
                        .is_some_and(|h| !matches!(h.value, Rval::String(_)))
            })
    })
}

fn string_of(ctx: &mut EvalContext, r: &Rval) -> Option<String> {
    match ctx.eval_rval(r) {
        Ok(e) if !e.unresolved => e.value.as_scalar().map(str::to_string),
        _ => None,
    }
}

/// The resolved strings of a list or scalar; items that do not resolve
/// yet are left out.
fn strings_of(ctx: &mut EvalContext, r: &Rval) -> Vec<String> {
    let items: Vec<&Rval> = match r {
        Rval::List { items, .. } => items.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for item in items {
        match ctx.eval_rval(item) {
            Ok(e) if !e.unresolved => match e.value {
                Value::Scalar(s) => out.push(s),
                Value::List(l) => out.extend(l),
                Value::Data(_) => {}
            },
            _ => {}
        }
    }
    out
}

/// The classes a promise sets and reads.
fn describe_classes(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    ptype: &str,
    p: &Promise,
    node: &mut Node,
) {
    if ptype == "classes" {
        let name = ctx.expand_promiser(&p.promiser.value);
        if !name.unresolved {
            node.sets.push(crate::values::canon::canonify(&name.text));
        }
    }
    if let Some(a) = p.attribute("classes")
        && let Ok(body) = resolve_body(ctx, policy, "classes", &a.value)
    {
        for attr in OUTCOME_ATTRIBUTES {
            for c in body.list(attr) {
                if !c.contains("$(") && !c.contains("${") {
                    node.sets.push(canonify_class(&c));
                }
            }
        }
    }
    let mut exprs: Vec<String> = vec![ctx.expand(&p.guard.expr).text];
    for a in &p.attributes {
        if matches!(a.name.name.as_str(), "if" | "ifvarclass" | "unless")
            && let Some(s) = string_of(ctx, &a.value)
        {
            exprs.push(s);
        }
    }
    for e in exprs {
        if let Ok(parsed) = ClassExpr::parse(e.trim()) {
            let mut names = Vec::new();
            parsed.names(&mut names);
            for n in names {
                let n = n.strip_prefix("default:").unwrap_or(&n).to_string();
                if n != "any" && !node.reads.contains(&n) {
                    node.reads.push(n);
                }
            }
        }
    }
    node.sets.dedup();
}
