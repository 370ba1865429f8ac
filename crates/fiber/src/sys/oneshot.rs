//! A fiber's result slot: written at most once by the fiber ([`Sender`]), read by its joiner
//! ([`Receiver`]), with one atomic read-modify-write on each side on the common path (a
//! `Mutex` around the slot took two per lock, four to eight per spawn and join).
//!
//! ```text
//!  state   DONE    the sender is gone: the value is written (or was never sent: cancelled)
//!          WAITER  a waiter is in its cell and belongs to the sender, which wakes it
//!
//!  receiver: 0 --store waiter, CAS 0 -> WAITER---------------> WAITER
//!            WAITER --CAS WAITER -> 0 (to replace the waiter)-> 0
//!  sender:   any --write value, fetch_or DONE (takes the waiter if WAITER was set)--> DONE
//! ```
//!
//! A CAS of the receiver that fails found DONE: the value is there to take. The waiter cell is
//! the receiver's while WAITER is clear and the sender's from the `fetch_or` that found it set,
//! so the two never touch it at once. The loom model at the end checks that a value sent is
//! either seen by the poll or its waiter is woken, exactly once; it fails if the sender's
//! `fetch_or` loses its acquire or the receiver's registering CAS its release.

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(loom)]
use loom::sync::Arc;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(loom))]
use std::sync::Arc;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

const DONE: u8 = 1;
const WAITER: u8 = 2;

/// What the sender does with the waiter it finds.
pub(crate) trait Wake {
    fn wake(self);
}

/// `std`'s `UnsafeCell` with loom's interface, so that loom checks every access.
#[cfg(not(loom))]
struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }

    fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

struct Shared<V, W> {
    /// # Invariant
    ///
    /// Only the sender sets DONE, once, after writing `value`; WAITER is set only by the
    /// receiver, after writing `waiter`, and cleared only by the receiver.
    state: AtomicU8,
    /// Written by the sender before DONE; read by the receiver after it saw DONE.
    value: UnsafeCell<Option<V>>,
    /// The receiver's while WAITER is clear; the sender's once its `fetch_or` found WAITER.
    waiter: UnsafeCell<Option<W>>,
}

// SAFETY: the cells are reached only by the side the state admits (see `Shared`'s
// invariant), so sharing moves a `V` or a `W` from one thread to another at most, which
// `Send` allows.
unsafe impl<V: Send, W: Send> Sync for Shared<V, W> {}
// SAFETY: as above: the slot owns a `V` and a `W`, both `Send`.
unsafe impl<V: Send, W: Send> Send for Shared<V, W> {}

/// The writing half: [`send`](Sender::send) a value, or drop it to close the slot empty.
pub(crate) struct Sender<V, W: Wake> {
    shared: Arc<Shared<V, W>>,
}

/// The reading half.
pub(crate) struct Receiver<V, W> {
    shared: Arc<Shared<V, W>>,
}

impl<V, W: Wake> std::fmt::Debug for Sender<V, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<V, W> std::fmt::Debug for Receiver<V, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("done", &self.is_done())
            .finish()
    }
}

/// A new empty slot: one allocation for both halves.
pub(crate) fn channel<V, W: Wake>() -> (Sender<V, W>, Receiver<V, W>) {
    let shared = Arc::new(Shared {
        state: AtomicU8::new(0),
        value: UnsafeCell::new(None),
        waiter: UnsafeCell::new(None),
    });
    (
        Sender {
            shared: Arc::clone(&shared),
        },
        Receiver { shared },
    )
}

impl<V, W: Wake> Sender<V, W> {
    /// Stores `v` and wakes the waiter, if one is registered.
    pub(crate) fn send(self, v: V) {
        // SAFETY: only the sender writes `value`, and the receiver reads it only after DONE,
        // which this sender's drop (below) sets after this write.
        self.shared.value.with_mut(|p| unsafe { *p = Some(v) });
        // Dropping `self` publishes the value.
    }
}

impl<V, W: Wake> Drop for Sender<V, W> {
    fn drop(&mut self) {
        // Release: the value written before is visible to a receiver that sees DONE.
        // Acquire: so is the waiter a receiver wrote before it set WAITER.
        let prev = self.shared.state.fetch_or(DONE, Ordering::AcqRel);
        if prev & WAITER != 0 {
            // SAFETY: WAITER was set when DONE went in, so the receiver's CAS that would clear
            // WAITER fails from now on: the cell is this sender's alone.
            let w = self.shared.waiter.with_mut(|p| unsafe { (*p).take() });
            if let Some(w) = w {
                w.wake();
            }
        }
    }
}

