//! The data cell of [`Mutex`]: the one place that hands out `&mut T` from `&Mutex<T>`.
//!
//! Exclusion comes from a one-permit [`Semaphore`](crate::sync::Semaphore): a guard exists
//! only while its permit is held, and the semaphore hands out at most one permit.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use crate::sync::{Semaphore, SemaphorePermit};

/// A mutual-exclusion lock whose `lock` parks the fiber (or the thread), not the worker.
///
/// Unlike `std::sync::Mutex`, its guard may be held across blocking calls and may move to
/// another worker with the fiber. There is no poisoning.
pub struct Mutex<T: ?Sized> {
    sem: Semaphore,
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
            sem: Semaphore::new(1),
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
        MutexGuard {
            mutex: self,
            _permit: self.sem.acquire(),
            _not_sync_unless_t_is: PhantomData,
        }
    }

    /// Locks if the lock is free now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.sem.try_acquire().map(|permit| MutexGuard {
            mutex: self,
            _permit: permit,
            _not_sync_unless_t_is: PhantomData,
        })
    }

    /// The value, through a unique borrow (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// Access to the value of a locked [`Mutex`]; unlocks on drop.
#[must_use = "the mutex unlocks at once if the guard is not kept"]
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    /// The semaphore's only permit: while it lives, no other guard of this mutex does.
    _permit: SemaphorePermit<'a>,
    /// Makes the guard `Sync` only if `T` is, and `Send` only if `T` is.
    _not_sync_unless_t_is: PhantomData<&'a mut T>,
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the semaphore's only permit, so no other guard exists and
        // no `&mut T` is alive elsewhere; the borrow is tied to `&self`.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow through the guard.
        unsafe { &mut *self.mutex.value.get() }
    }
}
