//! What a runtime adds under docs/PROTOCOL.md, checked against every server: many connections
//! across the workers with the counters adding up, a held partial message under
//! `--compute-us`, chat fan-out across workers (the seam in place, with and without
//! `--fsync always`), the slow-subscriber cut that spares a reader keeping up, a port in
//! use named in the one error line, and pinned workers (`--cpus`); and the io_uring
//! servers' ring sizes (`--sq-entries`, `--cq-entries`), read back from fdinfo.
//!
//! These were srv-tokio's and srv-tokio-uring's own end-to-end checks; nothing in them is
//! particular to Tokio, so every server of the list runs them. The checks that read the
//! stop line's counters need `service`'s (`needs … & Counters`): srv-go prints its own.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::thread;

use anyhow::{Context, Result, anyhow, bail, ensure};
use conformance::{ChatClient, EXIT_TIMEOUT, Exit, Limit, Server, Signal, Target};

conformance::conformance_tests!(
    echo_many_connections_count_every_byte needs Counters,
    echo_compute_holds_a_partial_message_until_eof needs Compute,
    chat_fans_out_across_workers needs Chat & Counters,
    chat_cut_spares_a_reader_that_keeps_up needs Chat & Counters,
    port_in_use_is_named_in_one_line,
    pinned_workers_serve_and_a_missing_cpu_is_exit_2,
);

/// Stops `server` with `signal` and checks the clean exit; returns its stderr.
fn stop(mut server: Server, signal: Signal) -> Result<String> {
    server.signal(signal)?;
    let exit = server.wait_exit(EXIT_TIMEOUT)?;
    ensure!(
        exit.code == Some(0),
        "after {signal}: {}; stderr: {}",
        exit.describe_status(),
        exit.stderr
    );
    Ok(exit.stderr)
}

/// Eight connections of 200,000 bytes each, echoed byte for byte at once; the stop
/// line counts all eight connections and every byte.
fn echo_many_connections_count_every_byte(target: &Target) -> Result<()> {
    const CONNS: u8 = 8;
    const BYTES: u32 = 200_000;
    let server = target.start(&["--proto", "echo"])?;
    thread::scope(|s| -> Result<()> {
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                let server = &server;
                s.spawn(move || -> Result<()> {
                    let mut stream = server.connect()?;
                    let data: Vec<u8> = (0..BYTES).map(|j| (j as u8) ^ i).collect();
                    let mut writer = stream.try_clone()?;
                    // Written from a thread of its own: the echo comes back while the
                    // rest is still being sent, and must be read meanwhile.
                    let sent = data.clone();
                    let w = thread::spawn(move || -> std::io::Result<()> {
                        writer.write_all(&sent)?;
                        writer.shutdown(Shutdown::Write)
                    });
                    let mut got = Vec::new();
                    stream
                        .read_to_end(&mut got)
                        .with_context(|| format!("connection {i}: reading the echo"))?;
                    w.join()
                        .map_err(|_| anyhow!("connection {i}: the writer panicked"))??;
                    ensure!(got == data, "connection {i}: the echo differs");
                    Ok(())
                })
            })
            .collect();
        for c in clients {
            c.join().map_err(|_| anyhow!("a client panicked"))??;
        }
        Ok(())
    })?;
    let err = stop(server, Signal::SIGTERM)?;
    let bin = target.spec().bin;
    let total = u64::from(CONNS) * u64::from(BYTES);
    ensure!(
        err.contains(&format!("{bin}: stopped: accepted={CONNS} "))
            && err.contains(&format!(" bytes_out={total} ")),
        "the stop line does not count {CONNS} connections and {total} bytes: {err}"
    );
    Ok(())
}

/// With `--compute-us` and 4-byte messages, 6 bytes echo as one message at once and
/// the 2 left over at EOF.
fn echo_compute_holds_a_partial_message_until_eof(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "echo", "--compute-us", "1", "--msg-size", "4"])?;
    let mut c = server.connect()?;
    c.write_all(b"abcdef")?;
    let mut got = [0u8; 4];
    c.read_exact(&mut got)?;
    ensure!(&got == b"abcd", "the first message echoed as {got:?}");
    c.shutdown(Shutdown::Write)?;
    let mut rest = Vec::new();
    c.read_to_end(&mut rest)?;
    ensure!(
        rest == b"ef",
        "the partial message echoed as {rest:?} at EOF"
    );
    Ok(())
}

