//! Augments: JSON files that define variables and classes before any policy
//! is read, in three layers, each binding keeping its [`Origin`].
//!
//! 1. `$(sys.workdir)/data/host_specific.json` (the CMDB layer, see
//!    [`cmdb`]): variables default to `data:variables`, classes to the
//!    `data` namespace, everything is tagged `source=cmdb`, no variable
//!    references are allowed, and no later augments file can replace its
//!    variables (policy still can).
//! 2. `def_preferred.json` next to the policy entry, or `def.json` when it
//!    is absent or `--ignore-preferred-augments` is given.
//! 3. Each file named by the `augments` key of the file before, depth
//!    first, each one installed completely before the next is read.
//!
//! Within one def-layer file the keys are installed in a fixed order, each
//! expanded (every reference CFEngine could resolve at that moment, not
//! only `sys.*`) right before it is installed: `vars` (all entries expanded
//! first, so they cannot see each other), `variables` (sees `vars`),
//! `classes` (each class sees the ones before it), `inputs` (sets
//! `def.augments_inputs`, over `vars`, `variables` and even the CMDB), and
//! last `augments`. A later file replaces variables of an earlier one;
//! a class, once defined, stays as first defined.
//!
//! Errors never stop the run: a file that cannot be read or parsed is
//! skipped with an error naming the file and the JSON position, a key or an
//! entry of the wrong shape is skipped with an error naming the file, the
//! key and the position; everything else still loads, as with cf-agent.

pub mod classes;
pub mod cmdb;
pub mod properties;

use crate::eval::EvalContext;
use crate::eval::classes::ClassInfo;
use crate::eval::vars::Variable;
use crate::host::local;
use crate::values::lenient_json::{self as json, Json, Node};
use crate::values::refs::VarRef;
use crate::values::value::{AugmentsLayer, DataType, Origin, Value};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The tag on everything `def.json` and its includes define.
pub const AUGMENTS_TAG: &str = "source=augments_file";
/// The tag on everything `host_specific.json` defines.
pub const CMDB_TAG: &str = "source=cmdb";

/// Where to look for augments.
#[derive(Debug, Clone)]
pub struct AugmentsInput {
    /// The directory of the policy entry file (`sys.policy_entry_dirname`).
    pub entry_dir: PathBuf,
    /// The work directory; `host_specific.json` is read from its `data/`.
    pub workdir: PathBuf,
    /// `--ignore-preferred-augments`: read `def.json` even when
    /// `def_preferred.json` exists.
    pub ignore_preferred: bool,
    /// `--no-augments` (cf-agent 3.24): neither `def.json` nor
    /// `def_preferred.json` is read.
    pub no_def: bool,
    /// `--no-host-specific-data` (cf-agent 3.24): `host_specific.json` is
    /// not read.
    pub no_host_specific: bool,
    /// The directory relative `augments` entries are opened from. CFEngine
    /// opens them as written, so they are relative to the agent's working
    /// directory, not to the file that names them nor to the policy.
    pub cwd: PathBuf,
}

impl AugmentsInput {
    /// Input for a run in the process's current directory.
    pub fn new(entry_dir: PathBuf, workdir: PathBuf, ignore_preferred: bool) -> AugmentsInput {
        let cwd = std::env::current_dir().unwrap_or_else(|_| entry_dir.clone());
        AugmentsInput {
            entry_dir,
            workdir,
            ignore_preferred,
            no_def: false,
            no_host_specific: false,
            cwd,
        }
    }
}

/// What loading augments did.
#[derive(Debug, Default)]
pub struct AugmentsReport {
    /// `def.augments_inputs` as it ended up, resolved against the entry
    /// directory, in order. The policy decides whether to load them.
    pub inputs: Vec<PathBuf>,
    /// Files read and installed, in the order they were installed.
    pub files_loaded: Vec<PathBuf>,
    /// Problems; each skipped only the thing it names.
    pub errors: Vec<AugmentsError>,
    /// Keys that are ignored where they appear (CFEngine warns too).
    pub warnings: Vec<AugmentsError>,
    /// The `properties` keys of the def-layer files, gathered in order.
    pub property_sources: crate::augments::properties::PropertySources,
    /// The hierarchical properties of this host (see [`crate::augments::properties`]),
    /// resolved once every layer is installed.
    pub properties: crate::augments::properties::Properties,
}

