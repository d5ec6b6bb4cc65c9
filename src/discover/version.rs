//! The CFEngine version we are compatible with (`cfengine_3_21`,
//! `sys.cf_version`...), the edition, the feature classes, and the fixed
//! `const.*` and `def.*` variables.

use super::Collector;
use crate::COMPAT_VERSION;
use crate::values::canon::canonify;
use crate::values::value::{DataType, Value};

/// The package release of cf-agent 3.21.0 (`sys.cf_version_release`).
const RELEASE: &str = "1";

/// The optional features cf-agent 3.21 is built with; each defines
/// `feature_<name>` and its prefixes.
const FEATURES: [&str; 9] = [
    "copyfrom_restrict_keys",
    "def_json_preparse",
    "host_specific_data_load",
    "tls_1_0",
    "tls_1_1",
    "tls_1_2",
    "tls_1_3",
    "xml",
    "yaml",
];

/// `sys.cf_version*`, `sys.local_libdir`, `sys.libdir`.
pub(crate) fn version_vars(c: &mut Collector, layout: &super::Layout) {
    c.sys(
        "cf_version",
        COMPAT_VERSION,
        "inventory,source=agent,attribute_name=CFEngine version",
    );
    let mut parts = COMPAT_VERSION.split('.');
    for name in ["cf_version_major", "cf_version_minor", "cf_version_patch"] {
        c.sys(name, parts.next().unwrap_or("0"), "source=agent");
    }
    c.sys("cf_version_release", RELEASE, "source=agent");
    c.sys("local_libdir", "lib", "source=agent");
    c.sys(
        "libdir",
        layout
            .workdir
            .join("inputs")
            .join("lib")
            .to_string_lossy()
            .into_owned(),
        "source=agent",
    );
}

pub(crate) fn edition_class(c: &mut Collector) {
    c.class(
        "community_edition",
        "inventory,attribute_name=none,source=agent",
    );
}

/// Defines a canonified name and every prefix of it that ends before an
/// underscore: `cfengine_3_21_0`, `cfengine_3_21`, `cfengine_3`, `cfengine`.
fn classes_with_prefixes(c: &mut Collector, name: &str, tags: &str) {
    let mut name = canonify(name);
    loop {
        c.class(&name, tags);
        match name.rfind('_') {
            Some(i) => name.truncate(i),
            None => break,
        }
    }
}

/// `any`, the version classes and the feature classes.
pub(crate) fn builtin_classes(c: &mut Collector) {
    c.class("any", "source=agent");
    classes_with_prefixes(
        c,
        &format!("cfengine_{}", canonify(COMPAT_VERSION)),
        "inventory,attribute_name=none,source=agent",
    );
    for f in FEATURES {
        classes_with_prefixes(c, &format!("feature_{f}"), "source=agent");
    }
}

pub(crate) fn def_vars(c: &mut Collector) {
    c.var(
        "def",
        "jq",
        Value::str(
            "jq --compact-output --monochrome-output --ascii-output --unbuffered --sort-keys",
        ),
        DataType::String,
        "invocation,source=agent,command_name=jq",
    );
}

pub(crate) fn const_vars(c: &mut Collector) {
    for (name, value) in [
        ("at", "@"),
        ("dirsep", "/"),
        ("dollar", "$"),
        ("endl", "\n"),
        ("n", "\n"),
        ("r", "\r"),
        ("t", "\t"),
    ] {
        c.var(
            "const",
            name,
            Value::str(value),
            DataType::String,
            "source=agent",
        );
    }
}
