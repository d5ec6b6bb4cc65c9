//! What CFEngine added to the language after 3.21, which we read too: the
//! functions of 3.22 to 3.28 and the newer signatures of 3.21's own, each
//! with the version that introduced it (from the public source of
//! cfengine/core at its tags; `cf-promises --syntax-description` of 3.28
//! describes them the same way).
//!
//! The agent still reports 3.21.0 (so the MPF's `minimum_version` guards
//! choose as they would on a 3.21 agent); these only let policy written
//! for a newer CFEngine load and run.

use super::{AttrDef, BodyTypeDef, Category, FunctionDef, ParamDef, Status, ValueType, Visibility};

const ANY: &str = ".*";
const ABSPATH: &str = "\"?(/.*)";
const VALRANGE: &str = "0,99999999999";
const ID: &str = r"[a-zA-Z0-9_$(){}\[\].:]+";
const BOOL: &str = "true,false,yes,no,on,off";

const fn p(ty: ValueType, range: &'static str) -> ParamDef {
    ParamDef { ty, range }
}

const fn f(
    name: &'static str,
    return_type: ValueType,
    params: &'static [ParamDef],
    variadic: bool,
    collecting: bool,
    category: Category,
) -> FunctionDef {
    FunctionDef {
        name,
        return_type,
        params,
        variadic,
        cached: false,
        collecting,
        status: Status::Normal,
        category,
    }
}

use Category::{Communication, Files, Io, System, Utils};
use ValueType::{Context, Data, Int, Option as Opt, Slist, String as Str};
const DATA_CAT: Category = Category::Data;

/// Functions CFEngine added after 3.21, with the version that added them;
/// sorted by name. A function that checks its own argument count
/// (`ARGC(min, max)` in CFEngine's table) is variadic here.
pub const FUNCTIONS: &[(FunctionDef, &str)] = &[
    (
        f(
            "classfilterdata",
            Data,
            &[
                p(Str, ANY),
                p(
                    Opt,
                    "array_of_arrays,array_of_objects,object_of_arrays,object_of_objects,auto",
                ),
                p(Str, ANY),
            ],
            true,
            true,
            Io,
        ),
        "3.27.0",
    ),
    (
        f(
            "findlocalgroups",
            Data,
            &[p(Str, ANY)],
            false,
            false,
            DATA_CAT,
        ),
        "3.27.0",
    ),
    (
        f(
            "findlocalusers",
            Data,
            &[p(Str, ANY)],
            false,
            false,
            DATA_CAT,
        ),
        "3.26.0",
    ),
    (
        f(
            "getacls",
            Slist,
            &[p(Str, ABSPATH), p(Opt, "default,access")],
            false,
            false,
            Files,
        ),
        "3.27.0",
    ),
    (
        f(
            "getbundlemetatags",
            Slist,
            &[p(Str, ID)],
            true,
            false,
            Utils,
        ),
        "3.26.0",
    ),
    (
        f("getgroupinfo", Data, &[p(Str, ANY)], true, false, System),
        "3.27.0",
    ),
    (
        f(
            "getgroups",
            Slist,
            &[p(Str, ANY), p(Str, ANY)],
            true,
            false,
            System,
        ),
        "3.27.0",
    ),
    (
        f(
            "hostswithgroup",
            Slist,
            &[p(Str, "[a-zA-Z0-9_]+"), p(Opt, "name,address,hostkey")],
            false,
            false,
            Communication,
        ),
        "3.26.0",
    ),
    (
        f(
            "is_type",
            // CFEngine declares a string; it answers as a class does.
            Str,
            &[p(Str, ANY), p(Str, ANY)],
            false,
            false,
            DATA_CAT,
        ),
        "3.26.0",
    ),
    (
        f(
            "isconnectable",
            Context,
            &[p(Str, ANY), p(Str, ANY), p(Int, VALRANGE)],
            true,
            false,
            Communication,
        ),
        "3.26.0",
    ),
    (
        f(
            "isnewerthantime",
            Context,
            &[p(Str, ABSPATH), p(Int, VALRANGE)],
            false,
            false,
            Files,
        ),
        "3.27.0",
    ),
    (
        f(
            "isreadable",
            Context,
            &[p(Str, ABSPATH), p(Int, VALRANGE)],
            true,
            false,
            Files,
        ),
        "3.22.0",
    ),
    (
        f(
            "useringroup",
            Context,
            &[p(Str, ANY), p(Str, ANY)],
            false,
            false,
            DATA_CAT,
        ),
        "3.26.0",
    ),
    (
        f(
            "version_compare",
            Context,
            &[p(Str, ANY), p(Opt, "=,==,!=,>,<,>=,<="), p(Str, ANY)],
            false,
            false,
            Utils,
        ),
        "3.23.0",
    ),
];

