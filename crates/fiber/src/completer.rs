//! The Completer thread of the paper's Figure 4, as an option.
//!
//! Every worker ring has an eventfd registered (`IORING_REGISTER_EVENTFD`), which the kernel
//! signals whenever it posts a CQE there. The Completer keeps a read of each of those
//! eventfds in flight on its own ring and sleeps on it. When one fires it takes that worker's
//! CQ lock (if the worker is not reaping right then) and reaps; the fibers it completes go to
//! the injector, and an idle worker is woken for them.
//!
//! The eventfd is what works for every ring setup: polling a ring's fd from another ring
//! does not fire for a `DEFER_TASKRUN` ring. With `DEFER_TASKRUN` the kernel posts CQEs
//! only when the owner enters the kernel, so the Completer finds nothing to reap there.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::thread;

use crate::park::Waker;
use crate::runtime::{self, STOPPED};
use crate::stats::Counter;
use crate::sys::fd::{eventfd, eventfd_signal};
use crate::sys::op::{OpRef, Sqe};
use crate::sys::ring::{RingOwner, RingSetup};

/// What the runtime shares with its Completer.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Written to make the Completer look at the runtime's state.
    stop: OwnedFd,
    completions: Counter,
    wakeups: Counter,
}

impl Shared {
    pub(crate) fn new() -> io::Result<Shared> {
        Ok(Shared {
            stop: eventfd()?,
            completions: Counter::default(),
            wakeups: Counter::default(),
        })
    }

    pub(crate) fn wake(&self) {
        let _ = eventfd_signal(self.stop.as_fd());
    }

    pub(crate) fn completions(&self) -> u64 {
        self.completions.get()
    }

    pub(crate) fn wakeups(&self) -> u64 {
        self.wakeups.get()
    }
}

/// Starts the Completer thread; returns once its ring exists.
pub(crate) fn spawn(rt: Arc<runtime::Shared>) -> io::Result<thread::JoinHandle<()>> {
    let (tx, rx) = mpsc::channel();
    let name = format!("{}-completer", rt.config.name);
    let t = thread::Builder::new().name(name).spawn(move || {
        let ring = match RingOwner::new(RingSetup {
            entries: 64,
            ..RingSetup::default()
        }) {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let _ = tx.send(Ok(()));
        run(&rt, &ring);
    })?;
    match rx.recv() {
        Ok(Ok(())) => Ok(t),
        Ok(Err(e)) => {
            let _ = t.join();
            Err(e)
        }
        Err(_) => Err(io::Error::other("the completer thread died while starting")),
    }
}

fn arm(ring: &RingOwner, fd: &OwnedFd) -> Option<OpRef> {
    let (sqe, op) = Sqe::eventfd_read(fd.as_raw_fd());
    ring.push(sqe).ok().map(|()| op)
}

fn run(rt: &runtime::Shared, ring: &RingOwner) {
    let Some(me) = rt.completer.as_ref() else {
        return;
    };
    let mut watches: Vec<Option<OpRef>> = rt
        .workers
        .iter()
        .map(|w| w.cq_eventfd.as_ref().and_then(|fd| arm(ring, fd)))
        .collect();
    let mut stop = arm(ring, &me.stop);
    while rt.state() != STOPPED {
        let _ = ring.wait();
        ring.try_reap(usize::MAX, drop);
        me.wakeups.inc();
        for (j, watch) in watches.iter_mut().enumerate() {
            if !watch.as_ref().is_some_and(|op| op.is_done()) {
                continue;
            }
            // A sleeping worker is woken by its own CQEs and reaps them itself; the
            // Completer is for busy ones. (Were it to reap a sleeper's wake-up it would have
            // to re-deliver it, which would fire this eventfd again.)
            let busy = !rt.workers[j].sleeping.load(Ordering::SeqCst);
            if let Some(wring) = rt.workers[j].ring.get().filter(|_| busy)
                && let Some(c) = wring.try_reap_foreign(usize::MAX, Waker::wake)
            {
                me.completions.add(c.ops as u64);
                if c.wakeups > 0 {
                    // We took the worker's wake-up: hand it a new one.
                    let _ = ring.push(Sqe::msg_ring(wring.fd()));
                    let _ = ring.flush();
                }
            }
            *watch = rt.workers[j]
                .cq_eventfd
                .as_ref()
                .and_then(|fd| arm(ring, fd));
        }
        if stop.as_ref().is_none_or(|op| op.is_done()) {
            stop = arm(ring, &me.stop);
        }
    }
    // Release the reads in flight before the ring goes, waiting boundedly.
    let _ = ring.push(Sqe::cancel_all());
    for _ in 0..1000 {
        let _ = ring.flush();
        ring.try_reap(usize::MAX, drop);
        let all_done = watches
            .iter()
            .chain(std::iter::once(&stop))
            .all(|w| w.as_ref().is_none_or(|op| op.is_done()));
        if all_done {
            break;
        }
        let _ = ring.wait();
    }
}
