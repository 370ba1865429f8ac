//! A small closed-loop echo client for srv-reactor's own measurements, until
//! the workspace's `loadgen` is there: N connections, each with one message
//! in flight, driven by one mio loop on one thread. It prints throughput,
//! latency percentiles, and the server's CPU time per echo (user and system,
//! from `/proc/<pid>/stat`) over the measured window.
//!
//! ```text
//! taskset -c 0 cargo run --release -p server-reactor --example echo_load -- \
//!     --addr 127.0.0.1:7000 --conns 100 --secs 5 --server-pid 1234
//! ```
#![forbid(unsafe_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

/// Closed-loop echo load: each connection sends a message, waits for all of
/// it to come back, and sends the next.
#[derive(Debug, Parser)]
struct Args {
    /// The server's address.
    #[arg(long)]
    addr: SocketAddr,
    /// Connections, each with one message in flight.
    #[arg(long, default_value_t = 1)]
    conns: usize,
    /// Message size in bytes.
    #[arg(long, default_value_t = 16)]
    msg_size: usize,
    /// Seconds of warm-up before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Seconds measured.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// The server's pid, to read its CPU time over the window.
    #[arg(long)]
    server_pid: Option<u32>,
    /// A label for the output line.
    #[arg(long, default_value = "")]
    label: String,
}

struct Conn {
    stream: TcpStream,
    sent_at: Instant,
    /// Bytes of the current message still to write, and still to read back.
    to_write: usize,
    to_read: usize,
}

/// utime and stime of a process, in clock ticks (USER_HZ, 100 per second).
fn cpu_ticks(pid: &str) -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name may hold spaces; fields are counted after its ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at 3.
    let (Some(u), Some(s)) = (f.get(11), f.get(12)) else {
        bail!("/proc/{pid}/stat has too few fields");
    };
    Ok((u.parse()?, s.parse()?))
}

const USER_HZ: f64 = 100.0;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut poll = Poll::new()?;
    let mut conns = Vec::with_capacity(args.conns);
    for i in 0..args.conns {
        let s = std::net::TcpStream::connect(args.addr)
            .with_context(|| format!("connection {i} to {}", args.addr))?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        let mut stream = TcpStream::from_std(s);
        poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        conns.push(Conn {
            stream,
            sent_at: Instant::now(),
            to_write: args.msg_size,
            to_read: args.msg_size,
        });
    }
    let msg = vec![b'x'; args.msg_size];
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = Events::with_capacity(1024);
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(args.warmup);
    let end = measure_from + Duration::from_secs_f64(args.secs);
    let mut latencies: Vec<u32> = Vec::with_capacity(1 << 22);
    let mut measuring = false;
    let (mut server0, mut self0) = ((0, 0), (0, 0));
    let pid = args.server_pid.map(|p| p.to_string());
    let mut ready: Vec<usize> = (0..args.conns).collect();
    loop {
        let now = Instant::now();
        if !measuring && now >= measure_from {
            measuring = true;
            latencies.clear();
            if let Some(pid) = &pid {
                server0 = cpu_ticks(pid)?;
            }
            self0 = cpu_ticks("self")?;
        }
        if now >= end {
            break;
        }
        for i in ready.drain(..) {
            let c = &mut conns[i];
            // Write what is left of the message, then read what came back.
            while c.to_write > 0 {
                let from = args.msg_size - c.to_write;
                match c.stream.write(&msg[from..]) {
                    Ok(n) => c.to_write -= n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e).context("write"),
                }
            }
            while c.to_read > 0 {
                match c.stream.read(&mut buf[..c.to_read]) {
                    Ok(0) => bail!("connection {i} closed by the server"),
                    Ok(n) => {
                        c.to_read -= n;
                        if c.to_read == 0 {
                            let now = Instant::now();
                            if measuring {
                                let ns = now.duration_since(c.sent_at).as_nanos();
                                latencies.push(ns.min(u128::from(u32::MAX)) as u32);
                            }
                            c.sent_at = now;
                            c.to_write = args.msg_size;
                            c.to_read = args.msg_size;
                            match c.stream.write(&msg) {
                                Ok(n) => c.to_write -= n,
                                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                                Err(e) => return Err(e).context("write"),
                            }
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e).context("read"),
                }
            }
        }
        poll.poll(&mut events, Some(end.saturating_duration_since(now)))?;
        ready.extend(events.iter().map(|e| e.token().0));
    }
    let window = args.secs;
    let n = latencies.len();
    if n == 0 {
        bail!("no echo completed in the window");
    }
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((n as f64 * p) as usize).min(n - 1)] as f64 / 1000.0;
    let self1 = cpu_ticks("self")?;
    let client_cpu = ((self1.0 - self0.0) + (self1.1 - self0.1)) as f64 / USER_HZ / window;
    let server = match &pid {
        Some(pid) => {
            let s1 = cpu_ticks(pid)?;
            let per = |t: u64| t as f64 / USER_HZ / n as f64 * 1e6;
            format!(
                " server_user_us/echo={:.2} server_sys_us/echo={:.2} server_cpu={:.0}%",
                per(s1.0 - server0.0),
                per(s1.1 - server0.1),
                ((s1.0 - server0.0) + (s1.1 - server0.1)) as f64 / USER_HZ / window * 100.0
            )
        }
        None => String::new(),
    };
    println!(
        "{} conns={} echoes/s={:.0} p50_us={:.1} p99_us={:.1} p999_us={:.1}{} client_cpu={:.0}%{}",
        args.label,
        args.conns,
        n as f64 / window,
        pct(0.50),
        pct(0.99),
        pct(0.999),
        server,
        client_cpu * 100.0,
        if client_cpu > 0.95 {
            " (client-bound)"
        } else {
            ""
        },
    );
    Ok(())
}
