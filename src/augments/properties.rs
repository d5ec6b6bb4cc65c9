//! Hierarchical properties (after Rudder's node properties): JSON values
//! defined in a global layer, in named groups of hosts, and for the host
//! itself, merged from the most general definition to the most specific.
//!
//! The definitions live in augments, through syntax cf-promises already
//! accepts (it skips unknown keys of `def.json`, and `data:properties.*`
//! is an ordinary CMDB variable):
//!
//! ```json
//! "properties": {
//!   "global": { "dns": { "servers": ["10.0.0.1"], "search": "example.com" } },
//!   "groups": {
//!     "debian":   { "condition": "debian", "properties": { "dns": { "search": "deb.example.com" } } },
//!     "debian10": { "condition": "debian_10", "parent": "debian", "properties": { ... } },
//!     "dc1":      { "condition": "dc1", "overrides": ["debian"], "properties": { ... } }
//!   }
//! }
//! ```
//!
//! - `global` (in `def.json` and the files its `augments` key names; a
//!   later file's global layer refines an earlier one's) is the most general
//!   layer;
//! - a group applies to this host when its `condition` (a class expression)
//!   holds; membership is decided by each group's own condition;
//! - `parent` (a name or a list) says the group refines that group;
//!   `overrides` (a name or a list) says the group wins over those groups,
//!   which is how two branches of the hierarchy are ordered;
//! - the host's own layer is every variable `host_specific.json` defines in
//!   the bundle `properties` of its `data` namespace (`"vars":
//!   {"properties.dns": {...}}`), and it wins over every group.
//!
//! For each property, the groups of this host that define it are ordered by
//! the graph of `parent` and `overrides` edges. Two of them with no path
//! between them are an error naming the property, both groups and the edge
//! that would settle it; a cycle among the groups is an error that prints
//! the cycle. Nothing is guessed: with an error, no property is defined and
//! the run stops. Otherwise the values are deep-merged from general to
//! specific (objects key by key, anything else replaced) into the data
//! container `default:properties.NAME`, tagged `source=properties` and
//! `property_layers=global>group>...>host`.

use crate::eval::EvalContext;
use crate::eval::vars::Variable;
use crate::values::lenient_json::{self as json, Json, Node};
use crate::values::value::{AugmentsLayer, DataType, Origin, Value};
use indexmap::IndexMap;
use serde_json::Value as J;
use std::fmt;
use thiserror::Error;

/// The bundle (in the default namespace) that holds the merged properties.
pub const RESULT_BUNDLE: &str = "properties";
/// The namespace and bundle of the host's own layer in `host_specific.json`.
pub const HOST_NS: &str = "data";
pub const HOST_BUNDLE: &str = "properties";
/// The tag on every merged property.
pub const TAG: &str = "source=properties";

/// Where a definition is written: file, position (0 when unknown) and the
/// JSON key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub key: String,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}:{}", self.file, self.line, self.column)
        } else {
            f.write_str(&self.file)
        }
    }
}

/// Something wrong with the property definitions. Any of these stops the
/// run: a property whose order is not decided must not get a value.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum PropertyError {
    #[error("{site}: {message}")]
    Shape { site: Site, message: String },
    #[error("the property group '{name}' is defined twice: at {first} and at {second}")]
    DuplicateGroup {
        name: String,
        first: Site,
        second: Site,
    },
    #[error("{site}: the group '{group}' names an unknown group '{name}' in its \"{attribute}\"")]
    UnknownGroup {
        group: String,
        attribute: String,
        name: String,
        site: Site,
    },
    #[error("{site}: the condition '{condition}' of the property group '{group}': {message}")]
    Condition {
        group: String,
        condition: String,
        site: Site,
        message: String,
    },
    #[error("{}", cycle_text(.0))]
    Cycle(Vec<Edge>),
    #[error("{}", ambiguous_text(.property, .first, .first_site, .second, .second_site))]
    Ambiguous {
        property: String,
        first: String,
        first_site: Site,
        second: String,
        second_site: Site,
    },
}

