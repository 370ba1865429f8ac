//! The echo connection: the read-then-`write_all` loop of every Tokio tutorial,
//! with the message cutting of `--compute-us` from `proto::echo`. One buffer per
//! connection, allocated once; nothing is allocated per message.

use std::io;

use launch::Counters;
use proto::echo::READ_BUF;
use service::echo::EchoConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Echoes `stream` until the peer closes its side, then sends what is still
/// held (a trailing partial message) and returns; dropping the stream closes it.
///
/// Pending output is bounded by the buffer (16 KiB plus a held partial message):
/// a peer that does not read leaves this task in `write_all`, and it reads no
/// more until the peer does.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    config: &EchoConfig,
    counters: &Counters,
) -> io::Result<()> {
    // Room for a held partial message plus a full read, as in
    // `service::echo::serve_blocking`.
    let mut buf = vec![0u8; READ_BUF + config.msg_size.get()];
    let mut cutter = config.cutter();
    // Bytes at the front of `buf` held back as an incomplete message.
    let mut held = 0;
    loop {
        let n = stream.read(&mut buf[held..]).await?;
        if n == 0 {
            break;
        }
        Counters::add(&counters.bytes_in, n as u64);
        let filled = held + n;
        let ready = match &mut cutter {
            None => filled,
            Some(c) => {
                // The handler's work runs here, in the task, holding its worker.
                config.spin_for(c.feed(n));
                filled - c.partial_len()
            }
        };
        stream.write_all(&buf[..ready]).await?;
        Counters::add(&counters.bytes_out, ready as u64);
        buf.copy_within(ready..filled, 0);
        held = filled - ready;
    }
    // EOF: a trailing partial message is echoed as it is, without a spin.
    stream.write_all(&buf[..held]).await?;
    Counters::add(&counters.bytes_out, held as u64);
    Ok(())
}
