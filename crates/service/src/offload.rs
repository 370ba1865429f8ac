//! A chat connection's calls on the room hub for async runtimes (srv-tokio,
//! srv-tokio-uring): made inline in the task, or handed to the runtime's
//! blocking pool when the call may wait for the disk (`--fsync always`, where
//! the crate docs of srv-tokio say why), and the wait for a `SAY`'s group-commit
//! sync without holding a thread.
//!
//! The runtime supplies only how it runs a closure that may block
//! ([`BlockingPool`], a generic parameter, so an inline call costs no dynamic
//! dispatch and no allocation); the rest, the state that travels to the pool and
//! back ([`Session`], its replies, the line), is here once.
//!
//! ```
//! use std::future::Future;
//! use std::sync::Arc;
//! use service::hub::{Hub, Line, Subscriber};
//! use service::log::Fsync;
//! use service::offload::{BlockingPool, HubCalls, Job, Op, Rooms};
//! use service::session::Flow;
//!
//! #[derive(Clone)]
//! struct Nobody;
//! impl Subscriber for Nobody {
//!     fn offer(&self, _: &Line) -> bool { true }
//!     fn push_seam(&self, _: Vec<u8>) {}
//! }
//!
//! /// Runs "blocking" calls right away: enough for a doc test.
//! struct Inline;
//! impl BlockingPool for Inline {
//!     fn run<R: Send + 'static>(&self, job: impl Job<R>) -> impl Future<Output = Option<R>> {
//!         std::future::ready(Some(job()))
//!     }
//! }
//!
//! let rooms = Arc::new(Rooms { hub: Hub::open(None, Fsync::Never)?, max_pending: 1 << 20, offload: true });
//! let mut calls = HubCalls::new(&rooms, &Nobody, Inline);
//! let mut out = Vec::new();
//! let call = calls.call(Op::Line(Ok(b"PING 7")), &mut out);
//! // The future is ready at once: poll it without a runtime.
//! let flow = std::pin::pin!(call).poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
//! assert!(matches!(flow, std::task::Poll::Ready(Ok(Flow::Continue))));
//! assert_eq!(out, b"PONG 7\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use proto::chat::ChatError;

use crate::hub::{Hub, Subscriber};
use crate::session::{Flow, Session};

/// How a runtime runs a closure that may block, off its event loop: Tokio's
/// `spawn_blocking`, for instance.
pub trait BlockingPool {
    /// Runs `job` where blocking stalls no other connection; `None` if it
    /// panicked.
    fn run<R: Send + 'static>(&self, job: impl Job<R>) -> impl Future<Output = Option<R>>;
}

/// A closure a [`BlockingPool`] can run on another thread.
pub trait Job<R>: FnOnce() -> R + Send + 'static {}

impl<R, F: FnOnce() -> R + Send + 'static> Job<R> for F {}

/// The rooms every chat connection of a server shares.
#[derive(Debug)]
pub struct Rooms<S: Subscriber> {
    /// The room hub.
    pub hub: Hub<S>,
    /// `--max-pending`: the live output a subscriber may have queued.
    pub max_pending: usize,
    /// Run hub calls on the blocking pool instead of inline in the task: set
    /// with `--fsync always`, where an append waits for the disk.
    pub offload: bool,
}

/// A call on the hub through the connection's session.
#[derive(Debug)]
pub enum Op<'a> {
    /// A line the client sent (or why it could not be read).
    Line(Result<&'a [u8], ChatError>),
    /// The next batch of a `JOIN`'s replay.
    ReplayMore,
    /// The connection ends: leave every room.
    Close,
}

/// [`Op`] with the line held in [`Calls::line`], to move to another thread.
#[derive(Debug)]
enum OwnedOp {
    Line(Result<(), ChatError>),
    ReplayMore,
    Close,
}

/// What a hub call touches besides the hub: kept together so that, offloaded,
/// it can move to the blocking pool and back.
#[derive(Debug)]
struct Calls {
    session: Session,
    /// The session's replies, swapped out to the caller after every call.
    out: Vec<u8>,
    /// The line being handled, when it has to travel.
    line: Vec<u8>,
}

/// One connection's hub calls, inline or on `P`, as [`Rooms::offload`] says.
#[derive(Debug)]
pub struct HubCalls<S: Subscriber, P> {
    rooms: Arc<Rooms<S>>,
    outbox: S,
    pool: P,
    /// `None` only if a call on the blocking pool panicked.
    calls: Option<Calls>,
}

