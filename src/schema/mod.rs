//! The schema of the policy language: bundle types, promise types and their
//! attributes, body types, and function signatures.
//!
//! Most facts come from `cf-promises --syntax-description json`, turned into
//! static tables by `scripts/gen_schema.py` (see `generated.rs`). A few that
//! the description leaves out were found by running cf-promises 3.21 on small
//! policies; they are the constants below, each saying what it stands for.
//! `validate` checks a parsed policy against all of it.

#[rustfmt::skip]
mod generated;
pub mod newer;
pub mod support;
pub mod validate;
pub mod values;

pub use validate::{Scope, validate, validate_with};

/// The type of an attribute's value, a function parameter or a function's
/// result, as cf-promises names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    String,
    Int,
    Real,
    Slist,
    Ilist,
    Rlist,
    /// One word out of a fixed set (the range lists them).
    Option,
    Olist,
    /// A reference to a body of the type named like the attribute.
    Body,
    /// A reference to a bundle, optionally with arguments.
    Bundle,
    /// A class expression.
    Context,
    Clist,
    /// `"min,max"` of integers.
    Irange,
    /// `"min,max"` of reals.
    Rrange,
    Data,
}

impl ValueType {
    /// The name cf-promises uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Int => "int",
            ValueType::Real => "real",
            ValueType::Slist => "slist",
            ValueType::Ilist => "ilist",
            ValueType::Rlist => "rlist",
            ValueType::Option => "option",
            ValueType::Olist => "olist",
            ValueType::Body => "body",
            ValueType::Bundle => "bundle",
            ValueType::Context => "context",
            ValueType::Clist => "clist",
            ValueType::Irange => "irange",
            ValueType::Rrange => "rrange",
            ValueType::Data => "data",
        }
    }

    pub fn is_list(self) -> bool {
        matches!(
            self,
            ValueType::Slist
                | ValueType::Ilist
                | ValueType::Rlist
                | ValueType::Olist
                | ValueType::Clist
        )
    }
}

/// Whether a name is current or on its way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Normal,
    /// Still accepted; cf-promises warns.
    Deprecated,
}

/// Where an attribute comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Accepted by every promise type (`comment`, `if`, `classes`, ...).
    Global,
    /// Accepted by every promise type of one bundle type (`select_region`
    /// in edit_line bundles).
    Bundle,
    /// The promise type's own attribute.
    PromiseType,
    /// An attribute of a body type.
    Body,
}

/// What a function is for, as cf-promises groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    Communication,
    Data,
    Files,
    Io,
    System,
    Utils,
    Internal,
}

#[derive(Debug)]
pub struct AttrDef {
    pub name: &'static str,
    pub ty: ValueType,
    /// For strings and lists of strings and classes, a regular expression
    /// the whole value must match (empty: anything); for options, the
    /// allowed words separated by commas; for numbers and ranges,
    /// `"min,max"`. Empty for bodies and bundles.
    pub range: &'static str,
    pub status: Status,
    pub visibility: Visibility,
}

#[derive(Debug)]
pub struct PromiseTypeDef {
    pub name: &'static str,
    pub status: Status,
    /// Sorted by name; the global and bundle-type attributes included.
    pub attributes: &'static [AttrDef],
}

impl PromiseTypeDef {
    /// One of its attributes: 3.21's, or one CFEngine added later
    /// ([`newer::ATTRIBUTES`]).
    pub fn attribute(&self, name: &str) -> Option<&'static AttrDef> {
        find_attr(self.attributes, name)
            .or_else(|| newer::attribute("promise", self.name, name).map(|a| &a.def))
    }
}

#[derive(Debug)]
pub struct BodyTypeDef {
    pub name: &'static str,
    pub status: Status,
    /// Sorted by name.
    pub attributes: &'static [AttrDef],
}

impl BodyTypeDef {
    /// One of its attributes: 3.21's, or one CFEngine added later
    /// ([`newer::ATTRIBUTES`]).
    pub fn attribute(&self, name: &str) -> Option<&'static AttrDef> {
        find_attr(self.attributes, name)
            .or_else(|| newer::attribute("body", self.name, name).map(|a| &a.def))
    }
}

#[derive(Debug)]
pub struct BundleTypeDef {
    pub name: &'static str,
    pub status: Status,
    /// Sorted.
    pub promise_types: &'static [&'static str],
}

impl BundleTypeDef {
    pub fn allows(&self, promise_type: &str) -> bool {
        self.promise_types.binary_search(&promise_type).is_ok()
    }
}

#[derive(Debug)]
pub struct ParamDef {
    pub ty: ValueType,
    pub range: &'static str,
}

