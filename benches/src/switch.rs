//! Switching and spawning, the costs the goroutine-switch article measures: an OS thread
//! hand-off (a futex ping-pong between two pinned threads), a raw coroutine switch
//! (corosensei resume and suspend), a fiber-to-fiber switch through our runtime's
//! scheduler, a Tokio task ping-pong, and spawn-and-join of a thread, a fiber and a Tokio
//! task.
//!
//! Every function here checks that the switch happened: a hand-off carries a value the
//! other side must have seen and answered, a coroutine returns its input plus one, two
//! fibers or two Tokio tasks verify that they strictly alternate, a spawned thread, fiber
//! or task returns a value computed from its argument.
//!
//! Times are returned per switch where a round trip is two switches: the functions that
//! take `round_trips` return half the elapsed time, so that criterion, dividing by the
//! number of round trips, reports one switch.

use std::hint::black_box;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

use crate::sys::{futex_wait, futex_wake};

/// How long one futex sleep lasts before the waiter looks whether its partner died.
const FUTEX_SLICE: Duration = Duration::from_millis(200);
/// How long a hand-off may take before it is called lost.
const HANDOFF_LIMIT: Duration = Duration::from_secs(10);

/// Where the two threads of a hand-off run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Both on one CPU: every hand-off is a context switch on that CPU.
    SameCore,
    /// On two CPUs: every hand-off wakes a thread sleeping on the other CPU.
    AcrossCores,
}

impl Placement {
    /// The name used in benchmark ids.
    pub fn label(self) -> &'static str {
        match self {
            Placement::SameCore => "same_core",
            Placement::AcrossCores => "across_cores",
        }
    }
}

/// The CPUs this thread may run on, in ascending order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0))?;
    Ok((0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect())
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(0), &set)?;
    Ok(())
}

/// What the two threads of a hand-off share.
#[derive(Debug, Default)]
struct Shared {
    /// The ball: the main thread makes it odd (ping), the partner makes it even (pong).
    word: AtomicU32,
    stop: AtomicBool,
}

/// Two OS threads passing control back and forth through a futex, pinned per
/// [`Placement`]. The calling thread is one of them: it is pinned while the value lives
/// and gets its former affinity back when it is dropped.
#[derive(Debug)]
pub struct Handoff {
    shared: Arc<Shared>,
    partner: Option<JoinHandle<io::Result<()>>>,
    /// The value of `word` when it is the main thread's turn.
    turn: u32,
    saved_affinity: CpuSet,
}

impl Handoff {
    /// Pins the calling thread and starts its partner. `AcrossCores` needs two CPUs in
    /// this thread's affinity mask.
    pub fn new(placement: Placement) -> io::Result<Handoff> {
        let cpus = allowed_cpus()?;
        let (main_cpu, partner_cpu) = match (placement, cpus.as_slice()) {
            (_, []) => return Err(io::Error::other("this thread may run on no CPU")),
            (Placement::SameCore, [.., last]) => (*last, *last),
            (Placement::AcrossCores, [.., a, b]) => (*a, *b),
            (Placement::AcrossCores, [_]) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a hand-off across cores needs two CPUs",
                ));
            }
        };
        let saved_affinity = sched_getaffinity(Pid::from_raw(0))?;
        pin_to(main_cpu)?;
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let partner = thread::Builder::new()
            .name("handoff-partner".into())
            .spawn(move || {
                pin_to(partner_cpu)?;
                partner(&theirs)
            });
        let partner = match partner {
            Ok(handle) => handle,
            Err(e) => {
                // Best effort: an error is already on its way to the caller.
                let _ = sched_setaffinity(Pid::from_raw(0), &saved_affinity);
                return Err(e);
            }
        };
        Ok(Handoff {
            shared,
            partner: Some(partner),
            turn: 0,
            saved_affinity,
        })
    }

    /// Passes control to the partner and back `round_trips` times; returns half the
    /// elapsed time (the time of `round_trips` one-way hand-offs).
    pub fn round_trips(&mut self, round_trips: u64) -> io::Result<Duration> {
        let word = &self.shared.word;
        let start = Instant::now();
        for _ in 0..round_trips {
            let ping = self.turn.wrapping_add(1);
            let pong = ping.wrapping_add(1);
            word.store(ping, Ordering::Release);
            futex_wake(word, 1)?;
            let sent = Instant::now();
            loop {
                let now = word.load(Ordering::Acquire);
                if now == pong {
                    break;
                }
                if now != ping {
                    return Err(io::Error::other(format!(
                        "hand-off: sent {ping}, partner answered {now} instead of {pong}"
                    )));
                }
                if !futex_wait(word, ping, FUTEX_SLICE)? {
                    self.check_partner(sent)?;
                }
            }
            self.turn = pong;
        }
        Ok(start.elapsed() / 2)
    }

    /// After a futex sleep ran out: fails if the partner is gone or the hand-off is lost.
    fn check_partner(&self, sent: Instant) -> io::Result<()> {
        if self.partner.as_ref().is_none_or(JoinHandle::is_finished) {
            return Err(io::Error::other("hand-off: the partner thread has exited"));
        }
        if sent.elapsed() > HANDOFF_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "hand-off: the partner did not answer within 10 s",
            ));
        }
        Ok(())
    }
}

