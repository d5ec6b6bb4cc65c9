//! The variable store: every variable by namespace, scope (bundle) and
//! name, with its type, tags, comment and origin.

use super::reads::{ReadLog, entry_hash};
use crate::values::hash::FastMap;
use crate::values::value::{DataType, Deferred, Origin, Value};
use std::sync::OnceLock;

/// How a later definition of the same variable is treated (`policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VarPolicy {
    #[default]
    Free,
    Constant,
    IfDefined,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub value: Value,
    pub dtype: DataType,
    pub tags: Vec<String>,
    pub comment: Option<String>,
    pub origin: Origin,
    pub policy: VarPolicy,
    /// Which items of a list are function calls kept as written, not
    /// strings: cf-promises keeps the calls of `bundlesequence => { "a",
    /// b("x") }` in `control_common.bundlesequence` and shows them
    /// unquoted. `None` for every other variable.
    pub call_items: Option<Box<[bool]>>,
}

impl Variable {
    pub fn new(value: Value, dtype: DataType, origin: Origin) -> Variable {
        Variable {
            value,
            dtype,
            tags: Vec::new(),
            comment: None,
            origin,
            policy: VarPolicy::Free,
            call_items: None,
        }
    }

    pub fn with_tags(mut self, tags: Vec<String>) -> Variable {
        self.tags = tags;
        self
    }
}

/// A scope is a bundle (or a special scope like `sys`) in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeKey {
    pub ns: String,
    pub scope: String,
}

impl ScopeKey {
    pub fn new(ns: &str, scope: &str) -> ScopeKey {
        ScopeKey {
            ns: ns.to_string(),
            scope: scope.to_string(),
        }
    }
}

/// A scope's names borrowed, to look a `ScopeKey` up without building one:
/// it hashes as `ScopeKey` does (the two names in order).
#[derive(Hash)]
struct ScopeRef<'a> {
    ns: &'a str,
    scope: &'a str,
}

impl hashbrown::Equivalent<ScopeKey> for ScopeRef<'_> {
    fn equivalent(&self, key: &ScopeKey) -> bool {
        self.ns == key.ns && self.scope == key.scope
    }
}

/// A map by scope that can be looked up with a `ScopeRef`.
type ScopeMap<V> = hashbrown::HashMap<ScopeKey, V, foldhash::fast::RandomState>;

/// A variable of the store and its place in cf-agent's table.
#[derive(Debug, Clone)]
struct Stored {
    var: Variable,
    place: TablePlace,
    /// Its value is made at its first read (see `deferred`): only such
    /// a variable is looked for there.
    deferred: bool,
}

/// One earlier definition that a later one replaced, for `--explain`.
#[derive(Debug, Clone, PartialEq)]
pub struct Overridden {
    pub variable: Variable,
}

#[derive(Debug, Default, Clone)]
pub struct VarStore {
    /// Each variable with when it came into the store: one entry (one
    /// name, one insert) for both.
    scopes: ScopeMap<FastMap<String, Stored>>,
    /// What each definition replaced, in order.
    history: FastMap<(ScopeKey, String), Vec<Overridden>>,
    /// How many variables have come in so far: the next one's number.
    next_seq: u64,
    /// How many variables cf-agent's global table would hold now.
    global_len: usize,
    /// What evaluations read, and when each variable last changed.
    pub reads: ReadLog,
    /// The variables whose value is made at their first read. Each also
    /// sits in `scopes` with a stand-in value, so that it takes its place
    /// in the table when it is put, as the others do.
    deferred: Vec<DeferredVar>,
}

/// A variable of `scopes` whose value is made at its first read.
#[derive(Debug, Clone)]
struct DeferredVar {
    scope: ScopeKey,
    name: String,
    make: Deferred,
    /// The variable with its value made, once read.
    made: OnceLock<Variable>,
}

/// When a variable came into the store: its number in the order of
/// arrival and how many variables cf-agent's global table held once it
/// was in (counted only for variables that table holds). A variable
/// redefined keeps its place, as cf-agent's table replaces a value where
/// it is; one removed and defined again arrives anew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TablePlace {
    pub seq: u64,
    pub load: usize,
}

/// Whether cf-agent 3.21 keeps a variable in its global table: all but
/// those of `match` and `this`, which it keeps apart, and the sys
/// variables CFEngine added later (`sys.cpusockets`, ...), which its
/// table does not hold, so that they move no classic array's order.
/// Where a variable is in the deferred list (a free function: the caller
/// may hold one of `scopes`' entries while it asks).
fn deferred_index(deferred: &[DeferredVar], ns: &str, scope: &str, name: &str) -> Option<usize> {
    deferred
        .iter()
        .position(|d| d.name == name && d.scope.scope == scope && d.scope.ns == ns)
}

