//! State that outlives a run: promise locks (`ifelapsed`), persistent
//! classes, and the lock that keeps two agents off one work directory.
//!
//! The store is SQLite (bundled): every write is a transaction, so a kill
//! at any instant leaves either the old or the new state, and several
//! processes may open it safely.

mod file_changes;
pub mod journal;
mod runlock;

pub use file_changes::FileStat;

pub use runlock::{RunLock, RunLockError};

use crate::host::local;
use rusqlite::{Connection, OptionalExtension, params};
use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StateError {
    #[error("cannot create the state directory '{path}': {source}")]
    Dir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make the state file '{path}' private: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("state database '{path}': {source}")]
    Db {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
}

/// Whether a promise may act now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockStatus {
    Free,
    /// It acted less than `ifelapsed` minutes ago.
    TooSoon {
        minutes_left: u64,
    },
}

/// A class that stays defined across runs until it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentClass {
    pub name: String,
    /// Seconds since the epoch.
    pub expires: i64,
    pub tags: Vec<String>,
}

/// The schema this agent sets up (SQLite's `user_version`).
const SCHEMA_VERSION: i64 = 1;

pub struct StateStore {
    /// Opened at start when the database exists, else at the first write.
    conn: OnceCell<Connection>,
    path: PathBuf,
    /// Last completion time of each promise lock, loaded once.
    done: HashMap<String, i64>,
    /// Completions not yet written.
    pending: Vec<(String, i64)>,
}

impl StateStore {
    /// The state directory of a work directory.
    pub fn dir(workdir: &Path) -> PathBuf {
        workdir.join("state")
    }

    pub fn open(workdir: &Path) -> Result<StateStore, StateError> {
        let dir = Self::dir(workdir);
        // Private, as cf-agent's: the state holds expanded command lines
        // and the journal the prior content of files.
        let dir_err = |source| StateError::Dir {
            path: dir.display().to_string(),
            source,
        };
        local::create_private_dir(&dir).map_err(dir_err)?;
        let path = dir.join("convergent.db");
        let store = StateStore {
            conn: OnceCell::new(),
            path,
            done: HashMap::new(),
            pending: Vec::new(),
        };
        // A work directory without a database has no state yet: it is
        // created at the first write, so a run that records nothing costs
        // no database (SQLite's creation syncs its files nine times).
        if !local::exists(&store.path) {
            return Ok(store);
        }
        store.connect()?;
        let mut store = store;
        let mut done = HashMap::new();
        if let Some(conn) = store.conn.get() {
            let db_err = store.db_err();
            let mut stmt = conn
                .prepare("SELECT key, last_done FROM promise_locks")
                .map_err(&db_err)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .map_err(&db_err)?;
            for row in rows.flatten() {
                done.insert(row.0, row.1);
            }
        }
        store.done = done;
        Ok(store)
    }

    /// The open database, when there is one (reads of a store never
    /// written find nothing).
    fn reader(&self) -> Option<&Connection> {
        self.conn.get()
    }

    /// The database, created at the first write.
    fn writer(&self) -> Result<&Connection, StateError> {
        match self.conn.get() {
            Some(conn) => Ok(conn),
            None => self.connect(),
        }
    }

