//! A chat connection's outbound queue in thread mode: the reader thread and the
//! room hub put lines in, one writer thread takes them out and writes them to
//! the socket in order.
//!
//! Two limits, as docs/protocol-notes.md says: live `MSG` lines that other
//! connections cause count against `--max-pending`, and passing it cuts the
//! subscriber off; output the connection causes itself (replies, replay) makes
//! its reader wait for room instead, which is plain TCP backpressure.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use launch::Counters;
use service::hub::{Line, Subscriber};

/// A handle to one connection's outbound queue; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Outbox(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Signalled when there is something to write, or the outbox closed.
    readable: Condvar,
    /// Signalled when the writer made room.
    writable: Condvar,
    /// Shut down to wake the reader when the connection is cut.
    stream: TcpStream,
    max_pending: usize,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Chunk>,
    /// # Invariant
    /// The sum of the lengths of the chunks in `queue`.
    queued: usize,
    /// # Invariant
    /// The sum of the lengths of the `Chunk::Live` chunks in `queue`.
    queued_live: usize,
    closed: bool,
    cut: bool,
}

#[derive(Debug)]
enum Chunk {
    Own(Vec<u8>),
    Live(Line),
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Own(v) => v,
            Chunk::Live(l) => l,
        }
    }
}

impl Outbox {
    pub(crate) fn new(stream: TcpStream, max_pending: usize) -> Self {
        Outbox(Arc::new(Inner {
            state: Mutex::new(State::default()),
            readable: Condvar::new(),
            writable: Condvar::new(),
            stream,
            max_pending,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves consistent counts.
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the bytes of `out` into the queue, first waiting while the queue
    /// is too full to take them. Returns false, with `out` cleared, when the
    /// outbox is closed.
    pub(crate) fn push_own(&self, out: &mut Vec<u8>) -> bool {
        if out.is_empty() {
            return !self.is_closed();
        }
        let mut st = self.lock();
        while !st.closed && st.queued > 0 && st.queued + out.len() > self.0.max_pending {
            st = self.0.writable.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.closed {
            out.clear();
            return false;
        }
        st.queued += out.len();
        st.queue.push_back(Chunk::Own(std::mem::take(out)));
        self.0.readable.notify_one();
        true
    }

    /// No more input: the writer sends what is queued, then stops.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.0.readable.notify_all();
        self.0.writable.notify_all();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub(crate) fn was_cut(&self) -> bool {
        self.lock().cut
    }

    /// The writer thread's loop: writes everything queued, in order, until the
    /// outbox is closed and empty (or cut), counting the bytes it writes.
    pub(crate) fn drain_into(&self, out: &mut impl Write, counters: &Counters) -> io::Result<()> {
        let mut batch = VecDeque::new();
        let mut buf = Vec::with_capacity(proto::echo::READ_BUF);
        loop {
            let mut st = self.lock();
            while st.queue.is_empty() && !st.closed {
                st = self.0.readable.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.cut || st.queue.is_empty() {
                return Ok(());
            }
            std::mem::swap(&mut batch, &mut st.queue);
            drop(st);

            // Small lines go out together in one write.
            let (mut total, mut live) = (0, 0);
            for chunk in batch.drain(..) {
                let bytes = chunk.bytes();
                total += bytes.len();
                if let Chunk::Live(_) = chunk {
                    live += bytes.len();
                }
                if buf.len() + bytes.len() > buf.capacity() {
                    self.write(out, &buf)?;
                    buf.clear();
                }
                if bytes.len() >= buf.capacity() {
                    self.write(out, bytes)?;
                } else {
                    buf.extend_from_slice(bytes);
                }
            }
            self.write(out, &buf)?;
            buf.clear();
            Counters::add(&counters.bytes_out, total as u64);

            let mut st = self.lock();
            st.queued -= total;
            st.queued_live -= live;
            drop(st);
            self.0.writable.notify_all();
        }
    }

    fn write(&self, out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
        let result = out.write_all(bytes);
        if result.is_err() {
            // The client is gone: wake the reader, which may wait for room.
            self.close();
        }
        result
    }
}

impl Subscriber for Outbox {
    fn offer(&self, line: &Line) -> bool {
        let mut st = self.lock();
        if st.closed {
            return false;
        }
        if st.queued_live + line.len() > self.0.max_pending {
            st.cut = true;
            st.closed = true;
            drop(st);
            // Wake the reader (blocked in read) and the writer (maybe blocked
            // in write to a client that does not read).
            let _ = self.0.stream.shutdown(Shutdown::Both);
            self.0.readable.notify_all();
            self.0.writable.notify_all();
            return false;
        }
        st.queued += line.len();
        st.queued_live += line.len();
        st.queue.push_back(Chunk::Live(Line::clone(line)));
        drop(st);
        self.0.readable.notify_one();
        true
    }

    fn push_seam(&self, lines: Vec<u8>) {
        let mut st = self.lock();
        if st.closed || lines.is_empty() {
            return;
        }
        st.queued += lines.len();
        st.queue.push_back(Chunk::Own(lines));
        drop(st);
        self.0.readable.notify_one();
    }
}
