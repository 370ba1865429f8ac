//! What the server's CPU was spent on, counted by the kernel over the measured window: its
//! system calls (in all and by name), context switches, CPU migrations, page faults and,
//! where the machine has hardware counters, instructions, cycles, last-level cache and dTLB
//! misses. Each is a `perf_event_open` counter in counting mode (no sampling, no ring buffer,
//! nothing for the harness to do while it counts), scoped to the server's `perf_event` cgroup
//! (`cgroup::Perf`) with one descriptor per CPU the server runs on, read at the window's two
//! edges (`point::watch`, `point::edges`, `outside`): the kernel adds to a counter while a task
//! of the group runs on that CPU, every thread and process of the server included, forked or
//! exited in the window.
//!
//! The system calls are the `raw_syscalls:sys_enter` tracepoint (every call), and by name
//! `syscalls:sys_enter_<name>` for [`SYSCALLS`], the rest "other". The cost: a counted event
//! is an increment in the kernel, but while any system-call tracepoint is enabled every task
//! of the machine (loadgen's too) enters its system calls through the kernel's slow path
//! (`syscall_trace_enter`), tens of nanoseconds a call; the cgroup's counters also add a check
//! at each context switch on the server's CPUs. `--counters off` leaves all of it out; what it
//! costs in CPU per request is measured by running with and without (docs/METHOD.md).
//!
//! What cannot be counted (no hardware counters in a VM, no privilege, no tracefs) is "not
//! available here" with the reason, never zero.
//!
//! It may call nothing else of xtask.

mod perf_open;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The system calls counted by name: what the servers' loops make (the rest is "other").
pub(crate) const SYSCALLS: &[&str] = &[
    "read",
    "write",
    "readv",
    "writev",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_ctl",
    "io_uring_enter",
    "futex",
    "accept4",
    "close",
    "poll",
    "ppoll",
    "nanosleep",
    "clock_nanosleep",
    "sched_yield",
    "mmap",
    "munmap",
    "madvise",
    "mprotect",
    "brk",
    "getppid",
    "eventfd2",
    "timerfd_settime",
    "rt_sigprocmask",
    "clock_gettime",
    "getrandom",
];

/// How an event is named to the kernel.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// `(type, config)` of `perf_event_attr`.
    Kind(u32, u64),
    /// A tracepoint, `<system>/<event>` under tracefs's `events/`.
    Tracepoint(&'static str),
    /// A tracepoint counted where its fields pass a filter (ftrace's grammar).
    Filtered(&'static str, &'static str),
}

/// `PERF_TYPE_HARDWARE`, `_SOFTWARE`, `_TRACEPOINT`, `_HW_CACHE`.
const HARDWARE: u32 = 0;
const SOFTWARE: u32 = 1;
const TRACEPOINT: u32 = 2;
const HW_CACHE: u32 = 3;
/// `PERF_COUNT_HW_CACHE_OP_READ << 8 | PERF_COUNT_HW_CACHE_RESULT_MISS << 16`.
const READ_MISS: u64 = 1 << 16;

/// The events counted in all: the key of each (`<key>_per_req` in the summary) and its source.
const TOTALS: &[(&str, Source)] = &[
    ("syscalls", Source::Tracepoint("raw_syscalls/sys_enter")),
    ("context_switches", Source::Kind(SOFTWARE, 3)),
    // Voluntary as /proc/PID/status counts them: a switch out of a task that was not preempted
    // and is going to sleep (a state bit of `prev_state`, not the preemption bit 0x100 nor
    // 0, running). Involuntary switches are the rest of the context switches.
    (
        "voluntary_switches",
        Source::Filtered("sched/sched_switch", "prev_state & 255"),
    ),
    ("migrations", Source::Kind(SOFTWARE, 4)),
    ("page_faults", Source::Kind(SOFTWARE, 2)),
    ("instructions", Source::Kind(HARDWARE, 1)),
    ("cycles", Source::Kind(HARDWARE, 0)),
    ("llc_misses", Source::Kind(HW_CACHE, 2 | READ_MISS)),
    ("dtlb_misses", Source::Kind(HW_CACHE, 3 | READ_MISS)),
];

