//! The echo service in blocking style, generic over `Read + Write`: the same
//! code serves a `std::net::TcpStream` on its own thread (srv-threads) and a
//! fiber's `TcpStream` (srv-fiber), so those two servers differ only in their
//! runtime. Event-driven servers use [`EchoConfig`] and [`proto::echo`] directly.

use std::io::{self, ErrorKind, Read, Write};
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

/// Echoes `stream` until the peer closes its side, then flushes what is
/// pending, shuts down the write side and returns.
///
/// Pending output is bounded by the read buffer (16 KiB, plus a held partial
/// message of at most --msg-size, under the 64 KiB of PROTOCOL.md): a peer that stops reading blocks this connection's write,
/// which stops its reads, and nothing else.
pub fn serve_blocking<S: Read + Write>(
    mut stream: S,
    config: &EchoConfig,
    counters: &Counters,
) -> io::Result<()> {
    // Room for a held partial message plus a full read.
    let mut buf = vec![0u8; READ_BUF + config.msg_size.get()];
    let mut cutter = config.cutter();
    // Bytes at the front of `buf` held back as an incomplete message.
    let mut held = 0;
    loop {
        let n = match stream.read(&mut buf[held..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        Counters::add(&counters.bytes_in, n as u64);
        let filled = held + n;
        let ready = match &mut cutter {
            None => filled,
            Some(c) => {
                config.spin_for(c.feed(n));
                filled - c.partial_len()
            }
        };
        stream.write_all(&buf[..ready])?;
        Counters::add(&counters.bytes_out, ready as u64);
        buf.copy_within(ready..filled, 0);
        held = filled - ready;
    }
    // EOF: a trailing partial message is echoed as it is.
    stream.write_all(&buf[..held])?;
    Counters::add(&counters.bytes_out, held as u64);
    stream.flush()
}
