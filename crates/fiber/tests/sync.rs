//! Mutex, Semaphore and channel, between fibers and plain threads.

mod util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fiber::sync::{Mutex, Semaphore, TryRecvError, TrySendError, channel};
use util::{TIMEOUT, join, runtime};

#[test]
fn mutex_excludes_across_yields_workers_and_threads() {
    require_io_uring!();
    let rt = runtime(2);
    let m = Arc::new(Mutex::new((0u64, 0u64)));
    let mut hs = Vec::new();
    for _ in 0..20 {
        let m = Arc::clone(&m);
        hs.push(rt.spawn(move || {
            for _ in 0..50 {
                let mut g = m.lock();
                g.0 += 1;
                // Hold the lock across a park: nobody else may get in.
                fiber::yield_now();
                g.1 += 1;
                assert_eq!(g.0, g.1);
            }
        }));
    }
    let m2 = Arc::clone(&m);
    let thread = std::thread::spawn(move || {
        for _ in 0..50 {
            let mut g = m2.lock();
            g.0 += 1;
            std::thread::yield_now();
            g.1 += 1;
        }
    });
    for h in hs {
        join(h);
    }
    thread.join().unwrap();
    let g = m.lock();
    assert_eq!(*g, (1050, 1050));
}

/// Short critical sections under heavy contention from fibers on two workers and from
/// plain threads at once: the lock's uncontended fast path races its queue of waiters
/// all the time. A lost wake-up shows as a join that times out; a broken exclusion as a
/// wrong count.
#[test]
fn mutex_fast_and_contended_paths_lose_no_wake_up() {
    require_io_uring!();
    const FIBERS: u64 = 200;
    const FIBER_LOCKS: u64 = 2_000;
    const THREADS: u64 = 2;
    const THREAD_LOCKS: u64 = 200_000;
    let rt = runtime(2);
    let m = Arc::new(Mutex::new(0u64));
    let fibers: Vec<_> = (0..FIBERS)
        .map(|i| {
            let m = Arc::clone(&m);
            rt.handle().spawn_on(i as usize, move || {
                for k in 0..FIBER_LOCKS {
                    *m.lock() += 1;
                    if k % 50 == 0 {
                        fiber::yield_now();
                    }
                }
            })
        })
        .collect();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for _ in 0..THREAD_LOCKS {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    for f in fibers {
        join(f);
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*m.lock(), FIBERS * FIBER_LOCKS + THREADS * THREAD_LOCKS);
}

#[test]
fn semaphore_bounds_concurrency() {
    require_io_uring!();
    let rt = runtime(2);
    let sem = Arc::new(Semaphore::new(3));
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..30)
        .map(|_| {
            let (sem, inside, max) = (Arc::clone(&sem), Arc::clone(&inside), Arc::clone(&max));
            rt.spawn(move || {
                let _p = sem.acquire();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                fiber::yield_now();
                inside.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in hs {
        join(h);
    }
    assert!(max.load(Ordering::SeqCst) <= 3);
    assert_eq!(sem.available_permits(), 3);
    assert!(sem.try_acquire().is_some());
}

#[test]
fn channel_moves_every_message_once_under_backpressure() {
    require_io_uring!();
    let rt = runtime(2);
    let (tx, rx) = channel::<u64>(4);
    let producers: Vec<_> = (0..8u64)
        .map(|p| {
            let tx = tx.clone();
            rt.spawn(move || {
                for i in 0..200 {
                    tx.send(p * 1000 + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let consumer = rt.spawn(move || {
        let mut seen: Vec<u64> = rx.iter().collect();
        seen.sort_unstable();
        seen
    });
    for p in producers {
        join(p);
    }
    let seen = join(consumer);
    let expect: Vec<u64> = (0..8u64)
        .flat_map(|p| (0..200).map(move |i| p * 1000 + i))
        .collect();
    assert_eq!(seen, expect);
}

#[test]
fn try_send_never_parks_and_reports_full_and_disconnected() {
    let (tx, rx) = channel::<u8>(2);
    assert!(tx.try_send(1).is_ok());
    assert!(tx.try_send(2).is_ok());
    assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    drop(rx);
    assert!(matches!(tx.try_send(4), Err(TrySendError::Disconnected(4))));
    assert!(tx.is_closed());
}

#[test]
fn a_thread_feeds_a_fiber_and_a_fiber_feeds_a_thread() {
    require_io_uring!();
    let rt = runtime(1);
    let (to_fiber, fiber_rx) = channel::<u32>(1);
    let (to_thread, thread_rx) = channel::<u32>(1);
    let echo = rt.spawn(move || {
        for v in fiber_rx.iter() {
            to_thread.send(v * 2).unwrap();
        }
    });
    for i in 0..100 {
        // `try_send` from a plain thread, retried while full, as a chat hub would offer.
        let mut v = i;
        loop {
            match to_fiber.try_send(v) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    v = back;
                    std::thread::yield_now();
                }
                Err(TrySendError::Disconnected(_)) => panic!("receiver gone"),
            }
        }
        assert_eq!(thread_rx.recv_timeout(TIMEOUT), Ok(i * 2));
    }
    drop(to_fiber);
    join(echo);
}

#[test]
fn recv_timeout_on_a_fiber() {
    require_io_uring!();
    let rt = runtime(1);
    let (tx, rx) = channel::<u8>(1);
    let r = rt
        .block_on(move || rx.recv_timeout(std::time::Duration::from_millis(20)))
        .unwrap();
    assert_eq!(r, Err(fiber::sync::RecvTimeoutError::Timeout));
    drop(tx);
}