/// One event's counters, one per CPU.
#[derive(Debug)]
struct Event {
    key: String,
    /// A system call by name (else a total).
    by_name: bool,
    fds: Vec<File>,
}

/// The counters of one server start, open from before its window to after it.
#[derive(Debug, Default)]
pub(crate) struct Counting {
    events: Vec<Event>,
    /// What could not be opened, and why.
    unavailable: BTreeMap<String, String>,
}

/// A counter's value with the times it was enabled and running, summed over the CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Value {
    count: u64,
    enabled: u64,
    running: u64,
}

/// Every counter of a [`Counting`] read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    /// When, in Unix seconds.
    t: f64,
    values: Vec<Option<Value>>,
}

/// What was counted over a window, or (after [`Counted::per_request`]) per request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Counted {
    /// The window's length in seconds, as the counters were read.
    pub(crate) seconds: f64,
    /// The requests the figures are divided by (none: counts over the window).
    pub(crate) requests: Option<f64>,
    /// Each of [`TOTALS`] that was counted.
    pub(crate) totals: BTreeMap<String, f64>,
    /// System calls by name, with `other` for the rest of the total.
    pub(crate) syscalls: BTreeMap<String, f64>,
    /// What was not counted, and why (`all` where nothing was).
    pub(crate) unavailable: BTreeMap<String, String>,
}

impl Counting {
    /// Opens the counters of the group whose directory is `cgroup` on each of `cpus`; what
    /// cannot be opened is noted with the reason.
    pub(crate) fn open(cgroup: &Path, cpus: &[usize]) -> Counting {
        let dir = match File::open(cgroup) {
            Ok(d) => d,
            Err(e) => {
                return Counting::unavailable(format!(
                    "not available here: {}: {e}",
                    cgroup.display()
                ));
            }
        };
        raise_fd_limit((TOTALS.len() + SYSCALLS.len()) * cpus.len());
        let mut c = Counting::default();
        let tracefs = tracefs();
        for (key, source) in TOTALS {
            let filter = match source {
                Source::Filtered(_, f) => Some(*f),
                _ => None,
            };
            let kind = resolve(*source, tracefs.as_deref());
            c.add(key, false, kind.map(|k| (k, filter)), &dir, cpus);
        }
        let by_name = tracefs.as_deref().map_err(Clone::clone).and_then(|t| {
            let dir = t.join("events/syscalls");
            dir.is_dir().then_some(t).ok_or_else(|| {
                "the kernel has no syscalls:sys_enter_<name> tracepoints \
                 (CONFIG_FTRACE_SYSCALLS)"
                    .to_string()
            })
        });
        match by_name {
            Ok(t) => {
                for name in SYSCALLS {
                    // A call this architecture does not have is no call of its servers'.
                    if let Ok(id) = tracepoint_id(t, &format!("syscalls/sys_enter_{name}")) {
                        c.add(name, true, Ok(((TRACEPOINT, id), None)), &dir, cpus);
                    }
                }
            }
            Err(why) => {
                c.unavailable.insert("syscalls_by_name".into(), why);
            }
        }
        c
    }

    /// What a window whose edges were never read says: why nothing was counted.
    pub(crate) fn never_read(&self) -> Counted {
        let why = self.unavailable.get("all").cloned().unwrap_or_else(|| {
            "not available here: the window's edges were not read (no window was announced)".into()
        });
        Counted {
            unavailable: BTreeMap::from([("all".into(), why)]),
            ..Counted::default()
        }
    }

    /// Nothing counted, for `why`.
    pub(crate) fn unavailable(why: String) -> Counting {
        Counting {
            events: Vec::new(),
            unavailable: BTreeMap::from([("all".into(), why)]),
        }
    }

