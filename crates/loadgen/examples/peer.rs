//! The test peers as a process, for trying loadgen by hand and for benchmarking it when no
//! ringside server is at hand: a thread-per-connection echo server, correct or broken.
//!
//! ```text
//! cargo run -p loadgen --example peer -- [ADDR] [ok|corrupt=OFFSET|drop=OFFSET|stall=OFFSET,MS|mute]
//! ```
//!
//! It prints `READY <addr>` like the ringside servers and serves until killed.

use std::io::Write;
use std::time::Duration;

use loadgen::peer::{Misbehave, Peer};

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".into());
    let how = match parse(args.next().as_deref().unwrap_or("ok")) {
        Some(how) => how,
        None => {
            eprintln!(
                "peer: the fault is one of ok, corrupt=OFFSET, drop=OFFSET, stall=OFFSET,MS, mute"
            );
            std::process::exit(2);
        }
    };
    let peer = match Peer::spawn_on(&addr, how) {
        Ok(peer) => peer,
        Err(e) => {
            eprintln!("peer: cannot listen on {addr}: {e}");
            std::process::exit(2);
        }
    };
    println!("READY {}", peer.addr);
    // Without a flushed READY line a script waiting for it would wait forever.
    if std::io::stdout().flush().is_err() {
        std::process::exit(1);
    }
    loop {
        std::thread::park();
    }
}

fn parse(s: &str) -> Option<Misbehave> {
    let num = |v: &str| v.parse::<u64>().ok();
    Some(match s.split_once('=') {
        None if s == "ok" => Misbehave::Nothing,
        None if s == "mute" => Misbehave::Mute,
        Some(("corrupt", v)) => Misbehave::CorruptAt(num(v)?),
        Some(("drop", v)) => Misbehave::DropAfter(num(v)?),
        Some(("stall", v)) => {
            let (at, ms) = v.split_once(',')?;
            Misbehave::StallAt(num(at)?, Duration::from_millis(num(ms)?))
        }
        _ => return None,
    })
}
