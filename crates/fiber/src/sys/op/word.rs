//! The lock of an operation's state and the count of its references, side by side in the
//! op's first cache line.
//!
//! An op is shared by at most a handful of owners (the fiber that waits for it, the ring while
//! it is in flight, a pending cancel, a ring's list of ops to cancel), and its state is locked
//! only for a few loads and stores, never across a park. Reference counting follows `Arc`
//! (increments relaxed, decrements release, an acquire fence before the free); the lock is a
//! spin lock that yields the thread after a short spin, because the holder never blocks but
//! may be preempted. The two are separate atomics so that an unlock is a plain release store:
//! in one word (as they were) the unlock had to be a locked `fetch_and`, so as not to lose a
//! reference counted meanwhile, and an op is locked three or four times per operation. The
//! loom model at the end of this file checks both under every interleaving.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU32, Ordering, fence};

const FREE: u32 = 0;
const LOCKED: u32 = 1;
const ONE_REF: u32 = 1;
/// Spins before a waiting locker yields its thread.
const SPINS: u32 = 64;

/// An op's lock and reference count.
#[derive(Debug)]
pub(crate) struct OpWord {
    lock: AtomicU32,
    refs: AtomicU32,
}

impl OpWord {
    /// Unlocked, with one reference (the creator's).
    pub(crate) fn new() -> OpWord {
        OpWord {
            lock: AtomicU32::new(FREE),
            refs: AtomicU32::new(ONE_REF),
        }
    }

    /// Takes the lock, spinning (then yielding the thread) while another holder has it.
    pub(crate) fn lock(&self) {
        let mut spins = 0;
        loop {
            if self
                .lock
                .compare_exchange_weak(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            // Wait with plain loads until it looks free, without taking the line each time.
            while self.lock.load(Ordering::Relaxed) != FREE {
                spins += 1;
                pause(spins);
            }
        }
    }

    /// Releases the lock this caller holds.
    pub(crate) fn unlock(&self) {
        self.lock.store(FREE, Ordering::Release);
    }

    /// Adds a reference; the caller holds one already.
    pub(crate) fn add_ref(&self) {
        let old = self.refs.fetch_add(ONE_REF, Ordering::Relaxed);
        // A handful of owners at most: reaching half the range is a leak of references.
        if old >= u32::MAX / 2 {
            std::process::abort();
        }
    }

    /// Whether the caller's reference is the only one. Acquire, as the last [`release`]'s
    /// fence: every owner that let go of its reference did so before this returns `true`, so
    /// its writes to the op (a reaper's completion, under the lock) are seen. No other
    /// reference can appear afterwards, since references are only cloned from existing ones:
    /// the caller may then use the op as its own, as the last `release` may free it.
    ///
    /// [`release`]: Self::release
    pub(crate) fn is_sole(&self) -> bool {
        self.refs.load(Ordering::Acquire) == ONE_REF
    }

    /// Drops a reference. Returns `true` to the caller that dropped the last one, which then
    /// owns the op alone and frees it.
    pub(crate) fn release(&self) -> bool {
        if self.refs.fetch_sub(ONE_REF, Ordering::Release) != ONE_REF {
            return false;
        }
        // Every other owner's use happened before its release; see them all before freeing.
        fence(Ordering::Acquire);
        true
    }
}

#[cfg(not(loom))]
fn pause(spins: u32) {
    if spins < SPINS {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(loom)]
fn pause(_spins: u32) {
    let _ = SPINS;
    loom::thread::yield_now();
}

/// The lock and the reference count under every interleaving loom can find.
///
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p fiber --lib loom_model --release`.
#[cfg(all(test, loom))]
mod loom_model {
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    use super::OpWord;

    /// An op reduced to its word, a counter only the lock holder may touch (loom's cell
    /// reports any unsynchronised access), and a record of frees.
    struct Op {
        word: OpWord,
        completions: UnsafeCell<u32>,
    }

    /// An op with `extra` references besides its creator's, and a count of its frees.
    fn setup(extra: u32) -> (Arc<Op>, Arc<AtomicUsize>) {
        let op = Op {
            word: OpWord::new(),
            completions: UnsafeCell::new(0),
        };
        for _ in 0..extra {
            op.word.add_ref();
        }
        (Arc::new(op), Arc::new(AtomicUsize::new(0)))
    }

    fn complete(op: &Op) {
        op.word.lock();
        // SAFETY: under the lock (which loom checks, through the cell).
        op.completions.with_mut(|c| unsafe { *c += 1 });
        op.word.unlock();
    }

    fn release(op: &Op, freed: &AtomicUsize) {
        if op.word.release() {
            // The last owner reads what every other owner wrote.
            // SAFETY: the last owner alone holds the op (which loom checks).
            assert_eq!(op.completions.with(|c| unsafe { *c }), 2);
            freed.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_lock_excludes_and_the_last_release_frees_once() {
        loom::model(|| {
            // One more reference: the reaper's, handed over as the ring hands over its
            // user_data.
            let (op, freed) = setup(1);
            let reaper = {
                let (op, freed) = (Arc::clone(&op), Arc::clone(&freed));
                thread::spawn(move || {
                    complete(&op);
                    release(&op, &freed);
                })
            };
            complete(&op);
            release(&op, &freed);
            reaper.join().unwrap();
            assert_eq!(freed.load(Ordering::Relaxed), 1, "freed exactly once");
        });
    }

    /// A write-behind send's op is reused by the stream once it holds the only reference
    /// (`OpRef::get_mut`): the reaper's completion, under the lock, must be seen by the
    /// owner's unlocked reuse, which must not race with it. Fails if `is_sole` loads
    /// relaxed (loom reports the concurrent access) or if the reaper's release is relaxed.
    #[test]
    fn a_sole_owner_sees_the_reapers_completion() {
        loom::model(|| {
            let (op, _) = setup(1);
            let reaper = {
                let op = Arc::clone(&op);
                thread::spawn(move || {
                    complete(&op);
                    assert!(!op.word.release(), "the owner still holds a reference");
                })
            };
            if op.word.is_sole() {
                // As `Op::refill`: the state is reset without the lock.
                op.completions.with_mut(|c| unsafe {
                    assert_eq!(*c, 1, "the completion is seen");
                    *c = 0;
                });
            }
            reaper.join().unwrap();
        });
    }

    #[test]
    fn a_release_while_another_holds_the_lock_keeps_the_lock() {
        loom::model(|| {
            let (op, freed) = setup(2);
            let dropper = {
                let (op, freed) = (Arc::clone(&op), Arc::clone(&freed));
                thread::spawn(move || release(&op, &freed))
            };
            complete(&op);
            complete(&op);
            dropper.join().unwrap();
            release(&op, &freed);
            release(&op, &freed);
            assert_eq!(freed.load(Ordering::Relaxed), 1);
        });
    }
}
