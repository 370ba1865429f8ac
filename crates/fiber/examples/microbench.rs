//! Quick costs of the runtime's basic operations, for the report (not a test):
//! `cargo run --release -p fiber --example microbench`. For a profile of one of them,
//! `microbench yield N` (or `spawn`, `nop`, `echo`) runs only that one, `N` times.

use std::time::{Duration, Instant};

fn per_op(label: &str, n: u64, d: Duration) {
    println!(
        "{label:<40} {:>9.1} ns/op  ({n} ops in {d:.2?})",
        d.as_nanos() as f64 / n as f64
    );
}

/// Two fibers yielding to each other, `n` yields in all: each is one switch out and one in.
fn yields(rt: &fiber::Runtime, n: u64) -> Result<Duration, fiber::JoinError> {
    rt.block_on(move || {
        let other = fiber::spawn(move || {
            for _ in 0..n / 2 {
                fiber::yield_now();
            }
        });
        let start = Instant::now();
        for _ in 0..n / 2 {
            fiber::yield_now();
        }
        other.join().unwrap();
        start.elapsed()
    })
}

/// `n` fibers spawned and joined one at a time.
fn spawn_joins(rt: &fiber::Runtime, n: u64) -> Result<Duration, fiber::JoinError> {
    rt.block_on(move || {
        let start = Instant::now();
        for i in 0..n {
            assert_eq!(fiber::spawn(move || i).join().unwrap(), i);
        }
        start.elapsed()
    })
}

/// `n` io_uring NOPs, each submitted and waited for by one fiber: the runtime's whole round
/// trip for one operation (its SQE and op, the enter, the reap, the wake-up and the resume).
fn nops(rt: &fiber::Runtime, n: u64) -> Result<Duration, Box<dyn std::error::Error>> {
    let d = rt.block_on(move || {
        let start = Instant::now();
        for _ in 0..n {
            fiber::nop()?;
        }
        Ok::<_, std::io::Error>(start.elapsed())
    })??;
    Ok(d)
}

/// Sends back what `s` receives until it ends: the echo server of both echo benchmarks.
fn echo_back(mut s: impl std::io::Read + std::io::Write) -> std::io::Result<()> {
    let mut buf = [0u8; 64];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        s.write_all(&buf[..n])?;
    }
}

/// `n` 16-byte echoes over loopback TCP between a client fiber and a server fiber on the
/// same worker: each is a write-behind send and a multishot recv on both sides.
fn echoes(rt: &fiber::Runtime, n: u64) -> Result<Duration, Box<dyn std::error::Error>> {
    let d = rt.block_on(move || -> std::io::Result<Duration> {
        let l = fiber::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        let server = fiber::spawn(move || echo_back(&l.accept()?.0));
        let c = fiber::net::TcpStream::connect(addr)?;
        c.set_nodelay(true)?;
        let mut buf = [0u8; 16];
        let start = Instant::now();
        for _ in 0..n {
            c.write_all(&[7u8; 16])?;
            let mut got = 0;
            while got < 16 {
                got += c.read(&mut buf[got..])?;
            }
        }
        let d = start.elapsed();
        drop(c);
        server.join().unwrap()?;
        Ok(d)
    })??;
    Ok(d)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = fiber::Runtime::builder().workers(1).cpus([1]).build()?;
    let mut args = std::env::args().skip(1);
    if let Some(what) = args.next() {
        let n: u64 = args.next().map_or(Ok(10_000_000), |n| n.parse())?;
        match what.as_str() {
            "yield" => per_op("yield_now", n, yields(&rt, n)?),
            "spawn" => per_op("spawn + run + join", n, spawn_joins(&rt, n)?),
            "nop" => per_op("io_uring nop from a fiber", n, nops(&rt, n)?),
            "echo" => per_op("16-byte echo round trip, same worker", n, echoes(&rt, n)?),
            other => {
                return Err(format!("unknown benchmark {other}: yield, spawn, nop or echo").into());
            }
        }
        return Ok(());
    }

    const YIELDS: u64 = 2_000_000;
    per_op(
        "yield_now (fiber switch, round trip/2)",
        YIELDS,
        yields(&rt, YIELDS)?,
    );

    const SPAWNS: u64 = 200_000;
    per_op(
        "spawn + run + join (one at a time)",
        SPAWNS,
        spawn_joins(&rt, SPAWNS)?,
    );

    let d = rt.block_on(|| {
        let start = Instant::now();
        let hs: Vec<_> = (0..SPAWNS).map(|i| fiber::spawn(move || i)).collect();
        for h in hs {
            h.join().unwrap();
        }
        start.elapsed()
    })?;
    per_op("spawn, then join all (batch)", SPAWNS, d);

    const PINGS: u64 = 500_000;
    let d = rt.block_on(|| {
        let (tx1, rx1) = fiber::sync::channel::<u64>(1);
        let (tx2, rx2) = fiber::sync::channel::<u64>(1);
        let echo = fiber::spawn(move || {
            for v in rx1.iter() {
                tx2.send(v).unwrap();
            }
        });
        let start = Instant::now();
        for i in 0..PINGS {
            tx1.send(i).unwrap();
            rx2.recv().unwrap();
        }
        drop(tx1);
        echo.join().unwrap();
        start.elapsed()
    })?;
    per_op("channel ping-pong between fibers", PINGS, d);

    println!("{}", rt.stats());
    drop(rt);

    let rt = fiber::Runtime::builder().workers(1).cpus([1]).build()?;
    const ECHOES: u64 = 200_000;
    let d = echoes(&rt, ECHOES)?;
    per_op("16-byte echo round trip, same worker", ECHOES, d);
    println!("{}", rt.stats());

    // The same echo with two std threads and blocking calls, as a reference point.
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let server = std::thread::spawn(move || echo_back(l.accept()?.0));
    let d = {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(addr)?;
        c.set_nodelay(true)?;
        let mut buf = [0u8; 16];
        let start = Instant::now();
        for _ in 0..ECHOES {
            c.write_all(&[7u8; 16])?;
            c.read_exact(&mut buf)?;
        }
        start.elapsed()
    };
    server.join().map_err(|_| "server thread panicked")??;
    per_op("16-byte echo round trip, std threads", ECHOES, d);
    Ok(())
}
