//! Small libc helpers: sockets, socket addresses in kernel layout, eventfds, CPU affinity.
//!
//! Every raw descriptor the kernel hands back becomes an `OwnedFd` before the next fallible
//! step, so an error path cannot leak it.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::cvt;

/// A socket address in the layout the kernel reads and writes.
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct RawAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl std::fmt::Debug for RawAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawAddr")
            .field("addr", &self.socket_addr())
            .finish()
    }
}

impl RawAddr {
    /// Room for any address, as `accept` wants it.
    pub(crate) fn empty() -> RawAddr {
        RawAddr {
            // SAFETY: `sockaddr_storage` is plain old data; all-zero is a valid value.
            storage: unsafe { mem::zeroed() },
            len: socklen_of::<libc::sockaddr_storage>(),
        }
    }

    pub(crate) fn from_socket_addr(addr: SocketAddr) -> RawAddr {
        let mut raw = RawAddr::empty();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: `sockaddr_storage` is larger than and at least as aligned as
                // `sockaddr_in`, which is what it exists to hold.
                unsafe {
                    std::ptr::write(
                        std::ptr::from_mut(&mut raw.storage).cast::<libc::sockaddr_in>(),
                        sin,
                    );
                }
                raw.len = socklen_of::<libc::sockaddr_in>();
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: as above, for `sockaddr_in6`.
                unsafe {
                    std::ptr::write(
                        std::ptr::from_mut(&mut raw.storage).cast::<libc::sockaddr_in6>(),
                        sin6,
                    );
                }
                raw.len = socklen_of::<libc::sockaddr_in6>();
            }
        }
        raw
    }

    pub(crate) fn socket_addr(&self) -> Option<SocketAddr> {
        let len = self.len as usize;
        match i32::from(self.storage.ss_family) {
            libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: the family says the storage holds a `sockaddr_in`, the length
                // covers it, and `sockaddr_storage` is suitably aligned for it.
                let sin =
                    unsafe { &*std::ptr::from_ref(&self.storage).cast::<libc::sockaddr_in>() };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for `sockaddr_in6`.
                let sin6 =
                    unsafe { &*std::ptr::from_ref(&self.storage).cast::<libc::sockaddr_in6>() };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

fn socklen_of<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(mem::size_of::<T>()).unwrap_or(libc::socklen_t::MAX)
}

/// Takes ownership of a descriptor the kernel returned in a completion.
///
/// # Safety
///
/// `fd` must be an open descriptor that nothing else owns or will close (a fresh result of
/// `accept`, `openat` or `socket`), handed to this function exactly once.
pub(crate) unsafe fn owned_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: the caller guarantees `fd` is open and unowned.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Closes a descriptor the kernel returned that nobody will take (dropped results).
///
/// # Safety
///
/// As for [`owned_fd`].
pub(crate) unsafe fn close_unowned(fd: RawFd) {
    // SAFETY: forwarded to the caller.
    drop(unsafe { owned_fd(fd) });
}

/// A new blocking TCP socket for `addr`'s family, close-on-exec.
pub(crate) fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let domain = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: `socket` has no memory preconditions; the result is checked.
    let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { owned_fd(fd) })
}

/// A listening TCP socket bound to `addr`, with `SO_REUSEADDR` and the given backlog.
pub(crate) fn tcp_listen(addr: &SocketAddr, backlog: i32) -> io::Result<OwnedFd> {
    let fd = tcp_socket(addr)?;
    set_int_opt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    let raw = RawAddr::from_socket_addr(*addr);
    // SAFETY: `raw.storage` holds a valid address of `raw.len` bytes for this call.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            std::ptr::from_ref(&raw.storage).cast(),
            raw.len,
        )
    })?;
    // SAFETY: `listen` has no memory preconditions.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(fd)
}

fn set_int_opt(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` is a live `c_int` and the length passed is its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(&value).cast(),
            socklen_of::<i32>(),
        )
    })
    .map(drop)
}

/// A close-on-exec eventfd with counter 0.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: `eventfd` has no memory preconditions; the result is checked.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { owned_fd(fd) })
}

/// Adds one to an eventfd's counter, waking whatever waits on it.
pub(crate) fn eventfd_signal(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one: u64 = 1;
    // SAFETY: `one` is a live 8-byte buffer for the duration of the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), std::ptr::from_ref(&one).cast(), 8) };
    match cvt(n) {
        Ok(_) => Ok(()),
        // The counter is saturated: the reader is awake anyway.
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Pins the calling thread to one CPU.
pub(crate) fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is out of range"),
        ));
    }
    // SAFETY: `cpu_set_t` is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `cpu` is below `CPU_SETSIZE` (checked above), so the bit is inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live, initialised `cpu_set_t` of the size passed; 0 is this thread.
    cvt(unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) }).map(drop)
}

/// User plus system CPU time of this process, in clock ticks.
pub(crate) fn process_cpu_ticks() -> io::Result<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("malformed /proc/self/stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line; 12 and 13 after ')' (0-based
    // from the state field, which is field 3).
    let utime: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0);
    let stime: u64 = fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
    Ok(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip() {
        for a in [
            "127.0.0.1:8080".parse::<SocketAddr>().unwrap(),
            "[::1]:443".parse().unwrap(),
            "[fe80::1%2]:9".parse().unwrap(),
        ] {
            assert_eq!(RawAddr::from_socket_addr(a).socket_addr(), Some(a));
        }
        assert_eq!(RawAddr::empty().socket_addr(), None);
    }

    #[test]
    fn cpu_ticks_are_readable() {
        assert!(process_cpu_ticks().is_ok());
    }
}
