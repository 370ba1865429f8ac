//! Files with pseudo-blocking positional I/O: `open`, `read_at`, `write_at`, `append`,
//! `fsync` and `close` go through the worker's ring.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::driver;
use crate::sys::op::Sqe;

/// How to open a [`File`], like `std::fs::OpenOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    create: bool,
    create_new: bool,
    truncate: bool,
    mode: u32,
    custom: i32,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Nothing set; mode 0o666 (before the umask).
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            create: false,
            create_new: false,
            truncate: false,
            mode: 0o666,
            custom: 0,
        }
    }

    /// Open for reading.
    pub fn read(mut self, on: bool) -> OpenOptions {
        self.read = on;
        self
    }

    /// Open for writing.
    pub fn write(mut self, on: bool) -> OpenOptions {
        self.write = on;
        self
    }

    /// Open for appending (`O_APPEND`): every [`File::append`] goes to the end.
    pub fn append(mut self, on: bool) -> OpenOptions {
        self.append = on;
        self
    }

    /// Create the file if missing.
    pub fn create(mut self, on: bool) -> OpenOptions {
        self.create = on;
        self
    }

    /// Create the file, failing if it exists.
    pub fn create_new(mut self, on: bool) -> OpenOptions {
        self.create_new = on;
        self
    }

    /// Truncate the file to length 0.
    pub fn truncate(mut self, on: bool) -> OpenOptions {
        self.truncate = on;
        self
    }

    /// Permission bits of a created file.
    pub fn mode(mut self, mode: u32) -> OpenOptions {
        self.mode = mode;
        self
    }

    /// Extra `open(2)` flags or'ed in, like std's `OpenOptionsExt::custom_flags`: a file
    /// search opens with `O_NOFOLLOW | O_NONBLOCK` so that a link is not followed and a
    /// FIFO does not block. The access mode bits are ignored (they come from `read` and
    /// `write`).
    pub fn custom_flags(mut self, flags: i32) -> OpenOptions {
        self.custom = flags & !libc::O_ACCMODE;
        self
    }

    fn flags(&self) -> io::Result<i32> {
        let access = match (self.read, self.write || self.append) {
            (true, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (true, true) => libc::O_RDWR,
            (false, false) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "open needs read, write or append",
                ));
            }
        };
        let mut flags = access | self.custom;
        if self.append {
            flags |= libc::O_APPEND;
        }
        if self.create_new {
            flags |= libc::O_CREAT | libc::O_EXCL;
        } else if self.create {
            flags |= libc::O_CREAT;
        }
        if self.truncate {
            flags |= libc::O_TRUNC;
        }
        Ok(flags)
    }

    /// Opens `path` (`IORING_OP_OPENAT`).
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let flags = self.flags()?;
        let path = CString::new(path.as_ref().as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
        let (res, op) = driver::run(Sqe::open(path, flags, self.mode))?;
        Ok(File {
            inner: std::fs::File::from(op.fd_result(res)?),
        })
    }
}

/// An open file.
#[derive(Debug)]
pub struct File {
    inner: std::fs::File,
}

impl File {
    /// Opens `path` for reading.
    pub fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path)
    }

    /// Creates (or truncates) `path` for writing.
    pub fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    /// Options for [`OpenOptions::open`].
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Reads up to `buf.len()` bytes at `offset`; `Ok(0)` at end of file.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (n, op) = driver::run(Sqe::read_at(self.inner.as_raw_fd(), buf.len(), offset))?;
        Ok(op.copy_out(usize::try_from(n).unwrap_or(0), buf))
    }

    /// Fills `buf` from `offset`, or fails with `UnexpectedEof`.
    pub fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }

    /// Writes some of `buf` at `offset`.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (n, _) = driver::run(Sqe::write_at(self.inner.as_raw_fd(), buf, offset))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Writes all of `buf` at `offset`.
    pub fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }

    /// Writes `buf` at the end of a file opened with [`OpenOptions::append`] (at the file
    /// position otherwise), all of it.
    pub fn append(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let (n, _) = driver::run(Sqe::write_at(self.inner.as_raw_fd(), buf, u64::MAX))?;
            match usize::try_from(n).unwrap_or(0) {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => buf = &buf[n..],
            }
        }
        Ok(())
    }

    /// Flushes data and metadata to the device (`fsync`).
    pub fn fsync(&self) -> io::Result<()> {
        driver::run(Sqe::fsync(self.inner.as_raw_fd(), false)).map(drop)
    }

    /// Flushes data to the device (`fdatasync`).
    pub fn fdatasync(&self) -> io::Result<()> {
        driver::run(Sqe::fsync(self.inner.as_raw_fd(), true)).map(drop)
    }

    /// File metadata (a plain `fstat`).
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.inner.metadata()
    }

    /// Closes through the ring (`IORING_OP_CLOSE`), reporting errors. Dropping the file
    /// closes it too, with a plain `close(2)`.
    pub fn close(self) -> io::Result<()> {
        driver::run(Sqe::close(OwnedFd::from(self.inner))).map(drop)
    }

    /// Wraps a std file.
    pub fn from_std(inner: std::fs::File) -> File {
        File { inner }
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl From<File> for std::fs::File {
    fn from(f: File) -> std::fs::File {
        f.inner
    }
}
