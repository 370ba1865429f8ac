//! Files with pseudo-blocking positional I/O: `open`, `read_at`, `write_at`, `append`,
//! `fsync` and `close` go through the worker's ring, except where [`FileOps::Direct`]
//! finishes an open, a read or a close with a system call that does not wait.
//!
//! With [`FileOps::Direct`] (the default) an open without `O_CREAT` or `O_TRUNC` first
//! tries `openat2(RESOLVE_CACHED)`, a read `preadv2(RWF_NOWAIT)`, and `close` is a plain
//! `close(2)`; an open or read the kernel cannot finish from its caches (`EAGAIN`), or a
//! kernel or file system without those flags, goes through the ring as before
//! (`sys::file` draws the paths). On a warm cache that spares each operation an SQE, a
//! CQE and a park and resume of its fiber; on a cold one it costs one refused system call
//! before the ring.

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::driver;
use crate::stats::{LocalCounter, WorkerCounters};
use crate::sys::coro;
use crate::sys::file::{self, Direct};
use crate::sys::op::Sqe;
use crate::worker::{self, WorkerCtx};

/// How a runtime's fibers open, read and close files ([`Builder::file_ops`]).
///
/// [`Builder::file_ops`]: crate::Builder::file_ops
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FileOps {
    /// Every file operation is an io_uring operation: the fiber parks until its CQE.
    Ring,
    /// Open, read and close try a system call that finishes at once or refuses
    /// (`openat2` with `RESOLVE_CACHED`, `preadv2` with `RWF_NOWAIT`, `close`), and go to
    /// the ring only when the kernel would wait. Writes and syncs always use the ring.
    #[default]
    Direct,
}

impl FromStr for FileOps {
    type Err = String;

    fn from_str(s: &str) -> Result<FileOps, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ring" => Ok(FileOps::Ring),
            "direct" => Ok(FileOps::Direct),
            other => Err(format!(
                "unknown file operations {other:?}; expected ring or direct"
            )),
        }
    }
}

impl fmt::Display for FileOps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileOps::Ring => "ring",
            FileOps::Direct => "direct",
        })
    }
}

/// Where the calling thread's file operations go. A fiber follows its runtime's
/// [`FileOps`] and counts in its worker's statistics; a plain thread blocks either way, so
/// it always tries the direct call. While the runtime shuts down every operation takes
/// the ring path, which fails it with `ECANCELED` as it fails all new I/O.
struct Route {
    direct: bool,
    ctx: Option<Rc<WorkerCtx>>,
}

impl Route {
    fn current() -> Route {
        match worker::current() {
            Some(ctx) => Route {
                direct: ctx.rt.config.file_ops == FileOps::Direct
                    && worker::accepting_io(&ctx.rt)
                    && !coro::in_teardown(),
                ctx: Some(ctx),
            },
            None => Route {
                direct: !coro::in_teardown(),
                ctx: None,
            },
        }
    }

    fn count(&self, which: fn(&WorkerCounters) -> &LocalCounter) {
        if let Some(ctx) = &self.ctx {
            which(ctx.stats()).inc();
        }
    }

    fn done_direct(&self) {
        self.count(|c| &c.files_direct);
    }

    fn to_ring(&self) {
        self.count(|c| &c.files_to_ring);
    }
}

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

    /// Opens `path`: `openat2(RESOLVE_CACHED)` if the kernel can from its caches
    /// ([`FileOps::Direct`]), `IORING_OP_OPENAT` otherwise.
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let flags = self.flags()?;
        let path = path.as_ref().as_os_str().as_bytes();
        let route = Route::current();
        if route.direct {
            // The direct call reads the path only during the call, so a short path needs
            // no allocation; the ring's SQE needs one that lives until its completion.
            match with_c_path(path, |c| file::open_cached(c, flags))? {
                Direct::Done(r) => {
                    route.done_direct();
                    return r.map(File::from_fd);
                }
                Direct::WouldBlock | Direct::Unsupported => route.to_ring(),
            }
        }
        let path = CString::new(path).map_err(|_| nul_in_path())?;
        let (res, op) = driver::run(Sqe::open(path, flags, self.mode))?;
        Ok(File::from_fd(op.fd_result(res)?))
    }
}

