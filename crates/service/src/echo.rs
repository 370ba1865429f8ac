//! The echo service in blocking style, generic over `Read + Write`: the same
//! code serves a `std::net::TcpStream` on its own thread (srv-threads) and a
//! fiber's `TcpStream` (srv-fiber), so those two servers differ only in their
//! runtime. Event-driven servers use [`EchoConfig`] and [`proto::echo`] directly.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::num::NonZeroUsize;
use std::time::Duration;

use proto::echo::{MessageCutter, READ_BUF};

use crate::compute::spin;
use crate::counters::Counters;

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
    counters: &Counters,
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
        Counters::add(&counters.bytes_in, n as u64);
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
        Counters::add(&counters.bytes_out, sent as u64);
        reader.consume(n);
    }
    // EOF: a trailing partial message is echoed as it is.
    writer.write_all(&held)?;
    Counters::add(&counters.bytes_out, held.len() as u64);
    writer.flush()
}