    /// Opens (creating when needed) the database and its schema.
    fn connect(&self) -> Result<&Connection, StateError> {
        let dir = self.state_dir();
        // SQLite gives its side files (-wal, -shm) the database's mode, so
        // the database is made 0600 before SQLite opens it; side files an
        // older agent left readable are tightened too.
        for (name, made) in [
            ("convergent.db", true),
            ("convergent.db-wal", false),
            ("convergent.db-shm", false),
        ] {
            let file = dir.join(name);
            let done = if made {
                local::ensure_private_file(&file)
            } else {
                local::tighten_private_file(&file)
            };
            done.map_err(|source| StateError::File {
                path: file.display().to_string(),
                source,
            })?;
        }
        let db_err = self.db_err();
        let conn = Connection::open(&self.path).map_err(&db_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(&db_err)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;")
            .map_err(&db_err)?;
        // The schema is set up once per database, not parsed again on
        // every run: its version is kept in SQLite's user_version.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(&db_err)?;
        if version != SCHEMA_VERSION {
            conn.execute_batch(
                "PRAGMA journal_mode = WAL;
                 CREATE TABLE IF NOT EXISTS promise_locks (
                     key TEXT PRIMARY KEY,
                     last_done INTEGER NOT NULL
                 );
                 CREATE TABLE IF NOT EXISTS promise_running (
                     key TEXT PRIMARY KEY,
                     started INTEGER NOT NULL
                 );
                 CREATE TABLE IF NOT EXISTS persistent_classes (
                     name TEXT PRIMARY KEY,
                     expires INTEGER NOT NULL,
                     tags TEXT NOT NULL
                 );",
            )
            .map_err(&db_err)?;
            conn.execute_batch(file_changes::SCHEMA).map_err(&db_err)?;
            conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))
                .map_err(&db_err)?;
        }
        Ok(self.conn.get_or_init(|| conn))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state directory (where cf-agent's `file_changes.log` is).
    pub fn state_dir(&self) -> &Path {
        self.path.parent().unwrap_or(&self.path)
    }

    /// Whether the promise with this lock key may act at `now` (seconds),
    /// given its `ifelapsed` in minutes.
    pub fn lock_status(&self, key: &str, now: i64, ifelapsed_minutes: u64) -> LockStatus {
        let Some(&last) = self.done.get(key) else {
            return LockStatus::Free;
        };
        let window = (ifelapsed_minutes as i64) * 60;
        let elapsed = now - last;
        if elapsed >= 0 && elapsed < window {
            let left = (window - elapsed + 59) / 60;
            LockStatus::TooSoon {
                minutes_left: left as u64,
            }
        } else {
            LockStatus::Free
        }
    }

    /// When an agent began acting on the promise with this lock key and did
    /// not finish (it is still running, or was killed): cf-agent's
    /// `lock.` entry, which `expireafter` ends.
    pub fn running_since(&self, key: &str) -> Option<i64> {
        self.reader()?
            .query_row(
                "SELECT started FROM promise_running WHERE key = ?1",
                params![key],
                |r| r.get(0),
            )
            .ok()
    }

    /// Notes, at once, that the promise with this lock key is acting
    /// since `now`; `finished` takes the note away.
    pub fn acting(&mut self, key: &str, now: i64) -> Result<(), StateError> {
        self.writer()?
            .execute(
                "INSERT INTO promise_running (key, started) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET started = excluded.started",
                params![key, now],
            )
            .map(|_| ())
            .map_err(|source| StateError::Db {
                path: self.path.display().to_string(),
                source,
            })
    }

    /// The promise with this lock key is done acting (or its stale note
    /// expired).
    pub fn finished(&mut self, key: &str) -> Result<(), StateError> {
        let Some(conn) = self.reader() else {
            return Ok(());
        };
        conn.execute("DELETE FROM promise_running WHERE key = ?1", params![key])
            .map(|_| ())
            .map_err(|source| StateError::Db {
                path: self.path.display().to_string(),
                source,
            })
    }

    /// Records that the promise acted at `now`. Written at the next flush.
    pub fn record_done(&mut self, key: &str, now: i64) {
        self.done.insert(key.to_string(), now);
        self.pending.push((key.to_string(), now));
    }

    /// Writes pending lock records in one transaction.
    pub fn flush(&mut self) -> Result<(), StateError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let path = self.path.display().to_string();
        let db_err = |source| StateError::Db {
            path: path.clone(),
            source,
        };
        let tx = self.writer()?.unchecked_transaction().map_err(db_err)?;
        {
            let mut stmt = tx
                .prepare("INSERT INTO promise_locks (key, last_done) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET last_done = excluded.last_done")
                .map_err(db_err)?;
            for (k, t) in &self.pending {
                stmt.execute(params![k, t]).map_err(db_err)?;
            }
        }
        tx.commit().map_err(db_err)?;
        self.pending.clear();
        Ok(())
    }

