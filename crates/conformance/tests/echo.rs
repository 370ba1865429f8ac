//! Echo conformance (docs/PROTOCOL.md "Echo", docs/protocol-notes.md "Echo"): byte-exact
//! under any split, bounded buffering with backpressure, half-close, a thousand
//! concurrent connections, and `--compute-us` cutting the stream into messages.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use conformance::net::{self, Deadline, is_timeout, read_to_close, shutdown_write};
use conformance::rng::{self, Rng, pattern};
use conformance::{IO_TIMEOUT, Limit, SERVERS, Server, Target};

conformance::conformance_tests!(
    echo_random_splits,
    echo_backpressure needs ReadPause,
    echo_half_close,
    echo_1000_connections,
    echo_compute_us needs Compute,
);

const MIB: usize = 1 << 20;

/// The servers that cannot pause a client (`Limit::NoReadPause`: srv-go `--model gnet`)
/// are held to what they do instead of `echo_backpressure`: they cut a client that never
/// reads, their memory bounded meanwhile.
#[test]
fn servers_that_cannot_pause_cut_an_echo_client_that_never_reads() {
    for spec in SERVERS
        .iter()
        .filter(|s| s.limits.contains(&Limit::NoReadPause))
    {
        conformance::run_check(
            spec,
            "echo_never_reading_client_is_cut",
            &[],
            echo_never_reading_client_is_cut,
        );
    }
}

/// Two connections to `server`, each served one echo (in process mode, both children exist),
/// and the server's RSS then: the flood's, the other's, the baseline.
fn served_pair(server: &Server) -> Result<(TcpStream, TcpStream, u64)> {
    let mut flood = server.connect()?;
    let mut other = server.connect()?;
    for stream in [&mut flood, &mut other] {
        stream.write_all(b"!")?;
        let mut b = [0; 1];
        stream.read_exact(&mut b)?;
    }
    Ok((flood, other, server.rss()?))
}

/// A client that sends a bounded flood and never reads is cut (the flood's write fails)
/// before the flood ends, the server's RSS grows by less than a bound that a server taking
/// the whole flood would pass, another client is served throughout, and the cut one's
/// connection is closed.
fn echo_never_reading_client_is_cut(target: &Target) -> Result<()> {
    const RSS_BOUND: u64 = 32 << 20;
    // No write of a server that reads on takes this long; one that does means the server
    // paused the client, which the check reports.
    const STALL: Duration = Duration::from_secs(2);
    let (wmem, rmem) = net::tcp_buffer_max();
    let flood_cap = 64 * MIB + wmem + rmem;

    let server = target.start(&["--proto", "echo"])?;
    let (mut flood, mut other, baseline) = served_pair(&server)?;

    let writer = flood.try_clone()?;
    writer.set_write_timeout(Some(STALL))?;
    let end = net::flood_until_stalled(
        writer,
        flood_cap,
        Duration::from_secs(10),
        STALL,
        |sent, chunk| {
            chunk.resize(64 * 1024, 0);
            pattern(0xC07, sent as u64, chunk);
        },
    );
    net::expect_cut(end).context("a client that never reads")?;

    let grown = server.rss()?.saturating_sub(baseline);
    ensure!(
        grown < RSS_BOUND,
        "server RSS grew by {} MiB before it cut a client that never reads (bound {} MiB)",
        grown >> 20,
        RSS_BOUND >> 20
    );
    let mut msg = vec![0; 1024];
    let mut back = vec![0; 1024];
    pattern(7, 0, &mut msg);
    other.write_all(&msg)?;
    other
        .read_exact(&mut back)
        .context("the other client after the cut")?;
    ensure!(msg == back, "the other client's echo differs");
    read_to_close(&mut flood, flood_cap).context("the cut client's connection")?;
    Ok(())
}

