//! `--proto kv` on fibers. By default every connection fiber runs
//! [`service::kv::serve_blocking`] (the loop srv-threads runs on OS threads) against
//! the one [`Store`] all workers share. With `--kv-owner`, the Go article's design: one
//! owner fiber holds the store and executes every connection's requests, which the
//! connection fibers send it over a channel, one read batch at a time, and get back
//! as one reply batch.

use std::io;
use std::sync::Arc;

use clap::Args;
use fiber::net::TcpStream;
use fiber::sync::{Receiver, Sender, channel};
use launch::{CommonArgs, Proto, Tally};
use service::kv::{Connection, Flow, Store, serve_blocking, serve_blocking_by};

/// Requests batches that may wait for the owner fiber before a sender parks.
const OWNER_QUEUE: usize = 1024;

/// Kv's own option.
#[derive(Debug, Clone, Args)]
pub(crate) struct KvArgs {
    /// Kv only: one owner fiber (on worker 0) holds the store and executes the requests
    /// of every connection, which send them over a channel, one read batch at a time
    /// (the Go article's design). Without it each connection fiber executes its own
    /// requests on the store all workers share (sharded locks).
    #[arg(long)]
    kv_owner: bool,
}

/// One read batch on its way to the owner: the connection's state (its unexecuted
/// bytes), the buffer for the replies, and where to send both back.
struct Job {
    conn: Connection,
    out: Vec<u8>,
    back: Sender<(Connection, Vec<u8>, Flow)>,
}

/// What every kv connection fiber shares.
#[derive(Debug)]
pub(crate) struct Kv {
    store: Arc<Store>,
    limit: usize,
    owner: Option<Sender<Job>>,
}

impl Kv {
    /// The kv service for `--proto kv` (starting the owner fiber with `--kv-owner`),
    /// or `None` for the other protocols.
    pub(crate) fn start(
        common: &CommonArgs,
        args: &KvArgs,
        handle: &fiber::Handle,
    ) -> Option<Arc<Kv>> {
        if common.proto != Proto::Kv {
            return None;
        }
        let store = Arc::new(Store::new());
        let limit = common.kv_max_pending();
        let owner = args.kv_owner.then(|| {
            let (jobs, inbox) = channel(OWNER_QUEUE);
            let owned = Arc::clone(&store);
            // Detached: it returns when every sender is gone, or is torn down at stop.
            drop(handle.spawn_on(0, move || own(&owned, &inbox, limit)));
            jobs
        });
        Some(Arc::new(Kv {
            store,
            limit,
            owner,
        }))
    }

    /// Serves one connection until the peer closes it or a request ends it.
    pub(crate) fn serve(&self, stream: &TcpStream, tally: &mut Tally) -> io::Result<()> {
        match &self.owner {
            None => serve_blocking(stream.reader(), stream, &self.store, self.limit, tally),
            Some(owner) => through_owner(stream, owner, tally),
        }
    }
}

/// The owner fiber: executes each batch it is sent, in arrival order. It is the only
/// fiber that touches the store, so the store's locks are never contended.
fn own(store: &Store, inbox: &Receiver<Job>, limit: usize) {
    while let Ok(mut job) = inbox.recv() {
        let flow = job.conn.execute(store, &mut job.out, limit);
        // The connection waits for exactly this one reply, so its channel (of one)
        // has room and the owner never parks on a slow connection.
        let _ = job.back.try_send((job.conn, job.out, flow));
    }
}

/// A connection of `--kv-owner`: the blocking kv loop, each read batch executed by the
/// owner, which gets the connection's state and reply buffer and sends both back. While
/// the write blocks nothing is read, and the owner never returns more than the limit and
/// one reply at a time.
fn through_owner(stream: &TcpStream, owner: &Sender<Job>, tally: &mut Tally) -> io::Result<()> {
    let gone = || io::Error::other("the kv owner fiber is gone");
    let (back, replies) = channel(1);
    serve_blocking_by(stream.reader(), stream, tally, |conn, out| {
        let job = Job {
            conn: std::mem::take(conn),
            out: std::mem::take(out),
            back: back.clone(),
        };
        owner.send(job).map_err(|_| gone())?;
        let (returned, replies_out, flow) = replies.recv().map_err(|_| gone())?;
        *conn = returned;
        *out = replies_out;
        Ok(flow)
    })
}
