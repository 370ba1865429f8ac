//! Pseudo-blocking operations: push an SQE on the current worker's ring, park the fiber
//! until the CQE arrives, hand back the result.
//!
//! On a fiber the SQE is only queued; the worker submits the whole round's batch with one
//! `io_uring_enter` after the fibers of the round have run. Off a fiber (a plain thread, such
//! as `main` calling into a `TcpStream`), the operation goes through a small ring private to
//! that thread and blocks the thread, so the same types work everywhere.

use std::cell::RefCell;
use std::io;

use crate::park::{self, Parked, Waker};
use crate::runtime::Shared;
use crate::sys::coro;
use crate::sys::op::{self, OpRef, Sqe};
use crate::sys::ring::{RingOwner, RingSetup};
use crate::worker;

/// An operation that was handed to a ring.
#[derive(Debug)]
pub(crate) struct Pushed {
    pub(crate) op: OpRef,
    /// The runtime (its [`Shared::id`]) and worker whose ring holds it (`None`: a thread
    /// ring, or failed early). A number, not an `Arc`: a clone and a drop of a shared count
    /// per operation cost more than the rare cancel from another thread's lookup.
    ring: Option<(u64, usize)>,
}

thread_local! {
    static THREAD_RING: RefCell<Option<RingOwner>> = const { RefCell::new(None) };
}

fn shutting_down() -> io::Error {
    io::Error::from_raw_os_error(libc::ECANCELED)
}

/// Pushes an operation on the ring of the current worker (or of this thread).
pub(crate) fn submit((sqe, op): (Sqe, OpRef)) -> io::Result<Pushed> {
    if coro::in_teardown() {
        return Err(shutting_down());
    }
    if park::on_fiber()
        && let Some(ctx) = worker::current()
    {
        if !worker::accepting_io(&ctx.rt) {
            op::fail_unsubmitted(&op, libc::ECANCELED);
            return Ok(Pushed { op, ring: None });
        }
        ctx.ring.push(sqe)?;
        ctx.stats().ops_submitted.inc();
        return Ok(Pushed {
            op,
            ring: Some((ctx.rt.id, ctx.index)),
        });
    }
    THREAD_RING.with(|r| {
        let mut r = r.borrow_mut();
        if r.is_none() {
            *r = Some(RingOwner::new(RingSetup {
                entries: 16,
                ..RingSetup::default()
            })?);
        }
        match r.as_ref() {
            Some(ring) => ring.push(sqe),
            None => Err(io::Error::other("no ring")),
        }
    })?;
    Ok(Pushed { op, ring: None })
}

/// Blocks the calling thread in its private ring until something completes.
fn thread_ring_wait() -> io::Result<()> {
    THREAD_RING.with(|r| {
        let r = r.borrow();
        let Some(ring) = r.as_ref() else {
            return Ok(());
        };
        ring.wait()?;
        // Completions here only ever belong to this thread's own operations.
        ring.try_reap(usize::MAX, drop);
        Ok(())
    })
}

/// Waits for the next result of a pushed operation: `(res, flags)`.
pub(crate) fn wait(p: &Pushed) -> io::Result<(i32, u32)> {
    wait_data(p).map(|(res, flags, _)| (res, flags))
}

/// Waits for the next result of a pushed operation, with the bytes of the provided buffer
/// its CQE selected (multishot recv).
#[inline]
pub(crate) fn wait_data(p: &Pushed) -> io::Result<op::Completion> {
    if !(park::on_fiber() && p.ring.is_some()) {
        return wait_data_thread(p);
    }
    loop {
        match p.op.poll_data(Waker::current) {
            Ok(Some(r)) => return Ok(r),
            Err(()) => return Err(shutting_down()),
            Ok(None) => {}
        }
        if park::park() == Parked::Cancelled {
            cancel(p);
            return Err(shutting_down());
        }
    }
}

/// [`wait_data`] off a fiber, or for an op no worker's ring holds. Out of line: a fiber
/// parks inside `wait_data`, and what this path would add to its frame would be cold lines
/// on the fiber's stack when it is resumed.
#[cold]
#[inline(never)]
fn wait_data_thread(p: &Pushed) -> io::Result<op::Completion> {
    loop {
        match p.op.poll_data(|| Waker::Thread(std::thread::current())) {
            Ok(Some(r)) => return Ok(r),
            Err(()) => return Err(shutting_down()),
            Ok(None) => {}
        }
        if p.ring.is_some() {
            // A plain thread waiting for an op a worker's ring holds (a multishot armed by a
            // fiber): the worker that reaps it unparks this thread.
            std::thread::park();
        } else {
            thread_ring_wait()?;
        }
    }
}

/// Submits an operation and waits for its (single) result; a negative result becomes an
/// `io::Error`.
pub(crate) fn run(sqe: (Sqe, OpRef)) -> io::Result<(i32, OpRef)> {
    let p = submit(sqe)?;
    let (res, _) = wait(&p)?;
    if res < 0 {
        return Err(io::Error::from_raw_os_error(-res));
    }
    Ok((res, p.op))
}

/// Asks the ring that holds `p` to cancel it. The op's memory stays alive until its CQE.
pub(crate) fn cancel(p: &Pushed) {
    let Some((id, index)) = p.ring else { return };
    if p.op.is_done() {
        return;
    }
    let request = |rt: &Shared| rt.request(index, |r| r.cancels.push(p.op.clone()));
    if let Some(ctx) = worker::current()
        && ctx.rt.id == id
    {
        if ctx.index == index && !coro::in_teardown() {
            let _ = ctx.ring.push(Sqe::cancel(&p.op));
        } else {
            request(&ctx.rt);
        }
        return;
    }
    // A thread that is none of the runtime's workers. A runtime already gone has no ring
    // left to cancel on.
    if let Some(rt) = Shared::find(id) {
        request(&rt);
    }
}