/// A problem with one augments file. `Display` is one line naming the file
/// (and, for JSON, the line and column).
#[derive(Debug, Clone, Error, PartialEq)]
pub enum AugmentsError {
    #[error("cannot read augments file '{file}': {message}")]
    Read { file: String, message: String },
    #[error(
        "{file}:{line}:{column}: Could not parse JSON file {file}: {message}; the file is ignored"
    )]
    Json {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// Something of the wrong shape; only that part is skipped.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// Host-specific data of the wrong shape, in cf-agent's words, which
    /// users and tests grep for from the line's start; where it is follows.
    #[error("{message} ({file}:{line}:{column})")]
    Cmdb {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: could not load the augments file '{name}' it names: {reason}")]
    Include {
        file: String,
        name: String,
        reason: String,
    },
}

/// One file being installed: its path and text (for positions) and layer.
pub(crate) struct FileCtx<'a> {
    pub path: &'a Path,
    pub lines: json::LineIndex<'a>,
    pub layer: AugmentsLayer,
}

impl FileCtx<'_> {
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }

    pub fn invalid(&self, pos: usize, message: impl Into<String>) -> AugmentsError {
        let (line, column) = self.lines.line_col(pos);
        AugmentsError::Invalid {
            file: self.display(),
            line,
            column,
            message: message.into(),
        }
    }

    /// [`AugmentsError::Cmdb`] at a position of this file.
    pub fn invalid_cmdb(&self, pos: usize, message: impl Into<String>) -> AugmentsError {
        let (line, column) = self.lines.line_col(pos);
        AugmentsError::Cmdb {
            file: self.display(),
            line,
            column,
            message: message.into(),
        }
    }

    pub fn origin(&self, key: &str) -> Origin {
        Origin::Augments {
            layer: self.layer,
            file: self.display(),
            key: key.to_string(),
        }
    }
}

/// Reads and parses one file. `Ok(None)` when it does not exist.
fn read_json(path: &Path) -> Result<Option<(String, Node)>, AugmentsError> {
    let bytes = match local::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(AugmentsError::Read {
                file: path.display().to_string(),
                message: e.to_string(),
            });
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    match json::parse(&text) {
        Ok(node) => Ok(Some((text, node))),
        Err(e) => {
            let (line, column) = json::line_col(&text, e.pos);
            Err(AugmentsError::Json {
                file: path.display().to_string(),
                line,
                column,
                message: e.message,
            })
        }
    }
}

/// Loads every augments layer into `ctx`.
pub fn apply(ctx: &mut EvalContext, input: &AugmentsInput) -> AugmentsReport {
    let mut report = AugmentsReport::default();
    if input.no_host_specific {
        crate::debug!("--no-host-specific-data: host_specific.json not read");
    } else {
        cmdb::load(
            ctx,
            &input.workdir.join("data/host_specific.json"),
            &mut report,
        );
    }

    let preferred = input.entry_dir.join("def_preferred.json");
    let def = if !input.ignore_preferred && local::is_file(&preferred) {
        preferred
    } else {
        input.entry_dir.join("def.json")
    };
    if input.no_def {
        crate::debug!("--no-augments: '{}' not read", def.display());
    } else if local::is_file(&def) {
        let mut chain = Vec::new();
        if let Err(reason) = load_def_file(
            ctx,
            input,
            &def,
            AugmentsLayer::Def,
            &mut chain,
            &mut report,
        ) {
            // Already reported; the run goes on without this file.
            crate::debug!("augments file '{}' not installed: {reason}", def.display());
        }
    } else {
        crate::debug!("no augments file at '{}'", def.display());
    }

    // Properties are merged last: group conditions see every class the
    // augments define, and the host layer is already installed.
    let sources = std::mem::take(&mut report.property_sources);
    report.properties = crate::augments::properties::Properties::resolve(ctx, sources);

    if let Some(var) = ctx.vars.get("default", "def", "augments_inputs")
        && matches!(var.origin, Origin::Augments { .. })
        && let Value::List(items) = &var.value
    {
        report.inputs = items
            .iter()
            .map(|i| {
                let p = Path::new(i);
                if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    input.entry_dir.join(p)
                }
            })
            .collect();
    }
    for e in &report.errors {
        crate::error!("{e}");
    }
    for w in &report.warnings {
        crate::warn!("{w}");
    }
    report
}