fn cycle_text(edges: &[Edge]) -> String {
    let names: Vec<&str> = edges
        .iter()
        .map(|e| e.from.as_str())
        .chain(edges.first().map(|e| e.from.as_str()))
        .collect();
    let mut s = format!(
        "the property groups are ordered in a cycle, so no order exists: {}",
        names.join(" -> ")
    );
    for e in edges {
        s.push_str("\n      ");
        s.push_str(&e.describe());
    }
    s
}

fn ambiguous_text(property: &str, a: &str, a_site: &Site, b: &str, b_site: &Site) -> String {
    format!(
        "the property '{property}' is set by the groups '{a}' ({a_site}) and '{b}' ({b_site}); \
         this host is in both and neither is ordered before the other, so its value is not \
         guessed\n      to settle it, add \"overrides\": [\"{a}\"] to the group '{b}' (then \
         '{b}' wins), or \"overrides\": [\"{b}\"] to the group '{a}' (then '{a}' wins)"
    )
}

/// One edge of the group graph, from the more general group to the more
/// specific one, with why it is there.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub kind: EdgeKind,
    pub site: Site,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// `to` names `from` as its `parent`.
    Parent,
    /// `to` names `from` in its `overrides`.
    Overrides,
}

impl Edge {
    fn describe(&self) -> String {
        match self.kind {
            EdgeKind::Parent => format!(
                "'{}' refines '{}' (\"parent\" at {})",
                self.to, self.from, self.site
            ),
            EdgeKind::Overrides => format!(
                "'{}' overrides '{}' (\"overrides\" at {})",
                self.to, self.from, self.site
            ),
        }
    }
}

#[derive(Debug, Clone)]
struct Definition {
    value: J,
    site: Site,
    layer: AugmentsLayer,
}

#[derive(Debug, Clone)]
struct GroupSpec {
    name: String,
    site: Site,
    condition: String,
    condition_site: Site,
    parents: Vec<(String, Site)>,
    overrides: Vec<(String, Site)>,
    properties: IndexMap<String, Definition>,
}

/// Everything the def-layer files declared, gathered file by file.
#[derive(Debug, Default)]
pub struct PropertySources {
    /// One global layer per file, in the order the files were installed.
    globals: Vec<IndexMap<String, Definition>>,
    groups: Vec<GroupSpec>,
    errors: Vec<PropertyError>,
}

/// A file being read: its name and text, for positions.
pub struct SourceFile<'a> {
    pub path: &'a str,
    pub lines: &'a json::LineIndex<'a>,
    pub layer: AugmentsLayer,
}

impl SourceFile<'_> {
    fn site(&self, pos: usize, key: String) -> Site {
        let (line, column) = self.lines.line_col(pos);
        Site {
            file: self.path.to_string(),
            line,
            column,
            key,
        }
    }

    fn shape(&self, pos: usize, key: &str, message: impl Into<String>) -> PropertyError {
        PropertyError::Shape {
            site: self.site(pos, key.to_string()),
            message: message.into(),
        }
    }
}

impl PropertySources {
    /// Reads the `properties` key of one def-layer file (already expanded).
    pub fn collect(&mut self, file: &SourceFile, node: &Node) {
        let Json::Object(members) = &node.value else {
            self.errors.push(file.shape(
                node.pos,
                "properties",
                "the \"properties\" key must be a JSON object with \"global\" and \"groups\"",
            ));
            return;
        };
        let mut global = IndexMap::new();
        for m in members {
            match m.key.as_str() {
                "global" => {
                    self.definitions(file, &m.node, "properties.global", &mut global);
                }
                "groups" => self.groups(file, &m.node),
                other => self.errors.push(file.shape(
                    m.key_pos,
                    "properties",
                    format!(
                        "unknown key '{other}' in \"properties\" (expected \"global\" and \"groups\")"
                    ),
                )),
            }
        }
        self.globals.push(global);
    }

