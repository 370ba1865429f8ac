//! The echo service in blocking style, generic over `Read + Write`: the same
//! code serves a `std::net::TcpStream` on its own thread (srv-threads) and a
//! fiber's `TcpStream` (srv-fiber), so those two servers differ only in their
//! runtime. Async servers that read into one buffer keep their held bytes with
//! [`Held`]; srv-reactor uses [`EchoConfig`] and [`proto::echo`] directly.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::num::NonZeroUsize;
use std::time::Duration;

use proto::echo::{MessageCutter, READ_BUF};

use crate::compute::spin;
use crate::counters::{Count, Tally};

/// How a server echoes: straight through, or message by message with a spin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoConfig {
    /// The spin before each complete message, `None` for a plain echo.
    pub compute: Option<Duration>,
    /// The message size the stream is cut into when `compute` is set.
    pub msg_size: NonZeroUsize,
}

impl EchoConfig {
    /// A cutter when messages must be counted, `None` for a plain echo.
    pub fn cutter(&self) -> Option<MessageCutter> {
        self.compute.map(|_| MessageCutter::new(self.msg_size))
    }

    /// Spins for `messages` complete messages.
    pub fn spin_for(&self, messages: usize) {
        if let Some(per) = self.compute {
            for _ in 0..messages {
                spin(per);
            }
        }
    }
}

/// The held-bytes bookkeeping of an echo connection that reads into one buffer
/// and echoes from its front (srv-tokio, srv-tokio-uring): after each read the
/// complete messages (all of it, without `--compute-us`) are written, and the
/// start of a message that the read cut is held at the front for the next read
/// to complete. It owns no buffer, so a runtime that lends its buffer to the
/// kernel (tokio-uring) uses it as well as one that borrows it.
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use service::echo::{EchoConfig, Held};
///
/// let config = EchoConfig { compute: Some(Duration::ZERO), msg_size: NonZeroUsize::new(4).unwrap() };
/// let mut held = Held::new(&config);
/// let mut buf = held.buffer();
/// buf[held.read_at()..][..6].copy_from_slice(b"abcdef");
/// let ready = held.received(6);
/// assert_eq!(&buf[..ready], b"abcd");
/// held.written(&mut buf);
/// assert_eq!((held.read_at(), &buf[..2]), (2, &b"ef"[..]));
/// ```
#[derive(Debug)]
pub struct Held {
    config: EchoConfig,
    cutter: Option<MessageCutter>,
    /// Bytes at the front of the buffer held back as an incomplete message.
    held: usize,
    /// # Invariant
    /// After a read, `held <= ready <= filled` and `filled - ready` is the
    /// cutter's partial message (0 without a cutter).
    ready: usize,
    filled: usize,
}

impl Held {
    /// Nothing held yet.
    pub fn new(config: &EchoConfig) -> Self {
        Held {
            config: *config,
            cutter: config.cutter(),
            held: 0,
            ready: 0,
            filled: 0,
        }
    }

    /// The connection's buffer: room for a held partial message plus a full
    /// read, allocated once.
    pub fn buffer(&self) -> Vec<u8> {
        vec![0; READ_BUF + self.config.msg_size.get()]
    }

    /// Where the next read goes: behind the held bytes.
    #[inline]
    pub fn read_at(&self) -> usize {
        self.held
    }

    /// `n` bytes were read at [`Held::read_at`]: spins for the messages they
    /// complete (the handler's work, on the caller's thread) and returns how
    /// many bytes at the front of the buffer are ready to echo.
    #[inline]
    pub fn received(&mut self, n: usize) -> usize {
        self.filled = self.held + n;
        let partial = match &mut self.cutter {
            None => 0,
            Some(c) => {
                self.config.spin_for(c.feed(n));
                c.partial_len()
            }
        };
        self.ready = self.filled - partial;
        self.ready
    }

    /// The ready bytes were written: moves the held ones to the front.
    #[inline]
    pub fn written(&mut self, buf: &mut [u8]) {
        buf.copy_within(self.ready..self.filled, 0);
        self.held = self.filled - self.ready;
    }

