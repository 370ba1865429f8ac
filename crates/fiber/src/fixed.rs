//! A stream's slot in the table of fixed files of the worker that first did I/O on it.
//!
//! The first operation a fiber pushes for a stream registers the socket in its worker's
//! table ([`crate::sys::files`]); from then on every SQE that worker pushes for the stream
//! names the slot, and the kernel skips a descriptor lookup (`fget`/`fput`) per operation.
//! SQEs pushed anywhere else (another worker, a plain thread's ring) name the descriptor,
//! which stays open beside the slot. Dropping the stream empties the slot: at once on the
//! owner worker, or by a request to it from any other thread; until then the table's
//! reference keeps the socket open, so its FIN leaves when the owner gets to the request.

use std::os::fd::RawFd;
use std::sync::{Arc, OnceLock};

use crate::park;
use crate::runtime::Shared;
use crate::sys::op::Target;
use crate::worker;

/// Where a stream's socket is registered.
#[derive(Debug)]
struct Registered {
    rt: Arc<Shared>,
    worker: usize,
    slot: u32,
}

/// The fixed-file slot of one stream: unset until its first operation on a fiber of a
/// runtime with fixed files, then registered (or `None`: the table was full or refused).
#[derive(Debug, Default)]
pub(crate) struct FixedSlot(OnceLock<Option<Registered>>);

impl FixedSlot {
    /// How an SQE pushed from the calling thread should name `fd`, registering it in this
    /// worker's table the first time.
    pub(crate) fn target(&self, fd: RawFd) -> Target {
        if !park::on_fiber() {
            return Target::Fd(fd);
        }
        worker::with_current(|ctx| match self.0.get() {
            Some(Some(r)) if r.worker == ctx.index && Arc::ptr_eq(&r.rt, &ctx.rt) => {
                Target::Fixed(r.slot)
            }
            Some(_) => Target::Fd(fd),
            None if !ctx.ring.has_fixed_files() => Target::Fd(fd),
            None => {
                let slot = ctx.ring.insert_file(fd);
                if slot.is_some() {
                    ctx.stats().fixed_files.inc();
                }
                let registered = slot.map(|slot| Registered {
                    rt: Arc::clone(&ctx.rt),
                    worker: ctx.index,
                    slot,
                });
                match self.0.set(registered) {
                    Ok(()) => slot.map_or(Target::Fd(fd), Target::Fixed),
                    // Another worker registered it first: this slot is not needed.
                    Err(lost) => {
                        if let Some(r) = lost {
                            ctx.ring.remove_file(r.slot);
                        }
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
        let Some(Some(r)) = self.0.take() else {
            return;
        };
        let here = worker::with_current(|ctx| {
            let owner = ctx.index == r.worker && Arc::ptr_eq(&ctx.rt, &r.rt);
            if owner {
                ctx.ring.remove_file(r.slot);
            }
            owner
        });
        if here != Some(true) {
            r.rt.request(r.worker, |q| q.file_removals.push(r.slot));
        }
    }
}
