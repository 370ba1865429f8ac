//! The echo connection on compio: one owned buffer, allocated once, lent to the ring
//! for each `read` (compio's `AsyncRead`) and each `write_all` (`AsyncWriteExt`) and
//! given back when the operation completes, so nothing is allocated per message. The
//! message cutting of `--compute-us` is `proto::echo`'s, the same as every server.

use std::io;

use compio::buf::{BufResult, IntoInner, IoBuf};
use compio::io::{AsyncRead, AsyncWriteExt};
use compio::net::TcpStream;
use launch::{Count, Tally};
use service::echo::{EchoConfig, Held};

/// Echoes `stream` until the peer closes its side, then sends what is still
/// held (a trailing partial message) and returns.
///
/// Pending output is bounded by the buffer (16 KiB plus a held partial message):
/// a peer that does not read leaves this task waiting on its write, and no read
/// is submitted until the write completes.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    config: &EchoConfig,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut held = Held::new(config);
    let mut buf = held.buffer();
    loop {
        // The view reads behind the held bytes; compio sets the buffer's length to
        // their end, and the capacity stays the full size.
        let BufResult(read, view) = stream.read(buf.slice(held.read_at()..)).await;
        buf = view.into_inner();
        let n = read?;
        if n == 0 {
            break;
        }
        tally.add(Count::BytesIn, n as u64);
        let ready = held.received(n);
        if ready > 0 {
            let BufResult(written, view) = stream.write_all(buf.slice(..ready)).await;
            buf = view.into_inner();
            written?;
            tally.add(Count::BytesOut, ready as u64);
        }
        held.written(&mut buf);
    }
    // EOF: a trailing partial message is echoed as it is, without a spin.
    let rest = held.held();
    if rest > 0 {
        let BufResult(written, _) = stream.write_all(buf.slice(..rest)).await;
        written?;
        tally.add(Count::BytesOut, rest as u64);
    }
    Ok(())
}
