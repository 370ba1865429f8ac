//! Completion-queue overflows of a server's io_uring rings, read from outside the server,
//! whatever its runtime (no peer's runtime exposes them: monoio, compio, tokio-uring and
//! glommio have no call for it; srv-fiber counts them itself, `--runtime-stats`). A ring's
//! header is in the server's address space, where `/proc/PID/maps` names it
//! `anon_inode:[io_uring]` (the mapping at offset 0: heads, tails, masks, flags and
//! counters of `struct io_rings`), and `/proc/PID/mem` reads it (as the harness that
//! started the server may, `ptrace_scope` 1, or root). Two things are there:
//!
//! - `sq_flags & IORING_SQ_CQ_OVERFLOW`: completions wait on the kernel's overflow list
//!   now, because the completion queue was full when they came (each took the slow path:
//!   an allocation, and a flush at the runtime's next wait). Read with every sample of
//!   the server (every 500 ms outside a kept-still window, and at its edges) and once after
//!   the load, it says a ring overflowed and had not caught up then (a lower bound: a
//!   backlog flushed between two readings is not seen).
//! - `cq_overflow`: completions the kernel dropped, which on a kernel with
//!   `IORING_FEAT_NODROP` (5.5 on) happens only when it could not even allocate an
//!   overflow entry. Read at the point's start and after the load, its growth is lost
//!   completions.
//!
//! `/proc/PID/fdinfo` of a ring shows less: on 6.18 its heads and tails and
//! `CqOverflowList`, the completions parked on the overflow list at that instant (the same
//! as the flag), and no count of overflows; nor does the kernel keep one (its tracepoint
//! `io_uring:io_uring_cqe_overflow` would, with tracing on).
//!
//! `run::point` reads the drops at the server's start and after the load, the flag with
//! every sample (`run::procfs`) and after the load, and a point where either shows is
//! marked ⊘ (`Row::overflowed`): a runtime whose completions overflow does not run as its
//! ring was meant to, each overflowed completion on the kernel's slow path.
//!
//! It may call nothing of the run layer.

use std::fs;
use std::io::{Read, Seek, SeekFrom};

/// Offsets in `struct io_rings` (include/linux/io_uring_types.h): the submission and
/// completion heads and tails (4 words), the two masks, the two sizes, `sq_dropped`,
/// `sq_flags`, `cq_flags`, then `cq_overflow`.
const SQ_MASK: usize = 16;
const CQ_MASK: usize = 20;
const SQ_ENTRIES: usize = 24;
const CQ_ENTRIES: usize = 28;
const SQ_FLAGS: usize = 36;
const CQ_OVERFLOW: usize = 44;
/// `IORING_SQ_CQ_OVERFLOW` of `sq_flags`.
const SQ_CQ_OVERFLOW: u32 = 1 << 1;
const HEADER: usize = 48;

/// What the rings of a process say of their completion queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rings {
    /// Completions the kernel dropped so far, over every ring (`cq_overflow`).
    pub(crate) dropped: u64,
    /// Whether some ring has completions on the kernel's overflow list now.
    pub(crate) backlog: bool,
}

/// The state of every io_uring ring of process `pid`, or `None` when it has no ring (not an
/// io_uring server) or its memory cannot be read.
pub(crate) fn read(pid: u32) -> Option<Rings> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let rings = ring_mappings(&maps);
    if rings.is_empty() {
        return None;
    }
    let mut mem = fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut total = Rings::default();
    for addr in rings {
        let mut header = [0u8; HEADER];
        mem.seek(SeekFrom::Start(addr)).ok()?;
        mem.read_exact(&mut header).ok()?;
        let (dropped, backlog) = state_of(&header)?;
        total.dropped += u64::from(dropped);
        total.backlog |= backlog;
    }
    Some(total)
}

/// The start addresses of the rings' mappings (offset 0 of an `anon_inode:[io_uring]`; the
/// submission entries are mapped at `IORING_OFF_SQES`, 0x10000000, and are left out).
fn ring_mappings(maps: &str) -> Vec<u64> {
    maps.lines()
        .filter(|l| l.trim_end().ends_with("[io_uring]"))
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let range = fields.next()?;
            let offset = fields.nth(1)?;
            (u64::from_str_radix(offset, 16).ok()? == 0)
                .then(|| u64::from_str_radix(range.split('-').next()?, 16).ok())
                .flatten()
        })
        .collect()
}

/// `cq_overflow` of a ring's header and whether its overflow flag is up, or `None` when the
/// header is not one (its masks are not its sizes less one, powers of two): a layout this
/// code does not know.
fn state_of(header: &[u8; HEADER]) -> Option<(u32, bool)> {
    let word = |at: usize| u32::from_ne_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let ring = |mask: u32, entries: u32| entries.is_power_of_two() && mask == entries - 1;
    (ring(word(SQ_MASK), word(SQ_ENTRIES)) && ring(word(CQ_MASK), word(CQ_ENTRIES)))
        .then(|| (word(CQ_OVERFLOW), word(SQ_FLAGS) & SQ_CQ_OVERFLOW != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(sq: u32, cq: u32, overflow: u32, flags: u32) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        let mut put = |at: usize, v: u32| h[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put(SQ_MASK, sq - 1);
        put(CQ_MASK, cq - 1);
        put(SQ_ENTRIES, sq);
        put(CQ_ENTRIES, cq);
        put(CQ_OVERFLOW, overflow);
        put(SQ_FLAGS, flags);
        h
    }

    #[test]
    fn the_overflow_state_is_read_from_a_ring_header_and_only_from_one() {
        assert_eq!(state_of(&header(1024, 32768, 7, 0)), Some((7, false)));
        assert_eq!(state_of(&header(256, 512, 0, 2)), Some((0, true)));
        assert_eq!(state_of(&header(256, 512, 0, 1)), Some((0, false)));
        let mut bad = header(1024, 32768, 7, 0);
        bad[CQ_MASK] = 0;
        assert_eq!(state_of(&bad), None);
        assert_eq!(state_of(&[0; HEADER]), None);
    }

    #[test]
    fn only_the_rings_mappings_are_read() {
        let maps = "\
7f8e7ad6b000-7f8e7aded000 rw-s 00000000 00:10 8658638                    anon_inode:[io_uring]
7f8e7aded000-7f8e7adfd000 rw-s 10000000 00:10 8658638                    anon_inode:[io_uring]
7f8e7ae00000-7f8e7ae01000 rw-p 00000000 00:00 0                          [heap]
";
        assert_eq!(ring_mappings(maps), [0x7f8e_7ad6_b000]);
        assert!(ring_mappings("").is_empty());
    }

    /// A real ring, read as the harness reads a server's: sizes that validate, and a count.
    #[test]
    fn a_running_io_uring_server_has_readable_rings() {
        let spec = conformance::SERVERS
            .iter()
            .find(|s| s.id == "tokio_uring")
            .expect("tokio-uring is listed");
        let target = match spec.resolve().expect("building srv-tokio-uring") {
            conformance::Resolved::Ready(t) => t,
            conformance::Resolved::Skipped(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let server = target
            .start(&["--proto", "echo", "--workers", "1"])
            .expect("srv-tokio-uring starts");
        let rings = read(server.pid()).expect("its ring's header is read and validated");
        assert_eq!(rings.dropped, 0);
    }

    #[test]
    fn a_process_without_a_ring_has_no_count() {
        // This test process makes no io_uring.
        assert_eq!(read(std::process::id()), None);
    }
}
