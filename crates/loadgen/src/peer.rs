//! Echo peers to point loadgen at: a thread per connection, blocking std I/O, and an
//! optional deliberate fault per connection (a corrupt byte, a drop, a stall, silence), so
//! that loadgen's own tests, and anyone trying it by hand (`cargo run -p loadgen --example
//! peer`), can see that it notices each. Not a ringside server: it knows no protocol and
//! shares no code with them.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

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
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Acquire) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                thread::spawn(move || serve(stream, how));
            }
        });
        Ok(Peer { addr, stop })
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

fn serve(mut stream: TcpStream, how: Misbehave) {
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
