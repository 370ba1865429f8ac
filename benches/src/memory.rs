//! Memory per parked unit of concurrency: how much the resident set (RSS) and the address
//! space (VSZ) of a process grow when it holds N parked OS threads, N idle Tokio tasks, N
//! parked fibers of our runtime or N suspended raw coroutines. This is a measurement, not
//! a criterion timing.
//!
//! Each kind is measured in a fresh child process (the current executable, re-run with
//! [`CHILD_ENV`] set), so that one kind's freed memory, which the allocator keeps, does
//! not hide the next kind's cost. A binary that wants [`measure`] calls
//! [`child_main_if_requested`] first thing in `main`.

use std::io;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult};
use serde::{Deserialize, Serialize};

/// Set in a child's environment to `<kind>:<count>`.
pub const CHILD_ENV: &str = "RINGSIDE_MEMORY_CHILD";

/// What a child prints before its sample, so stray output is not taken for one.
const SAMPLE_PREFIX: &str = "ringside-memory ";

/// How long a child may take to get all its units parked.
const PARK_LIMIT: Duration = Duration::from_secs(60);

/// What is parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An OS thread (std's default 2 MiB stack) blocked on a condition variable.
    Thread,
    /// A Tokio task on a current-thread runtime waiting on a `Notify`.
    TokioTask,
    /// A raw corosensei coroutine on its `DefaultStack` (1 MiB reserved, guard page
    /// below), resumed once and suspended. No fiber runtime around it.
    Coroutine,
    /// A fiber of our runtime (one worker, pooled 64 KiB stacks) parked on a
    /// `fiber::sync::Semaphore`.
    Fiber,
}

impl Kind {
    /// Every kind, in the order the report lists them.
    pub const ALL: [Kind; 4] = [Kind::Thread, Kind::TokioTask, Kind::Fiber, Kind::Coroutine];

    /// The name used in ids, files and the child's environment.
    pub fn id(self) -> &'static str {
        match self {
            Kind::Thread => "thread",
            Kind::TokioTask => "tokio_task",
            Kind::Coroutine => "coroutine",
            Kind::Fiber => "fiber",
        }
    }

    /// The kind named `id`.
    pub fn from_id(id: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.id() == id)
    }
}

/// One measurement: the process's RSS and VSZ, in bytes, before and after parking
/// `count` units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// [`Kind::id`] of what was parked.
    pub kind: String,
    pub count: u64,
    pub rss_before: u64,
    pub rss_after: u64,
    pub vsz_before: u64,
    pub vsz_after: u64,
}

impl Sample {
    /// Resident bytes per unit.
    pub fn rss_per_unit(&self) -> f64 {
        per_unit(self.rss_before, self.rss_after, self.count)
    }

    /// Address-space bytes per unit.
    pub fn vsz_per_unit(&self) -> f64 {
        per_unit(self.vsz_before, self.vsz_after, self.count)
    }

    /// The line a child prints.
    pub fn to_line(&self) -> String {
        // A struct of strings and integers always serialises.
        format!(
            "{SAMPLE_PREFIX}{}",
            serde_json::to_string(self).unwrap_or_default()
        )
    }

    /// The sample in a child's output: its last line that starts with the prefix.
    pub fn from_output(output: &str) -> Option<Sample> {
        output
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix(SAMPLE_PREFIX))
            .and_then(|json| serde_json::from_str(json).ok())
    }
}

fn per_unit(before: u64, after: u64, count: u64) -> f64 {
    if count == 0 {
        return 0.0;
    }
    (after as f64 - before as f64) / count as f64
}

/// If this process is a measuring child, measures, prints the sample and returns the
/// exit status the caller should exit with; `None` in any other process.
pub fn child_main_if_requested() -> Option<i32> {
    let request = std::env::var(CHILD_ENV).ok()?;
    let parsed = request
        .split_once(':')
        .and_then(|(kind, count)| Some((Kind::from_id(kind)?, count.parse::<u64>().ok()?)));
    let Some((kind, count)) = parsed else {
        eprintln!("{CHILD_ENV}={request:?} is not <kind>:<count>");
        return Some(2);
    };
    match measure_here(kind, count) {
        Ok(sample) => {
            println!("{}", sample.to_line());
            Some(0)
        }
        Err(e) => {
            eprintln!("measuring {count} parked {}: {e}", kind.id());
            Some(1)
        }
    }
}

