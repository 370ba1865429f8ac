//! The server's side of a point read at its window's edges by this host when the load comes
//! from client hosts: the agents' go starts the clock (`loadgen::fleet`), the window starts a
//! warmup later and ends a duration after that.

use std::time::{Duration, Instant};

use loadgen::account::CpuSource;

use crate::plan::placement::Placement;
use crate::plan::suites::{Point, Stop};
use crate::run::cost::{EdgeReading, WindowCpu};
use crate::run::counters::{Counted, Counting, Snapshot};

/// The server's side read at the window's edges on this host when the load comes from
/// other hosts: the agents' go (given by the fleet as it sends it) starts the clock, the
/// window starts a warmup later and ends a duration after that (a request-count point's when
/// the agents are done).
pub(super) struct Edges<'a> {
    counter: &'a CpuSource,
    cpus: &'a [usize],
    warmup: Duration,
    duration: Option<Duration>,
    go: std::sync::Mutex<Option<Instant>>,
    start: std::sync::Mutex<Option<EdgeReading>>,
    end: std::sync::Mutex<Option<EdgeReading>>,
    /// The server's counters, read with its CPU at each edge.
    counting: &'a Counting,
    counts: std::sync::Mutex<[Option<Snapshot>; 2]>,
}

impl<'a> Edges<'a> {
    pub(super) fn new(
        counter: &'a CpuSource,
        place: &'a Placement,
        point: &Point,
        counting: &'a Counting,
    ) -> Edges<'a> {
        Edges {
            counter,
            cpus: place.server_cpus.as_slice(),
            warmup: Duration::from_secs_f64(point.warmup.max(0.0)),
            duration: match point.stop {
                Stop::Duration(d) => Some(Duration::from_secs_f64(d.max(0.0))),
                Stop::Requests(_) => None,
            },
            go: std::sync::Mutex::new(None),
            start: std::sync::Mutex::new(None),
            end: std::sync::Mutex::new(None),
            counting,
            counts: std::sync::Mutex::new([None, None]),
        }
    }

    /// The agents' go, as the fleet sends it.
    pub(super) fn go(&self) {
        *lock(&self.go) = Some(Instant::now());
    }

    /// The CPU and the counters at an edge (`end`: the second).
    fn read(&self, end: bool) -> EdgeReading {
        let cpu = EdgeReading::read(self.counter, self.cpus);
        lock(&self.counts)[usize::from(end)] = Some(self.counting.read());
        cpu
    }

    /// Reads at an edge the clock has passed.
    pub(super) fn observe(&self) {
        let Some(go) = *lock(&self.go) else { return };
        let elapsed = go.elapsed();
        if elapsed >= self.warmup && lock(&self.start).is_none() {
            *lock(&self.start) = Some(self.read(false));
        }
        if let Some(d) = self.duration
            && elapsed >= self.warmup + d
            && lock(&self.end).is_none()
        {
            *lock(&self.end) = Some(self.read(true));
        }
    }

    /// How long until the next edge (the most to sleep before [`Edges::observe`]).
    pub(super) fn until_next(&self) -> Duration {
        let Some(go) = *lock(&self.go) else {
            return Duration::from_millis(5);
        };
        let next = if lock(&self.start).is_none() {
            self.warmup
        } else {
            match self.duration {
                Some(d) if lock(&self.end).is_none() => self.warmup + d,
                _ => return Duration::MAX,
            }
        };
        next.saturating_sub(go.elapsed())
    }

    /// The agents are done: the end of a request-count window.
    pub(super) fn finish(&self) {
        if lock(&self.end).is_none() && lock(&self.start).is_some() {
            *lock(&self.end) = Some(self.read(true));
        }
    }

    /// What the server used between the edges, where both were read.
    pub(super) fn window_cpu(&self) -> Option<WindowCpu> {
        let (a, b) = ((*lock(&self.start))?, (*lock(&self.end))?);
        a.until(b, self.counter)
    }
}

impl Edges<'_> {
    /// What the counters counted between the edges, where both were read.
    pub(super) fn counted(&self) -> Option<Counted> {
        match &*lock(&self.counts) {
            [Some(a), Some(b)] => Some(self.counting.between(a, b)),
            _ => None,
        }
    }
}

/// The value behind `m`, even if a thread panicked holding it.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
