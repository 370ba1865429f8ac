//! search-may: the file-content search on may's coroutines, reading with `std::fs`.
//!
//! `--workers` coroutines on `--workers` may scheduler threads share one queue of work
//! items (a directory to list or a file to search), guarded by may's `Mutex` and
//! `Condvar`, so a coroutine waiting for work parks. Every `open`, `getdents` and `read`
//! is a plain blocking `std::fs` call: it blocks the scheduler thread that runs the
//! coroutine, and every coroutine queued on that thread with it. That is the call a
//! pseudo-blocking runtime exists to avoid (srv-fiber's file reads park the fiber on
//! io_uring instead), and may offers no file I/O of its own: this is how its users read
//! files. The walk's rules (no link followed, only regular files opened, `O_NONBLOCK`
//! against FIFOs) are `search::walk`'s. With `--cpus`, the main thread pins itself to the
//! list before may starts, and may pins its worker *i* to the list's *i*-th CPU (it pins
//! to the starting thread's mask, in ascending order).

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Instant;

use may::sync::{Condvar, Mutex, MutexGuard};
use search::cli::Config;
use search::tally::Tally;
use search::work::{Monitor, Work, work_blocking};
use server_may::coroutines;

const NAME: &str = "search-may";

/// The walk's work under may's lock, and the coroutines waiting for more of it.
struct Queue {
    work: Mutex<Work>,
    more: Condvar,
}

impl Monitor for Queue {
    type Guard<'a> = MutexGuard<'a, Work>;

    fn lock(&self) -> MutexGuard<'_, Work> {
        self.work.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&'a self, held: MutexGuard<'a, Work>) -> MutexGuard<'a, Work> {
        self.more.wait(held).unwrap_or_else(|e| e.into_inner())
    }

    fn wake_all(&self) {
        self.more.notify_all();
    }
}

/// may's scheduler, configured before its first use starts its threads.
fn configure(config: &Config) {
    let may = may::config();
    may.set_workers(config.workers);
    may.set_stack_size(coroutines::STACK_WORDS);
    if !config.cpus.is_empty() {
        // may pins worker i to the i-th CPU of the mask of the thread that starts it.
        may.set_worker_pin(true);
        if let Err(e) = config.pin_all() {
            eprintln!("{NAME}: {e}");
            std::process::exit(1);
        }
    }
}

fn main() {
    let config = Arc::new(search::cli::parse_or_exit(NAME));
    configure(&config);
    let tally = Arc::new(Tally::new());
    let start = Instant::now();
    let queue = Arc::new(Queue {
        work: Mutex::new(Work::of_roots(&config.roots, &tally)),
        more: Condvar::new(),
    });
    let mut workers = Vec::new();
    for index in 0..config.workers {
        let (config, queue, tally) = (Arc::clone(&config), Arc::clone(&queue), Arc::clone(&tally));
        match coroutines::spawn(move || work_blocking(queue.as_ref(), &config, &tally)) {
            Ok(handle) => workers.push(handle),
            Err(e) => {
                eprintln!("{NAME}: cannot start worker coroutine {index}: {e}");
                std::process::exit(1);
            }
        }
    }
    for handle in workers {
        if handle.join().is_err() {
            eprintln!("{NAME}: a worker coroutine panicked");
            std::process::exit(1);
        }
    }
    println!("{}", tally.summary(start.elapsed()).to_line());
}
