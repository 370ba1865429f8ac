//! The counters every server keeps and prints as one line on stderr when it
//! stops, so that a run can be checked against what the load generator saw.
//!
//! Counting costs every server the same: nothing shared is written per message.
//! Each flow of control that counts (a connection's thread, task, fiber or coroutine,
//! a reactor's loop, an acceptor) owns a [`Tally`], one cache line of its own that only
//! it writes, with plain loads and stores. The [`Counters`] that handed the tally out
//! sums every line it ever handed out when the stop line is printed:
//!
//! ```text
//!   Counters ── Mutex ─┬─ lines: [Block][Block][Block] …  every block ever made, summed
//!                      └─ free:  [Block] …                 blocks of dropped tallies
//!   Tally (owned, &mut) ──► one Block, written by its owner alone
//! ```
//!
//! A dropped tally's block keeps its counts and goes back to the free list, where the
//! next tally takes it and goes on adding: the sum stays right and the blocks number
//! the most tallies ever alive at once, not the connections ever served. The lock is
//! taken when a tally is made or dropped (once per connection at most), never per
//! message.
//!
//! ```
//! use service::counters::{Count, Counters};
//!
//! let counters = Counters::default();
//! let mut worker = counters.tally();
//! worker.add(Count::BytesIn, 16);
//! std::thread::scope(|s| {
//!     let mut other = counters.tally();
//!     s.spawn(move || other.add(Count::BytesIn, 4));
//! });
//! assert_eq!(counters.snapshot().bytes_in, 20);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What a server counts; the order is [`Snapshot::to_bytes`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Connections accepted.
    Accepted,
    /// Connections closed (by either side).
    Closed,
    /// Bytes read from clients.
    BytesIn,
    /// Bytes written to clients.
    BytesOut,
    /// Chat lines handled (commands, including the ones answered with ERR).
    Lines,
    /// Chat messages appended to a room.
    Messages,
    /// Slow subscribers disconnected.
    Cut,
    /// Connections that ended with an I/O error.
    Errors,
}

/// One cache line of counts, indexed by [`Count`]. All-zero bytes are a valid (zero)
/// block, so one can live in a zero-filled shared mapping.
///
/// # Invariant
/// One writer at a time: the [`Tally`] that holds it. Others only read it (the sum of
/// the stop line), which is why the counts are atomics written without a
/// read-modify-write: a load and a store, as cheap as a plain integer.
#[derive(Debug, Default)]
// 128 bytes: x86's spatial prefetcher pulls cache lines in pairs, so two blocks side
// by side would still share a line's traffic (crossbeam's `CachePadded` says the same).
#[repr(align(128))]
pub struct Block {
    counts: [AtomicU64; 8],
}

impl Block {
    /// Reads every count (while its writer may still be counting).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::from_fields(self.counts.each_ref().map(|c| c.load(Relaxed)))
    }
}

/// The counts of one flow of control: see the module's doc. `&mut` to add, so the
/// borrow checker keeps to one writer per block.
#[derive(Debug)]
pub struct Tally {
    block: &'static Block,
    /// Where the block goes back when the tally drops; `None` for [`Tally::over`].
    home: Option<Arc<Registry>>,
}

impl Tally {
    /// Adds `n` to one count.
    #[inline]
    pub fn add(&mut self, which: Count, n: u64) {
        let c = &self.block.counts[which as usize];
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// A tally over a block its caller owns, which nothing sums but the caller (a block
    /// in memory shared with forked children, say). The caller gives each block to one
    /// tally at a time; two at once would lose counts (never memory safety).
    pub fn over(block: &'static Block) -> Tally {
        Tally { block, home: None }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if let Some(home) = &self.home {
            // The lock orders this owner's last stores before the next owner's loads.
            home.lock().free.push(self.block);
        }
    }
}

#[derive(Debug, Default)]
struct Registry(Mutex<Blocks>);

#[derive(Debug, Default)]
struct Blocks {
    all: Vec<&'static Block>,
    free: Vec<&'static Block>,
    /// Counts from elsewhere: [`Counters::absorb`].
    absorbed: [u64; 8],
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Blocks> {
        // The lists stay consistent whatever panicked while one was held.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every tally of a server, summed for the stop line. Cloning shares the same counts.
#[derive(Debug, Default, Clone)]
pub struct Counters(Arc<Registry>);

impl Counters {
    /// A tally for one flow of control: a free block if a dropped tally left one, else a
    /// new one.
    pub fn tally(&self) -> Tally {
        let mut blocks = self.0.lock();
        let block = blocks.free.pop().unwrap_or_else(|| {
            // Leaked on purpose: a block is summed until the process exits, and reused
            // once its tally drops, so they number the most tallies alive at once.
            let block: &'static Block = Box::leak(Box::default());
            blocks.all.push(block);
            block
        });
        Tally {
            block,
            home: Some(Arc::clone(&self.0)),
        }
    }

    /// The sum of every tally, live or dropped, and of what was absorbed.
    pub fn snapshot(&self) -> Snapshot {
        let blocks = self.0.lock();
        let mut sum = blocks.absorbed;
        for block in &blocks.all {
            for (s, c) in sum.iter_mut().zip(&block.counts) {
                *s = s.wrapping_add(c.load(Relaxed));
            }
        }
        Snapshot::from_fields(sum)
    }

    /// Adds counts kept elsewhere (a reactor's, a child process's, the hub's messages).
    pub fn absorb(&self, s: &Snapshot) {
        let mut blocks = self.0.lock();
        for (a, v) in blocks.absorbed.iter_mut().zip(s.fields()) {
            *a = a.wrapping_add(v);
        }
    }

    /// Prints the one stop line on stderr: `<name>: stopped: accepted=… …`.
    pub fn report(&self, name: &str) {
        eprintln!("{name}: stopped: {}", self.snapshot());
    }
}

/// A plain copy of the counts, to add up and print.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// See [`Count::Accepted`].
    pub accepted: u64,
    /// See [`Count::Closed`].
    pub closed: u64,
    /// See [`Count::BytesIn`].
    pub bytes_in: u64,
    /// See [`Count::BytesOut`].
    pub bytes_out: u64,
    /// See [`Count::Lines`].
    pub lines: u64,
    /// See [`Count::Messages`].
    pub messages: u64,
    /// See [`Count::Cut`].
    pub cut: u64,
    /// See [`Count::Errors`].
    pub errors: u64,
}

impl Snapshot {
    /// The counters as eight little-endian u64s, for a child to send its parent
    /// through a pipe in one atomic write.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        for (chunk, v) in out.chunks_exact_mut(8).zip(self.fields()) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The inverse of [`Snapshot::to_bytes`].
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let mut v = [0u64; 8];
        for (x, chunk) in v.iter_mut().zip(b.chunks_exact(8)) {
            let mut le = [0u8; 8];
            le.copy_from_slice(chunk);
            *x = u64::from_le_bytes(le);
        }
        Self::from_fields(v)
    }

