//! A fiber's result slot: written at most once by the fiber ([`Sender`]), read by its joiner
//! ([`Receiver`]), in one allocation that the two halves share without a reference count:
//! the state word says which of them leaves last and frees it. A spawn and join costs three
//! atomic read-modify-writes here (the joiner's registration, the sender's publication, the
//! sender's release of the waiter cell); an `Arc` and its counts took six, at about 11 ns
//! each on this project's VM.
//!
//! ```text
//!  state   DONE     the sender published: the value is written (or was never sent: cancelled)
//!          WAITER   a waiter is in its cell and belongs to the sender, which wakes it
//!          TAKEN    the sender took the waiter out and touches the slot no more
//!          RX_GONE  the receiver is gone and left the slot to the sender to free
//!
//!  receiver: 0 --store waiter, CAS 0 -> WAITER---------------> WAITER
//!            WAITER --CAS WAITER -> 0 (to replace the waiter)-> 0
//!  sender:   any --write value, fetch_or DONE (takes the waiter if WAITER was set)--> DONE
//!            DONE|WAITER --fetch_or TAKEN--> DONE|WAITER|TAKEN
//!  receiver's drop: frees if the sender is finished, else fetch_or RX_GONE
//! ```
//!
//! A CAS of the receiver that fails found DONE: the value is there to take. The waiter cell is
//! the receiver's while WAITER is clear and the sender's from the `fetch_or` that found it set,
//! so the two never touch it at once. WAITER is frozen once DONE is set (the receiver clears
//! it only by a CAS from exactly WAITER), so the sender is finished with the slot exactly when
//! DONE is set and WAITER is clear or TAKEN set ([`sender_finished`]). Whichever half sees the
//! other one finished or gone in its own last step frees the slot: the receiver in its drop,
//! or the sender in the `fetch_or` that found RX_GONE.
//!
//! The loom models at the end check that a value sent is either seen by the poll or its
//! waiter is woken, exactly once (they fail if the sender's `fetch_or` loses its acquire or
//! the receiver's registering CAS its release), and that the slot is freed once, after both
//! halves are done with it, whatever the order of the drops.

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
use std::marker::PhantomData;
use std::ptr::NonNull;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

const DONE: u8 = 1;
const WAITER: u8 = 2;
const TAKEN: u8 = 4;
const RX_GONE: u8 = 8;

/// Whether a sender that left `state` behind touches the slot no more.
fn sender_finished(state: u8) -> bool {
    state & DONE != 0 && (state & WAITER == 0 || state & TAKEN != 0)
}

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
    /// receiver, after writing `waiter`, and cleared only by the receiver, before DONE.
    /// TAKEN is set only by the sender, after DONE found WAITER and it took the waiter;
    /// RX_GONE only by the receiver's drop, when the sender was not finished.
    state: AtomicU8,
    /// Written by the sender before DONE; read by the receiver after it saw DONE.
    value: UnsafeCell<Option<V>>,
    /// The receiver's while WAITER is clear; the sender's once its `fetch_or` found WAITER.
    waiter: UnsafeCell<Option<W>>,
    /// Loom reports the slot if it is never freed.
    #[cfg(loom)]
    _leak_check: loom::alloc::Track<()>,
}

/// One half's hold on the slot.
///
/// # Invariant
///
/// `shared` came from `blocks::new` in [`channel`] and is freed once, by [`free`], by the
/// half that sees the other one done with it (see the module's docs): until then both
/// halves may read it.
struct Slot<V, W> {
    shared: NonNull<Shared<V, W>>,
    /// The slot owns a `V` and a `W` (for drop check and auto traits).
    _owns: PhantomData<Box<Shared<V, W>>>,
}

// SAFETY: the cells are reached only by the side the state admits (see `Shared`'s
// invariant), so a half on another thread moves a `V` or a `W` from one thread to another at
// most, which `Send` allows; the slot is freed once, by whichever half the state picks.
unsafe impl<V: Send, W: Send> Send for Slot<V, W> {}
// SAFETY: a shared `&Slot` reaches only the atomic state (`is_done`); the cells need `&mut`.
unsafe impl<V: Send, W: Send> Sync for Slot<V, W> {}

