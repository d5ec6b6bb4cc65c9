//! A client of cf-serverd: one TLS connection, the identification dialog,
//! and the file commands `SYNCH … STAT`, `OPENDIR`, `MD5` and `GET`.
//!
//! The conversation, as cf-agent 3.21 holds it:
//!
//! 1. TCP, then at once a TLS handshake; each side shows a self-signed
//!    certificate made from its host key. We check the server's key
//!    against `ppkeys/USER-MD5=<hex>.pub` (trusting a new one only when
//!    asked to, as bootstrap does); the server checks ours likewise.
//! 2. The server sends its version line (`CFE_v3 cf-serverd 3.21.0`); we
//!    answer with the version we speak (the lower of the two, at least 2)
//!    and `IDENTITY USERNAME=<user>`; it answers `OK WELCOME …`, or closes
//!    the connection when it does not trust our key or admit us.
//! 3. Commands and answers go in transactions: an 8-byte header
//!    (`t 123` or `m 123`, NUL-padded: done or more to come, and the
//!    payload's length), then at most 4088 bytes of payload. A refusal is
//!    the payload `BAD: …`. Only `GET`'s answer is not framed: the file's
//!    bytes follow as a plain stream, in blocks of 2048.

use super::keys::{KeyPair, KeyRing, PublicKey};
use super::lastseen::{LastSeen, Seen};
use super::tls::{self, Identity};
use crate::host::Host;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// cf-serverd's port unless told otherwise.
pub const DEFAULT_PORT: u16 = 5308;
/// The most a transaction carries (CF_BUFSIZE less the header).
pub const MAX_PAYLOAD: usize = 4096 - HEADER;
const HEADER: usize = 8;
/// The block size we ask GET for, as cf-agent does.
const GET_BLOCK: usize = 2048;
/// What cf-serverd sends for any refusal it does not explain.
const REFUSAL: &str = "BAD: Unspecified server refusal";
/// What cf-serverd sends when a file changes while it is sent.
const CHANGED: &str = "BAD: File changed while copying";
/// Enough of GET's stream to tell a refusal: a transaction header and
/// `BAD: `.
const REFUSAL_PEEK: usize = HEADER + 5;
/// The last name of a directory listing.
const TERMINATOR: &str = "---cfXen/gine/cfXen/gine---";
/// The highest protocol version we speak: 3 ("cookie"), as cf-agent 3.21.
pub const LATEST_PROTOCOL: u8 = 3;

/// How to connect.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The work directory: its `ppkeys` hold our key and the trusted ones.
    pub workdir: PathBuf,
    /// How long to wait for the connection and for each answer.
    pub timeout: Duration,
    /// Trust (and store) a server key never seen before, as bootstrap and
    /// `trustkey => "true"` do. A key that differs from the one stored for
    /// the address is refused all the same.
    pub trust_new_server_key: bool,
    /// The user named in `IDENTITY` and in the key files' names.
    pub user: String,
    /// The protocol version to ask for: 2 (`tls`) or 3 (`cookie`).
    pub protocol: u8,
    /// Connect over IPv4 only (`force_ipv4`), as cf-agent then asks the
    /// resolver for IPv4 addresses only.
    pub force_ipv4: bool,
    /// Agent control's `copyfrom_restrict_keys`: when not empty, only a
    /// server presenting one of these key digests is talked to.
    pub restrict_keys: Vec<String>,
}

impl Settings {
    /// cf-agent's defaults: 30 s, no new trust, the current user, the
    /// latest protocol.
    pub fn new(workdir: &Path) -> Settings {
        Settings {
            workdir: workdir.to_path_buf(),
            timeout: Duration::from_secs(30),
            trust_new_server_key: false,
            user: crate::host::procs::current_user_name(),
            protocol: LATEST_PROTOCOL,
            force_ipv4: false,
            restrict_keys: Vec::new(),
        }
    }
}

