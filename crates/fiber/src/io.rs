//! Pseudo-blocking reads and writes on any file descriptor (a pipe, an eventfd, a
//! signalfd): a fiber can wait for a signal by reading a signalfd without blocking its worker.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::driver;
use crate::sys::op::Sqe;

/// Reads from `fd` at its current position (or from a stream), parking the fiber until
/// data is there.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    let (n, op) = driver::run(Sqe::read_at(fd.as_raw_fd(), buf.len(), u64::MAX))?;
    Ok(op.copy_out(usize::try_from(n).unwrap_or(0), buf))
}

/// Writes to `fd` at its current position (or to a stream), parking the fiber until the
/// kernel took at least one byte.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    let (n, _) = driver::run(Sqe::write_at(fd.as_raw_fd(), buf, u64::MAX))?;
    Ok(usize::try_from(n).unwrap_or(0))
}