/// Paths shorter than this are made NUL-terminated on the stack (as std does for its
/// system calls); longer ones are allocated.
const STACK_PATH: usize = 384;

/// Calls `f` with `path` as a C string, on the stack when it is short.
fn with_c_path<R>(path: &[u8], f: impl FnOnce(&CStr) -> R) -> io::Result<R> {
    if path.len() >= STACK_PATH {
        return CString::new(path).map(|c| f(&c)).map_err(|_| nul_in_path());
    }
    let mut buf = [0u8; STACK_PATH];
    buf[..path.len()].copy_from_slice(path);
    CStr::from_bytes_with_nul(&buf[..=path.len()])
        .map(f)
        .map_err(|_| nul_in_path())
}

fn nul_in_path() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte")
}

/// An open file.
#[derive(Debug)]
pub struct File {
    inner: std::fs::File,
    /// Reads may try `preadv2(RWF_NOWAIT)`; cleared for good once the kernel or the file
    /// system refuses the flag, so that such a file costs no refused call per read.
    nowait: AtomicBool,
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

    fn from_fd(fd: OwnedFd) -> File {
        File::from_std(std::fs::File::from(fd))
    }

    /// Reads up to `buf.len()` bytes at `offset`; `Ok(0)` at end of file. Fewer bytes than
    /// asked for is not the end of the file (with [`FileOps::Direct`] a read returns what
    /// the page cache holds): read again from where it stopped.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let route = Route::current();
        if route.direct && self.nowait.load(Ordering::Relaxed) {
            match file::pread_nowait(self.inner.as_fd(), buf, offset) {
                // Linux 5.9 and 5.10 may say 0 before the end: believe it only if the
                // file ends there; otherwise the ring reads what is there.
                Direct::Done(Ok(0))
                    if file::zero_is_suspect()
                        && !matches!(self.inner.metadata(), Ok(m) if m.len() <= offset) => {}
                Direct::Done(r) => {
                    route.done_direct();
                    return r;
                }
                Direct::WouldBlock => {}
                Direct::Unsupported => self.nowait.store(false, Ordering::Relaxed),
            }
            route.to_ring();
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

    /// Closes, reporting errors: a plain `close(2)` with [`FileOps::Direct`] (closing a
    /// regular file does not wait for the disk), through the ring (`IORING_OP_CLOSE`)
    /// otherwise. Dropping the file closes it too, with a plain `close(2)`.
    pub fn close(self) -> io::Result<()> {
        let route = Route::current();
        let fd = OwnedFd::from(self.inner);
        if route.direct {
            route.done_direct();
            return file::close(fd);
        }
        driver::run(Sqe::close(fd)).map(drop)
    }

    /// Wraps a std file.
    pub fn from_std(inner: std::fs::File) -> File {
        File {
            inner,
            nowait: AtomicBool::new(true),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::file::test_hook::{self, Hook};
    use crate::{Runtime, WorkerStats};

    fn runtime(ops: FileOps) -> Option<Runtime> {
        if let Err(e) = crate::probe() {
            eprintln!("skipped: {e}");
            return None;
        }
        Some(
            Runtime::builder()
                .workers(1)
                .stack_size(64 * 1024)
                .file_ops(ops)
                .build()
                .expect("build a runtime"),
        )
    }

    /// A file of `len` bytes, each its offset modulo 251, so that a misplaced chunk shows.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// Reads the whole file the way the search does: `read_at` until it returns 0.
    fn read_to_end(f: &File, chunk: usize) -> io::Result<Vec<u8>> {
        let (mut out, mut buf) = (Vec::new(), vec![0u8; chunk]);
        loop {
            match f.read_at(&mut buf, out.len() as u64)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Opens, reads to the end and closes `path` on a fiber with `hook` set on its worker,
    /// returning the bytes and the worker's counters.
    fn open_read_close(
        ops: FileOps,
        hook: Hook,
        path: std::path::PathBuf,
        chunk: usize,
    ) -> Option<(Vec<u8>, WorkerStats)> {
        let rt = runtime(ops)?;
        let got = rt
            .block_on(move || -> io::Result<Vec<u8>> {
                test_hook::set(hook);
                let f = File::open(&path)?;
                let data = read_to_end(&f, chunk);
                f.close()?;
                test_hook::set(Hook::Off);
                data
            })
            .expect("the fiber ran")
            .expect("open, read and close");
        Some((got, rt.stats().workers[0]))
    }

    #[test]
    fn a_warm_file_is_read_without_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warm");
        let data = pattern(100_000);
        std::fs::write(&path, &data).unwrap();
        let _ = std::fs::read(&path).unwrap();
        let Some((got, s)) = open_read_close(FileOps::Direct, Hook::Off, path, 4096) else {
            return;
        };
        assert!(got == data, "the bytes read differ from the file");
        // 25 reads of data, one at the end, the open and the close.
        assert_eq!(s.files_direct + s.files_to_ring, 28, "{s:?}");
        assert!(s.files_direct >= 1, "the close is always direct: {s:?}");
        if s.files_to_ring > 0 {
            eprintln!(
                "this kernel or file system sent {} to the ring",
                s.files_to_ring
            );
        }
    }

    #[test]
    fn operations_that_would_wait_go_to_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eagain");
        let data = pattern(10_000);
        std::fs::write(&path, &data).unwrap();
        let Some((got, s)) = open_read_close(FileOps::Direct, Hook::Eagain, path, 4096) else {
            return;
        };
        assert!(got == data, "the bytes read differ from the file");
        // The open and 4 reads (3 of data, one at the end) fell back; the close did not.
        assert_eq!((s.files_direct, s.files_to_ring), (1, 5), "{s:?}");
        assert!(s.ops_submitted >= 5, "{s:?}");
    }

    #[test]
    fn ring_mode_never_calls_directly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring");
        let data = pattern(10_000);
        std::fs::write(&path, &data).unwrap();
        let Some((got, s)) = open_read_close(FileOps::Ring, Hook::Off, path, 4096) else {
            return;
        };
        assert!(got == data, "the bytes read differ from the file");
        assert_eq!((s.files_direct, s.files_to_ring), (0, 0), "{s:?}");
        assert_eq!(s.ops_submitted, 6, "open, 4 reads, close: {s:?}");
    }

    /// Linux 5.9 and 5.10 may answer 0 before the end of the file (tokio#3803): a 0 is
    /// believed only where the file ends, and read through the ring elsewhere.
    #[test]
    fn a_spurious_zero_is_not_taken_for_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zero");
        let data = pattern(10_000);
        std::fs::write(&path, &data).unwrap();
        let Some((got, s)) = open_read_close(FileOps::Direct, Hook::SpuriousZero, path, 4096)
        else {
            return;
        };
        assert!(got == data, "a spurious 0 ended the read early");
        // Every data read went to the ring; the 0 at the end was believed directly.
        assert_eq!(s.files_to_ring, 3, "{s:?}");
    }

    /// A file whose tail is not in the page cache: a direct read returns the cached part
    /// (short, not the end), and the next read from there goes to the ring. (The file is
    /// large because ext4 caches in large folios, which a partial `DONTNEED` keeps.)
    #[test]
    fn a_partly_cached_file_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("partly");
        let data = pattern(8 << 20);
        std::fs::write(&path, &data).unwrap();
        {
            let f = std::fs::File::open(&path).unwrap();
            f.sync_all().unwrap();
            test_hook::drop_cache(f.as_fd(), 4 << 20).unwrap();
        }
        let Some(rt) = runtime(FileOps::Direct) else {
            return;
        };
        let p = path.clone();
        let (whole, exact) = rt
            .block_on(move || -> io::Result<(Vec<u8>, Vec<u8>)> {
                let f = File::open(&p)?;
                let whole = read_to_end(&f, 8 << 20)?;
                test_hook::drop_cache(f.as_fd(), 4 << 20)?;
                let mut exact = vec![0u8; 8 << 20];
                f.read_exact_at(&mut exact, 0)?;
                f.close()?;
                Ok((whole, exact))
            })
            .unwrap()
            .unwrap();
        assert!(whole == data, "read_at until 0 lost or misplaced bytes");
        assert!(exact == data, "read_exact_at lost or misplaced bytes");
        let s = rt.stats().workers[0];
        eprintln!("direct {}, to the ring {}", s.files_direct, s.files_to_ring);
    }