/// Measures `count` parked units of `kind` in a child process (this executable, which
/// must call [`child_main_if_requested`] at the start of `main`).
pub fn measure(kind: Kind, count: u64) -> io::Result<Sample> {
    let exe = std::env::current_exe()?;
    let output = Command::new(exe)
        .env(CHILD_ENV, format!("{}:{count}", kind.id()))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "the child measuring {} exited with {}",
            kind.id(),
            output.status
        )));
    }
    Sample::from_output(&String::from_utf8_lossy(&output.stdout)).ok_or_else(|| {
        io::Error::other(format!(
            "the child measuring {} printed no sample",
            kind.id()
        ))
    })
}

/// Measures in this process. Meant for a fresh process: see [`measure`].
pub fn measure_here(kind: Kind, count: u64) -> io::Result<Sample> {
    let (rss_before, vsz_before, rss_after, vsz_after) = match kind {
        Kind::Thread => park_threads(count)?,
        Kind::TokioTask => park_tokio_tasks(count)?,
        Kind::Coroutine => park_coroutines(count)?,
        Kind::Fiber => park_fibers(count)?,
    };
    Ok(Sample {
        kind: kind.id().to_owned(),
        count,
        rss_before,
        rss_after,
        vsz_before,
        vsz_after,
    })
}

/// The process's (RSS, VSZ) in bytes, from `/proc/self/status`.
pub fn usage() -> io::Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    parse_status(&status)
        .ok_or_else(|| io::Error::other("/proc/self/status has no VmRSS or VmSize line"))
}

/// (VmRSS, VmSize) in bytes from the text of `/proc/<pid>/status`.
fn parse_status(status: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        status.lines().find_map(|line| {
            let kib = line.strip_prefix(name)?.trim().strip_suffix("kB")?.trim();
            kib.parse::<u64>().ok().map(|k| k * 1024)
        })
    };
    Some((field("VmRSS:")?, field("VmSize:")?))
}

type Usage = (u64, u64, u64, u64);

/// The gate parked threads wait behind.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    /// Where parked threads wait for `open`.
    opened: Condvar,
    /// Where the measuring thread waits for `started` to reach the count.
    all_started: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    open: bool,
    started: u64,
}

fn park_threads(count: u64) -> io::Result<Usage> {
    let gate = Arc::new(Gate::default());
    let mut handles = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let (rss_before, vsz_before) = usage()?;
    for _ in 0..count {
        let theirs = Arc::clone(&gate);
        let spawned = thread::Builder::new().spawn(move || {
            let gate = theirs;
            let mut state = gate.state.lock().unwrap_or_else(|p| p.into_inner());
            state.started += 1;
            if state.started == count {
                gate.all_started.notify_one();
            }
            // Each thread counts itself under the lock and only lets go of it by waiting,
            // so once the count is full every thread is asleep in the condvar.
            while !state.open {
                state = gate.opened.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                open_gate(&gate);
                return Err(e);
            }
        }
    }
    let waited = wait_all_started(&gate, count);
    let after = usage();
    open_gate(&gate);
    for handle in handles {
        handle
            .join()
            .map_err(|_| io::Error::other("a parked thread panicked"))?;
    }
    waited?;
    let (rss_after, vsz_after) = after?;
    Ok((rss_before, vsz_before, rss_after, vsz_after))
}

fn wait_all_started(gate: &Gate, count: u64) -> io::Result<()> {
    let deadline = Instant::now() + PARK_LIMIT;
    let mut state = gate.state.lock().unwrap_or_else(|p| p.into_inner());
    while state.started < count {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "only {} of {count} threads parked within 60 s",
                    state.started
                ),
            ));
        }
        state = gate
            .all_started
            .wait_timeout(state, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    Ok(())
}

