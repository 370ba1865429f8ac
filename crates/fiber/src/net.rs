//! TCP with pseudo-blocking calls: `accept`, `connect`, `read` and `write` park the fiber
//! while the kernel works, and the types implement [`std::io::Read`] and [`std::io::Write`]
//! (also through `&TcpStream`, so a reader fiber and a writer fiber can share one stream
//! through an `Arc`).
//!
//! Sockets stay in blocking mode: io_uring handles the waiting, and a plain thread that uses
//! them through its private ring waits the same way.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::driver::{self, Pushed};
use crate::sync::Mutex;
use crate::sys::fd::{tcp_listen, tcp_socket};
use crate::sys::op::{self, Sqe};
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
            let armed = match slot.as_ref() {
                Some(p) => p,
                None => slot.insert(driver::submit(Sqe::accept_multi(self.inner.as_raw_fd()))?),
            };
            match driver::wait(armed) {
                Ok((res, _)) => {
                    let fd = armed.op.fd_result(res);
                    if armed.op.is_done() && res < 0 {
                        // The multishot ended; the next call arms a new one.
                        *slot = None;
                    }
                    let stream = TcpStream::from_fd(fd?);
                    let peer = stream.peer_addr()?;
                    return Ok((stream, peer));
                }
                Err(e) => {
                    let ended = armed.op.is_done();
                    if ended {
                        *slot = None;
                    }
                    if e.raw_os_error() == Some(libc::ECANCELED) || !ended {
                        return Err(e);
                    }
                }
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

/// A TCP connection.
#[derive(Debug)]
pub struct TcpStream {
    inner: std::net::TcpStream,
    recv: MultiRecv,
}

/// The multishot recv of a stream (when the runtime enables multishot): the op in flight
/// and the data of a chunk the last read did not take.
#[derive(Debug, Default)]
struct MultiRecv {
    /// Set once the stream used multishot: from then on every read looks at `state` first.
    used: AtomicBool,
    state: Mutex<RecvState>,
}

#[derive(Debug, Default)]
struct RecvState {
    armed: Option<Pushed>,
    pending: Vec<u8>,
    pos: usize,
    eof: bool,
}

impl Drop for MultiRecv {
    fn drop(&mut self) {
        if let Some(p) = self.state.get_mut().armed.take() {
            driver::cancel(&p);
        }
    }
}

/// Whether reads here should use multishot recv: on a fiber of a runtime that enables it.
fn multishot_recv_here() -> bool {
    crate::park::on_fiber() && worker::current_runtime().is_some_and(|rt| rt.config.multishot_recv)
}

impl TcpStream {
    fn from_fd(fd: OwnedFd) -> TcpStream {
        TcpStream::from_std(std::net::TcpStream::from(fd))
    }

    fn read_once(&self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, op) = driver::run(Sqe::recv(self.inner.as_raw_fd(), buf.len()))?;
        Ok(op.copy_out(usize::try_from(n).unwrap_or(0), buf))
    }

    fn read_multishot(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut st = self.recv.state.lock();
        loop {
            if st.pos < st.pending.len() {
                let n = (st.pending.len() - st.pos).min(buf.len());
                buf[..n].copy_from_slice(&st.pending[st.pos..st.pos + n]);
                st.pos += n;
                if st.pos == st.pending.len() {
                    st.pending.clear();
                    st.pos = 0;
                }
                return Ok(n);
            }
            if st.eof {
                return Ok(0);
            }
            let armed = match st.armed.take() {
                Some(p) => p,
                // Off a fiber, or on a runtime without multishot: a plain recv.
                None if !multishot_recv_here() => return self.read_once(buf),
                None => driver::submit(Sqe::recv_multi(self.inner.as_raw_fd()))?,
            };
            let result = driver::wait_data(&armed);
            let more = matches!(&result, Ok((_, flags, _)) if op::cqe_more(*flags));
            if more {
                st.armed = Some(armed);
            }
            match result {
                Ok((res, _, data)) if res > 0 => {
                    st.pending = data.unwrap_or_default();
                    st.pos = 0;
                }
                Ok((0, _, _)) => {
                    st.eof = true;
                    return Ok(0);
                }
                // The ring ran out of provided buffers and the multishot ended: re-arm.
                Ok((res, _, _)) if res == -libc::ENOBUFS => {}
                Ok((res, _, _)) => return Err(io::Error::from_raw_os_error(-res)),
                Err(e) => return Err(e),
            }
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
            inner,
            recv: MultiRecv::default(),
        }
    }

    /// Reads what is available (at least one byte), parking until something is; `Ok(0)` at
    /// end of stream.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.recv.used.load(Ordering::Relaxed) {
            return self.read_multishot(buf);
        }
        if multishot_recv_here() {
            self.recv.used.store(true, Ordering::Relaxed);
            return self.read_multishot(buf);
        }
        self.read_once(buf)
    }

    /// Writes some of `buf`, parking until the kernel took at least one byte.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (n, _) = driver::run(Sqe::send(self.inner.as_raw_fd(), buf))?;
        Ok(usize::try_from(n).unwrap_or(0))
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

    /// Shuts down the read half, the write half, or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.shutdown(how)
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.inner.set_nodelay(on)
    }

    /// Reads `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.nodelay()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Closes the socket through the ring (`IORING_OP_CLOSE`), reporting errors. Dropping
    /// the stream closes it too, with a plain `close(2)`.
    pub fn close(self) -> io::Result<()> {
        let TcpStream { inner, recv } = self;
        // Cancels a multishot recv before the descriptor goes.
        drop(recv);
        driver::run(Sqe::close(OwnedFd::from(inner))).map(drop)
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
        Ok(())
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
        Ok(())
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl From<std::net::TcpStream> for TcpStream {
    fn from(s: std::net::TcpStream) -> TcpStream {
        TcpStream::from_std(s)
    }
}

impl From<TcpStream> for std::net::TcpStream {
    fn from(s: TcpStream) -> std::net::TcpStream {
        s.inner
    }
}