/// Reads one def-layer file and installs it, then the files its `augments`
/// key names. `chain` holds the files being installed (to stop cycles).
fn load_def_file(
    ctx: &mut EvalContext,
    input: &AugmentsInput,
    path: &Path,
    layer: AugmentsLayer,
    chain: &mut Vec<PathBuf>,
    report: &mut AugmentsReport,
) -> Result<(), String> {
    let (text, root) = match read_json(path) {
        Ok(Some(x)) => x,
        Ok(None) => return Err("no such file".to_string()),
        Err(e) => {
            let reason = match &e {
                AugmentsError::Json {
                    line,
                    column,
                    message,
                    ..
                } => format!("malformed JSON at {line}:{column}: {message}"),
                other => other.to_string(),
            };
            report.errors.push(e);
            return Err(reason);
        }
    };
    let file = FileCtx {
        path,
        lines: json::LineIndex::new(&text),
        layer,
    };
    let Json::Object(_) = &root.value else {
        report.errors.push(file.invalid(
            root.pos,
            "an augments file must hold a JSON object, file ignored",
        ));
        return Err("not a JSON object".to_string());
    };
    crate::debug!("installing augments file '{}'", path.display());
    report.files_loaded.push(path.to_path_buf());
    chain.push(canonical(path));

    if let Some(vars) = root.get("vars") {
        let vars = expand(ctx, vars);
        install_vars(ctx, &file, &vars, report);
    }
    if let Some(variables) = root.get("variables") {
        let variables = expand(ctx, variables);
        install_variables(ctx, &file, &variables, report);
    }
    if let Some(classes) = root.get("classes") {
        let classes = expand(ctx, classes);
        classes::install(ctx, &file, &classes, report);
    }
    if let Some(inputs) = root.get("inputs") {
        let inputs = expand(ctx, inputs);
        install_inputs(ctx, &file, &inputs, report);
    }
    if let Some(properties) = root.get("properties") {
        let properties = expand(ctx, properties);
        let display = file.display();
        let source = crate::augments::properties::SourceFile {
            path: &display,
            lines: &file.lines,
            layer,
        };
        report.property_sources.collect(&source, &properties);
    }
    if let Json::Object(members) = &root.value {
        for m in members {
            if !matches!(
                m.key.as_str(),
                "vars" | "variables" | "classes" | "inputs" | "augments" | "properties"
            ) {
                crate::debug!(
                    "unknown augments key '{}' in '{}' skipped",
                    m.key,
                    path.display()
                );
            }
        }
    }
    if let Some(augments) = root.get("augments") {
        let augments = expand(ctx, augments);
        let names: Vec<String> = match &augments.value {
            Json::Array(items) if items.iter().all(Node::is_primitive) => {
                items.iter().filter_map(Node::primitive_text).collect()
            }
            _ => {
                report.errors.push(file.invalid(
                    augments.pos,
                    "the \"augments\" key must be a list of file names; it is ignored",
                ));
                Vec::new()
            }
        };
        for name in names {
            let p = Path::new(&name);
            let full = if p.is_absolute() {
                p.to_path_buf()
            } else {
                input.cwd.join(p)
            };
            if chain.contains(&canonical(&full)) {
                report.errors.push(AugmentsError::Include {
                    file: file.display(),
                    name,
                    reason: "it is already being loaded (a cycle of augments files)".into(),
                });
                continue;
            }
            if let Err(reason) =
                load_def_file(ctx, input, &full, AugmentsLayer::Included, chain, report)
            {
                report.errors.push(AugmentsError::Include {
                    file: file.display(),
                    name,
                    reason,
                });
            }
        }
    }
    chain.pop();
    Ok(())
}

