//! In-flight io_uring operations and the memory the kernel reads or writes for them.
//!
//! An [`Op`] lives in a slot of a per-thread slab and is shared ([`OpRef`], a counted
//! reference) between the fiber that waits for it and the ring. When its SQE is pushed, one
//! reference goes into the SQE's `user_data` and comes back out of the final CQE; so the
//! memory of an operation (its buffer, socket address, timespec, path) is freed only after the
//! kernel is done with it, whatever happens to the fiber or the stream meanwhile. A fiber
//! reads that memory only after the operation is `Done`, under the op's lock. The lock and the
//! reference count sit side by side in the op ([`word`]); no op allocates once its thread's
//! slab is warm. Results are copied into the caller's buffer then (or, for a multishot recv,
//! lent from the ring's provided buffers as a `Chunk`): the kernel never writes into memory
//! the caller could free.
//!
//! By concern: this module is the op's state and the decoding of CQEs; [`word`] its lock and
//! reference count; [`slab`] where ops live and how they are counted; [`buf`] the memory an
//! op lends the kernel (pooled buffers, boxed values); [`sqe`] the constructors of SQEs and
//! their ops.
//!
//! The `user_data` of an SQE:
//!
//! ```text
//!  63                                                   3 2     0
//! +------------------------------------------------------+-------+
//! | address of the Op's slab slot, 64-aligned            |  tag  |
//! +------------------------------------------------------+-------+
//!   tag 0b000  an Op: the CQE completes it; the ring's reference is released on the final
//!              CQE (one without IORING_CQE_F_MORE)
//!   tag 0b001  a wake-up message (IORING_OP_MSG_RING from another worker); address bits 0
//!   tag 0b010  ignored: the sender's own CQE of a MSG_RING, the result of an ASYNC_CANCEL
//! ```

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use io_uring::types;

mod buf;
mod slab;
mod sqe;
mod word;

pub(crate) use slab::{OpRef, live_ops};
pub(crate) use sqe::{Sqe, Target};
use word::OpWord;

use self::buf::{RawBox, RawBuf};
use super::bufring::Chunk;
use super::fd::{RawAddr, close_unowned, owned_fd};
use crate::park::Waker;

pub(crate) const TAG_MASK: u64 = 0b111;
pub(crate) const TAG_OP: u64 = 0b000;
pub(crate) const TAG_WAKE: u64 = 0b001;
pub(crate) const TAG_IGNORE: u64 = 0b010;

const _: () = assert!(
    std::mem::align_of::<Op>() >= 8,
    "the tag needs three free bits"
);
const _: () = assert!(
    std::mem::size_of::<Op>() <= 128,
    "an op fits in two cache lines (a single-shot op's results cost it one word)"
);

/// Largest single read or write handed to the kernel.
pub(crate) const MAX_IO: usize = 1 << 20;

/// Bytes a multishot recv may hold received and not yet read before it is cancelled. Past
/// this the connection's reader is not keeping up (it may be blocked writing to a peer that
/// does not read), and receiving more would buffer without bound instead of leaving the data
/// in the socket, where TCP flow control pushes back on the sender. The reader re-arms the
/// recv once it has consumed what was buffered.
pub(crate) const RECV_BACKLOG: usize = 64 * 1024;

/// Connections a multishot accept may hold accepted and not yet taken before it is
/// cancelled, for the same reason: past this, new connections wait in the kernel's listen
/// backlog (as they would for a plain accept) instead of in descriptors the process holds.
pub(crate) const ACCEPT_BACKLOG: usize = 128;

