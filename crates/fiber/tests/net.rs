//! TCP through the runtime: echo, shared streams, errors, multishot accept, plain threads.

mod util;

use std::io::{Read, Write};

use std::net::Shutdown;
use std::sync::Arc;

use fiber::net::{TcpListener, TcpStream};
use util::{TIMEOUT, join, runtime};

/// Serves echo on `listener` for `conns` connections, one fiber each.
fn echo_server(listener: TcpListener, conns: usize) -> std::io::Result<()> {
    let mut handlers = Vec::new();
    for _ in 0..conns {
        let (s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        handlers.push(fiber::spawn(move || -> std::io::Result<u64> {
            let mut buf = [0u8; 1024];
            let mut total = 0;
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    return Ok(total);
                }
                s.write_all(&buf[..n])?;
                total += n as u64;
            }
        }));
    }
    for h in handlers {
        h.join().expect("handler fiber")?;
    }
    Ok(())
}

fn echo_roundtrips(rt: &fiber::Runtime, conns: usize, rounds: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(move || echo_server(listener, conns));
    let clients: Vec<_> = (0..conns)
        .map(|c| {
            rt.spawn(move || -> std::io::Result<()> {
                let mut s = TcpStream::connect(addr)?;
                s.set_nodelay(true)?;
                for r in 0..rounds {
                    let msg = format!("conn {c} round {r:04}\n");
                    // Through the std trait, as generic handler code would.
                    Write::write_all(&mut s, msg.as_bytes())?;
                    let mut got = vec![0u8; msg.len()];
                    let mut at = 0;
                    while at < got.len() {
                        let n = Read::read(&mut s, &mut got[at..])?;
                        assert_ne!(n, 0, "early EOF");
                        at += n;
                    }
                    assert_eq!(got, msg.as_bytes());
                }
                s.shutdown(Shutdown::Write)?;
                let mut rest = Vec::new();
                s.read_to_end(&mut rest)?;
                assert!(rest.is_empty());
                Ok(())
            })
        })
        .collect();
    for c in clients {
        join(c).unwrap();
    }
    join(server).unwrap();
}

#[test]
fn echo_over_loopback() {
    require_io_uring!();
    let rt = runtime(2);
    echo_roundtrips(&rt, 50, 20);
    let stats = rt.stats();
    assert!(stats.total().completions_own > 0, "{stats}");
    assert!(
        stats.total().enters < stats.total().ops_submitted,
        "submissions are batched: {stats}"
    );
}

#[test]
fn echo_with_multishot_accept() {
    require_io_uring!();
    let rt = fiber::Runtime::builder()
        .workers(2)
        .multishot(true)
        .build()
        .unwrap();
    echo_roundtrips(&rt, 20, 5);
}

#[test]
fn echo_with_multishot_accept_and_plain_recv() {
    require_io_uring!();
    let rt = fiber::Runtime::builder()
        .workers(2)
        .multishot(false)
        .multishot_accept(true)
        .build()
        .unwrap();
    echo_roundtrips(&rt, 20, 5);
}

#[test]
fn echo_with_each_ring_flag() {
    require_io_uring!();
    for flags in [
        "single_issuer",
        "coop_taskrun",
        "defer_taskrun",
        "single_issuer,coop_taskrun",
        "sqpoll",
    ] {
        let rt = fiber::Runtime::builder()
            .workers(2)
            .ring_flags(flags.parse().unwrap())
            .build()
            .unwrap_or_else(|e| panic!("{flags}: {e}"));
        echo_roundtrips(&rt, 10, 10);
    }
}

#[test]
fn echo_with_completer_and_io_stealing() {
    require_io_uring!();
    let rt = fiber::Runtime::builder()
        .workers(2)
        .completer(true)
        .io_stealing(true)
        .build()
        .unwrap();
    echo_roundtrips(&rt, 20, 20);
    let stats = rt.stats();
    assert!(stats.completer_wakeups > 0, "{stats}");
    eprintln!("{stats}");
}