impl<V, W> Receiver<V, W> {
    /// Whether the sender is done (sent a value, or was dropped).
    pub(crate) fn is_done(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) & DONE != 0
    }

    /// The outcome if the sender is done (`Some(None)`: it was dropped without a value, or the
    /// value was taken before); otherwise registers the waiter `me()` (unless `same` says the
    /// one registered already is it) and returns `None`.
    pub(crate) fn poll(
        &mut self,
        me: impl FnOnce() -> W,
        same: impl FnOnce(&W, &W) -> bool,
    ) -> Option<Option<V>> {
        let state = &self.shared.state;
        let s = state.load(Ordering::Acquire);
        if s & DONE != 0 {
            return Some(self.take_value());
        }
        if s & WAITER != 0
            && state
                .compare_exchange(WAITER, 0, Ordering::Acquire, Ordering::Acquire)
                .is_err()
        {
            // DONE arrived.
            return Some(self.take_value());
        }
        // WAITER is clear and only this receiver sets it: the cell is ours.
        let me = me();
        // SAFETY: as just said; `&mut self` excludes another poll on this receiver.
        self.shared.waiter.with_mut(|p| unsafe {
            if !(*p).as_ref().is_some_and(|w| same(w, &me)) {
                *p = Some(me);
            }
        });
        // Release: the sender that finds WAITER sees the waiter written above.
        match state.compare_exchange(0, WAITER, Ordering::Release, Ordering::Acquire) {
            Ok(_) => None,
            // DONE arrived; the sender did not see WAITER and leaves the cell alone.
            Err(_) => Some(self.take_value()),
        }
    }

    fn take_value(&mut self) -> Option<V> {
        // SAFETY: the caller saw DONE with acquire ordering: the sender's write of `value`
        // happened before and it writes no more; `&mut self` excludes another reader.
        self.shared.value.with_mut(|p| unsafe { (*p).take() })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[derive(Clone)]
    struct Count(std::sync::Arc<AtomicUsize>, u32);

    impl Wake for Count {
        fn wake(self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn same(a: &Count, b: &Count) -> bool {
        a.1 == b.1
    }

    #[test]
    fn a_registered_waiter_is_woken_once_and_the_value_read() {
        let woken = std::sync::Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = channel::<u32, Count>();
        let w = Count(std::sync::Arc::clone(&woken), 1);
        assert!(rx.poll(|| w.clone(), same).is_none());
        // Polled again by the same waiter, and then by another one.
        assert!(rx.poll(|| w.clone(), same).is_none());
        let w2 = Count(std::sync::Arc::clone(&woken), 2);
        assert!(rx.poll(|| w2, same).is_none());
        assert!(!rx.is_done());
        tx.send(7);
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert!(rx.is_done());
        assert_eq!(rx.poll(|| unreachable!(), same), Some(Some(7)));
        assert_eq!(rx.poll(|| unreachable!(), same), Some(None));
    }

    #[test]
    fn a_dropped_sender_closes_the_slot_empty() {
        let woken = std::sync::Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = channel::<u32, Count>();
        drop(tx);
        let w = Count(std::sync::Arc::clone(&woken), 1);
        assert_eq!(rx.poll(|| w, same), Some(None));
        assert_eq!(woken.load(Ordering::SeqCst), 0);
    }
}

/// The slot under every interleaving loom can find.
///
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p fiber --lib loom_model --release`.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::thread;

    struct Count(Arc<AtomicUsize>, u32);

    impl Wake for Count {
        fn wake(self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The joiner polls (registering a waiter) and, if not done, polls again as a woken or
    /// spuriously returning joiner does, with a different waiter; the sender sends once. The
    /// value must be seen, and a registered waiter woken at most once; if the first poll
    /// registered and found nothing, the value arrives through exactly one wake-up unless the
    /// second poll saw it first.
    #[test]
    fn a_value_is_seen_or_its_waiter_woken() {
        loom::model(|| {
            let woken = Arc::new(AtomicUsize::new(0));
            let (tx, mut rx) = channel::<u32, Count>();
            let mut sender = Some(thread::spawn(move || tx.send(5)));
            let first = rx.poll(|| Count(Arc::clone(&woken), 1), |a, b| a.1 == b.1);
            let got = match first {
                Some(v) => v,
                None => match rx.poll(|| Count(Arc::clone(&woken), 2), |a, b| a.1 == b.1) {
                    Some(v) => v,
                    None => {
                        sender.take().map(|s| s.join().unwrap());
                        // Both polls found nothing: the sender must have woken the waiter.
                        assert_eq!(woken.load(Ordering::SeqCst), 1, "a lost wake-up");
                        assert!(rx.is_done());
                        rx.poll(|| unreachable!(), |_, _| false)
                            .expect("done after the wake-up")
                    }
                },
            };
            if let Some(s) = sender {
                s.join().unwrap();
            }
            assert_eq!(got, Some(5));
            assert!(woken.load(Ordering::SeqCst) <= 1, "a doubled wake-up");
        });
    }
}