    fn definitions(
        &mut self,
        file: &SourceFile,
        node: &Node,
        key: &str,
        out: &mut IndexMap<String, Definition>,
    ) {
        let Json::Object(members) = &node.value else {
            self.errors.push(file.shape(
                node.pos,
                key,
                format!("\"{key}\" must be a JSON object of property names and values"),
            ));
            return;
        };
        for m in members {
            out.insert(
                m.key.clone(),
                Definition {
                    value: m.node.to_serde(),
                    site: file.site(m.key_pos, format!("{key}.{}", m.key)),
                    layer: file.layer,
                },
            );
        }
    }

    fn groups(&mut self, file: &SourceFile, node: &Node) {
        let Json::Object(members) = &node.value else {
            self.errors.push(file.shape(
                node.pos,
                "properties.groups",
                "\"properties.groups\" must be a JSON object of group names and groups",
            ));
            return;
        };
        for m in members {
            let key = format!("properties.groups.{}", m.key);
            let site = file.site(m.key_pos, key.clone());
            let Json::Object(attrs) = &m.node.value else {
                self.errors.push(file.shape(
                    m.node.pos,
                    &key,
                    format!("the group '{}' must be a JSON object", m.key),
                ));
                continue;
            };
            let mut g = GroupSpec {
                name: m.key.clone(),
                site: site.clone(),
                condition: String::new(),
                condition_site: site.clone(),
                parents: Vec::new(),
                overrides: Vec::new(),
                properties: IndexMap::new(),
            };
            let mut has_condition = false;
            for a in attrs {
                let akey = format!("{key}.{}", a.key);
                match a.key.as_str() {
                    "condition" => match &a.node.value {
                        Json::Str(s) => {
                            g.condition = s.clone();
                            g.condition_site = file.site(a.node.pos, akey);
                            has_condition = true;
                        }
                        _ => self.errors.push(file.shape(
                            a.node.pos,
                            &akey,
                            format!(
                                "the condition of the group '{}' must be a class expression string",
                                m.key
                            ),
                        )),
                    },
                    "parent" | "overrides" => {
                        let names: Vec<(String, Site)> = match &a.node.value {
                            Json::Str(s) => vec![(s.clone(), file.site(a.node.pos, akey.clone()))],
                            Json::Array(items) if items.iter().all(|i| i.as_str().is_some()) => {
                                items
                                    .iter()
                                    .map(|i| {
                                        (
                                            i.as_str().unwrap_or_default().to_string(),
                                            file.site(i.pos, akey.clone()),
                                        )
                                    })
                                    .collect()
                            }
                            _ => {
                                self.errors.push(file.shape(
                                    a.node.pos,
                                    &akey,
                                    format!(
                                        "\"{}\" of the group '{}' must be a group name or a list of them",
                                        a.key, m.key
                                    ),
                                ));
                                continue;
                            }
                        };
                        if a.key == "parent" {
                            g.parents.extend(names);
                        } else {
                            g.overrides.extend(names);
                        }
                    }
                    "properties" => {
                        let mut props = IndexMap::new();
                        self.definitions(file, &a.node, &akey, &mut props);
                        g.properties = props;
                    }
                    "comment" => {}
                    other => self.errors.push(file.shape(
                        a.key_pos,
                        &akey,
                        format!(
                            "unknown key '{other}' in the group '{}' (expected condition, parent, \
                             overrides, properties, comment)",
                            m.key
                        ),
                    )),
                }
            }
            if !has_condition {
                self.errors.push(PropertyError::Shape {
                    site,
                    message: format!(
                        "the group '{}' has no \"condition\" (a class expression deciding which \
                         hosts are in it)",
                        m.key
                    ),
                });
                continue;
            }
            if let Some(first) = self.groups.iter().find(|x| x.name == g.name) {
                self.errors.push(PropertyError::DuplicateGroup {
                    name: g.name.clone(),
                    first: first.site.clone(),
                    second: g.site.clone(),
                });
                continue;
            }
            self.groups.push(g);
        }
    }
}

/// One layer that defined a property, in the order they were merged.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub label: String,
    pub site: Site,
    /// Which augments layer the definition came from.
    pub source: AugmentsLayer,
    /// The value this layer wrote.
    pub value: J,
    /// What it set, and what each setting replaced.
    pub contributions: Vec<Contribution>,
}

