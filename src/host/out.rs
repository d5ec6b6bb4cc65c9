//! The agent's standard output while a run acts. Rust's `stdout` makes one
//! `write` per line; a run that prints ten thousand report lines spent
//! more time in those system calls than in making the lines. While a run
//! holds its output ([`hold`]) the lines gather here and go out together:
//! - when a promise that may take long or touch the system is about to act
//!   (the agent calls [`flush`]), before a program is started (it may write
//!   to the same output), and before a line goes to standard error;
//! - when the oldest line held has waited [`MAX_WAIT`], or [`MAX_HELD`]
//!   bytes are held;
//! - when the hold ends: the run's end, or a panic unwinding through it.
//!
//! So the bytes and their order are those of a line-by-line writer, and a
//! line waits only while quick promises (reports, variables, classes) run.

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest a held line waits for the next line before both go out.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// The most bytes held before they go out.
const MAX_HELD: usize = 32 * 1024;

struct Held {
    /// Holds in force, counted so that holds may nest.
    depth: usize,
    bytes: Vec<u8>,
    /// When the oldest line held was written.
    since: Option<Instant>,
}

static OUT: Mutex<Held> = Mutex::new(Held {
    depth: 0,
    bytes: Vec::new(),
    since: None,
});

fn lock() -> std::sync::MutexGuard<'static, Held> {
    // A panic while the lock was held leaves bytes that are still whole
    // lines: keep using them.
    OUT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes `bytes` (whole lines) to standard output, or holds them while a
/// run holds its output. Write errors are ignored, as a terminal log does.
pub fn write(bytes: &[u8]) {
    write_parts(&[bytes]);
}

/// [`write`] of a line given in parts (a prefix, a text, its newline),
/// without putting them together first.
pub fn write_parts(parts: &[&[u8]]) {
    let mut held = lock();
    if held.depth == 0 {
        drop(held);
        let mut out = std::io::stdout().lock();
        let _ = parts.iter().try_for_each(|p| out.write_all(p));
        return;
    }
    if held.push(parts, Instant::now()) {
        send(&mut held);
    }
}

impl Held {
    /// Adds a line; whether what is held should go out now.
    fn push(&mut self, parts: &[&[u8]], now: Instant) -> bool {
        let since = *self.since.get_or_insert(now);
        parts.iter().for_each(|p| self.bytes.extend_from_slice(p));
        self.bytes.len() >= MAX_HELD || now.duration_since(since) >= MAX_WAIT
    }
}

/// Writes what is held.
pub fn flush() {
    let mut held = lock();
    if !held.bytes.is_empty() {
        send(&mut held);
    }
}

fn send(held: &mut Held) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&held.bytes);
    let _ = out.flush();
    held.bytes.clear();
    held.since = None;
}

/// While the returned guard lives, lines written with [`write`] are held
/// (see the module's text); dropping it writes them.
#[must_use = "the output is held only while the guard lives"]
pub fn hold() -> HoldGuard {
    lock().depth += 1;
    HoldGuard(())
}

pub struct HoldGuard(());

impl Drop for HoldGuard {
    fn drop(&mut self) {
        let mut held = lock();
        held.depth -= 1;
        if !held.bytes.is_empty() {
            send(&mut held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Held {
        Held {
            depth: 1,
            bytes: Vec::new(),
            since: None,
        }
    }

    #[test]
    fn lines_go_out_when_the_oldest_waited_long_enough() {
        let mut h = empty();
        let t0 = Instant::now();
        assert!(!h.push(&[b"R: one\n"], t0));
        assert!(!h.push(&[b"R: ", b"two", b"\n"], t0 + MAX_WAIT / 2));
        assert!(h.push(&[b"R: three\n"], t0 + MAX_WAIT));
        assert_eq!(h.bytes, b"R: one\nR: two\nR: three\n");
    }

    #[test]
    fn lines_go_out_when_enough_bytes_are_held() {
        let mut h = empty();
        let t0 = Instant::now();
        let line = [b'x'; 1024];
        let sent = (0..MAX_HELD / 1024)
            .map(|_| h.push(&[&line], t0))
            .collect::<Vec<_>>();
        assert!(sent[..sent.len() - 1].iter().all(|s| !s));
        assert!(sent[sent.len() - 1]);
    }
}