#[test]
fn a_reader_and_a_writer_fiber_share_a_stream() {
    require_io_uring!();
    let rt = runtime(2);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(move || echo_server(listener, 1));
    let total = rt
        .block_on(move || -> std::io::Result<usize> {
            let s = Arc::new(TcpStream::connect(addr)?);
            let w = Arc::clone(&s);
            let writer = fiber::spawn(move || -> std::io::Result<()> {
                for i in 0..100u32 {
                    w.write_all(&i.to_be_bytes())?;
                }
                w.shutdown(Shutdown::Write)
            });
            let mut got = Vec::new();
            (&*s).read_to_end(&mut got)?;
            writer.join().unwrap()?;
            let expect: Vec<u8> = (0..100u32).flat_map(u32::to_be_bytes).collect();
            assert_eq!(got, expect);
            Ok(got.len())
        })
        .unwrap()
        .unwrap();
    assert_eq!(total, 400);
    join(server).unwrap();
}

#[test]
fn connect_to_a_closed_port_is_refused() {
    require_io_uring!();
    let rt = runtime(1);
    // Bind then drop, so the port is very likely closed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = rt
        .block_on(move || TcpStream::connect(addr).map(drop))
        .unwrap();
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::ConnectionRefused);
}

#[test]
fn streams_work_from_plain_threads() {
    require_io_uring!();
    // No runtime at all: each thread uses its private ring.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"hello").unwrap();
    let mut buf = [0u8; 5];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    server.join().unwrap();
}

#[test]
fn shutdown_cancels_a_blocked_accept_and_read() {
    require_io_uring!();
    let rt = runtime(2);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let acceptor = rt.spawn(move || listener.accept().map(drop));
    // A connection whose server side reads and never gets data.
    let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
    let a2 = l2.local_addr().unwrap();
    let (accepted_tx, accepted_rx) = fiber::sync::channel(1);
    let reader = rt.spawn(move || {
        let (s, _) = l2.accept()?;
        accepted_tx.send(()).ok();
        let mut buf = [0u8; 8];
        s.read(&mut buf)
    });
    let _client = std::net::TcpStream::connect(a2).unwrap();
    accepted_rx.recv_timeout(TIMEOUT).unwrap();
    rt.shutdown();
    let a = join(acceptor);
    assert_eq!(
        a.unwrap_err().raw_os_error(),
        Some(libc::ECANCELED),
        "accept"
    );
    let r = join(reader);
    assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::ECANCELED), "read");
}

#[test]
fn multishot_recv_carries_a_large_transfer_through_a_buffer_shortage() {
    require_io_uring!();
    let rt = fiber::Runtime::builder()
        .workers(1)
        .multishot(true)
        .build()
        .unwrap();
    const TOTAL: usize = 6 << 20;
    let pattern = |i: usize| (i % 251) as u8;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = std::thread::spawn(move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let data: Vec<u8> = (0..TOTAL).map(pattern).collect();
        s.write_all(&data).unwrap();
    });
    let reader = rt.spawn(move || -> std::io::Result<(usize, usize)> {
        let (s, _) = listener.accept()?;
        let mut got = 0usize;
        let mut reads = 0usize;
        // Small reads: chunks are split across calls.
        let mut buf = [0u8; 1000];
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok((got, reads));
            }
            for (k, b) in buf[..n].iter().enumerate() {
                assert_eq!(*b, pattern(got + k), "byte {}", got + k);
            }
            got += n;
            reads += 1;
            if reads == 1 {
                // Keep the only worker busy (no reaping) while the data pours in, so the
                // provided buffers run out and the multishot recv has to be re-armed.
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_millis(200) {
                    std::hint::spin_loop();
                }
            }
        }
    });
    let (got, reads) = join(reader).unwrap();
    sender.join().unwrap();
    assert_eq!(got, TOTAL);
    let stats = rt.stats();
    eprintln!("{reads} reads; {stats}");
    // One multishot recv serves many reads.
    assert!(
        (stats.total().ops_submitted as usize) < reads / 2,
        "{stats}"
    );
}

