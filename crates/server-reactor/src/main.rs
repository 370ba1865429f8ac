//! `srv-reactor`: hand-written mio reactors, one event loop per worker
//! thread. The design is in the library's docs (`src/lib.rs`).
#![forbid(unsafe_code)]

use std::sync::Arc;

use clap::Parser;
use launch::{Counters, Shutdown};
use server_reactor::{AcceptMode, Config, Mailbox, Reactors};

/// Event loops by hand on mio: one reactor per worker thread, each
/// connection an explicit state machine over a non-blocking socket.
#[derive(Debug, Parser)]
#[command(name = "srv-reactor", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    /// How connections reach the reactors. `handoff`: one acceptor thread
    /// owns the listener and hands connections to the reactors in turn (an
    /// even spread). `reuseport`: each reactor accepts on its own
    /// SO_REUSEPORT listener and the kernel spreads connections by a hash.
    #[arg(long, value_enum, default_value_t = AcceptMode::Handoff)]
    accept: AcceptMode,
}

const NAME: &str = "srv-reactor";

fn main() {
    launch::run::<Cli>(NAME, |cli| {
        let shutdown = Shutdown::install()?;
        let hub = launch::open_rooms::<Mailbox>(&cli.common)?.map(Arc::new);
        let config = Config::from_args(&cli.common, cli.accept);
        let reactors = match cli.common.proto {
            launch::Proto::Kv => {
                let store = Arc::new(service::kv::Store::new());
                Reactors::start_kv(&config, store, cli.common.kv_max_pending())?
            }
            launch::Proto::Http => Reactors::start_http(&config, cli.common.kv_max_pending())?,
            _ => Reactors::start(&config, hub.clone())?,
        };
        launch::announce_ready(reactors.local_addr())?;
        shutdown.wait();

        let counters = Counters::default();
        counters.absorb(&reactors.stop());
        launch::finish(NAME, hub.as_deref(), &counters)
    })
}
