//! The echo path allocates nothing per message: a counting global allocator
//! watches the whole process (the reactors and the client threads) while
//! thousands of echoes go through, in both accept modes, with and without
//! `--compute-us`.
//!
//! One test in this file, so that nothing else in the process allocates
//! while it counts.

mod util;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use server_reactor::{AcceptMode, Reactors};

/// Counts every allocation and reallocation, then lets `System` do it.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's own arguments,
// so `Counting` upholds exactly the contract `System` does; the counter is an
// atomic and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller meets `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller meets `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; `ptr` came from this allocator, which
        // got it from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from `System` through us.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONNS: usize = 8;
const WARM_UP: usize = 50;
const ROUNDS: usize = 500;

/// Echoes `rounds` 16-byte messages on each connection, round robin.
fn echo_rounds(conns: &mut [std::net::TcpStream], rounds: usize) {
    let msg = *b"0123456789abcdef";
    let mut back = [0u8; 16];
    for _ in 0..rounds {
        for c in conns.iter_mut() {
            c.write_all(&msg).expect("write");
            c.read_exact(&mut back).expect("echo");
            assert_eq!(back, msg);
        }
    }
}

fn allocations_per_message(reactors: Reactors) -> f64 {
    let mut conns: Vec<_> = (0..CONNS)
        .map(|_| util::connect(reactors.local_addr()))
        .collect();
    // Connections registered, buffers and queues at their working size.
    echo_rounds(&mut conns, WARM_UP);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    echo_rounds(&mut conns, ROUNDS);
    let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
    drop(conns);
    reactors.stop();
    during as f64 / (CONNS * ROUNDS) as f64
}

#[test]
fn echo_allocates_nothing_per_message() {
    let spin = Some(Duration::from_micros(1));
    for (workers, accept, compute) in [
        (1, AcceptMode::Handoff, None),
        (2, AcceptMode::Handoff, None),
        (2, AcceptMode::Reuseport, None),
        (2, AcceptMode::Handoff, spin),
    ] {
        let reactors =
            Reactors::start(&util::config(workers, accept, compute), None).expect("reactors start");
        let per_message = allocations_per_message(reactors);
        // Zero is what a correct echo path does; a slack of one allocation
        // per thousand messages lets the kernel and libstd be what they are
        // (a lazily grown vector somewhere), and still catches anything that
        // allocates per message, per read or per event.
        assert!(
            per_message < 0.001,
            "{workers} workers, {accept:?}, compute {compute:?}: \
             {per_message} allocations per echoed message"
        );
    }
}
