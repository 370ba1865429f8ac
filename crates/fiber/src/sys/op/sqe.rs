//! SQE constructors: each builds an io_uring entry and the [`Op`] that owns every byte
//! the kernel reads or writes for it, so that every SQE that reaches a ring points into
//! memory its op owns.

use std::ffi::CString;
use std::net::SocketAddr;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use io_uring::{opcode, squeue, types};

use super::buf::{RawBox, RawBuf};
use super::{MAX_IO, Mem, Op, OpRef, ResKind, TAG_IGNORE, TAG_WAKE};
use crate::sys::fd::RawAddr;

/// A prepared SQE and the op it completes, not yet pushed. Only this module builds them, so
/// every SQE that reaches a ring points into memory its op owns.
pub(crate) struct Sqe {
    pub(in crate::sys) entry: squeue::Entry,
    pub(in crate::sys) op: Option<OpRef>,
    /// Whether the SQE, as a rule, completes while it is submitted (a send into a socket
    /// with room, a no-op, a close, a cancel): its CQE is posted before the enter returns,
    /// and nothing waits for an event.
    pub(in crate::sys) inline: bool,
}

impl std::fmt::Debug for Sqe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sqe").field("op", &self.op).finish()
    }
}

/// How an SQE names the file it works on: by descriptor, or by its slot in the ring's table
/// of fixed files (`IOSQE_FIXED_FILE`), which spares the kernel a lookup per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Fd(RawFd),
    Fixed(u32),
}

impl From<RawFd> for Target {
    fn from(fd: RawFd) -> Target {
        Target::Fd(fd)
    }
}

/// Builds an entry for either kind of [`Target`]: `$build` is written once and given
/// `types::Fd` or `types::Fixed` as `$file` (the crate's opcodes take either, by a sealed
/// trait).
macro_rules! on_target {
    ($target:expr, |$file:ident| $build:expr) => {
        match $target {
            Target::Fd(fd) => {
                let $file = types::Fd(fd);
                $build
            }
            Target::Fixed(slot) => {
                let $file = types::Fixed(slot);
                $build
            }
        }
    };
}

fn io_len(n: usize) -> u32 {
    u32::try_from(n.min(MAX_IO)).unwrap_or(u32::MAX)
}

impl Sqe {
    fn with_op(entry: squeue::Entry, op: OpRef) -> (Sqe, OpRef) {
        (
            Sqe {
                entry,
                op: Some(op.clone()),
                inline: false,
            },
            op,
        )
    }

    /// Marks an SQE as one that completes while it is submitted (see [`Sqe::inline`]).
    fn completing_inline((mut sqe, op): (Sqe, OpRef)) -> (Sqe, OpRef) {
        sqe.inline = true;
        (sqe, op)
    }

    fn buf_ptr(op: &Op) -> *mut u8 {
        match &op.mem {
            Mem::Buf(b) => b.ptr.as_ptr(),
            _ => std::ptr::null_mut(),
        }
    }

    /// `recv(fd, len)` into a buffer the op owns.
    pub(crate) fn recv(file: Target, len: usize) -> (Sqe, OpRef) {
        let len = io_len(len);
        let op = Op::alloc(
            Mem::Buf(RawBuf::uninit(len as usize)),
            ResKind::Plain,
            false,
        );
        let buf = Sqe::buf_ptr(&op);
        let e = on_target!(file, |f| opcode::Recv::new(f, buf, len).build());
        Sqe::with_op(e, op)
    }

    /// `send(fd, data)` from a copy the op owns (MSG_NOSIGNAL: a closed peer is an error, not
    /// a signal).
    pub(crate) fn send(file: Target, data: &[u8]) -> (Sqe, OpRef) {
        Sqe::send_in(file, data, libc::MSG_NOSIGNAL, None)
    }

    /// `send(fd, data, MSG_WAITALL)`: the kernel sends all of `data` (retrying short sends
    /// itself) or fails; a result short of `data.len()` means the connection broke midway.
    /// For write-behind, where the caller was told the bytes were written. The op is
    /// `spent`, the stream's previous send, refilled, when that one is done, taken and held
    /// by nobody else (`Op::refill`): a send after a send frees and allocates nothing.
    pub(crate) fn send_all_reusing(
        file: Target,
        data: &[u8],
        spent: Option<OpRef>,
    ) -> (Sqe, OpRef) {
        Sqe::send_in(file, data, libc::MSG_NOSIGNAL | libc::MSG_WAITALL, spent)
    }

