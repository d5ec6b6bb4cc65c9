//! `this.*` of the promise being evaluated. Every promise sets the same
//! dozen names (its line, file, handle, promiser, ...): each has a slot of
//! its own, written over in place, so that setting them takes no hashing
//! and, when the text is as long as before, no allocation. Other names
//! (set by a few promise types) go to a map.

use crate::values::hash::FastMap;
use crate::values::value::Value;

/// The names with a slot of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    LineNumber,
    FileName,
    DirName,
    Bundle,
    Namespace,
    Uid,
    Gid,
    Pid,
    Ppid,
    Handle,
    Promiser,
}

const SLOTS: usize = 11;

impl Slot {
    fn of(name: &str) -> Option<Slot> {
        Some(match name {
            "promise_linenumber" => Slot::LineNumber,
            "promise_filename" => Slot::FileName,
            "promise_dirname" => Slot::DirName,
            "bundle" => Slot::Bundle,
            "namespace" => Slot::Namespace,
            "promiser_uid" => Slot::Uid,
            "promiser_gid" => Slot::Gid,
            "promiser_pid" => Slot::Pid,
            "promiser_ppid" => Slot::Ppid,
            "handle" => Slot::Handle,
            "promiser" => Slot::Promiser,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct ThisVars {
    slots: [Option<Value>; SLOTS],
    other: FastMap<String, Value>,
}

impl ThisVars {
    pub fn get(&self, name: &str) -> Option<&Value> {
        match Slot::of(name) {
            Some(slot) => self.slots[slot as usize].as_ref(),
            None => self.other.get(name),
        }
    }

    pub fn set(&mut self, name: &str, value: Value) {
        match Slot::of(name) {
            Some(slot) => self.slots[slot as usize] = Some(value),
            None => match self.other.get_mut(name) {
                Some(v) => *v = value,
                None => {
                    self.other.insert(name.to_owned(), value);
                }
            },
        }
    }

    /// Sets a slot to `text`, in the old value's buffer.
    pub fn put_text(&mut self, slot: Slot, text: &str) {
        match &mut self.slots[slot as usize] {
            Some(Value::Scalar(old)) => {
                if old != text {
                    old.clear();
                    old.push_str(text);
                }
            }
            other => *other = Some(Value::str(text)),
        }
    }

    /// Sets a slot to the text `write` appends to an empty string, in the
    /// old value's buffer.
    pub fn put_with(&mut self, slot: Slot, write: impl FnOnce(&mut String)) {
        match &mut self.slots[slot as usize] {
            Some(Value::Scalar(old)) => {
                old.clear();
                write(old);
            }
            other => {
                let mut text = String::new();
                write(&mut text);
                *other = Some(Value::Scalar(text));
            }
        }
    }

    pub fn unset(&mut self, slot: Slot) {
        self.slots[slot as usize] = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_other_names_read_as_set() {
        let mut this = ThisVars::default();
        assert!(this.get("promiser").is_none());
        this.put_text(Slot::Promiser, "/etc/motd");
        this.set("k", Value::str("key"));
        this.put_with(Slot::Handle, |t| t.push_str("promise_x_1"));
        assert_eq!(this.get("promiser"), Some(&Value::str("/etc/motd")));
        assert_eq!(this.get("k"), Some(&Value::str("key")));
        assert_eq!(this.get("handle"), Some(&Value::str("promise_x_1")));
        this.set("promiser", Value::List(vec!["a".into()]));
        this.put_text(Slot::Promiser, "b");
        assert_eq!(this.get("promiser"), Some(&Value::str("b")));
        this.unset(Slot::Promiser);
        assert!(this.get("promiser").is_none());
        assert!(this.get("v").is_none());
    }
}
