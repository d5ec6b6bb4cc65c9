//! Defined classes: global (hard and namespace-wide soft classes) and the
//! bundle-local ones of the bundle being evaluated.

use super::reads::{ReadLog, entry_hash};
use crate::values::hash::FastMap;
use crate::values::value::{Origin, Tags};

#[derive(Debug, Clone, PartialEq)]
pub struct ClassInfo {
    pub tags: Tags,
    pub comment: Option<String>,
    pub origin: Origin,
    /// Discovered by the agent (cannot be cancelled by policy).
    pub hard: bool,
}

impl ClassInfo {
    pub fn soft(origin: Origin, tags: impl Into<Tags>) -> ClassInfo {
        ClassInfo {
            tags: tags.into(),
            comment: None,
            origin,
            hard: false,
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct ClassStore {
    global: FastMap<String, ClassInfo>,
    /// What evaluations read, and when each class last changed.
    pub reads: ReadLog,
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
        self.reads.note_change(|| entry_hash(key));
        true
    }

    pub fn undefine(&mut self, key: &str) -> Option<ClassInfo> {
        match self.global.get(key) {
            Some(i) if i.hard => None,
            Some(_) => {
                self.reads.note_change(|| entry_hash(key));
                self.global.remove(key)
            }
            None => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&ClassInfo> {
        self.reads.note_read(|| entry_hash(key));
        self.global.get(key)
    }

    pub fn is_defined(&self, key: &str) -> bool {
        self.reads.note_read(|| entry_hash(key));
        self.global.contains_key(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &ClassInfo)> {
        self.reads.note_unnamed();
        self.global.iter()
    }

    pub fn len(&self) -> usize {
        self.reads.note_unnamed();
        self.global.len()
    }

    pub fn is_empty(&self) -> bool {
        self.global.is_empty()
    }
}
