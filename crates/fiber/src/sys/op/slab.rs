//! Where operations live: fixed-size slots recycled through a per-thread free list (the
//! slab), shared through [`OpRef`], a counted reference whose count sits beside the op's
//! lock ([`super::word`]).
//!
//! The address of a slot is the key of its op in `user_data` (`Op::user_data`). A slot goes
//! back to the free list of the thread that frees the op, last in, first out, so the next op
//! of that thread gets a slot that is still in its cache; a thread keeps at most
//! [`SLAB_KEEP`] free slots and gives the rest back to the allocator. Counting live ops is
//! per thread too: one counter per thread, written only by that thread (a plain load and
//! store), summed by [`live_ops`].

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::Op;

/// Free slots a thread keeps: the ops in flight of a busy worker (one per connection and a
/// send for each echo of a round) come back to it without the allocator.
const SLAB_KEEP: usize = 1024;

type Slot = MaybeUninit<Op>;

/// One thread's free slots and its count of live ops.
struct Slab {
    free: RefCell<Vec<NonNull<Slot>>>,
    live: Arc<AtomicIsize>,
}

/// Every thread's live-op counter, for [`live_ops`]; a counter outlives its thread so that
/// ops it created and another thread freed still sum to zero.
static COUNTERS: Mutex<Vec<Arc<AtomicIsize>>> = Mutex::new(Vec::new());
/// Counts of threads whose slab is already gone (an op freed during thread exit).
static ORPHANS: AtomicIsize = AtomicIsize::new(0);

impl Slab {
    fn new() -> Slab {
        let live = Arc::new(AtomicIsize::new(0));
        COUNTERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&live));
        Slab {
            free: RefCell::new(Vec::new()),
            live,
        }
    }

    fn count(&self, n: isize) {
        // Only this thread writes its counter.
        self.live
            .store(self.live.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        for slot in self.free.get_mut().drain(..) {
            // SAFETY: every slot in the list came from `Box::into_raw` (in `take_slot`) and
            // holds no op (it was dropped in place before `give_back`); each is freed once.
            drop(unsafe { Box::from_raw(slot.as_ptr()) });
        }
    }
}

thread_local! {
    static SLAB: Slab = Slab::new();
}

fn count(n: isize) {
    if SLAB.try_with(|s| s.count(n)).is_err() {
        ORPHANS.fetch_add(n, Ordering::Relaxed);
    }
}

fn take_slot() -> NonNull<Slot> {
    let reused = SLAB.try_with(|s| s.free.borrow_mut().pop()).ok().flatten();
    reused.unwrap_or_else(|| NonNull::from(Box::leak(Box::<Op>::new_uninit())))
}

/// # Safety
///
/// `slot` came from [`take_slot`] and holds no value (its op was dropped in place).
unsafe fn give_back(slot: NonNull<Slot>) {
    let kept = SLAB.try_with(|s| {
        let mut free = s.free.borrow_mut();
        let keep = free.len() < SLAB_KEEP;
        if keep {
            free.push(slot);
        }
        keep
    });
    if kept != Ok(true) {
        // SAFETY: forwarded to the caller: a slot from `Box::into_raw`, empty, freed once.
        drop(unsafe { Box::from_raw(slot.as_ptr()) });
    }
}

/// Operations alive in the process: in flight in some ring, or completed and not yet
/// dropped. Zero when nothing is in flight and nobody holds a result; the leak tests use it.
pub(crate) fn live_ops() -> usize {
    let sum: isize = COUNTERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum::<isize>()
        + ORPHANS.load(Ordering::Relaxed);
    usize::try_from(sum).unwrap_or(0)
}

/// A counted reference to an op in a slab slot (the `Arc` of this runtime's ops).
pub(crate) struct OpRef(NonNull<Op>);

// SAFETY: an `OpRef` is a shared reference to an `Op` with a thread-safe count, like
// `Arc<Op>`: sending or sharing it is sound because `Op` is `Send + Sync`.
unsafe impl Send for OpRef {}
// SAFETY: as above.
unsafe impl Sync for OpRef {}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Op>();
};

impl OpRef {
    /// Puts `op` (whose count holds one reference) in a slot.
    pub(super) fn new(op: Op) -> OpRef {
        let slot = take_slot();
        // SAFETY: the slot is empty and exclusively ours until this reference is shared.
        unsafe { slot.as_ptr().write(MaybeUninit::new(op)) };
        count(1);
        OpRef(slot.cast())
    }

    /// The op itself, if this is its only reference ([`OpWord::is_sole`]): the kernel and
    /// every other owner are done with it.
    ///
    /// [`OpWord::is_sole`]: super::word::OpWord::is_sole
    pub(super) fn get_mut(&mut self) -> Option<&mut Op> {
        if !self.word.is_sole() {
            return None;
        }
        // SAFETY: no other reference exists, none can be made but from this one (which
        // `&mut self` borrows), and `is_sole` ordered every former owner's use of the op
        // before this point: the op is ours alone for as long as the borrow lives.
        Some(unsafe { self.0.as_mut() })
    }

    /// Gives up this reference without dropping it: the pointer carries it.
    pub(super) fn into_raw(this: OpRef) -> *const Op {
        let p = this.0.as_ptr();
        std::mem::forget(this);
        p
    }

    /// Takes back a reference that [`into_raw`](Self::into_raw) gave up.
    ///
    /// # Safety
    ///
    /// `p` came from `into_raw`, and that reference is taken back once.
    pub(super) unsafe fn from_raw(p: *const Op) -> OpRef {
        // SAFETY: `into_raw` returned the non-null pointer of a live `OpRef`.
        OpRef(unsafe { NonNull::new_unchecked(p.cast_mut()) })
    }
}

impl Clone for OpRef {
    fn clone(&self) -> OpRef {
        self.word.add_ref();
        OpRef(self.0)
    }
}

impl Deref for OpRef {
    type Target = Op;

    fn deref(&self) -> &Op {
        // SAFETY: the op lives while any reference does, and this is one.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for OpRef {
    fn drop(&mut self) {
        if self.word.release() {
            // SAFETY: this was the last reference (and `release` ordered every other owner's
            // use before this point), so the op is ours alone: drop it in place once, then
            // return its slot, which `new` took from `take_slot`.
            unsafe {
                std::ptr::drop_in_place(self.0.as_ptr());
                give_back(self.0.cast());
            }
            count(-1);
        }
    }
}

impl std::fmt::Debug for OpRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}