    fn send_in(file: Target, data: &[u8], flags: i32, spent: Option<OpRef>) -> (Sqe, OpRef) {
        let data = &data[..data.len().min(MAX_IO)];
        let op = spent
            .and_then(|mut op| Op::refill(&mut op, data).then_some(op))
            .unwrap_or_else(|| {
                Op::alloc(Mem::Buf(RawBuf::from_slice(data)), ResKind::Plain, false)
            });
        let (buf, len) = (Sqe::buf_ptr(&op), io_len(data.len()));
        let e = on_target!(file, |f| opcode::Send::new(f, buf, len)
            .flags(flags)
            .build());
        Sqe::completing_inline(Sqe::with_op(e, op))
    }

    /// `pread(fd, len, offset)`; offset `u64::MAX` reads at the file position.
    pub(crate) fn read_at(fd: RawFd, len: usize, offset: u64) -> (Sqe, OpRef) {
        let len = io_len(len);
        let op = Op::alloc(
            Mem::Buf(RawBuf::uninit(len as usize)),
            ResKind::Plain,
            false,
        );
        let e = opcode::Read::new(types::Fd(fd), Sqe::buf_ptr(&op), len)
            .offset(offset)
            .build();
        Sqe::with_op(e, op)
    }

    /// `pwrite(fd, data, offset)`; offset `u64::MAX` writes at the file position (and appends
    /// on an `O_APPEND` file).
    pub(crate) fn write_at(fd: RawFd, data: &[u8], offset: u64) -> (Sqe, OpRef) {
        let data = &data[..data.len().min(MAX_IO)];
        let op = Op::alloc(Mem::Buf(RawBuf::from_slice(data)), ResKind::Plain, false);
        let e = opcode::Write::new(types::Fd(fd), Sqe::buf_ptr(&op), io_len(data.len()))
            .offset(offset)
            .build();
        Sqe::with_op(e, op)
    }

