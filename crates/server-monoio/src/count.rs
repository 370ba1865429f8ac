//! Every count srv-monoio keeps, in one place: what a connection adds to the stop line's
//! counters. Each worker thread counts into a block of its own
//! (`service::counters::Counters::add_here`): no lock and no shared cache line per
//! message, as in every server.

use launch::{Count, Counters};

/// A connection was accepted.
pub(crate) fn accepted(counters: &Counters) {
    counters.add_here(Count::Accepted, 1);
}

/// A connection ended; `failed` if it ended with an I/O error.
pub(crate) fn closed(counters: &Counters, failed: bool) {
    if failed {
        counters.add_here(Count::Errors, 1);
    }
    counters.add_here(Count::Closed, 1);
}

/// `n` bytes were read from a client.
pub(crate) fn bytes_in(counters: &Counters, n: usize) {
    counters.add_here(Count::BytesIn, n as u64);
}

/// `n` bytes were written to a client.
pub(crate) fn bytes_out(counters: &Counters, n: usize) {
    counters.add_here(Count::BytesOut, n as u64);
}

/// A chat line was handled.
pub(crate) fn line(counters: &Counters) {
    counters.add_here(Count::Lines, 1);
}

/// A chat connection was cut off as a slow subscriber.
pub(crate) fn cut(counters: &Counters) {
    counters.add_here(Count::Cut, 1);
}
