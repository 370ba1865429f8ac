//! temp
fn main() {
    let rt = fiber::Runtime::builder()
        .workers(1)
        .cpus([1])
        .build()
        .unwrap();
    let d = rt
        .block_on(|| {
            let other = fiber::spawn(|| {
                for _ in 0..10_000_000 {
                    fiber::yield_now();
                }
            });
            let start = std::time::Instant::now();
            for _ in 0..10_000_000 {
                fiber::yield_now();
            }
            other.join().unwrap();
            start.elapsed()
        })
        .unwrap();
    println!("{:.1} ns", d.as_nanos() as f64 / 2e7);
}
