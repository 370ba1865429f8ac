//! [`Remote`]: the only way into a reactor from another thread. Other threads
//! never touch a reactor's connections; they leave work in its inbox (a new
//! socket from the acceptor, "this connection's mailbox has lines" from a
//! chat sender on another reactor, "stop" from the main thread) and nudge its
//! `mio::Waker`, which makes the reactor's `epoll_wait` return.
//!
//! Nudges are coalesced: between two visits of the reactor to its inbox, only
//! the first item put there writes the eventfd, so a burst of chat fan-out to
//! one reactor costs one wake-up, not one per line. An item put there by the
//! reactor's own thread (a sender and a subscriber on the same reactor) never
//! writes the eventfd at all: the reactor looks at its inbox before it sleeps.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mio::net::TcpStream;
use mio::{Registry, Token, Waker};
use service::hub::ConnId;

thread_local! {
    /// The address of the [`Remote`] of the reactor that runs on this thread,
    /// 0 on every other thread. An address, not an index, so that several
    /// servers in one process (the tests) cannot mistake each other's reactors.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// What other threads left for a reactor. The reactor swaps both vectors with
/// empty ones it keeps, so that steady state allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Sockets handed over by the acceptor, to register and serve.
    pub(crate) conns: Vec<TcpStream>,
    /// Chat connections whose mailbox has something for them: slab key and
    /// connection id (a key may have been reused by the time it is read; the
    /// id tells).
    pub(crate) mail: Vec<(usize, ConnId)>,
}

impl Inbox {
    pub(crate) fn is_empty(&self) -> bool {
        self.conns.is_empty() && self.mail.is_empty()
    }
}

/// A reactor's door, shared with every thread that may hand it work.
#[derive(Debug)]
pub(crate) struct Remote {
    waker: Waker,
    /// # Invariant
    /// Set from the moment an item is put in `inbox` (or a stop is requested)
    /// until the reactor takes the inbox: while it is set, the reactor will
    /// look at its inbox before it next sleeps, so no one else needs to wake it.
    nudged: AtomicBool,
    stop: AtomicBool,
    inbox: Mutex<Inbox>,
}

impl Remote {
    /// A remote whose waker is registered in `registry` under `token`.
    pub(crate) fn new(registry: &Registry, token: Token) -> io::Result<Arc<Self>> {
        Ok(Arc::new(Remote {
            waker: Waker::new(registry, token)?,
            nudged: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            inbox: Mutex::new(Inbox::default()),
        }))
    }

    /// Marks the calling thread as the one that runs this remote's reactor.
    pub(crate) fn enter(self: &Arc<Self>) {
        CURRENT.with(|c| c.set(Arc::as_ptr(self) as usize));
    }

    /// Hands a freshly accepted socket to the reactor.
    pub(crate) fn hand_over(&self, stream: TcpStream) {
        self.inbox().conns.push(stream);
        self.nudge();
    }

    /// Tells the reactor that connection `conn` at slab `key` has mail.
    pub(crate) fn mail(&self, key: usize, conn: ConnId) {
        self.inbox().mail.push((key, conn));
        self.nudge();
    }

    /// Asks the reactor to stop; it returns from its loop at its next wake-up.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.nudged.store(true, Ordering::Release);
        // Always wake: the reactor may be asleep with `nudged` already set by
        // an item it is about to take.
        if let Err(e) = self.waker.wake() {
            eprintln!("srv-reactor: cannot wake a reactor to stop it: {e}");
        }
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Whether the inbox may hold something: the reactor must not sleep.
    pub(crate) fn is_nudged(&self) -> bool {
        self.nudged.load(Ordering::Acquire)
    }

    /// Moves what the inbox holds into `into`, which must be empty, leaving
    /// `into`'s spare vectors in the inbox.
    pub(crate) fn take(&self, into: &mut Inbox) {
        debug_assert!(into.is_empty(), "the previous inbox was not handled");
        // Clear first, then take: an item put in after the swap below finds
        // the flag clear and wakes the reactor (at worst once too often).
        if self.nudged.swap(false, Ordering::AcqRel) {
            std::mem::swap(into, &mut *self.inbox());
        }
    }

    fn nudge(&self) {
        if !self.nudged.swap(true, Ordering::AcqRel) && !self.is_current_thread() {
            // An eventfd write fails only if the counter is about to overflow,
            // which mio handles inside `wake`; anything else is a bug worth a
            // line, not a reason to drop the work.
            if let Err(e) = self.waker.wake() {
                eprintln!("srv-reactor: cannot wake a reactor: {e}");
            }
        }
    }

    fn is_current_thread(&self) -> bool {
        CURRENT.with(|c| c.get() == self as *const Self as usize)
    }

    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        // The critical sections only push and swap vectors: a panic cannot
        // leave the inbox inconsistent.
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::time::Duration;

    #[test]
    fn items_from_other_threads_wake_the_poll_once_per_take() {
        let mut poll = Poll::new().unwrap();
        let remote = Remote::new(poll.registry(), Token(7)).unwrap();
        let mut events = Events::with_capacity(8);
        let other = Arc::clone(&remote);
        std::thread::spawn(move || {
            other.mail(1, 10);
            other.mail(2, 20);
        })
        .join()
        .unwrap();
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(
            events.iter().map(|e| e.token()).collect::<Vec<_>>(),
            [Token(7)]
        );
        assert!(remote.is_nudged());
        let mut inbox = Inbox::default();
        remote.take(&mut inbox);
        assert_eq!(inbox.mail, [(1, 10), (2, 20)]);
        assert!(!remote.is_nudged());
        // Nothing more was left: a second take finds nothing.
        let mut again = Inbox::default();
        remote.take(&mut again);
        assert!(again.is_empty());
    }

    #[test]
    fn items_from_the_reactor_thread_set_the_flag_without_waking() {
        let mut poll = Poll::new().unwrap();
        let remote = Remote::new(poll.registry(), Token(7)).unwrap();
        let mut events = Events::with_capacity(8);
        std::thread::scope(|s| {
            s.spawn(|| {
                remote.enter();
                remote.mail(3, 30);
                assert!(remote.is_nudged());
                poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
                assert!(
                    events.is_empty(),
                    "the reactor's own thread must not wake itself"
                );
            });
        });
        remote.stop();
        assert!(remote.stopping());
    }
}
