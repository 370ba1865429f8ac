//! What srv-may and search-may share: starting (and cancelling) coroutines on may's
//! scheduler, the one place either program touches may's `unsafe` API ([`coroutines`]).
//! The servers themselves are in the binaries (`src/main.rs`, `src/bin/search-may.rs`).
//!
//! ```no_run
//! let handle = server_may::coroutines::spawn(|| 1 + 1)?;
//! assert_eq!(handle.join().ok(), Some(2));
//! # Ok::<(), std::io::Error>(())
//! ```
#![deny(unsafe_code)] // Only `coroutines.rs` may use it, and says why.

pub mod coroutines;
