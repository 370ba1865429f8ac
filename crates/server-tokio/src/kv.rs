//! The kv connection: read, execute every request the read holds with
//! [`service::kv::Connection`], one `write_all` of the replies, as a Tokio user would
//! write a pipelining Redis server. The store is the one [`Store`] every worker
//! shares; its locks are held for a map operation and never across an `.await`.

use std::io;

use launch::Counters;
use proto::echo::READ_BUF;
use service::kv::{Connection, Flow, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What every kv connection shares.
#[derive(Debug)]
pub(crate) struct Kv {
    pub(crate) store: Store,
    /// Pending output at which a connection stops being read (`--max-pending`, at
    /// most 64 KiB).
    pub(crate) limit: usize,
}

/// Serves `stream` until the peer closes it or a request ends it (`QUIT`, a
/// protocol error). While `write_all` waits for a peer that does not read, this task
/// reads nothing, and its output holds at most the limit and one reply.
pub(crate) async fn serve(stream: &mut TcpStream, kv: &Kv, counters: &Counters) -> io::Result<()> {
    let mut buf = vec![0u8; READ_BUF];
    let mut conn = Connection::new();
    let mut out = Vec::new();
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        Counters::add(&counters.bytes_in, n as u64);
        conn.feed(&buf[..n]);
        loop {
            let flow = conn.execute(&kv.store, &mut out, kv.limit);
            stream.write_all(&out).await?;
            Counters::add(&counters.bytes_out, out.len() as u64);
            out.clear();
            match flow {
                Flow::NeedInput => break,
                Flow::OutputFull => continue,
                Flow::Close => return Ok(()),
            }
        }
    }
}
