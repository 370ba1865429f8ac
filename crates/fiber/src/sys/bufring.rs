//! A ring of provided buffers (`IORING_REGISTER_PBUF_RING`) for multishot `recv`.
//!
//! The kernel picks a buffer per completion and names it in the CQE (`IORING_CQE_F_BUFFER`).
//! Whoever reaps that CQE wraps the buffer in a [`Chunk`], which lends its bytes to the
//! stream's reader without a copy; dropping the chunk (the reader consumed it, or the op
//! holding it went away) offers the buffer to the kernel again. An idle connection holds no
//! buffer: the ring's buffers are shared by every connection of the worker, and only data
//! received and not yet read occupies one.
//!
//! ```text
//!  ring (one page-aligned mapping, kernel reads)      buffers (one mapping, kernel writes)
//!  +-----------------------------+                    +----------+----------+-----+
//!  | addr | len | bid | resv=tail|  entry 0           | bid 0    | bid 1    | ... |
//!  | addr | len | bid | resv     |  entry 1           +----------+----------+-----+
//!  | ...                         |
//!  +-----------------------------+
//!  the producer (us) writes entries at `tail & mask`, then publishes `tail` (release)
//! ```

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The buffer group id; each ring has its own group namespace, so every worker uses 0.
pub(crate) const BGID: u16 = 0;

#[repr(C)]
struct Entry {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

struct Map {
    addr: usize,
    len: usize,
}

impl Map {
    fn new(len: usize) -> io::Result<Map> {
        // SAFETY: a fresh anonymous private mapping aliases nothing; the result is checked.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Map {
            addr: addr as usize,
            len,
        })
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: a mapping this value created and owns; its owner guarantees the kernel no
        // longer uses it (see `RingShared`'s drop).
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// A provided-buffer ring with `entries` buffers of `buf_size` bytes.
pub(crate) struct BufRing {
    ring: Map,
    bufs: Map,
    entries: u16,
    buf_size: usize,
    /// The producer index; the lock orders the threads that recycle buffers.
    tail: Mutex<u16>,
}

impl std::fmt::Debug for BufRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufRing")
            .field("entries", &self.entries)
            .field("buf_size", &self.buf_size)
            .finish()
    }
}

impl BufRing {
    /// Maps the ring and the buffers and offers every buffer to the kernel (once
    /// registered). `entries` must be a power of two.
    pub(crate) fn new(entries: u16, buf_size: usize) -> io::Result<BufRing> {
        if !entries.is_power_of_two() || buf_size == 0 || buf_size > u32::MAX as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring entries must be a power of two",
            ));
        }
        let ring = Map::new(usize::from(entries) * std::mem::size_of::<Entry>())?;
        let bufs = Map::new(usize::from(entries) * buf_size)?;
        let br = BufRing {
            ring,
            bufs,
            entries,
            buf_size,
            tail: Mutex::new(0),
        };
        for bid in 0..entries {
            br.offer(bid);
        }
        Ok(br)
    }

    /// The ring's address, for registration.
    pub(crate) fn ring_addr(&self) -> u64 {
        self.ring.addr as u64
    }

    pub(crate) fn entries(&self) -> u16 {
        self.entries
    }

    /// Writes buffer `bid` at the tail and publishes it to the kernel.
    fn offer(&self, bid: u16) {
        let mut tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = usize::from(*tail & (self.entries - 1));
        let entry = (self.ring.addr + slot * std::mem::size_of::<Entry>()) as *mut Entry;
        let addr = (self.bufs.addr + usize::from(bid) * self.buf_size) as u64;
        // SAFETY: [1] `slot` is inside the ring mapping; [2] the slot is at or past the tail,
        // which the kernel does not read until we publish the new tail below; [3] the lock
        // makes us the only writer. The `resv` field of entry 0 is the tail, so only the
        // other three fields are written.
        unsafe {
            std::ptr::addr_of_mut!((*entry).addr).write(addr);
            std::ptr::addr_of_mut!((*entry).len).write(self.buf_size as u32);
            std::ptr::addr_of_mut!((*entry).bid).write(bid);
        }
        *tail = tail.wrapping_add(1);
        let tail_ptr = (self.ring.addr + 14) as *mut u16;
        // SAFETY: the tail is the `u16` at byte 14 of the page-aligned ring (the `resv` of
        // entry 0), shared with the kernel, which reads it atomically; it is 2-aligned.
        let tail_atomic = unsafe { AtomicU16::from_ptr(tail_ptr) };
        tail_atomic.store(*tail, Ordering::Release);
    }

    /// Lends the `len` bytes the kernel put in buffer `bid`; the buffer goes back to the
    /// kernel when the chunk is dropped.
    ///
    /// # Safety
    ///
    /// `bid` comes from a CQE (`IORING_CQE_F_BUFFER`) of the ring this buffer ring is
    /// registered with, `len` is that CQE's result, and each such CQE is handled once: the
    /// kernel has finished writing the buffer and does not own it until it is offered again.
    pub(crate) unsafe fn lend(ring: &Arc<BufRing>, bid: u16, len: usize) -> Option<Chunk> {
        if bid >= ring.entries {
            return None;
        }
        Some(Chunk {
            ring: Arc::clone(ring),
            bid,
            len: u32::try_from(len.min(ring.buf_size)).unwrap_or(0),
        })
    }
}

/// The bytes of one provided buffer, lent by the kernel to a reader.
///
/// # Invariant
///
/// From its CQE until this value is dropped, the kernel does not own buffer `bid` (it was
/// not offered again), so nothing writes its first `len` bytes, which the kernel filled.
pub(crate) struct Chunk {
    ring: Arc<BufRing>,
    bid: u16,
    len: u32,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk")
            .field("bid", &self.bid)
            .field("len", &self.len)
            .finish()
    }
}

impl Chunk {
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// The received bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        let src = (self.ring.bufs.addr + usize::from(self.bid) * self.ring.buf_size) as *const u8;
        // SAFETY: per the type's invariant the kernel wrote these `len` bytes (at most one
        // buffer: `lend` clamps) and nobody writes them while the chunk lives; the mapping
        // lives as long as the `Arc<BufRing>` this chunk holds.
        unsafe { std::slice::from_raw_parts(src, self.len()) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.ring.offer(self.bid);
    }
}
