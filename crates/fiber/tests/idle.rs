//! An idle runtime uses no CPU: its workers sleep in their rings.
//!
//! This is a measurement with a generous bound, not a speed assertion: a runtime that polled
//! instead of sleeping would burn about 100 ticks per worker per second; a sleeping one burns
//! about none. Alone in its binary so that no other test's CPU time is counted.

mod util;

use std::time::Duration;

const WORKERS: usize = 2;

fn idle_ticks(rt: &fiber::Runtime) -> u64 {
    // A fiber parked in a long sleep and one parked on a channel: nothing runnable.
    rt.spawn(|| fiber::sleep(Duration::from_secs(3600)));
    let (tx, rx) = fiber::sync::channel::<()>(1);
    rt.spawn(move || rx.recv());
    // Let the workers reach their sleep: one round trip through the runtime.
    assert_eq!(rt.block_on(|| ()), Ok(()));
    let before = fiber::process_cpu_ticks().unwrap();
    // The measurement window itself.
    std::thread::sleep(Duration::from_secs(1));
    let after = fiber::process_cpu_ticks().unwrap();
    drop(tx);
    after - before
}

#[test]
fn an_idle_runtime_sleeps() {
    require_io_uring!();
    for (name, builder) in [
        ("default", fiber::Runtime::builder().workers(WORKERS)),
        (
            "completer",
            fiber::Runtime::builder().workers(WORKERS).completer(true),
        ),
        (
            "defer_taskrun",
            fiber::Runtime::builder()
                .workers(WORKERS)
                .ring_flags("defer_taskrun".parse().unwrap()),
        ),
    ] {
        let rt = builder.build().unwrap();
        let ticks = idle_ticks(&rt);
        let stats = rt.stats();
        eprintln!("{name}: {ticks} CPU ticks in 1 s idle; {stats}");
        // Polling would cost ~100 ticks per worker; 20 leaves room for a loaded machine.
        assert!(ticks <= 20, "{name}: {ticks} ticks while idle");
        assert!(stats.total().sleeps >= 1, "{stats}");
    }
}
