//! search-tokio-uring: the file-content search on tokio-uring, one runtime (and ring) per
//! worker thread, files read with io_uring.
//!
//! The workers share one queue of work items (a directory to list, a file to search) and
//! each runs `FILES_IN_FLIGHT_PER_WORKER` tasks that take items from it: a file is opened,
//! read in `--chunk` byte reads and closed through the worker's ring
//! (`tokio_uring::fs::File`), so a worker has many reads in flight at once. tokio-uring has
//! no directory listing (io_uring has no `getdents`), so a task lists a directory with
//! std's blocking `read_dir` on its worker, as search-fiber does.

#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use search::cli::Config;
use search::tally::Tally;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER};
use search::work::{Item, Taken, Work, list, run_queue_program};
use std::os::unix::fs::OpenOptionsExt;
use tokio::sync::Notify;

const NAME: &str = "search-tokio-uring";

/// The walk's work under a lock, and the tasks waiting for more of it. `Notify` wakes
/// tasks of every worker's runtime alike.
#[derive(Debug, Default)]
struct Queue {
    work: Mutex<Work>,
    more: Notify,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Work> {
        self.work.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next item, or `None` when the walk is over.
    async fn take(&self) -> Option<Item> {
        loop {
            // Registered before looking, so that a notification between the look and the
            // wait is not lost.
            let notified = self.more.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.lock().take() {
                Taken::Item(item) => return Some(item),
                Taken::Over => return None,
                Taken::Wait => {}
            }
            notified.await;
        }
    }

    /// Ends one taken item, queueing what it found.
    fn finish(&self, found: Vec<Item>) {
        if self.lock().finish(found) {
            self.more.notify_waiters();
        }
    }
}

/// Searches one file, reading into `buf`.
async fn search_file(path: &Path, config: &Config, buf: &mut Vec<u8>, tally: &Tally) {
    let file = match tokio_uring::fs::OpenOptions::new()
        .read(true)
        .custom_flags(walk::OPEN_FLAGS)
        .open(path)
        .await
    {
        Ok(f) => f,
        Err(e) => return tally.error(path, "cannot open", e),
    };
    let read_at = async |b, at| file.read_at(b, at).await;
    match walk::scan_owned(&config.matcher, buf, read_at).await {
        Ok(scan) => tally.file(scan.bytes(), scan.matches()),
        Err(e) => tally.error(path, "cannot read", e),
    }
    if let Err(e) = file.close().await {
        tally.error(path, "cannot close", e);
    }
}

async fn task(config: Arc<Config>, queue: Arc<Queue>, tally: Arc<Tally>) {
    let mut buf = Vec::with_capacity(config.chunk);
    let mut found = Vec::new();
    while let Some(item) = queue.take().await {
        match &item {
            Item::Dir(dir) => list(dir, &tally, &mut found),
            Item::File(path) => search_file(path, &config, &mut buf, &tally).await,
        }
        queue.finish(std::mem::take(&mut found));
    }
}

fn worker(index: usize, config: Arc<Config>, queue: Arc<Queue>, tally: Arc<Tally>) {
    if let Err(e) = config.pin(index) {
        eprintln!("{NAME}: worker {index}: {e}");
    }
    tokio_uring::start(async move {
        let tasks: Vec<_> = (0..FILES_IN_FLIGHT_PER_WORKER)
            .map(|_| {
                tokio_uring::spawn(task(
                    Arc::clone(&config),
                    Arc::clone(&queue),
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
        |work| Queue {
            work: Mutex::new(work),
            more: Notify::new(),
        },
        |index, config, queue, tally| {
            worker(
                index,
                Arc::clone(config),
                Arc::clone(queue),
                Arc::clone(tally),
            );
        },
    );
}
