//! A group of pinned worker threads, started the same way by every server that
//! runs a runtime per thread (srv-tokio per-core, srv-tokio-uring, srv-reactor):
//! each thread pins itself, sets its runtime up, and reports; the group returns
//! only once every worker has, so a CPU that cannot be used or a ring the kernel
//! refuses is an error before READY, not a line after it. Only then do the
//! workers run, so a failed start leaves no worker serving.
//!
//! How a worker is told to stop is its runtime's business (a watch channel, an
//! eventfd); the group waits for the workers to come back, a bounded time.
//!
//! ```
//! use std::time::Duration;
//! use launch::workers::{Placement, Workers};
//!
//! // Two workers; each one's setup runs on its own thread and returns its body,
//! // which here returns at once (a real one serves until told to stop).
//! let workers = Workers::start("doc", vec![10, 20], Placement::Anywhere, |index, item| {
//!     let thread = std::thread::current().name().map(str::to_owned);
//!     Ok(move || (thread, index + item))
//! })?;
//! let joined = workers.join(Duration::from_secs(5));
//! let values: Vec<_> = joined.into_iter().map(|r| r.unwrap().unwrap()).collect();
//! assert_eq!(values, [(Some("doc-0".into()), 10), (Some("doc-1".into()), 21)]);
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};

use crate::CpuList;
use crate::cpus::{pin_current_thread, pin_current_thread_to};

/// How long a worker may take to pin itself and set up before the start fails.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the workers of a group run.
#[derive(Debug, Clone)]
pub enum Placement {
    /// Wherever the scheduler puts them (no `--cpus`).
    Anywhere,
    /// Worker `i` on CPU `cpus.for_worker(i)` alone.
    OnePerWorker(CpuList),
    /// Every worker on any CPU of the list (srv-reactor's acceptor).
    Within(CpuList),
}

impl Placement {
    /// One CPU per worker when `--cpus` is given, else anywhere.
    pub fn one_per_worker(cpus: Option<&CpuList>) -> Self {
        cpus.map_or(Placement::Anywhere, |cpus| {
            Placement::OnePerWorker(cpus.clone())
        })
    }

    fn pin(&self, index: usize) -> anyhow::Result<()> {
        match self {
            Placement::Anywhere => Ok(()),
            Placement::OnePerWorker(cpus) => pin_current_thread(cpus.for_worker(index)),
            Placement::Within(cpus) => pin_current_thread_to(cpus),
        }
    }
}

/// Started workers, each running the body its setup returned. `T` is what a
/// body returns.
#[derive(Debug)]
pub struct Workers<T> {
    /// A started worker's thread returns `Some`: `None` is for a start that
    /// failed, which never makes a `Workers`.
    threads: Vec<JoinHandle<Option<T>>>,
    /// Each worker sends its index here when its body returned.
    finished: mpsc::Receiver<usize>,
}

/// The start's verdict, which every worker waits for after its setup: run
/// (true) or go home (false).
type Gate = (Mutex<Option<bool>>, Condvar);

