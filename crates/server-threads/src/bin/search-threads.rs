//! search-threads: the file-content search on a pool of OS threads with blocking std::fs.
//!
//! `--workers` threads share one queue of work items, a directory to list or a file to
//! search; a thread lists a directory into the queue and reads a file in `--chunk` byte
//! `read(2)`s, feeding [`search::matcher::Scan`]. The walk's rules (no link followed, only
//! regular files opened, `O_NONBLOCK` against FIFOs) are `search::walk`'s.

#![forbid(unsafe_code)]

use search::work::{Locked, run_queue_program, work_blocking};

const NAME: &str = "search-threads";

fn main() {
    run_queue_program(NAME, "", Locked::new, |index, config, queue, tally| {
        if let Err(e) = config.pin(index) {
            eprintln!("{NAME}: worker {index}: {e}");
        }
        work_blocking(queue.as_ref(), config, tally);
    });
}
