//! The errors `run` can end with, and the kinds of faults it counts instead of failing.
//!
//! A run fails (an [`Error`]) only when it cannot measure anything: a bad configuration, an
//! address that does not resolve, a server that accepts no connection at all, or a failure of
//! the machinery itself. Everything a server does wrong while the run goes on (refusing some
//! connections, resetting them, corrupting a reply, stalling) is a [`Fault`]: counted by kind,
//! reported in the summary, and never allowed to hang the run.

use std::io;

/// Why a run could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is inconsistent; the message names the option.
    #[error("{0}")]
    Config(String),
    /// `--addr` does not name a socket address.
    #[error("cannot resolve --addr {addr}: {source}")]
    Resolve {
        /// The address as given.
        addr: String,
        /// What the resolver said.
        source: io::Error,
    },
    /// Not one connection could be established: there is no server at the address.
    #[error("no server at {addr}: {source}")]
    Unreachable {
        /// The resolved address.
        addr: String,
        /// The error of the first failed connection.
        source: io::Error,
    },
    /// A chat connection could not complete its `NICK`/`JOIN` handshake.
    #[error("chat handshake with {addr} failed: {reason}")]
    Handshake {
        /// The resolved address.
        addr: String,
        /// What went wrong, for the first connection that failed.
        reason: String,
    },
    /// The kv workload could not store its key space before the clock started: the server
    /// refused `SET` or does not speak RESP.
    #[error("preloading the keys at {addr} failed: {reason}")]
    Preload {
        /// The resolved address.
        addr: String,
        /// What went wrong.
        reason: String,
    },
    /// The load generator's own machinery failed (poll, timer, thread, affinity).
    #[error("{what}: {source}")]
    Io {
        /// What loadgen was doing.
        what: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// A worker thread died; this is a bug in loadgen.
    #[error("a loadgen worker thread panicked")]
    WorkerPanicked,
    /// An agent's controller called the run off, or went away, before its go.
    #[error("{0}")]
    CalledOff(String),
}

impl Error {
    pub(crate) fn io(what: &'static str, source: impl Into<io::Error>) -> Self {
        Error::Io {
            what,
            source: source.into(),
        }
    }

    /// Whether the error is the user's to fix (a bad option, nothing listening at the address),
    /// as opposed to a failure while measuring. The binary exits 2 for these.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::Config(_)
                | Error::Resolve { .. }
                | Error::Unreachable { .. }
                | Error::Handshake { .. }
                | Error::Preload { .. }
        )
    }
}

/// What can go wrong with one connection while the run goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The server refused the connection (`ECONNREFUSED`).
    ConnectRefused,
    /// Connecting failed some other way (no route, out of file descriptors, ...).
    ConnectFailed,
    /// Connecting did not finish within the connect timeout.
    ConnectTimeout,
    /// The server reset the connection (`ECONNRESET`, `EPIPE`).
    Reset,
    /// The server closed the connection while replies were still owed.
    Closed,
    /// A reply differed from what was sent (echo), could not be parsed (chat), or was not
    /// what the store must hold (kv).
    Corrupt,
    /// The server answered a chat command with `ERR`, or a kv request with a RESP error.
    ServerError,
    /// A chat subscriber saw a gap, a repeat or a reordering in a room's seq.
    Delivery,
    /// No byte arrived for longer than the stall threshold while replies were owed; counted
    /// once per episode, and the connection goes on.
    Stalled,
    /// No byte arrived for longer than the reply timeout; the connection was given up.
    TimedOut,
    /// Replies still owed when the grace period after the window ran out.
    Unanswered,
    /// Any other I/O error on an established connection.
    Io,
}

impl Fault {
    pub(crate) const COUNT: usize = 12;
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn of_connect_error(err: &io::Error) -> Fault {
        match err.kind() {
            io::ErrorKind::ConnectionRefused => Fault::ConnectRefused,
            io::ErrorKind::TimedOut => Fault::ConnectTimeout,
            _ => Fault::ConnectFailed,
        }
    }

    pub(crate) fn of_io_error(err: &io::Error) -> Fault {
        match err.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted => Fault::Reset,
            _ => Fault::Io,
        }
    }
}

/// Fault counters of one worker, indexed by [`Fault::index`].
pub(crate) type FaultCounts = [u64; Fault::COUNT];