/// One path a layer set (`""` is the whole value, `.a.b` a member).
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    pub path: String,
    pub value: J,
    /// The layer (by label) whose value at this path was replaced, and that
    /// value.
    pub replaced: Option<(String, J)>,
}

/// How one property got its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub name: String,
    pub layers: Vec<Layer>,
    pub value: J,
    /// Groups that define the property but do not apply to this host, with
    /// their condition.
    pub not_applied: Vec<(String, String)>,
}

/// The merged properties of this host, or why there are none.
#[derive(Debug, Default, Clone)]
pub struct Properties {
    pub resolutions: IndexMap<String, Resolution>,
    pub errors: Vec<PropertyError>,
}

impl Properties {
    /// Orders and merges every property for this host and installs the
    /// results as `default:properties.NAME`. With any error nothing is
    /// installed.
    pub fn resolve(ctx: &mut EvalContext, sources: PropertySources) -> Properties {
        let mut errors = sources.errors;
        let groups = sources.groups;
        let index: IndexMap<&str, usize> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.as_str(), i))
            .collect();
        let mut edges: Vec<(usize, usize, Edge)> = Vec::new();
        for (to, g) in groups.iter().enumerate() {
            let named = g
                .parents
                .iter()
                .map(|p| (p, EdgeKind::Parent, "parent"))
                .chain(
                    g.overrides
                        .iter()
                        .map(|o| (o, EdgeKind::Overrides, "overrides")),
                );
            for ((name, site), kind, attribute) in named {
                match index.get(name.as_str()) {
                    Some(&from) => edges.push((
                        from,
                        to,
                        Edge {
                            from: name.clone(),
                            to: g.name.clone(),
                            kind,
                            site: site.clone(),
                        },
                    )),
                    None => errors.push(PropertyError::UnknownGroup {
                        group: g.name.clone(),
                        attribute: attribute.to_string(),
                        name: name.clone(),
                        site: site.clone(),
                    }),
                }
            }
        }
        let mut adj: crate::values::digraph::Adjacency = vec![Vec::new(); groups.len()];
        for (from, to, _) in &edges {
            if !adj[*from].contains(to) {
                adj[*from].push(*to);
            }
        }
        if let Some(cycle) = crate::values::digraph::shortest_cycle(&adj) {
            let described = cycle
                .iter()
                .enumerate()
                .filter_map(|(i, &from)| {
                    let to = cycle[(i + 1) % cycle.len()];
                    edges
                        .iter()
                        .find(|(f, t, _)| *f == from && *t == to)
                        .map(|(_, _, e)| e.clone())
                })
                .collect();
            errors.push(PropertyError::Cycle(described));
            return Properties {
                resolutions: IndexMap::new(),
                errors,
            };
        }
        let order = crate::values::digraph::topological_order(&adj).unwrap_or_default();
        let mut rank = vec![0usize; groups.len()];
        for (r, &g) in order.iter().enumerate() {
            rank[g] = r;
        }
        let reach = crate::values::digraph::reachability(&adj);
        let mut member = vec![false; groups.len()];
        for (i, g) in groups.iter().enumerate() {
            let cond = ctx.expand(&g.condition).text;
            match ctx.eval_class_expr(cond.trim()) {
                Ok(b) => member[i] = b,
                Err(e) => errors.push(PropertyError::Condition {
                    group: g.name.clone(),
                    condition: g.condition.clone(),
                    site: g.condition_site.clone(),
                    message: e.to_string(),
                }),
            }
        }
        let host = host_layer(ctx);

        // Every property name, in the order first written.
        let mut names: IndexMap<String, ()> = IndexMap::new();
        for layer in &sources.globals {
            names.extend(layer.keys().map(|k| (k.clone(), ())));
        }
        for g in &groups {
            names.extend(g.properties.keys().map(|k| (k.clone(), ())));
        }
        names.extend(host.keys().map(|k| (k.clone(), ())));

        let mut resolutions = IndexMap::new();
        for name in names.keys() {
            let mut definers: Vec<usize> = (0..groups.len())
                .filter(|&i| member[i] && groups[i].properties.contains_key(name))
                .collect();
            definers.sort_by_key(|&i| rank[i]);
            // The groups are totally ordered exactly when each one reaches
            // the next in topological order.
            if let Some(w) = definers.windows(2).find(|w| !reach[w[0]][w[1]]) {
                let (a, b) = (&groups[w[0]], &groups[w[1]]);
                errors.push(PropertyError::Ambiguous {
                    property: name.clone(),
                    first: a.name.clone(),
                    first_site: a.properties[name].site.clone(),
                    second: b.name.clone(),
                    second_site: b.properties[name].site.clone(),
                });
                continue;
            }
            let mut defs: Vec<(String, &Definition)> = Vec::new();
            for layer in &sources.globals {
                if let Some(d) = layer.get(name) {
                    defs.push(("global".to_string(), d));
                }
            }
            for &i in &definers {
                defs.push((
                    format!("group '{}'", groups[i].name),
                    &groups[i].properties[name],
                ));
            }
            if let Some(d) = host.get(name) {
                defs.push(("host".to_string(), d));
            }
            let not_applied = groups
                .iter()
                .enumerate()
                .filter(|(i, g)| !member[*i] && g.properties.contains_key(name))
                .map(|(_, g)| (g.name.clone(), g.condition.clone()))
                .collect();
            resolutions.insert(name.clone(), merge_layers(name, &defs, not_applied));
        }
        if errors.is_empty() {
            for r in resolutions.values() {
                install(ctx, r);
            }
        }
        Properties {
            resolutions,
            errors,
        }
    }

    /// `--explain` for a property: every layer in order, what it set and
    /// what it overrode, and the final value. `None` when no layer defines
    /// a property of that name (`properties.` and `default:` prefixes are
    /// accepted).
    pub fn explain(&self, name: &str) -> Option<String> {
        let name = name.strip_prefix("default:").unwrap_or(name);
        let name = name
            .strip_prefix(&format!("{RESULT_BUNDLE}."))
            .unwrap_or(name);
        let r = self.resolutions.get(name)?;
        let mut out = format!(
            "property '{}' (the data container default:{RESULT_BUNDLE}.{}), merged from the most \
             general layer to the most specific:\n",
            r.name, r.name
        );
        for (i, l) in r.layers.iter().enumerate() {
            out.push_str(&format!(
                "  {}. {} at {}, key {}\n",
                i + 1,
                l.label,
                l.site,
                l.site.key
            ));
            for c in &l.contributions {
                let what = if c.path.is_empty() {
                    format!("sets {}", compact(&c.value))
                } else {
                    format!("sets {} = {}", c.path, compact(&c.value))
                };
                let how = match &c.replaced {
                    None => String::new(),
                    Some((by, old)) if old == &c.value => format!("   (same as {by})"),
                    Some((by, old)) => format!("   (overrides {by}: {})", compact(old)),
                };
                out.push_str(&format!("       {what}{how}\n"));
            }
        }
        for (g, cond) in &r.not_applied {
            out.push_str(&format!(
                "  not applied: group '{g}' (its condition '{cond}' is false on this host)\n"
            ));
        }
        out.push_str(&format!("  final value: {}\n", compact(&r.value)));
        Some(out)
    }
}

