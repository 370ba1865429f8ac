//! Echo peers to point loadgen at: a thread per connection, blocking std I/O, and an
//! optional deliberate fault per connection (a corrupt byte, a drop, a stall, silence), so
//! that loadgen's own tests, and anyone trying it by hand (`cargo run -p loadgen --example
//! peer`), can see that it notices each. Not a ringside server: it knows no protocol and
//! shares no code with them.
//!
//! It keeps a log of its connections ([`Peer::seen`]): the bytes each received, and, on one
//! counter of events shared by all (an order, not a time), when each last received bytes
//! and when its client closed it. The tests of connection churn and idle connections count
//! and order with it, timing-free.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What every connection of a peer does wrong, if anything. Offsets count the bytes the peer
/// has echoed on that connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehave {
    /// A correct echo server.
    Nothing,
    /// Flips the low bit of the byte at this offset, once.
    CorruptAt(u64),
    /// Closes the connection once this many bytes are echoed.
    DropAfter(u64),
    /// Once this many bytes are echoed, stops for a while, then goes on correctly.
    StallAt(u64, Duration),
    /// Reads everything, echoes nothing.
    Mute,
}

/// A running peer; it stops accepting when dropped (connections end when their client closes).
#[derive(Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Log>,
}

/// What the peer saw of one connection. Event numbers come from one counter shared by every
/// connection of the peer, so they order events across connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// Bytes received.
    pub bytes: u64,
    /// The event number of the last read that received bytes, if any did.
    pub last_bytes: Option<u64>,
    /// The event number of the client's close (or of the error that ended the connection),
    /// once it came.
    pub closed: Option<u64>,
}

/// The peer's log: every connection, in the order accepted.
#[derive(Debug, Default)]
struct Log {
    events: AtomicU64,
    conns: Mutex<Vec<Seen>>,
}

impl Log {
    fn accepted(&self) -> usize {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.push(Seen::default());
        conns.len() - 1
    }

    fn update(&self, conn: usize, f: impl FnOnce(&mut Seen, u64)) {
        let event = self.events.fetch_add(1, Ordering::AcqRel);
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conns[conn], event);
    }
}

impl Peer {
    /// Starts a peer on an ephemeral loopback port.
    pub fn spawn(how: Misbehave) -> io::Result<Peer> {
        Self::spawn_on("127.0.0.1:0", how)
    }

    /// Starts a peer on `addr`.
    pub fn spawn_on(addr: &str, how: Misbehave) -> io::Result<Peer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let log = Arc::new(Log::default());
        let logging = Arc::clone(&log);
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Acquire) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let log = Arc::clone(&logging);
                let conn = log.accepted();
                thread::spawn(move || {
                    serve(stream, how, &log, conn);
                    log.update(conn, |s, at| s.closed = Some(at));
                });
            }
        });
        Ok(Peer { addr, stop, log })
    }

    /// Every connection accepted so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.log
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// [`Peer::seen`] once `n` connections have been accepted and all of them closed, or at
    /// `limit` whatever they are: a client's close reaches the peer's threads a moment after
    /// the client has returned.
    pub fn seen_closed(&self, n: usize, limit: Duration) -> Vec<Seen> {
        let deadline = Instant::now() + limit;
        // Bounded by the deadline.
        loop {
            let seen = self.seen();
            let done = seen.len() >= n && seen.iter().all(|s| s.closed.is_some());
            if done || Instant::now() >= deadline {
                return seen;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop so that it sees the flag; if the connect fails the loop is
        // already gone.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn serve(mut stream: TcpStream, how: Misbehave, log: &Log, conn: usize) {
    let _ = stream.set_nodelay(true);
    // A client that vanishes without closing must not keep the thread forever.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = vec![0u8; 16 * 1024];
    let mut echoed = 0u64;
    let mut done_once = false;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        log.update(conn, |s, at| {
            s.bytes += n as u64;
            s.last_bytes = Some(at);
        });
        let chunk = &mut buf[..n];
        let (start, end) = (echoed, echoed + n as u64);
        match how {
            Misbehave::Nothing => {}
            Misbehave::Mute => continue,
            Misbehave::CorruptAt(at) => {
                if !done_once && (start..end).contains(&at) {
                    chunk[(at - start) as usize] ^= 1;
                    done_once = true;
                }
            }
            Misbehave::DropAfter(at) => {
                if end >= at {
                    let keep = (at - start) as usize;
                    let _ = stream.write_all(&chunk[..keep]);
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            }
            Misbehave::StallAt(at, pause) => {
                if !done_once && end > at {
                    // Echo up to the offset, then go quiet.
                    let keep = (at.saturating_sub(start)) as usize;
                    if stream.write_all(&chunk[..keep]).is_err() {
                        return;
                    }
                    thread::sleep(pause);
                    done_once = true;
                    if stream.write_all(&chunk[keep..]).is_err() {
                        return;
                    }
                    echoed = end;
                    continue;
                }
            }
        }
        if stream.write_all(chunk).is_err() {
            return;
        }
        echoed = end;
    }
}

/// A loopback address with nothing listening on it.
pub fn closed_port() -> io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    drop(listener);
    Ok(addr)
}
