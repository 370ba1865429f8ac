//! A small closed-loop echo load generator, for the measurements in this crate's
//! report until the workspace's `loadgen` exists: N connections, each with one
//! 16-byte message in flight, on one current-thread Tokio runtime (pin it with
//! `taskset`). After a warm-up it measures a window: echoes per second, latency
//! percentiles (every reply checked byte for byte), and, with `--server-pid`, the
//! server's user and system CPU time per echo from /proc/<pid>/stat.
//!
//! ```text
//! taskset -c 0 cargo run --release -p server-tokio --example echo_load -- \
//!     --addr 127.0.0.1:7000 --conns 100 --secs 10 --server-pid 1234
//! ```

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Closed-loop echo load: one message in flight per connection.
#[derive(Debug, Parser)]
struct Args {
    /// The echo server's address.
    #[arg(long)]
    addr: SocketAddr,
    /// Connections, each with one message in flight.
    #[arg(long, default_value_t = 1)]
    conns: usize,
    /// Bytes per message.
    #[arg(long, default_value_t = 16)]
    size: usize,
    /// Seconds of warm-up before the window.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Seconds measured.
    #[arg(long, default_value_t = 10)]
    secs: u64,
    /// The server's pid, to read its CPU time over the window.
    #[arg(long)]
    server_pid: Option<u32>,
    /// A label for the output line.
    #[arg(long, default_value = "server")]
    label: String,
}

/// /proc/<pid>/stat counts in USER_HZ ticks, 100 per second in the Linux ABI.
const USER_HZ: f64 = 100.0;

/// What the connections share (one thread, so `Cell`s).
struct Shared {
    recording: Cell<bool>,
    echoes: Cell<u64>,
    latency: RefCell<Histogram<u64>>,
    failure: RefCell<Option<String>>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let shared = Rc::new(Shared {
        recording: Cell::new(false),
        echoes: Cell::new(0),
        latency: RefCell::new(Histogram::new_with_bounds(1, 60_000_000_000, 3)?),
        failure: RefCell::new(None),
    });
    let mut streams = Vec::with_capacity(args.conns);
    for i in 0..args.conns {
        let stream = TcpStream::connect(args.addr)
            .await
            .with_context(|| format!("connection {i} to {}", args.addr))?;
        stream.set_nodelay(true)?;
        streams.push(stream);
    }
    for (i, stream) in streams.into_iter().enumerate() {
        let shared = Rc::clone(&shared);
        let size = args.size;
        tokio::task::spawn_local(async move {
            if let Err(e) = client(stream, i, size, &shared).await {
                shared
                    .failure
                    .borrow_mut()
                    .get_or_insert(format!("conn {i}: {e}"));
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    let before = args.server_pid.map(cpu_ticks).transpose()?;
    let self_before = cpu_ticks_self()?;
    let start = Instant::now();
    shared.recording.set(true);
    tokio::time::sleep(Duration::from_secs(args.secs)).await;
    shared.recording.set(false);
    let elapsed = start.elapsed().as_secs_f64();
    let after = args.server_pid.map(cpu_ticks).transpose()?;
    let self_after = cpu_ticks_self()?;
    if let Some(failure) = shared.failure.borrow().as_ref() {
        bail!("{failure}");
    }
    let echoes = shared.echoes.get();
    let h = shared.latency.borrow();
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let mut line = format!(
        "{:<22} conns={:<5} echoes/s={:>9.0} p50={:>8.1}us p99={:>8.1}us p99.9={:>8.1}us",
        args.label,
        args.conns,
        echoes as f64 / elapsed,
        us(0.5),
        us(0.99),
        us(0.999),
    );
    if let (Some((u0, s0)), Some((u1, s1))) = (before, after) {
        let per = |ticks: u64| ticks as f64 / USER_HZ * 1e9 / echoes.max(1) as f64;
        line += &format!(
            " server: user={:>6.0}ns/echo sys={:>6.0}ns/echo cpu={:>5.1}%",
            per(u1 - u0),
            per(s1 - s0),
            ((u1 + s1 - u0 - s0) as f64 / USER_HZ) / elapsed * 100.0
        );
    }
    let client_cpu = (self_after.0 + self_after.1 - self_before.0 - self_before.1) as f64 / USER_HZ;
    line += &format!(" client-cpu={:>5.1}%", client_cpu / elapsed * 100.0);
    println!("{line}");
    // The connections are still running; leaving main ends them.
    std::process::exit(0)
}

async fn client(
    mut stream: TcpStream,
    i: usize,
    size: usize,
    shared: &Shared,
) -> anyhow::Result<()> {
    let msg: Vec<u8> = (0..size).map(|j| (i + j) as u8).collect();
    let mut got = vec![0u8; size];
    loop {
        let sent = Instant::now();
        stream.write_all(&msg).await?;
        stream.read_exact(&mut got).await?;
        if got != msg {
            bail!("the echo differs from what was sent");
        }
        if shared.recording.get() {
            let ns = sent.elapsed().as_nanos() as u64;
            shared.latency.borrow_mut().record(ns.max(1))?;
            shared.echoes.set(shared.echoes.get() + 1);
        }
    }
}

/// (utime, stime) in ticks from /proc/<pid>/stat, summed over its threads.
fn cpu_ticks(pid: u32) -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    parse_stat(&stat)
}

fn cpu_ticks_self() -> anyhow::Result<(u64, u64)> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat")?)
}

fn parse_stat(stat: &str) -> anyhow::Result<(u64, u64)> {
    // The command name may hold spaces; the fields after its ')' are fixed.
    let rest = stat.rsplit_once(')').context("a /proc stat line")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, utime field 14, stime field 15 (1-based).
    let utime = fields.get(11).context("utime")?.parse()?;
    let stime = fields.get(12).context("stime")?.parse()?;
    Ok((utime, stime))
}
