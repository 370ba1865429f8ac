//! Shared helpers of the loadgen tests: chat, kv and http peers, correct and deliberately broken
//! (the echo peers are `loadgen::peer`, which the `peer` example runs too), and a bounded
//! way to run a load.
//!
//! Each test binary uses a different subset of these.
#![allow(dead_code)]

pub(crate) mod chat_peer;
pub(crate) mod http_peer;
pub(crate) mod kv_peer;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use loadgen::{Config, Error, Summary};

/// Runs `cfg` on a thread of its own and waits at most `limit` for it: a run that hangs fails
/// the test instead of hanging it.
pub(crate) fn run_bounded(cfg: &Config, limit: Duration) -> Result<Summary, Error> {
    let (tx, rx) = mpsc::channel();
    let cfg = cfg.clone();
    thread::spawn(move || {
        let _ = tx.send(loadgen::run(&cfg));
    });
    match rx.recv_timeout(limit) {
        Ok(result) => result,
        Err(_) => panic!("loadgen::run did not end within {limit:?}"),
    }
}

/// A config for the tests: quiet, short timeouts, never pinned.
pub(crate) fn echo_config(addr: std::net::SocketAddr, conns: usize) -> Config {
    let mut cfg = Config::echo(addr.to_string(), conns);
    cfg.connect_timeout = Duration::from_secs(5);
    cfg.reply_timeout = Duration::from_secs(5);
    cfg.grace = Duration::from_secs(2);
    cfg
}

/// A chat config for the tests, like [`echo_config`].
pub(crate) fn chat_config(
    addr: std::net::SocketAddr,
    conns: usize,
    chat: loadgen::ChatConfig,
) -> Config {
    let mut cfg = Config::chat(addr.to_string(), conns, chat);
    cfg.connect_timeout = Duration::from_secs(5);
    cfg.reply_timeout = Duration::from_secs(5);
    cfg.grace = Duration::from_secs(2);
    cfg
}

/// A kv config for the tests, like [`echo_config`].
pub(crate) fn kv_config(addr: std::net::SocketAddr, conns: usize, kv: loadgen::KvConfig) -> Config {
    let mut cfg = Config::kv(addr.to_string(), conns, kv);
    cfg.connect_timeout = Duration::from_secs(5);
    cfg.reply_timeout = Duration::from_secs(5);
    cfg.grace = Duration::from_secs(2);
    cfg
}