impl<V, W> Slot<V, W> {
    fn shared(&self) -> &Shared<V, W> {
        // SAFETY: the slot is freed only by the last half to leave, in its drop, after its
        // last use of this reference (the invariant).
        unsafe { self.shared.as_ref() }
    }

    /// Frees the slot, dropping what is left in it.
    ///
    /// # Safety
    ///
    /// The caller is the half the state picked to free it: the other half is finished with
    /// it (its last step happened before, through the state's acquire), and the caller does
    /// not use it afterwards.
    unsafe fn free(&self) {
        // Through the cells, so that loom checks that every other access happened before.
        let shared = self.shared();
        shared.value.with_mut(|p| {
            // SAFETY: the other half is done with the slot (the caller's contract).
            drop(unsafe { (*p).take() })
        });
        shared.waiter.with_mut(|p| {
            // SAFETY: as above.
            drop(unsafe { (*p).take() })
        });
        // SAFETY: allocated by `blocks::new` in `channel`, freed once (the caller's contract).
        unsafe { super::blocks::free(self.shared) };
    }
}

/// The writing half: [`send`](Sender::send) a value, or drop it to close the slot empty.
pub(crate) struct Sender<V, W: Wake> {
    slot: Slot<V, W>,
}

/// The reading half.
pub(crate) struct Receiver<V, W> {
    slot: Slot<V, W>,
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

/// Whether a slot for a `V` takes a block of `blocks` (for tests).
#[cfg(test)]
pub(crate) const fn in_block<V, W>() -> bool {
    super::blocks::fits::<Shared<V, W>>()
}

/// A new empty slot: one allocation for both halves.
pub(crate) fn channel<V, W: Wake>() -> (Sender<V, W>, Receiver<V, W>) {
    let shared = super::blocks::new(Shared {
        state: AtomicU8::new(0),
        value: UnsafeCell::new(None),
        waiter: UnsafeCell::new(None),
        #[cfg(loom)]
        _leak_check: loom::alloc::Track::new(()),
    });
    let slot = || Slot {
        shared,
        _owns: PhantomData,
    };
    (Sender { slot: slot() }, Receiver { slot: slot() })
}

impl<V, W: Wake> Sender<V, W> {
    /// Stores `v` and wakes the waiter, if one is registered.
    pub(crate) fn send(self, v: V) {
        // SAFETY: only the sender writes `value`, and the receiver reads it only after DONE,
        // which this sender's drop (below) sets after this write.
        self.slot
            .shared()
            .value
            .with_mut(|p| unsafe { *p = Some(v) });
        // Dropping `self` publishes the value.
    }
}

impl<V, W: Wake> Drop for Sender<V, W> {
    fn drop(&mut self) {
        let shared = self.slot.shared();
        // Release: the value written before is visible to a receiver that sees DONE.
        // Acquire: so is the waiter a receiver wrote before it set WAITER, and whatever a
        // receiver that left did before RX_GONE.
        let prev = shared.state.fetch_or(DONE, Ordering::AcqRel);
        if prev & RX_GONE != 0 {
            // SAFETY: the receiver left it to this sender, which is done with it now.
            unsafe { self.slot.free() };
            return;
        }
        if prev & WAITER == 0 {
            // The receiver frees it once it sees DONE.
            return;
        }
        // SAFETY: WAITER was set when DONE went in, so the receiver's CAS that would clear
        // WAITER fails from now on: the cell is this sender's alone until TAKEN.
        let w = shared.waiter.with_mut(|p| unsafe { (*p).take() });
        // Release: the take above happens before the receiver's free. Acquire: as above.
        let prev = shared.state.fetch_or(TAKEN, Ordering::AcqRel);
        if prev & RX_GONE != 0 {
            // SAFETY: the receiver left between the two steps, leaving the slot to us.
            unsafe { self.slot.free() };
        }
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<V, W> Drop for Receiver<V, W> {
    fn drop(&mut self) {
        let state = &self.slot.shared().state;
        // Acquire: the sender's last access happened before this free.
        if sender_finished(state.load(Ordering::Acquire))
            || sender_finished(state.fetch_or(RX_GONE, Ordering::AcqRel))
        {
            // SAFETY: the sender is finished with the slot (see `sender_finished`) and saw
            // no RX_GONE in its last step, so it will not free it.
            unsafe { self.slot.free() };
        }
        // Otherwise the sender's last step finds RX_GONE and frees it.
    }
}

impl<V, W> Receiver<V, W> {
    /// Whether the sender is done (sent a value, or was dropped).
    pub(crate) fn is_done(&self) -> bool {
        self.slot.shared().state.load(Ordering::Acquire) & DONE != 0
    }

    /// The outcome if the sender is done (`Some(None)`: it was dropped without a value, or the
    /// value was taken before); otherwise registers the waiter `me()` (unless `same` says the
    /// one registered already is it) and returns `None`.
    pub(crate) fn poll(
        &mut self,
        me: impl FnOnce() -> W,
        same: impl FnOnce(&W, &W) -> bool,
    ) -> Option<Option<V>> {
        let shared = self.slot.shared();
        let state = &shared.state;
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
        shared.waiter.with_mut(|p| unsafe {
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
        self.slot
            .shared()
            .value
            .with_mut(|p| unsafe { (*p).take() })
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

    #[test]
    fn a_receiver_that_leaves_first_leaves_the_slot_and_its_waiter_to_the_sender() {
        let woken = std::sync::Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = channel::<Vec<u8>, Count>();
        let w = Count(std::sync::Arc::clone(&woken), 1);
        assert!(rx.poll(|| w, same).is_none());
        drop(rx);
        // The waiter is still in the slot, which the sender frees.
        assert_eq!(std::sync::Arc::strong_count(&woken), 2);
        tx.send(vec![1, 2, 3]);
        assert_eq!(woken.load(Ordering::SeqCst), 0, "nobody is left to wake");
        assert_eq!(
            std::sync::Arc::strong_count(&woken),
            1,
            "the waiter was dropped"
        );
    }

    #[test]
    fn a_value_never_taken_is_dropped_with_the_slot() {
        let value = std::sync::Arc::new(());
        let (tx, rx) = channel::<std::sync::Arc<()>, Count>();
        tx.send(std::sync::Arc::clone(&value));
        assert_eq!(std::sync::Arc::strong_count(&value), 2);
        drop(rx);
        assert_eq!(std::sync::Arc::strong_count(&value), 1);
    }
}

/// The slot under every interleaving loom can find.
///
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p fiber --lib loom_model --release`.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::sync::Arc;
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
                        if let Some(s) = sender.take() {
                            s.join().unwrap();
                        }
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

    /// The receiver polls once (registering a waiter if nothing is there) or not at all, and
    /// leaves; the sender sends, or leaves without sending, on another thread. The slot must be freed
    /// once (loom's leak check; a second free would be a double free) and after both halves'
    /// last access to it (loom's causality check on the cells the free empties), and a waiter
    /// left registered is woken at most once.
    #[test]
    fn the_slot_is_freed_once_after_both_halves_left() {
        for (send, poll) in [(true, true), (false, true), (true, false), (false, false)] {
            loom::model(move || {
                let woken = Arc::new(AtomicUsize::new(0));
                let (tx, mut rx) = channel::<u32, Count>();
                let sender = thread::spawn(move || {
                    if send {
                        tx.send(5);
                    } else {
                        drop(tx);
                    }
                });
                if poll {
                    let first = rx.poll(|| Count(Arc::clone(&woken), 1), |a, b| a.1 == b.1);
                    if let Some(v) = first {
                        assert_eq!(v, send.then_some(5));
                    }
                }
                drop(rx);
                sender.join().unwrap();
                assert!(woken.load(Ordering::SeqCst) <= 1, "a doubled wake-up");
            });
        }
    }
}
