//! search-threads: the file-content search on a pool of OS threads with blocking std::fs.
//!
//! `--workers` threads share one queue of work items, a directory to list or a file to
//! search; a thread lists a directory into the queue and reads a file in `--chunk` byte
//! `read(2)`s, feeding [`search::matcher::Scan`]. The walk's rules (no link followed, only
//! regular files opened, `O_NONBLOCK` against FIFOs) are `search::walk`'s.

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use search::cli::Config;
use search::tally::Tally;
use search::walk::{self, Kind};

const NAME: &str = "search-threads";

/// A unit of work.
#[derive(Debug)]
enum Item {
    Dir(PathBuf),
    File(PathBuf),
}

/// The work queue: items not yet taken, and how many taken items are still being worked
/// on (which may add more). Empty with none in progress means the walk is over.
#[derive(Debug, Default)]
struct Queue {
    state: Mutex<(VecDeque<Item>, usize)>,
    more: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, (VecDeque<Item>, usize)> {
        // A worker that panicked leaves consistent counters (it pushes under the lock only).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next item, or `None` when the walk is over.
    fn take(&self) -> Option<Item> {
        let mut s = self.lock();
        loop {
            if let Some(item) = s.0.pop_front() {
                s.1 += 1;
                return Some(item);
            }
            if s.1 == 0 {
                return None;
            }
            s = self.more.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Ends one taken item, queueing what it found.
    fn finish(&self, found: Vec<Item>) {
        let mut s = self.lock();
        s.1 -= 1;
        let wake = !found.is_empty() || s.1 == 0;
        s.0.extend(found);
        drop(s);
        if wake {
            self.more.notify_all();
        }
    }
}

fn list(dir: &PathBuf, tally: &Tally, found: &mut Vec<Item>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return tally.error(dir, "cannot list", e),
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => return tally.error(dir, "cannot list", e),
        };
        match entry.file_type().map(Kind::of) {
            Ok(Kind::Dir) => found.push(Item::Dir(entry.path())),
            Ok(Kind::File) => found.push(Item::File(entry.path())),
            Ok(Kind::Skip) => {}
            Err(e) => tally.error(&entry.path(), "cannot stat", e),
        }
    }
}

fn search_file(path: &PathBuf, config: &Config, buf: &mut [u8], tally: &Tally) {
    let mut file = match walk::open_options().open(path) {
        Ok(f) => f,
        Err(e) => return tally.error(path, "cannot open", e),
    };
    match walk::scan_blocking(&config.matcher, buf, |b| file.read(b)) {
        Ok(scan) => tally.file(scan.bytes(), scan.matches()),
        Err(e) => tally.error(path, "cannot read", e),
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
            Item::File(path) => search_file(path, config, &mut buf, tally),
        }
        queue.finish(std::mem::take(&mut found));
    }
}

fn main() {
    let config = Arc::new(search::cli::parse_or_exit(NAME));
    let queue = Arc::new(Queue::default());
    let tally = Arc::new(Tally::new());
    let start = Instant::now();
    let mut roots = Vec::new();
    for root in &config.roots {
        match walk::root_kind(root) {
            Ok(Kind::Dir) => roots.push(Item::Dir(root.clone())),
            Ok(Kind::File) => roots.push(Item::File(root.clone())),
            Ok(Kind::Skip) => {}
            Err(e) => tally.error(root, "cannot stat", e),
        }
    }
    queue.lock().0.extend(roots);
    let mut threads = Vec::new();
    for index in 0..config.workers {
        let (config, queue, tally) = (Arc::clone(&config), Arc::clone(&queue), Arc::clone(&tally));
        let spawned = std::thread::Builder::new()
            .name(format!("{NAME}-{index}"))
            .spawn(move || worker(index, &config, &queue, &tally));
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                eprintln!("{NAME}: cannot start worker thread {index}: {e}");
                std::process::exit(1);
            }
        }
    }
    for t in threads {
        if t.join().is_err() {
            eprintln!("{NAME}: a worker thread panicked");
            std::process::exit(1);
        }
    }
    println!("{}", tally.summary(start.elapsed()).to_line());
}
