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
use crate::values::hash::FastMap;
use rusqlite::{Connection, OptionalExtension, params};
use std::cell::OnceCell;
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

/// Each promise lock's last completion (foldhash: a run of 14,000
/// promises hashed each key twice, where SipHash cost ~10 M instructions).
type LockTimes = FastMap<String, i64>;

/// The schema this agent sets up (SQLite's `user_version`). Version 2
/// keeps the promise locks as one record (`promise_lock_list`) instead of
/// a row each in `promise_locks`; a version 1 database's rows move there
/// when it is opened.
const SCHEMA_VERSION: i64 = 2;

pub struct StateStore {
    /// Opened at start when the database exists, else at the first write.
    conn: OnceCell<Connection>,
    path: PathBuf,
    /// Last completion time of each promise lock, loaded once.
    done: LockTimes,
    /// Completions not yet written.
    pending: Vec<(String, i64)>,
    /// The lock list's generation when `done` was loaded or written: a
    /// flush that finds another one merges what was written meanwhile.
    generation: i64,
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
            done: LockTimes::default(),
            pending: Vec::new(),
            generation: 0,
        };
        // A work directory without a database has no state yet: it is
        // created at the first write, so a run that records nothing costs
        // no database (SQLite's creation syncs its files nine times).
        if !local::exists(&store.path) {
            return Ok(store);
        }
        store.connect()?;
        let mut store = store;
        if let Some(conn) = store.conn.get() {
            let (generation, done) = read_lock_list(conn).map_err(store.db_err())?;
            store.generation = generation;
            store.done = done;
        }
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
                 CREATE TABLE IF NOT EXISTS promise_lock_list (
                     id INTEGER PRIMARY KEY CHECK (id = 1),
                     generation INTEGER NOT NULL,
                     body BLOB NOT NULL
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
            move_lock_rows(&conn).map_err(&db_err)?;
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

    /// Writes the lock list with the pending completions, in one
    /// transaction. Another agent's completions written since this one
    /// read the list (it is the lock of one work directory, so that is
    /// rare) are merged, not lost: the list's generation tells.
    pub fn flush(&mut self) -> Result<(), StateError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let written = {
            let conn = self.writer()?;
            write_lock_list(conn, self.generation, &self.done, &self.pending)
        };
        let (generation, merged) = written.map_err(self.db_err())?;
        if let Some(merged) = merged {
            self.done = merged;
        }
        self.generation = generation;
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

/// The lock list: its generation and each lock's last completion; an
/// empty list at generation 0 when none was written yet.
fn read_lock_list(conn: &Connection) -> rusqlite::Result<(i64, LockTimes)> {
    let row: Option<(i64, Vec<u8>)> = conn
        .query_row(
            "SELECT generation, body FROM promise_lock_list WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match row {
        Some((generation, body)) => (generation, decode_locks(&body)),
        None => (0, LockTimes::default()),
    })
}

/// Writes the lock list: `done` when the list is still at generation
/// `known`, else the list as written meanwhile with `pending` merged in
/// (returned). Returns the generation written.
fn write_lock_list(
    conn: &Connection,
    known: i64,
    done: &LockTimes,
    pending: &[(String, i64)],
) -> rusqlite::Result<(i64, Option<LockTimes>)> {
    // IMMEDIATE: the write lock is taken before the generation is read,
    // so no other writer comes between the read and the write.
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let generation: i64 = tx
        .query_row(
            "SELECT generation FROM promise_lock_list WHERE id = 1",
            [],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0);
    let merged = if generation == known {
        None
    } else {
        let (_, mut current) = read_lock_list(&tx)?;
        current.extend(pending.iter().cloned());
        Some(current)
    };
    let next = generation + 1;
    put_lock_list(&tx, next, merged.as_ref().unwrap_or(done))?;
    tx.commit()?;
    Ok((next, merged))
}

/// Writes the lock list as `generation`.
fn put_lock_list(conn: &Connection, generation: i64, done: &LockTimes) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO promise_lock_list (id, generation, body) VALUES (1, ?1, ?2)
             ON CONFLICT(id) DO UPDATE SET generation = excluded.generation, body = excluded.body",
        params![generation, encode_locks(done)],
    )?;
    Ok(())
}