/// Why a conversation with a server failed. Each names the server, and
/// the path when there is one.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot resolve server '{server}': {reason}")]
    Resolve { server: String, reason: String },
    #[error("no server is responding at {server}: {source}")]
    Connect { server: String, source: io::Error },
    #[error("{server} did not answer within {secs} s (waiting for {waiting_for})")]
    Timeout {
        server: String,
        secs: u64,
        waiting_for: String,
    },
    #[error("{server} closed the connection (waiting for {waiting_for})")]
    Closed { server: String, waiting_for: String },
    #[error("connection to {server} failed (waiting for {waiting_for}): {source}")]
    Io {
        server: String,
        waiting_for: String,
        source: io::Error,
    },
    #[error("TLS handshake with {server} failed: {reason}")]
    Tls { server: String, reason: String },
    #[error("Server key not in allowed keys, server presented: {presented} ({server})")]
    KeyNotAllowed { server: String, presented: String },
    #[error(
        "{server} presented key {presented}, but {expected} is the key stored for it ({stored}): refusing; \
         if the server's key really changed, remove the old one with `cf-key -r {expected}`"
    )]
    KeyMismatch {
        server: String,
        presented: String,
        expected: String,
        stored: PathBuf,
    },
    #[error(
        "{server} presented key {presented}, which is not trusted (no {expected_file}): refusing; \
         trust it with `cf-key -t IPADDR:KEYFILE`, or connect trusting new keys"
    )]
    UntrustedServer {
        server: String,
        presented: String,
        expected_file: PathBuf,
    },
    #[error(
        "{server} did not accept us as user '{user}' with key {our_key}{reply}: it does not trust the key \
         (add it to trustkeysfrom, or `cf-key -t` it there), or does not admit this host or user"
    )]
    NotWelcome {
        server: String,
        user: String,
        our_key: String,
        reply: String,
    },
    #[error("{server} sent no CFEngine version line: '{line}'")]
    BadVersion { server: String, line: String },
    #[error("protocol version {0} is not one we speak: 2 (tls) or 3 (cookie)")]
    UnknownProtocol(u8),
    #[error("{server} speaks protocol {theirs}, we need at least 2 (TLS)")]
    OldProtocol { server: String, theirs: i64 },
    #[error(
        "{server} refused {command} '{path}': access denied, or no such file (cf-serverd answers both alike)"
    )]
    AccessDenied {
        server: String,
        command: &'static str,
        path: String,
    },
    #[error("{server} refused {command} '{path}': {message}")]
    Refused {
        server: String,
        command: &'static str,
        path: String,
        message: String,
    },
    #[error("'{path}' changed on {server} while it was copied")]
    Changed { server: String, path: String },
    #[error("{server} broke the protocol ({command} '{path}'): {detail}")]
    Protocol {
        server: String,
        command: &'static str,
        path: String,
        detail: String,
    },
    #[error("'{path}' is too long for the protocol ({len} bytes, at most {max})")]
    TooLong {
        path: String,
        len: usize,
        max: usize,
    },
    #[error("the connection to {server} is unusable after an earlier failure; connect again")]
    Broken { server: String },
    #[error(transparent)]
    Key(#[from] super::keys::KeyError),
    #[error("{0}")]
    LastSeen(String),
    #[error("cannot write '{path}': {reason}")]
    Local { path: PathBuf, reason: String },
    #[error("{server} could not be reached earlier in this run ({why}); it is not tried again")]
    Offline { server: String, why: String },
}

/// What a server tells of a file (`SYNCH … STAT`). cf-serverd 3.21
/// resolves the requested path (`realpath`) before it looks, so over TLS a
/// link is answered for by its target; the link fields are for servers
/// that do not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteStat {
    pub kind: RemoteKind,
    /// Permission bits (07777) of the file, or of a link's target.
    pub mode: u32,
    /// A link's own permission bits; 0 when the path is not a link.
    pub link_mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime: i64,
    pub mtime: i64,
    pub ctime: i64,
    /// The server found the file sparse.
    pub sparse: bool,
    pub ino: u64,
    pub nlink: u64,
    pub dev: u64,
    /// A link's target, when the path is a link.
    pub link_target: Option<String>,
}

/// The kinds of file cf-serverd names (its `FileType`, in its order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteKind {
    Regular,
    Link,
    Dir,
    Fifo,
    BlockDevice,
    CharDevice,
    Socket,
}

impl RemoteKind {
    fn from_wire(n: i64) -> Option<RemoteKind> {
        Some(match n {
            0 => RemoteKind::Regular,
            1 => RemoteKind::Link,
            2 => RemoteKind::Dir,
            3 => RemoteKind::Fifo,
            4 => RemoteKind::BlockDevice,
            5 => RemoteKind::CharDevice,
            6 => RemoteKind::Socket,
            _ => return None,
        })
    }
}

/// The connections of one agent run: one session per server, kept for
/// every promise that copies from it, as cf-agent keeps its connection
/// cache for a run; and the servers that could not be reached, which are
/// not waited for again in the same run (cf-agent marks them offline).
#[derive(Debug, Default)]
pub struct Sessions {
    open: std::collections::HashMap<String, Connection>,
    offline: std::collections::HashMap<String, String>,
}