/// The partner's side: answer every ping `n` with `n + 1` until told to stop.
fn partner(shared: &Shared) -> io::Result<()> {
    let mut seen = 0u32;
    loop {
        let now = shared.word.load(Ordering::Acquire);
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if now == seen {
            // Timeouts only bring it back to look at `stop`: the main thread may spend
            // seconds between benchmarks.
            futex_wait(&shared.word, seen, FUTEX_SLICE)?;
            continue;
        }
        if now != seen.wrapping_add(1) {
            return Err(io::Error::other(format!(
                "hand-off partner: expected ping {}, found {now}",
                seen.wrapping_add(1)
            )));
        }
        seen = now.wrapping_add(1);
        shared.word.store(seen, Ordering::Release);
        futex_wake(&shared.word, 1)?;
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Change the word too, so that a partner about to sleep on it does not.
        self.shared.word.fetch_add(1, Ordering::AcqRel);
        // Best effort in drop: a partner that did not hear us still leaves within one
        // futex slice, when it looks at `stop`.
        let _ = futex_wake(&self.shared.word, 1);
        if let Some(partner) = self.partner.take() {
            let _ = partner.join();
        }
        let _ = sched_setaffinity(Pid::from_raw(0), &self.saved_affinity);
    }
}

/// A corosensei coroutine on its default stack that answers every resume with its input
/// plus one: one resume and one suspend per round trip, no scheduler.
pub struct RawSwitch {
    coroutine: Coroutine<u64, u64, ()>,
}

impl std::fmt::Debug for RawSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawSwitch").finish_non_exhaustive()
    }
}

impl RawSwitch {
    /// Creates the coroutine (corosensei's `DefaultStack`, 1 MiB reserved).
    pub fn new() -> RawSwitch {
        RawSwitch {
            coroutine: Coroutine::new(|yielder, mut input: u64| {
                loop {
                    input = yielder.suspend(input.wrapping_add(1));
                }
            }),
        }
    }

    /// Resumes the coroutine `round_trips` times, checking each answer; returns half the
    /// elapsed time (each round trip is a switch in and a switch out).
    pub fn round_trips(&mut self, round_trips: u64) -> io::Result<Duration> {
        let start = Instant::now();
        for i in 0..round_trips {
            match self.coroutine.resume(black_box(i)) {
                CoroutineResult::Yield(answer) if answer == i.wrapping_add(1) => {}
                CoroutineResult::Yield(answer) => {
                    return Err(io::Error::other(format!(
                        "coroutine answered {answer} to {i}"
                    )));
                }
                CoroutineResult::Return(()) => {
                    return Err(io::Error::other("the coroutine returned"));
                }
            }
        }
        Ok(start.elapsed() / 2)
    }
}

impl Default for RawSwitch {
    fn default() -> RawSwitch {
        RawSwitch::new()
    }
}

/// Two Tokio tasks on `runtime` (meant to be a current-thread runtime) that hand control
/// to each other through a pair of `Notify`s, each taking `turns` turns; returns half the
/// elapsed time (each of the `2 * turns` hand-offs is one task switch).
///
/// Not `tokio::task::yield_now`: Tokio defers a yielded task's wake-up to the next time
/// the scheduler parks and then wakes the deferred tasks last-in first-out, so two
/// yielding tasks do not alternate (one of them often runs twice in a row), and a yield
/// is not reliably a switch. A `Notify` hand-off is one on every turn, and is checked.
pub fn tokio_pingpong(runtime: &tokio::runtime::Runtime, turns: u64) -> io::Result<Duration> {
    runtime.block_on(async move {
        let turn = Arc::new(AtomicU64::new(0));
        let to_a = Arc::new(tokio::sync::Notify::new());
        let to_b = Arc::new(tokio::sync::Notify::new());
        let start = Instant::now();
        let a = tokio::spawn(player(
            Arc::clone(&turn),
            0,
            turns,
            Arc::clone(&to_a),
            Arc::clone(&to_b),
        ));
        let b = tokio::spawn(player(Arc::clone(&turn), 1, turns, to_b, to_a));
        a.await.map_err(io::Error::other)??;
        b.await.map_err(io::Error::other)??;
        Ok(start.elapsed() / 2)
    })
}