/// The memory an operation lends the kernel.
enum Mem {
    None,
    Buf(RawBuf),
    Addr(RawBox<RawAddr>),
    Timespec(RawBox<types::Timespec>),
    Word(RawBox<u64>),
    Path(CString),
    /// The target of an ASYNC_CANCEL, kept alive until the cancel's own CQE so that its
    /// address (what the cancel matches) cannot be reused by a new op meanwhile.
    Hold(#[allow(dead_code)] OpRef),
}

/// What the result of an operation is, for the cleanup of results nobody took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResKind {
    /// A count or status: nothing to clean up.
    Plain,
    /// A new file descriptor (accept, openat): close it if nobody takes it.
    Fd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Built, or pushed to a ring (which then holds a reference); nothing tells the two
    /// apart, so that a push costs no lock of the op.
    Pending,
    /// The final CQE arrived; the kernel will not touch the memory again.
    Done,
}

struct State {
    phase: Phase,
    /// Results not yet taken, oldest first (one for a single-shot op), with the bytes of a
    /// provided buffer when the CQE selected one.
    results: Results,
    waiter: Option<Waker>,
    /// Bytes the kernel reported for the last completion (what a read wrote; at most
    /// `MAX_IO`).
    written: u32,
}

#[cfg(test)]
thread_local! {
    /// Ops [`Op::refill`] reused on this thread, for its tests.
    static REFILLS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl State {
    fn new() -> State {
        State {
            phase: Phase::Pending,
            results: Results::default(),
            waiter: None,
            written: 0,
        }
    }
}

/// One result of an op: `(res, flags, the provided buffer the CQE selected, lent)`.
pub(crate) type Completion = (i32, u32, Option<Chunk>);

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn chunk_len(c: &Completion) -> u32 {
    c.2.as_ref().map_or(0, |d| clamp_u32(d.len()))
}

/// A FIFO of completions that holds the first one inline: a single-shot op never allocates
/// for its result, and only multishot ops pay for what lies behind it (boxed, so that it
/// costs a single-shot op one word: see the size assertion on [`Op`]). The counts a
/// completion and a poll update sit inline too, so that while at most one result waits (an
/// echo's recv) neither touches the box, a line of its own that is cold by the time the
/// connection's next CQE arrives.
#[derive(Debug, Default)]
struct Results {
    /// # Invariant
    /// The oldest result; `None` only when no result waits (`rest` is then empty).
    first: Option<Completion>,
    /// How many results wait in `multi`'s `rest`, behind `first`.
    behind: u32,
    /// # Invariant
    /// The sum of the lengths of the provided-buffer data in `first` and `rest` (at most
    /// `RECV_BACKLOG` plus what arrives before the cancel: far below `u32::MAX`; the
    /// arithmetic saturates all the same).
    buffered: u32,
    /// Set once the op was handed to its ring for cancellation because its reader fell
    /// behind (see [`Results::throttle`]); its final CQE (`-ECANCELED`) then means "read on,
    /// then re-arm".
    throttled: bool,
    multi: Option<Box<Multi>>,
}

/// What a multishot op rarely needs: the results past the first, and a descriptor to keep.
#[derive(Debug, Default)]
struct Multi {
    rest: VecDeque<Completion>,
    /// A descriptor its owner closed while this op could still reach the kernel with its
    /// number (kept here, off the hot path, as it happens once per connection at most):
    /// open until the op is freed, so that the SQE cannot act on a file that reused it.
    keep: Option<Arc<OwnedFd>>,
}

impl Results {
    fn push_back(&mut self, c: Completion) {
        self.buffered = self.buffered.saturating_add(chunk_len(&c));
        if self.first.is_none() {
            self.first = Some(c);
        } else {
            self.multi.get_or_insert_default().rest.push_back(c);
            self.behind += 1;
        }
    }

    fn pop_front(&mut self) -> Option<Completion> {
        let c = self.first.take()?;
        if self.behind > 0 {
            self.first = self.multi.as_mut().and_then(|m| m.rest.pop_front());
            self.behind -= 1;
        }
        self.buffered = self.buffered.saturating_sub(chunk_len(&c));
        Some(c)
    }

    /// Whether the unread data just passed [`RECV_BACKLOG`]: true once per op, which is
    /// then marked throttled.
    fn throttle(&mut self) -> bool {
        self.throttle_if(self.buffered as usize > RECV_BACKLOG)
    }

    /// Whether more than `limit` results wait to be taken: true once per op, which is then
    /// marked throttled.
    fn throttle_count(&mut self, limit: usize) -> bool {
        let queued = usize::from(self.first.is_some()) + self.behind as usize;
        self.throttle_if(queued > limit)
    }

    /// Marks the op throttled the first time `over` holds; returns whether it did now.
    fn throttle_if(&mut self, over: bool) -> bool {
        if self.throttled || !over {
            return false;
        }
        self.throttled = true;
        true
    }

    fn throttled(&self) -> bool {
        self.throttled
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn iter(&self) -> impl Iterator<Item = &Completion> {
        self.first
            .iter()
            .chain(self.multi.iter().flat_map(|m| m.rest.iter()))
    }
}

/// One io_uring operation, single-shot or multishot. The word and the state come first, in
/// the slot's first cache line: they are what a completion and a poll touch.
#[repr(C, align(64))]
pub(crate) struct Op {
    word: OpWord,
    /// # Invariant
    ///
    /// Accessed only by the holder of `word`'s lock (through [`OpGuard`]), or by the last
    /// owner in `drop`.
    state: UnsafeCell<State>,
    mem: Mem,
    kind: ResKind,
    /// Runtime-internal (an eventfd read): not counted as user work in flight.
    internal: bool,
}

// SAFETY: `state` is reached only under the word's lock (see its invariant), which orders
// every access across threads, so sharing `&Op` is as sound as sharing a `Mutex<State>`;
// every other field is `Sync`.
unsafe impl Sync for Op {}

/// The locked state of an op.
struct OpGuard<'a>(&'a Op);

impl Deref for OpGuard<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        // SAFETY: this guard holds the word's lock, so nobody else reaches the state.
        unsafe { &*self.0.state.get() }
    }
}