/// A multishot recv whose reader stops reading (it waits on something else) stops
/// receiving after a bounded backlog: the sender stalls on TCP flow control instead of the
/// runtime buffering everything it sends. Afterwards every byte still arrives, in order.
#[test]
fn multishot_recv_stops_receiving_for_a_reader_that_does_not_read() {
    require_io_uring!();
    let rt = fiber::Runtime::builder()
        .workers(1)
        .multishot(true)
        .build()
        .unwrap();
    // Far beyond the socket buffers and the runtime's backlog: reaching it means the data
    // is being buffered without bound.
    const UNBOUNDED: usize = 64 << 20;
    let stall = std::time::Duration::from_millis(300);
    let pattern = |i: usize| (i % 253) as u8;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go_rx) = fiber::sync::channel::<()>(1);
    let reader = rt.spawn(move || -> std::io::Result<usize> {
        let (s, _) = listener.accept()?;
        let mut buf = vec![0u8; 16 * 1024];
        // The first read arms the multishot recv; then this fiber looks away.
        let mut got = s.read(&mut buf)?;
        let _ = go_rx.recv();
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(got);
            }
            for (k, b) in buf[..n].iter().enumerate() {
                assert_eq!(*b, pattern(got + k), "byte {}", got + k);
            }
            got += n;
        }
    });
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(stall)).unwrap();
    let chunk_len = 64 * 1024;
    let mut sent = 0usize;
    let deadline = std::time::Instant::now() + TIMEOUT;
    let stalled = loop {
        if sent >= UNBOUNDED || std::time::Instant::now() > deadline {
            break false;
        }
        let chunk: Vec<u8> = (sent..sent + chunk_len).map(pattern).collect();
        let began = std::time::Instant::now();
        match s.write(&chunk) {
            Ok(n) if began.elapsed() >= stall => {
                sent += n;
                break true;
            }
            Ok(n) => sent += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break true;
            }
            Err(e) => panic!("flood write: {e}"),
        }
    };
    go_tx.send(()).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let got = join(reader).unwrap();
    assert!(
        stalled,
        "the runtime took {} MiB for a reader that does not read",
        sent >> 20
    );
    assert_eq!(got, sent);
    eprintln!("stalled after {} KiB; {}", sent >> 10, rt.stats());
}

/// Keeps the calling fiber's worker busy (no reaping, no kernel entry) for `ms`.
fn spin_worker(ms: u64) {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(ms) {
        std::hint::spin_loop();
    }
}

/// The kernel ends a multishot accept with a connection in its final CQE when the CQ is
/// full. The listener must take that connection and re-arm, not report the ended op as a
/// cancelled accept.
#[test]
fn a_multishot_accept_that_ends_on_a_connection_is_rearmed() {
    require_io_uring!();
    const CONNS: usize = 64;
    let rt = fiber::Runtime::builder()
        .workers(1)
        .multishot_accept(true)
        .ring_entries(8)
        .cq_entries(16)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (armed_tx, armed_rx) = std::sync::mpsc::channel();
    let server = rt.spawn(move || -> std::io::Result<Vec<TcpStream>> {
        let mut kept = vec![listener.accept()?.0];
        armed_tx.send(()).unwrap();
        // The other connections arrive while the worker does not reap: their CQEs fill
        // the 16-entry CQ and the kernel ends the multishot.
        spin_worker(300);
        while kept.len() < CONNS {
            kept.push(listener.accept()?.0);
        }
        Ok(kept)
    });
    let mut clients = vec![std::net::TcpStream::connect(addr).unwrap()];
    armed_rx.recv_timeout(TIMEOUT).unwrap();
    for _ in 1..CONNS {
        clients.push(std::net::TcpStream::connect(addr).unwrap());
    }
    let kept = join(server).expect("every connection accepted");
    assert_eq!(kept.len(), CONNS);
    eprintln!("{}", rt.stats());
}

fn fixed_files_runtime(workers: usize, multishot: bool) -> fiber::Runtime {
    fiber::Runtime::builder()
        .workers(workers)
        .multishot(multishot)
        .fixed_files(true)
        .build()
        .unwrap()
}

#[test]
fn echo_with_fixed_files() {
    require_io_uring!();
    for multishot in [true, false] {
        let rt = fixed_files_runtime(2, multishot);
        echo_roundtrips(&rt, 20, 10);
        let stats = rt.stats();
        // Every stream of the echo registers where it first does I/O: 20 servers, 20
        // clients.
        assert_eq!(stats.total().fixed_files, 40, "{stats}");
    }
}

