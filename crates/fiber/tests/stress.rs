//! 100,000 fibers alive at once, yielding, woken across workers and stolen, in bounded time.
//! Alone in its binary so that /proc/self/maps is not disturbed by other tests.

mod util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use fiber::sync::Semaphore;
use util::TIMEOUT;

const FIBERS: usize = 100_000;

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_hundred_thousand_fibers() {
    require_io_uring!();
    let start = Instant::now();
    let b = fiber::Runtime::builder().workers(2).stack_size(16 * 1024);
    // SAFETY: these fibers hold no thread-local references or std mutex guards across
    // blocking calls.
    let rt = unsafe { b.work_stealing() }.build().unwrap();
    let maps_before = map_count();
    let gate = Arc::new(Semaphore::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));

    let (g, p, d) = (Arc::clone(&gate), Arc::clone(&parked), Arc::clone(&done));
    // The root spawns everything on its own worker; the other worker has to steal.
    let root = rt.spawn(move || {
        let handles: Vec<_> = (0..FIBERS)
            .map(|i| {
                let (g, p, d) = (Arc::clone(&g), Arc::clone(&p), Arc::clone(&d));
                fiber::spawn(move || {
                    for _ in 0..2 {
                        fiber::yield_now();
                    }
                    p.fetch_add(1, Ordering::SeqCst);
                    // Parked until the gate opens; the permit comes from another worker's
                    // fiber or a thread, so this is a cross-worker wake-up.
                    g.acquire().forget();
                    for _ in 0..2 {
                        fiber::yield_now();
                    }
                    d.fetch_add(1, Ordering::SeqCst);
                    i
                })
            })
            .collect();
        handles
    });
    let mut root = root;
    let handles = root.join_timeout(TIMEOUT).expect("spawning");

    // Wait (bounded) until every fiber is parked at the gate: all alive at once.
    let deadline = Instant::now() + TIMEOUT;
    while parked.load(Ordering::SeqCst) < FIBERS {
        assert!(Instant::now() < deadline, "fibers did not all park");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stats = rt.stats();
    let maps_alive = map_count();
    eprintln!(
        "{FIBERS} fibers alive: /proc/self/maps {maps_before} -> {maps_alive} lines; {stats}"
    );
    assert!(stats.stacks_in_use >= FIBERS, "{stats}");
    if stats.guard_pages == "madvise" {
        assert!(
            maps_alive - maps_before < 1000,
            "stacks cost VMAs: {maps_before} -> {maps_alive}"
        );
    }

    // Open the gate from a plain thread, half the permits, and from a fiber, the rest.
    let g = Arc::clone(&gate);
    let opener = rt.spawn(move || g.add_permits(FIBERS / 2));
    gate.add_permits(FIBERS - FIBERS / 2);
    util::join(opener);

    let mut sum = 0usize;
    for mut h in handles {
        sum += h.join_timeout(TIMEOUT).expect("fiber");
    }
    assert_eq!(sum, FIBERS * (FIBERS - 1) / 2);
    assert_eq!(done.load(Ordering::SeqCst), FIBERS);
    let stats = util::stats_when_retired(&rt);
    eprintln!("after: {stats}; {:?} in total", start.elapsed());
    assert_eq!(stats.fibers_live(), 0, "{stats}");
    assert_eq!(stats.stacks_in_use, 0, "{stats}");
    assert!(
        stats.total().stolen_fibers > 0,
        "nothing was stolen: {stats}"
    );
}
