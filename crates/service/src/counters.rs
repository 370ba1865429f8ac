//! The counters every server keeps and prints as one line on stderr when it
//! stops, so that a run can be checked against what the load generator saw.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Totals since start. Shared by all workers; relaxed atomics, since they are
/// only read at exit.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections closed (by either side).
    pub closed: AtomicU64,
    /// Bytes read from clients.
    pub bytes_in: AtomicU64,
    /// Bytes written to clients.
    pub bytes_out: AtomicU64,
    /// Chat lines handled (commands, including the ones answered with ERR).
    pub lines: AtomicU64,
    /// Chat messages appended to a room.
    pub messages: AtomicU64,
    /// Slow subscribers disconnected.
    pub cut: AtomicU64,
    /// Connections that ended with an I/O error.
    pub errors: AtomicU64,
}

/// A plain copy of [`Counters`], to add up and print.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// See [`Counters::accepted`].
    pub accepted: u64,
    /// See [`Counters::closed`].
    pub closed: u64,
    /// See [`Counters::bytes_in`].
    pub bytes_in: u64,
    /// See [`Counters::bytes_out`].
    pub bytes_out: u64,
    /// See [`Counters::lines`].
    pub lines: u64,
    /// See [`Counters::messages`].
    pub messages: u64,
    /// See [`Counters::cut`].
    pub cut: u64,
    /// See [`Counters::errors`].
    pub errors: u64,
}

impl Counters {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            accepted: self.accepted.load(Relaxed),
            closed: self.closed.load(Relaxed),
            bytes_in: self.bytes_in.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            lines: self.lines.load(Relaxed),
            messages: self.messages.load(Relaxed),
            cut: self.cut.load(Relaxed),
            errors: self.errors.load(Relaxed),
        }
    }

    /// Adds a snapshot from elsewhere (a child process) into these counters.
    pub fn absorb(&self, s: &Snapshot) {
        for (c, v) in [
            (&self.accepted, s.accepted),
            (&self.closed, s.closed),
            (&self.bytes_in, s.bytes_in),
            (&self.bytes_out, s.bytes_out),
            (&self.lines, s.lines),
            (&self.messages, s.messages),
            (&self.cut, s.cut),
            (&self.errors, s.errors),
        ] {
            Self::add(c, v);
        }
    }

    /// Prints the one stop line on stderr: `<name>: stopped: accepted=… …`.
    pub fn report(&self, name: &str) {
        eprintln!("{name}: stopped: {}", self.snapshot());
    }
}

impl Snapshot {
    /// The counters as eight little-endian u64s, for a child to send its parent
    /// through a pipe in one atomic write.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        for (chunk, v) in out.chunks_exact_mut(8).zip(self.fields()) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The inverse of [`Snapshot::to_bytes`].
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let mut v = [0u64; 8];
        for (x, chunk) in v.iter_mut().zip(b.chunks_exact(8)) {
            *x = u64::from_le_bytes(chunk.try_into().expect("chunks of 8"));
        }
        let [
            accepted,
            closed,
            bytes_in,
            bytes_out,
            lines,
            messages,
            cut,
            errors,
        ] = v;
        Snapshot {
            accepted,
            closed,
            bytes_in,
            bytes_out,
            lines,
            messages,
            cut,
            errors,
        }
    }

    fn fields(&self) -> [u64; 8] {
        [
            self.accepted,
            self.closed,
            self.bytes_in,
            self.bytes_out,
            self.lines,
            self.messages,
            self.cut,
            self.errors,
        ]
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "accepted={} closed={} bytes_in={} bytes_out={} lines={} messages={} cut_subscribers={} errors={}",
            self.accepted,
            self.closed,
            self.bytes_in,
            self.bytes_out,
            self.lines,
            self.messages,
            self.cut,
            self.errors
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip_through_bytes_and_add_up() {
        let c = Counters::default();
        Counters::add(&c.bytes_in, 7);
        Counters::add(&c.cut, 1);
        let s = c.snapshot();
        assert_eq!(Snapshot::from_bytes(&s.to_bytes()), s);
        c.absorb(&s);
        assert_eq!(c.snapshot().bytes_in, 14);
        assert!(c.snapshot().to_string().contains("bytes_in=14"));
    }
}