/// Messages reach subscribers on every worker (more subscribers than workers), replay
/// and live meet without a gap, errors keep the connection, a line too long ends it; the
/// stop line counts the messages. Once with `--fsync never` and once with `always`.
fn chat_fans_out_across_workers(target: &Target) -> Result<()> {
    for fsync in ["never", "always"] {
        let server = target.start(&["--proto", "chat", "--fsync", fsync])?;
        let mut a = ChatClient::connect(server.addr())?;
        a.expect("NICK ada", "OK")?;
        a.expect("JOIN r 0", "JOINED r 1")?;
        a.expect("SAY r one", "ACK r 1")?;
        // More connections than workers, so that some land on another one.
        let mut others = (0..4)
            .map(|_| ChatClient::connect(server.addr()))
            .collect::<std::io::Result<Vec<_>>>()?;
        for o in &mut others {
            o.send("JOIN r 0")?;
            o.expect_line("replay", "MSG r 1 ada one")?;
            o.expect_line("after the replay", "JOINED r 2")?;
        }
        a.expect("SAY r two", "ACK r 2")?;
        for o in &mut others {
            o.expect_line("live", "MSG r 2 ada two")?;
        }
        let o = &mut others[0];
        o.expect("PING x y", "PONG x y")?;
        o.expect("LEAVE r", "LEFT r")?;
        o.expect("JOIN", "ERR wrong number of arguments")?;
        a.expect(&format!("SAY r {}", "x".repeat(5000)), "ERR line too long")?;
        // The server closes with the rest of the long line unread, which the kernel
        // may turn into a reset: either is the close.
        match a.recv_line() {
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Ok(Some(line)) => bail!("a line too long must close the connection, got {line:?}"),
            Err(e) => return Err(e).context("after a line too long"),
        }
        let err = stop(server, Signal::SIGTERM).with_context(|| format!("--fsync {fsync}"))?;
        ensure!(
            err.contains(" messages=2 "),
            "--fsync {fsync}: the stop line does not count 2 messages: {err}"
        );
    }
    Ok(())
}

/// With `--max-pending 64K`, a subscriber that never reads is cut, while one that
/// reads every round as it comes is never cut, and the stop line counts one cut.
fn chat_cut_spares_a_reader_that_keeps_up(target: &Target) -> Result<()> {
    // 18 MB of messages: more than the loopback socket buffers of the silent
    // subscriber hold (at most 6 MB received plus 4 MB sent by default).
    const MESSAGES: usize = 6000;
    // Sent, acknowledged and read by the reading subscriber per round: 30 KB.
    // A batch the server has written may count as pending until its writer sees the
    // write return, so two rounds may count at once: 60 KB, under the 64 KiB limit,
    // so only the silent subscriber can pass it.
    const ROUND: usize = 10;
    let server = target.start(&["--proto", "chat", "--max-pending", "64K"])?;
    let mut silent = ChatClient::connect(server.addr())?;
    silent.expect("JOIN r 0", "JOINED r 1")?;
    let mut reading = ChatClient::connect(server.addr())?;
    reading.expect("JOIN r 0", "JOINED r 1")?;
    let mut sender = ChatClient::connect(server.addr())?;
    let say = format!("SAY r {}\n", "y".repeat(3000)).repeat(ROUND);
    for round in 0..MESSAGES / ROUND {
        sender.send_raw(say.as_bytes())?;
        for seq in round * ROUND + 1..=(round + 1) * ROUND {
            sender.expect_line("sender", &format!("ACK r {seq}"))?;
            let line = reading
                .recv_line()?
                .ok_or_else(|| anyhow!("the reading subscriber was cut at {seq}"))?;
            ensure!(
                line.starts_with(&format!("MSG r {seq} anon y")),
                "reading subscriber at {seq}: {line:.40}"
            );
        }
    }
    // What reached the silent one before the cut, then the end of the stream.
    let (lines, _partial) = silent.recv_until_close(MESSAGES * 3100)?;
    ensure!(
        lines.iter().all(|l| l.starts_with("MSG r ")),
        "the silent subscriber got a line that is not a MSG"
    );
    ensure!(
        lines.len() < MESSAGES,
        "the silent subscriber got all {MESSAGES} messages: it was never cut"
    );
    let err = stop(server, Signal::SIGTERM)?;
    ensure!(
        err.contains(" cut_subscribers=1 "),
        "the stop line does not count one cut subscriber: {err}"
    );
    Ok(())
}