    #[test]
    fn errors_are_the_same_on_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for (ops, hook) in [
            (FileOps::Direct, Hook::Off),
            (FileOps::Direct, Hook::Eagain),
            (FileOps::Ring, Hook::Off),
        ] {
            let Some(rt) = runtime(ops) else { return };
            let d = dir.path().to_path_buf();
            let kinds = rt
                .block_on(move || {
                    test_hook::set(hook);
                    let missing = File::open(d.join("missing")).map(drop);
                    let nofollow = OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(d.join("link"))
                        .map(drop);
                    let dir_read = File::open(&d).and_then(|f| f.read_at(&mut [0u8; 8], 0));
                    test_hook::set(Hook::Off);
                    [missing.err(), nofollow.err(), dir_read.err()]
                        .map(|e| e.and_then(|e| e.raw_os_error()))
                })
                .unwrap();
            assert_eq!(
                kinds,
                [Some(libc::ENOENT), Some(libc::ELOOP), Some(libc::EISDIR)],
                "{ops} with {hook:?}"
            );
        }
    }

    /// A path is made a C string on the stack when short and allocated when long, on
    /// either route; a NUL inside it is an error, not a shorter path.
    #[test]
    fn long_short_and_nul_paths() {
        let dir = tempfile::tempdir().unwrap();
        let mut long = dir.path().to_path_buf();
        while long.as_os_str().len() < 2 * STACK_PATH {
            long.push("a-directory-name-of-some-length");
        }
        std::fs::create_dir_all(&long).unwrap();
        let long = long.join("f");
        let short = dir.path().join("f");
        std::fs::write(&long, b"long").unwrap();
        std::fs::write(&short, b"short").unwrap();
        for (ops, hook) in [
            (FileOps::Direct, Hook::Off),
            (FileOps::Direct, Hook::Eagain),
            (FileOps::Ring, Hook::Off),
        ] {
            let Some(rt) = runtime(ops) else { return };
            let (l, s) = (long.clone(), short.clone());
            let (got, nul) = rt
                .block_on(move || {
                    test_hook::set(hook);
                    let got = [l, s].map(|p| File::open(p).and_then(|f| read_to_end(&f, 64)));
                    let nul = File::open("a\0b").map(drop);
                    test_hook::set(Hook::Off);
                    (got.map(Result::unwrap), nul.unwrap_err().kind())
                })
                .unwrap();
            assert_eq!(
                got,
                [b"long".to_vec(), b"short".to_vec()],
                "{ops} with {hook:?}"
            );
            assert_eq!(nul, io::ErrorKind::InvalidInput, "{ops} with {hook:?}");
        }
    }

    #[test]
    fn file_ops_parse_and_print() {
        for ops in [FileOps::Ring, FileOps::Direct] {
            assert_eq!(ops.to_string().parse::<FileOps>(), Ok(ops));
        }
        assert_eq!(" Direct ".parse::<FileOps>(), Ok(FileOps::Direct));
        assert!("uring".parse::<FileOps>().is_err());
        assert_eq!(FileOps::default(), FileOps::Direct);
    }
}
