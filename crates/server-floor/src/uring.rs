//! `--api io_uring`: the floor of the completion model. One ring
//! (SINGLE_ISSUER|DEFER_TASKRUN, its fd registered), one multishot accept, one
//! multishot recv per connection over a ring of provided buffers, and each echo sent
//! straight from the buffer it was received into; the buffer goes back to the ring
//! when its send completes. One `io_uring_enter` (submit and wait) per loop.
//!
//! A connection sends one buffer at a time, in order, and sends the rest of a short
//! send before the next. Backpressure: once it holds `MAX_PENDING / READ_BUF` buffers
//! (64 KiB of capacity) its recv is cancelled, and re-armed when they are sent.
//!
//! ```text
//! user_data:  63                          3 2    0
//!             +----------------------------+------+
//!             |  connection slab key       | kind |   kind: ACCEPT, RECV, SEND,
//!             +----------------------------+------+         CANCEL, SIGNAL
//! ```
#![allow(unsafe_code)] // The kernel reads SQEs and writes buffers given by address.

use std::collections::VecDeque;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicU16, Ordering};

use anyhow::{Context, bail};
use io_uring::types::{BufRingEntry, Fd};
use io_uring::{IoUring, Submitter, cqueue, opcode, squeue};
use launch::{Shutdown, Snapshot};
use proto::echo::{MAX_PENDING, READ_BUF};
use slab::Slab;

const ACCEPT: u64 = 0;
const RECV: u64 = 1;
const SEND: u64 = 2;
const CANCEL: u64 = 3;
const SIGNAL: u64 = 4;
/// Provided buffers of `READ_BUF` bytes each (a power of two, as the ring needs).
const BUFS: u16 = 2048;
const GROUP: u16 = 0;
/// Buffers a connection may hold before its recv is cancelled.
const HELD_MAX: usize = MAX_PENDING / READ_BUF;

#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Page([u8; 4096]);

/// The provided-buffer ring and its buffers, leaked: the kernel may write to them
/// until the ring is torn down, which ends after this process no longer cares.
struct BufRing {
    entries: *mut BufRingEntry,
    bufs: *mut u8,
    tail: u16,
}

impl BufRing {
    fn new() -> Self {
        let pages = (usize::from(BUFS) * size_of::<BufRingEntry>()).div_ceil(4096);
        let entries = vec![Page([0; 4096]); pages].leak().as_mut_ptr().cast();
        let bufs = vec![0u8; usize::from(BUFS) * READ_BUF].leak().as_mut_ptr();
        let mut ring = BufRing {
            entries,
            bufs,
            tail: 0,
        };
        (0..BUFS).for_each(|bid| ring.provide(bid));
        ring
    }

    fn addr(&self, bid: u16, offset: usize) -> *const u8 {
        self.bufs.wrapping_add(usize::from(bid) * READ_BUF + offset)
    }

    /// Hands buffer `bid` (which the kernel does not hold) back to the kernel.
    fn provide(&mut self, bid: u16) {
        let slot = usize::from(self.tail & (BUFS - 1));
        // SAFETY: [1] `entries` points to BUFS leaked, page-aligned entries, and slot < BUFS.
        // [2] The kernel reads only the entries between its head and the published tail;
        // this slot is at the tail, not yet published, so the kernel reads none of its
        // addr/len/bid, the only fields the setters write. (Entry 0's last two bytes are
        // the ring's tail, which the kernel reads at any time; the setters never write
        // them, and the reference ends before the tail is stored.)
        // [3] The tail field sits in entry 0, is u16-aligned, and is shared with the
        // kernel only through atomic accesses (the kernel reads it with acquire).
        unsafe {
            let e = &mut *self.entries.add(slot);
            e.set_addr(self.addr(bid, 0) as u64);
            e.set_len(READ_BUF as u32);
            e.set_bid(bid);
            self.tail = self.tail.wrapping_add(1);
            let tail = BufRingEntry::tail(self.entries).cast_mut();
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }
}

/// A received buffer not yet all sent: bytes `start..end` of buffer `bid`.
struct Chunk {
    bid: u16,
    start: usize,
    end: usize,
}

struct Conn {
    stream: TcpStream,
    queue: VecDeque<Chunk>,
    sending: bool,
    recv_armed: bool,
    cancelling: bool,
    /// Holding HELD_MAX buffers: recv cancelled until the queue drains.
    paused: bool,
    /// EOF or an error: no more recv, close once nothing is in flight.
    done: bool,
}

struct Floor<'a> {
    listener: Fd,
    signal: Fd,
    submitter: Submitter<'a>,
    sq: squeue::SubmissionQueue<'a>,
    bufs: BufRing,
    conns: Slab<Conn>,
    /// Connections whose recv ended for want of buffers, re-armed once one is freed.
    starved: Vec<usize>,
    freed: bool,
    stats: Snapshot,
}

