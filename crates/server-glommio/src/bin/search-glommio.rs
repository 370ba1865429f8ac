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
//! has many reads in flight at once. A task of one executor waiting for work is woken
//! by another executor's task through an `event-listener` event: glommio's foreign
//! wakers queue the wake-up to the waiting task's own executor. glommio has no
//! directory listing on the ring (io_uring has no `getdents`), so a task lists a
//! directory with std's blocking `read_dir` on its worker, as search-tokio-uring does.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use event_listener::Event;
use glommio::io::OpenOptions;
use glommio::{LocalExecutorBuilder, Placement};
use search::cli::Config;
use search::tally::Tally;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER};
use search::work::{Item, Taken, Work, list, run_queue_program};

const NAME: &str = "search-glommio";

/// The walk's work under a lock, and the tasks waiting for more of it, on any executor.
#[derive(Debug, Default)]
struct Queue {
    work: Mutex<Work>,
    more: Event,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Work> {
        self.work.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next item, or `None` when the walk is over.
    async fn take(&self) -> Option<Item> {
        loop {
            // Listening before looking, so that a notification between the look and the
            // wait is not lost.
            let listener = self.more.listen();
            match self.lock().take() {
                Taken::Item(item) => return Some(item),
                Taken::Over => return None,
                Taken::Wait => {}
            }
            listener.await;
        }
    }

    /// Ends one taken item, queueing what it found.
    fn finish(&self, found: Vec<Item>) {
        if self.lock().finish(found) {
            self.more.notify(usize::MAX);
        }
    }
}

/// Searches one file.
async fn search_file(path: &PathBuf, config: &Config, tally: &Tally) {
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

async fn task(config: Arc<Config>, queue: Arc<Queue>, tally: Arc<Tally>) {
    let mut found = Vec::new();
    while let Some(item) = queue.take().await {
        match &item {
            Item::Dir(dir) => list(dir, &tally, &mut found),
            Item::File(path) => search_file(path, &config, &tally).await,
        }
        queue.finish(std::mem::take(&mut found));
    }
}

fn worker(index: usize, config: Arc<Config>, queue: Arc<Queue>, tally: Arc<Tally>) {
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
                    Arc::clone(&queue),
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
        |work| Queue {
            work: Mutex::new(work),
            more: Event::new(),
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
