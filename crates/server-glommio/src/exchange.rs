//! The request-reply connection of kv and http on glommio: read, answer every request the
//! read holds with the protocol's [`Exchange`] (`service::kv::Served`,
//! `service::http::Connection`), one `write_all` of the replies. The kv store is the one
//! every executor shares; its locks are held for a map operation and never across
//! an `.await`.

use std::io;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use proto::echo::READ_BUF;
use service::exchange::{Exchange, Flow};

use crate::count::Count;

/// Serves `stream` until the peer closes it or a request ends it (`QUIT`, a protocol
/// error, `Connection: close`). While `write_all` waits for a peer that does not read,
/// this task reads nothing, and its output holds at most the limit and one reply.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    conn: &mut impl Exchange,
    count: &Count,
) -> io::Result<()> {
    let mut buf = vec![0u8; READ_BUF];
    let mut out = Vec::new();
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        count.bytes_in(n);
        conn.feed(&buf[..n]);
        loop {
            let flow = conn.execute(&mut out);
            stream.write_all(&out).await?;
            count.bytes_out(out.len());
            out.clear();
            match flow {
                Flow::NeedInput => break,
                Flow::OutputFull => continue,
                Flow::Close => return Ok(()),
            }
        }
    }
}
