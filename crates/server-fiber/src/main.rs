//! `srv-fiber`: echo, chat and kv on the fiber runtime (`crates/fiber`), a fiber per
//! connection. The connection code is written in blocking style and is the very code
//! srv-threads runs on OS threads (`service::echo::serve_blocking`,
//! `service::blocking`): only the runtime differs.
//!
//! The rings: 256 submission entries (`fiber::DEFAULT_RING_ENTRIES`, `--sq-entries`, alias
//! `--ring-entries`) and a completion queue of 32,768 (`IORING_SETUP_CQSIZE`,
//! `fiber::DEFAULT_CQ_ENTRIES`, `--cq-entries`), with `SINGLE_ISSUER|DEFER_TASKRUN` and
//! multishot receive into provided buffers; the bench's `fiber-plain` runs it without
//! those (`--ring-flags none --plain-recv`). Its submission ring was not swept with the
//! peers' (issue 61 swept monoio, compio, glommio and tokio-uring; crate docs there): it
//! keeps 256, its own default, under the same command (`python3 ../shared/tools/eqload.py 3
//! CONNS SECS 20000 'target/release/srv-fiber --workers 1 --sq-entries 256' ...`).
// One function may be unsafe: the opt-in to work stealing (`serve::allow_migration`).
#![deny(unsafe_code)]

mod kv;
mod serve;
mod wakeup;

use clap::Parser;

/// A fiber per connection on per-worker io_uring rings, in blocking style.
#[derive(Debug, Parser)]
#[command(name = "srv-fiber", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    #[command(flatten)]
    runtime: serve::RuntimeArgs,

    #[command(flatten)]
    kv: kv::KvArgs,
}

const NAME: &str = "srv-fiber";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common, &cli.runtime, &cli.kv))
}
