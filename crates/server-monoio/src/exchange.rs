//! The request-reply connection of kv and http on monoio: one owned read buffer lent
//! to the ring for each `read`, every request of a read answered with the protocol's
//! [`Exchange`] (`service::kv::Served`, `service::http::Connection`), and the replies
//! lent to the ring in one `write_all`. The output buffer goes to the ring and comes
//! back, so neither buffer is allocated per request.

use std::io;

use launch::{Count, Tally};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use proto::echo::READ_BUF;
use service::exchange::{Exchange, Flow};

/// Serves `stream` until the peer closes it or a request ends it. No read is
/// submitted while a write is in flight, so a peer that does not read stops this
/// connection's reads, with at most the limit and one reply held.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    conn: &mut impl Exchange,
    tally: &mut Tally,
) -> io::Result<()> {
    // monoio reads into a `Vec`'s capacity and sets its length to what it read.
    let mut buf = Vec::with_capacity(READ_BUF);
    let mut out = Vec::new();
    loop {
        buf.clear();
        let (read, back) = stream.read(buf).await;
        buf = back;
        let n = read?;
        if n == 0 {
            return Ok(());
        }
        tally.add(Count::BytesIn, n as u64);
        conn.feed(&buf[..n]);
        loop {
            let flow = conn.execute(&mut out);
            if !out.is_empty() {
                let len = out.len();
                let (written, back) = stream.write_all(out).await;
                out = back;
                written?;
                tally.add(Count::BytesOut, len as u64);
                out.clear();
            }
            match flow {
                Flow::NeedInput => break,
                Flow::OutputFull => continue,
                Flow::Close => return Ok(()),
            }
        }
    }
}
