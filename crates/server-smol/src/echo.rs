//! The echo connection on smol: a read into one buffer, then `write_all` of the
//! complete messages, through futures-io's `AsyncReadExt` and `AsyncWriteExt` (the
//! loop of smol's own echo example), with the message cutting of `--compute-us`
//! from `service::echo::Held`. One buffer per connection, allocated once.

use std::io;

use service::echo::{EchoConfig, Held};
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpStream;

use crate::count::Count;

/// Echoes `stream` until the peer closes its side, then sends what is still
/// held (a trailing partial message) and returns.
///
/// Pending output is bounded by the buffer (16 KiB plus a held partial message):
/// a peer that does not read leaves this task in `write_all`, and it reads no
/// more until the peer does.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    config: &EchoConfig,
    count: &Count,
) -> io::Result<()> {
    let mut held = Held::new(config);
    let mut buf = held.buffer();
    loop {
        let n = stream.read(&mut buf[held.read_at()..]).await?;
        if n == 0 {
            break;
        }
        count.bytes_in(n);
        // With `--compute-us`, the handler's work runs here, in the task,
        // holding its executor thread.
        let ready = held.received(n);
        stream.write_all(&buf[..ready]).await?;
        count.bytes_out(ready);
        held.written(&mut buf);
    }
    // EOF: a trailing partial message is echoed as it is, without a spin.
    stream.write_all(&buf[..held.held()]).await?;
    count.bytes_out(held.held());
    Ok(())
}