impl DerefMut for OpGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        // SAFETY: as in `deref`, and `&mut self` makes this the one reference.
        unsafe { &mut *self.0.state.get() }
    }
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        self.0.word.unlock();
    }
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("Op")
            .field("phase", &st.phase)
            .field("results", &st.results)
            .field("internal", &self.internal)
            .finish()
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if self.kind == ResKind::Fd {
            let st = self.state.get_mut();
            for &(res, _, _) in st.results.iter() {
                if res >= 0 {
                    // SAFETY: a non-negative result of accept/openat is a new descriptor the
                    // kernel gave to this op; nobody took it (taking pops it from `results`).
                    unsafe { close_unowned(res) };
                }
            }
        }
    }
}

impl Op {
    fn alloc(mem: Mem, kind: ResKind, internal: bool) -> OpRef {
        OpRef::new(Op {
            word: OpWord::new(),
            state: UnsafeCell::new(State::new()),
            mem,
            kind,
            internal,
        })
    }

    /// Makes `op`, a spent op that lent the kernel a buffer (its final CQE in, every result
    /// taken), into a new one lending it `data`: the same slot and buffer, with nothing
    /// freed and nothing allocated. `false` (nothing done) unless `op` is the only reference
    /// ([`OpRef::get_mut`]) to such an op with room for `data`. For a stream's write-behind
    /// sends, one after another.
    fn refill(op: &mut OpRef, data: &[u8]) -> bool {
        let Some(op) = Op::done_alone(op) else {
            return false;
        };
        let st = op.state.get_mut();
        let spent = st.results.is_empty() && st.results.multi.is_none();
        if !spent || op.kind != ResKind::Plain || op.internal {
            return false;
        }
        let Mem::Buf(buf) = &mut op.mem else {
            return false;
        };
        if !buf.fill_from(data) {
            return false;
        }
        *st = State::new();
        #[cfg(test)]
        REFILLS.set(REFILLS.get() + 1);
        true
    }

