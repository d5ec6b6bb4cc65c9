//! `copy_from` with `servers`: the source is on a cf-serverd, reached
//! through the protocol client of `crate::remote`. Single files and trees
//! (`depth_search`), `compare` (`mtime`, `ctime`, `atime`, `exists`, and
//! `digest`, `hash`, `binary` through the server's MD5 check), `verify`,
//! `purge`, `preserve`, `collapse_destination_dir`, `portnumber`, `trustkey`, `copy_backup`,
//! `missing_ok`, `timeout`, `protocol_version`, and failover along the
//! `servers` list: the first server that answers is used, as cf-agent
//! does; one that answers but refuses the file fails the promise.
//!
//! Files land whole: each is received into a new file beside the
//! destination that is renamed over it only once complete (see
//! [`super::copy::land`]), so a server that goes away mid-copy leaves the
//! old file in place.
//!
//! The agent's key pair must be in `WORKDIR/ppkeys` (made by `cf-key`):
//! as cf-agent, we refuse to connect without one rather than make one
//! behind the user's back.

use super::super::ActContext;
use super::Verdict;
use super::copy::{Origin, ensure_dir, land, purge_entry};
use super::dir_mode;
use crate::eval::bodies::ResolvedBody;
use crate::eval::expanded::ExpandedPromise;
use crate::host::fs::{FileKind, Meta};
use crate::remote::client::{Connection, RemoteError, RemoteKind, RemoteStat, Settings};
use crate::values::number::parse_bool;
use md5::{Digest, Md5};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What became of a remote copy.
pub enum Remote {
    /// Done (kept, repaired or failed: the verdict says).
    Done,
    /// No server before `localhost` in the list answered: copy locally.
    Local,
}

/// Copies `source` from the first of `servers` that answers to `target`.
pub fn copy_from_servers(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    body: &ResolvedBody,
    source: &str,
    servers: &[String],
    v: &mut Verdict,
) -> Remote {
    let settings = match settings(act, body) {
        Ok(s) => s,
        Err(e) => {
            crate::error!("Cannot copy '{}' from a server: {e}", p.promiser);
            v.failed();
            return Remote::Done;
        }
    };
    let port = body.scalar("portnumber").filter(|s| !s.is_empty());
    let mut conn = None;
    let mut failures = Vec::new();
    // Messages name the server as the policy does (without the port).
    let mut named = String::new();
    for server in servers {
        if server == "localhost" {
            return Remote::Local;
        }
        let address = with_port(server, port);
        match act.remote.take(&address, &settings) {
            Ok(c) => {
                named = server.clone();
                conn = Some((c, address));
                break;
            }
            Err(e) => {
                crate::info!("Unable to establish connection with '{server}': {e}");
                failures.push(e.to_string());
            }
        }
    }
    let Some((mut conn, address)) = conn else {
        crate::error!(
            "No server of {{{}}} could be reached to copy '{source}' to '{}': {}",
            servers.join(", "),
            target.display(),
            failures.join("; ")
        );
        v.failed();
        return Remote::Done;
    };
    let server = named;
    copy_with(act, p, target, body, source, &server, &mut conn, v);
    act.remote.give_back(&address, &settings, conn);
    Remote::Done
}

/// Copies `source` from `server`, over `conn`, to `target`.
#[allow(clippy::too_many_arguments)]
fn copy_with(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    body: &ResolvedBody,
    source: &str,
    server: &str,
    conn: &mut Connection,
    v: &mut Verdict,
) {
    let st = match conn.stat(source) {
        Ok(st) => st,
        Err(e) => {
            if body.scalar("missing_ok").and_then(parse_bool) == Some(true)
                && matches!(e, RemoteError::AccessDenied { .. })
            {
                crate::debug!(
                    "Source '{source}' is missing on '{server}', and missing_ok is set: the copy is kept"
                );
                return;
            }
            crate::error!(
                "Can't stat file '{source}' on '{server}' in files.copy_from promise: {e}"
            );
            v.failed();
            return;
        }
    };
    let mut copy = Copy { conn, server, body };
    if st.kind == RemoteKind::Dir {
        let depth = p.body("depth_search").map(super::search::depth_of);
        let Some(depth) = depth else {
            ensure_dir(act, p, target, dir_mode(act), v);
            return;
        };
        let purge = body.scalar("purge").and_then(parse_bool) == Some(true);
        copy.tree(act, p, source, &st, target, depth, purge, v);
        return;
    }
    copy.file(act, source, &st, target, false, v);
}

