//! The request-reply connection of kv and http: read, answer every request the read
//! holds with the protocol's [`Exchange`] (`service::kv::Served`,
//! `service::http::Connection`), one `write_all` of the replies, as a Tokio user would
//! write a pipelining server. The kv store is the one every worker shares; its locks are
//! held for a map operation and never across an `.await`.

use std::io;

use launch::{Count, Tally};
use proto::echo::READ_BUF;
use service::exchange::{Exchange, Flow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Serves `stream` until the peer closes it or a request ends it (`QUIT`, a
/// protocol error, `Connection: close`). While `write_all` waits for a peer that does not
/// read, this task reads nothing, and its output holds at most the limit and one reply.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    conn: &mut impl Exchange,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut buf = vec![0u8; READ_BUF];
    let mut out = Vec::new();
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        tally.add(Count::BytesIn, n as u64);
        conn.feed(&buf[..n]);
        loop {
            let flow = conn.execute(&mut out);
            stream.write_all(&out).await?;
            tally.add(Count::BytesOut, out.len() as u64);
            out.clear();
            match flow {
                Flow::NeedInput => break,
                Flow::OutputFull => continue,
                Flow::Close => return Ok(()),
            }
        }
    }
}