    /// `accept4(fd, SOCK_CLOEXEC)`, recording the peer address.
    pub(crate) fn accept(fd: RawFd) -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::Addr(RawBox::new(RawAddr::empty())), ResKind::Fd, false);
        let (addr, len) = match &op.mem {
            Mem::Addr(a) => {
                let p = a.ptr.as_ptr();
                // SAFETY: `p` points to a live `RawAddr`; we only compute field addresses.
                unsafe {
                    (
                        std::ptr::addr_of_mut!((*p).storage).cast::<libc::sockaddr>(),
                        std::ptr::addr_of_mut!((*p).len),
                    )
                }
            }
            _ => (std::ptr::null_mut(), std::ptr::null_mut()),
        };
        let e = opcode::Accept::new(types::Fd(fd), addr, len)
            .flags(libc::SOCK_CLOEXEC)
            .build();
        Sqe::with_op(e, op)
    }

    /// Multishot `accept4(fd, SOCK_CLOEXEC)`: one CQE per connection until cancelled.
    pub(crate) fn accept_multi(fd: RawFd) -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::None, ResKind::Fd, false);
        let e = opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_CLOEXEC)
            .build();
        Sqe::with_op(e, op)
    }

    /// Multishot `recv(fd)` into buffers the kernel picks from the ring's provided-buffer
    /// group; one CQE per chunk of data until EOF, an error, a cancel, or no free buffer.
    pub(crate) fn recv_multi(file: Target) -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::None, ResKind::Plain, false);
        let group = crate::sys::bufring::BGID;
        let e = on_target!(file, |f| opcode::RecvMulti::new(f, group).build());
        Sqe::with_op(e, op)
    }

    /// `connect(fd, addr)`.
    pub(crate) fn connect(fd: RawFd, addr: SocketAddr) -> (Sqe, OpRef) {
        let op = Op::alloc(
            Mem::Addr(RawBox::new(RawAddr::from_socket_addr(addr))),
            ResKind::Plain,
            false,
        );
        let (ptr, len) = match &op.mem {
            Mem::Addr(a) => {
                // SAFETY: nothing writes a connect address; reading its length is fine.
                let len = unsafe { a.get() }.len;
                (a.ptr.as_ptr().cast::<libc::sockaddr>().cast_const(), len)
            }
            _ => (std::ptr::null(), 0),
        };
        let e = opcode::Connect::new(types::Fd(fd), ptr, len).build();
        Sqe::with_op(e, op)
    }

    /// A no-op: completes with 0 and touches nothing.
    pub(crate) fn nop() -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::None, ResKind::Plain, false);
        Sqe::completing_inline(Sqe::with_op(opcode::Nop::new().build(), op))
    }

    /// A relative timeout: completes with `-ETIME` after `dur`.
    pub(crate) fn timeout(dur: Duration) -> (Sqe, OpRef) {
        let ts = types::Timespec::new()
            .sec(dur.as_secs())
            .nsec(dur.subsec_nanos());
        let op = Op::alloc(Mem::Timespec(RawBox::new(ts)), ResKind::Plain, false);
        let p = match &op.mem {
            Mem::Timespec(t) => t.ptr.as_ptr().cast_const(),
            _ => std::ptr::null(),
        };
        let e = opcode::Timeout::new(p).build();
        Sqe::with_op(e, op)
    }

    /// `openat(AT_FDCWD, path, flags | O_CLOEXEC, mode)`.
    pub(crate) fn open(path: CString, flags: i32, mode: u32) -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::Path(path), ResKind::Fd, false);
        let p = match &op.mem {
            Mem::Path(c) => c.as_ptr(),
            _ => std::ptr::null(),
        };
        let e = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), p)
            .flags(flags | libc::O_CLOEXEC)
            .mode(mode)
            .build();
        Sqe::with_op(e, op)
    }

    /// `fsync(fd)`, or `fdatasync` when `data_only`.
    pub(crate) fn fsync(fd: RawFd, data_only: bool) -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::None, ResKind::Plain, false);
        let flags = if data_only {
            types::FsyncFlags::DATASYNC
        } else {
            types::FsyncFlags::empty()
        };
        let e = opcode::Fsync::new(types::Fd(fd)).flags(flags).build();
        Sqe::with_op(e, op)
    }

    /// `close(fd)`; the op takes ownership of the descriptor.
    pub(crate) fn close(fd: OwnedFd) -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::None, ResKind::Plain, false);
        let e = opcode::Close::new(types::Fd(fd.into_raw_fd())).build();
        Sqe::completing_inline(Sqe::with_op(e, op))
    }

    /// A read of an eventfd's 8-byte counter, internal to the runtime.
    pub(crate) fn eventfd_read(fd: RawFd) -> (Sqe, OpRef) {
        let op = Op::alloc(Mem::Word(RawBox::new(0u64)), ResKind::Plain, true);
        let p = match &op.mem {
            Mem::Word(w) => w.ptr.as_ptr().cast::<u8>(),
            _ => std::ptr::null_mut(),
        };
        let e = opcode::Read::new(types::Fd(fd), p, 8).build();
        Sqe::with_op(e, op)
    }

    /// Empties `slot` of the ring's table of fixed files (`IORING_OP_FILES_UPDATE` with the
    /// descriptor -1), after every SQE pushed before it.
    pub(crate) fn files_remove(slot: u32) -> (Sqe, OpRef) {
        // Every bit set: read as the kernel's array of `int`, its first element is -1.
        let op = Op::alloc(Mem::Word(RawBox::new(u64::MAX)), ResKind::Plain, true);
        let p = match &op.mem {
            Mem::Word(w) => w.ptr.as_ptr().cast::<RawFd>().cast_const(),
            _ => std::ptr::null(),
        };
        let offset = i32::try_from(slot).unwrap_or(i32::MAX);
        let e = opcode::FilesUpdate::new(p, 1).offset(offset).build();
        Sqe::with_op(e, op)
    }

    /// A wake-up message to another ring: it posts a CQE tagged [`TAG_WAKE`] there.
    pub(crate) fn msg_ring(target_ring: RawFd) -> Sqe {
        let e = opcode::MsgRingData::new(types::Fd(target_ring), 0, TAG_WAKE, None)
            .build()
            .user_data(TAG_IGNORE);
        Sqe {
            entry: e,
            op: None,
            inline: true,
        }
    }

    /// Cancels one in-flight op of this ring.
    pub(crate) fn cancel(target: &OpRef) -> Sqe {
        let ud = target.user_data();
        let holder = Op::alloc(Mem::Hold(target.clone()), ResKind::Plain, true);
        let e = opcode::AsyncCancel::new(ud).build();
        Sqe {
            entry: e,
            op: Some(holder),
            inline: true,
        }
    }

    /// Cancels every in-flight request of this ring.
    pub(crate) fn cancel_all() -> Sqe {
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(TAG_IGNORE);
        Sqe {
            entry: e,
            op: None,
            inline: true,
        }
    }
}
