//! Every count srv-smol makes, in one place: what the stop line reports
//! (connections, bytes, chat lines, cut subscribers, errors). The connection code
//! calls these and nothing else of the counters, so how they are kept (today the
//! shared `service::counters::Counters`) is one file's business.

use std::sync::Arc;

use launch::Counters;

/// A handle on the server's counters; clones share them.
#[derive(Debug, Clone)]
pub(crate) struct Count(Arc<Counters>);

impl Count {
    pub(crate) fn new(counters: &Arc<Counters>) -> Self {
        Count(Arc::clone(counters))
    }

    /// A connection was accepted.
    pub(crate) fn accepted(&self) {
        Counters::add(&self.0.accepted, 1);
    }

    /// A connection ended, with an I/O error if `failed`.
    pub(crate) fn closed(&self, failed: bool) {
        if failed {
            Counters::add(&self.0.errors, 1);
        }
        Counters::add(&self.0.closed, 1);
    }

    /// `n` bytes were read from a client.
    pub(crate) fn bytes_in(&self, n: usize) {
        Counters::add(&self.0.bytes_in, n as u64);
    }

    /// `n` bytes were written to a client.
    pub(crate) fn bytes_out(&self, n: usize) {
        Counters::add(&self.0.bytes_out, n as u64);
    }

    /// A chat line was handled.
    pub(crate) fn line(&self) {
        Counters::add(&self.0.lines, 1);
    }

    /// A chat connection was cut off as a slow subscriber.
    pub(crate) fn cut(&self) {
        Counters::add(&self.0.cut, 1);
    }
}