/// 3.21's functions whose signature grew later, as the newer version
/// describes them: `validdata`'s optional `strict` (3.26), `getusers`'
/// optional arguments (3.28).
pub const CHANGED_FUNCTIONS: &[(FunctionDef, &str)] = &[
    (
        f(
            "getusers",
            Slist,
            &[p(Str, ANY), p(Str, ANY)],
            true,
            false,
            System,
        ),
        "3.28.0",
    ),
    (
        f(
            "validdata",
            Context,
            &[p(Str, ANY), p(Opt, "JSON"), p(Opt, BOOL)],
            true,
            false,
            DATA_CAT,
        ),
        "3.26.0",
    ),
    (
        f(
            "validjson",
            Context,
            &[p(Str, ANY), p(Opt, BOOL)],
            true,
            false,
            DATA_CAT,
        ),
        "3.26.0",
    ),
];

/// An attribute CFEngine added after 3.21, where it may be written.
#[derive(Debug)]
pub struct NewerAttr {
    /// `promise:TYPE` or `body:TYPE` (a control body's type is its
    /// component: `common`, `agent`, `file`), as in support.tsv.
    pub owner: &'static str,
    pub def: AttrDef,
    /// The CFEngine version that added it.
    pub since: &'static str,
    /// Whether we do what it asks; one we do not is refused where it is
    /// written, with its version named.
    pub implemented: bool,
}

const fn attr(
    owner: &'static str,
    name: &'static str,
    ty: ValueType,
    range: &'static str,
    visibility: Visibility,
    since: &'static str,
    implemented: bool,
) -> NewerAttr {
    NewerAttr {
        owner,
        def: AttrDef {
            name,
            ty,
            range,
            status: Status::Normal,
            visibility,
        },
        since,
        implemented,
    }
}

const ORDER: &str = "(classic|top_down)";

/// The attributes CFEngine added after 3.21.
pub static ATTRIBUTES: &[NewerAttr] = &[
    attr(
        "promise:classes",
        "cancel",
        Opt,
        BOOL,
        Visibility::PromiseType,
        "3.28.0",
        true,
    ),
    attr(
        "promise:classes",
        "timer_policy",
        Opt,
        "absolute,reset",
        Visibility::PromiseType,
        "3.28.0",
        true,
    ),
    attr(
        "body:common",
        "evaluation_order",
        Str,
        ORDER,
        Visibility::Body,
        "3.27.0",
        true,
    ),
    attr(
        "body:agent",
        "evaluation_order",
        Str,
        ORDER,
        Visibility::Body,
        "3.27.0",
        true,
    ),
    attr(
        "body:file",
        "evaluation_order",
        Str,
        ORDER,
        Visibility::Body,
        "3.27.0",
        true,
    ),
    attr(
        "body:agent",
        "default_directory_create_mode",
        Str,
        ANY,
        Visibility::Body,
        "3.27.0",
        true,
    ),
    attr(
        "promise:files",
        "fsattrs",
        ValueType::Body,
        "",
        Visibility::PromiseType,
        "3.27.0",
        true,
    ),
    attr(
        "body:fsattrs",
        "immutable",
        Opt,
        BOOL,
        Visibility::Body,
        "3.27.0",
        true,
    ),
    attr(
        "promise:replace_patterns",
        "allow_non_convergent",
        Opt,
        BOOL,
        Visibility::PromiseType,
        "3.28.0",
        true,
    ),
];