#[derive(Debug)]
pub struct FunctionDef {
    pub name: &'static str,
    pub return_type: ValueType,
    pub params: &'static [ParamDef],
    /// The function checks its own argument count (the parameters listed
    /// are the usual ones, not a fixed count).
    pub variadic: bool,
    pub cached: bool,
    /// Takes a list or data container by name or inline.
    pub collecting: bool,
    pub status: Status,
    pub category: Category,
}

impl FunctionDef {
    /// Whether a call with `n` arguments has the right count. Variadic
    /// functions check their own arguments when they run; cf-promises does
    /// not count them beforehand.
    pub fn accepts_arity(&self, n: usize) -> bool {
        self.variadic || n == self.params.len()
    }
}

fn find_attr(attrs: &'static [AttrDef], name: &str) -> Option<&'static AttrDef> {
    attrs
        .binary_search_by(|a| a.name.cmp(name))
        .ok()
        .map(|i| &attrs[i])
}

/// Bundle types cf-promises accepts beyond those in its syntax description
/// (found by experiment): they hold only the promise types every bundle
/// type has.
pub const EXTRA_BUNDLE_TYPES: &[&str] =
    &["executor", "hub", "keygenerator", "knowledge", "runagent"];

/// Promise types every bundle type accepts.
pub const COMMON_PROMISE_TYPES: &[&str] = &["classes", "defaults", "meta", "reports", "vars"];

/// Bundle names cf-promises rejects: they would clash with the special
/// variable scopes.
pub const RESERVED_BUNDLE_NAMES: &[&str] = &["const", "edit", "match", "mon", "sys", "this"];

/// Variable names a vars promise may not define.
pub const RESERVED_VARIABLE_NAMES: &[&str] = &[
    "handle",
    "promise_dirname",
    "promise_filename",
    "promise_linenumber",
    "promiser",
    "this",
];

/// Attributes a `promise agent NAME { ... }` block (a custom promise type)
/// accepts.
pub const CUSTOM_PROMISE_BLOCK_ATTRIBUTES: &[&str] = &["inherit_from", "interpreter", "path"];

/// Attributes cf-promises 3.21 still parses but has removed: its syntax
/// description leaves them out, and it warns "Removed constraint" and
/// ignores them. Keyed by body type (a control body's type is the
/// component: `common`, `agent`, ...); from its source's
/// `SYNTAX_STATUS_REMOVED` entries of the body types we know.
pub const REMOVED_BODY_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("action", &["value_kept", "value_notkept", "value_repaired"]),
    (
        "agent",
        &[
            "auditing",
            "binarypaddingchar",
            "exclamation",
            "syslog",
            "track_value",
        ],
    ),
    ("common", &["host_licenses_paid"]),
    ("hub", &["export_zenoss"]),
    (
        "report_data_select",
        &[
            "classes_exclude",
            "classes_include",
            "promise_notkept_log_exclude",
            "promise_notkept_log_include",
            "promise_repaired_log_exclude",
            "promise_repaired_log_include",
            "variables_exclude",
            "variables_include",
        ],
    ),
    ("server", &["keycacheTTL"]),
];

/// Whether cf-promises accepts `attribute` in bodies of `body_type` only to
/// warn that it was removed and ignore it.
pub fn is_removed_body_attribute(body_type: &str, attribute: &str) -> bool {
    REMOVED_BODY_ATTRIBUTES
        .iter()
        .any(|(t, names)| *t == body_type && names.contains(&attribute))
}

/// Attributes whose value, written like a function call, is a bundle with
/// arguments rather than a function.
pub const BUNDLE_CALL_ATTRIBUTES: &[&str] = &[
    "bundlesequence",
    "edit_line",
    "edit_xml",
    "home_bundle",
    "service_bundle",
    "usebundle",
];

/// The attributes of a vars promise that give the variable its type and
/// value.
pub const VARIABLE_TYPES: &[&str] = &["data", "ilist", "int", "real", "rlist", "slist", "string"];