/// Several connections at once, each writing a random stream in chunks of 1 B to
/// 1 MiB and reading it back in reads of 1 B to 1 MiB: every byte must come back, in
/// order, once.
fn echo_random_splits(target: &Target) -> Result<()> {
    let seed = rng::seed();
    eprintln!("echo_random_splits: seed {seed} (rerun with CONFORMANCE_SEED={seed})");
    let server = target.start(&["--proto", "echo"])?;
    let deadline = Deadline::after(Duration::from_secs(10));

    // With --compute-us 0, bytes are echoed as they come, even a lone one that is not a
    // whole --msg-size message.
    let mut one = server.connect()?;
    one.write_all(b"x")?;
    let mut back = [0; 1];
    one.read_exact(&mut back)
        .context("a single byte was not echoed at once")?;
    ensure!(&back == b"x", "a single byte came back as {back:?}");

    thread::scope(|s| {
        let runs: Vec<_> = (0..4u64)
            .map(|conn| {
                let seed = seed.wrapping_add(conn);
                let server = &server;
                s.spawn(move || random_split_run(server.connect()?, seed, &deadline))
            })
            .collect();
        for (conn, run) in runs.into_iter().enumerate() {
            run.join()
                .map_err(|_| anyhow::anyhow!("connection {conn} panicked"))?
                .with_context(|| format!("connection {conn}, seed {seed} + {conn}"))?;
        }
        Ok(())
    })
}

fn random_split_run(stream: TcpStream, seed: u64, deadline: &Deadline) -> Result<()> {
    let mut rng = Rng::new(seed);
    // The first write is a single byte and one write is a whole MiB; the rest are
    // log-uniform, until the stream holds at least 2 MiB.
    let mut sizes = vec![1, MIB];
    while sizes.iter().sum::<usize>() < 2 * MIB {
        sizes.push(rng.log_size(MIB));
    }
    let total: usize = sizes.iter().sum();
    let mut reader = stream.try_clone()?;
    let mut writer = stream;
    thread::scope(|s| {
        let written = s.spawn(move || -> Result<()> {
            let mut offset = 0;
            for size in sizes {
                let mut chunk = vec![0; size];
                pattern(seed, offset as u64, &mut chunk);
                writer
                    .write_all(&chunk)
                    .with_context(|| format!("write of {size} B at {offset}"))?;
                offset += size;
            }
            shutdown_write(&writer)?;
            Ok(())
        });
        let mut got = 0;
        let mut buf = vec![0; MIB];
        let mut want = vec![0; MIB];
        while got < total {
            deadline.check("echo_random_splits reading")?;
            let size = rng.log_size(MIB);
            let n = reader
                .read(&mut buf[..size])
                .with_context(|| format!("read after {got} of {total} bytes"))?;
            if n == 0 {
                bail!("EOF after {got} of {total} bytes");
            }
            pattern(seed, got as u64, &mut want[..n]);
            if let Some(i) = (0..n).find(|&i| buf[i] != want[i]) {
                bail!("byte {} of the stream is wrong", got + i);
            }
            got += n;
        }
        let extra = read_to_close(&mut reader, 0).context("waiting for EOF after the echo")?;
        ensure!(
            extra.is_empty(),
            "{} bytes more than were sent",
            extra.len()
        );
        written
            .join()
            .map_err(|_| anyhow::anyhow!("writer panicked"))?
    })
}

