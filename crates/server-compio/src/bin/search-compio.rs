//! search-compio: the file-content search on compio, one runtime (and ring) per worker
//! thread, files opened, read and closed with io_uring through `compio::fs`.
//!
//! The workers share one queue of work items (a directory to list, a file to search) and
//! each runs `FILES_IN_FLIGHT_PER_WORKER` tasks that take items from it: a file is opened,
//! read in `--chunk` byte reads (`AsyncReadAt::read_at`, an owned buffer lent to the
//! ring and given back) and closed through the worker's ring, so a worker has many reads in flight
//! at once. io_uring has no `getdents`, so a task lists a directory with std's blocking
//! `read_dir` on its worker, as search-tokio-uring and search-fiber do. A task that waits
//! for work leaves its waker in the queue; another worker's task that adds work wakes it
//! (compio's wakers may cross threads). The queue and a task's loop are `search::tasks`,
//! shared with search-monoio and search-glommio.

#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::Arc;

use compio::buf::BufResult;
use compio::io::AsyncReadAt;
use compio::runtime::Runtime;
use search::cli::Config;
use search::tally::Tally;
use search::tasks::Tasks;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER};
use search::work::run_queue_program;

const NAME: &str = "search-compio";

/// Searches one file; gives the buffer back for the next.
async fn search_file(path: &Path, config: &Config, mut buf: Vec<u8>, tally: &Tally) -> Vec<u8> {
    let file = match compio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(walk::OPEN_FLAGS)
        .open(path)
        .await
    {
        Ok(f) => f,
        Err(e) => {
            tally.error(path, "cannot open", e);
            return buf;
        }
    };
    let mut scan = config.matcher.scan();
    let mut offset = 0u64;
    loop {
        // compio reads into the capacity and sets the length to what it read.
        buf.clear();
        let BufResult(read, back) = file.read_at(buf, offset).await;
        buf = back;
        match read {
            Ok(0) => {
                tally.file(scan.bytes(), scan.matches());
                break;
            }
            Ok(n) => {
                scan.feed(&buf[..n]);
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                tally.error(path, "cannot read", e);
                break;
            }
        }
    }
    if let Err(e) = file.close().await {
        tally.error(path, "cannot close", e);
    }
    buf
}

async fn task(config: Arc<Config>, tasks: Arc<Tasks>, tally: Arc<Tally>) {
    let mut buf = Vec::with_capacity(config.chunk);
    tasks
        .run(&tally, async |path| {
            buf = search_file(path, &config, std::mem::take(&mut buf), &tally).await;
        })
        .await;
}

fn worker(index: usize, config: Arc<Config>, tasks: Arc<Tasks>, tally: Arc<Tally>) {
    if let Err(e) = config.pin(index) {
        eprintln!("{NAME}: worker {index}: {e}");
    }
    let runtime = match Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{NAME}: worker {index}: cannot set up an io_uring: {e}");
            std::process::exit(1);
        }
    };
    runtime.block_on(async move {
        let tasks: Vec<_> = (0..FILES_IN_FLIGHT_PER_WORKER)
            .map(|_| {
                compio::runtime::spawn(task(
                    Arc::clone(&config),
                    Arc::clone(&tasks),
                    Arc::clone(&tally),
                ))
            })
            .collect();
        for t in tasks {
            if t.await.is_err() {
                eprintln!("{NAME}: a task of worker {index} panicked");
                std::process::exit(1);
            }
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
