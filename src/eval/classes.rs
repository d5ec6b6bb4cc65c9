//! Defined classes: global (hard and namespace-wide soft classes) and the
//! bundle-local ones of the bundle being evaluated.

use super::value::Origin;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct ClassInfo {
    pub tags: Vec<String>,
    pub comment: Option<String>,
    pub origin: Origin,
    /// Discovered by the agent (cannot be cancelled by policy).
    pub hard: bool,
}

impl ClassInfo {
    pub fn soft(origin: Origin, tags: Vec<String>) -> ClassInfo {
        ClassInfo {
            tags,
            comment: None,
            origin,
            hard: false,
        }
    }
}

/// Turns any text into a valid class name: every byte that is not an ASCII
/// letter, digit or underscore becomes `_` (a multi-byte character becomes
/// one `_` per byte, as CFEngine does).
pub fn canonify(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                b as char
            } else {
                '_'
            }
        })
        .collect()
}

/// Canonifies a class name that may carry a namespace prefix, keeping the
/// `ns:` part.
pub fn canonify_class(s: &str) -> String {
    match s.split_once(':') {
        Some((ns, name)) if !ns.is_empty() => format!("{}:{}", canonify(ns), canonify(name)),
        _ => canonify(s),
    }
}

/// The key under which a class of namespace `ns` is stored: bare for the
/// default namespace, `ns:name` otherwise.
pub fn class_key(ns: &str, name: &str) -> String {
    if ns == "default" || ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}:{name}")
    }
}

#[derive(Debug, Default, Clone)]
pub struct ClassStore {
    global: HashMap<String, ClassInfo>,
}

impl ClassStore {
    /// Defines a global class under its store key. Returns true when the
    /// class was not defined before.
    pub fn define(&mut self, key: &str, info: ClassInfo) -> bool {
        // The first definition keeps its tags and comment, as CFEngine
        // keeps them.
        if self.global.contains_key(key) {
            return false;
        }
        self.global.insert(key.to_string(), info);
        true
    }

    pub fn undefine(&mut self, key: &str) -> Option<ClassInfo> {
        match self.global.get(key) {
            Some(i) if i.hard => None,
            Some(_) => self.global.remove(key),
            None => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&ClassInfo> {
        self.global.get(key)
    }

    pub fn is_defined(&self, key: &str) -> bool {
        self.global.contains_key(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &ClassInfo)> {
        self.global.iter()
    }

    pub fn len(&self) -> usize {
        self.global.len()
    }

    pub fn is_empty(&self) -> bool {
        self.global.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonify_like_cfengine() {
        assert_eq!(canonify("a-b.c d"), "a_b_c_d");
        assert_eq!(canonify("é"), "__");
        assert_eq!(canonify_class("ns:a-b"), "ns:a_b");
        assert_eq!(class_key("default", "x"), "x");
        assert_eq!(class_key("ns", "x"), "ns:x");
    }
}