/// The connection's settings from the body and the agent's work directory.
fn settings(act: &ActContext<'_>, body: &ResolvedBody) -> Result<Settings, String> {
    let workdir = act
        .ctx
        .lookup("sys.workdir")
        .and_then(|w| w.as_scalar().map(PathBuf::from))
        .ok_or("the work directory (sys.workdir), where the keys are, is not known")?;
    // Without our key pair no server can be asked: say so once, rather
    // than as each server's failure.
    crate::remote::keys::KeyRing::of_workdir(&workdir)
        .local_pair()
        .map_err(|e| e.to_string())?;
    let mut s = Settings::new(&workdir);
    if let Some(t) = body.scalar("timeout") {
        let secs: u64 = t
            .trim()
            .parse()
            .map_err(|_| format!("timeout '{t}' is not a number of seconds"))?;
        s.timeout = Duration::from_secs(secs.max(1));
    }
    s.trust_new_server_key = body.scalar("trustkey").and_then(parse_bool) == Some(true);
    s.force_ipv4 = body.scalar("force_ipv4").and_then(parse_bool) == Some(true);
    s.restrict_keys = act.ctx.agent_control().copyfrom_restrict_keys.clone();
    // The body's protocol_version, else body common control's.
    let common = act
        .ctx
        .common_control("protocol_version")
        .and_then(|v| v.as_scalar().map(str::to_string));
    let protocol = body
        .scalar("protocol_version")
        .map(str::to_string)
        .or(common)
        .unwrap_or_default();
    s.protocol = match protocol.as_str() {
        "" | "0" | "undefined" | "3" | "cookie" | "latest" => 3,
        "2" | "tls" => 2,
        "1" | "classic" => {
            return Err(
                "protocol_version 'classic' (1) is not supported; use 'tls' or 'latest'".into(),
            );
        }
        other => {
            return Err(format!(
                "protocol_version '{other}' is not one cf-agent knows"
            ));
        }
    };
    Ok(s)
}

/// `server` with `portnumber` when it names no port of its own.
fn with_port(server: &str, port: Option<&str>) -> String {
    let Some(port) = port else {
        return server.to_string();
    };
    if server.parse::<std::net::Ipv6Addr>().is_ok() {
        return format!("[{server}]:{port}");
    }
    let has_port = server.starts_with('[')
        || server
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok());
    if has_port {
        server.to_string()
    } else {
        format!("{server}:{port}")
    }
}

fn md5_of(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// One promise's copy over one connection.
struct Copy<'c> {
    conn: &'c mut Connection,
    server: &'c str,
    body: &'c ResolvedBody,
}