/// A client that writes without ever reading must make the server stop reading it
/// (docs/PROTOCOL.md: at most 64 KiB pending), must not hold up another client, and must not
/// make the server's memory grow with what it sends.
fn echo_backpressure(target: &Target) -> Result<()> {
    // A server that buffers without bound would take the whole flood, and its RSS grow by
    // about that much less what the kernel holds (at most the two buffers below), so a
    // flood of 64 MiB on top of those is always over the bound. A conforming one holds
    // 64 KiB of echo and 16 KiB of read buffer for the connection; the bound leaves ample
    // room for allocator slack, thread stacks and a forked process touching its pages.
    const RSS_BOUND: u64 = 32 << 20;
    // A write that has not gone through in this long means the server stopped reading.
    const STALL: Duration = Duration::from_millis(300);
    let (wmem, rmem) = net::tcp_buffer_max();
    let flood_cap = 64 * MIB + wmem + rmem;

    let server = target.start(&["--proto", "echo"])?;
    let (mut flood, mut other, baseline) = served_pair(&server)?;

    let seed = 0xB4C6;
    let writer = flood.try_clone()?;
    writer.set_write_timeout(Some(STALL))?;
    let flooded = thread::spawn(move || {
        net::flood_until_stalled(
            writer,
            flood_cap,
            Duration::from_secs(8),
            STALL,
            |sent, chunk| {
                chunk.resize(64 * 1024, 0);
                pattern(seed, sent as u64, chunk);
            },
        )
    });
    let (sent, stalled) = flooded
        .join()
        .map_err(|_| anyhow::anyhow!("flood writer panicked"))??;
    eprintln!("echo_backpressure: flood stalled after {} KiB", sent / 1024);
    ensure!(
        stalled,
        "the server kept reading a client that never reads: {} MiB accepted",
        sent / MIB
    );

    // The stalled client must not stall this one.
    let mut msg = vec![0; 1024];
    let mut back = vec![0; 1024];
    for i in 0..100u64 {
        pattern(i, 0, &mut msg);
        other.write_all(&msg)?;
        other
            .read_exact(&mut back)
            .with_context(|| format!("echo {i} of the other client"))?;
        ensure!(msg == back, "echo {i} of the other client differs");
    }

    let grown = server.rss()?.saturating_sub(baseline);
    ensure!(
        grown < RSS_BOUND,
        "server RSS grew by {} MiB while a client flooded it (bound {} MiB)",
        grown >> 20,
        RSS_BOUND >> 20
    );

    // Nothing of the flood was lost: it all comes back once the client reads.
    shutdown_write(&flood)?;
    let echoed = read_to_close(&mut flood, sent)?;
    ensure!(
        echoed.len() == sent,
        "flood: sent {sent} bytes, {} came back",
        echoed.len()
    );
    let mut want = vec![0; sent];
    pattern(seed, 0, &mut want);
    if let Some(i) = (0..sent).find(|&i| echoed[i] != want[i]) {
        bail!("flood: byte {i} came back wrong");
    }
    Ok(())
}

/// After the client shuts down its write side, it gets every byte back, then EOF.
fn echo_half_close(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "echo"])?;

    let mut small = server.connect()?;
    small.write_all(b"hello, half-close")?;
    shutdown_write(&small)?;
    let back = read_to_close(&mut small, 1024)?;
    ensure!(
        back == b"hello, half-close",
        "small: got {:?}",
        String::from_utf8_lossy(&back)
    );

    // More than the server may keep pending, so the tail is still unread when EOF is.
    let size = MIB + 3;
    let stream = server.connect()?;
    let mut writer = stream.try_clone()?;
    let mut reader = stream;
    let write = thread::spawn(move || -> io::Result<()> {
        let mut data = vec![0; size];
        pattern(5, 0, &mut data);
        writer.write_all(&data)?;
        shutdown_write(&writer)
    });
    let back = read_to_close(&mut reader, size)?;
    write
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    let mut want = vec![0; size];
    pattern(5, 0, &mut want);
    ensure!(
        back.len() == size,
        "large: sent {size} bytes, got {} before EOF",
        back.len()
    );
    ensure!(back == want, "large: the echo differs from what was sent");
    Ok(())
}

