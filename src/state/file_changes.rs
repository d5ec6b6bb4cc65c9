//! The file-integrity database of `changes` bodies, kept in the state
//! store beside the locks: for each file a digest per hash method and the
//! stat fields cf-agent compares (mode, owner, group, device, inode,
//! modification time), and for each directory a depth search watched the
//! sorted names of the entries it selected there, so that a later search
//! can tell which disappeared. cf-agent keeps the same three records
//! (`H_`, `S_` and `D_` keys) in its `cf_changes` database.

use super::{StateError, StateStore};
use rusqlite::{OptionalExtension, params};

/// What cf-agent remembers of a file's `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// `st_mode` with the file type bits.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub dev: u64,
    pub ino: u64,
    pub mtime: i64,
}

pub(super) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS file_hashes (
        path TEXT NOT NULL,
        method TEXT NOT NULL,
        digest BLOB NOT NULL,
        PRIMARY KEY (path, method)
    );
    CREATE TABLE IF NOT EXISTS file_stats (
        path TEXT PRIMARY KEY,
        mode INTEGER NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        dev INTEGER NOT NULL,
        ino INTEGER NOT NULL,
        mtime INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS dir_listings (
        path TEXT PRIMARY KEY,
        names TEXT NOT NULL
    );";

impl StateStore {
    pub(super) fn db_err(&self) -> impl Fn(rusqlite::Error) -> StateError + '_ {
        |source| StateError::Db {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// The digest recorded for `path` with `method` (`md5`, `sha256`, ...).
    pub fn file_hash(&self, path: &str, method: &str) -> Result<Option<Vec<u8>>, StateError> {
        let Some(conn) = self.reader() else {
            return Ok(None);
        };
        conn.query_row(
            "SELECT digest FROM file_hashes WHERE path = ?1 AND method = ?2",
            params![path, method],
            |r| r.get(0),
        )
        .optional()
        .map_err(self.db_err())
    }

    pub fn set_file_hash(&self, path: &str, method: &str, digest: &[u8]) -> Result<(), StateError> {
        self.writer()?
            .execute(
                "INSERT INTO file_hashes (path, method, digest) VALUES (?1, ?2, ?3)
                 ON CONFLICT(path, method) DO UPDATE SET digest = excluded.digest",
                params![path, method, digest],
            )
            .map(|_| ())
            .map_err(self.db_err())
    }

    pub fn file_stat(&self, path: &str) -> Result<Option<FileStat>, StateError> {
        let Some(conn) = self.reader() else {
            return Ok(None);
        };
        conn.query_row(
            "SELECT mode, uid, gid, dev, ino, mtime FROM file_stats WHERE path = ?1",
            params![path],
            |r| {
                Ok(FileStat {
                    mode: r.get(0)?,
                    uid: r.get(1)?,
                    gid: r.get(2)?,
                    dev: r.get::<_, i64>(3)? as u64,
                    ino: r.get::<_, i64>(4)? as u64,
                    mtime: r.get(5)?,
                })
            },
        )
        .optional()
        .map_err(self.db_err())
    }

    pub fn set_file_stat(&self, path: &str, s: &FileStat) -> Result<(), StateError> {
        self.writer()?
            .execute(
                "INSERT INTO file_stats (path, mode, uid, gid, dev, ino, mtime)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT(path) DO UPDATE SET mode = excluded.mode, uid = excluded.uid,
                   gid = excluded.gid, dev = excluded.dev, ino = excluded.ino,
                   mtime = excluded.mtime",
                params![
                    path,
                    s.mode,
                    s.uid,
                    s.gid,
                    s.dev as i64,
                    s.ino as i64,
                    s.mtime
                ],
            )
            .map(|_| ())
            .map_err(self.db_err())
    }

    /// Forgets every hash and the stat record of a file that is gone.
    pub fn forget_file(&self, path: &str) -> Result<(), StateError> {
        let Some(conn) = self.reader() else {
            return Ok(());
        };
        conn.execute("DELETE FROM file_hashes WHERE path = ?1", params![path])
            .and_then(|_| conn.execute("DELETE FROM file_stats WHERE path = ?1", params![path]))
            .map(|_| ())
            .map_err(self.db_err())
    }

    /// The sorted names last recorded for a directory (none when never).
    pub fn dir_listing(&self, path: &str) -> Result<Vec<String>, StateError> {
        let Some(conn) = self.reader() else {
            return Ok(Vec::new());
        };
        let names: Option<String> = conn
            .query_row(
                "SELECT names FROM dir_listings WHERE path = ?1",
                params![path],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.db_err())?;
        Ok(names
            .map(|n| n.split('\0').map(str::to_string).collect())
            .unwrap_or_default())
    }

    /// Records a directory's sorted names (an empty list forgets it);
    /// whether that changed the record.
    pub fn set_dir_listing(&self, path: &str, names: &[String]) -> Result<bool, StateError> {
        let before = self.dir_listing(path)?;
        if before == names {
            return Ok(false);
        }
        if names.is_empty() {
            self.writer()?
                .execute("DELETE FROM dir_listings WHERE path = ?1", params![path])
                .map_err(self.db_err())?;
        } else {
            self.writer()?
                .execute(
                    "INSERT INTO dir_listings (path, names) VALUES (?1, ?2)
                     ON CONFLICT(path) DO UPDATE SET names = excluded.names",
                    params![path, names.join("\0")],
                )
                .map_err(self.db_err())?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_stats_and_listings_persist() {
        let tmp = tempfile::tempdir().unwrap();
        let st = FileStat {
            mode: 0o100600,
            uid: 1,
            gid: 2,
            dev: 3,
            ino: u64::MAX,
            mtime: 5,
        };
        {
            let s = StateStore::open(tmp.path()).unwrap();
            assert_eq!(s.file_hash("/a", "md5").unwrap(), None);
            s.set_file_hash("/a", "md5", &[1, 2]).unwrap();
            s.set_file_hash("/a", "md5", &[3]).unwrap();
            s.set_file_stat("/a", &st).unwrap();
            assert!(s.set_dir_listing("/", &["a".into(), "b".into()]).unwrap());
            assert!(!s.set_dir_listing("/", &["a".into(), "b".into()]).unwrap());
        }
        let s = StateStore::open(tmp.path()).unwrap();
        assert_eq!(s.file_hash("/a", "md5").unwrap(), Some(vec![3]));
        assert_eq!(s.file_stat("/a").unwrap(), Some(st));
        assert_eq!(s.dir_listing("/").unwrap(), vec!["a", "b"]);
        s.forget_file("/a").unwrap();
        assert_eq!(s.file_hash("/a", "md5").unwrap(), None);
        assert_eq!(s.file_stat("/a").unwrap(), None);
        assert!(s.set_dir_listing("/", &[]).unwrap());
        assert!(s.dir_listing("/").unwrap().is_empty());
    }
}
