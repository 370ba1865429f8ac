//! A stream's slot in the table of fixed files of the worker that first did I/O on it.
//!
//! The first operation a fiber pushes for a stream registers the socket in its worker's
//! table ([`crate::sys::files`]); from then on every SQE that worker pushes for the stream
//! names the slot, and the kernel skips a descriptor lookup (`fget`/`fput`) per operation.
//! SQEs pushed anywhere else (another worker, a plain thread's ring) name the descriptor,
//! which stays open beside the slot. Dropping the stream empties the slot: at once on the
//! owner worker, or by a request to it from any other thread; until then the table's
//! reference keeps the socket open, so its FIN leaves when the owner gets to the request.
//!
//! The worker of the first operation is remembered with or without a table: with work
//! stealing a fiber can move, and an SQE pushed for the stream from another worker's ring is
//! counted (`Stats`' `cross_ring_ops`), since it pays the descriptor lookup and its
//! completion lands on a ring the stream's other operations do not use.

use std::os::fd::RawFd;
use std::sync::{Arc, OnceLock};

use crate::park;
use crate::runtime::Shared;
use crate::sys::op::Target;
use crate::worker;

/// The worker whose ring owns a stream's socket, and its slot in that ring's table.
#[derive(Debug)]
struct Registered {
    rt: Arc<Shared>,
    worker: usize,
    /// `None`: the runtime has no table, or it was full or refused.
    slot: Option<u32>,
}

/// The owner of one stream's socket: unset until its first operation on a fiber, then the
/// worker that did it (and, in a runtime with fixed files, the socket's slot in its table).
/// That worker's ring holds the stream's multishot recv; an SQE another worker pushes for
/// the stream is counted as a cross-ring operation.
#[derive(Debug, Default)]
pub(crate) struct FixedSlot(OnceLock<Registered>);

impl FixedSlot {
    /// How an SQE pushed from the calling thread should name `fd`, registering it in this
    /// worker's table the first time.
    pub(crate) fn target(&self, fd: RawFd) -> Target {
        if !park::on_fiber() {
            return Target::Fd(fd);
        }
        worker::with_current(|ctx| match self.0.get() {
            Some(r) if r.worker == ctx.index && Arc::ptr_eq(&r.rt, &ctx.rt) => {
                r.slot.map_or(Target::Fd(fd), Target::Fixed)
            }
            Some(_) => {
                ctx.stats().cross_ring_ops.inc();
                Target::Fd(fd)
            }
            None => {
                let slot = if ctx.ring.has_fixed_files() {
                    ctx.ring.insert_file(fd)
                } else {
                    None
                };
                if slot.is_some() {
                    ctx.stats().fixed_files.inc();
                }
                let registered = Registered {
                    rt: Arc::clone(&ctx.rt),
                    worker: ctx.index,
                    slot,
                };
                match self.0.set(registered) {
                    Ok(()) => slot.map_or(Target::Fd(fd), Target::Fixed),
                    // Another worker did the first operation: this slot is not needed.
                    Err(lost) => {
                        if let Some(s) = lost.slot {
                            ctx.ring.remove_file(s);
                        }
                        ctx.stats().cross_ring_ops.inc();
                        Target::Fd(fd)
                    }
                }
            }
        })
        .unwrap_or(Target::Fd(fd))
    }

    /// Empties the slot, if the stream has one; SQEs already pushed that name it still
    /// reach the kernel first.
    pub(crate) fn release(&mut self) {
        let Some(Registered {
            rt,
            worker: owner,
            slot: Some(slot),
        }) = self.0.take()
        else {
            return;
        };
        let here = worker::with_current(|ctx| {
            let here = ctx.index == owner && Arc::ptr_eq(&ctx.rt, &rt);
            if here {
                ctx.ring.remove_file(slot);
            }
            here
        });
        if here != Some(true) {
            rt.request(owner, |q| q.file_removals.push(slot));
        }
    }
}