/// A thousand connections open at once, each echoing.
fn echo_1000_connections(target: &Target) -> Result<()> {
    const CONNS: usize = 1000;
    let server = target.start(&["--proto", "echo"])?;
    let deadline = Deadline::after(Duration::from_secs(20));
    let msg = |round: usize, i: usize| format!("round {round} connection {i:04}\n").into_bytes();
    let mut back = [0; 64];

    // One echo right after each connect: the server has accepted and served every
    // connection before the next one, so its accept queue never overflows.
    let mut conns = Vec::with_capacity(CONNS);
    for i in 0..CONNS {
        deadline.check(&format!("opening connection {i}"))?;
        let mut c = server
            .connect()
            .with_context(|| format!("connection {i}"))?;
        let m = msg(0, i);
        c.write_all(&m)?;
        c.read_exact(&mut back[..m.len()])
            .with_context(|| format!("first echo on connection {i}"))?;
        ensure!(
            back[..m.len()] == m[..],
            "connection {i}: first echo differs"
        );
        conns.push(c);
    }
    // Then all write before any reads: a thousand connections active at the same time.
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(&msg(1, i))
            .with_context(|| format!("second write on connection {i}"))?;
    }
    for (i, c) in conns.iter_mut().enumerate() {
        deadline.check(&format!("second echo on connection {i}"))?;
        let m = msg(1, i);
        c.read_exact(&mut back[..m.len()])
            .with_context(|| format!("second echo on connection {i}"))?;
        ensure!(
            back[..m.len()] == m[..],
            "connection {i}: second echo differs"
        );
    }
    Ok(())
}

/// `--compute-us N`: each complete message costs at least N µs before its echo; a
/// trailing partial message waits for its remaining bytes, or for EOF.
fn echo_compute_us(target: &Target) -> Result<()> {
    const COMPUTE: Duration = Duration::from_millis(2);
    const MSG: usize = 16;
    const MESSAGES: usize = 40;
    // How long a partial message is watched for an echo it must not get. A server that
    // echoes it anyway does so within microseconds; a slow machine can only make this
    // check miss a bug, never fail a correct server.
    const HOLD: Duration = Duration::from_millis(150);

    let compute_us = COMPUTE.as_micros().to_string();
    let server = target.start(&[
        "--proto",
        "echo",
        "--compute-us",
        &compute_us,
        "--msg-size",
        "16",
    ])?;
    let mut c = server.connect()?;
    let mut data = vec![0; MESSAGES * MSG + 5];
    pattern(3, 0, &mut data);

    let start = Instant::now();
    c.write_all(&data)?;
    let mut back = vec![0; MESSAGES * MSG];
    c.read_exact(&mut back)
        .context("echo of the complete messages")?;
    let took = start.elapsed();
    ensure!(
        back == data[..MESSAGES * MSG],
        "echo of the complete messages differs"
    );
    // A lower bound only: one connection's messages are spun one after the other.
    ensure!(
        took >= COMPUTE * MESSAGES as u32,
        "{MESSAGES} messages of {compute_us} µs compute came back in {took:?}"
    );

    c.set_read_timeout(Some(HOLD))?;
    let mut early = [0; 16];
    match c.read(&mut early) {
        Err(e) if is_timeout(&e) => {}
        Ok(n) => bail!("{n} bytes of an incomplete message were echoed before it was complete"),
        Err(e) => return Err(e).context("watching the partial message"),
    }
    c.set_read_timeout(Some(IO_TIMEOUT))?;

    // Completing the message releases it.
    let mut rest = vec![0; MSG - 5];
    pattern(4, 0, &mut rest);
    c.write_all(&rest)?;
    let mut whole = [0; MSG];
    c.read_exact(&mut whole)
        .context("echo of the completed message")?;
    ensure!(
        whole[..5] == data[MESSAGES * MSG..] && whole[5..] == rest[..],
        "completed message differs"
    );

    // A partial message at EOF is echoed, then the server closes.
    c.write_all(b"tail!!!")?;
    shutdown_write(&c)?;
    let tail = read_to_close(&mut c, 64)?;
    ensure!(
        tail == b"tail!!!",
        "partial message at EOF: got {:?}",
        String::from_utf8_lossy(&tail)
    );
    Ok(())
}
