//! File system calls made directly, without the ring, that either finish at once or refuse:
//! `openat2` with `RESOLVE_CACHED`, `preadv2` with `RWF_NOWAIT`, and `close`.
//!
//! On a warm page cache the kernel performs an `openat` or a buffered read inline inside
//! `io_uring_enter` anyway, so the ring only adds an SQE, a CQE and a park and resume of
//! the fiber on top of the same work. These calls let `fs` try the plain system call first
//! and go to the ring only when the kernel says it would have to wait (`EAGAIN`), or does
//! not know the flag (an old kernel, a file system without `FMODE_NOWAIT`):
//!
//! ```text
//!   open:   openat2(RESOLVE_CACHED) -- fd ------------------------------> done
//!                  | EAGAIN (lookup needs I/O), or no RESOLVE_CACHED (< 5.12)
//!                  +-------------------------> IORING_OP_OPENAT, park --> done
//!   read:   preadv2(RWF_NOWAIT) ----- n > 0 (possibly short) ----------> done
//!                  | EAGAIN (not all cached), EOPNOTSUPP, ...
//!                  +-------------------------> IORING_OP_READ, park ----> done
//!   close:  close(2) -------------------------------------------------> done
//! ```
//!
//! A stream's send goes the same way ([`send_nowait`]): with nothing of the stream in flight,
//! `send(MSG_DONTWAIT)` copies the bytes into the socket's buffer, which is all the ring's
//! send would do inline, without an SQE, a CQE, an op and its reaping; only a full socket
//! buffer (`EAGAIN`) sends it to the ring, as Go's and mio's writers wait for readiness only
//! after a write that would block.
//!
//! A short result is not the end of the file: `RWF_NOWAIT` returns what the page cache
//! holds, and the caller reads again from there. A result of 0 is the end of the file,
//! except on Linux 5.9 and 5.10, whose `RWF_NOWAIT` may return 0 before it (preadv2(2),
//! BUGS; tokio#3803): there [`zero_is_suspect`] says to confirm it.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::sync::OnceLock;

use super::cvt;
use super::fd::owned_fd;

/// Flags that `RESOLVE_CACHED` refuses with `EAGAIN` in every case (they need the file
/// system), so an open carrying one goes straight to the ring.
const NOT_CACHEABLE: i32 = libc::O_CREAT | libc::O_TRUNC | libc::O_TMPFILE;

/// What a direct attempt came to.
#[derive(Debug)]
pub(crate) enum Direct<T> {
    /// The call completed: its result.
    Done(T),
    /// The call would have had to wait (`EAGAIN`: for the disk, or for room in a socket's
    /// buffer): use the ring.
    WouldBlock,
    /// The kernel or the file system does not do this kind of call (an unknown flag, no
    /// `openat2`, a filter): use the ring, and do not try again where that is known.
    Unsupported,
}

/// Whether this kernel has `openat2` with `RESOLVE_CACHED` (Linux 5.12), asked once by
/// opening `/` that way: any answer but a descriptor or `EAGAIN` (`ENOSYS` before 5.6,
/// `EINVAL` for the unknown resolve flag before 5.12, `EPERM` from a seccomp filter) means no.
fn resolve_cached_works() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(
        || match openat2_cached(c"/", libc::O_RDONLY | libc::O_DIRECTORY) {
            Ok(_) => true,
            Err(e) => e.raw_os_error() == Some(libc::EAGAIN),
        },
    )
}

fn openat2_cached(path: &CStr, flags: i32) -> io::Result<OwnedFd> {
    // `open_how` is non-exhaustive in the libc crate, so it is built from zeroes: every
    // field this kernel does not know must be 0 anyway (openat2 checks).
    // SAFETY: `open_how` is plain old data; all-zero is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    // The flags are a bit set: reinterpret the int's bits (no flag uses the sign bit).
    how.flags = u64::from(u32::from_ne_bytes((flags | libc::O_CLOEXEC).to_ne_bytes()));
    // openat2 refuses a mode without O_CREAT or O_TMPFILE, which never come here.
    how.mode = 0;
    how.resolve = libc::RESOLVE_CACHED;
    // SAFETY: [1] `path` is a NUL-terminated string that outlives the call; [2] `how` is a
    // live `open_how` and the size passed is its size, so the kernel reads only inside it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            std::ptr::from_ref(&how),
            std::mem::size_of::<libc::open_how>(),
        )
    };
    let fd = cvt(ret)?;
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("openat2 returned a bad fd"))?;
    // SAFETY: `fd` is a descriptor the kernel just opened for this call and nothing else owns.
    Ok(unsafe { owned_fd(fd) })
}