fn open_gate(gate: &Gate) {
    gate.state.lock().unwrap_or_else(|p| p.into_inner()).open = true;
    gate.opened.notify_all();
}

fn park_tokio_tasks(count: u64) -> io::Result<Usage> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let gate = Arc::new(tokio::sync::Notify::new());
        let started = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        let (rss_before, vsz_before) = usage()?;
        for _ in 0..count {
            let gate = Arc::clone(&gate);
            let started = Arc::clone(&started);
            handles.push(tokio::spawn(async move {
                // On a current-thread runtime this whole first poll runs before the
                // measuring task sees the count: the task is registered with the Notify.
                let notified = gate.notified();
                started.fetch_add(1, Ordering::Relaxed);
                notified.await;
            }));
        }
        let deadline = Instant::now() + PARK_LIMIT;
        while started.load(Ordering::Relaxed) < count {
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the Tokio tasks did not all start within 60 s",
                ));
            }
            tokio::task::yield_now().await;
        }
        let (rss_after, vsz_after) = usage()?;
        gate.notify_waiters();
        for handle in handles {
            handle.await.map_err(io::Error::other)?;
        }
        Ok((rss_before, vsz_before, rss_after, vsz_after))
    })
}

fn park_coroutines(count: u64) -> io::Result<Usage> {
    let mut parked = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let (rss_before, vsz_before) = usage()?;
    for _ in 0..count {
        let mut coroutine: Coroutine<(), (), ()> = Coroutine::new(|yielder, ()| {
            yielder.suspend(());
        });
        match coroutine.resume(()) {
            CoroutineResult::Yield(()) => parked.push(coroutine),
            CoroutineResult::Return(()) => {
                return Err(io::Error::other("a coroutine returned instead of parking"));
            }
        }
    }
    let (rss_after, vsz_after) = usage()?;
    for mut coroutine in parked {
        // Finishing each one, rather than dropping it suspended, proves it was parked.
        if !matches!(coroutine.resume(()), CoroutineResult::Return(())) {
            return Err(io::Error::other("a parked coroutine did not finish"));
        }
    }
    Ok((rss_before, vsz_before, rss_after, vsz_after))
}

/// Set to a file path, the memory bench target appends each sample to it as a JSON line
/// (the report reads them from there).
pub const OUT_ENV: &str = "RINGSIDE_MEMORY_OUT";

/// Set to a number, the memory bench target parks that many units of each kind instead
/// of [`DEFAULT_COUNT`].
pub const COUNT_ENV: &str = "RINGSIDE_MEMORY_COUNT";

/// Units of each kind parked by default.
pub const DEFAULT_COUNT: u64 = 10_000;

/// What the memory bench target takes from the arguments `cargo bench` passes every
/// bench target (criterion's): `--test` (a quick check), `--list`, and a filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessArgs {
    /// `--test`, or no `--bench` (as under `cargo test --benches`): measure a few units
    /// only, to check that the path works. Criterion decides its test mode the same way.
    pub test: bool,
    /// `--list`: print the ids and measure nothing.
    pub list: bool,
    /// The positional filter; an id runs if it contains it (criterion takes a regex, this
    /// takes a plain substring).
    pub filter: Option<String>,
}

impl HarnessArgs {
    /// Criterion's options that take a value, whose value is not a filter.
    const VALUED: [&'static str; 16] = [
        "--format",
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--nresamples",
        "--output-format",
        "--color",
        "--plotting-backend",
        "--profile-time",
    ];

    /// Reads the arguments after the program name.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> HarnessArgs {
        let mut parsed = HarnessArgs::default();
        let mut bench = false;
        let mut args = args.iter().map(AsRef::as_ref);
        while let Some(arg) = args.next() {
            match arg {
                "--test" => parsed.test = true,
                "--bench" => bench = true,
                "--list" => parsed.list = true,
                a if HarnessArgs::VALUED.contains(&a) => {
                    args.next();
                }
                a if a.starts_with('-') => {}
                a => parsed.filter = Some(a.to_owned()),
            }
        }
        parsed.test |= !bench;
        parsed
    }

    /// Whether the measurement `id` is selected.
    pub fn selects(&self, id: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| id.contains(f))
    }
}

