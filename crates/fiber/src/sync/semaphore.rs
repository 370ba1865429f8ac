//! A counting semaphore with FIFO hand-off.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::park::{self, Parked, Waker};

/// A counting semaphore whose `acquire` parks the fiber (or thread).
///
/// Permits are handed to waiters in arrival order: a release with waiters queued gives the
/// permit straight to the first one, so a stream of new arrivals cannot starve it.
#[derive(Debug)]
pub struct Semaphore {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    permits: usize,
    waiters: VecDeque<Arc<Node>>,
}

#[derive(Debug)]
struct Node {
    granted: AtomicBool,
    waker: Waker,
}

/// One permit of a [`Semaphore`], given back on drop.
#[derive(Debug)]
#[must_use = "the permit is released at once if not kept"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release_one();
    }
}

impl SemaphorePermit<'_> {
    /// Keeps the permit taken for good (the semaphore has one permit fewer).
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    pub const fn new(permits: usize) -> Semaphore {
        Semaphore {
            state: Mutex::new(State {
                permits,
                waiters: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a permit, parking until one is available.
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        loop {
            let node = {
                let mut st = self.lock();
                if st.waiters.is_empty() && st.permits > 0 {
                    st.permits -= 1;
                    return SemaphorePermit { sem: self };
                }
                let node = Arc::new(Node {
                    granted: AtomicBool::new(false),
                    waker: Waker::current(),
                });
                st.waiters.push_back(Arc::clone(&node));
                node
            };
            loop {
                if node.granted.load(Ordering::Acquire) {
                    return SemaphorePermit { sem: self };
                }
                if park::park() == Parked::Cancelled {
                    break;
                }
            }
            // Torn down at shutdown while waiting: leave the queue, then (see the module
            // docs) keep trying without parking.
            let mut st = self.lock();
            if node.granted.load(Ordering::Acquire) {
                return SemaphorePermit { sem: self };
            }
            st.waiters.retain(|n| !Arc::ptr_eq(n, &node));
            drop(st);
            std::thread::yield_now();
        }
    }

    /// Takes a permit if one is available now.
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        let mut st = self.lock();
        if st.waiters.is_empty() && st.permits > 0 {
            st.permits -= 1;
            Some(SemaphorePermit { sem: self })
        } else {
            None
        }
    }

    /// Adds `n` permits.
    pub fn add_permits(&self, n: usize) {
        for _ in 0..n {
            self.release_one();
        }
    }

    /// Permits available now.
    pub fn available_permits(&self) -> usize {
        self.lock().permits
    }

    fn release_one(&self) {
        let node = {
            let mut st = self.lock();
            match st.waiters.pop_front() {
                Some(node) => {
                    node.granted.store(true, Ordering::Release);
                    node
                }
                None => {
                    st.permits += 1;
                    return;
                }
            }
        };
        node.waker.clone().wake();
    }
}