/// A bundle type: one from the syntax description, or one of the extra
/// types (which then allows the common promise types only).
#[derive(Debug, Clone, Copy)]
pub enum BundleType {
    Described(&'static BundleTypeDef),
    Extra(&'static str),
}

impl BundleType {
    pub fn name(&self) -> &'static str {
        match self {
            BundleType::Described(d) => d.name,
            BundleType::Extra(n) => n,
        }
    }

    pub fn allows(&self, promise_type: &str) -> bool {
        match self {
            BundleType::Described(d) => d.allows(promise_type),
            BundleType::Extra(_) => COMMON_PROMISE_TYPES.contains(&promise_type),
        }
    }
}

pub fn bundle_type(name: &str) -> Option<BundleType> {
    if let Ok(i) = generated::BUNDLE_TYPES.binary_search_by(|b| b.name.cmp(name)) {
        return Some(BundleType::Described(&generated::BUNDLE_TYPES[i]));
    }
    EXTRA_BUNDLE_TYPES
        .iter()
        .find(|&&n| n == name)
        .map(|&n| BundleType::Extra(n))
}

/// Every bundle type name, for suggestions.
pub fn bundle_type_names() -> impl Iterator<Item = &'static str> {
    generated::BUNDLE_TYPES
        .iter()
        .map(|b| b.name)
        .chain(EXTRA_BUNDLE_TYPES.iter().copied())
}

pub fn promise_type(name: &str) -> Option<&'static PromiseTypeDef> {
    generated::PROMISE_TYPES
        .binary_search_by(|p| p.name.cmp(name))
        .ok()
        .map(|i| &generated::PROMISE_TYPES[i])
}

pub fn promise_types() -> &'static [PromiseTypeDef] {
    generated::PROMISE_TYPES
}

/// A body type of 3.21's syntax, or one CFEngine added later
/// ([`newer::body_type`]).
pub fn body_type(name: &str) -> Option<&'static BodyTypeDef> {
    generated::BODY_TYPES
        .binary_search_by(|b| b.name.cmp(name))
        .ok()
        .map(|i| &generated::BODY_TYPES[i])
        .or_else(|| newer::body_type(name))
}

pub fn body_types() -> &'static [BodyTypeDef] {
    generated::BODY_TYPES
}

pub fn function(name: &str) -> Option<&'static FunctionDef> {
    let all = functions();
    all.binary_search_by(|f| f.name.cmp(name))
        .ok()
        .map(|i| all[i])
}

/// Every function we read, sorted by name: CFEngine 3.21's (from its
/// syntax description) and those added up to 3.28 ([`newer`]), a changed
/// signature in its newer form.
pub fn functions() -> &'static [&'static FunctionDef] {
    static ALL: std::sync::OnceLock<Vec<&'static FunctionDef>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let changed = |name: &str| newer::CHANGED_FUNCTIONS.iter().any(|(f, _)| f.name == name);
        let mut v: Vec<&'static FunctionDef> = generated::FUNCTIONS
            .iter()
            .filter(|f| !changed(f.name))
            .chain(newer::FUNCTIONS.iter().map(|(f, _)| f))
            .chain(newer::CHANGED_FUNCTIONS.iter().map(|(f, _)| f))
            .collect();
        v.sort_by_key(|f| f.name);
        v
    })
}

/// The CFEngine version that introduced a function (or its present
/// signature) after 3.21; `None` for one of 3.21's.
pub fn function_since(name: &str) -> Option<&'static str> {
    newer::FUNCTIONS
        .iter()
        .chain(newer::CHANGED_FUNCTIONS)
        .find(|(f, _)| f.name == name)
        .map(|(_, v)| *v)
}

impl Status {
    /// The name cf-promises uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Normal => "normal",
            Status::Deprecated => "deprecated",
        }
    }
}

impl Visibility {
    /// The name cf-promises uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Global => "global",
            Visibility::Bundle => "bundle",
            Visibility::PromiseType => "promiseType",
            Visibility::Body => "body",
        }
    }
}

impl Category {
    /// The name cf-promises uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Communication => "communication",
            Category::Data => "data",
            Category::Files => "files",
            Category::Io => "io",
            Category::System => "system",
            Category::Utils => "utils",
            Category::Internal => "internal",
        }
    }
}

fn attributes_json(attrs: &[AttrDef]) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for a in attrs {
        let mut o = serde_json::Map::new();
        o.insert("attribute".into(), a.name.into());
        // cf-promises gives no range for a body or a bundle reference.
        if !matches!(a.ty, ValueType::Body | ValueType::Bundle) {
            o.insert("range".into(), a.range.into());
        }
        o.insert("status".into(), a.status.as_str().into());
        o.insert("type".into(), a.ty.as_str().into());
        o.insert("visibility".into(), a.visibility.as_str().into());
        out.insert(a.name.into(), o.into());
    }
    out.into()
}