fn park_fibers(count: u64) -> io::Result<Usage> {
    let runtime = crate::switch::fiber_runtime()?;
    let gate = Arc::new(fiber::sync::Semaphore::new(0));
    let started = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let (rss_before, vsz_before) = usage()?;
    for _ in 0..count {
        let gate = Arc::clone(&gate);
        let started = Arc::clone(&started);
        handles.push(runtime.spawn(move || {
            started.fetch_add(1, Ordering::Relaxed);
            drop(gate.acquire());
        }));
    }
    let deadline = Instant::now() + PARK_LIMIT;
    let mut waited = Ok(());
    while started.load(Ordering::Relaxed) < count {
        if Instant::now() > deadline {
            waited = Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the fibers did not all start within 60 s",
            ));
            break;
        }
        // The worker thread runs the fibers; this thread only waits for it.
        thread::sleep(Duration::from_millis(1));
    }
    let after = usage();
    gate.add_permits(usize::try_from(count).unwrap_or(usize::MAX));
    for handle in handles {
        handle.join().map_err(io::Error::other)?;
    }
    waited?;
    let (rss_after, vsz_after) = after?;
    Ok((rss_before, vsz_before, rss_after, vsz_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_parses() {
        let status = "Name:\tx\nVmSize:\t   10240 kB\nVmRSS:\t    2048 kB\nThreads:\t1\n";
        assert_eq!(parse_status(status), Some((2048 * 1024, 10240 * 1024)));
        assert_eq!(parse_status("VmRSS:\t 5 kB\n"), None, "no VmSize");
        assert_eq!(parse_status(""), None);
        let (rss, vsz) = usage().unwrap();
        assert!(rss > 0 && vsz >= rss);
    }

    #[test]
    fn samples_round_trip_through_a_line() {
        let sample = Sample {
            kind: "thread".into(),
            count: 4,
            rss_before: 1000,
            rss_after: 5000,
            vsz_before: 0,
            vsz_after: 4 << 20,
        };
        assert_eq!(sample.rss_per_unit(), 1000.0);
        assert_eq!(sample.vsz_per_unit(), f64::from(1 << 20));
        let output = format!("noise\n{}\nmore noise\n", sample.to_line());
        assert_eq!(Sample::from_output(&output), Some(sample));
        assert_eq!(Sample::from_output("nothing here"), None);
    }

    #[test]
    fn harness_arguments() {
        let args = HarnessArgs::parse(&["--bench", "--warm-up-time", "1", "--noplot", "thread"]);
        assert_eq!(
            args,
            HarnessArgs {
                test: false,
                list: false,
                filter: Some("thread".into())
            }
        );
        assert!(args.selects("memory/thread"));
        assert!(!args.selects("memory/coroutine"));
        let args = HarnessArgs::parse(&["--bench", "--measurement-time", "2", "--test"]);
        assert!(args.test && args.filter.is_none());
        assert!(args.selects("memory/coroutine"));
        assert!(HarnessArgs::parse(&["--bench", "--list"]).list);
        // `cargo test --benches` passes no --bench: a quick check, as criterion does.
        assert!(HarnessArgs::parse::<&str>(&[]).test);
        assert!(!HarnessArgs::parse(&["--bench"]).test);
    }

    #[test]
    fn kinds_have_distinct_ids() {
        for kind in Kind::ALL {
            assert_eq!(Kind::from_id(kind.id()), Some(kind));
        }
        assert_eq!(Kind::from_id("goroutine"), None);
    }

    #[test]
    fn every_kind_parks_and_finishes() {
        // Other tests run in this process at the same time, so the sizes say nothing
        // here; what is checked is that every unit parked and was then released.
        for kind in Kind::ALL {
            let sample = measure_here(kind, 50).unwrap();
            assert_eq!((sample.kind.as_str(), sample.count), (kind.id(), 50));
        }
    }
}
