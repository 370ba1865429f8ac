//! The echo connection on compio: one owned buffer, allocated once, lent to the ring
//! for each `read` (compio's `AsyncRead`) and each `write_all` (`AsyncWriteExt`) and
//! given back when the operation completes, so nothing is allocated per message. The
//! message cutting of `--compute-us` is `proto::echo`'s, the same as every server.

use std::io;

use compio::buf::{BufResult, IntoInner, IoBuf};
use compio::io::{AsyncRead, AsyncReadManaged, AsyncWriteExt};
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

/// Plain echo (no `--compute-us`) with reads into the worker's buffer pool (`--tuned`):
/// each read takes a provided buffer when data arrives, and the buffer goes back to the
/// pool once written. When the pool has none left (`ResourceBusy`, the kernel's ENOBUFS:
/// every buffer waits on a write to a slow peer), the read is a plain one into a buffer
/// of the connection's own, made then and kept.
pub(crate) async fn serve_managed(stream: &mut TcpStream, tally: &mut Tally) -> io::Result<()> {
    let mut own: Option<Vec<u8>> = None;
    loop {
        let written = match stream.read_managed(0).await {
            Ok(None) => return Ok(()),
            Ok(Some(buf)) => {
                tally.add(Count::BytesIn, buf.buf_len() as u64);
                let BufResult(written, buf) = stream.write_all(buf).await;
                written.map(|()| buf.buf_len())
            }
            Err(e) if e.kind() == io::ErrorKind::ResourceBusy => {
                let buf = own
                    .take()
                    .unwrap_or_else(|| Vec::with_capacity(POOL_FALLBACK));
                let BufResult(read, mut buf) = stream.read(buf).await;
                let n = read?;
                if n == 0 {
                    return Ok(());
                }
                tally.add(Count::BytesIn, n as u64);
                let BufResult(written, back) = stream.write_all(buf).await;
                buf = back;
                buf.clear();
                own = Some(buf);
                written.map(|()| n)
            }
            Err(e) => return Err(e),
        }?;
        tally.add(Count::BytesOut, written as u64);
    }
}

/// The connection's own read buffer when the pool is empty.
const POOL_FALLBACK: usize = 16 * 1024;
