//! TCP with pseudo-blocking calls: `accept`, `connect`, `read` and `write` park the fiber
//! while the kernel works, and the types implement [`std::io::Read`] and [`std::io::Write`]
//! (also through `&TcpStream`, so a reader fiber and a writer fiber can share one stream
//! through an `Arc`).
//!
//! Sockets stay in blocking mode: io_uring handles the waiting, and a plain thread that uses
//! them through its private ring waits the same way.

use std::io::{self, BufRead, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::driver::{self, Pushed};
use crate::fixed::FixedSlot;
use crate::sync::{Mutex, MutexGuard};
use crate::sys::bufring::Chunk;
use crate::sys::fd::{tcp_listen, tcp_socket};
use crate::sys::file::{self, Direct};
use crate::sys::op::{self, OpRef, Sqe};
use crate::worker;

/// Listen backlog; the kernel caps it at `net.core.somaxconn`.
const BACKLOG: i32 = 4096;

/// A listening TCP socket.
pub struct TcpListener {
    inner: std::net::TcpListener,
    /// Multishot accept (when the runtime enables it): the op in flight, serialising the
    /// fibers that accept on this listener.
    multishot: Mutex<Option<Pushed>>,
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener")
            .field("fd", &self.inner.as_raw_fd())
            .field("addr", &self.inner.local_addr().ok())
            .finish()
    }
}

