//! search-fiber: the file-content search on the fiber runtime, the paper's design: blocking
//! code whose file operations that would wait are io_uring operations on the worker's ring.
//!
//! A walker fiber per worker lists directories depth first from a stack of its own, handing
//! the shallowest to the other walkers through a channel when it has more than one, and
//! sends each directory's files to the reader fibers through a bounded channel in batches
//! of up to `FILES_PER_BATCH` names; `FILES_IN_FLIGHT_PER_WORKER` reader fibers per worker
//! (placed on each worker in turn) open, read in `--chunk` byte reads and close each file,
//! its path built in a buffer the reader keeps. So a file costs no fiber, no channel
//! message and no allocation of its own in this program: what is left per file is the
//! runtime's file calls and the shared matcher.
//! With `--file-ops direct` (the default) each of those is first tried as a system call that
//! finishes at once or refuses (`openat2` with `RESOLVE_CACHED`, `preadv2` with
//! `RWF_NOWAIT`, `close`): on a warm page cache no file operation touches the ring. What
//! would wait for the disk goes through the ring (`IORING_OP_OPENAT`, `IORING_OP_READ`),
//! parking only its fiber while the kernel works; the worker runs the others and submits the
//! whole batch of SQEs at once. `--file-ops ring` sends every operation, the close included,
//! through the ring (`fiber::FileOps`).
//!
//! Directory listing has no io_uring operation (there is no `getdents` opcode), so a
//! walker lists with std's `read_dir`, a blocking `getdents64` on its worker, as the
//! paper's EMPER program does; a directory is listed in one or a few system calls. More
//! walkers per worker would not list more at once (each listing blocks the worker), only
//! add stacks and switches. The
//! entry's type comes from the listing's `d_type`, so no `statx` is needed; a file is read
//! to its end, so its size is not needed either.

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::{Arg, CommandFactory, FromArgMatches};
use fiber::FileOps;
use fiber::sync::{Receiver, Sender, TrySendError, channel};
use search::cli::{Args, Config};
use search::tally::Tally;
use search::walk::{self, FILES_IN_FLIGHT_PER_WORKER, Kind};

const NAME: &str = "search-fiber";

/// Files of one directory handed to a reader at once at most: one channel message (and at
/// most one park and wake-up) for this many files, few enough that a large directory is
/// still spread over several readers, each with its own file in flight.
const FILES_PER_BATCH: usize = 16;

/// Files for one reader: names in one directory, or whole paths (the roots given as files).
#[derive(Debug)]
struct Batch {
    /// The directory the names are in; `None`: each name is a whole path.
    dir: Option<Arc<PathBuf>>,
    /// The names, each followed by a NUL (which no file name contains).
    names: Vec<u8>,
    count: usize,
}

impl Batch {
    fn new(dir: Option<Arc<PathBuf>>) -> Batch {
        Batch {
            dir,
            names: Vec::new(),
            count: 0,
        }
    }

    fn push(&mut self, name: &OsStr) {
        self.names.extend_from_slice(name.as_bytes());
        self.names.push(0);
        self.count += 1;
    }

    /// Each file's path in turn, built in `path` (one allocation for every file a reader
    /// opens, rather than one per file).
    fn for_each(&self, path: &mut PathBuf, mut f: impl FnMut(&Path)) {
        for name in self.names.split(|&b| b == 0).take(self.count) {
            path.as_mut_os_string().clear();
            if let Some(dir) = &self.dir {
                path.push(dir.as_path());
            }
            path.push(OsStr::from_bytes(name));
            f(path);
        }
    }
}

/// The walk's directories: those handed between walkers, and how many are still to be
/// listed anywhere (in the channel, in a walker's own stack, or being listed).
struct Walk {
    /// `None` tells a walker that the walk is over.
    shared: Sender<Option<PathBuf>>,
    pending: AtomicUsize,
    walkers: usize,
}

impl Walk {
    /// Counts `n` directories found.
    fn found(&self, n: usize) {
        // Relaxed would do for the count alone; AcqRel keeps "found before listed" plain.
        self.pending.fetch_add(n, Ordering::AcqRel);
    }

