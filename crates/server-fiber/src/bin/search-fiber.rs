//! search-fiber: the file-content search on the fiber runtime, the paper's design: blocking
//! code whose file operations that would wait are io_uring operations on the worker's ring.
//!
//! A fiber per directory lists it and hands its files to reader fibers through a bounded
//! channel, spawning a fiber per subdirectory; `FILES_IN_FLIGHT_PER_WORKER` reader fibers
//! per worker (placed on each worker in turn) open, read in `--chunk` byte reads and close.
//! With `--file-ops direct` (the default) each of those is first tried as a system call that
//! finishes at once or refuses (`openat2` with `RESOLVE_CACHED`, `preadv2` with
//! `RWF_NOWAIT`, `close`): on a warm page cache no file operation touches the ring. What
//! would wait for the disk goes through the ring (`IORING_OP_OPENAT`, `IORING_OP_READ`),
//! parking only its fiber while the kernel works; the worker runs the others and submits the
//! whole batch of SQEs at once. `--file-ops ring` sends every operation, the close included,
//! through the ring (`fiber::FileOps`).
//!
//! Directory listing has no io_uring operation (there is no `getdents` opcode), so a
//! directory fiber lists with std's `read_dir`, a blocking `getdents64` on its worker, as
//! the paper's EMPER program does; a directory is listed in one or a few system calls. The
//! entry's type comes from the listing's `d_type`, so no `statx` is needed; a file is read
//! to its end, so its size is not needed either.

#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Arg, CommandFactory, FromArgMatches};
use fiber::FileOps;
use fiber::sync::{Receiver, Sender, channel};
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

/// Lists `dir`, sending its files to the readers in batches and spawning a fiber per
/// subdirectory. Every directory fiber holds a sender; the readers stop when the last one
/// is dropped.
fn walk_dir(dir: PathBuf, files: Sender<Batch>, tally: Arc<Tally>) {
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => return tally.error(&dir, "cannot list", e),
    };
    let dir = Arc::new(dir);
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
            Ok(Kind::Dir) => {
                let (files, tally) = (files.clone(), Arc::clone(&tally));
                let path = entry.path();
                // Detached: the fiber's sender is what the readers wait for.
                drop(fiber::spawn(move || walk_dir(path, files, tally)));
            }
            Ok(Kind::File) => {
                batch.push(&entry.file_name());
                if batch.count == FILES_PER_BATCH {
                    let full = std::mem::replace(&mut batch, Batch::new(Some(Arc::clone(&dir))));
                    if files.send(full).is_err() {
                        // Every reader is gone: the runtime is shutting down.
                        return;
                    }
                }
            }
            Ok(Kind::Skip) => {}
            Err(e) => tally.error(&entry.path(), "cannot stat", e),
        }
    }
    if batch.count > 0 {
        // An error here means every reader is gone, as above.
        let _ = files.send(batch);
    }
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
        for root in &cfg.roots {
            match walk::root_kind(root) {
                Ok(Kind::Dir) => {
                    let (files, t, root) = (files.clone(), Arc::clone(&t), root.clone());
                    drop(fiber::spawn(move || walk_dir(root, files, t)));
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
        drop(files);
        readers.into_iter().all(|r| r.join().is_ok())
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
