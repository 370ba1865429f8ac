//! A multishot accept whose connections nobody takes stops at a bounded queue. Alone in
//! its binary: it counts the process's open descriptors, which other tests would disturb.

mod util;

use std::sync::Arc;

use fiber::net::TcpListener;
use util::join;

/// A multishot accept nobody takes connections from stops accepting after a bounded
/// queue: the rest wait in the kernel's listen backlog, as with a plain accept, instead of
/// being accepted into descriptors the process holds without bound.
#[test]
fn a_multishot_accept_queues_a_bounded_number_of_connections() {
    require_io_uring!();
    // Each wave is more than the queue takes.
    const WAVE: usize = 2 * fiber::net::ACCEPT_BACKLOG;
    let rt = fiber::Runtime::builder()
        .workers(1)
        .multishot_accept(true)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(listener);
    let l = Arc::clone(&listener);
    // Arm the multishot with one connection, then accept nothing more for a while.
    let first = rt.spawn(move || l.accept().map(|(s, _)| s));
    let c0 = std::net::TcpStream::connect(addr).unwrap();
    let s0 = join(first).unwrap();
    // A wave of connections nobody accepts, and time for the runtime to reap them: the
    // queue fills past its bound and the multishot is cancelled (the kernel may accept a
    // burst that arrived at once before the cancel lands).
    let settle = || join(rt.spawn(|| fiber::sleep(std::time::Duration::from_millis(300))));
    let mut clients: Vec<_> = (0..WAVE)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    settle();
    let fds_after_first_wave = open_fds();
    // A second wave: none of it may be accepted into the process now.
    clients.extend((0..WAVE).map(|_| std::net::TcpStream::connect(addr).unwrap()));
    settle();
    let accepted_in_second_wave = open_fds().saturating_sub(fds_after_first_wave + WAVE);
    assert_eq!(
        accepted_in_second_wave, 0,
        "connections accepted while nobody called accept and the queue was full"
    );
    // They are all still served once someone accepts.
    let l = Arc::clone(&listener);
    let all = rt.spawn(move || -> std::io::Result<usize> {
        let mut n = 0;
        while n < 2 * WAVE {
            drop(l.accept()?);
            n += 1;
        }
        Ok(n)
    });
    assert_eq!(join(all).unwrap(), 2 * WAVE);
    drop((c0, s0, clients));
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}
