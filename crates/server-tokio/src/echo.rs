//! The echo connection: the read-then-`write_all` loop of every Tokio tutorial,
//! with the message cutting of `--compute-us` from `proto::echo`. One buffer per
//! connection, allocated once; nothing is allocated per message.

use std::io;

use launch::{Count, Tally};
use service::echo::{EchoConfig, Held};
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
    tally: &mut Tally,
) -> io::Result<()> {
    let mut held = Held::new(config);
    let mut buf = held.buffer();
    loop {
        let n = stream.read(&mut buf[held.read_at()..]).await?;
        if n == 0 {
            break;
        }
        tally.add(Count::BytesIn, n as u64);
        // With `--compute-us`, the handler's work runs here, in the task,
        // holding its worker.
        let ready = held.received(n);
        stream.write_all(&buf[..ready]).await?;
        tally.add(Count::BytesOut, ready as u64);
        held.written(&mut buf);
    }
    // EOF: a trailing partial message is echoed as it is, without a spin.
    stream.write_all(&buf[..held.held()]).await?;
    tally.add(Count::BytesOut, held.held() as u64);
    Ok(())
}
