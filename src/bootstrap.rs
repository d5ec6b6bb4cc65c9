//! `--bootstrap HUB` (`-B`) and the failsafe policy, as cf-agent 3.21
//! does them:
//!
//! 1. the host needs its key pair (`cf-key`);
//! 2. the policy server is this host when HUB is one of its interface
//!    addresses (`state/am_policy_hub`, classes `am_policy_hub` and
//!    `policy_server`), else a client of HUB;
//! 3. what the inputs held is removed, `policy_server.dat` names HUB (so
//!    that discovery gives `sys.policy_hub` and `sys.policy_hub_port`);
//! 4. a client connects to HUB once, trusting its key on first sight
//!    unless `--trust-server=no` (then the key must already be trusted);
//! 5. the failsafe policy is written to `inputs/failsafe.cf` and run, with
//!    the class `bootstrap_mode`: it fetches the hub's policy;
//! 6. the bootstrap succeeded when `inputs/promises.cf` arrived; else
//!    `policy_server.dat` (and the hub marker) are removed again, so the
//!    host is left as it was, not half a member.
//!
//! The failsafe policy (`policies/failsafe.cf`) is also what a run falls
//! back to when the policy of the inputs directory is missing or does not
//! pass the check ([`failsafe_entry`]).

use crate::host::Host;
use crate::remote::client::{Connection, DEFAULT_PORT, Settings};
use crate::remote::keys::KeyRing;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Our failsafe policy, written to `inputs/failsafe.cf`.
pub const FAILSAFE_POLICY: &str = include_str!("../policies/failsafe.cf");
/// Its name in the inputs directory.
pub const FAILSAFE_NAME: &str = "failsafe.cf";

#[derive(Debug, Error)]
pub enum BootstrapError {
    #[error(
        "No public/private key pair is loaded from '{0}'; make one with cf-key, then bootstrap again"
    )]
    NoKeys(PathBuf),
    #[error("cannot bootstrap to '{hub}': {reason}")]
    BadHub { hub: String, reason: String },
    #[error("Bootstrapping failed: {0}")]
    Connect(String),
    #[error("cannot write '{path}': {reason}")]
    Write { path: PathBuf, reason: String },
}

/// A bootstrap under way: where, and what role this host takes.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    /// HUB as given (`host` or `host:port`).
    pub hub: String,
    /// The hub's host part and port.
    pub host: String,
    pub port: u16,
    /// This host is the hub.
    pub am_hub: bool,
    pub workdir: PathBuf,
}

impl Bootstrap {
    fn inputs(&self) -> PathBuf {
        self.workdir.join("inputs")
    }

    fn policy_server_dat(&self) -> PathBuf {
        self.workdir.join("policy_server.dat")
    }

    fn hub_marker(&self) -> PathBuf {
        self.workdir.join("state").join("am_policy_hub")
    }

    /// The failsafe policy's path, once written.
    pub fn failsafe(&self) -> PathBuf {
        self.inputs().join(FAILSAFE_NAME)
    }
}

/// Steps 1 to 5 short of running the failsafe policy: checks the keys,
/// decides the role, clears the inputs, writes `policy_server.dat` (and
/// the hub marker), trusts the hub's key and writes the failsafe policy.
/// On an error nothing of the bootstrap is left behind.
pub fn prepare(
    host: &Host,
    workdir: &Path,
    hub: &str,
    trust_server: bool,
) -> Result<Bootstrap, BootstrapError> {
    let ring = KeyRing::of_workdir(workdir);
    if ring.local_pair().is_err() {
        return Err(BootstrapError::NoKeys(ring.local_public_path()));
    }
    let (name, port) = crate::discover::split_host_port(hub);
    let bad = |reason: String| BootstrapError::BadHub {
        hub: hub.to_string(),
        reason,
    };
    let port = match port {
        None | Some("") => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| bad(format!("'{p}' is not a port number")))?,
    };
    if name.is_empty() {
        return Err(bad("no host is named".into()));
    }
    let ip: IpAddr = match name.parse() {
        Ok(ip) => ip,
        Err(_) => (name, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.ip())
            .ok_or_else(|| bad(format!("the name '{name}' does not resolve")))?,
    };
    let b = Bootstrap {
        hub: hub.to_string(),
        host: name.to_string(),
        port,
        am_hub: crate::discover::is_own_address(ip),
        workdir: workdir.to_path_buf(),
    };
    if b.am_hub {
        crate::info!(
            "Assuming role as policy server, with policy distribution point at '{}'",
            workdir.join("masterfiles").display()
        );
    } else {
        crate::info!("Assuming role as regular client, bootstrapping to policy server: {hub}");
    }

    // Trust first: a hub we cannot reach or trust changes nothing here.
    if !b.am_hub {
        if trust_server {
            crate::info!(
                target: crate::report::log::NOTICE_TARGET,
                "Bootstrap mode: implicitly trusting server, use --trust-server=no if server trust is already established"
            );
        }
        let mut settings = Settings::new(workdir);
        settings.trust_new_server_key = trust_server;
        let address = match ip {
            IpAddr::V6(v6) => format!("[{v6}]:{port}"),
            IpAddr::V4(v4) => format!("{v4}:{port}"),
        };
        Connection::open(&address, &settings)
            .map_err(|e| BootstrapError::Connect(e.to_string()))?;
    }

    let inputs = b.inputs();
    crate::info!("Removing all files in '{}'", inputs.display());
    clear_dir(host, &inputs)?;
    let write = |path: &Path, text: &str, mode: u32| {
        if let Some(parent) = path.parent() {
            host.mkdir_all(parent, 0o700)
                .map_err(|e| BootstrapError::Write {
                    path: parent.to_path_buf(),
                    reason: crate::host::strerror(&e),
                })?;
        }
        host.write_atomic(path, text.as_bytes(), mode)
            .map_err(|e| BootstrapError::Write {
                path: path.to_path_buf(),
                reason: crate::host::strerror(&e),
            })
    };
    let result = (|| {
        write(&b.policy_server_dat(), &format!("{hub}\n"), 0o600)?;
        if b.am_hub {
            write(&b.hub_marker(), "", 0o600)?;
        } else if host.lstat(&b.hub_marker()).ok().flatten().is_some() {
            let _ = host.remove_file(&b.hub_marker());
        }
        crate::info!(
            "Writing built-in failsafe policy to '{}'",
            b.failsafe().display()
        );
        write(&b.failsafe(), FAILSAFE_POLICY, 0o600)
    })();
    if let Err(e) = result {
        undo(host, &b);
        return Err(e);
    }
    host.sync_pending_dirs()
        .map_err(|e| BootstrapError::Write {
            path: workdir.to_path_buf(),
            reason: crate::host::strerror(&e),
        })?;
    Ok(b)
}