/// Serves echo until SIGINT or SIGTERM; returns the counters.
pub(crate) fn serve(listener: TcpListener, shutdown: &Shutdown) -> anyhow::Result<Snapshot> {
    let mut ring: IoUring = match IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(16 * 1024)
        .build(1024)
    {
        Ok(ring) => ring,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
            bail!("io_uring is unavailable here ({e}); use --api epoll")
        }
        Err(e) => return Err(e).context("cannot set up io_uring with SINGLE_ISSUER|DEFER_TASKRUN"),
    };
    let bufs = BufRing::new();
    // SAFETY: the ring entries are leaked, so they stay valid as long as the ring.
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(bufs.entries as u64, BUFS, GROUP, 0)
    }
    .context("registering the provided-buffer ring (Linux 5.19 or later)")?;
    let (mut submitter, sq, mut cq) = ring.split();
    // Saves a file lookup per enter; without it (before Linux 5.18) the ring still works.
    let _ = submitter.register_ring_fd();
    let mut f = Floor {
        listener: Fd(listener.as_raw_fd()),
        signal: Fd(shutdown.as_fd().as_raw_fd()),
        submitter,
        sq,
        bufs,
        conns: Slab::new(),
        starved: Vec::new(),
        freed: false,
        stats: Snapshot::default(),
    };
    f.arm_accept()?;
    f.arm_signal()?;
    launch::announce_ready(listener.local_addr()?)?;

    let mut done = Vec::with_capacity(1024);
    loop {
        f.sq.sync();
        match f.submitter.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {}
            Err(e) => return Err(e).context("io_uring_enter"),
        }
        cq.sync();
        done.extend(cq.by_ref().map(|c| (c.user_data(), c.result(), c.flags())));
        for (data, res, flags) in done.drain(..) {
            let key = (data >> 3) as usize;
            match data & 7 {
                ACCEPT => f.accepted(res, flags)?,
                RECV => f.received(key, res, flags)?,
                SEND => f.sent(key, res)?,
                CANCEL => f.conns.get_mut(key).map_or((), |c| c.cancelling = false),
                SIGNAL if shutdown.take().is_some() => {
                    f.stats.closed += f.conns.len() as u64;
                    return Ok(f.stats);
                }
                SIGNAL => f.arm_signal()?,
                _ => {}
            }
            f.close_if_done(key);
        }
        if std::mem::take(&mut f.freed) {
            for key in std::mem::take(&mut f.starved) {
                f.arm_recv(key)?;
            }
        }
    }
}

