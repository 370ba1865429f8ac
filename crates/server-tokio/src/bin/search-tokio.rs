//! search-tokio: the file-content search as idiomatic Tokio does it: `tokio::fs` on the
//! multi-thread runtime, a task per directory and per file.
//!
//! `tokio::fs` runs each file-system call on Tokio's blocking thread pool
//! (`spawn_blocking`), so this is what a Tokio program gets for files without io_uring:
//! every open and every `--chunk` byte read is a hand-off to a pool thread and back. A
//! semaphore keeps `FILES_IN_FLIGHT_PER_WORKER` files per worker open at once. The walk's
//! rules (no link followed, only regular files opened, `O_NONBLOCK` against FIFOs) are
//! `search::walk`'s.

#![forbid(unsafe_code)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use search::cli::Config;
use search::tally::Tally;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER, Kind};
use tokio::io::AsyncReadExt;
use tokio::sync::{Semaphore, mpsc};

const NAME: &str = "search-tokio";

/// What every task shares; `_alive` is a sender each task holds, so that the walk is over
/// when the receiver sees them all dropped.
#[derive(Debug, Clone)]
struct Ctx {
    config: Arc<Config>,
    tally: Arc<Tally>,
    open_files: Arc<Semaphore>,
    _alive: mpsc::Sender<()>,
}

/// Boxed because it spawns itself: a recursive `async fn` would have an infinite type.
fn walk_dir(dir: PathBuf, ctx: Ctx) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let mut entries = match tokio::fs::read_dir(&dir).await {
            Ok(e) => e,
            Err(e) => return ctx.tally.error(&dir, "cannot list", e),
        };
        loop {
            let entry = match entries.next_entry().await {
                Ok(Some(e)) => e,
                Ok(None) => return,
                Err(e) => return ctx.tally.error(&dir, "cannot list", e),
            };
            match entry.file_type().await.map(Kind::of) {
                Ok(Kind::Dir) => drop(tokio::spawn(walk_dir(entry.path(), ctx.clone()))),
                Ok(Kind::File) => drop(tokio::spawn(search_file(entry.path(), ctx.clone()))),
                Ok(Kind::Skip) => {}
                Err(e) => ctx.tally.error(&entry.path(), "cannot stat", e),
            }
        }
    })
}

async fn search_file(path: PathBuf, ctx: Ctx) {
    let Ok(_permit) = ctx.open_files.acquire().await else {
        return; // Closed: never, the semaphore lives as long as the tasks.
    };
    let mut file = match tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(walk::OPEN_FLAGS)
        .open(&path)
        .await
    {
        Ok(f) => f,
        Err(e) => return ctx.tally.error(&path, "cannot open", e),
    };
    let mut buf = vec![0u8; ctx.config.chunk];
    let mut scan = ctx.config.matcher.scan();
    loop {
        match file.read(&mut buf).await {
            Ok(0) => return ctx.tally.file(scan.bytes(), scan.matches()),
            Ok(n) => scan.feed(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return ctx.tally.error(&path, "cannot read", e),
        }
    }
}

fn main() {
    let config = Arc::new(search::cli::parse_or_exit(NAME));
    // Pinned before the runtime starts, so that its workers and blocking pool inherit it.
    if let Err(e) = config.pin_all() {
        eprintln!("{NAME}: {e}");
        std::process::exit(1);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers)
        .thread_name(NAME)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{NAME}: cannot start the Tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    let tally = Arc::new(Tally::new());
    let start = Instant::now();
    rt.block_on(async {
        let (alive, mut over) = mpsc::channel::<()>(1);
        let ctx = Ctx {
            config: Arc::clone(&config),
            tally: Arc::clone(&tally),
            open_files: Arc::new(Semaphore::new(FILES_IN_FLIGHT_PER_WORKER * config.workers)),
            _alive: alive,
        };
        for root in &config.roots {
            match walk::root_kind(root) {
                Ok(Kind::Dir) => drop(tokio::spawn(walk_dir(root.clone(), ctx.clone()))),
                Ok(Kind::File) => drop(tokio::spawn(search_file(root.clone(), ctx.clone()))),
                Ok(Kind::Skip) => {}
                Err(e) => tally.error(root, "cannot stat", e),
            }
        }
        drop(ctx);
        // No task ever sends: this returns `None` once the last task has dropped its sender.
        over.recv().await
    });
    println!("{}", tally.summary(start.elapsed()).to_line());
}