fn compact(v: &J) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The host's own layer: what `host_specific.json` put in
/// `data:properties`.
fn host_layer(ctx: &EvalContext) -> IndexMap<String, Definition> {
    let mut out: Vec<(String, Definition)> = ctx
        .vars
        .scope(HOST_NS, HOST_BUNDLE)
        .into_iter()
        .flatten()
        .filter_map(|(name, var)| {
            let Origin::Augments {
                layer: AugmentsLayer::HostSpecific,
                file,
                key,
            } = &var.origin
            else {
                return None;
            };
            let value = match &var.value {
                Value::Data(d) => d.as_ref().clone(),
                Value::Scalar(s) => J::String(s.clone()),
                Value::List(l) => J::Array(l.iter().cloned().map(J::String).collect()),
            };
            Some((
                name.clone(),
                Definition {
                    value,
                    site: Site {
                        file: file.clone(),
                        line: 0,
                        column: 0,
                        key: format!("{key}.{HOST_BUNDLE}.{name}"),
                    },
                    layer: AugmentsLayer::HostSpecific,
                },
            ))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().collect()
}

/// Deep-merges the definitions in order, remembering which layer set each
/// path.
fn merge_layers(
    name: &str,
    defs: &[(String, &Definition)],
    not_applied: Vec<(String, String)>,
) -> Resolution {
    let mut value = J::Null;
    let mut owners: Vec<(String, String)> = Vec::new();
    let mut layers = Vec::new();
    for (label, d) in defs {
        let mut contributions = Vec::new();
        merge_traced(
            &mut value,
            &d.value,
            "",
            label,
            &mut owners,
            &mut contributions,
        );
        layers.push(Layer {
            label: label.clone(),
            site: d.site.clone(),
            source: d.layer,
            value: d.value.clone(),
            contributions,
        });
    }
    Resolution {
        name: name.to_string(),
        layers,
        value,
        not_applied,
    }
}

/// The layer that last set `path` or a path containing it.
fn owner_of<'a>(owners: &'a [(String, String)], path: &str) -> Option<&'a str> {
    owners
        .iter()
        .filter(|(p, _)| path == p || path.starts_with(&format!("{p}.")))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, l)| l.as_str())
}

