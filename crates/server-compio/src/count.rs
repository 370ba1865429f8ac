//! Every count srv-compio keeps, in one place: what a connection adds to the server's
//! shared `service::counters::Counters` (one relaxed atomic add each), so that a change
//! in how the servers count is an edit of this file alone.

use launch::Counters;

/// A connection was accepted.
pub(crate) fn accepted(counters: &Counters) {
    Counters::add(&counters.accepted, 1);
}

/// A connection ended; `failed` if it ended with an I/O error.
pub(crate) fn closed(counters: &Counters, failed: bool) {
    if failed {
        Counters::add(&counters.errors, 1);
    }
    Counters::add(&counters.closed, 1);
}

/// `n` bytes were read from a client.
pub(crate) fn bytes_in(counters: &Counters, n: usize) {
    Counters::add(&counters.bytes_in, n as u64);
}

/// `n` bytes were written to a client.
pub(crate) fn bytes_out(counters: &Counters, n: usize) {
    Counters::add(&counters.bytes_out, n as u64);
}

/// A chat line was handled.
pub(crate) fn line(counters: &Counters) {
    Counters::add(&counters.lines, 1);
}

/// A chat connection was cut off as a slow subscriber.
pub(crate) fn cut(counters: &Counters) {
    Counters::add(&counters.cut, 1);
}
