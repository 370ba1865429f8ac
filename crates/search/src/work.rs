//! The work of a walk shared by workers that take from one queue (search-threads'
//! threads, search-tokio-uring's tasks on every ring): the items, how a directory becomes
//! more of them, and when the walk is over. Free of locks and waking: each program keeps a
//! [`Work`] under its own lock and wakes its own way (a `Condvar`, a `Notify`). The programs
//! that block (search-threads, search-may) share the rest too: the queue's take and finish
//! over any lock with a condition variable ([`Monitor`], std's in [`Locked`]), and the loop
//! of a worker that lists and reads with `std::fs` ([`work_blocking`]).

use std::collections::VecDeque;
use std::ops::DerefMut;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::cli::Config;

use crate::tally::Tally;
use crate::walk::{self, Kind};

/// A unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A directory to list.
    Dir(PathBuf),
    /// A regular file to search.
    File(PathBuf),
}

/// What [`Work::take`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// An item, now counted as in progress until [`Work::finish`].
    Item(Item),
    /// Nothing queued, but items in progress may add more: wait for a wake-up.
    Wait,
    /// Nothing queued and nothing in progress: the walk is over.
    Over,
}

/// Items not yet taken, and how many taken items are still being worked on (which may add
/// more).
#[derive(Debug, Default)]
pub struct Work {
    queued: VecDeque<Item>,
    in_progress: usize,
}

impl Work {
    /// The work of searching `roots` (the command line's DIRs): each an item by its type;
    /// one that cannot be examined is counted in `tally`'s errors.
    pub fn of_roots(roots: &[PathBuf], tally: &Tally) -> Work {
        let mut work = Work::default();
        for root in roots {
            match walk::root_kind(root) {
                Ok(Kind::Dir) => work.queued.push_back(Item::Dir(root.clone())),
                Ok(Kind::File) => work.queued.push_back(Item::File(root.clone())),
                Ok(Kind::Skip) => {}
                Err(e) => tally.error(root, "cannot stat", e),
            }
        }
        work
    }

    /// Takes the next item.
    pub fn take(&mut self) -> Taken {
        match self.queued.pop_front() {
            Some(item) => {
                self.in_progress += 1;
                Taken::Item(item)
            }
            None if self.in_progress == 0 => Taken::Over,
            None => Taken::Wait,
        }
    }

    /// Ends one taken item, queueing what it found. Returns whether waiting workers must
    /// be woken: there is more to take, or the walk just ended.
    pub fn finish(&mut self, found: Vec<Item>) -> bool {
        self.in_progress = self.in_progress.saturating_sub(1);
        let wake = !found.is_empty() || self.in_progress == 0;
        self.queued.extend(found);
        wake
    }
}