    fn lock(&self) -> OpGuard<'_> {
        self.word.lock();
        OpGuard(self)
    }

    /// The `user_data` this op travels under (also what ASYNC_CANCEL matches).
    pub(crate) fn user_data(&self) -> u64 {
        std::ptr::from_ref(self) as u64 | TAG_OP
    }

    pub(crate) fn is_internal(&self) -> bool {
        self.internal
    }

    /// Whether the final CQE has arrived.
    pub(crate) fn is_done(&self) -> bool {
        self.lock().phase == Phase::Done
    }

    /// Keeps `fd` open until this op is freed (after its final CQE), unless it is done.
    pub(crate) fn keep_fd(&self, fd: &Arc<OwnedFd>) {
        let mut st = self.lock();
        if st.phase != Phase::Done {
            st.results.multi.get_or_insert_default().keep = Some(Arc::clone(fd));
        }
    }

    /// Takes the oldest result if there is one; otherwise registers `waiter` (if given) to be
    /// woken by the next completion. `Err(())` means the op is done and has no results left.
    pub(crate) fn poll(&self, waiter: impl FnOnce() -> Waker) -> Result<Option<(i32, u32)>, ()> {
        self.poll_data(waiter)
            .map(|r| r.map(|(res, flags, _)| (res, flags)))
    }

    /// Like [`poll`](Self::poll), with the bytes of the provided buffer the CQE selected.
    pub(crate) fn poll_data(
        &self,
        waiter: impl FnOnce() -> Waker,
    ) -> Result<Option<Completion>, ()> {
        let mut st = self.lock();
        if let Some(r) = st.results.pop_front() {
            return Ok(Some(r));
        }
        if st.phase == Phase::Done {
            return Err(());
        }
        if st.waiter.is_none() {
            st.waiter = Some(waiter());
        }
        Ok(None)
    }

    /// The result of a single-shot op that is done and of which `op` is the only reference
    /// left ([`OpRef::get_mut`]: the kernel is done with it, so nobody else can be writing
    /// its state), taken without the lock; `None` (nothing taken) otherwise. For a stream's
    /// previous send, which is usually done by the time the next write comes.
    pub(crate) fn take_if_done(op: &mut OpRef) -> Option<(i32, u32)> {
        let results = &mut Op::done_alone(op)?.state.get_mut().results;
        if results.behind > 0 {
            return None;
        }
        results.pop_front().map(|(res, flags, _)| (res, flags))
    }

    /// The op itself, without its lock, if it is done (its final CQE in) and `op` is its
    /// only reference ([`OpRef::get_mut`]).
    fn done_alone(op: &mut OpRef) -> Option<&mut Op> {
        let op = op.get_mut()?;
        (op.state.get_mut().phase == Phase::Done).then_some(op)
    }

    /// Whether the op has ended and every result was taken: it can do nothing more.
    pub(crate) fn is_spent(&self) -> bool {
        let st = self.lock();
        st.phase == Phase::Done && st.results.is_empty()
    }

    /// Whether the op was cancelled because its reader fell behind (see [`RECV_BACKLOG`],
    /// [`ACCEPT_BACKLOG`]).
    pub(crate) fn throttled(&self) -> bool {
        self.lock().results.throttled()
    }

    /// Records a CQE. Returns the waiter to wake, and whether the op now holds so much unread
    /// data that it must be cancelled (once).
    fn complete(
        &self,
        res: i32,
        flags: u32,
        last: bool,
        data: Option<Chunk>,
    ) -> (Option<Waker>, bool) {
        let mut st = self.lock();
        st.results.push_back((res, flags, data));
        st.written = u32::try_from(res).unwrap_or(0);
        if last {
            st.phase = Phase::Done;
        }
        let throttle = !last
            && match self.kind {
                ResKind::Fd => st.results.throttle_count(ACCEPT_BACKLOG),
                ResKind::Plain => st.results.throttle(),
            };
        (st.waiter.take(), throttle)
    }

    /// Copies the bytes a completed read left in the op's buffer into `dst` (at most `n`,
    /// and never more than the kernel reported writing).
    pub(crate) fn copy_out(&self, n: usize, dst: &mut [u8]) -> usize {
        let st = self.lock();
        if st.phase != Phase::Done {
            return 0;
        }
        let n = n.min(st.written as usize);
        match &self.mem {
            Mem::Buf(b) => {
                // SAFETY: the phase is `Done` (checked under the lock the completing thread
                // held), so the kernel no longer writes the buffer, and `n` is at most the
                // byte count the kernel reported writing.
                unsafe { b.copy_to(n, dst) }
            }
            _ => 0,
        }
    }

    /// The bytes a completed read left in the op's buffer (empty before the op is done):
    /// lent in place, for as long as the op lives.
    pub(crate) fn received(&self) -> &[u8] {
        let st = self.lock();
        if st.phase != Phase::Done {
            return &[];
        }
        let n = st.written as usize;
        drop(st);
        match &self.mem {
            // SAFETY: the phase is `Done` (checked under the lock the completing thread held),
            // so the kernel no longer writes the buffer and nothing else ever does; `n` is the
            // byte count the kernel reported writing; the borrow is tied to `&self`, which
            // owns the buffer.
            Mem::Buf(b) => unsafe { b.prefix(n) },
            _ => &[],
        }
    }

    /// The peer address an `accept` wrote, once done.
    pub(crate) fn peer_addr(&self) -> Option<SocketAddr> {
        let st = self.lock();
        if st.phase != Phase::Done {
            return None;
        }
        match &self.mem {
            // SAFETY: `Done`: the kernel no longer writes the address.
            Mem::Addr(a) => unsafe { a.get() }.socket_addr(),
            _ => None,
        }
    }

    /// Turns a result of an fd-returning op into an owned descriptor.
    pub(crate) fn fd_result(&self, res: i32) -> io::Result<OwnedFd> {
        if res < 0 {
            return Err(io::Error::from_raw_os_error(-res));
        }
        if self.kind != ResKind::Fd {
            return Err(io::Error::other("not a descriptor-returning operation"));
        }
        // SAFETY: `res` is a result of this op that `poll` popped, so it is a fresh
        // descriptor from accept/openat that nothing else owns, taken exactly once.
        Ok(unsafe { owned_fd(res) })
    }
}

