//! A ring's table of fixed files: sockets registered once, so that each SQE names its socket
//! by slot (`IOSQE_FIXED_FILE`) and the kernel skips the `fget`/`fput` of a descriptor
//! lookup per operation.
//!
//! A slot is filled with a synchronous `IORING_REGISTER_FILES_UPDATE` (its error is known at
//! once, and the caller falls back to the descriptor) and emptied with an
//! `IORING_OP_FILES_UPDATE` SQE, which the kernel runs after every SQE pushed before it:
//! those may still name the slot. The slot is reused only once that SQE has completed, so a
//! new file never lands in a slot an earlier SQE still means for the old one. Operations in
//! flight keep the file they took at issue; the table's reference is dropped by the removal.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;

use io_uring::IoUring;

use super::op::{OpRef, Sqe};

/// Slots of a worker's table at most; the soft `RLIMIT_NOFILE` caps it lower.
pub(crate) const MAX_FIXED_FILES: u32 = 1 << 16;

/// The fixed-file table of one ring and its free slots; only the ring's owner uses it.
#[derive(Debug)]
pub(crate) struct FixedFiles {
    capacity: u32,
    /// Slots never used yet start here.
    next: Cell<u32>,
    free: RefCell<Vec<u32>>,
    /// Slots whose removal SQE was pushed, free once it completes.
    removing: RefCell<Vec<(u32, OpRef)>>,
}

impl FixedFiles {
    /// Registers a sparse table of `capacity` slots on `uring`.
    pub(crate) fn register(uring: &IoUring, capacity: u32) -> io::Result<FixedFiles> {
        uring.submitter().register_files_sparse(capacity)?;
        Ok(FixedFiles {
            capacity,
            next: Cell::new(0),
            free: RefCell::new(Vec::new()),
            removing: RefCell::new(Vec::new()),
        })
    }

    /// Puts `fd` in a free slot and returns it; `None` when the table is full or the kernel
    /// refuses (the caller then names the file by descriptor).
    pub(crate) fn insert(&self, uring: &IoUring, fd: RawFd) -> Option<u32> {
        let slot = self.take_slot()?;
        match uring.submitter().register_files_update(slot, &[fd]) {
            Ok(1) => Some(slot),
            _ => {
                self.free.borrow_mut().push(slot);
                None
            }
        }
    }

    /// The SQE that empties `slot`; the slot is free again once it completes.
    pub(crate) fn remove(&self, slot: u32) -> Sqe {
        let (sqe, op) = Sqe::files_remove(slot);
        self.removing.borrow_mut().push((slot, op));
        sqe
    }

    fn take_slot(&self) -> Option<u32> {
        let mut free = self.free.borrow_mut();
        if free.is_empty() {
            self.removing.borrow_mut().retain(|(slot, op)| {
                let done = op.is_done();
                if done {
                    free.push(*slot);
                }
                !done
            });
        }
        if let Some(slot) = free.pop() {
            return Some(slot);
        }
        let next = self.next.get();
        (next < self.capacity).then(|| {
            self.next.set(next + 1);
            next
        })
    }
}

/// Slots of a worker's table: as many as the soft `RLIMIT_NOFILE` (the kernel refuses a
/// larger table), up to [`MAX_FIXED_FILES`].
pub(crate) fn table_size() -> u32 {
    nofile_limit().min(MAX_FIXED_FILES)
}

fn nofile_limit() -> u32 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live `rlimit` the call fills in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    u32::try_from(lim.rlim_cur).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use super::super::op::Target;
    use super::super::ring::{RingOwner, RingSetup};
    use super::*;

    fn ring_with_table(slots: u32) -> Option<RingOwner> {
        match RingOwner::new(RingSetup {
            entries: 8,
            fixed_files: slots,
            ..RingSetup::default()
        }) {
            Ok(r) if r.has_fixed_files() => Some(r),
            Ok(_) => {
                eprintln!("skipping: this kernel refuses a sparse table of fixed files");
                None
            }
            Err(e) => {
                eprintln!("skipping: io_uring unavailable: {e}");
                None
            }
        }
    }

    /// A table of two: both slots carry sends, a third socket finds it full, and an emptied
    /// slot is reused only once its removal has completed; after the removal and the close
    /// of the descriptor, the peer sees the end of the stream (the table's reference is
    /// gone).
    #[test]
    fn slots_carry_io_and_are_reused_only_after_their_removal_completed() {
        let Some(ring) = ring_with_table(2) else {
            return;
        };
        let pairs: Vec<_> = (0..3).map(|_| UnixStream::pair().unwrap()).collect();
        for p in &pairs {
            p.1.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        }
        let a = ring
            .insert_file(pairs[0].0.as_raw_fd())
            .expect("a free slot");
        let b = ring
            .insert_file(pairs[1].0.as_raw_fd())
            .expect("a free slot");
        assert_ne!(a, b);
        assert_eq!(ring.insert_file(pairs[2].0.as_raw_fd()), None, "full");

        for (slot, pair) in [(a, &pairs[0]), (b, &pairs[1])] {
            let (sqe, op) = Sqe::send(Target::Fixed(slot), b"hi");
            ring.push(sqe).unwrap();
            ring.complete(&op);
            let mut got = [0u8; 2];
            (&pair.1).read_exact(&mut got).unwrap();
            assert_eq!(&got, b"hi");
        }

        ring.remove_file(a);
        assert_eq!(
            ring.insert_file(pairs[2].0.as_raw_fd()),
            None,
            "reused before the removal reached the kernel"
        );
        let (sqe, op) = Sqe::timeout(Duration::ZERO);
        ring.push(sqe).unwrap();
        ring.complete(&op);
        let c = ring.insert_file(pairs[2].0.as_raw_fd());
        assert_eq!(c, Some(a), "the emptied slot is reused");

        let [first, ..] = <[_; 3]>::try_from(pairs).unwrap();
        let (mine, peer) = first;
        drop(mine);
        let mut rest = Vec::new();
        (&peer).read_to_end(&mut rest).expect("EOF, not a timeout");
        assert!(rest.is_empty());
    }
}
