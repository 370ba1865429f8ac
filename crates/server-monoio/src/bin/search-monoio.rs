//! search-monoio: the file-content search on monoio, one runtime (and ring) per worker
//! thread (`RuntimeBuilder::<IoUringDriver>`), files opened, read and closed with
//! io_uring through `monoio::fs`.
//!
//! The workers share one queue of work items (a directory to list, a file to search) and
//! each runs `FILES_IN_FLIGHT_PER_WORKER` tasks that take items from it: a file is opened,
//! read in `--chunk` byte reads (`File::read_at`, an owned buffer lent to the ring and
//! given back) and closed through the worker's ring, so a worker has many reads in flight
//! at once. io_uring has no `getdents`, so a task lists a directory with std's blocking
//! `read_dir` on its worker, as search-tokio-uring and search-fiber do. A task that waits
//! for work leaves its waker in the queue; another worker's task that adds work wakes it
//! (monoio's `sync` feature lets a waker cross threads). The queue and a task's loop are
//! `search::tasks`, shared with search-compio and search-glommio.

#![forbid(unsafe_code)]

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use monoio::{IoUringDriver, RuntimeBuilder};
use search::cli::Config;
use search::tally::Tally;
use search::tasks::Tasks;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER};
use search::work::run_queue_program;

const NAME: &str = "search-monoio";

/// Searches one file, reading into `buf`.
async fn search_file(path: &Path, config: &Config, buf: &mut Vec<u8>, tally: &Tally) {
    let file = match monoio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(walk::OPEN_FLAGS)
        .open(path)
        .await
    {
        Ok(f) => f,
        Err(e) => return tally.error(path, "cannot open", e),
    };
    // monoio reads into the capacity and sets the length to what it read.
    let read_at = async |b, at| file.read_at(b, at).await;
    match walk::scan_owned(&config.matcher, buf, read_at).await {
        Ok(scan) => tally.file(scan.bytes(), scan.matches()),
        Err(e) => tally.error(path, "cannot read", e),
    }
    if let Err(e) = file.close().await {
        tally.error(path, "cannot close", e);
    }
}

async fn task(config: Arc<Config>, tasks: Arc<Tasks>, tally: Arc<Tally>) {
    let mut buf = Vec::with_capacity(config.chunk);
    tasks
        .run(&tally, async |path| {
            search_file(path, &config, &mut buf, &tally).await;
        })
        .await;
}

fn worker(index: usize, config: Arc<Config>, tasks: Arc<Tasks>, tally: Arc<Tally>) {
    if let Err(e) = config.pin(index) {
        eprintln!("{NAME}: worker {index}: {e}");
    }
    let mut runtime = match RuntimeBuilder::<IoUringDriver>::new().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{NAME}: worker {index}: cannot set up an io_uring: {e}");
            std::process::exit(1);
        }
    };
    runtime.block_on(async move {
        let tasks: Vec<_> = (0..FILES_IN_FLIGHT_PER_WORKER)
            .map(|_| {
                monoio::spawn(task(
                    Arc::clone(&config),
                    Arc::clone(&tasks),
                    Arc::clone(&tally),
                ))
            })
            .collect();
        for t in tasks {
            t.await;
        }
    });
}

fn main() {
    run_queue_program(
        NAME,
        " (is io_uring available?)",
        Tasks::new,
        |index, config, tasks, tally| {
            worker(
                index,
                Arc::clone(config),
                Arc::clone(tasks),
                Arc::clone(tally),
            );
        },
    );
}
