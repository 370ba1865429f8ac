//! Crash trials: `kill -9` of a chat server in the middle of a `SAY` flood, a restart on
//! the same `--data`, and a count of the acknowledged messages that did not come back
//! (docs/PROTOCOL.md: there must be none) and of the torn tails recovery cut.
//!
//! One trial: [`SENDERS`] connections send `SAY crash <sender>-<n>` into one room, one
//! at a time each, and note every `ACK`. Once at least [`MIN_ACKED`] are in, and after a
//! pause chosen by the trial's number (so trials kill at different points of a write),
//! every process of the server is killed. The server is started again on the same
//! directory; a `JOIN crash 0` replays the room, and every acknowledged `(seq, text)`
//! must be in it. The restarted server's stderr tells the torn tails it cut.
//!
//! `tests/crash.rs` runs a few trials per server; `cargo xtask crash --trials 100` runs
//! many and prints the table.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use crate::net::Deadline;
use crate::{ChatClient, EXIT_TIMEOUT, Signal, Target};

/// Connections flooding the room.
pub const SENDERS: usize = 4;
/// Acknowledged messages to wait for before the kill.
pub const MIN_ACKED: u64 = 20;
/// The room every trial floods.
const ROOM: &str = "crash";

/// What one trial, or a sum of trials, found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    pub trials: u64,
    /// `ACK`s the senders received before the kill.
    pub acked: u64,
    /// Acknowledged messages missing (or changed) after the restart: must be 0.
    pub lost: u64,
    /// Torn tails recovery cut at the restart.
    pub tails_cut: u64,
}

impl Outcome {
    /// Adds another outcome's counts to this one.
    pub fn add(&mut self, other: Outcome) {
        self.trials += other.trials;
        self.acked += other.acked;
        self.lost += other.lost;
        self.tails_cut += other.tails_cut;
    }
}

/// Runs trial number `trial` against `target`, with `extra` server arguments (such as
/// `--fsync always`).
pub fn trial(target: &Target, trial: u64, extra: &[&str]) -> io::Result<Outcome> {
    let dir = tempfile::tempdir()?;
    let data = dir
        .path()
        .to_str()
        .ok_or_else(|| io::Error::other("temp dir path is not UTF-8"))?;
    let mut args = vec!["--proto", "chat", "--data", data];
    args.extend_from_slice(extra);

    // The flood, then the kill.
    let mut server = target.start(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let senders: Vec<_> = (0..SENDERS)
        .map(|k| {
            let (stop, count, addr) = (Arc::clone(&stop), Arc::clone(&count), server.addr());
            thread::spawn(move || flood(addr, k, &stop, &count))
        })
        .collect();
    let deadline = Deadline::after(Duration::from_secs(30));
    while count.load(Ordering::Relaxed) < MIN_ACKED {
        if senders.iter().all(|s| s.is_finished()) {
            break;
        }
        deadline.check("waiting for the first acknowledged messages")?;
        thread::sleep(Duration::from_millis(1));
    }
    // A pause of 0 to 29 ms, different from trial to trial, to land the kill anywhere.
    thread::sleep(Duration::from_millis(trial.wrapping_mul(7919) % 30));
    server.kill9()?;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for s in senders {
        let mine = s
            .join()
            .map_err(|_| io::Error::other("a sender thread panicked"))??;
        acked.extend(mine);
    }
    drop(server);

    // The restart and the replay.
    let mut server = target.start(&args)?;
    let mut c = ChatClient::connect(server.addr())?;
    c.send(&format!("JOIN {ROOM} 0"))?;
    let mut stored = BTreeMap::new();
    loop {
        let line = c.recv()?;
        let mut words = line.splitn(5, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("MSG"), Some(ROOM), Some(seq)) => {
                let seq: u64 = seq.parse().map_err(io::Error::other)?;
                let _name = words.next();
                let text = words.next().unwrap_or_default().to_owned();
                if seq != stored.len() as u64 + 1 {
                    return Err(io::Error::other(format!(
                        "replay after the restart: seq {seq} after {}",
                        stored.len()
                    )));
                }
                stored.insert(seq, text);
            }
            (Some("JOINED"), Some(ROOM), Some(_)) => break,
            _ => return Err(io::Error::other(format!("replay: unexpected {line:?}"))),
        }
    }
    drop(c);
    server.signal(Signal::SIGTERM)?;
    let exit = server.wait_exit(EXIT_TIMEOUT)?;
    let lost = acked
        .iter()
        .filter(|(seq, text)| stored.get(seq) != Some(text))
        .count() as u64;
    let tails_cut = exit
        .stderr
        .lines()
        .filter(|l| l.contains("torn tail"))
        .count() as u64;
    Ok(Outcome {
        trials: 1,
        acked: acked.len() as u64,
        lost,
        tails_cut,
    })
}

/// One sender: `SAY`s until the server goes away (or `stop`), one in flight at a time.
/// Returns the `(seq, text)` of every message acknowledged.
fn flood(
    addr: std::net::SocketAddr,
    k: usize,
    stop: &AtomicBool,
    count: &AtomicU64,
) -> io::Result<Vec<(u64, String)>> {
    let mut acked = Vec::new();
    let Ok(mut c) = ChatClient::connect(addr) else {
        return Ok(acked);
    };
    let want = format!("ACK {ROOM} ");
    for n in 0u64.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let text = format!("s{k}-{n} {}", "x".repeat((n % 64) as usize));
        if c.send(&format!("SAY {ROOM} {text}")).is_err() {
            break;
        }
        // A reply lost to the kill is no ACK: the message may or may not be stored.
        let Ok(Some(line)) = c.recv_line() else {
            break;
        };
        let Some(seq) = line.strip_prefix(&want).and_then(|s| s.parse().ok()) else {
            return Err(io::Error::other(format!("SAY answered {line:?}")));
        };
        acked.push((seq, text));
        count.fetch_add(1, Ordering::Relaxed);
    }
    Ok(acked)
}