/// Opens `path` (`O_CLOEXEC` added) if the kernel can do so from its caches alone.
/// `Direct::Done(Err(_))` is the open's own failure (`ENOENT`, `ELOOP` for `O_NOFOLLOW`).
pub(crate) fn open_cached(path: &CStr, flags: i32) -> Direct<io::Result<OwnedFd>> {
    if flags & NOT_CACHEABLE != 0 || !resolve_cached_works() {
        return Direct::Unsupported;
    }
    #[cfg(test)]
    if test_hook::get() == test_hook::Hook::Eagain {
        return Direct::WouldBlock;
    }
    match openat2_cached(path, flags) {
        Ok(fd) => Direct::Done(Ok(fd)),
        Err(e) => match e.raw_os_error() {
            Some(libc::EAGAIN) => Direct::WouldBlock,
            // openat2 is stricter than openat: it refuses flag bits it does not know,
            // which openat ignores. The ring's openat decides those.
            Some(libc::EINVAL) => Direct::Unsupported,
            _ => Direct::Done(Err(e)),
        },
    }
}

/// Reads up to `buf.len()` bytes at `offset` (`u64::MAX`: at the file position) if the page
/// cache holds them: `RWF_NOWAIT`. The result may be short (only part of the range was
/// cached); 0 is the end of the file, but see [`zero_is_suspect`].
pub(crate) fn pread_nowait(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    offset: u64,
) -> Direct<io::Result<usize>> {
    #[cfg(test)]
    match test_hook::get() {
        test_hook::Hook::Off => {}
        test_hook::Hook::Eagain => return Direct::WouldBlock,
        test_hook::Hook::SpuriousZero => return Direct::Done(Ok(0)),
    }
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let offset = libc::off_t::try_from(offset).unwrap_or(-1);
    // SAFETY: [1] `iov` describes `buf`, which is live and exclusively borrowed for the
    // call, so the kernel writes only memory this function may write; [2] one iovec is
    // passed and `iov` is one live iovec.
    let ret = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
    // EOPNOTSUPP: a file system without FMODE_NOWAIT, or a kernel without RWF_NOWAIT (before
    // 4.14); ENOSYS: no preadv2 (before 4.6); EPERM: a filter; EINVAL: an unaligned O_DIRECT
    // read, whose error the ring reports as well; ESPIPE: not seekable (a FIFO), which the
    // ring reads at its position.
    let unsupported = [
        libc::EOPNOTSUPP,
        libc::ENOSYS,
        libc::EPERM,
        libc::EINVAL,
        libc::ESPIPE,
    ];
    count_or_ring(cvt(ret).map(|n| n as i64), &[libc::EAGAIN], &unsupported)
}

/// The [`Direct`] of a system call that returns a byte count: an error of `would_block`
/// sends this call to the ring, one of `unsupported` every call of its kind, and any other
/// is the call's own.
fn count_or_ring(
    ret: io::Result<i64>,
    would_block: &[i32],
    unsupported: &[i32],
) -> Direct<io::Result<usize>> {
    match ret {
        Ok(n) => Direct::Done(Ok(usize::try_from(n).unwrap_or(0))),
        Err(e) => match e.raw_os_error() {
            Some(c) if would_block.contains(&c) => Direct::WouldBlock,
            Some(c) if unsupported.contains(&c) => Direct::Unsupported,
            _ => Direct::Done(Err(e)),
        },
    }
}

/// Sends what a connected socket takes of `data` at once: `send` with `MSG_DONTWAIT` (and
/// `MSG_NOSIGNAL`, as the ring's sends: a closed peer is an error, not a signal). The count
/// may be short of `data.len()` (the buffer filled up meanwhile).
pub(crate) fn send_nowait(fd: BorrowedFd<'_>, data: &[u8]) -> Direct<io::Result<usize>> {
    #[cfg(test)]
    if test_hook::get() == test_hook::Hook::Eagain {
        return Direct::WouldBlock;
    }
    // The system call itself, not libc's `send`: that one is a cancellation point, whose
    // bookkeeping costs two locked instructions per call in a threaded process.
    // SAFETY: the kernel reads `data.len()` bytes from `data`, which is live and borrowed
    // for the call, and no address (null, length 0); it writes nothing of ours.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(fd.as_raw_fd()),
            data.as_ptr(),
            data.len(),
            libc::c_long::from(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL),
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::c_long,
        )
    };
    // ENOTSOCK, EOPNOTSUPP: not a socket (a stream made from some other descriptor); EPERM:
    // a filter. The ring's send reports what it makes of those.
    count_or_ring(
        cvt(ret),
        &[libc::EAGAIN, libc::EINTR],
        &[libc::ENOTSOCK, libc::EOPNOTSUPP, libc::EPERM],
    )
}

/// Whether a 0 from [`pread_nowait`] must be confirmed: Linux 5.9 and 5.10 may return 0
/// before the end of the file (fixed in 5.11). An unreadable release is treated as suspect.
pub(crate) fn zero_is_suspect() -> bool {
    #[cfg(test)]
    if test_hook::get() == test_hook::Hook::SpuriousZero {
        return true;
    }
    static SUSPECT: OnceLock<bool> = OnceLock::new();
    *SUSPECT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .and_then(|r| release_has_nowait_zero_bug(&r))
            .unwrap_or(true)
    })
}

/// `Some(true)` for a 5.9 or 5.10 release string, `None` if it does not parse.
fn release_has_nowait_zero_bug(release: &str) -> Option<bool> {
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some(major == 5 && (minor == 9 || minor == 10))
}

