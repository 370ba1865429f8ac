//! `srv-reactor`: hand-written mio reactors, one event loop per worker
//! thread. The design is in the library's docs (`src/lib.rs`).
#![forbid(unsafe_code)]

use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use launch::{Counters, Proto, Shutdown};
use server_reactor::{AcceptMode, Config, Mailbox, Reactors};
use service::hub::Hub;

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
        let hub = match cli.common.proto {
            Proto::Chat => Some(Arc::new(
                Hub::<Mailbox>::open(cli.common.data.as_deref(), cli.common.fsync.into())
                    .context("opening the room logs")?,
            )),
            Proto::Echo => None,
        };
        let reactors = Reactors::start(&Config::from_args(&cli.common, cli.accept), hub.clone())?;
        launch::announce_ready(reactors.local_addr())?;
        shutdown.wait();

        let counters = Counters::default();
        counters.absorb(&reactors.stop());
        if let Some(hub) = &hub {
            hub.sync_all().context("flushing the room logs")?;
            Counters::add(&counters.messages, hub.stats().messages);
        }
        counters.report(NAME);
        Ok(())
    })
}
