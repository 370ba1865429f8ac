//! # search: the runtime-free half of ringside's file-content search programs
//!
//! The io_uring (EMPER) paper's headline benchmark is a file-content search (its Figure 9):
//! walk a directory tree concurrently, read every regular file in 4 KiB chunks, count a
//! needle. ringside has one such program per runtime (`search-threads`, `search-tokio`,
//! `search-tokio-uring`, `search-fiber`, `search-may`, and `search-go` beside them), each in its runtime's
//! crate. This crate is what they share, so that only the runtime differs:
//!
//! - [`matcher`]: the count of non-overlapping occurrences across chunk boundaries
//!   (`memchr::memmem`), sans I/O;
//! - [`cli`]: the one command line, `search-X --needle STR [--workers N] [--cpus LIST]
//!   [--chunk BYTES] DIR...`, and worker pinning;
//! - [`walk`]: the walk's rules (what is searched, how a file is opened so that a FIFO never
//!   blocks and a symbolic link is never followed, the blocking read loop);
//! - [`work`]: the shared queue of directories and files of the programs whose workers take
//!   from one queue, and the listing of a directory;
//! - [`tasks`]: that queue under a lock with the wakers of the async tasks waiting on it,
//!   and one task's loop, for the programs whose runtimes' wakers cross threads;
//! - [`tally`]: the counters and the one JSON line every program prints;
//! - [`corpus`]: the deterministic generated tree with known counts;
//! - [`ripgrep`]: ripgrep as the peer, its command line and its counts.
//!
//! It is not a walker: each runtime walks in its own idiom.
//!
//! ```
//! let m = search::matcher::Matcher::new(b"io_uring")?;
//! let mut scan = m.scan();
//! scan.feed(b"struct io_u");
//! scan.feed(b"ring *ring;");
//! assert_eq!(scan.matches(), 1);
//! # Ok::<(), search::matcher::NeedleError>(())
//! ```

#![forbid(unsafe_code)]

pub mod cli;
pub mod corpus;
pub mod matcher;
pub mod ripgrep;
pub mod tally;
pub mod tasks;
pub mod walk;
pub mod work;
