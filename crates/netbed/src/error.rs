//! What can go wrong building a test bed, each case saying what ran and what it said.

use std::io;
use std::time::Duration;

/// A `Result` whose error is netbed's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a test bed could not be built (or a bounded command not run).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The builder asked for no clients or more than [`crate::MAX_CLIENTS`].
    #[error("a test bed has 1 to {max} clients, not {0}", max = crate::MAX_CLIENTS)]
    Clients(usize),
    /// A program could not be started (it is missing, or not executable).
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: io::Error,
    },
    /// A program ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it wrote on stderr, trimmed.
        stderr: String,
    },
    /// A program did not finish in time, and was killed.
    #[error("`{command}` did not finish within {timeout:?} and was killed")]
    Timeout {
        /// The command line.
        command: String,
        /// How long it had.
        timeout: Duration,
    },
    /// A file of the ssh tier could not be written or read, or a process not waited for.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// Why it failed.
        source: io::Error,
    },
    /// An sshd exited, or did not accept a login from the server namespace in time.
    #[error("the sshd of {namespace} is not serving: {why}\n--- its stderr ---\n{stderr}")]
    Sshd {
        /// The client namespace it runs in.
        namespace: String,
        /// What was seen (its exit status, or the failed login with ssh's own stderr).
        why: String,
        /// What sshd wrote on stderr (`-e`), for its own account of the failure.
        stderr: String,
    },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}
