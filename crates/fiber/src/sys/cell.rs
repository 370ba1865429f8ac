//! Cells that hand out exclusive access from a shared reference: the fiber [`Mutex`] and
//! the [`TakeCell`] a fiber's coroutine lives in. Each is the one place that turns its
//! atomic protocol into `&mut T`.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::park::{self, Parked, Waker};

const FREE: u8 = 0;
const LOCKED: u8 = 1;
/// Locked, and a waiter may be queued: the unlock must look at the queue.
const CONTENDED: u8 = 2;

/// A mutual-exclusion lock whose `lock` parks the fiber (or the thread), not the worker.
///
/// Unlike `std::sync::Mutex`, its guard may be held across blocking calls and may move to
/// another worker with the fiber. There is no poisoning. An uncontended lock and unlock
/// cost one atomic read-modify-write each; a waiter queues and parks, and an unlock that
/// finds waiters wakes the first (who then competes with newcomers for the lock).
pub struct Mutex<T: ?Sized> {
    /// # Invariant
    ///
    /// `FREE` exactly when no guard exists.
    state: AtomicU8,
    waiters: std::sync::Mutex<VecDeque<Waker>>,
    value: UnsafeCell<T>,
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("Mutex").field("value", &&*g).finish(),
            None => f.debug_struct("Mutex").field("value", &"<locked>").finish(),
        }
    }
}

// SAFETY: the mutex hands `&mut T` to one holder at a time, possibly on another thread, which
// is what `T: Send` allows.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: sharing `&Mutex<T>` only ever gives one thread at a time access to `T` (through a
// guard), so `T: Send` suffices, as for `std::sync::Mutex`.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            state: AtomicU8::new(FREE),
            waiters: std::sync::Mutex::new(VecDeque::new()),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks, parking until the lock is free.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if self
            .state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        MutexGuard {
            mutex: self,
            _not_sync_unless_t_is: PhantomData,
        }
    }

    fn lock_contended(&self) {
        loop {
            {
                let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
                // Marks the lock contended before queueing, under the queue's lock: an
                // unlock that swaps after this sees CONTENDED and takes the queue's lock,
                // so it finds this waiter queued.
                if self.state.swap(CONTENDED, Ordering::Acquire) == FREE {
                    return;
                }
                waiters.push_back(Waker::current());
            }
            if park::park() == Parked::Cancelled {
                // Torn down at shutdown while waiting: leave the queue and keep trying
                // without parking (the crate docs: destructors must not block then).
                let me = Waker::current();
                self.waiters
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|w| !w.same(&me));
                std::thread::yield_now();
            }
        }
    }

    /// Locks if the lock is free now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| MutexGuard {
                mutex: self,
                _not_sync_unless_t_is: PhantomData,
            })
    }

    fn unlock(&self) {
        if self.state.swap(FREE, Ordering::Release) == CONTENDED {
            let first = self
                .waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front();
            if let Some(w) = first {
                w.wake();
            }
        }
    }

    /// The value, through a unique borrow (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// Access to the value of a locked [`Mutex`]; unlocks on drop.
#[must_use = "the mutex unlocks at once if the guard is not kept"]
pub struct MutexGuard<'a, T: ?Sized> {
    /// # Invariant
    ///
    /// This guard set the mutex's state from `FREE`, and no other guard exists until it
    /// sets it back (in `drop`).
    mutex: &'a Mutex<T>,
    /// Makes the guard `Sync` only if `T` is, and `Send` only if `T` is.
    _not_sync_unless_t_is: PhantomData<&'a mut T>,
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.unlock();
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: per the guard's invariant no other guard exists, so no `&mut T` is alive
        // elsewhere; the borrow is tied to `&self`.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow through the guard.
        unsafe { &mut *self.mutex.value.get() }
    }
}

/// A slot a value is taken out of and put back into by one party at a time, with one
/// atomic read-modify-write per take and none per put: a fiber's coroutine, taken by the
/// worker that resumes it.
pub(crate) struct TakeCell<T> {
    /// # Invariant
    ///
    /// `false` exactly when `value` is `Some` and nobody is taking it: whoever swaps it
    /// from `false` to `true` has `value` to itself until it stores `false` again.
    taken: AtomicBool,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: `value` is reached only by the one party the flag admits (see the invariant), so
// sharing the cell moves `T` between threads at most, which `T: Send` allows.
unsafe impl<T: Send> Sync for TakeCell<T> {}

impl<T> std::fmt::Debug for TakeCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TakeCell")
            .field("taken", &self.taken.load(Ordering::Relaxed))
            .finish()
    }
}

impl<T> TakeCell<T> {
    pub(crate) fn new(value: T) -> TakeCell<T> {
        TakeCell {
            taken: AtomicBool::new(false),
            value: UnsafeCell::new(Some(value)),
        }
    }

    /// The value, unless someone else took it (and has not put it back).
    pub(crate) fn take(&self) -> Option<T> {
        if self.taken.swap(true, Ordering::Acquire) {
            return None;
        }
        // SAFETY: the swap from `false` admitted this caller alone (the invariant).
        unsafe { (*self.value.get()).take() }
    }

    /// Puts back a value this caller took.
    pub(crate) fn put(&self, value: T) {
        // SAFETY: the caller took the value, so the flag is `true` and still admits it
        // alone; storing `false` afterwards (release) hands the slot over.
        unsafe { *self.value.get() = Some(value) };
        self.taken.store(false, Ordering::Release);
    }
}