impl Floor<'_> {
    /// Queues an SQE, submitting first if the queue is full.
    fn push(&mut self, sqe: squeue::Entry) -> anyhow::Result<()> {
        // SAFETY: every SQE here refers to memory that outlives it: sends point into the
        // leaked buffers, which go back to the kernel only after the send completes;
        // the other operations carry no pointer.
        while unsafe { self.sq.push(&sqe) }.is_err() {
            self.sq.sync();
            self.submitter
                .submit()
                .context("io_uring_enter (submission queue full)")?;
            self.sq.sync();
        }
        Ok(())
    }

    fn arm_accept(&mut self) -> anyhow::Result<()> {
        let accept = opcode::AcceptMulti::new(self.listener).flags(libc::SOCK_CLOEXEC);
        self.push(accept.build().user_data(ACCEPT))
    }

    fn arm_signal(&mut self) -> anyhow::Result<()> {
        let poll = opcode::PollAdd::new(self.signal, libc::POLLIN as u32);
        self.push(poll.build().user_data(SIGNAL))
    }

    fn accepted(&mut self, res: i32, flags: u32) -> anyhow::Result<()> {
        if !cqueue::more(flags) {
            self.arm_accept()?;
        }
        if res < 0 {
            self.stats.errors += 1;
            return Ok(());
        }
        // SAFETY: a successful accept CQE carries a new fd that nothing else owns.
        let stream = unsafe { TcpStream::from_raw_fd(res) };
        let _ = stream.set_nodelay(true);
        let key = self.conns.insert(Conn {
            stream,
            queue: VecDeque::new(),
            sending: false,
            recv_armed: false,
            cancelling: false,
            paused: false,
            done: false,
        });
        self.stats.accepted += 1;
        self.arm_recv(key)
    }

    fn arm_recv(&mut self, key: usize) -> anyhow::Result<()> {
        let Some(c) = self.conns.get_mut(key) else {
            return Ok(());
        };
        if c.recv_armed || c.paused || c.done {
            return Ok(());
        }
        c.recv_armed = true;
        let recv = opcode::RecvMulti::new(Fd(c.stream.as_raw_fd()), GROUP);
        self.push(recv.build().user_data(ud(key, RECV)))
    }

    fn received(&mut self, key: usize, res: i32, flags: u32) -> anyhow::Result<()> {
        let more = cqueue::more(flags);
        let Some(c) = self.conns.get_mut(key) else {
            return Ok(());
        };
        c.recv_armed &= more;
        match (res, cqueue::buffer_select(flags)) {
            // Late data for a connection that failed: the buffer goes straight back.
            (1.., Some(bid)) if c.done => {
                self.bufs.provide(bid);
                self.freed = true;
            }
            (1.., Some(bid)) => {
                self.stats.bytes_in += res as u64;
                c.queue.push_back(Chunk {
                    bid,
                    start: 0,
                    end: res as usize,
                });
                if c.queue.len() >= HELD_MAX && !c.paused {
                    c.paused = true;
                    if more {
                        self.cancel_recv(key)?;
                    }
                }
                self.send_next(key)?;
            }
            (r, _) if r == -libc::ENOBUFS => {
                // The ring ran dry: this recv waits until a send returns a buffer.
                self.starved.push(key);
                return Ok(());
            }
            (r, _) if r == -libc::ECANCELED => {}
            (0, _) => c.done = true,
            _ => {
                self.stats.errors += 1;
                self.fail(key)?;
            }
        }
        if more { Ok(()) } else { self.arm_recv(key) }
    }

    fn cancel_recv(&mut self, key: usize) -> anyhow::Result<()> {
        let Some(c) = self.conns.get_mut(key) else {
            return Ok(());
        };
        if !c.recv_armed || c.cancelling {
            return Ok(());
        }
        c.cancelling = true;
        self.push(
            opcode::AsyncCancel::new(ud(key, RECV))
                .build()
                .user_data(ud(key, CANCEL)),
        )
    }

    fn send_next(&mut self, key: usize) -> anyhow::Result<()> {
        let Some(c) = self.conns.get_mut(key) else {
            return Ok(());
        };
        let (Some(head), false) = (c.queue.front(), c.sending) else {
            return Ok(());
        };
        let ptr = self.bufs.addr(head.bid, head.start);
        let len = (head.end - head.start) as u32;
        let sqe = opcode::Send::new(Fd(c.stream.as_raw_fd()), ptr, len).flags(libc::MSG_NOSIGNAL);
        c.sending = true;
        self.push(sqe.build().user_data(ud(key, SEND)))
    }

    fn sent(&mut self, key: usize, res: i32) -> anyhow::Result<()> {
        let Some(c) = self.conns.get_mut(key) else {
            return Ok(());
        };
        c.sending = false;
        if res <= 0 {
            self.stats.errors += 1;
            return self.fail(key);
        }
        self.stats.bytes_out += res as u64;
        if let Some(head) = c.queue.front_mut() {
            // A short send leaves the rest of the buffer at the head, sent next.
            head.start += res as usize;
            if head.start >= head.end {
                let bid = head.bid;
                c.queue.pop_front();
                self.bufs.provide(bid);
                self.freed = true;
            }
        }
        if c.paused && c.queue.is_empty() {
            c.paused = false;
            self.arm_recv(key)?;
        }
        self.send_next(key)
    }

    /// An error: drop the pending echo and stop receiving.
    fn fail(&mut self, key: usize) -> anyhow::Result<()> {
        let Some(c) = self.conns.get_mut(key) else {
            return Ok(());
        };
        c.done = true;
        let keep = usize::from(c.sending);
        for chunk in c.queue.drain(keep..) {
            self.bufs.provide(chunk.bid);
        }
        self.freed = true;
        self.cancel_recv(key)
    }

    /// Closes a finished connection once no operation of it is in flight, so that no
    /// later CQE can name a key that was given to another connection.
    fn close_if_done(&mut self, key: usize) {
        let Some(c) = self.conns.get(key) else { return };
        if c.done && c.queue.is_empty() && !(c.sending || c.recv_armed || c.cancelling) {
            self.conns.remove(key);
            self.stats.closed += 1;
        }
    }
}

fn ud(key: usize, kind: u64) -> u64 {
    (key as u64) << 3 | kind
}