/// One side of the ping-pong: waits to be notified (player 0 starts without waiting),
/// checks that the shared counter is `2 * i + me` on its `i`th turn, which holds only if
/// the two tasks strictly alternate, then notifies the other.
async fn player(
    turn: Arc<AtomicU64>,
    me: u64,
    turns: u64,
    mine: Arc<tokio::sync::Notify>,
    theirs: Arc<tokio::sync::Notify>,
) -> io::Result<()> {
    for i in 0..turns {
        if me == 1 || i > 0 {
            mine.notified().await;
        }
        let now = turn.load(Ordering::Relaxed);
        if now != 2 * i + me {
            return Err(io::Error::other(format!(
                "ping-pong: task {me} found turn {now} on its turn {i}, so the tasks did not \
                 alternate"
            )));
        }
        turn.store(now + 1, Ordering::Relaxed);
        theirs.notify_one();
    }
    Ok(())
}

/// A fiber runtime with one worker, for switches and spawns that stay on one thread as
/// the Tokio current-thread runtime's do.
pub fn fiber_runtime() -> io::Result<fiber::Runtime> {
    fiber::Runtime::builder()
        .workers(1)
        .thread_name("bench-fiber")
        .build()
        .map_err(io::Error::other)
}

/// Two fibers on `runtime`'s worker that take turns through `fiber::yield_now`, each
/// `turns` times; returns half the elapsed time (each of the `2 * turns` yields is one
/// switch through the scheduler: fiber to worker to fiber).
pub fn fiber_yield_pingpong(runtime: &fiber::Runtime, turns: u64) -> io::Result<Duration> {
    runtime
        .block_on(move || {
            let turn = Arc::new(AtomicU64::new(0));
            let start = Instant::now();
            let players = [Arc::clone(&turn), turn]
                .map(|turn| fiber::spawn(move || fiber_player(&turn, turns)));
            for player in players {
                player.join().map_err(io::Error::other)??;
            }
            Ok(start.elapsed() / 2)
        })
        .map_err(io::Error::other)?
}

/// One side of the fiber ping-pong. Whichever fiber runs first takes the even turns; on
/// its `i`th turn a fiber must find the counter at `2 * i + offset`, which holds only if
/// the two strictly alternate.
fn fiber_player(turn: &AtomicU64, turns: u64) -> io::Result<()> {
    let offset = match turn.load(Ordering::Relaxed) {
        0 => 0,
        1 => 1,
        other => {
            return Err(io::Error::other(format!(
                "fiber ping-pong: the second fiber started at turn {other}, not 1"
            )));
        }
    };
    for i in 0..turns {
        let now = turn.load(Ordering::Relaxed);
        if now != 2 * i + offset {
            return Err(io::Error::other(format!(
                "fiber ping-pong: a fiber found turn {now} on its turn {i}, so the fibers did \
                 not alternate"
            )));
        }
        turn.store(now + 1, Ordering::Relaxed);
        fiber::yield_now();
    }
    Ok(())
}

/// Spawns and joins `n` fibers one after the other, from a fiber on `runtime`.
pub fn spawn_join_fibers(runtime: &fiber::Runtime, n: u64) -> io::Result<Duration> {
    runtime
        .block_on(move || {
            let start = Instant::now();
            for i in 0..n {
                let got = fiber::spawn(move || answer(black_box(i)))
                    .join()
                    .map_err(io::Error::other)?;
                check_answer(i, got)?;
            }
            Ok(start.elapsed())
        })
        .map_err(io::Error::other)?
}

/// An argument a spawned thread or task turns into its result, so that a join that
/// returned without running the closure is caught.
fn answer(i: u64) -> u64 {
    i.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15
}

