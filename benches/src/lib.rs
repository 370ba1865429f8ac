//! ringside's microbenchmarks: the pieces the criterion benchmarks in `benches/` time,
//! and the report that sets their results beside the papers' figures.
//!
//! What is here: the system-call techniques of the io_uring paper's Table I
//! ([`syscall`]), thread, coroutine and task switches and spawns ([`switch`]), the chat
//! codec and room-log workloads ([`workload`]), memory per parked unit ([`memory`]), and
//! the `micro.md` report ([`report`], run by the `micro-report` binary). What is not: any
//! server or load generator; those are measured by `cargo xtask bench`.
//!
//! Every operation checks its result, so a broken path fails rather than timing nothing:
//!
//! ```no_run
//! use benches::syscall::{EventfdBench, Technique};
//!
//! let mut bench = EventfdBench::new(Technique::Blocking)?;
//! let spent = bench.time_reads(1000)?; // 1000 reads, each checked against its write
//! println!("{:?} per read", spent / 1000);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Unsafe code lives in [`sys`] alone.

#![deny(unsafe_code)]

pub mod ids;
pub mod memory;
pub mod report;
pub mod switch;
#[allow(unsafe_code)] // The one module that talks to io_uring, AIO and futexes directly.
pub mod sys;
pub mod syscall;
pub mod workload;