    /// The bytes held at the front (a trailing partial message at EOF).
    #[inline]
    pub fn held(&self) -> usize {
        self.held
    }
}

/// A socket buffered as every blocking server reads it: [`READ_BUF`] bytes, the size all
/// the runtimes share.
pub fn buffered<R: Read>(socket: R) -> BufReader<R> {
    BufReader::with_capacity(READ_BUF, socket)
}

/// Echoes what `reader` receives to `writer` until the peer closes its side, then
/// echoes a trailing partial message, flushes `writer` and returns (the caller closes the
/// connection). It does not shut down the write side itself.
///
/// The reader is buffered: srv-threads wraps its socket with [`buffered`], and srv-fiber's reader lends the kernel's receive buffers in place,
/// so that an idle fiber connection holds no read buffer of its own. Pending output is
/// bounded by one read (16 KiB, plus a held partial message of at most --msg-size, under
/// the 64 KiB of docs/PROTOCOL.md): a peer that stops reading blocks this connection's write,
/// which stops its reads, and nothing else.
pub fn serve_blocking<R: BufRead, W: Write>(
    mut reader: R,
    mut writer: W,
    config: &EchoConfig,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut cutter = config.cutter();
    // The start of a message that a read boundary cut, held until the message is complete
    // (only with a cutter): fewer than --msg-size bytes, allocated only when needed.
    let mut held: Vec<u8> = Vec::new();
    loop {
        let data = match reader.fill_buf() {
            Ok([]) => break,
            Ok(data) => data,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let n = data.len();
        tally.add(Count::BytesIn, n as u64);
        let sent = match &mut cutter {
            None => {
                writer.write_all(data)?;
                n
            }
            Some(c) => {
                config.spin_for(c.feed(n));
                // Complete bytes from the start of `held`: none, or at least one whole
                // message, which is longer than `held`.
                let ready = held.len() + n - c.partial_len();
                let split = ready.saturating_sub(held.len());
                if ready > 0 && held.is_empty() {
                    writer.write_all(&data[..split])?;
                } else if ready > 0 {
                    held.extend_from_slice(&data[..split]);
                    writer.write_all(&held)?;
                    held.clear();
                }
                held.extend_from_slice(&data[split..]);
                ready
            }
        };
        tally.add(Count::BytesOut, sent as u64);
        reader.consume(n);
    }
    // EOF: a trailing partial message is echoed as it is.
    writer.write_all(&held)?;
    tally.add(Count::BytesOut, held.len() as u64);
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(compute: bool, msg_size: usize) -> EchoConfig {
        EchoConfig {
            compute: compute.then_some(Duration::ZERO),
            msg_size: NonZeroUsize::new(msg_size).unwrap(),
        }
    }

    /// Feeds `reads` through a [`Held`] the way a server does, returning what
    /// it writes: each read's ready bytes, then the held rest at EOF.
    fn echo(config: &EchoConfig, reads: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut held = Held::new(config);
        let mut buf = held.buffer();
        let mut writes = Vec::new();
        for read in reads {
            let at = held.read_at();
            buf[at..at + read.len()].copy_from_slice(read);
            let ready = held.received(read.len());
            writes.push(buf[..ready].to_vec());
            held.written(&mut buf);
        }
        writes.push(buf[..held.held()].to_vec());
        writes
    }

    #[test]
    fn without_compute_every_read_is_echoed_whole() {
        let writes = echo(&config(false, 4), &[b"abcdef", b"g"]);
        assert_eq!(writes, [&b"abcdef"[..], b"g", b""]);
    }

    #[test]
    fn with_compute_a_cut_message_is_held_until_complete() {
        let writes = echo(&config(true, 4), &[b"abcdef", b"g", b"hij", b"k"]);
        assert_eq!(writes, [&b"abcd"[..], b"", b"efgh", b"", b"ijk"]);
    }
}