impl<S: Subscriber, P: BlockingPool> HubCalls<S, P> {
    /// A new session on `rooms`, whose live lines go to `outbox`.
    pub fn new(rooms: &Arc<Rooms<S>>, outbox: &S, pool: P) -> Self {
        HubCalls {
            rooms: Arc::clone(rooms),
            outbox: outbox.clone(),
            pool,
            calls: Some(Calls {
                session: Session::new(&rooms.hub),
                out: Vec::new(),
                line: Vec::new(),
            }),
        }
    }

    /// Runs `op`; the replies it produced end up in `out`, which must be empty
    /// (the two buffers are swapped, so neither is reallocated). A `SAY` under
    /// `--fsync always` returns once its `ACK` (produced after the group
    /// commit's sync) is in `out`, so [`Flow::Syncing`] never comes back.
    pub async fn call(&mut self, op: Op<'_>, out: &mut Vec<u8>) -> io::Result<Flow> {
        debug_assert!(out.is_empty());
        let flow = self.call_once(op, out).await?;
        if flow != Flow::Syncing {
            return Ok(flow);
        }
        let calls = self.calls.as_mut().ok_or_else(lost)?;
        await_sync(&mut calls.session, out).await;
        Ok(Flow::Continue)
    }

    async fn call_once(&mut self, op: Op<'_>, out: &mut Vec<u8>) -> io::Result<Flow> {
        if !self.rooms.offload {
            let calls = self.calls.as_mut().ok_or_else(lost)?;
            let flow = calls.run(op, &self.rooms.hub, &self.outbox);
            std::mem::swap(out, &mut calls.out);
            return Ok(flow);
        }
        let mut calls = self.calls.take().ok_or_else(lost)?;
        let owned = match op {
            Op::Line(line) => OwnedOp::Line(line.map(|line| {
                calls.line.clear();
                calls.line.extend_from_slice(line);
            })),
            Op::ReplayMore => OwnedOp::ReplayMore,
            Op::Close => OwnedOp::Close,
        };
        let (rooms, outbox) = (Arc::clone(&self.rooms), self.outbox.clone());
        let (calls, flow) = self
            .pool
            .run(move || {
                let flow = calls.run_owned(owned, &rooms.hub, &outbox);
                (calls, flow)
            })
            .await
            .ok_or_else(lost)?;
        std::mem::swap(out, &mut self.calls.insert(calls).out);
        Ok(flow)
    }
}

fn lost() -> io::Error {
    io::Error::other("a hub call panicked; the session is gone")
}

impl Calls {
    fn run<S: Subscriber>(&mut self, op: Op<'_>, hub: &Hub<S>, outbox: &S) -> Flow {
        let Calls { session, out, .. } = self;
        match op {
            Op::Line(line) => session.handle_line(line, hub, outbox, out),
            Op::ReplayMore => session.replay_more(hub, outbox, out),
            Op::Close => {
                session.close(hub);
                Flow::Close
            }
        }
    }

    fn run_owned<S: Subscriber>(&mut self, op: OwnedOp, hub: &Hub<S>, outbox: &S) -> Flow {
        let line = std::mem::take(&mut self.line);
        let op = match op {
            OwnedOp::Line(result) => Op::Line(result.map(|()| line.as_slice())),
            OwnedOp::ReplayMore => Op::ReplayMore,
            OwnedOp::Close => Op::Close,
        };
        let flow = self.run(op, hub, outbox);
        // Give the line's allocation back for the next call.
        self.line = line;
        flow
    }
}

/// After [`Flow::Syncing`]: waits for the group commit's sync of the `SAY` (it
/// runs on the commit thread, and this task yields, so the runtime serves every
/// other connection meanwhile), then puts the `ACK`, or the error, in `out`.
async fn await_sync(session: &mut Session, out: &mut Vec<u8>) {
    let result = match session.take_pending() {
        Some(pending) => {
            let slot = Arc::new(Slot::default());
            let done = Fill(Some(Arc::clone(&slot)));
            pending.on_done(move |result| done.fill(result));
            SyncDone(slot).await
        }
        None => Err(io::Error::other("no sync to wait for")),
    };
    session.synced(result, out);
}

/// Where the commit thread leaves a sync's outcome for a task, and the task's
/// waker: a one-shot channel that needs no runtime.
#[derive(Debug, Default)]
struct Slot(Mutex<(Option<io::Result<()>>, Option<Waker>)>);

/// The commit thread's end of a [`Slot`]. Dropped without filling (the commit
/// thread gone), it fills the slot with an error, so the task never waits for
/// an outcome that cannot come.
struct Fill(Option<Arc<Slot>>);