/// A port in use stops the server before READY with exit status 2 and one line that
/// names the problem.
fn port_in_use_is_named_in_one_line(target: &Target) -> Result<()> {
    let held = TcpListener::bind("127.0.0.1:0")?;
    let addr = held.local_addr()?.to_string();
    let exit: Exit = target.run_to_exit(&["--proto", "echo", "--addr", &addr])?;
    ensure!(
        exit.code == Some(2),
        "{}; stderr: {}",
        exit.describe_status(),
        exit.stderr
    );
    let spec = target.spec();
    // launch's wording, or srv-go's own.
    let want = if spec.limits.contains(&Limit::NotLaunch) {
        format!("{}: cannot listen on", spec.bin)
    } else {
        format!("{}: error: cannot listen on", spec.bin)
    };
    ensure!(
        exit.stderr.starts_with(&want) && exit.stderr.lines().count() == 1,
        "expected one line `{want} …`, got {:?}",
        exit.stderr
    );
    Ok(())
}

/// Workers pinned to CPU 0 serve and stop on SIGINT; a CPU that is not there is exit
/// status 2 before READY.
fn pinned_workers_serve_and_a_missing_cpu_is_exit_2(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "echo", "--cpus", "0"])?;
    let mut c = server.connect()?;
    c.write_all(b"pinned\n")?;
    let mut back = [0u8; 7];
    c.read_exact(&mut back)?;
    ensure!(&back == b"pinned\n", "echoed {back:?}");
    drop(c);
    stop(server, Signal::SIGINT)?;
    let exit = target.run_to_exit(&["--proto", "echo", "--cpus", "100000"])?;
    ensure!(
        exit.code == Some(2),
        "--cpus 100000: {}; stderr: {}",
        exit.describe_status(),
        exit.stderr
    );
    Ok(())
}

/// Every io_uring server but srv-floor (which keeps its own ring) sizes its rings from
/// `--sq-entries` and `--cq-entries` through its runtime's own option: a ring of the
/// server shows those sizes in its `/proc/PID/fdinfo` (`SqMask`, `CqMask`). glommio has no
/// option for the completion queue: it gets twice its depth, and `--cq-entries` is refused.
#[test]
fn io_uring_servers_size_their_rings_from_the_command_line() {
    for spec in conformance::SERVERS
        .iter()
        .filter(|s| s.limits.contains(&Limit::IoUring) && s.bin != "srv-floor")
    {
        conformance::run_check(spec, "ring_sizes", &[], ring_sizes);
    }
}

fn ring_sizes(target: &Target) -> Result<()> {
    let glommio = target.spec().bin == "srv-glommio";
    let mut args = vec!["--proto", "echo", "--workers", "1", "--sq-entries", "512"];
    if glommio {
        let exit = target.run_to_exit(&[&args[..], &["--cq-entries", "4096"]].concat())?;
        ensure!(
            exit.code == Some(2),
            "glommio took --cq-entries: {}",
            exit.stderr
        );
    } else {
        args.extend(["--cq-entries", "4096"]);
    }
    let server = target.start(&args)?;
    let cq = if glommio { 1024 } else { 4096 };
    let rings = ring_masks(server.pid())?;
    ensure!(
        rings.contains(&(511, cq - 1)),
        "no ring of 512 submission and {cq} completion entries; the rings' masks: {rings:?}"
    );
    Ok(())
}

/// The (`SqMask`, `CqMask`) of every io_uring descriptor of process `pid`.
fn ring_masks(pid: u32) -> Result<Vec<(u32, u32)>> {
    let mut out = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let fd = fd?;
        let is_ring = std::fs::read_link(fd.path())
            .is_ok_and(|l| l.to_string_lossy() == "anon_inode:[io_uring]");
        if !is_ring {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))?;
        let mask = |name: &str| -> Result<u32> {
            let v = info
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .ok_or_else(|| anyhow!("no {name} in fdinfo"))?;
            Ok(u32::from_str_radix(v.trim().trim_start_matches("0x"), 16)?)
        };
        out.push((mask("SqMask:")?, mask("CqMask:")?));
    }
    Ok(out)
}
