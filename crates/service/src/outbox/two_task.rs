//! A chat connection's outbound queue between its two tasks and the room hub, for
//! runtimes whose reads and writes own their buffers and cannot be dropped halfway
//! (srv-tokio-uring, srv-monoio, srv-compio): the reader task queues the session's
//! replies, the hub (on any worker thread) offers live lines and hands over the `JOIN`
//! seam, and the writer task takes everything out in one buffer and writes it with one
//! io_uring operation.
//!
//! It is a `std::sync::Mutex` over the connection's [`OutQueue`] plus one wake-up per
//! task ([`Notifier`]: [`Signal`] by default, or a runtime's own): the
//! slow-subscriber rule counts bytes, not messages (so a bounded channel counts the
//! wrong thing); `offer` must never block and holds the lock only for a copy of one
//! line; and one contiguous buffer means one system call per burst and no allocation
//! per message: the writer swaps the queued buffer with its own empty one, hands it to
//! the ring by value, gets it back when the write completes, and keeps it for the next
//! batch.
//!
//! Limits, as docs/protocol-notes.md says: live lines count against
//! `--max-pending`, and passing it cuts the connection off; the connection's own
//! output (replies, replay) makes the reader wait for room instead (more than
//! `--max-pending` queued in all), which stops reading the client: backpressure.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, MutexGuard};

use nix::sys::socket::{Shutdown, shutdown};

use proto::chat::LineBuffer;

use super::shared::Shared;
use crate::hub::{Line, Subscriber};
use crate::offload::{BlockingPool, HubCalls, Op};
use crate::outbox::{Batch, OutQueue};
use crate::session::Flow;
use crate::signal::{Notifier, Signal};

/// A handle to one connection's outbound queue; clones share it. The rule is
/// [`OutQueue`]'s; this adds the wake-ups of the two tasks.
#[derive(Debug)]
pub struct Outbox<N = Signal>(Arc<Inner<N>>);

impl<N> Clone for Outbox<N> {
    fn clone(&self) -> Self {
        Outbox(Arc::clone(&self.0))
    }
}

#[derive(Debug)]
struct Inner<N> {
    /// Closed once the reader is done, the writer stopped, or a cut; its wake-up
    /// wakes the writer: something was queued, the reader is done, or a cut.
    shared: Shared<N>,
    /// Wakes the reader: the writer made room, or stopped.
    to_reader: N,
}

/// What the writer does next.
#[derive(Debug)]
pub enum Next {
    /// Write the batch swapped into its buffer, then call [`Outbox::sent`].
    Write(Batch),
    /// Nothing queued: wait with [`Outbox::writer_notified`].
    Wait,
    /// The reader is done and everything is written.
    Done,
    /// Cut off as a slow subscriber: shut the socket down, write nothing more.
    Cut,
}