/// Step 6: whether the bootstrap succeeded (the hub's `promises.cf` is in
/// the inputs); when it did not, what it wrote is removed again.
pub fn finish(host: &Host, b: &Bootstrap) -> bool {
    let promises = b.inputs().join("promises.cf");
    if host.lstat(&promises).ok().flatten().is_some() {
        crate::info!("Bootstrap to '{}' completed successfully!", b.hub);
        return true;
    }
    crate::error!(
        "Bootstrapping failed, no input file at '{}' after bootstrap",
        promises.display()
    );
    undo(host, b);
    false
}

fn undo(host: &Host, b: &Bootstrap) {
    for p in [b.policy_server_dat(), b.hub_marker()] {
        if host.lstat(&p).ok().flatten().is_some()
            && let Err(e) = host.remove_file(&p)
        {
            crate::error!(
                "Could not remove '{}': {}",
                p.display(),
                crate::host::strerror(&e)
            );
        }
    }
}

/// Removes everything in `dir` (which need not exist).
fn clear_dir(host: &Host, dir: &Path) -> Result<(), BootstrapError> {
    let names = host.read_dir(dir).unwrap_or_default();
    for name in names {
        let p = dir.join(&name);
        let is_dir = host
            .lstat(&p)
            .ok()
            .flatten()
            .is_some_and(|m| m.kind == crate::host::fs::FileKind::Dir);
        let r = if is_dir {
            host.remove_dir_all(&p)
        } else {
            host.remove_file(&p)
        };
        r.map_err(|e| BootstrapError::Write {
            path: p.clone(),
            reason: crate::host::strerror(&e),
        })?;
    }
    Ok(())
}

/// The failsafe policy to run instead of `entry` when `entry` (missing
/// or failing the check) is the policy of the inputs directory of
/// `workdir` and is not the failsafe policy itself; `None` when there is
/// no falling back.
pub fn failsafe_for(workdir: &Path, entry: &Path) -> Option<PathBuf> {
    let inputs = workdir.join("inputs");
    let failsafe = inputs.join(FAILSAFE_NAME);
    (entry.parent() == Some(inputs.as_path()) && entry != failsafe).then_some(failsafe)
}

/// Writes the failsafe policy at `path` from our copy when it is missing.
pub fn ensure_failsafe(host: &Host, path: &Path) -> Result<(), BootstrapError> {
    if host.lstat(path).ok().flatten().is_some() {
        return Ok(());
    }
    crate::info!("Writing built-in failsafe policy to '{}'", path.display());
    let parent = path.parent().unwrap_or(Path::new("/"));
    host.mkdir_all(parent, 0o700)
        .and_then(|_| host.write_atomic(path, FAILSAFE_POLICY.as_bytes(), 0o600))
        .map_err(|e| BootstrapError::Write {
            path: path.to_path_buf(),
            reason: crate::host::strerror(&e),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failsafe_policy_parses() {
        let parsed = crate::syntax::parser::parse(FAILSAFE_NAME, FAILSAFE_POLICY);
        assert!(!parsed.has_errors(), "{:?}", parsed.diagnostics);
    }

    #[test]
    fn only_the_inputs_policy_falls_back() {
        let wd = Path::new("/w");
        assert_eq!(
            failsafe_for(wd, Path::new("/w/inputs/promises.cf")),
            Some(PathBuf::from("/w/inputs/failsafe.cf"))
        );
        assert_eq!(
            failsafe_for(wd, Path::new("/w/inputs/update.cf")),
            Some(PathBuf::from("/w/inputs/failsafe.cf"))
        );
        assert_eq!(failsafe_for(wd, Path::new("/w/inputs/failsafe.cf")), None);
        assert_eq!(failsafe_for(wd, Path::new("/tmp/p.cf")), None);
        assert_eq!(failsafe_for(wd, Path::new("/w/inputs/sub/p.cf")), None);
    }
}
