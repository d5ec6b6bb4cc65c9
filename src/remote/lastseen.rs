//! Which key each server address showed: what cf-agent keeps in its
//! `lastseen` database (LMDB, `WORKDIR/state/cf_lastseen.lmdb`), and what
//! lets a changed server key be told apart from a new server. We keep it
//! as JSON in `WORKDIR/state/convergent_lastseen.json`; cf-agent's own
//! database is neither read nor written.

use crate::host::local;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One address: the key it showed and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// `MD5=<hex>`.
    pub key: String,
    /// The local user the connection was made as.
    pub user: String,
    /// Seconds since the epoch.
    pub when: i64,
    /// `outgoing` (we connected) or `trusted` (cf-key -t named it).
    pub how: String,
}

/// The record of a work directory.
#[derive(Clone, Debug)]
pub struct LastSeen {
    path: PathBuf,
}

impl LastSeen {
    pub fn of_workdir(workdir: &Path) -> LastSeen {
        LastSeen {
            path: workdir.join("state").join("convergent_lastseen.json"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every address and what it showed; an absent record is empty.
    pub fn load(&self) -> Result<BTreeMap<String, Seen>, String> {
        match local::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("'{}' is not a record we wrote: {e}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(format!(
                "cannot read '{}': {}",
                self.path.display(),
                crate::host::strerror(&e)
            )),
        }
    }

    fn save(&self, all: &BTreeMap<String, Seen>) -> Result<(), String> {
        if let Some(dir) = self.path.parent() {
            local::create_private_dir(dir).map_err(|e| {
                format!(
                    "cannot make '{}': {}",
                    dir.display(),
                    crate::host::strerror(&e)
                )
            })?;
        }
        let text = serde_json::to_vec_pretty(all).map_err(|e| e.to_string())?;
        local::write_private(&self.path, &text).map_err(|e| {
            format!(
                "cannot write '{}': {}",
                self.path.display(),
                crate::host::strerror(&e)
            )
        })
    }

    /// The key `address` showed last, if any.
    pub fn key_of(&self, address: &str) -> Result<Option<Seen>, String> {
        Ok(self.load()?.remove(address))
    }

    /// Records that `address` showed `key`.
    pub fn record(&self, address: &str, seen: Seen) -> Result<(), String> {
        let mut all = self.load()?;
        all.insert(address.to_string(), seen);
        self.save(&all)
    }

    /// Forgets `address`; returns the key it had.
    pub fn remove_address(&self, address: &str) -> Result<Option<String>, String> {
        let mut all = self.load()?;
        let gone = all.remove(address).map(|s| s.key);
        if gone.is_some() {
            self.save(&all)?;
        }
        Ok(gone)
    }

    /// Forgets every address that showed `key`; returns them.
    pub fn remove_key(&self, key: &str) -> Result<Vec<String>, String> {
        let mut all = self.load()?;
        let gone: Vec<String> = all
            .iter()
            .filter(|(_, s)| s.key == key)
            .map(|(a, _)| a.clone())
            .collect();
        if !gone.is_empty() {
            all.retain(|_, s| s.key != key);
            self.save(&all)?;
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(key: &str) -> Seen {
        Seen {
            key: key.into(),
            user: "root".into(),
            when: 1,
            how: "outgoing".into(),
        }
    }

    #[test]
    fn record_and_forget() {
        let tmp = tempfile::tempdir().unwrap();
        let ls = LastSeen::of_workdir(tmp.path());
        assert!(ls.load().unwrap().is_empty());
        ls.record("10.0.0.1", seen("MD5=aa")).unwrap();
        ls.record("10.0.0.2", seen("MD5=aa")).unwrap();
        ls.record("10.0.0.3", seen("MD5=bb")).unwrap();
        assert_eq!(ls.key_of("10.0.0.3").unwrap().unwrap().key, "MD5=bb");
        assert_eq!(ls.remove_key("MD5=aa").unwrap(), ["10.0.0.1", "10.0.0.2"]);
        assert_eq!(
            ls.remove_address("10.0.0.3").unwrap().as_deref(),
            Some("MD5=bb")
        );
        assert_eq!(ls.remove_address("10.0.0.3").unwrap(), None);
        assert!(ls.load().unwrap().is_empty());
    }

    #[test]
    fn a_damaged_record_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let ls = LastSeen::of_workdir(tmp.path());
        local::create_private_dir(ls.path().parent().unwrap()).unwrap();
        local::write_private(ls.path(), b"{not json").unwrap();
        let e = ls.load().unwrap_err();
        assert!(e.contains("convergent_lastseen.json"), "{e}");
    }
}
