//! The io_uring paper's Table I on this machine: the cost of one read of an eventfd that
//! already has data, through each system-call technique (blocking `read`, `epoll_wait` and
//! a non-blocking `read`, io_uring one and several reads per submission under each ring
//! setup, Linux AIO, glibc's POSIX AIO). Every read is checked against the value written.
//! Two reference points come with them: a trivial system call (`getppid`) and an io_uring
//! NOP, the costs the techniques are built from.

#![deny(unsafe_code)]

use benches::syscall::{Baseline, EventfdBench, Technique};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn eventfd_read(c: &mut Criterion) {
    let mut group = c.benchmark_group(benches::ids::EVENTFD_READ);
    for technique in Technique::all() {
        let id = technique.full_id();
        let mut bench = match EventfdBench::new(technique) {
            Ok(bench) => bench,
            // A kernel without io_uring, AIO or a ring flag: the others still run.
            Err(e) => {
                eprintln!("skipping {id}: {e}");
                continue;
            }
        };
        let bench_id = match technique.parameter() {
            Some(setup) => BenchmarkId::new(technique.function_id(), setup),
            None => BenchmarkId::from_parameter(technique.function_id()),
        };
        group.bench_function(bench_id, |b| {
            b.iter_custom(|reads| {
                bench
                    .time_reads(reads)
                    .unwrap_or_else(|e| panic!("{id}: {e}"))
            });
        });
    }
    group.finish();
}

/// What the techniques are made of: one trap, one io_uring request without I/O.
fn baseline(c: &mut Criterion) {
    let mut group = c.benchmark_group(benches::ids::BASELINE);
    let mut baseline = Baseline::new();
    group.bench_function(benches::ids::TRAP, |b| {
        b.iter_custom(|n| {
            baseline
                .traps(n)
                .unwrap_or_else(|e| panic!("baseline/getppid: {e}"))
        });
    });
    if baseline.has_io_uring() {
        group.bench_function(benches::ids::IO_URING_NOP, |b| {
            b.iter_custom(|n| {
                baseline
                    .nops(n)
                    .unwrap_or_else(|e| panic!("baseline/io_uring_nop: {e}"))
            });
        });
    } else {
        eprintln!("skipping baseline/io_uring_nop: io_uring is unavailable");
    }
    match benches::switch::fiber_runtime() {
        Ok(runtime) => {
            group.bench_function(benches::ids::FIBER_NOP, |b| {
                b.iter_custom(|n| {
                    benches::syscall::fiber_nops(&runtime, n)
                        .unwrap_or_else(|e| panic!("baseline/fiber_nop: {e}"))
                });
            });
        }
        Err(e) => eprintln!("skipping baseline/fiber_nop: {e}"),
    }
    group.finish();
}

criterion_group!(benches, eventfd_read, baseline);
criterion_main!(benches);