    /// Opens `key`'s event on every CPU, or notes why it cannot be.
    fn add(
        &mut self,
        key: &str,
        by_name: bool,
        source: Result<((u32, u64), Option<&str>), String>,
        dir: &File,
        cpus: &[usize],
    ) {
        let opened = source.and_then(|((kind, config), filter)| {
            cpus.iter()
                .map(|&cpu| {
                    let fd = perf_open::open(kind, config, dir, cpu)?;
                    if let Some(f) = filter {
                        let f = std::ffi::CString::new(f).map_err(io::Error::other)?;
                        perf_open::set_filter(&fd, &f)?;
                    }
                    Ok(fd)
                })
                .collect::<io::Result<Vec<File>>>()
                .map_err(|e| why_not(&e))
        });
        match opened {
            Ok(fds) => self.events.push(Event {
                key: key.into(),
                by_name,
                fds,
            }),
            Err(why) => {
                self.unavailable.insert(key.into(), why);
            }
        }
    }

    /// Every counter, now.
    pub(crate) fn read(&self) -> Snapshot {
        Snapshot {
            t: unix_now(),
            values: self.events.iter().map(|e| read_sum(&e.fds)).collect(),
        }
    }

    /// What was counted between `a` and `b` (two of this one's snapshots).
    pub(crate) fn between(&self, a: &Snapshot, b: &Snapshot) -> Counted {
        let mut out = Counted {
            seconds: (b.t - a.t).max(0.0),
            unavailable: self.unavailable.clone(),
            ..Counted::default()
        };
        for (i, e) in self.events.iter().enumerate() {
            let (Some(Some(x)), Some(Some(y))) = (a.values.get(i), b.values.get(i)) else {
                out.unavailable
                    .insert(e.key.clone(), "its counter could not be read".into());
                continue;
            };
            match scaled(*x, *y) {
                Ok(n) if e.by_name => {
                    out.syscalls.insert(e.key.clone(), n);
                }
                Ok(n) => {
                    out.totals.insert(e.key.clone(), n);
                }
                Err(why) => {
                    out.unavailable.insert(e.key.clone(), why);
                }
            }
        }
        if let (Some(all), Some(vol)) = (
            out.totals.get("context_switches").copied(),
            out.totals.get("voluntary_switches").copied(),
        ) {
            out.totals
                .insert("involuntary_switches".into(), (all - vol).max(0.0));
        }
        if let Some(all) = out.totals.get("syscalls").copied() {
            if !out.syscalls.is_empty() {
                let named: f64 = out.syscalls.values().sum();
                out.syscalls.insert("other".into(), (all - named).max(0.0));
            }
        } else {
            out.syscalls.clear();
        }
        out
    }
}

impl Counted {
    /// The same, each count divided by the requests of the window (`per_sec` over its
    /// seconds); `None` where there were none.
    pub(crate) fn per_request(&self, per_sec: f64) -> Option<Counted> {
        self.per(per_sec * self.seconds)
    }

    /// The same, each count divided by `requests`; `None` where there were none (and
    /// something was counted).
    pub(crate) fn per(&self, requests: f64) -> Option<Counted> {
        let nothing = self.totals.is_empty() && self.syscalls.is_empty();
        if (requests.is_nan() || requests <= 0.0) && !nothing {
            return None;
        }
        let div =
            |m: &BTreeMap<String, f64>| m.iter().map(|(k, v)| (k.clone(), v / requests)).collect();
        Some(Counted {
            seconds: self.seconds,
            requests: Some(requests),
            totals: div(&self.totals),
            syscalls: div(&self.syscalls),
            unavailable: self.unavailable.clone(),
        })
    }
}

