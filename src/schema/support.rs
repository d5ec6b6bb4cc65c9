//! How the agent supports each attribute of the schema: compared with
//! cf-agent by a named test, read by another component only, refused, or
//! (work ahead) read without a comparing test, or not read at all. The
//! table is `support.tsv` beside this file; the agent refuses what it
//! marks `refused`, and tests/it/attribute_support.rs walks every promise
//! type and body type of the schema against it.

use crate::values::hash::FastMap;
use std::sync::OnceLock;

/// The table's text.
pub const TABLE: &str = include_str!("support.tsv");

/// How one attribute is supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Its effect is compared with cf-agent's by this test.
    Tested(&'static str),
    /// Read by another component (cf-serverd, cf-execd, ...), as in cf-agent.
    OtherComponent(&'static str),
    /// Refused where it is written, for this reason.
    Refused(&'static str),
    /// Read by the agent; no comparing test yet.
    Untested,
    /// Accepted and not read yet.
    Ignored,
}

/// Whose attribute: a promise type's or a body type's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    Promise,
    Body,
}

type Key = (Owner, &'static str, &'static str);

/// Every row of the table; a malformed row is an error naming its line.
pub fn rows() -> Result<Vec<(Key, Support)>, String> {
    parse_rows(TABLE.lines().enumerate())
}

/// The rows among `lines` (with their 0-based index), comments and blank
/// lines left out.
fn parse_rows(
    lines: impl Iterator<Item = (usize, &'static str)>,
) -> Result<Vec<(Key, Support)>, String> {
    let mut out = Vec::new();
    for (i, line) in lines {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let bad = || format!("support.tsv:{}: malformed row '{line}'", i + 1);
        let mut cols = line.split('\t');
        let (Some(owner), Some(attr), Some(status), Some(detail), None) = (
            cols.next(),
            cols.next(),
            cols.next(),
            cols.next(),
            cols.next(),
        ) else {
            return Err(bad());
        };
        let (kind, name) = owner.split_once(':').ok_or_else(bad)?;
        let kind = match kind {
            "promise" => Owner::Promise,
            "body" => Owner::Body,
            _ => return Err(bad()),
        };
        let support = match status {
            "tested" => Support::Tested(detail),
            "other" => Support::OtherComponent(detail),
            "refused" => Support::Refused(detail),
            "untested" => Support::Untested,
            "ignored" => Support::Ignored,
            _ => return Err(bad()),
        };
        out.push(((kind, name, attr), support));
    }
    Ok(out)
}

fn table() -> &'static FastMap<Key, Support> {
    static TABLE_MAP: OnceLock<FastMap<Key, Support>> = OnceLock::new();
    TABLE_MAP.get_or_init(|| rows().unwrap_or_default().into_iter().collect())
}

/// How an attribute of a promise type (`Owner::Promise`) or a body type is
/// supported; `None` for one the table does not know.
pub fn support(owner: Owner, type_name: &str, attr: &str) -> Option<Support> {
    // The map is covariant in its keys: looked up with shorter-lived names.
    let map: &FastMap<(Owner, &str, &str), Support> = table();
    map.get(&(owner, type_name, attr)).copied()
}

/// Why an attribute is refused, if it is.
pub fn refused(owner: Owner, type_name: &str, attr: &str) -> Option<&'static str> {
    let key = (owner == Owner::Body, type_name, attr);
    REFUSED
        .binary_search_by(|(body, t, a, _)| (*body, *t, *a).cmp(&key))
        .ok()
        .map(|i| REFUSED[i].3)
}

/// The table's refused rows, `(is a body's, type, attribute, why)` sorted,
/// taken out of it when the agent is built (build.rs).
static REFUSED: &[(bool, &str, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/refused.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads() {
        let rows = rows().unwrap();
        assert!(rows.len() > 800);
        assert_eq!(
            refused(Owner::Promise, "databases", "database_type"),
            Some("the promise type is not supported yet")
        );
        assert!(refused(Owner::Body, "acl", "aces").is_none());
        let all_refused: Vec<_> = rows
            .iter()
            .filter(|(_, s)| matches!(s, Support::Refused(_)))
            .collect();
        assert_eq!(REFUSED.len(), all_refused.len());
        for ((owner, t, a), s) in all_refused {
            let Support::Refused(why) = s else {
                unreachable!()
            };
            assert_eq!(refused(*owner, t, a), Some(*why));
        }
        assert_eq!(
            support(Owner::Body, "changes", "hash"),
            Some(Support::Tested("tests/agent/files_changes.cf"))
        );
    }
}
