//! `srv-fiber`: echo, chat and kv on the fiber runtime (`crates/fiber`), a fiber per
//! connection. The connection code is written in blocking style and is the very code
//! srv-threads runs on OS threads (`service::echo::serve_blocking`,
//! `service::blocking`): only the runtime differs.
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
