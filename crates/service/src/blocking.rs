//! Chat in blocking style, for runtimes whose code blocks (OS threads in
//! srv-threads, fibers in srv-fiber): a connection is a reader running
//! [`read_commands`] and a writer running [`Outbox::drain_into`], joined by the
//! connection's [`Outbox`]. The runtime supplies only how a reader or writer
//! waits ([`Wakeup`]) and how a cut connection's socket is shut down, so both
//! servers run this same code.
//!
//! The outbox is the connection's one outbound path (the ordering rule of
//! [`crate::session`]): the reader and the room hub put lines in, the writer
//! takes them out and writes them to the socket in order.
//!
//! Two limits, as docs/protocol-notes.md says and [`crate::outbox`] decides:
//! live `MSG` lines that other connections cause count against `--max-pending`,
//! and passing it cuts the subscriber off; output the connection causes itself
//! (replies, replay) makes its reader wait for room instead, which is plain TCP
//! backpressure.

use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use proto::chat::{LineBuffer, MAX_LINE};

use crate::counters::{Count, Tally};
use crate::hub::{Hub, Line, Subscriber};
use crate::outbox::{Offered, OutQueue};
use crate::session::{Flow, Session};

/// How a blocked reader or writer of an [`Outbox`] waits: a wake-up flag that
/// [`Wakeup::wait`] consumes. A wake with nobody waiting must not be lost (the
/// next `wait` returns at once); extra wake-ups are harmless, since waiters
/// check their condition again.
pub trait Wakeup: Default + Send + Sync + 'static {
    /// Blocks the caller (a thread, a fiber) until woken.
    fn wait(&self);
    /// Wakes the waiter, or makes its next `wait` return at once.
    fn wake(&self);
}

/// [`Wakeup`] for OS threads: a flag under a mutex with a condvar.
#[derive(Debug, Default)]
pub struct ThreadWakeup {
    woken: Mutex<bool>,
    cond: Condvar,
}

impl Wakeup for ThreadWakeup {
    fn wait(&self) {
        let mut woken = self.woken.lock().unwrap_or_else(|p| p.into_inner());
        while !*woken {
            woken = self.cond.wait(woken).unwrap_or_else(|p| p.into_inner());
        }
        *woken = false;
    }

    fn wake(&self) {
        *self.woken.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cond.notify_one();
    }
}

/// A handle to one connection's outbound queue; clones share it. The rule is
/// [`OutQueue`]'s; this adds only how a thread or a fiber waits for it.
pub struct Outbox<W: Wakeup>(Arc<Inner<W>>);

impl<W: Wakeup> Clone for Outbox<W> {
    fn clone(&self) -> Self {
        Outbox(Arc::clone(&self.0))
    }
}

impl<W: Wakeup> fmt::Debug for Outbox<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Outbox").field(&*self.lock()).finish()
    }
}

struct Inner<W> {
    /// Held only for queue operations, never while waiting or writing.
    queue: Mutex<OutQueue>,
    /// Woken when there is something to write, or the outbox closed.
    readable: W,
    /// Woken when the writer made room, or the outbox closed.
    writable: W,
    /// Shuts the socket down when the connection is cut, to wake its reader.
    on_cut: Box<dyn Fn() + Send + Sync>,
}