/// Spawns and joins `n` OS threads (std's default 2 MiB stack), one after the other.
pub fn spawn_join_threads(n: u64) -> io::Result<Duration> {
    let start = Instant::now();
    for i in 0..n {
        let got = thread::Builder::new()
            .spawn(move || answer(black_box(i)))?
            .join()
            .map_err(|_| io::Error::other("a spawned thread panicked"))?;
        check_answer(i, got)?;
    }
    Ok(start.elapsed())
}

/// Spawns and awaits `n` Tokio tasks one after the other, from inside a task on
/// `runtime` (on a multi-thread runtime, spawning from a worker is the common case).
pub fn spawn_join_tokio(runtime: &tokio::runtime::Runtime, n: u64) -> io::Result<Duration> {
    runtime.block_on(async move {
        tokio::spawn(async move {
            let start = Instant::now();
            for i in 0..n {
                let got = tokio::spawn(async move { answer(black_box(i)) })
                    .await
                    .map_err(io::Error::other)?;
                check_answer(i, got)?;
            }
            Ok(start.elapsed())
        })
        .await
        .map_err(io::Error::other)?
    })
}

fn check_answer(i: u64, got: u64) -> io::Result<()> {
    if got == answer(i) {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "spawned work for {i} returned {got}, not {}",
            answer(i)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn handoff_round_trips_on_one_core_and_across() {
        for placement in [Placement::SameCore, Placement::AcrossCores] {
            let before = allowed_cpus().unwrap();
            match Handoff::new(placement) {
                Ok(mut handoff) => {
                    handoff.round_trips(100).unwrap();
                    handoff.round_trips(1).unwrap();
                    assert_eq!(handoff.turn, 202);
                }
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    eprintln!("skipping {placement:?}: {e}");
                }
                Err(e) => panic!("{placement:?}: {e}"),
            }
            assert_eq!(allowed_cpus().unwrap(), before, "affinity restored");
        }
    }

    #[test]
    fn a_partner_that_answers_wrong_fails_the_handoff() {
        let mut handoff = Handoff::new(Placement::SameCore).unwrap();
        handoff.round_trips(3).unwrap();
        // Skip a value, as a partner that lost a ping would.
        handoff.turn += 2;
        assert!(handoff.round_trips(1).is_err());
    }

    #[test]
    fn raw_switch_answers_every_resume() {
        let mut raw = RawSwitch::new();
        raw.round_trips(1000).unwrap();
        raw.round_trips(0).unwrap();
    }

    #[test]
    fn tokio_tasks_alternate() {
        tokio_pingpong(&current_thread(), 1000).unwrap();
        tokio_pingpong(&current_thread(), 1).unwrap();
    }

    #[test]
    fn fibers_alternate() {
        match fiber_runtime() {
            Ok(rt) => {
                fiber_yield_pingpong(&rt, 1000).unwrap();
                fiber_yield_pingpong(&rt, 1).unwrap();
            }
            Err(e) => eprintln!("skipping fibers: {e}"),
        }
    }

    #[test]
    fn a_fiber_out_of_turn_is_caught() {
        // One fiber alone takes turn 0, then finds turn 1 (its own) where 2 was due.
        let turn = AtomicU64::new(0);
        assert!(fiber_player(&turn, 1).is_ok());
        turn.store(0, Ordering::Relaxed);
        let err = fiber_player(&turn, 2).unwrap_err();
        assert!(err.to_string().contains("did not alternate"), "{err}");
    }

    #[test]
    fn a_player_out_of_turn_is_caught() {
        let rt = current_thread();
        // Task 1 alone, woken by a stray permit: its first turn expects the counter at 1,
        // but it is 0.
        let mine = Arc::new(tokio::sync::Notify::new());
        mine.notify_one();
        let theirs = Arc::new(tokio::sync::Notify::new());
        let err = rt
            .block_on(player(Arc::new(AtomicU64::new(0)), 1, 1, mine, theirs))
            .unwrap_err();
        assert!(err.to_string().contains("did not alternate"), "{err}");
    }

    #[test]
    fn spawn_and_join_return_the_answer() {
        spawn_join_threads(20).unwrap();
        spawn_join_tokio(&current_thread(), 200).unwrap();
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        spawn_join_tokio(&multi, 200).unwrap();
        match fiber_runtime() {
            Ok(rt) => {
                spawn_join_fibers(&rt, 200).unwrap();
            }
            Err(e) => eprintln!("skipping fibers: {e}"),
        };
        assert!(check_answer(1, answer(2)).is_err());
    }
}
