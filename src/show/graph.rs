//! `--graph`: the promise graph (see `agent::graph`) in Graphviz DOT.

use crate::agent::graph::{EdgeKind, PromiseGraph};
use std::fmt::Write as _;

/// The graph in Graphviz DOT: one cluster per bundle, one node per
/// promise, edges labelled by the handle or class that links them;
/// `depends_on` handles no promise has are drawn as missing, and
/// cycles in red.
pub fn to_dot(graph: &PromiseGraph) -> String {
    let mut out = String::from(
        "digraph promises {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n  edge [fontname=\"monospace\", fontsize=9];\n",
    );
    let in_cycle: Vec<(String, usize)> = graph
        .depends_cycles()
        .into_iter()
        .flat_map(|c| c.0.into_iter().map(|n| (n.file, n.line)))
        .collect();
    for (bi, (ns, name, btype, file)) in graph.bundles.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{bi} {{");
        let _ = writeln!(
            out,
            "    label=\"{}\";",
            esc(&format!("bundle {btype} {ns}:{name} ({})", short(file)))
        );
        let _ = writeln!(
            out,
            "    b{bi} [label=\"{}\", shape=folder];",
            esc(&format!("{ns}:{name}"))
        );
        for (i, n) in graph.nodes.iter().enumerate() {
            if &n.namespace == ns && &n.bundle == name && &n.file == file {
                let mut label = format!(
                    "{}: {}\\n{}:{}",
                    esc(&n.promise_type),
                    esc(&n.promiser),
                    esc(short(&n.file)),
                    n.line
                );
                if let Some(h) = &n.handle {
                    let _ = write!(label, "\\nhandle {}", esc(h));
                }
                let _ = writeln!(out, "    p{i} [label=\"{label}\"];");
            }
        }
        out.push_str("  }\n");
    }
    for (from, to, kind) in graph.edges() {
        let cyclic = matches!(kind, EdgeKind::DependsOn(_))
            && in_cycle.contains(&(graph.nodes[from].file.clone(), graph.nodes[from].line))
            && in_cycle.contains(&(graph.nodes[to].file.clone(), graph.nodes[to].line));
        let (label, style) = match kind {
            EdgeKind::DependsOn(h) => (format!("depends_on {h}"), ""),
            EdgeKind::Class(c) => (format!("class {c}"), ", style=dashed"),
        };
        let color = if cyclic { ", color=red" } else { "" };
        let _ = writeln!(
            out,
            "  p{from} -> p{to} [label=\"{}\"{style}{color}];",
            esc(&label)
        );
    }
    let mut missing: Vec<&str> = Vec::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        for d in &n.depends_on {
            if !graph
                .nodes
                .iter()
                .any(|m| m.handle.as_deref() == Some(d.as_str()))
            {
                if !missing.contains(&d.as_str()) {
                    missing.push(d);
                    let _ = writeln!(
                        out,
                        "  \"missing:{}\" [label=\"no promise has handle {}\", shape=note, color=red];",
                        esc(d),
                        esc(d)
                    );
                }
                let _ = writeln!(
                    out,
                    "  \"missing:{}\" -> p{i} [label=\"depends_on {}\", color=red];",
                    esc(d),
                    esc(d)
                );
            }
        }
        if let Some(callee) = &n.calls {
            let (cns, cname) = crate::load::split_ns(&n.namespace, callee);
            if let Some(bi) = graph
                .bundles
                .iter()
                .position(|(ns, name, _, _)| ns == cns && name == cname)
            {
                let _ = writeln!(out, "  p{i} -> b{bi} [label=\"usebundle\", style=bold];");
            }
        }
    }
    out.push_str("}\n");
    out
}

/// The file name alone, for labels.
fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