fn canonical(p: &Path) -> PathBuf {
    local::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Expands every reference CFEngine can resolve now, in strings and keys.
/// What does not resolve stays as written.
fn expand(ctx: &EvalContext, node: &Node) -> Node {
    node.map_strings(&mut |s| ctx.expand_once(s).text)
}

/// Where a variable named by an augments key goes: `ns:bundle.name`,
/// `bundle.name` (default namespace) or `name` (the layer's default bundle
/// and namespace). A namespace without a bundle is an error (`None`).
pub(crate) fn var_target(
    key: &str,
    default_ns: &str,
    default_scope: &str,
) -> Option<(String, String, String)> {
    let r = VarRef::parse(key);
    let ns = r.ns.unwrap_or(default_ns);
    let scope = match r.scope {
        Some("this") | None if r.ns.is_none() => default_scope,
        Some(s) => s,
        None => return None,
    };
    if r.name.is_empty() || ns.is_empty() || scope.is_empty() {
        return None;
    }
    Some((ns.to_string(), scope.to_string(), r.name.to_string()))
}

/// A JSON value as a variable value, the way CFEngine converts augments:
/// primitives become strings, a list of primitives an slist (nulls
/// dropped), anything else a data container. `None` for null.
pub(crate) fn json_value(node: &Node) -> Option<(Value, DataType)> {
    match &node.value {
        Json::Null => None,
        Json::Array(items) if items.iter().all(Node::is_primitive) => Some((
            Value::List(items.iter().filter_map(Node::primitive_text).collect()),
            DataType::Slist,
        )),
        Json::Array(_) | Json::Object(_) => Some((Value::data(node.to_serde()), DataType::Data)),
        _ => node
            .primitive_text()
            .map(|t| (Value::Scalar(t), DataType::String)),
    }
}

/// Tags from a `tags` member: a list of primitives, duplicates dropped,
/// order kept, then the layer's source tag unless already there. A `tags`
/// of another shape is an error and only the source tag is used.
pub(crate) fn tags_of(
    file: &FileCtx,
    what: &str,
    name: &str,
    spec: &Node,
    source_tag: &str,
    report: &mut AugmentsReport,
) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    if let Some(t) = spec.get("tags") {
        match &t.value {
            Json::Array(items) if items.iter().all(Node::is_primitive) => {
                for tag in items.iter().filter_map(Node::primitive_text) {
                    if !tags.contains(&tag) {
                        tags.push(tag);
                    }
                }
            }
            _ => report.errors.push(file.invalid(
                t.pos,
                format!("the tags of the {what} '{name}' must be a list of strings; ignored"),
            )),
        }
    }
    if !tags.iter().any(|t| t == source_tag) {
        tags.push(source_tag.to_string());
    }
    tags
}

/// The `comment` member, which must be a string.
pub(crate) fn comment_of(
    file: &FileCtx,
    what: &str,
    name: &str,
    spec: &Node,
    report: &mut AugmentsReport,
) -> Option<String> {
    let c = spec.get("comment")?;
    match &c.value {
        Json::Str(s) => Some(s.clone()),
        _ => {
            report.errors.push(file.invalid(
                c.pos,
                format!("the comment of the {what} '{name}' must be a string; ignored"),
            ));
            None
        }
    }
}

/// Puts one augments variable unless the CMDB layer already defined it.
/// Returns whether it was put.
pub(crate) fn put_var(
    ctx: &mut EvalContext,
    (ns, scope, name): (&str, &str, &str),
    var: Variable,
    layer: AugmentsLayer,
) -> bool {
    if layer != AugmentsLayer::HostSpecific
        && let Some(old) = ctx.vars.get(ns, scope, name)
        && matches!(
            old.origin,
            Origin::Augments {
                layer: AugmentsLayer::HostSpecific,
                ..
            }
        )
    {
        // cf-agent's words (00_basics/06_host_specific_data/11-augments-no-override.cf).
        crate::debug!(
            "Cannot set variable {ns}:{scope}.{name} from augments, already defined from \
             host-specific data"
        );
        return false;
    }
    ctx.vars.put(ns, scope, name, var);
    true
}

/// The `vars` key of a def-layer file: `name: value` pairs.
fn install_vars(ctx: &mut EvalContext, file: &FileCtx, vars: &Node, report: &mut AugmentsReport) {
    let Json::Object(members) = &vars.value else {
        report.errors.push(file.invalid(
            vars.pos,
            "the \"vars\" key must be a JSON object; it is ignored",
        ));
        return;
    };
    for m in members {
        let Some(target) = var_target(&m.key, "default", "def") else {
            report.errors.push(file.invalid(
                m.key_pos,
                format!(
                    "invalid variable name '{}' (a namespace needs a bundle: ns:bundle.name)",
                    m.key
                ),
            ));
            continue;
        };
        let Some((value, dtype)) = json_value(&m.node) else {
            report.errors.push(file.invalid(
                m.node.pos,
                format!("the variable '{}' is null; skipped", m.key),
            ));
            continue;
        };
        let var = Variable::new(value, dtype, file.origin("vars"))
            .with_tags(vec![AUGMENTS_TAG.to_string()]);
        put_var(ctx, (&target.0, &target.1, &target.2), var, file.layer);
    }
}

