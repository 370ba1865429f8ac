//! loadgen: a latency-correct load generator for the ringside servers, built to cost less
//! CPU per message than the servers it measures.
//!
//! It drives a server over N TCP connections, closed loop (each connection keeps `depth`
//! messages in flight) or open loop (a fixed total rate; latency counts from when each message
//! was due, so coordinated omission is counted, with the service time reported beside it). It
//! checks every reply, counts what goes wrong by kind, records latencies into per-thread
//! HdrHistograms that are merged by adding, and measures its own CPU so that a run where the
//! client was the bottleneck says so.
//!
//! It is not a general HTTP or RESP benchmark: it speaks the echo and chat protocols of
//! `docs/PROTOCOL.md`, of RESP (Redis's protocol) the `GET` and `SET` of the kv workload,
//! and of HTTP/1.1 the `GET /plaintext` and `GET /json` of TechEmpower's tests.
//!
//! ```no_run
//! use std::time::Duration;
//! use loadgen::{Config, Stop};
//!
//! let mut cfg = Config::echo("127.0.0.1:7000", 100);
//! cfg.stop = Stop::Duration(Duration::from_secs(5));
//! cfg.cpus = vec![0];
//! let summary = loadgen::run(&cfg)?;
//! println!("{} echoes/s, p99 {} us", summary.throughput_per_sec, summary.latency_us.p99);
//! println!("{}", serde_json::to_string_pretty(&summary).unwrap());
//! # Ok::<(), loadgen::Error>(())
//! ```
#![forbid(unsafe_code)]

pub mod account;
pub mod agent;
pub mod announce;
mod chat;
pub mod cli;
mod config;
mod dist;
mod echo;
mod error;
pub mod fleet;
pub mod hist;
mod http;
mod kv;
mod pacing;
pub mod peer;
mod run;
mod schedule;
mod selfcheck;
mod summary;
mod sys;
mod torn;
mod worker;

pub use config::{
    Arrivals, ChatConfig, ChatProfile, Config, DEFAULT_SEED, KvConfig, Stop, Workload,
};
pub use dist::{KeyDist, Sizes};
pub use error::Error;
pub use hist::{Histograms, Percentiles};
pub use http::HttpPath;
pub use pacing::{Hiccups, Pacing};
pub use run::{run, run_gated};
pub use selfcheck::ScheduleCheck;
pub use summary::{Errors, Summary};