fn in_global_table(scope: &str, name: &str) -> bool {
    match scope {
        "match" | "this" => false,
        "sys" => !crate::schema::newer::SYS_VARS
            .iter()
            .any(|(n, _)| *n == name),
        _ => true,
    }
}

/// What happened to a `put`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutResult {
    New,
    Changed,
    Unchanged,
}

/// A scope's table in `scopes`, made empty on its first use: one lookup.
/// (A function of the field, so that a caller may still use the store's
/// other fields while it holds the table.)
fn scope_mut<'m>(
    scopes: &'m mut ScopeMap<FastMap<String, Stored>>,
    ns: &str,
    scope: &str,
) -> &'m mut FastMap<String, Stored> {
    match scopes.entry_ref(&ScopeRef { ns, scope }) {
        hashbrown::hash_map::EntryRef::Occupied(e) => e.into_mut(),
        hashbrown::hash_map::EntryRef::Vacant(e) => {
            e.insert_with_key(ScopeKey::new(ns, scope), FastMap::default())
        }
    }
}

impl VarStore {
    pub fn get(&self, ns: &str, scope: &str, name: &str) -> Option<&Variable> {
        self.reads.note_read(|| entry_hash((ns, scope, name)));
        self.scopes
            .get(&ScopeRef { ns, scope })
            .and_then(|m| m.get(name))
            .map(|s| match s.deferred {
                true => self.resolve(ns, scope, name, &s.var),
                false => &s.var,
            })
    }