    /// One directory listed; the last one ends the walk for every walker.
    fn listed(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Nothing is pending, so the channel is empty and has room for every walker.
            for _ in 0..self.walkers {
                let _ = self.shared.try_send(None);
            }
        }
    }
}

/// A walker: lists directories depth first from its own stack, sending their files to the
/// readers in batches; hands the shallowest of its directories to the others through the
/// channel while its stack holds more than one and the channel has room, and takes one
/// from there when its stack is empty. A walker per worker, rather than a fiber per
/// directory: the listing blocks its worker anyway (there is no `getdents` on the ring), so
/// more walkers on one worker would only add stacks and switches.
fn walker(
    walk: Arc<Walk>,
    dirs: Receiver<Option<PathBuf>>,
    files: Sender<Batch>,
    tally: Arc<Tally>,
) {
    let mut mine: VecDeque<PathBuf> = VecDeque::new();
    loop {
        let dir = match mine.pop_back() {
            Some(d) => d,
            None => match dirs.recv() {
                Ok(Some(d)) => d,
                Ok(None) | Err(_) => return,
            },
        };
        let found = mine.len();
        let sent = list_dir(&dir, &mut mine, &files, &tally);
        walk.found(mine.len() - found);
        walk.listed();
        if !sent {
            // Every reader is gone: the runtime is shutting down.
            return;
        }
        // The shallowest first: they hold the largest subtrees.
        while mine.len() > 1 {
            let Some(d) = mine.pop_front() else { break };
            if let Err(TrySendError::Full(d) | TrySendError::Disconnected(d)) =
                walk.shared.try_send(Some(d))
            {
                if let Some(d) = d {
                    mine.push_front(d);
                }
                break;
            }
        }
    }
}

/// Lists `dir`, pushing its subdirectories onto `subdirs` and sending its files to the
/// readers in batches; false if the readers are gone.
fn list_dir(
    dir: &Path,
    subdirs: &mut VecDeque<PathBuf>,
    files: &Sender<Batch>,
    tally: &Tally,
) -> bool {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            tally.error(dir, "cannot list", e);
            return true;
        }
    };
    let dir = Arc::new(dir.to_path_buf());
    let mut batch = Batch::new(Some(Arc::clone(&dir)));
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                tally.error(&dir, "cannot list", e);
                break;
            }
        };
        match entry.file_type().map(Kind::of) {
            Ok(Kind::Dir) => subdirs.push_back(entry.path()),
            Ok(Kind::File) => {
                batch.push(&entry.file_name());
                if batch.count == FILES_PER_BATCH {
                    let full = std::mem::replace(&mut batch, Batch::new(Some(Arc::clone(&dir))));
                    if files.send(full).is_err() {
                        return false;
                    }
                }
            }
            Ok(Kind::Skip) => {}
            Err(e) => tally.error(&entry.path(), "cannot stat", e),
        }
    }
    batch.count == 0 || files.send(batch).is_ok()
}

fn search_file(path: &Path, config: &Config, buf: &mut [u8], tally: &Tally) {
    let file = match fiber::fs::File::options()
        .read(true)
        .custom_flags(walk::OPEN_FLAGS)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => return tally.error(path, "cannot open", e),
    };
    let mut offset = 0u64;
    let scanned = walk::scan_blocking(&config.matcher, buf, |b| {
        let n = file.read_at(b, offset)?;
        offset += n as u64;
        Ok(n)
    });
    match scanned {
        Ok(scan) => tally.file(scan.bytes(), scan.matches()),
        Err(e) => tally.error(path, "cannot read", e),
    }
    if let Err(e) = file.close() {
        tally.error(path, "cannot close", e);
    }
}

fn reader(files: Receiver<Batch>, config: Arc<Config>, tally: Arc<Tally>) {
    let mut buf = vec![0u8; config.chunk];
    let mut path = PathBuf::new();
    while let Ok(batch) = files.recv() {
        batch.for_each(&mut path, |p| search_file(p, &config, &mut buf, &tally));
    }
}

