//! No descriptor, stack, mapping or operation buffer outlives cancellation or shutdown.
//!
//! One test function runs the cases in sequence, alone in its binary, so that the process-wide
//! counts it compares (/proc/self/fd, /proc/self/maps, live operations) are not disturbed by
//! other tests running in parallel.

mod util;

use std::net::Shutdown;
use std::time::Duration;

use fiber::net::{TcpListener, TcpStream};
use util::{TIMEOUT, join};

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |s| s.lines().count())
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Counts {
    fds: usize,
    maps: usize,
    ops: usize,
}

fn counts(handle: Option<&fiber::Handle>) -> Counts {
    Counts {
        fds: fd_count(),
        maps: map_count(),
        ops: handle.map_or(0, |h| h.stats().ops_live),
    }
}

/// Builds a runtime, lets `scenario` load it, drops it, and checks that everything it held
/// is gone: descriptors (rings, eventfds, sockets), stack mappings, live operations.
fn check(name: &str, builder: fiber::Builder, scenario: impl FnOnce(&fiber::Runtime)) {
    let before = counts(None);
    let rt = builder.build().expect("runtime");
    let handle = rt.handle();
    scenario(&rt);
    drop(rt);
    let stats = handle.stats();
    drop(handle);
    let after = Counts {
        ops: stats.ops_live,
        ..counts(None)
    };
    eprintln!("{name}: {before:?} -> {after:?}; {stats}");
    assert_eq!(stats.stacks_in_use, 0, "{name}: stacks in use");
    assert_eq!(stats.fibers_live(), 0, "{name}: fibers alive");
    assert_eq!(after.ops, 0, "{name}: operations (and their buffers) alive");
    assert_eq!(after.fds, before.fds, "{name}: descriptors leaked");
    assert!(
        after.maps <= before.maps + 2,
        "{name}: mappings leaked: {} -> {}",
        before.maps,
        after.maps
    );
}

fn blocked_everywhere(rt: &fiber::Runtime) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (ready_tx, ready_rx) = fiber::sync::channel::<()>(16);
    // A server that accepts connections and parks each handler in a read.
    let tx = ready_tx.clone();
    rt.spawn(move || {
        loop {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            let tx = tx.clone();
            fiber::spawn(move || {
                let _ = tx.send(());
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf);
            });
        }
    });
    // Clients that connect and park in a read too.
    for _ in 0..8 {
        let tx = ready_tx.clone();
        rt.spawn(move || {
            let s = TcpStream::connect(addr).unwrap();
            let _ = tx.send(());
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
        });
    }
    // Sleepers, and fibers parked on a channel that never gets a message.
    let (keep, never) = fiber::sync::channel::<()>(1);
    for _ in 0..8 {
        rt.spawn(|| fiber::sleep(Duration::from_secs(3600)));
        let never = never.clone();
        rt.spawn(move || never.recv());
    }
    for _ in 0..16 {
        ready_rx
            .recv_timeout(TIMEOUT)
            .expect("every connection is up");
    }
    // Everything is parked in the kernel or on a channel now; the runtime drops next,
    // while the sender is still alive so the receivers stay parked.
    drop(keep);
}

fn leaks_nothing() {
    require_io_uring!();
    // Warm up: the first worker threads make glibc create its per-thread malloc arenas,
    // mappings that outlive the threads and are reused by later ones.
    for _ in 0..2 {
        let rt = fiber::Runtime::builder()
            .workers(2)
            .completer(true)
            .build()
            .unwrap();
        blocked_everywhere(&rt);
    }

    check("idle runtime", fiber::Runtime::builder().workers(2), |_| {});

    check(
        "completer and stealing",
        fiber::Runtime::builder()
            .workers(2)
            .completer(true)
            .io_stealing(true),
        blocked_everywhere,
    );

    check(
        "blocked in accept, read, sleep and recv",
        fiber::Runtime::builder().workers(2),
        blocked_everywhere,
    );

    check(
        "multishot accept with connections nobody took",
        fiber::Runtime::builder().workers(1).multishot(true),
        |rt| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let clients: Vec<_> = (0..4)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            // One accept arms the multishot; the other connections queue in the op.
            let l = rt.spawn(move || {
                let (s, _) = listener.accept().unwrap();
                s.shutdown(Shutdown::Both).ok();
                listener
            });
            let listener = join(l);
            drop(listener);
            drop(clients);
        },
    );

    check(
        "a closed stream and a cancelled sleep",
        fiber::Runtime::builder().workers(2),
        |rt| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let h = rt.spawn(move || -> std::io::Result<()> {
                let c = TcpStream::connect(addr)?;
                let (s, _) = listener.accept()?;
                s.close()?;
                c.close()?;
                let mut t = fiber::spawn(|| fiber::sleep(Duration::from_secs(3600)));
                assert_eq!(
                    t.join_timeout(Duration::from_millis(10)),
                    Err(fiber::JoinError::Timeout)
                );
                Ok(())
            });
            join(h).unwrap();
        },
    );
}

#[test]
fn nothing_leaks_on_cancellation_and_shutdown() {
    // Run on a thread of its own: nothing here uses this thread's private ring, and the
    // harness thread's descriptors stay out of the counts.
    std::thread::spawn(leaks_nothing).join().unwrap();
}