/// What one CQE meant.
pub(crate) enum Reaped {
    /// An op progressed; wake this waiter (if any).
    Op {
        waiter: Option<Waker>,
        internal: bool,
        last: bool,
        /// A multishot recv whose unread data passed [`RECV_BACKLOG`]: the ring's owner
        /// must cancel it.
        throttle: Option<OpRef>,
    },
    /// A wake-up message arrived.
    Wake,
    /// Nothing to do.
    Ignored,
}

/// Decodes a CQE.
///
/// # Safety
///
/// [1] `user_data` and `flags` come from a CQE of the ring the SQE was pushed to, and [2] each
/// CQE is decoded exactly once, so that the ring's reference of an op (moved into
/// `user_data` by `Ring::push`) is released exactly once, on the final CQE.
pub(crate) unsafe fn decode(user_data: u64, res: i32, flags: u32, data: Option<Chunk>) -> Reaped {
    match user_data & TAG_MASK {
        TAG_OP if user_data != 0 => {
            let ptr = (user_data & !TAG_MASK) as *const Op;
            if !io_uring::cqueue::more(flags) {
                // SAFETY: the pointer came from `OpRef::into_raw` in `Ring::push` and this is
                // its final CQE, so this takes back the reference the ring held, once.
                let op = unsafe { OpRef::from_raw(ptr) };
                let (waiter, _) = op.complete(res, flags, true, data);
                return Reaped::Op {
                    waiter,
                    internal: op.internal,
                    last: true,
                    throttle: None,
                };
            }
            // SAFETY: a non-final CQE: the ring still holds its reference, released only by
            // the op's final CQE, which is decoded after this one (one reaper at a time, in
            // CQ order, per [2]); so the op lives throughout, without reference counting.
            let op = unsafe { &*ptr };
            let (waiter, throttle) = op.complete(res, flags, false, data);
            let throttle = throttle.then(|| {
                op.word.add_ref();
                // SAFETY: as above, the op is alive; `add_ref` made the reference this takes,
                // for the owner's list of ops to cancel.
                unsafe { OpRef::from_raw(ptr) }
            });
            Reaped::Op {
                waiter,
                internal: op.internal,
                last: false,
                throttle,
            }
        }
        TAG_WAKE => Reaped::Wake,
        _ => Reaped::Ignored,
    }
}