/// Lists `dir` into `found`: its subdirectories and regular files, by the walk's rules. A
/// directory that cannot be listed (or an entry that cannot be examined) is counted in
/// `tally`'s errors and named on stderr.
pub fn list(dir: &Path, tally: &Tally, found: &mut Vec<Item>) {
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

/// A [`Work`] under a lock, with a condition variable that wakes the workers waiting for
/// more of it: std's ([`Locked`]) parks a thread, may's a coroutine. A worker that panicked
/// leaves consistent counters (they change under the lock only), so a poisoned lock is
/// taken as it is.
pub trait Monitor: Send + Sync {
    /// The held lock.
    type Guard<'a>: DerefMut<Target = Work>
    where
        Self: 'a;

    /// Takes the lock.
    fn lock(&self) -> Self::Guard<'_>;

    /// Gives up the lock until woken, and takes it again.
    fn wait<'a>(&'a self, held: Self::Guard<'a>) -> Self::Guard<'a>;

    /// Wakes every waiting worker.
    fn wake_all(&self);

    /// The next item, or `None` when the walk is over.
    fn take(&self) -> Option<Item> {
        let mut work = self.lock();
        loop {
            match work.take() {
                Taken::Item(item) => return Some(item),
                Taken::Over => return None,
                Taken::Wait => work = self.wait(work),
            }
        }
    }

    /// Ends one taken item, queueing what it found.
    fn finish(&self, found: Vec<Item>) {
        if self.lock().finish(found) {
            self.wake_all();
        }
    }
}

/// The walk's work under std's lock, and the threads waiting for more of it.
#[derive(Debug)]
pub struct Locked {
    work: Mutex<Work>,
    more: Condvar,
}

impl Locked {
    /// `work` under a fresh lock.
    pub fn new(work: Work) -> Locked {
        Locked {
            work: Mutex::new(work),
            more: Condvar::new(),
        }
    }
}

impl Monitor for Locked {
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

/// A worker of a blocking program: takes items from `queue` until the walk is over, lists a
/// directory and searches a file with plain `std::fs` calls ([`walk::search_file_blocking`],
/// in `--chunk` byte reads).
pub fn work_blocking(queue: &impl Monitor, config: &Config, tally: &Tally) {
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

/// The whole of a program whose workers take from one queue: parses the command line as
/// `name`, makes the queue of the roots' work with `queue` (the program's lock and
/// wake-ups around [`Work`]), runs `worker(index, config, queue, tally)` on `--workers`
/// threads ([`run_threads`]) and prints the JSON line.
pub fn run_queue_program<Q, W>(name: &str, hint: &str, queue: impl FnOnce(Work) -> Q, worker: W)
where
    Q: Send + Sync + 'static,
    W: Fn(usize, &Arc<Config>, &Arc<Q>, &Arc<Tally>) + Send + Sync + 'static,
{
    let config = Arc::new(crate::cli::parse_or_exit(name));
    let tally = Arc::new(Tally::new());
    let start = Instant::now();
    let queue = Arc::new(queue(Work::of_roots(&config.roots, &tally)));
    let (workers, t) = (config.workers, Arc::clone(&tally));
    run_threads(name, workers, hint, move |index| {
        worker(index, &config, &queue, &t);
    });
    println!("{}", tally.summary(start.elapsed()).to_line());
}

/// Runs `worker(index)` on `count` threads named `<name>-<index>` and waits for all of
/// them; a thread that cannot start or that panics ends the program (exit status 1) with a
/// line naming it, `hint` added to a panic's (what may have caused it).
pub fn run_threads<F>(name: &str, count: usize, hint: &str, worker: F)
where
    F: Fn(usize) + Send + Sync + 'static,
{
    let worker = Arc::new(worker);
    let mut threads = Vec::new();
    for index in 0..count {
        let worker = Arc::clone(&worker);
        let spawned = std::thread::Builder::new()
            .name(format!("{name}-{index}"))
            .spawn(move || worker(index));
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                eprintln!("{name}: cannot start worker thread {index}: {e}");
                std::process::exit(1);
            }
        }
    }
    for t in threads {
        if t.join().is_err() {
            eprintln!("{name}: a worker thread panicked{hint}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_is_over_only_when_nothing_is_queued_or_in_progress() {
        let mut work = Work::default();
        assert_eq!(work.take(), Taken::Over);
        work.queued.push_back(Item::Dir("a".into()));
        let Taken::Item(first) = work.take() else {
            panic!("the queued directory")
        };
        assert_eq!(first, Item::Dir("a".into()));
        assert_eq!(work.take(), Taken::Wait, "the directory may add more");
        assert!(work.finish(vec![Item::File("a/f".into())]), "more to take");
        assert_eq!(work.take(), Taken::Item(Item::File("a/f".into())));
        assert!(work.finish(Vec::new()), "the last item ended the walk");
        assert_eq!(work.take(), Taken::Over);
    }

    #[test]
    fn finishing_with_nothing_found_while_others_work_wakes_nobody() {
        let mut work = Work::default();
        work.queued
            .extend([Item::Dir("a".into()), Item::Dir("b".into())]);
        assert!(matches!(work.take(), Taken::Item(_)));
        assert!(matches!(work.take(), Taken::Item(_)));
        assert!(!work.finish(Vec::new()));
        assert!(work.finish(Vec::new()));
    }
}