#[test]
fn echo_with_fixed_files_and_work_stealing() {
    require_io_uring!();
    let b = fiber::Runtime::builder()
        .workers(2)
        .multishot(true)
        .fixed_files(true);
    // SAFETY: the tests' fibers hold no thread-local references or std mutex guards across
    // blocking calls.
    let rt = unsafe { b.work_stealing() }.build().unwrap();
    // Fibers move between workers: a stream is named by slot on the worker that registered
    // it and by descriptor on the other.
    echo_roundtrips(&rt, 20, 20);
}

/// A stream's socket belongs to the ring of the worker that did its first ring operation:
/// a send or a recv pushed from another worker is a cross-ring operation, one from the owner
/// is not. With or without fixed files.
#[test]
fn operations_on_another_workers_stream_count_as_cross_ring() {
    require_io_uring!();
    // More than a loopback socket's send and receive buffers hold together, so that a
    // writer the client does not read from has to hand some of it to the ring.
    const BIG: usize = 32 << 20;
    let pattern = |i: usize| (i % 251) as u8;
    for fixed in [false, true] {
        let rt = fiber::Runtime::builder()
            .workers(2)
            .fixed_files(fixed)
            .build()
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (go, wait_go) = std::sync::mpsc::channel::<()>();
        let client = std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
            let mut s = std::net::TcpStream::connect(addr)?;
            s.set_read_timeout(Some(TIMEOUT))?;
            s.write_all(b"x")?;
            wait_go
                .recv_timeout(TIMEOUT)
                .map_err(|_| std::io::Error::other("never told to read"))?;
            let mut got = vec![0u8; 2 + BIG];
            s.read_exact(&mut got)?;
            Ok(got)
        });
        let (s, _) = listener.accept().unwrap();
        let s = Arc::new(TcpStream::from_std(s));
        // The first ring operation: the recv, on worker 0.
        let r = Arc::clone(&s);
        let got = join(rt.handle().spawn_on(0, move || {
            let mut b = [0u8; 1];
            r.read(&mut b).map(|n| b[..n].to_vec())
        }));
        assert_eq!(got.unwrap(), b"x");
        // Small writes from either worker: sent directly, or by the ring when the worker
        // has an SQE to submit anyway (the re-arm of the eventfd that woke it).
        for (worker, byte) in [(0, b'a'), (1, b'b')] {
            let w = Arc::clone(&s);
            join(rt.handle().spawn_on(worker, move || {
                w.write_all(&[byte])?;
                w.flush()
            }))
            .unwrap();
        }
        // No room: worker 1's sends go to the ring, naming the socket worker 0 owns.
        let cross_before = rt.stats().workers[1].cross_ring_ops;
        let w = Arc::clone(&s);
        let big = rt.handle().spawn_on(1, move || {
            let data: Vec<u8> = (0..BIG).map(pattern).collect();
            w.write_all(&data)?;
            w.flush()
        });
        let deadline = std::time::Instant::now() + TIMEOUT;
        while rt.stats().workers[1].cross_ring_ops == cross_before
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        go.send(()).unwrap();
        join(big).unwrap();
        let got = client.join().unwrap().unwrap();
        assert_eq!(&got[..2], b"ab", "fixed {fixed}");
        assert!(
            got[2..].iter().enumerate().all(|(i, &b)| b == pattern(i)),
            "fixed {fixed}: the large write arrived out of order"
        );
        let stats = rt.stats();
        assert_eq!(stats.workers[0].cross_ring_ops, 0, "fixed {fixed}: {stats}");
        assert!(
            stats.workers[1].cross_ring_ops > cross_before,
            "fixed {fixed}: {stats}"
        );
    }
}

