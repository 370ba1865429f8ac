//! The walk's rules, the same for every runtime: what is searched, how a file is opened,
//! and the read loops of the blocking programs ([`scan_blocking`], and a whole file with
//! [`search_file_blocking`]) and of the io_uring
//! programs that lend the ring an owned buffer ([`scan_owned`]).
//!
//! - A directory entry's type comes from the directory listing (`d_type`, with an `lstat`
//!   only where the file system does not fill it in), so a symbolic link is seen as a link
//!   and never followed: a link loop cannot trap the walk, and a linked file is not
//!   searched twice (ripgrep's `--no-follow`).
//! - Only regular files are opened, and with `O_NOFOLLOW | O_NONBLOCK`: should an entry be
//!   replaced by a link or a FIFO between the listing and the open, the open fails or
//!   returns at once instead of following it or blocking for a writer that never comes.
//! - Everything else (FIFOs, sockets, devices) is skipped, not counted.

use std::fs::FileType;
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use crate::matcher::{Matcher, Scan};

/// What the walk does with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Descend.
    Dir,
    /// Search.
    File,
    /// Leave alone: a symbolic link, a FIFO, a socket, a device.
    Skip,
}

impl Kind {
    /// The kind of an entry of type `t` (not followed).
    pub fn of(t: FileType) -> Kind {
        if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            debug_assert!(
                t.is_symlink()
                    || t.is_fifo()
                    || t.is_socket()
                    || t.is_block_device()
                    || t.is_char_device()
            );
            Kind::Skip
        }
    }
}

/// Files a worker of an asynchronous program (Tokio, tokio-uring, fibers, goroutines)
/// keeps open and in flight at once: enough to keep the kernel busy, few enough to stay far
/// from the default limit of 1024 descriptors. A thread per worker has one.
pub const FILES_IN_FLIGHT_PER_WORKER: usize = 64;

/// Where a walk starts: each root as given, followed if it is a link (as ripgrep does with
/// the paths on its command line), searched if it is a file, walked if a directory.
pub fn root_kind(path: &std::path::Path) -> io::Result<Kind> {
    std::fs::metadata(path).map(|m| Kind::of(m.file_type()))
}

/// Flags added to a read-only open of a file to search (see the module's doc).
pub const OPEN_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// std's options for opening a file to search.
pub fn open_options() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.read(true).custom_flags(OPEN_FLAGS);
    o
}

/// Opens one file with [`open_options`], reads it through `buf` in blocking reads and
/// counts it in `tally` (or names it there as an error): the whole file step of the
/// programs whose reads block (search-threads on OS threads, search-may in coroutines).
pub fn search_file_blocking(
    path: &std::path::Path,
    matcher: &Matcher,
    buf: &mut [u8],
    tally: &crate::tally::Tally,
) {
    use std::io::Read as _;
    let mut file = match open_options().open(path) {
        Ok(f) => f,
        Err(e) => return tally.error(path, "cannot open", e),
    };
    match scan_blocking(matcher, buf, |b| file.read(b)) {
        Ok(scan) => tally.file(scan.bytes(), scan.matches()),
        Err(e) => tally.error(path, "cannot read", e),
    }
}

/// Reads a file to its end through `read` (a blocking read of at most `buf.len()` bytes,
/// `Ok(0)` at the end) and counts the needle; returns the scan for its bytes and matches.
pub fn scan_blocking<'m>(
    matcher: &'m Matcher,
    buf: &mut [u8],
    mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
) -> io::Result<Scan<'m>> {
    let mut scan = matcher.scan();
    loop {
        match read(buf) {
            Ok(0) => return Ok(scan),
            Ok(n) => scan.feed(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads a file to its end through `read_at` (an io_uring read that takes the buffer by
/// value and gives it back, as tokio-uring's, monoio's and compio's `read_at` do: into
/// the buffer's capacity, at an offset, `Ok(0)` at the end) and counts the needle;
/// returns the scan for its bytes and matches. `buf` is cleared before each read and
/// is there again afterwards, for the next file.
pub async fn scan_owned<'m>(
    matcher: &'m Matcher,
    buf: &mut Vec<u8>,
    mut read_at: impl AsyncFnMut(Vec<u8>, u64) -> (io::Result<usize>, Vec<u8>),
) -> io::Result<Scan<'m>> {
    let mut scan = matcher.scan();
    let mut offset = 0u64;
    loop {
        let mut lent = std::mem::take(buf);
        lent.clear();
        let (read, back) = read_at(lent, offset).await;
        *buf = back;
        match read {
            Ok(0) => return Ok(scan),
            Ok(n) => {
                scan.feed(&buf[..n]);
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn kinds_and_a_fifo_open_that_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let kind = |name: &str| {
            Kind::of(
                std::fs::symlink_metadata(dir.path().join(name))
                    .unwrap()
                    .file_type(),
            )
        };
        assert_eq!(kind("fifo"), Kind::Skip);
        assert_eq!(kind("link"), Kind::Skip);
        assert_eq!(kind("f"), Kind::File);
        assert_eq!(
            Kind::of(std::fs::symlink_metadata(dir.path()).unwrap().file_type()),
            Kind::Dir
        );
        // Even opened by mistake, a FIFO with no writer returns at once, and a link fails.
        let mut f = open_options().open(&fifo).unwrap();
        assert_eq!(f.read(&mut [0u8; 8]).unwrap(), 0);
        assert!(open_options().open(&link).is_err());
    }

    #[test]
    fn the_blocking_loop_counts_across_reads() {
        let m = Matcher::new(b"abc").unwrap();
        let data = b"xxabcxxabcab";
        let mut at = 0;
        let mut buf = [0u8; 3];
        let scan = scan_blocking(&m, &mut buf, |b| {
            let n = b.len().min(data.len() - at);
            b[..n].copy_from_slice(&data[at..at + n]);
            at += n;
            Ok(n)
        })
        .unwrap();
        assert_eq!((scan.bytes(), scan.matches()), (12, 2));
    }

    #[test]
    fn the_owned_buffer_loop_reads_at_each_offset_and_keeps_the_buffer() {
        use std::pin::pin;
        use std::task::{Context, Poll, Waker};

        let m = Matcher::new(b"abc").unwrap();
        let data = b"xxabcxxabcab";
        let mut buf = Vec::with_capacity(3);
        let read_at = async |mut b: Vec<u8>, at: u64| {
            let at = at as usize;
            let n = b.capacity().min(data.len() - at);
            b.extend_from_slice(&data[at..at + n]);
            (Ok(n), b)
        };
        let scanned =
            pin!(scan_owned(&m, &mut buf, read_at)).poll(&mut Context::from_waker(Waker::noop()));
        let Poll::Ready(Ok(scan)) = scanned else {
            panic!("the reads complete at once");
        };
        assert_eq!((scan.bytes(), scan.matches()), (12, 2));
        assert!(buf.capacity() >= 3, "the buffer came back");
    }
}