    /// The counts in [`Count`]'s order.
    fn fields(&self) -> [u64; 8] {
        [
            self.accepted,
            self.closed,
            self.bytes_in,
            self.bytes_out,
            self.lines,
            self.messages,
            self.cut,
            self.errors,
        ]
    }

    fn from_fields(v: [u64; 8]) -> Self {
        let [
            accepted,
            closed,
            bytes_in,
            bytes_out,
            lines,
            messages,
            cut,
            errors,
        ] = v;
        Snapshot {
            accepted,
            closed,
            bytes_in,
            bytes_out,
            lines,
            messages,
            cut,
            errors,
        }
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "accepted={} closed={} bytes_in={} bytes_out={} lines={} messages={} cut_subscribers={} errors={}",
            self.accepted,
            self.closed,
            self.bytes_in,
            self.bytes_out,
            self.lines,
            self.messages,
            self.cut,
            self.errors
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip_through_bytes() {
        let s = Snapshot {
            bytes_in: 7,
            cut: 1,
            errors: u64::MAX,
            ..Snapshot::default()
        };
        assert_eq!(Snapshot::from_bytes(&s.to_bytes()), s);
    }

    #[test]
    fn the_sum_holds_every_tally_live_dropped_and_absorbed() {
        let counters = Counters::default();
        let mut live = counters.tally();
        live.add(Count::BytesIn, 10);
        std::thread::scope(|s| {
            for i in 1..=8u64 {
                let mut t = counters.tally();
                s.spawn(move || {
                    for _ in 0..1000 {
                        t.add(Count::BytesOut, i);
                    }
                    t.add(Count::Closed, 1);
                });
            }
        });
        counters.absorb(&Snapshot {
            messages: 3,
            bytes_in: 1,
            ..Snapshot::default()
        });
        let s = counters.snapshot();
        assert_eq!(s.bytes_in, 11);
        assert_eq!(s.bytes_out, 1000 * (1..=8).sum::<u64>());
        assert_eq!((s.closed, s.messages), (8, 3));
        assert!(s.to_string().contains("bytes_in=11 bytes_out=36000"));
        live.add(Count::BytesIn, 1);
        assert_eq!(
            counters.snapshot().bytes_in,
            12,
            "a live tally is read as it counts"
        );
    }

    #[test]
    fn a_dropped_tallys_block_is_reused_and_keeps_its_counts() {
        let counters = Counters::default();
        for _ in 0..100 {
            let mut t = counters.tally();
            t.add(Count::Accepted, 1);
        }
        assert_eq!(counters.snapshot().accepted, 100);
        assert_eq!(
            counters.0.lock().all.len(),
            1,
            "one tally alive at a time, one block"
        );
        let (mut a, mut b) = (counters.tally(), counters.tally());
        a.add(Count::Lines, 1);
        b.add(Count::Lines, 1);
        assert_eq!(counters.0.lock().all.len(), 2);
        assert_eq!(counters.snapshot().lines, 2);
    }

    #[test]
    fn a_tally_over_a_callers_block_is_not_summed_by_any_counters() {
        static BLOCK: Block = Block {
            counts: [const { AtomicU64::new(0) }; 8],
        };
        let counters = Counters::default();
        let mut t = Tally::over(&BLOCK);
        t.add(Count::Cut, 2);
        drop(t);
        assert_eq!(BLOCK.snapshot().cut, 2);
        assert_eq!(counters.snapshot(), Snapshot::default());
    }
}