/// A write on a fiber that the socket has room for, from a worker with nothing else to run
/// and no SQE to submit, is one `send` system call: no op, no enter, no completion. (The
/// first write may go to the ring: a worker woken from outside has its eventfd's read to
/// submit again.)
#[test]
fn a_write_the_socket_takes_at_once_pushes_no_op() {
    require_io_uring!();
    let rt = runtime(1);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let mut s = std::net::TcpStream::connect(addr)?;
        s.set_read_timeout(Some(TIMEOUT))?;
        let mut got = vec![0u8; 100 * 16];
        s.read_exact(&mut got)?;
        Ok(got)
    });
    let (s, _) = listener.accept().unwrap();
    let s = TcpStream::from_std(s);
    let handle = rt.handle();
    let ops = join(rt.handle().spawn(move || {
        s.write_all(&[0; 16])?;
        s.flush()?;
        let before = handle.stats().total().ops_submitted;
        for i in 1..100u8 {
            s.write_all(&[i; 16])?;
        }
        s.flush()?;
        let after = handle.stats().total().ops_submitted;
        Ok::<_, std::io::Error>((before, after))
    }));
    let (before, after) = ops.unwrap();
    let got = client.join().unwrap().unwrap();
    assert!(got.chunks(16).enumerate().all(|(i, c)| c == [i as u8; 16]));
    assert_eq!(after, before, "{}", rt.stats());
    // Counted as direct sends once the worker goes idle and publishes them.
    let deadline = std::time::Instant::now() + TIMEOUT;
    while rt.stats().total().sends_direct < 99 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stats = rt.stats();
    assert!((99..=100).contains(&stats.total().sends_direct), "{stats}");
}

/// How the server lets go of a stream registered in its worker's table of fixed files.
#[derive(Debug, Clone, Copy)]
enum LetGo {
    DropOnFiber,
    Close,
    IntoStd,
    DropOnPlainThread,
}

/// Whichever way a stream with a fixed-file slot goes, its connection ends: the peer reads
/// EOF (the table's reference to the socket is dropped too).
#[test]
fn a_stream_with_a_fixed_file_slot_closes_its_connection_however_it_goes() {
    require_io_uring!();
    let rt = fixed_files_runtime(1, true);
    for how in [
        LetGo::DropOnFiber,
        LetGo::Close,
        LetGo::IntoStd,
        LetGo::DropOnPlainThread,
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = rt.spawn(move || -> std::io::Result<Option<TcpStream>> {
            let (s, _) = listener.accept()?;
            let mut buf = [0u8; 16];
            let n = s.read(&mut buf)?;
            s.write_all(&buf[..n])?;
            s.flush()?;
            match how {
                LetGo::DropOnFiber => drop(s),
                LetGo::Close => s.close()?,
                LetGo::IntoStd => drop(std::net::TcpStream::from(s)),
                LetGo::DropOnPlainThread => return Ok(Some(s)),
            }
            Ok(None)
        });
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.set_read_timeout(Some(TIMEOUT)).unwrap();
        client.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        // Dropped here, on the test's thread, for `DropOnPlainThread`.
        drop(join(server).unwrap());
        let mut rest = Vec::new();
        client
            .read_to_end(&mut rest)
            .unwrap_or_else(|e| panic!("{how:?}: no EOF: {e}"));
        assert!(rest.is_empty(), "{how:?}");
    }
    assert_eq!(rt.stats().total().fixed_files, 4);
}

/// Streams registered in a worker's table of fixed files outlive their runtime: each one
/// dropped afterwards closes its connection at once, whatever the others still hold (the
/// table goes with its worker, not with the last stream).
#[test]
fn streams_with_fixed_file_slots_close_one_by_one_after_their_runtime_stopped() {
    require_io_uring!();
    let rt = fixed_files_runtime(1, true);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(move || -> std::io::Result<Vec<TcpStream>> {
        let mut kept = Vec::new();
        for _ in 0..2 {
            let (s, _) = listener.accept()?;
            let mut buf = [0u8; 16];
            let n = s.read(&mut buf)?;
            s.write_all(&buf[..n])?;
            s.flush()?;
            kept.push(s);
        }
        Ok(kept)
    });
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(TIMEOUT)).unwrap();
            c.write_all(b"ping").unwrap();
            let mut got = [0u8; 4];
            c.read_exact(&mut got).unwrap();
            c
        })
        .collect();
    let mut kept = join(server).unwrap();
    assert_eq!(rt.stats().total().fixed_files, 2);
    drop(rt);
    let last = kept.pop();
    drop(kept);
    let mut rest = Vec::new();
    (&clients[0])
        .read_to_end(&mut rest)
        .expect("EOF while another stream of the runtime is alive");
    assert!(rest.is_empty());
    drop(last);
}