/// Moves the rows of `promise_locks` (schema 1, or written since by an
/// older agent) into the lock list, the later completion winning.
fn move_lock_rows(conn: &Connection) -> rusqlite::Result<()> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let rows: Vec<(String, i64)> = {
        let mut stmt = tx.prepare("SELECT key, last_done FROM promise_locks")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if !rows.is_empty() {
        let (generation, mut done) = read_lock_list(&tx)?;
        for (key, last) in rows {
            let at = done.entry(key).or_insert(last);
            *at = (*at).max(last);
        }
        put_lock_list(&tx, generation + 1, &done)?;
        tx.execute("DELETE FROM promise_locks", [])?;
    }
    tx.commit()
}

/// The lock list as bytes: per lock, its key's length (u32), the key and
/// its last completion (i64), little-endian. One record written per run
/// instead of a row per promise: a run of 14,000 promises spent ~110 M
/// instructions upserting rows, ~2 ms writing this.
fn encode_locks(done: &LockTimes) -> Vec<u8> {
    let size = done.keys().map(|k| k.len() + 12).sum();
    let mut out = Vec::with_capacity(size);
    for (key, last) in done {
        // A key is a promise's handle or hash, far below 4 GiB.
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&last.to_le_bytes());
    }
    out
}

/// The locks of a list made by `encode_locks`. A list cut short or
/// damaged keeps the locks before the damage, and says so: a lock lost
/// only lets its promise act again.
fn decode_locks(mut body: &[u8]) -> LockTimes {
    let mut done = LockTimes::with_capacity_and_hasher(body.len() / 48, Default::default());
    while !body.is_empty() {
        let Some((key, last, rest)) = decode_lock(body) else {
            crate::warn!(
                "The promise lock list of the state database is damaged; {} locks were read",
                done.len()
            );
            break;
        };
        done.insert(key, last);
        body = rest;
    }
    done
}

fn decode_lock(body: &[u8]) -> Option<(String, i64, &[u8])> {
    let (len, rest) = body.split_first_chunk::<4>()?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return None;
    }
    let (key, rest) = rest.split_at(len);
    let (last, rest) = rest.split_first_chunk::<8>()?;
    let key = String::from_utf8(key.to_vec()).ok()?;
    Some((key, i64::from_le_bytes(*last), rest))
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
    fn a_version_1_database_keeps_its_locks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateStore::dir(tmp.path());
        local::create_private_dir(&dir).unwrap();
        let conn = Connection::open(dir.join("convergent.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE promise_locks (key TEXT PRIMARY KEY, last_done INTEGER NOT NULL);
             INSERT INTO promise_locks VALUES ('a', 1000), ('b', 2000);
             PRAGMA user_version = 1;",
        )
        .unwrap();
        drop(conn);
        let s = StateStore::open(tmp.path()).unwrap();
        assert!(matches!(
            s.lock_status("a", 1010, 1),
            LockStatus::TooSoon { .. }
        ));
        assert!(matches!(
            s.lock_status("b", 2010, 1),
            LockStatus::TooSoon { .. }
        ));
        let conn = s.reader().unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM promise_locks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0, "the rows moved into the list");
    }

    #[test]
    fn a_concurrent_writer_s_locks_are_merged() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let mut s = StateStore::open(tmp.path()).unwrap();
            s.record_done("first", 1000);
        }
        let mut one = StateStore::open(tmp.path()).unwrap();
        let mut two = StateStore::open(tmp.path()).unwrap();
        one.record_done("one", 1000);
        two.record_done("two", 1000);
        one.flush().unwrap();
        two.flush().unwrap();
        // The later writer merged the earlier one's lock, and knows it.
        assert!(matches!(
            two.lock_status("one", 1010, 1),
            LockStatus::TooSoon { .. }
        ));
        drop((one, two));
        let s = StateStore::open(tmp.path()).unwrap();
        for key in ["first", "one", "two"] {
            assert!(
                matches!(s.lock_status(key, 1010, 1), LockStatus::TooSoon { .. }),
                "{key}"
            );
        }
    }

    #[test]
    fn lock_lists_round_trip_and_survive_damage() {
        let mut done = LockTimes::default();
        done.insert("default:main/files/0a1b".to_string(), 1_700_000_000);
        done.insert("ünïcode key".to_string(), -5);
        done.insert(String::new(), 0);
        let body = encode_locks(&done);
        assert_eq!(decode_locks(&body), done);
        // Cut anywhere: the whole locks before the cut are kept.
        for cut in 0..body.len() {
            let part = decode_locks(&body[..cut]);
            assert!(part.len() < done.len());
            assert!(part.iter().all(|(k, v)| done.get(k) == Some(v)));
        }
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
