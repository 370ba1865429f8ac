//! The request-reply connection of kv and http on a futures-io stream: read, answer
//! every request the read holds with the protocol's [`Exchange`] (`kv::Served`,
//! `http::Connection`), one `write_all` of the replies. The kv store is the one every
//! executor shares; its locks are held for a map operation and never across an
//! `.await`.

use std::io;

use futures_io::{AsyncRead, AsyncWrite};
use proto::echo::READ_BUF;

use super::{Counts, read, write_all};
use crate::exchange::{Exchange, Flow};

/// Serves `stream` until the peer closes it or a request ends it (`QUIT`, a protocol
/// error, `Connection: close`). While `write_all` waits for a peer that does not read,
/// this task reads nothing, and its output holds at most the limit and one reply.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    conn: &mut impl Exchange,
    count: &mut impl Counts,
) -> io::Result<()> {
    let mut buf = vec![0u8; READ_BUF];
    let mut out = Vec::new();
    loop {
        let n = read(stream, &mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        count.bytes_in(n);
        conn.feed(&buf[..n]);
        loop {
            let flow = conn.execute(&mut out);
            write_all(stream, &out).await?;
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

#[cfg(test)]
mod tests {
    use super::super::tests::{Duplex, Seen, ready};
    use super::*;

    #[test]
    fn answers_requests_split_across_reads_until_quit() {
        let mut stream = Duplex {
            input: b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n".to_vec(),
            chunk: 7,
            ..Duplex::default()
        };
        let store = crate::kv::Store::default();
        let mut conn = crate::kv::Served::new(&store, 1 << 20);
        let mut seen = Seen::default();
        ready(serve(&mut stream, &mut conn, &mut seen)).unwrap();
        assert_eq!(stream.output, b"+PONG\r\n+OK\r\n");
        assert_eq!(seen.bytes_out, stream.output.len());
    }
}
