//! Switching and spawning, as in the goroutine-switch article: a one-way OS thread
//! hand-off on one core and across cores, a raw coroutine switch, a fiber-to-fiber switch
//! through our runtime's scheduler, a Tokio task ping-pong, and spawn-and-join of a
//! thread, a fiber and a Tokio task. Each operation checks
//! that the switch or the spawned work really happened.

#![deny(unsafe_code)]

use benches::ids;
use benches::switch::{
    Handoff, Placement, RawSwitch, fiber_runtime, fiber_yield_pingpong, spawn_join_fibers,
    spawn_join_threads, spawn_join_tokio, tokio_pingpong,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn switch(c: &mut Criterion) {
    let mut group = c.benchmark_group(ids::SWITCH);
    for placement in [Placement::SameCore, Placement::AcrossCores] {
        let id = ids::thread_handoff(placement);
        // Pins this thread until the hand-off is dropped at the end of the iteration.
        let mut handoff = match Handoff::new(placement) {
            Ok(handoff) => handoff,
            Err(e) => {
                eprintln!("skipping {id}: {e}");
                continue;
            }
        };
        group.bench_function(
            BenchmarkId::new(ids::THREAD_HANDOFF, placement.label()),
            |b| {
                b.iter_custom(|n| {
                    handoff
                        .round_trips(n)
                        .unwrap_or_else(|e| panic!("{id}: {e}"))
                });
            },
        );
    }

    let mut raw = RawSwitch::new();
    group.bench_function(ids::COROUTINE_RAW, |b| {
        b.iter_custom(|n| {
            raw.round_trips(n)
                .unwrap_or_else(|e| panic!("{}: {e}", ids::COROUTINE_RAW))
        });
    });

    match fiber_runtime() {
        Ok(runtime) => {
            group.bench_function(ids::FIBER_YIELD, |b| {
                b.iter_custom(|n| {
                    fiber_yield_pingpong(&runtime, n)
                        .unwrap_or_else(|e| panic!("{}: {e}", ids::FIBER_YIELD))
                });
            });
        }
        Err(e) => eprintln!("skipping {}/{}: {e}", ids::SWITCH, ids::FIBER_YIELD),
    }

    let runtime = current_thread();
    group.bench_function(ids::TOKIO_PINGPONG, |b| {
        b.iter_custom(|n| {
            tokio_pingpong(&runtime, n).unwrap_or_else(|e| panic!("{}: {e}", ids::TOKIO_PINGPONG))
        });
    });
    group.finish();
}

fn spawn_join(c: &mut Criterion) {
    let mut group = c.benchmark_group(ids::SPAWN_JOIN);
    group.bench_function(ids::SPAWN_THREAD, |b| {
        b.iter_custom(|n| {
            spawn_join_threads(n).unwrap_or_else(|e| panic!("spawn_join/thread: {e}"))
        });
    });
    match fiber_runtime() {
        Ok(runtime) => {
            group.bench_function(ids::SPAWN_FIBER, |b| {
                b.iter_custom(|n| {
                    spawn_join_fibers(&runtime, n)
                        .unwrap_or_else(|e| panic!("spawn_join/fiber: {e}"))
                });
            });
        }
        Err(e) => eprintln!("skipping {}/{}: {e}", ids::SPAWN_JOIN, ids::SPAWN_FIBER),
    }
    let runtimes = [
        (ids::CURRENT_THREAD, current_thread()),
        (
            ids::MULTI_THREAD,
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("building a Tokio runtime: {e}")),
        ),
    ];
    for (flavor, runtime) in &runtimes {
        group.bench_function(BenchmarkId::new(ids::SPAWN_TOKIO, *flavor), |b| {
            b.iter_custom(|n| {
                spawn_join_tokio(runtime, n)
                    .unwrap_or_else(|e| panic!("spawn_join/tokio/{flavor}: {e}"))
            });
        });
    }
    group.finish();
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("building a Tokio runtime: {e}"))
}

criterion_group!(benches, switch, spawn_join);
criterion_main!(benches);