    /// Persistent classes that have not expired at `now`; expired ones are
    /// deleted. As cf-agent (EvalContextHeapPersistentLoadAll: `now >
    /// expires`), a class is still defined in the second it expires, so a
    /// persistence of 0 minutes reaches a run in the same second.
    pub fn persistent_classes(&mut self, now: i64) -> Result<Vec<PersistentClass>, StateError> {
        let path = self.path.display().to_string();
        let db_err = |source| StateError::Db {
            path: path.clone(),
            source,
        };
        let Some(conn) = self.reader() else {
            return Ok(Vec::new());
        };
        conn.execute(
            "DELETE FROM persistent_classes WHERE expires < ?1",
            params![now],
        )
        .map_err(db_err)?;
        let mut stmt = conn
            .prepare("SELECT name, expires, tags FROM persistent_classes ORDER BY name")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(PersistentClass {
                    name: r.get(0)?,
                    expires: r.get(1)?,
                    tags: r
                        .get::<_, String>(2)?
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                })
            })
            .map_err(db_err)?;
        Ok(rows.flatten().collect())
    }

    /// Makes a class persist until `expires`. With `reset` (the default
    /// timer policy) a later definition moves the expiry; with `absolute`
    /// an existing expiry stays.
    pub fn persist_class(
        &mut self,
        class: &PersistentClass,
        reset: bool,
    ) -> Result<(), StateError> {
        let path = self.path.display().to_string();
        let db_err = |source| StateError::Db {
            path: path.clone(),
            source,
        };
        let conn = self.writer()?;
        let existing: Option<i64> = conn
            .query_row(
                "SELECT expires FROM persistent_classes WHERE name = ?1",
                params![class.name],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        // cf-agent 3.28's words for each case, at verbose level; the
        // minutes counted from now.
        let now = crate::host::clock::now_secs();
        let minutes = (class.expires - now + 59).div_euclid(60);
        match existing {
            Some(expires) if !reset => {
                crate::debug!(
                    "Persistent class '{}' is already in a preserved state --  {} minutes to go",
                    class.name,
                    (expires - now) / 60
                );
                return Ok(());
            }
            Some(expires) => crate::debug!(
                "Resetting persistent class '{}' timer to {minutes} minutes (was {} minutes remaining)",
                class.name,
                (expires - now) / 60
            ),
            None => crate::debug!(
                "Creating persistent class '{}' ({minutes} minutes, policy {})",
                class.name,
                if reset { "reset" } else { "preserve" }
            ),
        }
        conn.execute(
            "INSERT INTO persistent_classes (name, expires, tags) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET expires = excluded.expires, tags = excluded.tags",
            params![class.name, class.expires, class.tags.join(",")],
        )
        .map_err(db_err)?;
        Ok(())
    }

    /// Forgets a persistent class (cancelled by policy).
    pub fn forget_class(&mut self, name: &str) -> Result<(), StateError> {
        let Some(conn) = self.reader() else {
            return Ok(());
        };
        conn.execute(
            "DELETE FROM persistent_classes WHERE name = ?1",
            params![name],
        )
        .map(|_| ())
        .map_err(|source| StateError::Db {
            path: self.path.display().to_string(),
            source,
        })
    }
}

impl Drop for StateStore {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            crate::error!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_persist_across_opens() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let mut s = StateStore::open(tmp.path()).unwrap();
            assert_eq!(s.lock_status("k", 1000, 1), LockStatus::Free);
            s.record_done("k", 1000);
            assert_eq!(
                s.lock_status("k", 1010, 1),
                LockStatus::TooSoon { minutes_left: 1 }
            );
        }
        let s = StateStore::open(tmp.path()).unwrap();
        assert_eq!(
            s.lock_status("k", 1030, 5),
            LockStatus::TooSoon { minutes_left: 5 }
        );
        assert_eq!(s.lock_status("k", 1060, 1), LockStatus::Free);
        assert_eq!(s.lock_status("k", 1030, 0), LockStatus::Free);
    }

    #[test]
    fn persistent_classes_expire() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = StateStore::open(tmp.path()).unwrap();
        let c = PersistentClass {
            name: "p".into(),
            expires: 2000,
            tags: vec!["a".into()],
        };
        s.persist_class(&c, true).unwrap();
        assert_eq!(s.persistent_classes(1000).unwrap(), vec![c.clone()]);
        let later = PersistentClass {
            expires: 3000,
            ..c.clone()
        };
        s.persist_class(&later, false).unwrap();
        assert_eq!(s.persistent_classes(1000).unwrap()[0].expires, 2000);
        s.persist_class(&later, true).unwrap();
        assert_eq!(s.persistent_classes(1000).unwrap()[0].expires, 3000);
        // Still defined in the second it expires, gone after it.
        assert_eq!(s.persistent_classes(3000).unwrap().len(), 1);
        assert!(s.persistent_classes(3001).unwrap().is_empty());
    }
}
