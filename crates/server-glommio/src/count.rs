//! Every count srv-glommio makes, in one place: what the stop line reports (connections,
//! bytes, chat lines, cut subscribers, errors). Each worker thread counts into a block
//! of its own (`service::counters::Counters::add_here`): no lock and no shared cache
//! line per message, as in every server.

use launch::Counters;
use service::counters::Count as What;

/// A handle on the server's counters; clones share them.
#[derive(Debug, Clone)]
pub(crate) struct Count(Counters);

impl Count {
    pub(crate) fn new(counters: &Counters) -> Self {
        Count(counters.clone())
    }

    /// A connection was accepted.
    pub(crate) fn accepted(&self) {
        self.0.add_here(What::Accepted, 1);
    }

    /// A connection ended, with an I/O error if `failed`.
    pub(crate) fn closed(&self, failed: bool) {
        if failed {
            self.0.add_here(What::Errors, 1);
        }
        self.0.add_here(What::Closed, 1);
    }

    /// `n` bytes were read from a client.
    pub(crate) fn bytes_in(&self, n: usize) {
        self.0.add_here(What::BytesIn, n as u64);
    }

    /// `n` bytes were written to a client.
    pub(crate) fn bytes_out(&self, n: usize) {
        self.0.add_here(What::BytesOut, n as u64);
    }

    /// A chat line was handled.
    pub(crate) fn line(&self) {
        self.0.add_here(What::Lines, 1);
    }

    /// A chat connection was cut off as a slow subscriber.
    pub(crate) fn cut(&self) {
        self.0.add_here(What::Cut, 1);
    }
}