impl Sessions {
    /// The run's connection to `server` (`host` or `host:port`) under
    /// `settings`, lent until [`Sessions::give_back`]: the one already open
    /// unless a failure broke it, else a new one. A server that could not
    /// be reached (no answer, refused, timed out) is not tried again in
    /// this run; one that answered but failed later (a key refused, the
    /// identification) is.
    pub fn take(&mut self, server: &str, settings: &Settings) -> Result<Connection, RemoteError> {
        let key = Self::key(server, settings);
        if let Some(why) = self.offline.get(&key) {
            return Err(RemoteError::Offline {
                server: server.to_string(),
                why: why.clone(),
            });
        }
        if let Some(mut c) = self.open.remove(&key)
            && !c.broken
        {
            c.set_timeout(settings.timeout);
            return Ok(c);
        }
        Connection::open(server, settings).inspect_err(|e| {
            if matches!(
                e,
                RemoteError::Connect { .. }
                    | RemoteError::Resolve { .. }
                    | RemoteError::Timeout { .. }
            ) {
                self.offline.insert(key, e.to_string());
            }
        })
    }

    /// Keeps `conn` (taken for `server` under `settings`) for the rest of
    /// the run, unless a failure broke it.
    pub fn give_back(&mut self, server: &str, settings: &Settings, conn: Connection) {
        if !conn.broken {
            self.open.insert(Self::key(server, settings), conn);
        }
    }

    fn key(server: &str, settings: &Settings) -> String {
        format!(
            "{server}|{}|{}|{}|{}",
            settings.protocol,
            settings.user,
            settings.workdir.display(),
            // As cf-agent's connection cache tells connections apart by
            // their flags: one made without force_ipv4 (to an IPv6
            // address) is not lent to a copy that forces IPv4.
            settings.force_ipv4
        )
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Closes every connection (each says goodbye to its server).
    pub fn close_all(&mut self) {
        self.open.clear();
    }
}

type Stream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// An open, identified connection to one server.
pub struct Connection {
    stream: Stream,
    server: String,
    timeout: Duration,
    protocol: u8,
    server_key: String,
    server_version: String,
    /// Set when a failure left the stream out of step with the server.
    broken: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .field("protocol", &self.protocol)
            .field("server_key", &self.server_key)
            .finish()
    }
}

/// `host` or `host:port` (`[v6]:port` for IPv6) as addresses to try.
fn resolve(server: &str) -> Result<Vec<SocketAddr>, RemoteError> {
    let with_port = if server.parse::<SocketAddr>().is_ok() {
        server.to_string()
    } else if server.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{server}]:{DEFAULT_PORT}")
    } else if server
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && !h.contains(':') && p.parse::<u16>().is_ok())
    {
        server.to_string()
    } else {
        format!("{server}:{DEFAULT_PORT}")
    };
    let addrs: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|e| RemoteError::Resolve {
            server: server.to_string(),
            reason: e.to_string(),
        })?
        .collect();
    if addrs.is_empty() {
        return Err(RemoteError::Resolve {
            server: server.to_string(),
            reason: "no address".into(),
        });
    }
    Ok(addrs)
}

