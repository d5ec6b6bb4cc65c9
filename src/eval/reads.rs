//! What an evaluation read from a store, and when each entry of the store
//! last changed: pre-evaluation goes over every loaded file more than once
//! (as cf-promises resolves the policy again once more files are in), and
//! a promise whose reads are all unchanged since it was evaluated would
//! give the same value again, so it is not evaluated again.
//!
//! Entries are named by a hash of their key. Two keys with one hash can
//! only make a promise look changed when it is not (it is evaluated again,
//! as without this log), never the other way round.

use crate::values::hash::FastMap;
use std::cell::{Cell, RefCell};
use std::hash::{BuildHasher, Hash};

/// The hash that names an entry: fixed within the process.
pub fn entry_hash<K: Hash>(key: K) -> u64 {
    foldhash::fast::FixedState::with_seed(0x5eed).hash_one(key)
}

/// Per store: when each entry last changed (a logical clock), and the log
/// of what the evaluation under way read.
/// The most read entries whose room the log keeps between evaluations.
const MAX_KEPT_READS: usize = 4096;

#[derive(Debug, Default, Clone)]
pub struct ReadLog {
    /// Whether changes are stamped at all (while pre-evaluating and while
    /// the agent runs).
    tracking: bool,
    clock: u64,
    /// Something changed while changes were not stamped: what was read
    /// before then cannot be told unchanged.
    changed_untracked: bool,
    /// Reads that ended before this clock may have missed a change.
    valid_from: u64,
    stamps: FastMap<u64, u64>,
    /// Whether reads are being logged.
    logging: Cell<bool>,
    read: RefCell<Vec<u64>>,
    /// Something was read that the log cannot name (a walk over the whole
    /// store): the evaluation cannot be told unchanged.
    unnamed: Cell<bool>,
}

/// What one evaluation read, and the clock when it ended.
#[derive(Debug, Clone)]
pub struct Reads {
    pub keys: Vec<u64>,
    pub clock: u64,
}

impl ReadLog {
    /// Stamps are kept while tracking is off, so that what was read
    /// before can still be told unchanged when tracking resumes, unless
    /// something changed in between.
    pub fn set_tracking(&mut self, on: bool) {
        if on && !self.tracking && self.changed_untracked {
            self.stamps = FastMap::default();
            self.clock += 1;
            self.valid_from = self.clock;
        }
        self.changed_untracked = false;
        self.tracking = on;
    }

    /// The entry named `h` was read.
    pub fn note_read(&self, h: impl FnOnce() -> u64) {
        if self.logging.get() {
            self.read.borrow_mut().push(h());
        }
    }

    /// Something was read that cannot be named entry by entry.
    pub fn note_unnamed(&self) {
        if self.logging.get() {
            self.unnamed.set(true);
        }
    }

    /// The entry named `h` changed (or was written: a write counts as a
    /// read too, so that a later writer of the same entry is noticed).
    pub fn note_change(&mut self, h: impl FnOnce() -> u64) {
        if !self.tracking && !self.logging.get() {
            self.changed_untracked = true;
            return;
        }
        if !self.tracking {
            self.changed_untracked = true;
        }
        let h = h();
        if self.tracking {
            self.clock += 1;
            self.stamps.insert(h, self.clock);
        }
        if self.logging.get() {
            self.read.get_mut().push(h);
        }
    }

    /// Starts logging reads.
    pub fn start(&self) {
        self.logging.set(true);
        self.read.borrow_mut().clear();
        self.unnamed.set(false);
    }

    /// Stops logging: what was read, unless something unnamed was.
    pub fn finish(&self) -> Option<Reads> {
        self.logging.set(false);
        // The buffer stays for the next evaluation's reads (one per
        // promise); what is kept is an exact copy.
        let mut read = self.read.borrow_mut();
        if self.unnamed.get() || !self.tracking {
            read.clear();
            return None;
        }
        read.sort_unstable();
        read.dedup();
        let keys = read.to_vec();
        read.clear();
        if read.capacity() > MAX_KEPT_READS {
            *read = Vec::new();
        }
        Some(Reads {
            keys,
            clock: self.clock,
        })
    }

    /// Whether nothing `reads` names has changed since.
    pub fn unchanged_since(&self, reads: &Reads) -> bool {
        self.tracking
            && reads.clock >= self.valid_from
            && reads
                .keys
                .iter()
                .all(|h| self.stamps.get(h).is_none_or(|&s| s <= reads.clock))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_after_the_read_is_seen() {
        let mut log = ReadLog::default();
        log.set_tracking(true);
        log.note_change(|| 1);
        log.start();
        log.note_read(|| 1);
        log.note_read(|| 2);
        let reads = log.finish().unwrap();
        assert!(log.unchanged_since(&reads));
        // An entry read while it did not exist, defined later.
        log.note_change(|| 2);
        assert!(!log.unchanged_since(&reads));
    }

    #[test]
    fn a_change_while_not_tracking_is_seen() {
        let mut log = ReadLog::default();
        log.set_tracking(true);
        log.start();
        log.note_read(|| 1);
        let reads = log.finish().unwrap();
        log.set_tracking(false);
        log.set_tracking(true);
        assert!(log.unchanged_since(&reads));
        log.set_tracking(false);
        log.note_change(|| 2);
        log.set_tracking(true);
        assert!(!log.unchanged_since(&reads));
    }

    #[test]
    fn a_walk_over_the_store_cannot_be_told_unchanged() {
        let mut log = ReadLog::default();
        log.set_tracking(true);
        log.start();
        log.note_unnamed();
        assert!(log.finish().is_none());
    }

    #[test]
    fn nothing_is_unchanged_without_tracking() {
        let log = ReadLog::default();
        log.start();
        assert!(log.finish().is_none());
    }
}