impl Copy<'_> {
    /// Whether the destination needs the server's content, by `compare`.
    fn needs(
        &mut self,
        act: &ActContext<'_>,
        src: &str,
        st: &RemoteStat,
        dst: &Path,
        dmeta: Option<&Meta>,
    ) -> Result<bool, RemoteError> {
        let Some(d) = dmeta else { return Ok(true) };
        if self.body.scalar("force_update").and_then(parse_bool) == Some(true) {
            return Ok(true);
        }
        // cf-agent's rules: a newer mtime for `mtime`; a newer ctime or
        // mtime for `ctime` (and for the byte comparisons when the
        // destination is no regular file); `atime` adds the bytes.
        let newer = st.ctime > d.ctime || st.mtime > d.mtime;
        let regular = d.kind == FileKind::File;
        Ok(match super::compare_of(act, self.body).as_str() {
            "exists" => false,
            "mtime" => st.mtime > d.mtime,
            "atime" => newer || (regular && self.bytes_differ(act, src, st, dst, d)?),
            "digest" | "hash" | "checksum" | "binary" if regular => {
                self.bytes_differ(act, src, st, dst, d)?
            }
            _ => newer,
        })
    }

    /// Whether the server's file and `dst` differ: by size, else by the
    /// server's MD5 check of our digest (cf-agent compares remote files
    /// so for `digest`, `hash` and `binary` alike).
    fn bytes_differ(
        &mut self,
        act: &ActContext<'_>,
        src: &str,
        st: &RemoteStat,
        dst: &Path,
        d: &Meta,
    ) -> Result<bool, RemoteError> {
        if st.size != d.size {
            return Ok(true);
        }
        let Ok(data) = act.host.read(dst) else {
            return Ok(true);
        };
        self.conn.differs(src, &md5_of(&data))
    }

    /// Copies the file `src` (stat'ed as `st`) to `dst` when `compare`
    /// says it must; `staged`: its content is already at `dst.cfnew`,
    /// durable (see [`Copy::stage`]), and the comparison was made.
    fn file(
        &mut self,
        act: &mut ActContext<'_>,
        src: &str,
        st: &RemoteStat,
        dst: &Path,
        staged: bool,
        v: &mut Verdict,
    ) {
        if st.kind != RemoteKind::Regular {
            crate::error!(
                "'{src}' on '{}' is not a regular file ({:?}); it is not copied",
                self.server,
                st.kind
            );
            v.failed();
            return;
        }
        if super::copy::single_copied(act, dst, v)
            || !super::copy::size_permitted(self.body, src, st.size, v)
        {
            return;
        }
        let dmeta = act.host.lstat(dst).ok().flatten();
        let needs = if staged {
            Ok(true)
        } else {
            self.needs(act, src, st, dst, dmeta.as_ref())
        };
        match needs {
            Ok(false) => return,
            Ok(true) => {}
            Err(e) => {
                crate::error!(
                    "Could not compare '{}' with '{src}' on '{}': {e}",
                    dst.display(),
                    self.server
                );
                v.failed();
                return;
            }
        }
        let origin = Origin {
            server: self.server,
            path: src,
            mode: st.mode,
            content: None,
        };
        let verify = self.body.scalar("verify").and_then(parse_bool) == Some(true);
        let conn = &mut *self.conn;
        let size = st.size;
        land(
            act,
            &origin,
            dst,
            dmeta.as_ref(),
            self.body,
            v,
            |h, new, mode| {
                let written = if staged {
                    h.chmod(new, mode).map_err(crate::host::fs::Streamed::Io)
                } else {
                    h.write_atomic_streamed(new, mode, |w| conn.get_into(src, size, w, &mut |_| {}))
                };
                written.map_err(|e| match e {
                    crate::host::fs::Streamed::Io(e) => format!(
                        "Could not write '{}': {}",
                        new.display(),
                        crate::host::strerror(&e)
                    ),
                    crate::host::fs::Streamed::Fill(e) => {
                        format!("Could not copy '{src}' to '{}': {e}", new.display())
                    }
                })?;
                if verify {
                    let data = h.read(new).map_err(|e| {
                        format!("Could not read '{}' to verify it: {e}", new.display())
                    });
                    let differs = data.and_then(|d| {
                        conn.differs(src, &md5_of(&d))
                            .map_err(|e| format!("Could not verify '{}': {e}", new.display()))
                    });
                    if differs != Ok(false) {
                        let _ = h.remove_file(new);
                        return Err(differs.err().unwrap_or_else(|| {
                            format!(
                                "The copy of '{src}' in '{}' does not match the server's: not installed",
                                new.display()
                            )
                        }));
                    }
                }
                Ok(())
            },
        );
    }

    /// Copies the directory `src` (already stat'ed as `st`) into `dst`,
    /// `depth` levels down; with `purge`, what `dst` has beyond the
    /// server's listing is removed at every level walked. With
    /// `collapse_destination_dir`, the files of every level land in `dst`
    /// itself (and the purge, at the top, spares them all). The names
    /// put in `dst`.
    #[allow(clippy::too_many_arguments)]
    fn tree(
        &mut self,
        act: &mut ActContext<'_>,
        p: &ExpandedPromise,
        src: &str,
        st: &RemoteStat,
        dst: &Path,
        depth: usize,
        purge: bool,
        v: &mut Verdict,
    ) -> BTreeSet<String> {
        let mut listed = BTreeSet::new();
        let preserve = self.body.scalar("preserve").and_then(parse_bool) == Some(true);
        // The copy's own top directory is made 0700 whatever `preserve`
        // says; the directories below it get the source's mode (cf-agent).
        let top = dst == Path::new(&p.promiser);
        let mode = if preserve && !top {
            st.mode
        } else {
            dir_mode(act)
        };
        ensure_dir(act, p, dst, mode, v);
        if depth == 0 {
            return listed;
        }
        let names = match self.conn.list_dir(src) {
            Ok(n) => n,
            Err(e) => {
                crate::error!(
                    "Could not list '{src}' on '{}' to copy it to '{}': {e}",
                    self.server,
                    dst.display()
                );
                v.failed();
                return listed;
            }
        };
        let collapse = self
            .body
            .scalar("collapse_destination_dir")
            .and_then(parse_bool)
            == Some(true);
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        for name in names {
            if name == "." || name == ".." {
                continue;
            }
            let path = format!("{}/{name}", src.trim_end_matches('/'));
            match self.conn.stat(&path) {
                Ok(s) if s.kind == RemoteKind::Dir => dirs.push((name.clone(), s)),
                Ok(s) => files.push((name.clone(), s)),
                Err(e) => {
                    // As cf-agent: an entry the server will not describe
                    // is passed over (and kept from the purge).
                    crate::info!(
                        "Can't stat '{path}' on '{}' while copying it: {e}; it is passed over",
                        self.server
                    );
                    if !matches!(e, RemoteError::AccessDenied { .. }) {
                        v.failed();
                        return listed;
                    }
                }
            }
            listed.insert(name);
        }
        dirs.sort_by(|a, b| a.0.cmp(&b.0));
        files.sort_by(|a, b| a.0.cmp(&b.0));
        // The search's exclude_dirs and include_dirs, on the server's side
        // (kept from the purge, as passed over).
        if let Some(ds) = p.body("depth_search") {
            let skip = super::search::DirFilter::of(&mut act.ctx, ds);
            dirs.retain(|(name, _)| {
                !skip.skips(
                    Path::new(&format!("{}/{name}", src.trim_end_matches('/'))),
                    name,
                )
            });
        }
        for (name, s) in dirs {
            let path = format!("{}/{name}", src.trim_end_matches('/'));
            if collapse {
                let placed = self.tree(act, p, &path, &s, dst, depth - 1, false, v);
                listed.extend(placed);
            } else {
                self.tree(act, p, &path, &s, &dst.join(&name), depth - 1, purge, v);
            }
        }
        let staged = self.stage(act, src, dst, &files);
        for (name, s) in files {
            let path = format!("{}/{name}", src.trim_end_matches('/'));
            let to = dst.join(&name);
            let was_staged = staged.contains(&name);
            self.file(act, &path, &s, &to, was_staged, v);
            // What was staged and not landed (the promise failed first)
            // is not left behind.
            let left = PathBuf::from(format!("{}.cfnew", to.display()));
            if was_staged && act.host.lstat(&left).ok().flatten().is_some() {
                let _ = act.host.remove_file(&left);
            }
        }
        if purge {
            purge_beyond(act, dst, &listed, v);
        }
        listed
    }
}

