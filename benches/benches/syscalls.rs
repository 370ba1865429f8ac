//! The io_uring paper's Table I on this machine: the cost of one read of an eventfd that
//! already has data, through each system-call technique (blocking `read`, `epoll_wait` and
//! a non-blocking `read`, io_uring one and several reads per submission under each ring
//! setup, Linux AIO, glibc's POSIX AIO). Every read is checked against the value written.

#![deny(unsafe_code)]

use benches::syscall::{EventfdBench, Technique};
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

criterion_group!(benches, eventfd_read);
criterion_main!(benches);
