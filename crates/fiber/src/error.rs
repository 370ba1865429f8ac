//! The errors of building a runtime and of joining a fiber.

use std::io;

/// Why a [`Runtime`](crate::Runtime) could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kernel has no io_uring (ENOSYS), or forbids it (EPERM: the
    /// `kernel.io_uring_disabled` sysctl, a seccomp profile such as Docker's default), or the
    /// ring could not be created.
    #[error("io_uring is unavailable: {reason} ({source})")]
    IoUringUnavailable {
        /// What the error means and what to do about it.
        reason: &'static str,
        /// The error from `io_uring_setup`.
        source: io::Error,
    },
    /// The kernel's io_uring lacks an operation the runtime needs (an old kernel).
    #[error(
        "io_uring on this kernel lacks IORING_OP_{0}; the fiber runtime needs Linux 5.19 or later"
    )]
    Unsupported(&'static str),
    /// A builder setting is out of range.
    #[error("invalid runtime configuration: {0}")]
    Config(String),
    /// A worker thread could not be started or set up.
    #[error("cannot start worker {worker}: {source}")]
    Worker {
        /// Index of the worker.
        worker: usize,
        /// The underlying error.
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn from_setup(source: io::Error) -> Error {
        let reason = match source.raw_os_error() {
            Some(libc::ENOSYS) => {
                "this kernel does not implement io_uring (ENOSYS); it needs Linux 5.19 or later \
                 built with CONFIG_IO_URING"
            }
            Some(libc::EPERM) => {
                "io_uring is forbidden here (EPERM); check /proc/sys/kernel/io_uring_disabled \
                 and the seccomp profile (Docker's default blocks io_uring)"
            }
            Some(libc::ENOMEM) => {
                "the ring memory could not be allocated (ENOMEM); check RLIMIT_MEMLOCK or use \
                 fewer ring entries"
            }
            Some(libc::EINVAL) => {
                "the kernel rejected the ring setup (EINVAL); a requested ring flag may be too \
                 new for this kernel"
            }
            _ => "io_uring_setup failed",
        };
        Error::IoUringUnavailable { reason, source }
    }
}

/// Why [`JoinHandle::join`](crate::JoinHandle::join) has no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// The fiber panicked; the panic message.
    #[error("fiber panicked: {0}")]
    Panicked(String),
    /// The fiber never finished: the runtime shut down first.
    #[error("fiber cancelled: the runtime shut down before it finished")]
    Cancelled,
    /// The fiber could not be created (no stack could be mapped).
    #[error("fiber could not be spawned: {0}")]
    Spawn(String),
    /// `join_timeout` gave up waiting.
    #[error("timed out waiting for the fiber")]
    Timeout,
}