/// Closes `fd` with `close(2)`, reporting its error. The descriptor is gone either way
/// (Linux frees it even when close fails, `EINTR` included), so `EINTR` is no error.
pub(crate) fn close(fd: OwnedFd) -> io::Result<()> {
    let raw = fd.into_raw_fd();
    // SAFETY: `raw` came out of an `OwnedFd` just now, so this is its one and only close.
    match cvt(unsafe { libc::close(raw) }) {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Test hooks for the unit tests of `fs`, so that they reach every fallback on any kernel:
/// make this thread's direct attempts answer `EAGAIN`, or make `preadv2` return the
/// spurious 0 of Linux 5.9 and 5.10 (and `zero_is_suspect` say so); and drop a file's
/// pages from the page cache.
#[cfg(test)]
pub(crate) mod test_hook {
    use std::cell::Cell;
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd};

    /// What this thread's direct calls do.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Hook {
        /// Nothing forced.
        Off,
        /// Every `open_cached`, `pread_nowait` and `send_nowait` answers `WouldBlock`.
        Eagain,
        /// Every `pread_nowait` returns 0, and `zero_is_suspect` is true.
        SpuriousZero,
    }

    thread_local! {
        static HOOK: Cell<Hook> = const { Cell::new(Hook::Off) };
    }

    pub(crate) fn set(hook: Hook) {
        HOOK.with(|h| h.set(hook));
    }

    pub(super) fn get() -> Hook {
        HOOK.with(Cell::get)
    }

    /// Writes back and drops the file's cached pages from `offset` on
    /// (`posix_fadvise(DONTNEED)`; a no-op on tmpfs, which has no backing store).
    pub(crate) fn drop_cache(fd: BorrowedFd<'_>, offset: i64) -> io::Result<()> {
        // SAFETY: posix_fadvise takes no pointers; a bad descriptor is an error return.
        let r =
            unsafe { libc::posix_fadvise(fd.as_raw_fd(), offset, 0, libc::POSIX_FADV_DONTNEED) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(r))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn send_nowait_sends_until_the_socket_is_full_and_reports_a_closed_peer() {
        use std::os::fd::AsFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (rx, _) = listener.accept().unwrap();
        let chunk = [7u8; 64 * 1024];
        let mut sent = 0usize;
        // Loopback buffers hold a few MiB at most: full long before 1 GiB.
        let full = loop {
            match send_nowait(tx.as_fd(), &chunk) {
                Direct::Done(Ok(n)) if n > 0 && sent < 1 << 30 => sent += n,
                other => break other,
            }
        };
        assert!(
            matches!(full, Direct::WouldBlock),
            "{full:?} after {sent} bytes"
        );
        assert!(sent > 0);
        drop(rx);
        let closed = (0..100)
            .map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                send_nowait(tx.as_fd(), &chunk)
            })
            .find(|r| matches!(r, Direct::Done(Err(_))));
        let Some(Direct::Done(Err(e))) = closed else {
            panic!("no error after the peer closed: {closed:?}");
        };
        assert!(
            matches!(e.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)),
            "{e}"
        );
    }

    #[test]
    fn releases_with_the_zero_bug() {
        assert_eq!(release_has_nowait_zero_bug("5.10.0-21-amd64"), Some(true));
        assert_eq!(release_has_nowait_zero_bug("5.9.16"), Some(true));
        assert_eq!(release_has_nowait_zero_bug("5.11.0"), Some(false));
        assert_eq!(
            release_has_nowait_zero_bug("6.18.44-fc-v657\n"),
            Some(false)
        );
        assert_eq!(release_has_nowait_zero_bug("4.19.0"), Some(false));
        assert_eq!(release_has_nowait_zero_bug("garbage"), None);
    }

    #[test]
    fn direct_calls_open_read_and_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(b"hello")
            .unwrap();
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        let fd = match open_cached(&c, libc::O_RDONLY) {
            Direct::Done(r) => r.unwrap(),
            // An old kernel, or a lookup that needed I/O: nothing to check here.
            other => return eprintln!("skipped: openat2(RESOLVE_CACHED) gave {other:?}"),
        };
        let mut buf = [0u8; 16];
        use std::os::fd::AsFd;
        match pread_nowait(fd.as_fd(), &mut buf, 1) {
            Direct::Done(n) => assert_eq!(&buf[..n.unwrap()], b"ello"),
            other => eprintln!("preadv2(RWF_NOWAIT) gave {other:?}"),
        }
        if let Direct::Done(n) = pread_nowait(fd.as_fd(), &mut buf, 5) {
            assert_eq!(n.unwrap(), 0);
        }
        close(fd).unwrap();
        let missing =
            std::ffi::CString::new(dir.path().join("missing").as_os_str().as_encoded_bytes())
                .unwrap();
        match open_cached(&missing, libc::O_RDONLY) {
            Direct::Done(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
            Direct::WouldBlock => {}
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            open_cached(&c, libc::O_WRONLY | libc::O_TRUNC),
            Direct::Unsupported
        ));
    }
}
