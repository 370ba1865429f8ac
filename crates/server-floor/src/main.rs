//! `srv-floor`: the measuring stick. A minimal echo server on one thread with no
//! runtime, straight on the kernel interface (`--api epoll` or `--api io_uring`), so
//! that every echo report shows how much each runtime adds above the kernel's cost.
#![deny(unsafe_code)] // Only `uring.rs` may use it (SQEs and the buffer ring), and says why.

mod epoll;
mod uring;

use anyhow::bail;
use clap::{Parser, ValueEnum};
use launch::{Counters, Proto, Shutdown};

/// The kernel's floor for echo: one thread, no runtime, plain echo only
/// (no chat, no --compute-us). --workers is accepted and ignored: there is one
/// thread, pinned to the first CPU of --cpus.
#[derive(Debug, Parser)]
#[command(name = "srv-floor", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    /// `epoll`: level-triggered epoll over non-blocking sockets. `io_uring`:
    /// multishot accept and multishot recv over a provided buffer ring, sends
    /// straight from the received buffers, SINGLE_ISSUER|DEFER_TASKRUN.
    #[arg(long, value_enum, default_value_t = Api::Epoll)]
    api: Api,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Api {
    Epoll,
    #[value(name = "io_uring")]
    IoUring,
}

const NAME: &str = "srv-floor";

fn main() {
    launch::run::<Cli>(NAME, |cli| {
        let args = &cli.common;
        if args.proto != Proto::Echo {
            bail!("srv-floor serves --proto echo only: it is the kernel's floor for echo");
        }
        if args.compute_us != 0 {
            bail!("srv-floor serves plain echo only: --compute-us is not supported");
        }
        let shutdown = Shutdown::install()?;
        if let Some(cpus) = &args.cpus {
            launch::cpus::pin_current_thread(cpus.for_worker(0))?;
        }
        let listener = launch::bind(args.addr)?;
        let totals = match cli.api {
            Api::Epoll => epoll::serve(listener, &shutdown)?,
            Api::IoUring => uring::serve(listener, &shutdown)?,
        };
        let counters = Counters::default();
        counters.absorb(&totals);
        counters.report(NAME);
        Ok(())
    })
}