/// The `variables` key: `name: {value, comment, tags}`, or `name: value`.
fn install_variables(
    ctx: &mut EvalContext,
    file: &FileCtx,
    variables: &Node,
    report: &mut AugmentsReport,
) {
    let Json::Object(members) = &variables.value else {
        report.errors.push(file.invalid(
            variables.pos,
            "the \"variables\" key must be a JSON object; it is ignored",
        ));
        return;
    };
    for m in members {
        let (value_node, tags, comment) = if let Json::Object(_) = &m.node.value {
            let Some(v) = m.node.get("value") else {
                report.errors.push(file.invalid(
                    m.node.pos,
                    format!("the variable '{}' has no \"value\"; skipped", m.key),
                ));
                continue;
            };
            let tags = tags_of(file, "variable", &m.key, &m.node, AUGMENTS_TAG, report);
            let comment = comment_of(file, "variable", &m.key, &m.node, report);
            (v, tags, comment)
        } else {
            // CFEngine takes anything else as the value itself.
            (&m.node, vec![AUGMENTS_TAG.to_string()], None)
        };
        let Some(target) = var_target(&m.key, "default", "def") else {
            report.errors.push(file.invalid(
                m.key_pos,
                format!(
                    "invalid variable name '{}' (a namespace needs a bundle: ns:bundle.name)",
                    m.key
                ),
            ));
            continue;
        };
        let Some((value, dtype)) = json_value(value_node) else {
            report.errors.push(file.invalid(
                value_node.pos,
                format!("the variable '{}' is null; skipped", m.key),
            ));
            continue;
        };
        let mut var = Variable::new(value, dtype, file.origin("variables")).with_tags(tags);
        var.comment = comment;
        put_var(ctx, (&target.0, &target.1, &target.2), var, file.layer);
    }
}

/// The `inputs` key: a list of file names, into `def.augments_inputs`. It
/// wins over everything else that sets that variable, the CMDB included.
fn install_inputs(
    ctx: &mut EvalContext,
    file: &FileCtx,
    inputs: &Node,
    report: &mut AugmentsReport,
) {
    match &inputs.value {
        Json::Array(items) if items.iter().all(Node::is_primitive) => {
            let list: Vec<String> = items.iter().filter_map(Node::primitive_text).collect();
            let var = Variable::new(Value::List(list), DataType::Slist, file.origin("inputs"))
                .with_tags(vec![AUGMENTS_TAG.to_string()]);
            ctx.vars.put("default", "def", "augments_inputs", var);
        }
        _ => {
            // cf-agent's words, which tests and users grep for.
            let message = format!(
                "Trying to augment inputs in '{}' but the value was not a list of strings; it is ignored",
                file.display()
            );
            report.errors.push(file.invalid(inputs.pos, message))
        }
    }
}

