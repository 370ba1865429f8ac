//! The accept loop both modes share: wait on the listener and the signalfd
//! together, so that a stop signal is noticed even when no client connects.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;

use anyhow::Context;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;

use launch::Shutdown;

/// What the loop does after a signal.
pub(crate) enum AfterSignal {
    Continue,
    Stop,
}

/// Accepts connections and hands each to `on_conn` (with TCP_NODELAY set)
/// until `on_signal` says stop.
pub(crate) fn accept_until_stop(
    listener: &TcpListener,
    shutdown: &Shutdown,
    mut on_conn: impl FnMut(TcpStream),
    mut on_signal: impl FnMut(Signal) -> AfterSignal,
) -> anyhow::Result<()> {
    listener
        .set_nonblocking(true)
        .context("making the listener non-blocking")?;
    loop {
        while let Some(sig) = shutdown.take() {
            if let AfterSignal::Stop = on_signal(sig) {
                return Ok(());
            }
        }
        match listener.accept() {
            Ok((stream, _)) => {
                // The accepted socket inherits nothing from the listener on
                // Linux, but say so explicitly: connections block.
                if stream.set_nonblocking(false).is_ok() {
                    let _ = stream.set_nodelay(true);
                    on_conn(stream);
                }
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => {
                if let Some(pause) = launch::accept_failed("srv-threads", &e) {
                    // Wait out the pause, unless a stop comes first.
                    let ms = u16::try_from(pause.as_millis()).unwrap_or(u16::MAX);
                    let mut fds = [PollFd::new(shutdown.as_fd(), PollFlags::POLLIN)];
                    let _ = poll(&mut fds, PollTimeout::from(ms));
                }
                continue;
            }
        }
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(shutdown.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::from(1000u16)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e).context("waiting for connections"),
        }
    }
}