impl Copy<'_> {
    /// Fetches the regular files of one directory of a tree that need the
    /// server's content into `NAME.cfnew` beside their destination without
    /// syncing each, then syncs them all side by side (the disk's flushes
    /// shared); [`Copy::file`] then renames each into place as before. A
    /// file still lands whole or not at all, even across a crash, without
    /// a wait for one flush per file. The names staged; none
    /// under a dry run or a warn-only promise, and none when the flush
    /// fails (each file is then fetched and synced on its own).
    fn stage(
        &mut self,
        act: &mut ActContext<'_>,
        src: &str,
        dst: &Path,
        files: &[(String, RemoteStat)],
    ) -> BTreeSet<String> {
        let mut staged = BTreeSet::new();
        if act.changes.mode() != crate::report::change::Mode::Apply
            || act.host.stat(dst).ok().flatten().is_none()
        {
            return staged;
        }
        for (name, st) in files {
            if st.kind != RemoteKind::Regular {
                continue;
            }
            let path = format!("{}/{name}", src.trim_end_matches('/'));
            let to = dst.join(name);
            let dmeta = act.host.lstat(&to).ok().flatten();
            if dmeta.as_ref().is_some_and(|m| m.kind == FileKind::Dir) {
                continue;
            }
            if !matches!(self.needs(act, &path, st, &to, dmeta.as_ref()), Ok(true)) {
                continue;
            }
            let new = PathBuf::from(format!("{}.cfnew", to.display()));
            let conn = &mut *self.conn;
            let written = act.host.write_staged(&new, 0o600, |w| {
                conn.get_into(&path, st.size, w, &mut |_| {})
            });
            match written {
                Ok(()) => {
                    staged.insert(name.clone());
                }
                Err(e) => {
                    // Fetched again, and its failure reported, by file().
                    crate::debug!("Could not stage '{}': {e:?}", new.display());
                    if conn.is_broken() {
                        break;
                    }
                }
            }
        }
        let paths: Vec<PathBuf> = staged
            .iter()
            .map(|n| PathBuf::from(format!("{}.cfnew", dst.join(n).display())))
            .collect();
        if !staged.is_empty()
            && let Err(e) = act.host.sync_files(&paths)
        {
            crate::info!(
                "Could not sync the files staged in '{}' ({}); they are copied one by one",
                dst.display(),
                crate::host::strerror(&e)
            );
            for name in std::mem::take(&mut staged) {
                let _ = act.host.remove_file(&PathBuf::from(format!(
                    "{}.cfnew",
                    dst.join(name).display()
                )));
            }
        }
        staged
    }
}

/// `purge`: removes what `dst` holds beyond the server's `listed` names.
fn purge_beyond(act: &mut ActContext<'_>, dst: &Path, listed: &BTreeSet<String>, v: &mut Verdict) {
    for name in act.host.read_dir(dst).unwrap_or_default() {
        if listed.contains(&name) {
            continue;
        }
        let d = dst.join(&name);
        let Some(dm) = act.host.lstat(&d).ok().flatten() else {
            continue;
        };
        purge_entry(act, &d, dm.kind == FileKind::Dir, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        assert_eq!(with_port("hub", None), "hub");
        assert_eq!(with_port("hub", Some("5309")), "hub:5309");
        assert_eq!(with_port("hub:1", Some("5309")), "hub:1");
        assert_eq!(with_port("::1", Some("5309")), "[::1]:5309");
        assert_eq!(with_port("[::1]:7", Some("5309")), "[::1]:7");
        assert_eq!(with_port("10.0.0.1", Some("5309")), "10.0.0.1:5309");
    }

    #[test]
    fn digests() {
        assert_eq!(
            md5_of(b""),
            [
                0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04, 0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8,
                0x42, 0x7e
            ]
        );
    }
}
