//! The connection loops of servers whose sockets are futures-io streams
//! (`AsyncRead + AsyncWrite`): srv-glommio's `glommio::net::TcpStream` and srv-smol's
//! `smol::net::TcpStream` run the same echo ([`echo`]), request-reply ([`exchange`])
//! and chat ([`chat`]) code, and differ only in how they accept, spawn, and run a
//! blocking call ([`crate::offload::BlockingPool`]).
//!
//! They live here because `futures-io` is traits only (no executor, no reactor, no
//! dependency of its own), so `service` stays free of any runtime, as it is for the
//! blocking loops generic over `Read + Write` ([`crate::echo::serve_blocking`]). The
//! few extension methods they need (`read`, `write`, `write_all`) are written here on
//! the traits' poll methods, as futures-lite's `AsyncReadExt`/`AsyncWriteExt` write
//! them, rather than pulling futures-lite in.
//!
//! A loop counts through [`Counts`]: a server hands it the connection task's own
//! [`Tally`], as srv-tokio's tasks and srv-may's coroutines count, or anything else that
//! counts (the tests' own).

use std::future::poll_fn;
use std::io;
use std::pin::Pin;

use futures_io::{AsyncRead, AsyncWrite};

use crate::counters::{Count, Tally};

pub mod chat;
pub mod echo;
pub mod exchange;

/// What the loops here count, as the stop line reports it.
pub trait Counts {
    /// `n` bytes were read from a client.
    fn bytes_in(&mut self, n: usize);
    /// `n` bytes were written to a client.
    fn bytes_out(&mut self, n: usize);
    /// A chat line was handled.
    fn line(&mut self);
    /// A chat connection was cut off as a slow subscriber.
    fn cut(&mut self);
}

/// Each count in the task's own block: a plain load and store, no lock, no thread-local
/// lookup and no line another task writes.
impl Counts for Tally {
    fn bytes_in(&mut self, n: usize) {
        self.add(Count::BytesIn, n as u64);
    }

    fn bytes_out(&mut self, n: usize) {
        self.add(Count::BytesOut, n as u64);
    }

    fn line(&mut self) {
        self.add(Count::Lines, 1);
    }

    fn cut(&mut self) {
        self.add(Count::Cut, 1);
    }
}

/// Reads into `buf`: the count read, 0 at end of stream.
async fn read<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut [u8]) -> io::Result<usize> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, buf)).await
}

/// Writes some of `buf`: the count written.
async fn write<S: AsyncWrite + Unpin>(stream: &mut S, buf: &[u8]) -> io::Result<usize> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_write(cx, buf)).await
}

/// Writes all of `buf`; a write of nothing is [`io::ErrorKind::WriteZero`].
async fn write_all<S: AsyncWrite + Unpin>(stream: &mut S, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match write(stream, buf).await? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => buf = &buf[n..],
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! An in-memory duplex stream and a counter for the loops' tests: each poll
    //! completes at once, so a test polls a loop to its end without a runtime.

    use std::future::Future;
    use std::pin::{Pin, pin};
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Reads come from `input` (at most `chunk` bytes each, then end of stream);
    /// writes go to `output`.
    #[derive(Debug, Default)]
    pub(super) struct Duplex {
        pub(super) input: Vec<u8>,
        pub(super) chunk: usize,
        pub(super) output: Vec<u8>,
    }

    impl AsyncRead for Duplex {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.chunk).min(self.input.len());
            buf[..n].copy_from_slice(&self.input[..n]);
            self.input.drain(..n);
            Poll::Ready(Ok(n))
        }
    }

    impl AsyncWrite for Duplex {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.output.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Counts what the loops report.
    #[derive(Debug, Default)]
    pub(super) struct Seen {
        pub(super) bytes_in: usize,
        pub(super) bytes_out: usize,
        pub(super) lines: usize,
        pub(super) cuts: usize,
    }

    impl Counts for Seen {
        fn bytes_in(&mut self, n: usize) {
            self.bytes_in += n;
        }
        fn bytes_out(&mut self, n: usize) {
            self.bytes_out += n;
        }
        fn line(&mut self) {
            self.lines += 1;
        }
        fn cut(&mut self) {
            self.cuts += 1;
        }
    }

    /// Polls `f` once; it must be done.
    pub(super) fn ready<F: Future>(f: F) -> F::Output {
        match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("the loop waited on an in-memory stream"),
        }
    }

    #[test]
    fn write_all_writes_everything_and_an_empty_input_reads_its_end() {
        let mut stream = Duplex::default();
        ready(write_all(&mut stream, b"hello")).unwrap();
        assert_eq!(stream.output, b"hello");
        let mut buf = [0u8; 4];
        assert_eq!(ready(read(&mut stream, &mut buf)).unwrap(), 0);
    }
}