/// The count between two readings, scaled where the hardware multiplexed the counter.
fn scaled(a: Value, b: Value) -> Result<f64, String> {
    let count = b.count.saturating_sub(a.count) as f64;
    let enabled = b.enabled.saturating_sub(a.enabled);
    let running = b.running.saturating_sub(a.running);
    if enabled == 0 || running >= enabled {
        // Not scheduled at all in the window (the group never ran): nothing to scale.
        return Ok(count);
    }
    if running == 0 {
        return Err(
            "not available here: the counter never got a hardware counter in the \
                    window (too many events multiplexed)"
                .into(),
        );
    }
    Ok(count * enabled as f64 / running as f64)
}

/// The sum over `fds` of their values; `None` if one cannot be read.
fn read_sum(fds: &[File]) -> Option<Value> {
    let mut sum = Value::default();
    for fd in fds {
        let mut buf = [0u8; 24];
        (&*fd).read_exact(&mut buf).ok()?;
        let word =
            |i: usize| u64::from_ne_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        sum.count += word(0);
        sum.enabled += word(1);
        sum.running += word(2);
    }
    Some(sum)
}

/// Why an event could not be opened, and what to do where something can be done.
fn why_not(e: &io::Error) -> String {
    use nix::errno::Errno;
    let errno = e.raw_os_error().map(Errno::from_raw);
    match errno {
        Some(Errno::EACCES | Errno::EPERM) => {
            let paranoid = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map_or_else(|_| "?".into(), |s| s.trim().to_string());
            format!(
                "not available here: counting a cgroup needs root or CAP_PERFMON \
                 (kernel.perf_event_paranoid is {paranoid}): run as root, or \
                 `sudo sysctl kernel.perf_event_paranoid=-1` ({e})"
            )
        }
        Some(Errno::ENOENT | Errno::EOPNOTSUPP | Errno::ENODEV) => {
            format!("not available here: this CPU (or its hypervisor) offers no such counter ({e})")
        }
        Some(Errno::EMFILE | Errno::ENFILE) => {
            format!("not available here: too many open files for one counter per CPU ({e})")
        }
        _ => format!("not available here: {e}"),
    }
}

/// The kernel's `(type, config)` for `source`: a tracepoint's id from tracefs.
fn resolve(source: Source, tracefs: Result<&Path, &String>) -> Result<(u32, u64), String> {
    match source {
        Source::Kind(kind, config) => Ok((kind, config)),
        Source::Tracepoint(name) | Source::Filtered(name, _) => {
            let t = tracefs.map_err(|why| format!("not available here: {why}"))?;
            tracepoint_id(t, name).map(|id| (TRACEPOINT, id))
        }
    }
}

/// The id of the tracepoint `<system>/<event>` under `tracefs`.
fn tracepoint_id(tracefs: &Path, name: &str) -> Result<u64, String> {
    let file = tracefs.join("events").join(name).join("id");
    fs::read_to_string(&file)
        .map_err(|e| format!("not available here: {}: {e}", file.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("not available here: {}: {e}", file.display()))
}

/// Where tracefs is mounted; mounted at `/sys/kernel/tracing` where it is not (as root).
fn tracefs() -> Result<PathBuf, String> {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    if let Some(dir) = mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"tracefs")).then(|| PathBuf::from(f[1]))
    }) {
        return Ok(dir);
    }
    let dir = Path::new("/sys/kernel/tracing");
    nix::mount::mount(
        Some("nodev"),
        dir,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map(|()| dir.to_path_buf())
    .map_err(|e| {
        format!(
            "tracefs is not mounted and cannot be (`mount -t tracefs nodev {}`: {e})",
            dir.display()
        )
    })
}

/// Raises the soft limit of open files towards the hard one where `needed` more would pass
/// it (a counter per event per CPU, on a machine of many CPUs); else leaves it, which the
/// servers inherit, as it was.
fn raise_fd_limit(needed: usize) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let open = fs::read_dir("/proc/self/fd").map_or(0, Iterator::count) as u64;
        let want = open + needed as u64 + 64;
        if soft < want && soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, want.min(hard), hard);
        }
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