/// Whether a CQE with these flags is followed by more CQEs of the same (multishot) op.
pub(crate) fn cqe_more(flags: u32) -> bool {
    io_uring::cqueue::more(flags)
}

/// Turns an op being pushed into the `user_data` that carries the ring's reference.
///
/// Without a lock of the op: whoever reaps its CQE (this worker, another worker's I/O
/// stealing, the completer thread) sees the op as built here through the ring itself, whose
/// SQ tail is published with a release store and whose CQ tail is read with an acquire load,
/// with the kernel in between. (A lock here, to mark the op in flight, cost two locked
/// instructions per push that no reader needed.)
pub(super) fn into_user_data(op: OpRef) -> u64 {
    OpRef::into_raw(op) as u64 | TAG_OP
}

/// Takes back the ring's reference of an op whose SQE could not be pushed.
///
/// # Safety
///
/// `user_data` came from [`into_user_data`] and never reached the kernel.
pub(super) unsafe fn from_unpushed(user_data: u64) -> OpRef {
    // SAFETY: forwarded to the caller: the reference was never handed to the kernel.
    unsafe { OpRef::from_raw((user_data & !TAG_MASK) as *const Op) }
}

/// Fails an op that never reached the kernel (the runtime is shutting down), so that its
/// waiter sees an error instead of waiting forever.
pub(crate) fn fail_unsubmitted(op: &Op, errno: i32) {
    let mut st = op.lock();
    st.results.push_back((-errno, 0, None));
    st.phase = Phase::Done;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A send as the kernel would finish it: its CQE (with the ring's reference released,
    /// as the reaper does for a final CQE), then the owner taking the result.
    fn finish_send(sqe: Sqe, op: &OpRef, res: i32) {
        drop(sqe);
        drop(op.complete(res, 0, true, None));
        assert_eq!(op.poll(|| unreachable!("done")), Ok(Some((res, 0))));
    }

    #[test]
    fn a_spent_send_is_refilled_in_place_when_nobody_else_holds_it() {
        let (sqe, op) = Sqe::send_all_reusing(Target::Fd(-1), b"first", None);
        finish_send(sqe, &op, 5);
        let slot = std::ptr::from_ref::<Op>(&op);
        let before = REFILLS.get();
        let (sqe, op) = Sqe::send_all_reusing(Target::Fd(-1), b"second!", Some(op));
        assert_eq!(
            REFILLS.get(),
            before + 1,
            "refilled, not freed and made again"
        );
        assert_eq!(std::ptr::from_ref::<Op>(&op), slot, "the same slot");
        let Mem::Buf(buf) = &op.mem else {
            panic!("a send lends a buffer")
        };
        // SAFETY: the op is not in flight (never submitted); 7 bytes were copied in.
        assert_eq!(unsafe { buf.prefix(7) }, b"second!");
        assert!(!op.is_done(), "a new op: pending again");
        assert_eq!(
            op.poll(|| crate::park::Waker::Thread(std::thread::current())),
            Ok(None)
        );
        finish_send(sqe, &op, 7);
    }

    #[test]
    fn a_done_op_held_alone_gives_its_result_without_the_lock() {
        let (sqe, mut op) = Sqe::send_all_reusing(Target::Fd(-1), b"abc", None);
        assert_eq!(
            Op::take_if_done(&mut op),
            None,
            "in flight: the SQE holds a reference"
        );
        drop(sqe);
        assert_eq!(Op::take_if_done(&mut op), None, "alone, but pending");
        drop(op.complete(3, 0, true, None));
        let other = op.clone();
        assert_eq!(Op::take_if_done(&mut op), None, "done, but shared");
        drop(other);
        assert_eq!(Op::take_if_done(&mut op), Some((3, 0)));
        assert_eq!(Op::take_if_done(&mut op), None, "taken once");
        assert_eq!(
            op.poll(|| unreachable!("done")),
            Err(()),
            "and gone for a poll too"
        );
    }

    #[test]
    fn a_send_is_not_refilled_while_shared_unfinished_or_too_small() {
        let before = REFILLS.get();
        let (sqe, op) = Sqe::send_all_reusing(Target::Fd(-1), b"x", None);
        // Still in flight (the SQE holds a reference) and pending.
        let slot = std::ptr::from_ref::<Op>(&op);
        let (sqe2, op2) = Sqe::send_all_reusing(Target::Fd(-1), b"y", Some(op.clone()));
        assert_ne!(std::ptr::from_ref::<Op>(&op2), slot);
        finish_send(sqe2, &op2, 1);
        finish_send(sqe, &op, 1);
        // Done, but another reference (a cancel request's, say) is alive.
        let other = op.clone();
        let (sqe3, op3) = Sqe::send_all_reusing(Target::Fd(-1), b"z", Some(op));
        assert_ne!(std::ptr::from_ref::<Op>(&op3), slot);
        finish_send(sqe3, &op3, 1);
        drop(other);
        // Done and alone, but its buffer (the smallest class) cannot hold this.
        let big = vec![7u8; 64 * 1024];
        let (sqe4, op4) = Sqe::send_all_reusing(Target::Fd(-1), &big, Some(op3));
        let Mem::Buf(buf) = &op4.mem else {
            panic!("a send lends a buffer")
        };
        assert!(buf.cap() >= big.len());
        finish_send(sqe4, &op4, 64 * 1024);
        assert_eq!(REFILLS.get(), before, "none of them refilled");
    }

    #[test]
    fn results_come_out_in_order() {
        let mut r = Results::default();
        r.push_back((1, 0, None));
        r.push_back((2, 0, None));
        assert_eq!(r.pop_front().map(|c| c.0), Some(1));
        r.push_back((3, 0, None));
        assert_eq!(r.iter().map(|c| c.0).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(r.pop_front().map(|c| c.0), Some(2));
        assert_eq!(r.pop_front().map(|c| c.0), Some(3));
        assert!(r.pop_front().is_none());
    }

    #[test]
    fn unread_data_past_the_backlog_throttles_once_and_drains_in_order() {
        let mut r = Results::default();
        // Not registered with any io_uring: no kernel ever writes these buffers.
        let ring = Arc::new(super::super::bufring::BufRing::new(32, 4096).unwrap());
        // SAFETY: an unregistered buffer ring; each bid is lent once at a time here.
        let lend =
            |i: u8| unsafe { super::super::bufring::BufRing::lend(&ring, u16::from(i), 4096) };
        let chunk = |i: u8| (4096, u32::from(i), lend(i));
        let mut pushed = 0u8;
        while !r.throttle() {
            r.push_back(chunk(pushed));
            pushed += 1;
        }
        assert_eq!(usize::from(pushed) * 4096, RECV_BACKLOG + 4096);
        assert!(r.throttled());
        r.push_back(chunk(pushed));
        assert!(!r.throttle(), "one cancel per op");
        for i in 0..=pushed {
            assert_eq!(r.pop_front().map(|c| c.1), Some(u32::from(i)));
        }
        assert!(r.pop_front().is_none());
        assert_eq!(r.buffered, 0);
    }
}
