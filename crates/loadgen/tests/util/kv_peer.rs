//! A tiny RESP key-value peer for the kv tests: a thread per connection, one map behind a
//! mutex, `GET` and `SET` only, and an optional deliberate fault.
//!
//! It parses just the arrays of bulk strings loadgen sends; it is a test double, not a
//! server (the ringside servers and redis-server are tested against in `tests/kv.rs`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// What the peer does wrong, if anything, counted over all its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KvMisbehave {
    /// A correct store.
    Nothing,
    /// From the Nth GET on, answers with the value of another key (stored under its own
    /// name, so the bytes are a real value, just not this key's).
    WrongKeyFrom(u64),
    /// From the Nth GET on, flips a bit of the last byte of the value.
    FlipFrom(u64),
    /// From the Nth SET on, answers `-ERR` and stores nothing.
    ErrorFrom(u64),
    /// Forgets every key: GETs answer the null bulk.
    Forget,
}

#[derive(Debug)]
struct Shared {
    map: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    gets: AtomicU64,
    sets: AtomicU64,
    how: KvMisbehave,
}

/// A running peer, on an ephemeral loopback port; its threads end when their client closes.
#[derive(Debug)]
pub(crate) struct KvPeer {
    pub(crate) addr: SocketAddr,
}

impl KvPeer {
    pub(crate) fn spawn(how: KvMisbehave) -> KvPeer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the kv peer");
        let addr = listener.local_addr().expect("the kv peer's address");
        let shared = Arc::new(Shared {
            map: Mutex::new(HashMap::new()),
            gets: AtomicU64::new(0),
            sets: AtomicU64::new(0),
            how,
        });
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&shared);
                thread::spawn(move || serve(stream, &shared));
            }
        });
        KvPeer { addr }
    }
}

/// Reads one array of bulk strings; `None` at the end of the stream or on bytes it does not
/// understand (the connection then ends).
fn read_command(r: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    let header = |r: &mut BufReader<TcpStream>, line: &mut String, kind: char| {
        line.clear();
        r.read_line(line).ok().filter(|&n| n > 0)?;
        line.trim_end().strip_prefix(kind)?.parse::<usize>().ok()
    };
    let n = header(r, &mut line, '*')?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let len = header(r, &mut line, '$')?;
        let mut arg = vec![0; len + 2];
        r.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        args.push(arg);
    }
    Some(args)
}

fn serve(stream: TcpStream, shared: &Shared) {
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut w = std::io::BufWriter::new(write_half);
    let mut r = BufReader::new(stream);
    while let Some(args) = read_command(&mut r) {
        let mut out = Vec::new();
        match args.first().map(Vec::as_slice) {
            Some(b"SET") if args.len() == 3 => {
                let n = shared.sets.fetch_add(1, Ordering::Relaxed);
                match shared.how {
                    KvMisbehave::ErrorFrom(k) if n >= k => {
                        out.extend_from_slice(b"-ERR out of luck\r\n");
                    }
                    _ => {
                        let mut map = shared.map.lock().expect("the map's lock");
                        map.insert(args[1].clone(), args[2].clone());
                        out.extend_from_slice(b"+OK\r\n");
                    }
                }
            }
            Some(b"GET") if args.len() == 2 => {
                let n = shared.gets.fetch_add(1, Ordering::Relaxed);
                let map = shared.map.lock().expect("the map's lock");
                let value = match shared.how {
                    KvMisbehave::Forget => None,
                    KvMisbehave::WrongKeyFrom(k) if n >= k => map
                        .iter()
                        .find(|(key, _)| **key != args[1])
                        .map(|(_, v)| v.clone()),
                    KvMisbehave::FlipFrom(k) if n >= k => map.get(&args[1]).map(|v| {
                        let mut v = v.clone();
                        if let Some(b) = v.last_mut() {
                            *b ^= 1;
                        }
                        v
                    }),
                    _ => map.get(&args[1]).cloned(),
                };
                match value {
                    Some(v) => {
                        out.extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
                        out.extend_from_slice(&v);
                        out.extend_from_slice(b"\r\n");
                    }
                    None => out.extend_from_slice(b"$-1\r\n"),
                }
            }
            _ => out.extend_from_slice(b"-ERR unknown command\r\n"),
        }
        if w.write_all(&out).is_err() {
            return;
        }
        // Replies to a pipelined batch go out together, once nothing more is buffered.
        if r.buffer().is_empty() && w.flush().is_err() {
            return;
        }
    }
}