impl Fill {
    fn fill(mut self, result: io::Result<()>) {
        if let Some(slot) = self.0.take() {
            slot.put(result);
        }
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.put(Err(io::Error::other("the commit thread is gone")));
        }
    }
}

impl Slot {
    fn put(&self, result: io::Result<()>) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slot.0 = Some(result);
        if let Some(waker) = slot.1.take() {
            drop(slot);
            waker.wake();
        }
    }
}

/// The task's end of a [`Slot`].
struct SyncDone(Arc<Slot>);

impl Future for SyncDone {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut slot = (self.0).0.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.0.take() {
            Some(result) => Poll::Ready(result),
            None => {
                slot.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Wake;

    use super::*;
    use crate::hub::Line;
    use crate::log::Fsync;

    /// Keeps the seams it is handed, to show they bypass the replies.
    #[derive(Clone, Default)]
    struct Seams(Arc<Mutex<Vec<u8>>>);

    impl Subscriber for Seams {
        fn offer(&self, line: &Line) -> bool {
            self.0.lock().unwrap().extend_from_slice(line);
            true
        }

        fn push_seam(&self, lines: Vec<u8>) {
            self.0.lock().unwrap().extend_from_slice(&lines);
        }
    }

    /// A pool that is a new thread per call, joined by the future.
    struct Threads;

    impl BlockingPool for Threads {
        async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
            std::thread::spawn(job).join().ok()
        }
    }

    /// A pool whose calls panic.
    struct Broken;

    impl BlockingPool for Broken {
        async fn run<R: Send + 'static>(&self, _: impl Job<R>) -> Option<R> {
            None
        }
    }

    /// Wakes a test thread parked in [`block_on`].
    struct Unpark(std::thread::Thread);

    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    /// Polls `f` to completion on this thread, parked between polls until
    /// woken, for at most 10 s in all.
    fn block_on<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
                return out;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "the future did not finish in 10 s");
            std::thread::park_timeout(left);
        }
    }

    fn rooms(offload: bool, fsync: Fsync) -> (Arc<Rooms<Seams>>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::open(Some(dir.path()), fsync).unwrap();
        let rooms = Rooms {
            hub,
            max_pending: 1 << 20,
            offload,
        };
        (Arc::new(rooms), dir)
    }

    fn say_and_leave(calls: &mut HubCalls<Seams, impl BlockingPool>) -> Vec<u8> {
        let mut all = Vec::new();
        for line in [&b"NICK ada"[..], b"JOIN r 0", b"SAY r hi", b"PING x"] {
            let mut out = Vec::new();
            let flow = block_on(calls.call(Op::Line(Ok(line)), &mut out)).unwrap();
            assert_eq!(flow, Flow::Continue, "{}", String::from_utf8_lossy(line));
            all.extend_from_slice(&out);
        }
        let flow = block_on(calls.call(Op::Close, &mut Vec::new())).unwrap();
        assert_eq!(flow, Flow::Close);
        all
    }

    #[test]
    fn inline_and_offloaded_calls_give_the_same_replies() {
        // The JOIN's seam goes to the subscriber, the replies to `out`.
        let expected = b"OK\nACK r 1\nPONG x\n";
        for offload in [false, true] {
            let (rooms, _dir) = rooms(offload, Fsync::Never);
            let seams = Seams::default();
            let mut calls = HubCalls::new(&rooms, &seams, Threads);
            assert_eq!(say_and_leave(&mut calls), expected, "offload {offload}");
            assert_eq!(*seams.0.lock().unwrap(), b"JOINED r 1\n");
        }
    }

    #[test]
    fn a_say_with_fsync_always_returns_with_its_ack() {
        let (rooms, _dir) = rooms(true, Fsync::Always);
        let mut calls = HubCalls::new(&rooms, &Seams::default(), Threads);
        assert_eq!(say_and_leave(&mut calls), b"OK\nACK r 1\nPONG x\n");
    }

    #[test]
    fn a_panicked_pool_call_is_an_error_not_a_panic() {
        let (rooms, _dir) = rooms(true, Fsync::Never);
        let mut calls = HubCalls::new(&rooms, &Seams::default(), Broken);
        for _ in 0..2 {
            let e = block_on(calls.call(Op::Line(Ok(b"PING x")), &mut Vec::new())).unwrap_err();
            assert!(e.to_string().contains("panicked"), "{e}");
        }
    }

    #[test]
    fn a_commit_thread_that_drops_the_callback_is_an_error() {
        let slot = Arc::new(Slot::default());
        drop(Fill(Some(Arc::clone(&slot))));
        let e = block_on(SyncDone(slot)).unwrap_err();
        assert!(e.to_string().contains("gone"), "{e}");
    }
}