/// Class definitions share this: a soft class with tags and comment.
pub(crate) fn class_info(origin: Origin, tags: Vec<String>, comment: Option<String>) -> ClassInfo {
    ClassInfo {
        tags: tags.into(),
        comment,
        origin,
        hard: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::classes::ClassInfo;

    /// A context with the few agent variables and hard classes augments
    /// use, as discovery will provide them.
    fn ctx(dir: &Path) -> EvalContext {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let sys = [
            ("workdir", dir.join("wd").display().to_string()),
            ("inputdir", dir.join("wd/inputs").display().to_string()),
            ("policy_entry_dirname", dir.join("p").display().to_string()),
            ("os", "linux".to_string()),
            ("flavor", "testos_1".to_string()),
        ];
        for (k, v) in sys {
            c.vars.put(
                "default",
                "sys",
                k,
                Variable::new(Value::str(v), DataType::String, Origin::Agent),
            );
        }
        for cls in ["cfengine", "cfengine_3", "linux"] {
            c.classes.define(
                cls,
                ClassInfo {
                    hard: true,
                    ..ClassInfo::soft(Origin::Agent, vec![])
                },
            );
        }
        c
    }

    struct Case {
        _tmp: tempfile::TempDir,
        dir: PathBuf,
    }

    impl Case {
        fn new(files: &[(&str, &str)]) -> Case {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().to_path_buf();
            std::fs::create_dir_all(dir.join("p")).unwrap();
            std::fs::create_dir_all(dir.join("wd/data")).unwrap();
            for (name, text) in files {
                let p = dir.join(name);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, text).unwrap();
            }
            Case { _tmp: tmp, dir }
        }

        fn input(&self) -> AugmentsInput {
            AugmentsInput {
                entry_dir: self.dir.join("p"),
                workdir: self.dir.join("wd"),
                ignore_preferred: false,
                no_def: false,
                no_host_specific: false,
                cwd: self.dir.join("p"),
            }
        }

        fn run(&self) -> (EvalContext, AugmentsReport) {
            let mut c = ctx(&self.dir);
            let r = apply(&mut c, &self.input());
            (c, r)
        }
    }

    fn var<'a>(c: &'a EvalContext, ns: &str, scope: &str, name: &str) -> Option<&'a Variable> {
        c.vars.get(ns, scope, name)
    }

    fn scalar(c: &EvalContext, ns: &str, scope: &str, name: &str) -> Option<String> {
        var(c, ns, scope, name).and_then(|v| v.value.as_scalar().map(str::to_string))
    }

    #[test]
    fn nothing_to_load_is_not_an_error() {
        let (c, r) = Case::new(&[]).run();
        assert!(r.errors.is_empty() && r.files_loaded.is_empty());
        assert!(var(&c, "default", "def", "augments_inputs").is_none());
    }

    #[test]
    fn vars_land_in_def_with_origin_and_tag() {
        let case = Case::new(&[(
            "p/def.json",
            r#"{"vars": {"s": "x", "n": 5, "r": 3.5, "b": true, "l": ["a", 1, null],
                "d": [["x"]], "o": {"k": 1}, "B.v": "bv", "ns:B.v": "nsv"}}"#,
        )]);
        let (c, r) = case.run();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let s = var(&c, "default", "def", "s").unwrap();
        assert_eq!(s.tags, vec![AUGMENTS_TAG.to_string()]);
        assert_eq!(
            s.origin,
            Origin::Augments {
                layer: AugmentsLayer::Def,
                file: case.dir.join("p/def.json").display().to_string(),
                key: "vars".into()
            }
        );
        assert_eq!(scalar(&c, "default", "def", "n").as_deref(), Some("5"));
        assert_eq!(scalar(&c, "default", "def", "r").as_deref(), Some("3.50"));
        assert_eq!(scalar(&c, "default", "def", "b").as_deref(), Some("true"));
        let l = var(&c, "default", "def", "l").unwrap();
        assert_eq!(l.dtype, DataType::Slist);
        assert_eq!(l.value, Value::List(vec!["a".into(), "1".into()]));
        assert_eq!(
            var(&c, "default", "def", "d").unwrap().dtype,
            DataType::Data
        );
        assert_eq!(
            var(&c, "default", "def", "o").unwrap().dtype,
            DataType::Data
        );
        assert_eq!(scalar(&c, "default", "B", "v").as_deref(), Some("bv"));
        assert_eq!(scalar(&c, "ns", "B", "v").as_deref(), Some("nsv"));
    }

    #[test]
    fn malformed_file_is_one_error_with_position_and_the_run_goes_on() {
        let case = Case::new(&[
            ("p/def.json", "{\n  \"vars\": {\n    \"x\": tru\n  }\n}\n"),
            ("wd/data/host_specific.json", r#"{"vars": {"h": "1"}}"#),
        ]);
        let (c, r) = case.run();
        assert_eq!(r.errors.len(), 1);
        let msg = r.errors[0].to_string();
        let file = case.dir.join("p/def.json").display().to_string();
        assert_eq!(
            msg,
            format!(
                "{file}:3:10: Could not parse JSON file {file}: unexpected 't', expected a value; the file is ignored"
            )
        );
        assert_eq!(scalar(&c, "data", "variables", "h").as_deref(), Some("1"));
        assert!(var(&c, "default", "def", "x").is_none());
    }

    #[test]
    fn wrong_shapes_are_errors_naming_the_place() {
        let case = Case::new(&[(
            "p/def.json",
            "{\"vars\": {\"ns:x\": 1, \"nul\": null, \"ok\": 1},\n \"variables\": {\"v\": {\"comment\": \"c\"}, \"t\": {\"value\": 1, \"tags\": \"x\", \"comment\": 2}},\n \"classes\": {\"both\": {\"class_expressions\": [], \"regular_expressions\": []}, \"bad\": [\"(\"], \"badx\": [\"a..b::\"], \"obj\": [{}]},\n \"inputs\": \"x.cf\", \"augments\": \"y.json\"}",
        )]);
        let (c, r) = case.run();
        let msgs: Vec<String> = r.errors.iter().map(ToString::to_string).collect();
        let has = |needle: &str| msgs.iter().any(|m| m.contains(needle));
        assert!(has(":1:11: invalid variable name 'ns:x'"), "{msgs:#?}");
        assert!(has("the variable 'nul' is null"), "{msgs:#?}");
        assert!(has(":2:21: the variable 'v' has no \"value\""), "{msgs:#?}");
        assert!(
            has("the tags of the variable 't' must be a list"),
            "{msgs:#?}"
        );
        assert!(
            has("the comment of the variable 't' must be a string"),
            "{msgs:#?}"
        );
        assert!(has("the class 'both' needs either"), "{msgs:#?}");
        assert!(
            has("in the class 'bad': invalid regular expression"),
            "{msgs:#?}"
        );
        assert!(
            has("in the class 'badx': cannot parse the class expression"),
            "{msgs:#?}"
        );
        assert!(
            has("the conditions of the class 'obj' must be strings"),
            "{msgs:#?}"
        );
        assert!(has("Trying to augment inputs in '"), "{msgs:#?}");
        assert!(has("but the value was not a list of strings"), "{msgs:#?}");
        assert!(has("the \"augments\" key must be a list"), "{msgs:#?}");
        assert_eq!(msgs.len(), 11, "{msgs:#?}");
        // What was well-formed still loaded.
        assert_eq!(scalar(&c, "default", "def", "ok").as_deref(), Some("1"));
        assert_eq!(
            var(&c, "default", "def", "t").unwrap().tags,
            vec![AUGMENTS_TAG.to_string()]
        );
    }

    #[test]
    fn include_cycles_and_missing_includes_are_errors() {
        let case = Case::new(&[
            (
                "p/def.json",
                r#"{"vars": {"a": "def"}, "augments": ["self.json", "gone.json"]}"#,
            ),
            (
                "p/self.json",
                r#"{"vars": {"b": "self"}, "augments": ["self.json"]}"#,
            ),
        ]);
        let (c, r) = case.run();
        let msgs: Vec<String> = r.errors.iter().map(ToString::to_string).collect();
        assert_eq!(msgs.len(), 2, "{msgs:#?}");
        assert!(msgs[0].contains("'self.json'") && msgs[0].contains("cycle"));
        assert!(msgs[1].contains("'gone.json'") && msgs[1].contains("no such file"));
        assert_eq!(scalar(&c, "default", "def", "b").as_deref(), Some("self"));
        assert_eq!(r.files_loaded.len(), 2);
    }

    #[test]
    fn cmdb_variables_cannot_be_replaced_by_later_augments() {
        let case = Case::new(&[
            (
                "wd/data/host_specific.json",
                r#"{"vars": {"default:def.x": "cmdb", "h": "cmdb"}, "bogus": 1}"#,
            ),
            (
                "p/def.json",
                r#"{"vars": {"x": "def", "data:variables.h": "def"},
                    "variables": {"x": {"value": "def"}}, "augments": ["inc.json"]}"#,
            ),
            ("p/inc.json", r#"{"vars": {"x": "inc"}}"#),
        ]);
        let (c, r) = case.run();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].to_string().contains("'bogus'"));
        let x = var(&c, "default", "def", "x").unwrap();
        assert_eq!(x.value, Value::str("cmdb"));
        assert_eq!(x.tags, vec![CMDB_TAG.to_string()]);
        assert!(matches!(
            x.origin,
            Origin::Augments {
                layer: AugmentsLayer::HostSpecific,
                ..
            }
        ));
        assert_eq!(
            scalar(&c, "data", "variables", "h").as_deref(),
            Some("cmdb")
        );
    }

    #[test]
    fn cmdb_refuses_references_and_conditional_classes() {
        let case = Case::new(&[(
            "wd/data/host_specific.json",
            r#"{"vars": {"a": "$(sys.os)", "b": "fine"}, "variables": {"c": {"value": "ok"}},
                "classes": {"yes": "any::", "no": ["linux::"], "d": {"regular_expressions": ["any"], "tags": ["t"]}}}"#,
        )]);
        let (c, r) = case.run();
        assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
        assert!(var(&c, "data", "variables", "b").is_none());
        assert_eq!(scalar(&c, "data", "variables", "c").as_deref(), Some("ok"));
        assert!(c.classes.is_defined("data:yes"));
        assert!(!c.classes.is_defined("data:no"));
        assert_eq!(
            *c.classes.get("data:d").unwrap().tags,
            vec!["t".to_string(), CMDB_TAG.to_string()]
        );
    }

    #[test]
    fn preferred_file_and_the_flag_that_ignores_it() {
        let files = [
            ("p/def.json", r#"{"vars": {"a": "def", "b": "def"}}"#),
            ("p/def_preferred.json", r#"{"vars": {"a": "pref"}}"#),
        ];
        let (c, _) = Case::new(&files).run();
        assert_eq!(scalar(&c, "default", "def", "a").as_deref(), Some("pref"));
        assert!(var(&c, "default", "def", "b").is_none());
        let case = Case::new(&files);
        let mut c = ctx(&case.dir);
        let input = AugmentsInput {
            ignore_preferred: true,
            ..case.input()
        };
        apply(&mut c, &input);
        assert_eq!(scalar(&c, "default", "def", "a").as_deref(), Some("def"));
        assert_eq!(scalar(&c, "default", "def", "b").as_deref(), Some("def"));
    }

    #[test]
    fn inputs_are_resolved_against_the_entry_directory() {
        let case = Case::new(&[(
            "p/def.json",
            r#"{"inputs": ["services/a.cf", "/abs/b.cf", "$(sys.os).cf"], "vars": {"augments_inputs": ["x.cf"]}}"#,
        )]);
        let (c, r) = case.run();
        let p = case.dir.join("p");
        assert_eq!(
            r.inputs,
            vec![
                p.join("services/a.cf"),
                PathBuf::from("/abs/b.cf"),
                p.join("linux.cf")
            ]
        );
        assert!(matches!(
            &var(&c, "default", "def", "augments_inputs").unwrap().origin,
            Origin::Augments { key, .. } if key == "inputs"
        ));
    }

    #[test]
    fn includes_are_relative_to_the_working_directory_and_depth_first() {
        let case = Case::new(&[
            (
                "p/def.json",
                r#"{"vars": {"x": "def"}, "augments": ["sub/a.json", "$(sys.policy_entry_dirname)/b.json"]}"#,
            ),
            (
                "p/sub/a.json",
                r#"{"vars": {"x": "a"}, "augments": ["c.json"]}"#,
            ),
            ("p/sub/c.json", r#"{"vars": {"from": "sub/c"}}"#),
            ("p/c.json", r#"{"vars": {"from": "c", "x": "c"}}"#),
            ("p/b.json", r#"{"vars": {"x": "b"}}"#),
        ]);
        let (c, r) = case.run();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(scalar(&c, "default", "def", "from").as_deref(), Some("c"));
        assert_eq!(scalar(&c, "default", "def", "x").as_deref(), Some("b"));
        let origin = &var(&c, "default", "def", "x").unwrap().origin;
        assert!(matches!(
            origin,
            Origin::Augments { layer: AugmentsLayer::Included, file, .. } if file.ends_with("/b.json")
        ));
    }

    #[test]
    fn classes_regex_is_anchored_and_expressions_end_in_colons() {
        let case = Case::new(&[(
            "p/def.json",
            r#"{"classes": {
                "a_any": ["any"], "a_partial": ["inux"], "a_lookahead": ["^(?!MISSING).*"],
                "a_expr": ["linux.!MISSING::"], "a_expr_no_colons": ["linux.cfengine"],
                "a_later": ["b_defined_later"], "b_defined_later": ["any"],
                "a_earlier": ["a_any"], "a_string": "cfengine_\\d+",
                "ns:c": ["any"], "uses_ns": ["ns:c"], "my-class": ["any"],
                "a_dict": {"regular_expressions": ["linux::"], "comment": "why", "tags": ["t", "t"]}
            }}"#,
        )]);
        let (c, r) = case.run();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        for yes in [
            "a_any",
            "a_lookahead",
            "a_expr",
            "b_defined_later",
            "a_earlier",
            "a_string",
            "ns:c",
            "uses_ns",
            "my_class",
            "a_dict",
        ] {
            assert!(c.classes.is_defined(yes), "{yes} should be defined");
        }
        for no in ["a_partial", "a_expr_no_colons", "a_later"] {
            assert!(!c.classes.is_defined(no), "{no} should not be defined");
        }
        let d = c.classes.get("a_dict").unwrap();
        assert_eq!(*d.tags, vec!["t".to_string(), AUGMENTS_TAG.to_string()]);
        assert_eq!(d.comment.as_deref(), Some("why"));
        assert!(!d.hard);
    }

    #[test]
    fn keys_expand_in_order_vars_variables_classes_inputs() {
        let case = Case::new(&[(
            "p/def.json",
            r#"{"classes": {"c_$(def.v)": ["any"]}, "inputs": ["$(def.a).cf"],
                "variables": {"v": {"value": "$(def.a)"}},
                "vars": {"a": "$(sys.os)", "b": "$(def.a)", "k_$(sys.flavor)": "$(nope) $(sys.os)"}}"#,
        )]);
        let (c, _) = case.run();
        assert_eq!(scalar(&c, "default", "def", "a").as_deref(), Some("linux"));
        assert_eq!(
            scalar(&c, "default", "def", "b").as_deref(),
            Some("$(def.a)")
        );
        assert_eq!(
            scalar(&c, "default", "def", "k_testos_1").as_deref(),
            Some("$(nope) linux")
        );
        assert_eq!(scalar(&c, "default", "def", "v").as_deref(), Some("linux"));
        assert!(c.classes.is_defined("c_linux"));
        assert_eq!(
            var(&c, "default", "def", "augments_inputs").unwrap().value,
            Value::List(vec!["linux.cf".into()])
        );
    }
}
