//! search-threads: the file-content search on a pool of OS threads with blocking std::fs.
//!
//! `--workers` threads share one queue of work items, a directory to list or a file to
//! search; a thread lists a directory into the queue and reads a file in `--chunk` byte
//! `read(2)`s, feeding [`search::matcher::Scan`]. The walk's rules (no link followed, only
//! regular files opened, `O_NONBLOCK` against FIFOs) are `search::walk`'s.

#![forbid(unsafe_code)]

use std::sync::{Condvar, Mutex, MutexGuard};

use search::cli::Config;
use search::tally::Tally;
use search::walk;
use search::work::{Item, Taken, Work, list, run_queue_program};

const NAME: &str = "search-threads";

/// The walk's work under a lock, and the threads waiting for more of it.
#[derive(Debug, Default)]
struct Queue {
    work: Mutex<Work>,
    more: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Work> {
        // A worker that panicked leaves consistent counters (it changes them under the lock
        // only).
        self.work.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next item, or `None` when the walk is over.
    fn take(&self) -> Option<Item> {
        let mut work = self.lock();
        loop {
            match work.take() {
                Taken::Item(item) => return Some(item),
                Taken::Over => return None,
                Taken::Wait => work = self.more.wait(work).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }

    /// Ends one taken item, queueing what it found.
    fn finish(&self, found: Vec<Item>) {
        if self.lock().finish(found) {
            self.more.notify_all();
        }
    }
}

fn worker(index: usize, config: &Config, queue: &Queue, tally: &Tally) {
    if let Err(e) = config.pin(index) {
        eprintln!("{NAME}: worker {index}: {e}");
    }
    let mut buf = vec![0u8; config.chunk];
    let mut found = Vec::new();
    while let Some(item) = queue.take() {
        match &item {
            Item::Dir(dir) => list(dir, tally, &mut found),
            Item::File(path) => walk::search_file_blocking(path, &config.matcher, &mut buf, tally),
        }
        queue.finish(std::mem::take(&mut found));
    }
}

fn main() {
    run_queue_program(
        NAME,
        "",
        |work| Queue {
            work: Mutex::new(work),
            more: Condvar::new(),
        },
        |index, config, queue, tally| worker(index, config, queue, tally),
    );
}