fn each_addr<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(&SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match f(&a) {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to use")))
}

impl TcpListener {
    /// Binds and listens (with `SO_REUSEADDR`); tries each resolved address in turn.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let fd = each_addr(addr, |a| tcp_listen(a, BACKLOG))?;
        Ok(TcpListener::from_std(std::net::TcpListener::from(fd)))
    }

    /// Wraps a listening std socket (it should be in blocking mode).
    pub fn from_std(inner: std::net::TcpListener) -> TcpListener {
        TcpListener {
            inner,
            multishot: Mutex::new(None),
        }
    }

    /// The bound address, real port included.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Accepts a connection, parking until one arrives.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let multishot = worker::current_runtime().is_some_and(|rt| rt.config.multishot);
        if multishot {
            return self.accept_multishot();
        }
        let (res, op) = driver::run(Sqe::accept(self.inner.as_raw_fd()))?;
        let fd = op.fd_result(res)?;
        let stream = TcpStream::from_fd(fd);
        let peer = match op.peer_addr() {
            Some(a) => a,
            None => stream.peer_addr()?,
        };
        Ok((stream, peer))
    }

    fn accept_multishot(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let mut slot = self.multishot.lock();
        loop {
            let armed = match slot.take() {
                Some(p) => p,
                None => driver::submit(Sqe::accept_multi(self.inner.as_raw_fd()))?,
            };
            let result = driver::wait(&armed);
            let op = armed.op.clone();
            // An op that ended and holds no more results is spent (the kernel ends a
            // multishot on an error, a cancel, or a full CQ, even with a connection in its
            // last CQE): the next turn arms a new one.
            if !op.is_spent() {
                *slot = Some(armed);
            }
            match result {
                Ok((res, _)) if res >= 0 => {
                    let stream = TcpStream::from_fd(op.fd_result(res)?);
                    let peer = stream.peer_addr()?;
                    return Ok((stream, peer));
                }
                // Cancelled because the connections it queued were not taken
                // (`ACCEPT_BACKLOG`); they have been now: arm again.
                Ok((res, _)) if res == -libc::ECANCELED && op.throttled() => {}
                Ok((res, _)) => return Err(io::Error::from_raw_os_error(-res)),
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        if let Some(p) = self.multishot.get_mut().take() {
            // Connections it accepted but nobody took are closed when the op is freed.
            driver::cancel(&p);
        }
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

/// Bytes one [`TcpStream::write`] on a fiber hands to the kernel without waiting for it
/// (write-behind): the caller goes on at once, and the send's outcome is reported by the
/// next write, [`TcpStream::flush`] or [`TcpStream::close`].
pub const WRITE_BEHIND: usize = 64 * 1024;

/// Connections a multishot accept holds accepted and not yet taken by `accept` before it
/// stops accepting (it is cancelled, and armed again once they are taken): past this, new
/// connections wait in the kernel's listen backlog, as they would for a plain accept.
pub const ACCEPT_BACKLOG: usize = op::ACCEPT_BACKLOG;

/// Bytes a plain recv reads when there is no provided buffer to receive into (off a fiber,
/// without multishot, or when the worker's provided buffers ran out).
const PLAIN_RECV: usize = 4096;

/// A TCP connection.
///
/// Reads on a fiber of a runtime with multishot recv receive into the worker's provided
/// buffers, which [`TcpStream::reader`] lends to the caller ([`BufRead`]) without a copy:
/// an idle connection holds no read buffer. Writes on a fiber are write-behind (see
/// [`WRITE_BEHIND`]): at most one send is in flight per stream, so bytes leave in order.
#[derive(Debug)]
pub struct TcpStream {
    /// `Some` until the stream is dropped or turned into a std stream.
    inner: Option<std::net::TcpStream>,
    recv: Mutex<RecvState>,
    /// The write-behind send in flight, and the bytes it must send.
    send: Mutex<Option<(Pushed, usize)>>,
    /// The socket's slot in a worker's table of fixed files.
    fixed: FixedSlot,
}

/// Received bytes the reader has not consumed yet.
#[derive(Debug)]
enum Data {
    /// A provided buffer the kernel lent (multishot recv).
    Lent(Chunk),
    /// The buffer of a plain recv's own op, read in place.
    Plain(op::OpRef),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Lent(c) => c.bytes(),
            Data::Plain(op) => op.received(),
        }
    }
}

/// The read side of a stream: the multishot recv in flight and the chunk being read.
#[derive(Debug, Default)]
struct RecvState {
    armed: Option<Pushed>,
    data: Option<Data>,
    pos: usize,
    eof: bool,
    /// The provided buffers ran out (`ENOBUFS`): the next receive is a plain recv, which
    /// needs none, so that a worker short of buffers still makes progress.
    plain_once: bool,
}

impl Drop for RecvState {
    fn drop(&mut self) {
        if let Some(p) = self.armed.take() {
            driver::cancel(&p);
        }
    }
}

/// Whether reads here should use multishot recv: on a fiber of a runtime that enables it.
fn multishot_recv_here() -> bool {
    crate::park::on_fiber() && worker::multishot_recv_here()
}

impl RecvState {
    /// The unread received bytes, receiving (and parking) first if there are none; empty at
    /// end of stream.
    fn fill(&mut self, file: &File<'_>) -> io::Result<&[u8]> {
        if self
            .data
            .as_ref()
            .is_some_and(|d| self.pos >= d.bytes().len())
        {
            // Gives a lent buffer back to the kernel.
            self.data = None;
        }
        while self.data.is_none() && !self.eof {
            self.receive(file)?;
        }
        Ok(match &self.data {
            Some(d) => &d.bytes()[self.pos..],
            None => &[],
        })
    }

    fn consume(&mut self, n: usize) {
        let len = self.data.as_ref().map_or(0, |d| d.bytes().len());
        self.pos = (self.pos + n).min(len);
        if self.pos >= len {
            self.data = None;
            self.pos = 0;
        }
    }

    /// One completion's worth: sets `data` or `eof`, or returns with neither to be called
    /// again (a multishot that ended and must be re-armed).
    fn receive(&mut self, file: &File<'_>) -> io::Result<()> {
        self.pos = 0;
        let armed = match self.armed.take() {
            Some(p) => p,
            None if self.plain_once || !multishot_recv_here() => return self.receive_plain(file),
            None => arm_recv(file)?,
        };
        let result = driver::wait_data(&armed);
        let more = matches!(&result, Ok((_, flags, _)) if op::cqe_more(*flags));
        // Cancelled because this reader fell behind (`RECV_BACKLOG`), not by a shutdown
        // (which fails the re-armed recv at once, so this cannot loop).
        let throttled = !more && armed.op.throttled();
        if more {
            self.armed = Some(armed);
        }
        match result {
            Ok((res, _, Some(chunk))) if res > 0 => self.data = Some(Data::Lent(chunk)),
            Ok((0, _, _)) => self.eof = true,
            // The worker's provided buffers ran out and the multishot ended.
            Ok((res, _, _)) if res == -libc::ENOBUFS => self.plain_once = true,
            // Everything received before the cancel has been read: re-arm.
            Ok((res, _, _)) if res == -libc::ECANCELED && throttled => {}
            Ok((res, _, _)) if res < 0 => return Err(io::Error::from_raw_os_error(-res)),
            // Bytes without a buffer cannot happen; re-arm rather than lose track.
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// A plain recv into a buffer of its own (see [`RecvState::receive`]). Out of line, as
    /// [`arm_recv`] is: both build an SQE on the stack, and a receive that waits for an
    /// armed multishot (an echo's) parks with this frame under it, whose lines are cold
    /// when the fiber is resumed.
    #[cold]
    #[inline(never)]
    fn receive_plain(&mut self, file: &File<'_>) -> io::Result<()> {
        self.plain_once = false;
        let (n, op) = driver::run(Sqe::recv(file.target(), PLAIN_RECV))?;
        if n == 0 {
            self.eof = true;
        } else {
            self.data = Some(Data::Plain(op));
        }
        Ok(())
    }
}

/// Arms a multishot recv for the stream (see [`RecvState::receive_plain`] for why apart).
#[cold]
#[inline(never)]
fn arm_recv(file: &File<'_>) -> io::Result<driver::Pushed> {
    driver::submit(Sqe::recv_multi(file.target()))
}

/// A buffered reader of a [`TcpStream`] that reads the kernel's buffers in place.
///
/// [`BufRead::fill_buf`] returns the bytes of the provided buffer the kernel received into
/// (or of a plain recv's copy, where there is none), and [`BufRead::consume`] gives the
/// buffer back once it is read. While a `TcpReader` lives, other reads of the same stream
/// park until it is dropped.
#[derive(Debug)]
pub struct TcpReader<'a> {
    file: File<'a>,
    state: MutexGuard<'a, RecvState>,
}

/// A stream's socket, as the SQEs for it name it.
#[derive(Debug)]
struct File<'a> {
    fd: RawFd,
    fixed: &'a FixedSlot,
}

impl File<'_> {
    fn target(&self) -> op::Target {
        self.fixed.target(self.fd)
    }
}