impl<T: Send + 'static> Workers<T> {
    /// Starts a thread per item, named `<name>-<index>`. Each pins itself as
    /// `placement` says, then runs `setup(index, item)` on itself (so a runtime
    /// that cannot leave its thread is built there), which returns the
    /// worker's body. Returns once every worker is pinned and set up, with the
    /// bodies running; if any worker fails (or takes longer than
    /// [`START_TIMEOUT`]), no body runs (each thread ends once its setup is
    /// done, dropping what it set up) and the first error is returned.
    pub fn start<I, B>(
        name: &str,
        items: Vec<I>,
        placement: Placement,
        setup: impl Fn(usize, I) -> anyhow::Result<B> + Send + Sync + 'static,
    ) -> anyhow::Result<Self>
    where
        I: Send + 'static,
        B: FnOnce() -> T,
    {
        let count = items.len();
        let setup = Arc::new(setup);
        let placement = Arc::new(placement);
        let gate: Arc<Gate> = Arc::new((Mutex::new(None), Condvar::new()));
        let (report, reports) = mpsc::channel::<(usize, anyhow::Result<()>)>();
        let (finish, finished) = mpsc::channel();
        let mut threads = Vec::with_capacity(count);
        let mut spawned = Ok(());
        for (index, item) in items.into_iter().enumerate() {
            let (setup, placement, gate) = (setup.clone(), placement.clone(), gate.clone());
            let (report, finish) = (report.clone(), finish.clone());
            let thread = std::thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || {
                    let body = placement
                        .pin(index)
                        .with_context(|| format!("pinning worker {index}"))
                        .and_then(|()| setup(index, item));
                    let body = match body {
                        Ok(body) => {
                            let _ = report.send((index, Ok(())));
                            body
                        }
                        Err(e) => {
                            let _ = report.send((index, Err(e)));
                            return None;
                        }
                    };
                    if !wait_for_verdict(&gate) {
                        return None;
                    }
                    let value = body();
                    let _ = finish.send(index);
                    Some(value)
                })
                .with_context(|| format!("starting worker thread {name}-{index}"));
            match thread {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    spawned = Err(e);
                    break;
                }
            }
        }
        drop(report);
        let verdict = spawned.and_then(|()| {
            let deadline = Instant::now() + START_TIMEOUT;
            for _ in 0..count {
                let left = deadline.saturating_duration_since(Instant::now());
                match reports.recv_timeout(left) {
                    Ok((_, Ok(()))) => {}
                    Ok((index, Err(e))) => return Err(e.context(format!("{name} worker {index}"))),
                    Err(_) => return Err(anyhow!("a {name} worker did not start in time")),
                }
            }
            Ok(())
        });
        open_gate(&gate, verdict.is_ok());
        match verdict {
            Ok(()) => Ok(Workers { threads, finished }),
            Err(e) => {
                // Every thread finds the gate shut once its setup is done; one
                // stuck in its setup is left behind rather than waited for.
                drop(threads);
                Err(e)
            }
        }
    }

    /// How many workers run.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Whether the group has no workers.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Waits, at most `grace` in all, for the workers' bodies to return (the
    /// caller has told them to stop), and returns what each returned, by index:
    /// `Some(Err(_))` for one that panicked, `None` for one still running when
    /// the time was up (it is left behind, not waited for).
    pub fn join(self, grace: Duration) -> Vec<Option<std::thread::Result<T>>> {
        let deadline = Instant::now() + grace;
        let mut done = vec![false; self.threads.len()];
        for _ in 0..self.threads.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.finished.recv_timeout(left) {
                Ok(index) => done[index] = true,
                // A body that panicked never reports; its thread has ended.
                Err(_) => break,
            }
        }
        self.threads
            .into_iter()
            .zip(done)
            .map(|(thread, done)| {
                if !(done || thread.is_finished()) {
                    return None;
                }
                match thread.join() {
                    Ok(value) => value.map(Ok),
                    Err(panic) => Some(Err(panic)),
                }
            })
            .collect()
    }
}

fn wait_for_verdict(gate: &Gate) -> bool {
    let (verdict, cond) = gate;
    let mut verdict = verdict.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(run) = *verdict {
            return run;
        }
        verdict = cond.wait(verdict).unwrap_or_else(PoisonError::into_inner);
    }
}

fn open_gate(gate: &Gate, run: bool) {
    let (verdict, cond) = gate;
    *verdict.lock().unwrap_or_else(PoisonError::into_inner) = Some(run);
    cond.notify_all();
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn a_failed_setup_fails_the_start_and_no_body_runs() {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let started = Workers::start("t", vec![(), (), ()], Placement::Anywhere, move |i, ()| {
            anyhow::ensure!(i != 1, "no ring for you");
            let flag = Arc::clone(&flag);
            Ok(move || flag.store(true, Ordering::SeqCst))
        });
        let e = started.expect_err("worker 1 failed");
        assert_eq!(format!("{e:#}"), "t worker 1: no ring for you");
        assert!(!ran.load(Ordering::SeqCst), "the gate stayed shut");
    }

    #[test]
    fn a_cpu_that_is_not_there_fails_the_start() {
        let cpus: CpuList = "4095".parse().unwrap();
        let started = Workers::start("t", vec![()], Placement::OnePerWorker(cpus), |_, ()| {
            Ok(|| ())
        });
        let e = started.expect_err("CPU 4095 is not there");
        assert!(format!("{e:#}").contains("pinning worker 0"), "{e:#}");
    }

    #[test]
    fn join_reports_a_worker_still_running_after_the_grace() {
        let (stop, stopped) = mpsc::channel::<()>();
        let stopped = Mutex::new(Some(stopped));
        let workers = Workers::start("t", vec![0, 1], Placement::Anywhere, move |i, _| {
            let wait = if i == 1 {
                stopped.lock().unwrap().take()
            } else {
                None
            };
            Ok(move || {
                if let Some(wait) = wait {
                    let _ = wait.recv_timeout(Duration::from_secs(10));
                }
                i
            })
        })
        .unwrap();
        assert_eq!(workers.len(), 2);
        let joined = workers.join(Duration::from_millis(50));
        assert!(matches!(joined[0], Some(Ok(0))));
        assert!(joined[1].is_none(), "still waiting for its stop");
        drop(stop);
    }
}