impl<N: Notifier> Outbox<N> {
    /// An empty, open queue whose live lines may have `max_pending` bytes pending.
    pub fn new(max_pending: usize) -> Self {
        Outbox(Arc::new(Inner {
            shared: Shared::new(max_pending),
            to_reader: N::default(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, OutQueue> {
        self.0.shared.lock()
    }

    /// Queues the reader's own output (copied, and `out` cleared, keeping its
    /// allocation), first waiting while the queue is too full to take it.
    /// Returns false if the queue is closed (the writer stopped, or a cut):
    /// the connection is over.
    pub async fn push_own(&self, out: &mut Vec<u8>) -> bool {
        loop {
            {
                let mut q = self.lock();
                if out.is_empty() {
                    return !q.is_closed();
                }
                if q.has_room(out.len()) {
                    let queued = q.push_own(out);
                    drop(q);
                    self.0.shared.to_writer.notify();
                    return queued;
                }
            }
            // A permit stored by a `sent` after the unlock above is kept.
            self.0.to_reader.notified().await;
        }
    }

    /// The reader will queue nothing more: refuse offers, and let the writer end
    /// once it has written what is queued.
    pub fn reader_done(&self) {
        self.lock().close();
        self.0.shared.to_writer.notify();
    }

    /// The writer's next step; with [`Next::Write`], `batch` (empty on entry)
    /// holds the bytes to write.
    pub fn next(&self, batch: &mut Vec<u8>) -> Next {
        let mut q = self.lock();
        if q.is_cut() {
            Next::Cut
        } else if let Some(taken) = q.take(batch) {
            Next::Write(taken)
        } else if q.is_closed() {
            Next::Done
        } else {
            Next::Wait
        }
    }

    /// Waits until [`Outbox::next`] may have something new to say.
    pub async fn writer_notified(&self) {
        self.0.shared.to_writer.notified().await;
    }

    /// The batch was written: its bytes are no longer pending. Clears `batch`
    /// for reuse and wakes a reader waiting for room.
    pub fn sent(&self, done: Batch, batch: &mut Vec<u8>) {
        self.lock().sent(done, batch);
        self.0.to_reader.notify();
    }

    /// The writer stopped (it could not write, or the connection was cut): the
    /// reader's next `push_own` says so.
    pub fn writer_done(&self) {
        let mut q = self.lock();
        q.close();
        q.drop_queued();
        drop(q);
        self.0.to_reader.notify();
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub fn is_cut(&self) -> bool {
        self.lock().is_cut()
    }
}

/// The reader task's step after each read: handles the complete lines in `lines` in
/// order, each through `calls` (a `JOIN`'s replay to its end), and queues the replies
/// (waiting for room when the client is behind), calling `counted` once a line. Returns
/// false once the connection is over: a line closed it, or the queue did (the writer
/// stopped, or a cut).
pub async fn handle_lines<N: Notifier, P: BlockingPool>(
    lines: &mut LineBuffer,
    calls: &mut HubCalls<Outbox<N>, P>,
    outbox: &Outbox<N>,
    out: &mut Vec<u8>,
    mut counted: impl FnMut(),
) -> io::Result<bool> {
    while let Some(line) = lines.next_line() {
        counted();
        let mut flow = calls.call(Op::Line(line), out).await?;
        loop {
            if !outbox.push_own(out).await {
                return Ok(false);
            }
            match flow {
                // HubCalls::call waits a sync out before it returns.
                Flow::Continue | Flow::Syncing => break,
                Flow::Replaying => flow = calls.call(Op::ReplayMore, out).await?,
                Flow::Close => return Ok(false),
            }
        }
    }
    Ok(true)
}

/// How the writer task's loop ([`write_out`]) ended.
#[derive(Debug)]
pub enum Ended {
    /// The reader was done and everything queued was written.
    Done,
    /// Cut off as a slow subscriber (`Ok`), or a write failed (`Err`): stop the
    /// reader's read and shut the socket down.
    Stopped(io::Result<()>),
}

/// The writer task's loop: takes what the outbox holds, one batch at a time, into
/// `batch` (empty, its capacity kept for the connection's life), and writes it whole
/// with `write`, which lends the batch to the ring and gives it back, or gives `None`
/// if the connection was cut meanwhile and the write abandoned; `counted` learns each
/// written batch's length. Runs until the reader is done and everything is written, a
/// write fails, or a cut; either way the queue is closed to the reader
/// ([`Outbox::writer_done`]) by the time it returns.
pub async fn write_out<N: Notifier>(
    outbox: &Outbox<N>,
    mut batch: Vec<u8>,
    mut write: impl AsyncFnMut(Vec<u8>) -> Option<(io::Result<()>, Vec<u8>)>,
    mut counted: impl FnMut(usize),
) -> Ended {
    let result = loop {
        match outbox.next(&mut batch) {
            Next::Wait => outbox.writer_notified().await,
            Next::Done => {
                outbox.writer_done();
                return Ended::Done;
            }
            Next::Cut => break Ok(()),
            Next::Write(taken) => {
                let len = batch.len();
                let Some((result, back)) = write(batch).await else {
                    break Ok(());
                };
                batch = back;
                if let Err(e) = result {
                    break Err(e);
                }
                counted(len);
                outbox.sent(taken, &mut batch);
            }
        }
    };
    outbox.writer_done();
    Ended::Stopped(result)
}

/// Shuts both directions of a connection's socket down: how the writer task stops the
/// reader once [`write_out`] has [`Ended::Stopped`]. The read the reader keeps in flight
/// on the ring completes at once with end of stream (and a write still in flight fails),
/// as `shutdown(2)` wakes every waiter on the socket, so the reader needs no cancel
/// registration of its own. For runtimes whose `shutdown` is `SHUT_WR` alone (monoio's,
/// compio's); tokio-uring's takes a [`std::net::Shutdown`]. A socket already shut down or
/// reset is left as it is.
pub fn shut_down(socket: &impl AsRawFd) {
    let _ = shutdown(socket.as_raw_fd(), Shutdown::Both);
}

impl<N: Notifier> Subscriber for Outbox<N> {
    fn offer(&self, line: &Line) -> bool {
        self.0.shared.offer(line)
    }

    fn push_seam(&self, lines: Vec<u8>) {
        self.0.shared.push_seam(lines);
    }
}

#[cfg(test)]
mod tests {
    //! The rule itself is `outbox`'s to test; these check the writer's steps and the
    //! reader's wait.

    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    /// Polls `f` once, as a task would be on its first turn.
    fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
        pin!(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn the_writer_writes_waits_and_ends_once_the_reader_is_done() {
        let outbox: Outbox = Outbox::new(1 << 20);
        let mut batch = Vec::new();
        assert!(matches!(outbox.next(&mut batch), Next::Wait));
        assert_eq!(
            poll_once(outbox.push_own(&mut b"OK\n".to_vec())),
            Poll::Ready(true)
        );
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        outbox.reader_done();
        assert!(!outbox.offer(&line("MSG r 2 a y\n")), "closed");
        let Next::Write(done) = outbox.next(&mut batch) else {
            panic!("expected a batch");
        };
        assert_eq!(batch, b"OK\nMSG r 1 a x\n");
        outbox.sent(done, &mut batch);
        assert!(matches!(outbox.next(&mut batch), Next::Done));
    }

    #[test]
    fn the_reader_queues_every_reply_and_stops_at_a_line_that_closes() {
        use crate::hub::Hub;
        use crate::log::Fsync;
        use crate::offload::{Job, Rooms};

        /// Runs hub calls inline: what a pool does, without the thread.
        struct Inline;
        impl BlockingPool for Inline {
            fn run<R: Send + 'static>(&self, job: impl Job<R>) -> impl Future<Output = Option<R>> {
                std::future::ready(Some(job()))
            }
        }

        let rooms = Arc::new(Rooms {
            hub: Hub::open(None, Fsync::Never).unwrap(),
            max_pending: 1 << 20,
            offload: false,
        });
        let outbox: Outbox = Outbox::new(rooms.max_pending);
        let mut calls = HubCalls::new(&rooms, &outbox, Inline);
        let mut lines = LineBuffer::new(proto::chat::MAX_LINE);
        lines.extend_from_slice(b"PING 1\nPING 2\nPI");
        let (mut out, mut counted) = (Vec::new(), 0);
        let more = poll_once(handle_lines(
            &mut lines,
            &mut calls,
            &outbox,
            &mut out,
            || counted += 1,
        ));
        assert!(
            matches!(more, Poll::Ready(Ok(true))),
            "the third line is not complete"
        );
        assert_eq!(counted, 2);
        let mut batch = Vec::new();
        let Next::Write(_) = outbox.next(&mut batch) else {
            panic!("expected a batch");
        };
        assert_eq!(batch, b"PONG 1\nPONG 2\n");
        outbox.writer_done();
        lines.extend_from_slice(b"NG 3\n");
        let more = poll_once(handle_lines(
            &mut lines,
            &mut calls,
            &outbox,
            &mut out,
            || {},
        ));
        assert!(
            matches!(more, Poll::Ready(Ok(false))),
            "the queue is closed"
        );
    }

    #[test]
    fn the_writer_loop_writes_each_batch_and_ends_with_the_reader() {
        let outbox: Outbox = Outbox::new(1 << 20);
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        outbox.reader_done();
        let (mut written, mut counted) = (Vec::new(), 0);
        let write = async |batch: Vec<u8>| {
            written.extend_from_slice(&batch);
            Some((Ok(()), batch))
        };
        let ended = poll_once(write_out(&outbox, Vec::new(), write, |n| counted += n));
        assert!(matches!(ended, Poll::Ready(Ended::Done)));
        assert_eq!(written, b"MSG r 1 a x\n");
        assert_eq!(counted, written.len());
    }

    #[test]
    fn a_failed_write_stops_the_writer_and_the_reader() {
        let outbox: Outbox = Outbox::new(1 << 20);
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        let write = async |batch: Vec<u8>| Some((Err(io::ErrorKind::BrokenPipe.into()), batch));
        let ended = poll_once(write_out(&outbox, Vec::new(), write, |_| {}));
        assert!(matches!(ended, Poll::Ready(Ended::Stopped(Err(_)))));
        assert_eq!(
            poll_once(outbox.push_own(&mut b"late".to_vec())),
            Poll::Ready(false)
        );
    }

    #[test]
    fn a_cut_stops_the_writer() {
        let outbox: Outbox = Outbox::new(4);
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        assert!(outbox.is_cut());
        assert!(matches!(outbox.next(&mut Vec::new()), Next::Cut));
        assert_eq!(poll_once(outbox.writer_notified()), Poll::Ready(()));
    }

    #[test]
    fn own_output_waits_for_room_and_gives_up_when_the_writer_stops() {
        let outbox: Outbox = Outbox::new(10);
        let pushed = poll_once(outbox.push_own(&mut vec![b'a'; 30]));
        assert_eq!(pushed, Poll::Ready(true), "an empty queue takes anything");
        let mut more = vec![b'b'; 5];
        assert_eq!(
            poll_once(outbox.push_own(&mut more)),
            Poll::Pending,
            "30 + 5 > 10 must wait"
        );
        let mut batch = Vec::new();
        let Next::Write(done) = outbox.next(&mut batch) else {
            panic!("expected a batch");
        };
        outbox.sent(done, &mut batch);
        assert_eq!(
            poll_once(outbox.push_own(&mut more)),
            Poll::Ready(true),
            "room was made"
        );
        outbox.writer_done();
        assert_eq!(
            poll_once(outbox.push_own(&mut b"late".to_vec())),
            Poll::Ready(false)
        );
    }

    #[test]
    fn shut_down_ends_a_read_waiting_on_the_socket() {
        use std::io::Read;
        use std::net::{TcpListener, TcpStream};
        use std::time::Duration;

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        // Without the shutdown the read would wait for this long and fail.
        server
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reader = server.try_clone().unwrap();
        let read = std::thread::spawn(move || reader.read(&mut [0; 8]));
        shut_down(&server);
        assert_eq!(read.join().unwrap().unwrap(), 0);
        // The client sees the end of the stream too.
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(client.read(&mut [0; 8]).unwrap(), 0);
    }
}
