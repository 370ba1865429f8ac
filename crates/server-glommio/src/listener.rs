//! The one module of srv-glommio allowed `unsafe`: a listener bound by `launch::bind_group`
//! handed to glommio through `FromRawFd`, glommio's only way to take a socket bound
//! elsewhere. glommio's own `TcpListener::bind` listens with a backlog of 1024, which it
//! gives no way to change, where every other server here listens with 4096
//! (`launch::BACKLOG`); with 10,000 connections opened at once the shorter queue leaves
//! some waiting in SYN retransmission for a second.
#![allow(unsafe_code)] // glommio's `from_raw_fd` is an unsafe fn; see `take`.

use std::os::fd::{FromRawFd, IntoRawFd};

use glommio::net::TcpListener;

/// Hands `std`, a listening socket of `launch::bind_group` (its backlog, `SO_REUSEADDR` and
/// `SO_REUSEPORT`), to the executor running on the calling thread.
///
/// # Panics
/// Outside a glommio executor (glommio's `from_raw_fd` takes the current executor's
/// reactor).
pub(crate) fn take(std: std::net::TcpListener) -> TcpListener {
    let fd = std.into_raw_fd();
    // SAFETY: `fd` is an open, bound and listening TCP socket that `into_raw_fd` has just
    // released, so the glommio listener becomes its one owner and closes it once.
    unsafe { TcpListener::from_raw_fd(fd) }
}