/// The common search command line plus this program's `--file-ops`; bad input is one
/// line on stderr and exit status 2, as `search::cli::parse_or_exit` does.
fn parse_or_exit() -> (Config, FileOps) {
    let matches = Args::command()
        .name(NAME)
        .arg(
            Arg::new("file-ops")
                .long("file-ops")
                .value_name("ring|direct")
                .default_value("direct")
                .value_parser(|s: &str| s.parse::<FileOps>())
                .help(
                    "direct: try openat2(RESOLVE_CACHED), preadv2(RWF_NOWAIT) and close \
                     without the ring, and use the ring only when the kernel would wait; \
                     ring: every file operation through the ring",
                ),
        )
        .get_matches();
    let file_ops = matches
        .get_one::<FileOps>("file-ops")
        .copied()
        .unwrap_or_default();
    let checked = Args::from_arg_matches(&matches)
        .map_err(|e| e.to_string())
        .and_then(|args| args.check().map_err(|e| e.to_string()));
    match checked {
        Ok(config) => (config, file_ops),
        Err(e) => {
            eprintln!("{NAME}: {}", e.trim_end());
            std::process::exit(2);
        }
    }
}

fn main() {
    let (config, file_ops) = parse_or_exit();
    let config = Arc::new(config);
    let mut builder = fiber::Runtime::builder()
        .workers(config.workers)
        .file_ops(file_ops)
        .thread_name(NAME);
    if !config.cpus.is_empty() {
        builder = builder.cpus(config.cpus.clone());
    }
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{NAME}: cannot start the fiber runtime: {e}");
            std::process::exit(1);
        }
    };
    let tally = Arc::new(Tally::new());
    let handle = rt.handle();
    let (cfg, t) = (Arc::clone(&config), Arc::clone(&tally));
    let start = Instant::now();
    let walked = rt.block_on(move || {
        let readers_per_worker = FILES_IN_FLIGHT_PER_WORKER;
        let (files, queued) = channel::<Batch>(readers_per_worker * cfg.workers);
        let readers: Vec<_> = (0..readers_per_worker * cfg.workers)
            .map(|i| {
                let (queued, cfg, t) = (queued.clone(), Arc::clone(&cfg), Arc::clone(&t));
                handle.spawn_on(i, move || reader(queued, cfg, t))
            })
            .collect();
        drop(queued);
        let (shared, dirs) = channel::<Option<PathBuf>>(cfg.workers);
        let walk = Arc::new(Walk {
            shared,
            // The setup holds one until the roots are counted, so that the walk cannot
            // end before they are.
            pending: AtomicUsize::new(1),
            walkers: cfg.workers,
        });
        for root in &cfg.roots {
            match walk::root_kind(root) {
                Ok(Kind::Dir) => {
                    walk.found(1);
                    // Room for one per walker: a root beyond that waits in a fiber.
                    let (walk, root) = (Arc::clone(&walk), root.clone());
                    drop(fiber::spawn(move || {
                        let _ = walk.shared.send(Some(root));
                    }));
                }
                Ok(Kind::File) => {
                    let mut batch = Batch::new(None);
                    batch.push(root.as_os_str());
                    if files.send(batch).is_err() {
                        break;
                    }
                }
                Ok(Kind::Skip) => {}
                Err(e) => t.error(root, "cannot stat", e),
            }
        }
        let walkers: Vec<_> = (0..cfg.workers)
            .map(|i| {
                let (walk, dirs) = (Arc::clone(&walk), dirs.clone());
                let (files, t) = (files.clone(), Arc::clone(&t));
                handle.spawn_on(i, move || walker(walk, dirs, files, t))
            })
            .collect();
        // The setup's own hold: with no directory to walk, this ends the walk at once.
        walk.listed();
        drop((files, dirs, walk));
        let walked = walkers.into_iter().all(|w| w.join().is_ok());
        readers.into_iter().all(|r| r.join().is_ok()) && walked
    });
    let elapsed = start.elapsed();
    match walked {
        Ok(true) => println!("{}", tally.summary(elapsed).to_line()),
        Ok(false) | Err(_) => {
            eprintln!("{NAME}: a fiber of the search failed");
            std::process::exit(1);
        }
    }
}