impl Connection {
    /// Connects to `server` (`host`, `host:port`, `[v6]:port`), checks its
    /// key and identifies us.
    pub fn open(server: &str, settings: &Settings) -> Result<Connection, RemoteError> {
        if !(2..=LATEST_PROTOCOL).contains(&settings.protocol) {
            return Err(RemoteError::UnknownProtocol(settings.protocol));
        }
        let ring = KeyRing::of_workdir(&settings.workdir);
        let keys = ring.local_pair()?;
        let mut addrs = resolve(server)?;
        if settings.force_ipv4 {
            addrs.retain(SocketAddr::is_ipv4);
            if addrs.is_empty() {
                return Err(RemoteError::Resolve {
                    server: server.to_string(),
                    reason: "no IPv4 address".into(),
                });
            }
        }
        let mut last_err = None;
        let mut tcp = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, settings.timeout) {
                Ok(s) => {
                    tcp = Some((s, *a));
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        let Some((tcp, addr)) = tcp else {
            return Err(RemoteError::Connect {
                server: server.to_string(),
                source: last_err.unwrap_or_else(|| io::Error::other("no address")),
            });
        };
        let io_err = |e: io::Error| RemoteError::Io {
            server: server.to_string(),
            waiting_for: "the connection's options".into(),
            source: e,
        };
        tcp.set_read_timeout(Some(settings.timeout))
            .map_err(io_err)?;
        tcp.set_write_timeout(Some(settings.timeout))
            .map_err(io_err)?;
        tcp.set_nodelay(true).map_err(io_err)?;
        crate::debug!("connected to {addr}");

        let identity = Identity::new(&keys).map_err(|reason| RemoteError::Tls {
            server: server.to_string(),
            reason,
        })?;
        let (config, peer) = tls::client_config(&identity).map_err(|reason| RemoteError::Tls {
            server: server.to_string(),
            reason,
        })?;
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        let conn =
            rustls::ClientConnection::new(std::sync::Arc::new(config), name).map_err(|e| {
                RemoteError::Tls {
                    server: server.to_string(),
                    reason: e.to_string(),
                }
            })?;
        let mut c = Connection {
            stream: rustls::StreamOwned::new(conn, tcp),
            server: server.to_string(),
            timeout: settings.timeout,
            protocol: settings.protocol,
            server_key: String::new(),
            server_version: String::new(),
            broken: false,
        };
        while c.stream.conn.is_handshaking() {
            if let Err(e) = c.stream.conn.complete_io(&mut c.stream.sock) {
                return Err(c.tls_failure(e));
            }
        }
        let spki = peer.presented().ok_or_else(|| RemoteError::Tls {
            server: server.to_string(),
            reason: "the server showed no certificate".into(),
        })?;
        let key = PublicKey::from_spki_der(&spki).map_err(|reason| RemoteError::Tls {
            server: server.to_string(),
            reason: format!("the server's certificate: {reason}"),
        })?;
        c.server_key = key.digest();
        // copyfrom_restrict_keys: checked before any trust is given.
        if !settings.restrict_keys.is_empty() && !settings.restrict_keys.contains(&c.server_key) {
            return Err(RemoteError::KeyNotAllowed {
                server: c.server.clone(),
                presented: c.server_key.clone(),
            });
        }
        c.check_trust(&ring, &key, &addr.ip().to_string(), settings)?;
        c.identify(&settings.user, &keys)?;
        crate::debug!(
            "connected to {} (protocol {}, key {})",
            c.server,
            c.protocol,
            c.server_key
        );
        Ok(c)
    }

    /// An error of the handshake in words: a server that closed, or went
    /// quiet, or spoke something else.
    fn tls_failure(&self, e: io::Error) -> RemoteError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                self.io_error(e, "the TLS handshake")
            }
            // cf-serverd drops a host outside its allowconnects (or one
            // over its connection limits) before any TLS.
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => self.io_error(
                e,
                "the TLS handshake; is this host in the server's allowconnects?",
            ),
            _ => RemoteError::Tls {
                server: self.server.clone(),
                reason: e.to_string(),
            },
        }
    }

    /// The trust decision, as cf-agent makes it: the key stored under the
    /// presented digest is trusted; a different key stored for this
    /// address is a mismatch; a new key is trusted only when asked.
    fn check_trust(
        &self,
        ring: &KeyRing,
        key: &PublicKey,
        address: &str,
        settings: &Settings,
    ) -> Result<(), RemoteError> {
        let digest = key.digest();
        let user = &settings.user;
        let lastseen = LastSeen::of_workdir(&settings.workdir);
        let seen = Seen {
            key: digest.clone(),
            user: user.clone(),
            when: now(),
            how: "outgoing".into(),
        };
        if let Some(stored) = ring.peer(user, &digest)? {
            if stored == *key {
                lastseen
                    .record(address, seen)
                    .map_err(RemoteError::LastSeen)?;
                return Ok(());
            }
            // Same digest, different key: as good as a forgery.
            return Err(RemoteError::KeyMismatch {
                server: self.server.clone(),
                presented: digest.clone(),
                expected: stored.digest(),
                stored: ring.peer_path(user, &digest),
            });
        }
        if let Some(before) = lastseen.key_of(address).map_err(RemoteError::LastSeen)?
            && before.key != digest
            && ring.peer(&before.user, &before.key)?.is_some()
        {
            return Err(RemoteError::KeyMismatch {
                server: self.server.clone(),
                presented: digest,
                expected: before.key.clone(),
                stored: ring.peer_path(&before.user, &before.key),
            });
        }
        if !settings.trust_new_server_key {
            return Err(RemoteError::UntrustedServer {
                server: self.server.clone(),
                presented: digest.clone(),
                expected_file: ring.peer_path(user, &digest),
            });
        }
        let stored = ring.trust(user, key)?;
        crate::info!(
            "Trusting new key {digest} of {}, stored in {}",
            self.server,
            stored.display()
        );
        lastseen
            .record(address, seen)
            .map_err(RemoteError::LastSeen)
    }

    /// The version lines and `IDENTITY`, until `OK WELCOME`.
    fn identify(&mut self, user: &str, keys: &KeyPair) -> Result<(), RemoteError> {
        let line = self.read_line("the server's version line")?;
        let theirs = line
            .strip_prefix("CFE_v")
            .map(|r| {
                r.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|d| d.parse::<i64>().ok())
            .ok_or_else(|| RemoteError::BadVersion {
                server: self.server.clone(),
                line: line.clone(),
            })?;
        if theirs < 2 {
            return Err(RemoteError::OldProtocol {
                server: self.server.clone(),
                theirs,
            });
        }
        // A newer server speaks our version too; an older one, its own.
        if theirs < i64::from(self.protocol) {
            self.protocol = theirs as u8;
        }
        self.server_version = line.trim_end().to_string();
        let hello = format!(
            "CFE_v{} cf-agent {}\n",
            self.protocol,
            crate::COMPAT_VERSION
        );
        self.write_raw(hello.as_bytes(), "sending our version")?;
        self.write_raw(
            format!("IDENTITY USERNAME={user}\n").as_bytes(),
            "sending IDENTITY",
        )?;
        let server = self.server.clone();
        let not_welcome = |reply: String| RemoteError::NotWelcome {
            server,
            user: user.to_string(),
            our_key: keys.public().digest(),
            reply,
        };
        match self.read_line("OK WELCOME") {
            Ok(l) if l.starts_with("OK WELCOME") => Ok(()),
            Ok(l) => Err(not_welcome(format!(" (it answered '{}')", l.trim_end()))),
            Err(RemoteError::Closed { .. }) | Err(RemoteError::Io { .. }) => Err(not_welcome(
                " (it closed the connection after our IDENTITY)".into(),
            )),
            Err(e) => Err(e),
        }
    }

    /// How long to wait for each answer from now on.
    pub fn set_timeout(&mut self, timeout: Duration) {
        if timeout != self.timeout {
            self.timeout = timeout;
            let _ = self.stream.sock.set_read_timeout(Some(timeout));
            let _ = self.stream.sock.set_write_timeout(Some(timeout));
        }
    }

    /// Whether a failure left the connection out of step with the server.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The server as named when connecting.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The protocol version agreed on (2 or 3).
    pub fn protocol(&self) -> u8 {
        self.protocol
    }

    /// The server's key digest (`MD5=<hex>`).
    pub fn server_key(&self) -> &str {
        &self.server_key
    }

    /// The server's version line (`CFE_v3 cf-serverd 3.21.0`).
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    fn io_error(&self, e: io::Error, waiting_for: &str) -> RemoteError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => RemoteError::Timeout {
                server: self.server.clone(),
                secs: self.timeout.as_secs().max(1),
                waiting_for: waiting_for.to_string(),
            },
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => RemoteError::Closed {
                server: self.server.clone(),
                waiting_for: waiting_for.to_string(),
            },
            _ => RemoteError::Io {
                server: self.server.clone(),
                waiting_for: waiting_for.to_string(),
                source: e,
            },
        }
    }

    fn write_raw(&mut self, data: &[u8], doing: &str) -> Result<(), RemoteError> {
        let r = self
            .stream
            .write_all(data)
            .and_then(|_| self.stream.flush());
        r.map_err(|e| {
            self.broken = true;
            self.io_error(e, doing)
        })
    }

    fn read_exact(&mut self, buf: &mut [u8], waiting_for: &str) -> Result<(), RemoteError> {
        self.stream.read_exact(buf).map_err(|e| {
            self.broken = true;
            self.io_error(e, waiting_for)
        })
    }

    /// One line of the identification dialog (at most 1024 bytes).
    fn read_line(&mut self, waiting_for: &str) -> Result<String, RemoteError> {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while line.len() < 1024 {
            self.read_exact(&mut b, waiting_for)?;
            line.push(b[0]);
            if b[0] == b'\n' {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    fn usable(&self) -> Result<(), RemoteError> {
        if self.broken {
            return Err(RemoteError::Broken {
                server: self.server.clone(),
            });
        }
        Ok(())
    }

    /// Sends one transaction (status `t`: nothing more follows).
    fn send(&mut self, payload: &[u8], doing: &str) -> Result<(), RemoteError> {
        debug_assert!(!payload.is_empty() && payload.len() <= MAX_PAYLOAD);
        let mut frame = vec![0u8; HEADER];
        let head = format!("t {}", payload.len());
        frame[..head.len()].copy_from_slice(head.as_bytes());
        frame.extend_from_slice(payload);
        self.write_raw(&frame, doing)
    }

    /// Receives one transaction: its payload and whether more follow.
    fn receive(&mut self, waiting_for: &str) -> Result<(Vec<u8>, bool), RemoteError> {
        let mut head = [0u8; HEADER];
        self.read_exact(&mut head, waiting_for)?;
        let text: String = head
            .iter()
            .take_while(|&&b| b != 0)
            .map(|&b| b as char)
            .collect();
        let parsed = text.split_once(' ').and_then(|(status, len)| {
            let more = match status {
                "t" => false,
                "m" => true,
                _ => return None,
            };
            let len: usize = len.trim().parse().ok()?;
            (1..=MAX_PAYLOAD).contains(&len).then_some((more, len))
        });
        let Some((more, len)) = parsed else {
            self.broken = true;
            return Err(RemoteError::Protocol {
                server: self.server.clone(),
                command: "transaction",
                path: String::new(),
                detail: format!("bad transaction header '{}'", text.escape_default()),
            });
        };
        let mut payload = vec![0u8; len];
        self.read_exact(&mut payload, waiting_for)?;
        Ok((payload, more))
    }

    /// A request's text, checked for length and for characters the
    /// server reads as the end of a line.
    fn request(&self, command: &'static str, path: &str) -> Result<String, RemoteError> {
        if path.contains('\n') || path.contains('\0') {
            return Err(RemoteError::Refused {
                server: self.server.clone(),
                command,
                path: path.to_string(),
                message: "a path with a newline or NUL cannot be asked for".into(),
            });
        }
        let text = match command {
            "STAT" => format!("SYNCH {} STAT {path}", now()),
            "GET" => format!("GET {GET_BLOCK} {path}"),
            other => format!("{other} {path}"),
        };
        // MD5 adds 18 bytes after the name.
        if text.len() + 18 > MAX_PAYLOAD {
            return Err(RemoteError::TooLong {
                path: path.to_string(),
                len: path.len(),
                max: MAX_PAYLOAD - 18 - (text.len() - path.len()),
            });
        }
        Ok(text)
    }

    /// A `BAD:` answer as an error.
    fn refusal(&self, command: &'static str, path: &str, payload: &[u8]) -> Option<RemoteError> {
        let text = payload_text(payload);
        if text.starts_with(REFUSAL) {
            return Some(RemoteError::AccessDenied {
                server: self.server.clone(),
                command,
                path: path.to_string(),
            });
        }
        let message = text.strip_prefix("BAD:")?.trim();
        Some(RemoteError::Refused {
            server: self.server.clone(),
            command,
            path: path.to_string(),
            message: message.to_string(),
        })
    }

    /// `SYNCH <now> STAT <path>`: the file's metadata (of a link's
    /// target, with the link's own mode and target beside).
    pub fn stat(&mut self, path: &str) -> Result<RemoteStat, RemoteError> {
        self.usable()?;
        let req = self.request("STAT", path)?;
        self.send(req.as_bytes(), "sending STAT")?;
        let (payload, _) = self.receive("the STAT answer")?;
        if let Some(e) = self.refusal("STAT", path, &payload) {
            return Err(e);
        }
        let text = payload_text(&payload);
        let mut st = parse_stat(&text).ok_or_else(|| {
            self.protocol_error("STAT", path, format!("unreadable answer '{text}'"))
        })?;
        // The second transaction: `OK:` and a link's target.
        let (link, _) = self.receive("the STAT link answer")?;
        let link = payload_text(&link);
        let target = link.strip_prefix("OK:").ok_or_else(|| {
            self.protocol_error("STAT", path, format!("unreadable link answer '{link}'"))
        })?;
        if st.link_mode != 0 && !target.is_empty() {
            st.link_target = Some(target.to_string());
        }
        Ok(st)
    }

    fn protocol_error(&mut self, command: &'static str, path: &str, detail: String) -> RemoteError {
        self.broken = true;
        RemoteError::Protocol {
            server: self.server.clone(),
            command,
            path: path.to_string(),
            detail,
        }
    }

    /// `OPENDIR <path>`: the names in a directory, `.` and `..` included,
    /// in the server's order.
    pub fn list_dir(&mut self, path: &str) -> Result<Vec<String>, RemoteError> {
        self.usable()?;
        let req = self.request("OPENDIR", path)?;
        self.send(req.as_bytes(), "sending OPENDIR")?;
        let mut names = Vec::new();
        loop {
            let (payload, more) = self.receive("the OPENDIR answer")?;
            if names.is_empty()
                && let Some(e) = self.refusal("OPENDIR", path, &payload)
            {
                return Err(e);
            }
            for name in payload.split(|&b| b == 0) {
                if name.is_empty() {
                    // A double NUL ends the packet.
                    break;
                }
                let name = String::from_utf8_lossy(name).into_owned();
                if name == TERMINATOR {
                    return Ok(names);
                }
                names.push(name);
            }
            if !more {
                return Err(self.protocol_error(
                    "OPENDIR",
                    path,
                    "the listing ended without its terminator".into(),
                ));
            }
        }
    }

    /// `MD5 <path>` with our digest: whether the server's file differs
    /// from content whose MD5 is `local_md5`.
    pub fn differs(&mut self, path: &str, local_md5: &[u8; 16]) -> Result<bool, RemoteError> {
        self.usable()?;
        let req = self.request("MD5", path)?;
        let mut payload = req.into_bytes();
        // The name's NUL, one byte of padding, then the digest.
        payload.extend_from_slice(&[0, 0]);
        payload.extend_from_slice(local_md5);
        self.send(&payload, "sending MD5")?;
        let (answer, _) = self.receive("the MD5 answer")?;
        if let Some(e) = self.refusal("MD5", path, &answer) {
            return Err(e);
        }
        match payload_text(&answer).as_str() {
            "CFD_TRUE" => Ok(true),
            "CFD_FALSE" => Ok(false),
            other => Err(self.protocol_error("MD5", path, format!("unreadable answer '{other}'"))),
        }
    }

    /// `GET <path>`: the file's `size` bytes (as `stat` gave it) into
    /// `out`, `progress` told the count after each block. On any failure
    /// the connection is left unusable (the stream's place is lost).
    pub fn get_into(
        &mut self,
        path: &str,
        size: u64,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), RemoteError> {
        self.usable()?;
        if size == 0 {
            // cf-serverd sends nothing for an empty file.
            return Ok(());
        }
        let req = self.request("GET", path)?;
        self.send(req.as_bytes(), "sending GET")?;
        let mut got: u64 = 0;
        let mut block = vec![0u8; GET_BLOCK];
        while got < size {
            let want = (size - got).min(GET_BLOCK as u64) as usize;
            // The first read of a block takes what has come, so that a
            // short refusal is seen without waiting for a whole block; the
            // first one has room for a refusal's header and `BAD:` even when
            // the file is smaller (the server sends no more than the file
            // then, so nothing beyond it is read).
            let room = if got == 0 {
                want.max(REFUSAL_PEEK)
            } else {
                want
            };
            let mut filled = match self.stream.read(&mut block[..room]) {
                Ok(0) => {
                    self.broken = true;
                    return Err(self.io_error(io::ErrorKind::UnexpectedEof.into(), "GET's data"));
                }
                Ok(n) => n,
                Err(e) => {
                    self.broken = true;
                    return Err(self.io_error(e, "GET's data"));
                }
            };
            if got == 0
                && let Some(e) = self.get_refusal(path, &block[..filled])
            {
                self.broken = true;
                return Err(e);
            }
            if filled > want {
                return Err(self.protocol_error(
                    "GET",
                    path,
                    format!("{filled} bytes where the file has {size}"),
                ));
            }
            if filled < want {
                let rest = &mut block[filled..want];
                self.read_exact(rest, "GET's data")?;
                filled = want;
            }
            let buf = &block[..filled];
            if buf.starts_with(CHANGED.as_bytes()) {
                self.broken = true;
                return Err(RemoteError::Changed {
                    server: self.server.clone(),
                    path: path.to_string(),
                });
            }
            out.write_all(buf).map_err(|e| {
                self.broken = true;
                RemoteError::Local {
                    path: PathBuf::from(path),
                    reason: crate::host::strerror(&e),
                }
            })?;
            got += filled as u64;
            progress(got);
        }
        Ok(())
    }

    /// A refusal at the start of GET's stream: a transaction (`t 59`,
    /// then `BAD: …`) where the file's bytes would be, or a bare `BAD: `.
    /// The rest of the transaction is read, for the server's words.
    fn get_refusal(&mut self, path: &str, first: &[u8]) -> Option<RemoteError> {
        if first.starts_with(b"BAD: ") {
            return self.refusal("GET", path, first);
        }
        if !(first.len() >= REFUSAL_PEEK
            && first.starts_with(b"t ")
            && first[HEADER..].starts_with(b"BAD:"))
        {
            return None;
        }
        let head = payload_text(&first[..HEADER]);
        let len: usize = head[2..].trim().parse().ok()?;
        let mut payload = first[HEADER..].to_vec();
        if len > payload.len() && len <= MAX_PAYLOAD {
            let mut rest = vec![0u8; len - payload.len()];
            if self.stream.read_exact(&mut rest).is_ok() {
                payload.extend_from_slice(&rest);
            }
        }
        self.refusal("GET", path, &payload)
    }

    /// Copies the server's `path` to `dest` on `host`: stat, then GET into
    /// a new file beside `dest` that is renamed over it only once whole,
    /// so that a failure at any point (the server gone, a refusal, the
    /// file changing) leaves `dest` as it was. Returns the server's stat.
    pub fn fetch(
        &mut self,
        path: &str,
        host: &Host,
        dest: &Path,
        mode: u32,
    ) -> Result<RemoteStat, RemoteError> {
        self.fetch_observed(path, host, dest, mode, &mut |_| {})
    }

    /// [`Connection::fetch`], telling `progress` the bytes received so far.
    pub fn fetch_observed(
        &mut self,
        path: &str,
        host: &Host,
        dest: &Path,
        mode: u32,
        progress: &mut dyn FnMut(u64),
    ) -> Result<RemoteStat, RemoteError> {
        let st = self.stat(path)?;
        if st.kind != RemoteKind::Regular {
            return Err(RemoteError::Refused {
                server: self.server.clone(),
                command: "GET",
                path: path.to_string(),
                message: format!("not a regular file ({:?})", st.kind),
            });
        }
        host.write_atomic_streamed(dest, mode, |w| self.get_into(path, st.size, w, progress))
            .map_err(|e| match e {
                Streamed::Io(e) => RemoteError::Local {
                    path: dest.to_path_buf(),
                    reason: crate::host::strerror(&e),
                },
                // A write of the copy failed: name the file, not the source.
                Streamed::Fill(RemoteError::Local { reason, .. }) => RemoteError::Local {
                    path: dest.to_path_buf(),
                    reason,
                },
                Streamed::Fill(e) => e,
            })?;
        Ok(st)
    }
}

/// A failure of a streamed write: of the writing, or of what filled it.
pub type Streamed = crate::host::fs::Streamed<RemoteError>;

impl Drop for Connection {
    fn drop(&mut self) {
        // Say goodbye as cf-agent does (a TLS close_notify), unless the
        // connection is already gone; never wait long for it.
        if !self.broken {
            let _ = self
                .stream
                .sock
                .set_write_timeout(Some(Duration::from_secs(1)));
            self.stream.conn.send_close_notify();
            let _ = self.stream.conn.complete_io(&mut self.stream.sock);
        }
    }
}

fn payload_text(payload: &[u8]) -> String {
    let end = payload
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(payload.len());
    String::from_utf8_lossy(&payload[..end]).into_owned()
}

/// `OK: type mode lmode uid gid size atime mtime ctime makeholes ino nlink dev`.
fn parse_stat(text: &str) -> Option<RemoteStat> {
    let rest = text.strip_prefix("OK:")?;
    let n: Vec<i64> = rest
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if n.len() < 13 {
        return None;
    }
    Some(RemoteStat {
        kind: RemoteKind::from_wire(n[0])?,
        mode: u32::try_from(n[1]).ok()? & 0o7777,
        link_mode: u32::try_from(n[2]).ok()? & 0o7777,
        uid: u32::try_from(n[3]).ok()?,
        gid: u32::try_from(n[4]).ok()?,
        size: u64::try_from(n[5]).ok()?,
        atime: n[6],
        mtime: n[7],
        ctime: n[8],
        sparse: n[9] != 0,
        // The server prints these through `%d` and may wrap them.
        ino: n[10] as u64,
        nlink: n[11] as u64,
        dev: n[12] as u64,
        link_target: None,
    })
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_answers() {
        let st =
            parse_stat("OK: 0 420 0 0 0 6 1700000000 1700000001 1700000002 0 1234 1 2049").unwrap();
        assert_eq!(st.kind, RemoteKind::Regular);
        assert_eq!(st.mode, 0o644);
        assert_eq!(st.size, 6);
        assert_eq!(st.mtime, 1700000001);
        assert_eq!(st.dev, 2049);
        assert!(parse_stat("OK: 0 420").is_none());
        assert!(parse_stat("OK: 9 420 0 0 0 6 1 1 1 0 1 1 1").is_none());
        assert!(parse_stat("BAD: no").is_none());
    }

    #[test]
    fn server_names() {
        assert_eq!(resolve("127.0.0.1").unwrap()[0].port(), DEFAULT_PORT);
        assert_eq!(resolve("127.0.0.1:15308").unwrap()[0].port(), 15308);
        assert_eq!(resolve("::1").unwrap()[0].port(), DEFAULT_PORT);
        assert_eq!(resolve("[::1]:99").unwrap()[0].port(), 99);
        assert!(resolve("").is_err());
    }
}