/// `body fsattrs`, which CFEngine 3.27 added: its attribute (`immutable`) is in [`ATTRIBUTES`].
static FSATTRS: BodyTypeDef = BodyTypeDef {
    name: "fsattrs",
    status: Status::Normal,
    attributes: &[],
};

/// A body type CFEngine added after 3.21 (not in 3.21's syntax
/// description, which `cf-promises -s json` prints).
pub fn body_type(name: &str) -> Option<&'static BodyTypeDef> {
    (name == FSATTRS.name).then_some(&FSATTRS)
}

/// The newer attribute `name` of a promise type or body type (`kind` is
/// `promise` or `body`).
pub fn attribute(kind: &str, type_name: &str, name: &str) -> Option<&'static NewerAttr> {
    ATTRIBUTES.iter().find(|a| {
        a.def.name == name
            && a.owner
                .split_once(':')
                .is_some_and(|(k, t)| k == kind && t == type_name)
    })
}

/// The newer attribute whose definition `def` is, if it is one (a lookup
/// through a type's `attribute` hands out that very definition). Pointers
/// are compared: the validator asks for every attribute of a policy
/// (`ATTRIBUTES` is a static, not a const, so that it has one address).
pub fn of_def(def: &AttrDef) -> Option<&'static NewerAttr> {
    ATTRIBUTES.iter().find(|a| std::ptr::eq(&a.def, def))
}

/// Why a newer attribute is refused: the version that added it, and that
/// we do not do it yet.
pub fn refusal(a: &NewerAttr) -> String {
    format!(
        "'{}' is an attribute of CFEngine {}; convergent reads policy of CFEngine 3.21 to 3.28 but does not support it yet",
        a.def.name, a.since
    )
}

/// The `sys` variables CFEngine added after 3.21 that we define too, with
/// the version that added them. cf-agent 3.21 has none of them, so the
/// tests that compare our tables with it leave these out.
pub const SYS_VARS: &[(&str, &str)] = &[
    ("cfengine_roles", "3.24.0"),
    ("cpusockets", "3.26.0"),
    ("keydir", "3.26.0"),
    ("moduledir", "3.26.0"),
    ("policy_version", "3.27.0"),
];

/// Whether a hard class is one CFEngine added after 3.21 (and the version):
/// `1_cpusocket` / `N_cpusockets` (3.26), `cfengine_client` and
/// `cfengine_reporting_hub` (3.24).
pub fn hard_class(name: &str) -> Option<&'static str> {
    if name == "cfengine_client" || name == "cfengine_reporting_hub" {
        return Some("3.24.0");
    }
    let sockets = name
        .strip_suffix("_cpusockets")
        .or_else(|| name.strip_suffix("_cpusocket"));
    sockets
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map(|_| "3.26.0")
}

/// Whether `sys.NAME` (or `default:sys.NAME`, or an element of it) is a
/// variable CFEngine added after 3.21.
pub fn sys_var(name: &str) -> Option<&'static str> {
    let name = name.strip_prefix("default:").unwrap_or(name);
    let short = name.strip_prefix("sys.")?;
    let short = short.split('[').next().unwrap_or(short);
    SYS_VARS.iter().find(|(n, _)| *n == short).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `of_def` tells a newer attribute by its definition's address: a
    /// type's lookup must hand out that definition, and 3.21's table must
    /// not hold the same name too.
    #[test]
    fn a_types_lookup_hands_out_the_newer_definition() {
        for a in ATTRIBUTES {
            let (kind, type_name) = a.owner.split_once(':').expect("kind:type");
            let found = match kind {
                "promise" => super::super::promise_type(type_name).map(|t| {
                    assert!(t.attributes.iter().all(|d| d.name != a.def.name));
                    t.attribute(a.def.name)
                }),
                _ => super::super::body_type(type_name).map(|t| {
                    assert!(t.attributes.iter().all(|d| d.name != a.def.name));
                    t.attribute(a.def.name)
                }),
            };
            if let Some(found) = found {
                let found = found.expect("the type knows its newer attribute");
                assert!(std::ptr::eq(&of_def(found).expect("newer").def, &a.def));
            }
        }
    }
}