    /// The variable as read: `stored`, or its value made if it is deferred.
    fn resolve<'a>(
        &'a self,
        ns: &str,
        scope: &str,
        name: &str,
        stored: &'a Variable,
    ) -> &'a Variable {
        if self.deferred.is_empty() {
            return stored;
        }
        match deferred_index(&self.deferred, ns, scope, name) {
            Some(i) => {
                let d = &self.deferred[i];
                d.made.get_or_init(|| {
                    let mut made = stored.clone();
                    made.value = d.make.get().clone();
                    made
                })
            }
            None => stored,
        }
    }

    /// Puts a variable whose value `make` makes at its first read; `var`
    /// gives its type, tags and origin (its value is not read).
    pub fn put_deferred(
        &mut self,
        ns: &str,
        scope: &str,
        name: &str,
        var: Variable,
        make: Deferred,
    ) {
        self.put(ns, scope, name, var);
        if let Some(s) = self
            .scopes
            .get_mut(&ScopeRef { ns, scope })
            .and_then(|m| m.get_mut(name))
        {
            s.deferred = true;
        }
        self.deferred.push(DeferredVar {
            scope: ScopeKey::new(ns, scope),
            name: name.to_string(),
            make,
            made: OnceLock::new(),
        });
    }

    /// Gives a deferred variable its value in `scopes`, before it is
    /// changed or replaced there.
    fn settle_deferred(&mut self, ns: &str, scope: &str, name: &str) {
        if self.deferred.is_empty() {
            return;
        }
        let Some(stored) = self
            .scopes
            .get_mut(&ScopeRef { ns, scope })
            .and_then(|m| m.get_mut(name))
            .filter(|s| s.deferred)
        else {
            return;
        };
        stored.deferred = false;
        if let Some(i) = deferred_index(&self.deferred, ns, scope, name) {
            let d = self.deferred.swap_remove(i);
            stored.var.value = d.make.get().clone();
        }
    }

    pub fn get_mut(&mut self, ns: &str, scope: &str, name: &str) -> Option<&mut Variable> {
        // Whoever takes a variable to change it may change it.
        self.reads.note_change(|| entry_hash((ns, scope, name)));
        self.settle_deferred(ns, scope, name);
        self.scopes
            .get_mut(&ScopeRef { ns, scope })
            .and_then(|m| m.get_mut(name))
            .map(|s| &mut s.var)
    }

    /// Room for `additional` more variables in a scope, made now if it is
    /// not yet: discovery puts ~150 into `sys` at once, and the table
    /// would otherwise grow (and be copied) seven times on the way.
    pub fn reserve(&mut self, ns: &str, scope: &str, additional: usize) {
        scope_mut(&mut self.scopes, ns, scope).reserve(additional);
    }

    pub fn put(&mut self, ns: &str, scope: &str, name: &str, var: Variable) -> PutResult {
        let result = self.put_unlogged(ns, scope, name, var);
        if result == PutResult::Unchanged {
            self.reads.note_read(|| entry_hash((ns, scope, name)));
        } else {
            self.reads.note_change(|| entry_hash((ns, scope, name)));
        }
        result
    }

    fn put_unlogged(&mut self, ns: &str, scope: &str, name: &str, var: Variable) -> PutResult {
        self.settle_deferred(ns, scope, name);
        let map = scope_mut(&mut self.scopes, ns, scope);
        match map.get_mut(name) {
            None => {
                if in_global_table(scope, name) {
                    self.global_len += 1;
                }
                let place = TablePlace {
                    seq: self.next_seq,
                    load: self.global_len,
                };
                self.next_seq += 1;
                map.insert(
                    name.to_string(),
                    Stored {
                        var,
                        place,
                        deferred: false,
                    },
                );
                PutResult::New
            }
            Some(Stored { var: old, .. }) => {
                if old.value == var.value && old.dtype == var.dtype {
                    // Same value: keep the newer metadata without history noise.
                    old.tags = var.tags;
                    old.comment = var.comment;
                    return PutResult::Unchanged;
                }
                let prev = std::mem::replace(old, var);
                self.history
                    .entry((ScopeKey::new(ns, scope), name.to_string()))
                    .or_default()
                    .push(Overridden { variable: prev });
                PutResult::Changed
            }
        }
    }

    pub fn remove(&mut self, ns: &str, scope: &str, name: &str) -> Option<Variable> {
        self.settle_deferred(ns, scope, name);
        let key = ScopeRef { ns, scope };
        let old = self.scopes.get_mut(&key).and_then(|m| m.remove(name))?;
        self.reads.note_change(|| entry_hash((ns, scope, name)));
        if in_global_table(scope, name) {
            self.global_len -= 1;
        }
        Some(old.var)
    }

    /// When the variable `name` of a scope came into the store.
    pub fn place(&self, ns: &str, scope: &str, name: &str) -> Option<TablePlace> {
        // A place depends on how full the whole table is.
        self.reads.note_unnamed();
        self.scopes
            .get(&ScopeRef { ns, scope })
            .and_then(|m| m.get(name))
            .map(|s| s.place)
    }

    /// Removes the classic array elements (`name[key]`) of one scope:
    /// cf-agent resets a bundle's arrays when the bundle is entered again
    /// (so they do not accumulate over calls), and keeps its other
    /// variables.
    pub fn clear_arrays(&mut self, ns: &str, scope: &str) {
        let key = ScopeRef { ns, scope };
        if let Some(m) = self.scopes.get_mut(&key) {
            let before = m.len();
            let reads = &mut self.reads;
            m.retain(|name, _| {
                let array = name.contains('[');
                if array {
                    reads.note_change(|| entry_hash((ns, scope, name.as_str())));
                }
                !array
            });
            // Array elements only: no newer sys variable is one.
            if in_global_table(scope, "") {
                self.global_len -= before - m.len();
            }
        }
    }

    /// The variables of one scope, by name, in no particular order.
    pub fn scope<'a>(
        &'a self,
        ns: &'a str,
        scope: &'a str,
    ) -> Option<impl Iterator<Item = (&'a String, &'a Variable)> + 'a> {
        self.scope_with_prefix(ns, scope, "")
    }

    /// The variables of a scope whose names start with `prefix` (a classic
    /// array's entries). The others are passed over unread: a big scope
    /// was read whole for each array a policy asked for.
    pub fn scope_with_prefix<'a>(
        &'a self,
        ns: &'a str,
        scope: &'a str,
        prefix: &'a str,
    ) -> Option<impl Iterator<Item = (&'a String, &'a Variable)> + 'a> {
        self.reads.note_unnamed();
        let vars = self.scopes.get(&ScopeRef { ns, scope })?;
        Some(
            vars.iter()
                .filter(move |(n, _)| n.starts_with(prefix))
                .map(move |(n, s)| (n, self.resolve(ns, scope, n, &s.var))),
        )
    }

    /// Every variable, as (scope, name, variable), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&ScopeKey, &String, &Variable)> {
        self.reads.note_unnamed();
        self.scopes.iter().flat_map(move |(k, m)| {
            m.iter()
                .map(move |(n, s)| (k, n, self.resolve(&k.ns, &k.scope, n, &s.var)))
        })
    }

    pub fn history(&self, ns: &str, scope: &str, name: &str) -> &[Overridden] {
        self.reads.note_unnamed();
        self.history
            .get(&(ScopeKey::new(ns, scope), name.to_string()))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.reads.note_unnamed();
        self.scopes.values().map(FastMap::len).sum()
    }

    /// How many variables cf-agent's global variable table would hold:
    /// all but the `match` and `this` scopes, which it keeps apart. The
    /// table's size, and so the order a walk over it sees, follows.
    pub fn global_table_len(&self) -> usize {
        self.reads.note_unnamed();
        self.global_len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_and_override() {
        let mut s = VarStore::default();
        let v = |x: &str| Variable::new(Value::str(x), DataType::String, Origin::Agent);
        assert_eq!(s.put("default", "main", "a", v("1")), PutResult::New);
        assert_eq!(s.put("default", "main", "a", v("1")), PutResult::Unchanged);
        assert_eq!(s.put("default", "main", "a", v("2")), PutResult::Changed);
        assert_eq!(
            s.get("default", "main", "a").unwrap().value,
            Value::str("2")
        );
        assert_eq!(s.history("default", "main", "a").len(), 1);
    }
}
