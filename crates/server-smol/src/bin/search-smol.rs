//! search-smol: the file-content search as smol does it: `smol::fs` (async-fs) on one
//! executor run by `--workers` threads, a task per directory and per file.
//!
//! async-fs, like `tokio::fs`, runs the file system's blocking calls on a thread pool
//! (the `blocking` crate's, smol's `unblock`): an open or a directory listing is a
//! hand-off to a pool thread and back, and an open file is read by a pool thread into a
//! pipe-like buffer that the task then reads from. This is what a smol program gets for
//! files. A semaphore (smol's `lock::Semaphore`) keeps `FILES_IN_FLIGHT_PER_WORKER` files
//! per worker open at once. The walk's rules (no link followed, only regular files
//! opened, `O_NONBLOCK` against FIFOs) are `search::walk`'s.

#![forbid(unsafe_code)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use search::cli::Config;
use search::tally::Tally;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER, Kind};
use smol::channel::{Receiver, Sender};
use smol::fs::unix::OpenOptionsExt;
use smol::io::AsyncReadExt;
use smol::lock::Semaphore;
use smol::stream::StreamExt;
use smol::{Executor, Task};

const NAME: &str = "search-smol";

/// What every task shares; `_alive` is a sender each task holds, so that the walk is over
/// when the receiver sees them all dropped.
#[derive(Debug, Clone)]
struct Ctx {
    ex: Arc<Executor<'static>>,
    config: Arc<Config>,
    tally: Arc<Tally>,
    open_files: Arc<Semaphore>,
    _alive: Sender<()>,
}

impl Ctx {
    fn spawn(&self, kind: Kind, path: PathBuf) {
        let task: Option<Task<()>> = match kind {
            Kind::Dir => Some(self.ex.spawn(walk_dir(path, self.clone()))),
            Kind::File => Some(self.ex.spawn(search_file(path, self.clone()))),
            Kind::Skip => None,
        };
        if let Some(task) = task {
            task.detach();
        }
    }
}

/// Boxed because it spawns itself: a recursive `async fn` would have an infinite type.
fn walk_dir(dir: PathBuf, ctx: Ctx) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let mut entries = match smol::fs::read_dir(&dir).await {
            Ok(e) => e,
            Err(e) => return ctx.tally.error(&dir, "cannot list", e),
        };
        while let Some(entry) = entries.next().await {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => return ctx.tally.error(&dir, "cannot list", e),
            };
            match entry.file_type().await.map(Kind::of) {
                Ok(kind) => ctx.spawn(kind, entry.path()),
                Err(e) => ctx.tally.error(&entry.path(), "cannot stat", e),
            }
        }
    })
}

async fn search_file(path: PathBuf, ctx: Ctx) {
    let _permit = ctx.open_files.acquire().await;
    let mut file = match smol::fs::OpenOptions::new()
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

/// Runs the executor on `--workers` threads, each pinned with `--cpus`, until `over`
/// closes (the last task dropped its sender).
fn run_workers(config: &Arc<Config>, ex: &Arc<Executor<'static>>, over: Receiver<()>) {
    let ex = Arc::clone(ex);
    let cpus_config = Arc::clone(config);
    search::work::run_threads(NAME, config.workers, "", move |index| {
        if let Err(e) = cpus_config.pin(index) {
            eprintln!("{NAME}: worker {index}: {e}");
        }
        // No task ever sends: `recv` fails once every task has dropped its sender.
        let _ = smol::block_on(ex.run(over.recv()));
    });
}

fn main() {
    let config = Arc::new(search::cli::parse_or_exit(NAME));
    // Pinned before any thread starts, so that the blocking pool inherits the list.
    if let Err(e) = config.pin_all() {
        eprintln!("{NAME}: {e}");
        std::process::exit(1);
    }
    let tally = Arc::new(Tally::new());
    let start = Instant::now();
    let ex = Arc::new(Executor::new());
    let (alive, over) = smol::channel::bounded::<()>(1);
    let ctx = Ctx {
        ex: Arc::clone(&ex),
        config: Arc::clone(&config),
        tally: Arc::clone(&tally),
        open_files: Arc::new(Semaphore::new(FILES_IN_FLIGHT_PER_WORKER * config.workers)),
        _alive: alive,
    };
    for root in &config.roots {
        match walk::root_kind(root) {
            Ok(kind) => ctx.spawn(kind, root.clone()),
            Err(e) => tally.error(root, "cannot stat", e),
        }
    }
    drop(ctx);
    run_workers(&config, &ex, over);
    println!("{}", tally.summary(start.elapsed()).to_line());
}