fn merge_traced(
    base: &mut J,
    overlay: &J,
    path: &str,
    label: &str,
    owners: &mut Vec<(String, String)>,
    out: &mut Vec<Contribution>,
) {
    if let (J::Object(b), J::Object(o)) = (&mut *base, overlay) {
        for (k, v) in o {
            let child = format!("{path}.{k}");
            match b.get_mut(k) {
                Some(existing) if existing.is_object() && v.is_object() => {
                    merge_traced(existing, v, &child, label, owners, out);
                }
                Some(existing) => {
                    let replaced =
                        owner_of(owners, &child).map(|o| (o.to_string(), existing.clone()));
                    *existing = v.clone();
                    set_owner(owners, &child, label);
                    out.push(Contribution {
                        path: child,
                        value: v.clone(),
                        replaced,
                    });
                }
                None => {
                    b.insert(k.clone(), v.clone());
                    set_owner(owners, &child, label);
                    out.push(Contribution {
                        path: child,
                        value: v.clone(),
                        replaced: None,
                    });
                }
            }
        }
        return;
    }
    let replaced = (!base.is_null())
        .then(|| owner_of(owners, path).map(|o| (o.to_string(), base.clone())))
        .flatten();
    *base = overlay.clone();
    set_owner(owners, path, label);
    out.push(Contribution {
        path: path.to_string(),
        value: overlay.clone(),
        replaced,
    });
}

fn set_owner(owners: &mut Vec<(String, String)>, path: &str, label: &str) {
    owners.retain(|(p, _)| !(p == path || p.starts_with(&format!("{path}."))));
    owners.push((path.to_string(), label.to_string()));
}

/// Installs one merged property as a data container; its origin is the
/// most specific layer.
fn install(ctx: &mut EvalContext, r: &Resolution) {
    let Some(last) = r.layers.last() else { return };
    let labels: Vec<&str> = r
        .layers
        .iter()
        .map(|l| l.label.trim_start_matches("group '").trim_end_matches('\''))
        .collect();
    let var = Variable::new(
        Value::data(r.value.clone()),
        DataType::Data,
        Origin::Augments {
            layer: last.source,
            file: last.site.file.clone(),
            key: last.site.key.clone(),
        },
    )
    .with_tags(vec![
        TAG.to_string(),
        format!("property_layers={}", labels.join(">")),
    ]);
    ctx.vars.put("default", RESULT_BUNDLE, &r.name, var);
}
