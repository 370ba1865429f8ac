//! Measures what the crate docs argue: the cost of a `SAY` (`Hub::say`, a
//! `write(2)` of one record, with `fdatasync(2)` under `--fsync always`) run inline
//! in a task, against the same call handed to `spawn_blocking` and awaited.
//!
//! ```text
//! cargo run --release -p server-tokio --example hub_offload -- [DATA_DIR]
//! ```
//!
//! DATA_DIR defaults to a temporary directory; give a directory on the disk the
//! server would use, since `fdatasync` costs what that disk costs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use service::hub::{Hub, Line, Subscriber};
use service::log::Fsync;

/// Subscribers are not what is measured.
#[derive(Clone)]
struct Nobody;

impl Subscriber for Nobody {
    fn offer(&self, _: &Line) -> bool {
        true
    }
    fn push_seam(&self, _: Vec<u8>) {}
}

fn main() -> anyhow::Result<()> {
    let temp = tempfile::tempdir()?;
    let base: PathBuf = std::env::args_os()
        .nth(1)
        .map_or_else(|| temp.path().to_owned(), PathBuf::from);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for (fsync, name, n) in [
        (Fsync::Never, "never", 20_000u32),
        (Fsync::Always, "always", 300),
    ] {
        let dir = tempfile::tempdir_in(&base)?;
        let hub = Arc::new(Hub::<Nobody>::open(Some(dir.path()), fsync)?);
        let text = "x".repeat(64);
        let inline = runtime.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                hub.say("r", 1, "anon", &text)?;
            }
            anyhow::Ok(start.elapsed() / n)
        })?;
        let offloaded = runtime.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                let (hub, text) = (Arc::clone(&hub), text.clone());
                tokio::task::spawn_blocking(move || hub.say("r", 1, "anon", &text)).await??;
            }
            anyhow::Ok(start.elapsed() / n)
        })?;
        println!(
            "--fsync {name:<6} SAY inline {inline:>10.1?}   via spawn_blocking {offloaded:>10.1?}   ({n} each)"
        );
    }
    Ok(())
}
