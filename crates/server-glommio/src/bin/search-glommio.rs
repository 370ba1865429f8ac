//! search-glommio: the file-content search on glommio, one executor (and its rings) per
//! worker thread, files opened, read and closed through io_uring.
//!
//! Files are glommio's `BufferedFile`, not its `DmaFile`: a `DmaFile` opens with
//! `O_DIRECT`, which bypasses the page cache (a warm search would read the disk every
//! time, where every other program reads the cache) and which tmpfs refuses, and it
//! needs aligned reads. `BufferedFile::read_at` reads through the page cache, as the
//! other io_uring programs do, and hands back a `ReadResult`, a buffer glommio
//! allocates for the read, which the scan reads in place.
//!
//! The workers share one queue of work items (a directory to list, a file to search)
//! and each runs `FILES_IN_FLIGHT_PER_WORKER` tasks that take items from it, so a worker
//! has many reads in flight at once. A task of one executor waiting for work leaves its
//! waker in the queue and is woken by another executor's task: glommio's foreign wakers
//! queue the wake-up to the waiting task's own executor. The queue and a task's loop are
//! `search::tasks`, shared with search-monoio and search-compio. glommio has no
//! directory listing on the ring (io_uring has no `getdents`), so a task lists a
//! directory with std's blocking `read_dir` on its worker, as search-tokio-uring does.

#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::Arc;

use glommio::io::OpenOptions;
use glommio::{LocalExecutorBuilder, Placement};
use search::cli::Config;
use search::tally::Tally;
use search::tasks::Tasks;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER};
use search::work::run_queue_program;

const NAME: &str = "search-glommio";

/// Searches one file.
async fn search_file(path: &Path, config: &Config, tally: &Tally) {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(walk::OPEN_FLAGS)
        .buffered_open(path)
        .await
    {
        Ok(f) => f,
        Err(e) => return tally.error(path, "cannot open", e),
    };
    let mut scan = config.matcher.scan();
    let mut offset = 0u64;
    loop {
        match file.read_at(offset, config.chunk).await {
            Ok(read) if read.is_empty() => {
                tally.file(scan.bytes(), scan.matches());
                break;
            }
            Ok(read) => {
                scan.feed(&read);
                offset += read.len() as u64;
            }
            Err(e) => {
                tally.error(path, "cannot read", e);
                break;
            }
        }
    }
    if let Err(e) = file.close().await {
        tally.error(path, "cannot close", e);
    }
}

async fn task(config: Arc<Config>, tasks: Arc<Tasks>, tally: Arc<Tally>) {
    tasks
        .run(&tally, async |path| {
            search_file(path, &config, &tally).await
        })
        .await;
}

fn worker(index: usize, config: Arc<Config>, tasks: Arc<Tasks>, tally: Arc<Tally>) {
    if let Err(e) = config.pin(index) {
        eprintln!("{NAME}: worker {index}: {e}");
    }
    // Pinned by `config.pin` (or not at all): glommio is not to move the thread.
    let ex = match LocalExecutorBuilder::new(Placement::Unbound).make() {
        Ok(ex) => ex,
        Err(e) => {
            eprintln!("{NAME}: worker {index}: cannot start a glommio executor: {e}");
            std::process::exit(1);
        }
    };
    ex.run(async move {
        let tasks: Vec<_> = (0..FILES_IN_FLIGHT_PER_WORKER)
            .map(|_| {
                glommio::spawn_local(task(
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
