//! Everything that touches raw memory, the kernel or a coroutine stack switch.
//!
//! The rest of the crate is safe code over the types here. Every `unsafe {}` block in this
//! module tree says, in a `// SAFETY:` comment, which invariant makes it sound, and every
//! `unsafe fn` states in `# Safety` what its caller must guarantee.

pub(crate) mod blocks;
pub(crate) mod bufring;
pub(crate) mod cell;
pub(crate) mod coro;
pub(crate) mod counted;
pub(crate) mod fd;
pub(crate) mod file;
pub(crate) mod files;
pub(crate) mod oneshot;
pub(crate) mod op;
pub(crate) mod ring;
pub(crate) mod stack;
pub(crate) mod switch;

use std::io;

/// Turns the `-1`-and-`errno` convention of libc calls into an `io::Result`.
pub(crate) fn cvt<T: IsMinusOne>(ret: T) -> io::Result<T> {
    if ret.is_minus_one() {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Return types of libc calls that signal failure with `-1`.
pub(crate) trait IsMinusOne {
    fn is_minus_one(&self) -> bool;
}

impl IsMinusOne for i32 {
    fn is_minus_one(&self) -> bool {
        *self == -1
    }
}

impl IsMinusOne for i64 {
    fn is_minus_one(&self) -> bool {
        *self == -1
    }
}

impl IsMinusOne for isize {
    fn is_minus_one(&self) -> bool {
        *self == -1
    }
}

/// The size of a page, read once.
pub(crate) fn page_size() -> usize {
    use std::sync::OnceLock;
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions; it only reads a system constant.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
    })
}