impl<W: Wakeup> Outbox<W> {
    /// An empty outbox whose live lines may queue up to `max_pending` bytes;
    /// `on_cut` shuts the connection's socket down when that limit is passed.
    pub fn new(max_pending: usize, on_cut: impl Fn() + Send + Sync + 'static) -> Self {
        Outbox(Arc::new(Inner {
            queue: Mutex::new(OutQueue::new(max_pending)),
            readable: W::default(),
            writable: W::default(),
            on_cut: Box::new(on_cut),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, OutQueue> {
        // A panic elsewhere while holding the lock leaves consistent counts.
        self.0.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the bytes of `out` into the queue, first waiting while the queue
    /// is too full to take them. Returns false, with `out` cleared, when the
    /// outbox is closed.
    pub fn push_own(&self, out: &mut Vec<u8>) -> bool {
        if out.is_empty() {
            return !self.is_closed();
        }
        let mut q = self.lock();
        while !q.has_room(out.len()) {
            drop(q);
            self.0.writable.wait();
            q = self.lock();
        }
        let queued = q.push_own(out);
        drop(q);
        if queued {
            self.0.readable.wake();
        }
        queued
    }

    /// No more input: the writer sends what is queued, then stops.
    pub fn close(&self) {
        self.lock().close();
        self.0.readable.wake();
        self.0.writable.wake();
    }

    /// Whether the outbox takes no more lines.
    pub fn is_closed(&self) -> bool {
        self.lock().is_closed()
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub fn was_cut(&self) -> bool {
        self.lock().is_cut()
    }

    /// The writer's loop: writes everything queued, in order, one batch (all
    /// that was queued) per `write_all`, until the outbox is closed and empty
    /// (or cut), counting the bytes it writes.
    pub fn drain_into(&self, out: &mut impl Write, tally: &mut Tally) -> io::Result<()> {
        let mut batch = Vec::with_capacity(proto::echo::READ_BUF);
        loop {
            let mut q = self.lock();
            let taken = loop {
                if q.is_cut() {
                    return Ok(());
                }
                if let Some(taken) = q.take(&mut batch) {
                    break taken;
                }
                if q.is_closed() {
                    return Ok(());
                }
                drop(q);
                self.0.readable.wait();
                q = self.lock();
            };
            drop(q);
            if let Err(e) = out.write_all(&batch) {
                // The client is gone: wake the reader, which may wait for room.
                self.close();
                return Err(e);
            }
            tally.add(Count::BytesOut, batch.len() as u64);
            self.lock().sent(taken, &mut batch);
            self.0.writable.wake();
        }
    }
}

impl<W: Wakeup> Subscriber for Outbox<W> {
    fn offer(&self, line: &Line) -> bool {
        let offered = self.lock().offer(line);
        match offered {
            Offered::Queued => self.0.readable.wake(),
            Offered::Refused => {}
            Offered::Cut => {
                // Wake the reader (blocked in read) and the writer (maybe
                // blocked in write to a client that does not read).
                (self.0.on_cut)();
                self.0.readable.wake();
                self.0.writable.wake();
            }
        }
        offered == Offered::Queued
    }

    fn push_seam(&self, lines: Vec<u8>) {
        if self.lock().push_seam(lines) {
            self.0.readable.wake();
        }
    }
}

/// The reader's half of a blocking chat connection: reads lines from `reader`,
/// runs them through a [`Session`] and queues what they produce, until the
/// client closes, sends a line too long, or is cut off. Leaves every room
/// before it returns. The caller runs the writer ([`Outbox::drain_into`]) beside
/// it and closes the outbox afterwards.
pub fn read_commands<R: Read, W: Wakeup>(
    mut reader: R,
    hub: &Hub<Outbox<W>>,
    outbox: &Outbox<W>,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut session = Session::new(hub);
    let result = read_into_session(&mut reader, &mut session, hub, outbox, tally);
    session.close(hub);
    if outbox.was_cut() {
        tally.add(Count::Cut, 1);
    }
    result
}

fn read_into_session<R: Read, W: Wakeup>(
    reader: &mut R,
    session: &mut Session,
    hub: &Hub<Outbox<W>>,
    outbox: &Outbox<W>,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut out = Vec::new();
    loop {
        let n = match reader.read(lines.spare()) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // A cut subscriber's socket is shut down under us: not an error.
            Err(_) if outbox.is_closed() => return Ok(()),
            Err(e) => return Err(e),
        };
        tally.add(Count::BytesIn, n as u64);
        lines.commit(n);
        while let Some(line) = lines.next_line() {
            tally.add(Count::Lines, 1);
            let mut flow = session.handle_line(line, hub, outbox, &mut out);
            if flow == Flow::Syncing {
                // The ACK waits for the group commit; this connection's reader waits
                // with it (parking a fiber, blocking a thread), nobody else does.
                wait_synced::<W>(session, &mut out);
                flow = Flow::Continue;
            }
            while let Flow::Replaying = flow {
                // Hand over a replay batch (waiting while the client is behind),
                // then take the next one.
                if !outbox.push_own(&mut out) {
                    return Ok(());
                }
                flow = session.replay_more(hub, outbox, &mut out);
            }
            if !outbox.push_own(&mut out) {
                return Ok(());
            }
            match flow {
                Flow::Continue | Flow::Replaying | Flow::Syncing => {}
                Flow::Close => return Ok(()),
            }
        }
    }
}

/// After [`Flow::Syncing`]: waits, the way `W` waits, for the sync the `ACK` needs, and
/// puts the `ACK` (or the error) in `out`.
fn wait_synced<W: Wakeup>(session: &mut Session, out: &mut Vec<u8>) {
    let result = match session.take_pending() {
        Some(pending) => {
            let slot = Arc::new((Mutex::new(None), W::default()));
            let done = Arc::clone(&slot);
            pending.on_done(move |r| {
                *done.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                done.1.wake();
            });
            loop {
                let taken = slot.0.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(r) = taken {
                    break r;
                }
                slot.1.wait();
            }
        }
        None => Err(io::Error::other("no sync to wait for")),
    };
    session.synced(result, out);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::counters::Counters;

    fn outbox(max: usize) -> (Outbox<ThreadWakeup>, Arc<AtomicBool>) {
        let cut = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cut);
        (
            Outbox::new(max, move || flag.store(true, Ordering::SeqCst)),
            cut,
        )
    }

    #[test]
    fn lines_come_out_in_the_order_they_went_in() {
        let (ob, _) = outbox(1024);
        ob.push_own(&mut b"OK\n".to_vec());
        assert!(ob.offer(&Line::from(&b"MSG r 1 a x\n"[..])));
        ob.push_seam(b"JOINED r 2\n".to_vec());
        ob.close();
        let mut written = Vec::new();
        ob.drain_into(&mut written, &mut Counters::default().tally())
            .unwrap();
        assert_eq!(written, b"OK\nMSG r 1 a x\nJOINED r 2\n");
    }

    #[test]
    fn live_lines_past_the_limit_cut_the_connection_and_own_output_does_not() {
        let (ob, cut) = outbox(20);
        // Own output only waits for room; with an empty queue it always fits.
        assert!(ob.push_own(&mut vec![b'x'; 100]));
        let line = Line::from(&b"MSG r 1 anon 0123\n"[..]); // 18 bytes
        assert!(ob.offer(&line));
        assert!(!cut.load(Ordering::SeqCst));
        assert!(!ob.offer(&line), "36 live bytes pass the 20-byte limit");
        assert!(cut.load(Ordering::SeqCst) && ob.was_cut() && ob.is_closed());
        assert!(!ob.push_own(&mut b"late\n".to_vec()));
    }

    #[test]
    fn a_reader_waiting_for_room_is_released_by_the_writer() {
        let (ob, _) = outbox(10);
        ob.push_own(&mut vec![b'a'; 8]);
        let writer = {
            let ob = ob.clone();
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                ob.drain_into(&mut sink, &mut Counters::default().tally())
                    .map(|()| sink)
            })
        };
        // Does not fit beside the 8 queued bytes: waits until they are written.
        assert!(ob.push_own(&mut vec![b'b'; 8]));
        ob.close();
        let sink = writer.join().unwrap().unwrap();
        assert_eq!(sink, [[b'a'; 8], [b'b'; 8]].concat());
    }
}
