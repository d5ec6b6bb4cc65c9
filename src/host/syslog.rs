//! The system log, as cf-agent writes to it: syslog(3)'s datagrams on
//! `/dev/log` (which journald reads too), facility `user`, the program's
//! name and pid as the tag. Written here rather than through libc's
//! syslog(3) so that a test can point it at a socket of its own
//! (`CONVERGENT_SYSLOG_SOCKET`).

use std::os::unix::net::UnixDatagram;
use std::sync::Mutex;

/// syslog(3)'s `LOG_USER`, the facility cf-agent logs under.
pub const FACILITY_USER: u8 = 1;

/// syslog(3)'s severities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Crit = 2,
    Err = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
}

struct Log {
    tag: String,
    socket: Option<UnixDatagram>,
    path: String,
    /// After a failed connect, when to try again: a host without a log
    /// socket would otherwise cost three system calls per line logged.
    retry_at: Option<std::time::Instant>,
}

/// How long a failed connect to the log socket is not tried again.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

static LOG: Mutex<Option<Log>> = Mutex::new(None);

/// Where the datagrams go: `/dev/log` unless a test says otherwise.
fn socket_path() -> String {
    std::env::var("CONVERGENT_SYSLOG_SOCKET")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/dev/log".to_string())
}

/// Starts logging under `tag` (cf-agent's is its program name). Nothing is
/// sent before this.
pub fn open(tag: &str) {
    if let Ok(mut log) = LOG.lock() {
        *log = Some(Log {
            tag: tag.to_string(),
            socket: None,
            path: socket_path(),
            retry_at: None,
        });
    }
}

/// One line in syslog's (RFC 3164) shape, as syslog(3) sends it.
pub fn datagram(
    tag: &str,
    pid: u32,
    severity: Severity,
    now: i64,
    message: impl std::fmt::Display,
) -> String {
    let pri = u32::from(FACILITY_USER) * 8 + severity as u32;
    let stamp = crate::host::clock::local_text(now, "%b %e %H:%M:%S").unwrap_or_default();
    format!("<{pri}>{stamp} {tag}[{pid}]: {message}")
}

/// Sends one message; a system without a log socket loses it quietly, as
/// syslog(3) does (the line was printed anyway). The message is formatted
/// only when it goes out: every report line of a run comes here.
pub fn send(severity: Severity, message: std::fmt::Arguments<'_>) {
    let Ok(mut guard) = LOG.lock() else { return };
    let Some(log) = guard.as_mut() else { return };
    if log.socket.is_none() {
        let now = std::time::Instant::now();
        if log.retry_at.is_some_and(|t| now < t) {
            return;
        }
        let connected = UnixDatagram::unbound().and_then(|s| s.connect(&log.path).map(|()| s));
        match connected {
            Ok(s) => {
                log.socket = Some(s);
                log.retry_at = None;
            }
            Err(_) => {
                log.retry_at = Some(now + RETRY_AFTER);
                return;
            }
        }
    }
    let line = datagram(
        &log.tag,
        std::process::id(),
        severity,
        crate::host::clock::now_secs(),
        message,
    );
    if let Some(s) = &log.socket
        && s.send(line.as_bytes()).is_err()
    {
        // The log daemon restarted: connect again next time.
        log.socket = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_look_like_syslog3s() {
        let d = datagram("cf-agent", 42, Severity::Err, 0, "CFEngine(agent)  x\n");
        assert!(d.starts_with("<11>"), "{d}");
        assert!(d.ends_with(" cf-agent[42]: CFEngine(agent)  x\n"), "{d}");
        assert!(datagram("a", 1, Severity::Notice, 0, "m").starts_with("<13>"));
        assert!(datagram("a", 1, Severity::Info, 0, "m").starts_with("<14>"));
    }
}
