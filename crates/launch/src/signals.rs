//! Clean stop on SIGINT and SIGTERM through a `signalfd`, so that every kind of
//! runtime can wait for a stop the way it waits for anything else: `poll` in a
//! thread-per-connection server, a mio registration in a reactor, an
//! `AsyncFd` in Tokio, a read on the ring in the fiber runtime.
//!
//! The signals are blocked in the thread that installs the [`Shutdown`] and so
//! in every thread it spawns afterwards: install it first in `main`.

use std::os::fd::{AsFd, BorrowedFd};

use anyhow::Context;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// A pending stop request: readable once SIGINT or SIGTERM arrived.
#[derive(Debug)]
pub struct Shutdown {
    fd: SignalFd,
}

impl Shutdown {
    /// Blocks SIGINT and SIGTERM in the calling thread (and the threads it will
    /// spawn) and opens a non-blocking signalfd that receives them.
    pub fn install() -> anyhow::Result<Self> {
        Self::for_signals(&[Signal::SIGINT, Signal::SIGTERM])
    }

    /// Like [`Shutdown::install`], for an explicit set of signals (the process
    /// mode of srv-threads adds SIGCHLD to reap its children).
    pub fn for_signals(signals: &[Signal]) -> anyhow::Result<Self> {
        let mask = Self::mask(signals);
        mask.thread_block().context("blocking the stop signals")?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .context("creating a signalfd for the stop signals")?;
        Ok(Shutdown { fd })
    }

    fn mask(signals: &[Signal]) -> SigSet {
        let mut mask = SigSet::empty();
        for &s in signals {
            mask.add(s);
        }
        mask
    }

    /// Unblocks the signals again in the calling thread: for a forked child that
    /// should die of SIGTERM the default way.
    pub fn unblock_in_child(signals: &[Signal]) -> anyhow::Result<()> {
        Self::mask(signals)
            .thread_unblock()
            .context("unblocking signals in a child")
    }

    /// Takes one pending signal without waiting, if there is one.
    pub fn take(&self) -> Option<Signal> {
        match self.fd.read_signal() {
            Ok(Some(info)) => Signal::try_from(info.ssi_signo as i32).ok(),
            _ => None,
        }
    }

    /// Waits until a stop signal arrives.
    pub fn wait(&self) -> Signal {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        loop {
            if let Some(sig) = self.take() {
                return sig;
            }
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            // EINTR just goes round again.
            let _ = poll(&mut fds, PollTimeout::NONE);
        }
    }
}

impl AsFd for Shutdown {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