impl Read for TcpReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let data = self.state.fill(&self.file)?;
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        self.state.consume(n);
        Ok(n)
    }
}

impl BufRead for TcpReader<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.state.fill(&self.file)
    }

    fn consume(&mut self, amt: usize) {
        self.state.consume(amt);
    }
}

impl TcpStream {
    fn from_fd(fd: OwnedFd) -> TcpStream {
        TcpStream::from_std(std::net::TcpStream::from(fd))
    }

    fn sock(&self) -> &std::net::TcpStream {
        match &self.inner {
            Some(s) => s,
            // `inner` is taken only by `drop` and `into_std`, which consume the stream.
            None => unreachable!("a TcpStream without its socket"),
        }
    }

    fn fd(&self) -> RawFd {
        self.sock().as_raw_fd()
    }

    fn file(&self) -> File<'_> {
        File {
            fd: self.fd(),
            fixed: &self.fixed,
        }
    }

    /// Connects, parking until the handshake completes; tries each resolved address.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        each_addr(addr, |a| {
            let fd = tcp_socket(a)?;
            driver::run(Sqe::connect(fd.as_raw_fd(), *a))?;
            Ok(TcpStream::from_fd(fd))
        })
    }

    /// Wraps a connected std socket (it should be in blocking mode).
    pub fn from_std(inner: std::net::TcpStream) -> TcpStream {
        TcpStream {
            inner: Some(inner),
            recv: Mutex::new(RecvState::default()),
            send: Mutex::new(None),
            fixed: FixedSlot::default(),
        }
    }

    /// A buffered reader that lends the received bytes in place (see [`TcpReader`]).
    pub fn reader(&self) -> TcpReader<'_> {
        TcpReader {
            file: self.file(),
            state: self.recv.lock(),
        }
    }

    /// Reads what is available (at least one byte), parking until something is; `Ok(0)` at
    /// end of stream.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader().read(buf)
    }

    /// Writes some of `buf`. On a fiber, once the previous send of this stream finished (its
    /// error, if any, is returned here), the bytes (up to [`WRITE_BEHIND`]) go straight into
    /// the socket's buffer if it has room and the worker has nothing else to run (a plain
    /// non-blocking `send`), and are otherwise handed to the ring, to be submitted with the
    /// other fibers' SQEs, the call returning without waiting for that send. Off a fiber it
    /// parks until the kernel took at least one byte.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if !crate::park::on_fiber() {
            let (n, _) = driver::run(Sqe::send(self.fd().into(), buf))?;
            return Ok(usize::try_from(n).unwrap_or(0));
        }
        let mut send = self.send.lock();
        let spent = settle(&mut send)?;
        let n = buf.len().min(WRITE_BEHIND);
        // Nothing of this stream is in flight now: if the socket takes the bytes at once,
        // they need no op (see `sys::file`), unless the SQE would share an enter with others.
        if worker::send_alone() {
            match file::send_nowait(self.sock().as_fd(), &buf[..n]) {
                Direct::Done(r) => {
                    worker::sent_directly();
                    return r;
                }
                Direct::WouldBlock | Direct::Unsupported => {}
            }
        }
        let sqe = Sqe::send_all_reusing(self.file().target(), &buf[..n], spent);
        let pushed = driver::submit(sqe)?;
        *send = Some((pushed, n));
        Ok(n)
    }

    /// Writes all of `buf`.
    pub fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits until every byte written has been sent, and reports a send that failed.
    pub fn flush(&self) -> io::Result<()> {
        settle(&mut self.send.lock()).map(drop)
    }

    /// Shuts down the read half, the write half, or both.
    ///
    /// `Shutdown::Write` is graceful, as with std: it first waits until every byte written
    /// has been sent (and reports a send that failed), then sends the FIN. `Shutdown::Both`
    /// is abortive and never waits, so that another fiber can cut a connection whose writer
    /// is stuck: a write-behind send still in flight may then fail.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let sent = match how {
            Shutdown::Write => self.flush(),
            Shutdown::Read | Shutdown::Both => Ok(()),
        };
        let shut = self.sock().shutdown(how);
        sent.and(shut)
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.sock().set_nodelay(on)
    }

    /// Reads `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.sock().nodelay()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock().peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock().local_addr()
    }

    /// Sends what was written, then closes the socket through the ring
    /// (`IORING_OP_CLOSE`), reporting errors. Dropping the stream closes it too, with a
    /// plain `close(2)`, after the kernel is done with its last send.
    pub fn close(mut self) -> io::Result<()> {
        let sent = self.flush();
        // Cancels a multishot recv before the descriptor goes.
        drop(std::mem::take(&mut *self.recv.lock()));
        // The table's reference would keep the socket open past the close.
        self.fixed.release();
        let closed = match self.inner.take() {
            Some(s) => driver::run(Sqe::close(OwnedFd::from(s))).map(drop),
            None => Ok(()),
        };
        sent.and(closed)
    }
}