/// The syntax of CFEngine 3.21 this agent accepts, as `cf-promises -s json`
/// 3.21 describes it (without what `newer` adds):
/// `bodyTypes`, `bundleTypes`, `functions` and `promiseTypes`, each keyed
/// by name. Function parameters carry their type and range; the
/// descriptions cf-promises adds are not kept here.
pub fn syntax_description() -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let mut bodies = Map::new();
    for b in body_types() {
        bodies.insert(
            b.name.into(),
            json!({ "attributes": attributes_json(b.attributes), "status": b.status.as_str() }),
        );
    }
    let mut bundles = Map::new();
    for b in generated::BUNDLE_TYPES {
        bundles.insert(
            b.name.into(),
            json!({ "promiseTypes": b.promise_types, "status": b.status.as_str() }),
        );
    }
    let mut functions = Map::new();
    // cf-promises 3.21's own description: what CFEngine added later
    // (`newer`) is read, but not described here.
    for f in generated::FUNCTIONS {
        let params: Vec<Value> = f
            .params
            .iter()
            .map(|p| json!({ "range": p.range, "type": p.ty.as_str() }))
            .collect();
        functions.insert(
            f.name.into(),
            json!({
                "cached": f.cached,
                "category": f.category.as_str(),
                "collecting": f.collecting,
                "parameters": params,
                "returnType": f.return_type.as_str(),
                "status": f.status.as_str(),
                "variadic": f.variadic,
            }),
        );
    }
    let mut promises = Map::new();
    for p in promise_types() {
        promises.insert(
            p.name.into(),
            json!({ "attributes": attributes_json(p.attributes), "status": p.status.as_str() }),
        );
    }
    json!({
        "bodyTypes": bodies,
        "bundleTypes": bundles,
        "functions": functions,
        "promiseTypes": promises,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted<T>(items: &[T], key: impl Fn(&T) -> &str) -> bool {
        items.windows(2).all(|w| key(&w[0]) < key(&w[1]))
    }

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(sorted(generated::BUNDLE_TYPES, |b| b.name));
        assert!(sorted(generated::PROMISE_TYPES, |p| p.name));
        assert!(sorted(generated::BODY_TYPES, |b| b.name));
        assert!(sorted(generated::FUNCTIONS, |f| f.name));
        assert!(sorted(newer::FUNCTIONS, |(f, _)| f.name));
        assert!(functions().windows(2).all(|w| w[0].name < w[1].name));
        assert_eq!(functions().len(), 200);
        for p in promise_types() {
            assert!(sorted(p.attributes, |a| a.name), "{}", p.name);
        }
        for b in body_types() {
            assert!(sorted(b.attributes, |a| a.name), "{}", b.name);
        }
        for b in generated::BUNDLE_TYPES {
            assert!(sorted(b.promise_types, |p| p), "{}", b.name);
        }
    }

    #[test]
    fn lookups() {
        let files = promise_type("files").expect("files");
        let create = files.attribute("create").expect("create");
        assert_eq!(create.ty, ValueType::Option);
        assert!(create.range.split(',').any(|w| w == "true"));
        assert_eq!(
            files.attribute("comment").map(|a| a.visibility),
            Some(Visibility::Global)
        );
        assert!(files.attribute("craete").is_none());
        assert!(bundle_type("agent").is_some_and(|b| b.allows("files")));
        assert!(bundle_type("edit_line").is_some_and(|b| !b.allows("files")));
        assert!(bundle_type("hub").is_some_and(|b| b.allows("vars") && !b.allows("files")));
        assert!(bundle_type("gendoc").is_none());
        assert_eq!(
            body_type("perms")
                .and_then(|b| b.attribute("mode"))
                .map(|a| a.ty),
            Some(ValueType::String)
        );
        let canonify = function("canonify").expect("canonify");
        assert!(canonify.accepts_arity(1) && !canonify.accepts_arity(2));
        assert!(function("concat").is_some_and(|f| f.accepts_arity(0)));
        assert!(function("nosuch").is_none());
    }

    #[test]
    fn every_body_attribute_names_a_body_type() {
        // The validator looks a referenced body up by the attribute's name.
        for p in promise_types() {
            for a in p.attributes.iter().filter(|a| a.ty == ValueType::Body) {
                assert!(body_type(a.name).is_some(), "{}.{}", p.name, a.name);
            }
        }
    }

    #[test]
    fn every_string_range_compiles() {
        let mut cache = crate::values::regex::RegexCache::default();
        let ranges = promise_types()
            .iter()
            .flat_map(|p| p.attributes)
            .chain(body_types().iter().flat_map(|b| b.attributes))
            .filter(|a| {
                matches!(
                    a.ty,
                    ValueType::String | ValueType::Slist | ValueType::Context | ValueType::Clist
                )
            })
            .map(|a| a.range);
        for r in ranges.filter(|r| !r.is_empty()) {
            assert!(cache.get(r).is_ok(), "{r}");
        }
    }
}
