//! Clients of engines that already exist: cf-serverd's protocol, so that a
//! host can take its policy and files from a CFEngine hub (floor 1; it
//! uses only `values`, `syntax` and `host`).
//!
//! - [`keys`]: host keys as `cf-key` makes them, their `MD5=` digests, and
//!   the key ring in `WORKDIR/ppkeys`;
//! - [`client`]: one connection to cf-serverd: TLS with both sides' keys
//!   checked, the version and `IDENTITY` dialog, and the file commands
//!   `SYNCH … STAT`, `OPENDIR`, `MD5` and `GET`;
//! - [`lastseen`]: which key each server address showed, so that a
//!   changed key is refused rather than trusted anew;
//! - [`tls`]: the certificate made from our key, and the TLS settings.
//!
//! What of the protocol is left out, on purpose or for now:
//!
//! - the classic protocol (version 1: `CAUTH`/`SAUTH`, RSA challenge and
//!   session keys, the encrypted `S…` commands): cf-serverd 3.21 refuses
//!   it unless `allowlegacyconnects` names the host, and TLS supersedes it;
//! - TLS 1.2: cf-serverd 3.21 allows it only with RSA key exchange, which
//!   rustls does not implement; with OpenSSL 3 it negotiates TLS 1.3;
//! - the commands other than file access: `VERSION`, `EXEC` (cf-runagent),
//!   `VAR`, `CONTEXT`, `QUERY`, `COOKIE` and `CALL_ME_BACK` (Enterprise);
//! - cf-agent's stat cache (the run's connections are kept, one per
//!   server, in [`client::Sessions`]; bootstrapping is `crate::bootstrap`);
//! - `bwlimit` and `bindtointerface`; SHA digests for key names (cf-agent
//!   names keys by MD5 unless built in FIPS mode);
//! - cf-agent's `lastseen` database (LMDB): we keep our own record (see
//!   [`lastseen`]) and neither read nor write theirs.

pub mod client;
mod der;
pub mod keys;
pub mod lastseen;
pub mod tls;
