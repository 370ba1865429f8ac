//! `--proto kv` in `--mode thread`: a thread per connection running
//! [`service::kv::serve_blocking`] against the one [`Store`] all threads share, the
//! same loop srv-fiber runs on fibers. Process mode has no kv: forked processes share
//! no memory, so each would hold a store of its own.

use std::sync::Arc;

use launch::{CommonArgs, Counters, Shutdown};
use service::echo::buffered;
use service::kv::{Store, serve_blocking};

use crate::NAME;
use crate::accept::{AfterSignal, accept_until_stop};

pub(crate) fn serve(args: &CommonArgs) -> anyhow::Result<()> {
    let shutdown = Shutdown::install()?;
    if let Some(cpus) = &args.cpus {
        // Connection threads inherit the mask of the thread that spawns them.
        launch::cpus::pin_current_thread_to(cpus)?;
    }
    let store = Arc::new(Store::new());
    let limit = args.kv_max_pending();
    let listener = launch::bind(args.addr)?;
    launch::announce_ready(listener.local_addr()?)?;

    let counters = Arc::new(Counters::default());
    accept_until_stop(
        &listener,
        &shutdown,
        |stream| {
            Counters::add(&counters.accepted, 1);
            let conn_counters = Arc::clone(&counters);
            let store = Arc::clone(&store);
            let spawned = std::thread::Builder::new()
                .name("conn".into())
                .spawn(move || {
                    let counters = conn_counters;
                    if serve_blocking(buffered(&stream), &stream, &store, limit, &counters).is_err()
                    {
                        Counters::add(&counters.errors, 1);
                    }
                    Counters::add(&counters.closed, 1);
                });
            if let Err(e) = spawned {
                eprintln!("{NAME}: cannot start a connection thread: {e}; closing it");
                Counters::add(&counters.errors, 1);
            }
        },
        |_| AfterSignal::Stop,
    )?;
    counters.report(NAME);
    Ok(())
}