/// Waits for the write-behind send in `slot` and reports how it ended; its op, when it
/// ended well, for the next send to reuse.
fn settle(slot: &mut Option<(Pushed, usize)>) -> io::Result<Option<OpRef>> {
    let Some((mut pushed, len)) = slot.take() else {
        return Ok(None);
    };
    // Usually the send is done and the stream holds its op alone: read it without the lock.
    let (res, _) = match op::Op::take_if_done(&mut pushed.op) {
        Some(r) => r,
        None => driver::wait(&pushed)?,
    };
    if res < 0 {
        return Err(io::Error::from_raw_os_error(-res));
    }
    if usize::try_from(res).unwrap_or(0) < len {
        return Err(io::Error::new(
            io::ErrorKind::BrokenPipe,
            "the connection broke during a send",
        ));
    }
    Ok(Some(pushed.op))
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        let Some(sock) = self.inner.take() else {
            return;
        };
        // An op still on its way to the kernel names the socket by number: if it were
        // closed now, the number could be reused by another connection before the SQE is
        // submitted. Such ops keep the descriptor open until they are freed.
        let send = self.send.get_mut().take();
        let recv = std::mem::take(self.recv.get_mut());
        let pending: Vec<&Pushed> = send
            .iter()
            .map(|(p, _)| p)
            .chain(recv.armed.iter())
            .filter(|p| !p.op.is_done())
            .collect();
        if !pending.is_empty() {
            let fd = Arc::new(OwnedFd::from(sock));
            for p in pending {
                p.op.keep_fd(&fd);
            }
        }
        // Cancels the multishot recv; the descriptor closes with its last holder (at once
        // when no op needed it), and the socket once the fixed-file slot is emptied too.
        drop(recv);
        self.fixed.release();
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::read(self, buf)
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::read(self, buf)
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::write(self, buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &**b);
        TcpStream::write(self, first)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        TcpStream::write_all(self, buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        TcpStream::flush(self)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::write(self, buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        TcpStream::write_all(self, buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        TcpStream::flush(self)
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock().as_fd()
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

impl From<std::net::TcpStream> for TcpStream {
    fn from(s: std::net::TcpStream) -> TcpStream {
        TcpStream::from_std(s)
    }
}

impl From<TcpStream> for std::net::TcpStream {
    /// Sends what was written first (a send error is ignored: the socket is handed over
    /// as it is).
    fn from(mut s: TcpStream) -> std::net::TcpStream {
        let _ = s.flush();
        drop(std::mem::take(&mut *s.recv.lock()));
        s.fixed.release();
        match s.inner.take() {
            Some(inner) => inner,
            None => unreachable!("a TcpStream without its socket"),
        }
    }
}
