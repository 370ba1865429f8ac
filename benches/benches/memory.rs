//! Memory per parked unit: RSS and address space per parked OS thread, idle Tokio task
//! and suspended coroutine, 10,000 of each, each kind in a fresh child process. A
//! measurement printed (and, with `RINGSIDE_MEMORY_OUT` set, appended to that file as
//! JSON lines), not a criterion timing.

#![deny(unsafe_code)]

use std::io::Write;

use benches::memory::{self, COUNT_ENV, DEFAULT_COUNT, HarnessArgs, Kind, OUT_ENV};

/// Units per kind under `--test`: enough to exercise the path, quick to run.
const TEST_COUNT: u64 = 100;

fn main() {
    if let Some(code) = memory::child_main_if_requested() {
        std::process::exit(code);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = HarnessArgs::parse(&args);
    let count = match (args.test, std::env::var(COUNT_ENV)) {
        (true, _) => TEST_COUNT,
        (false, Ok(n)) => n
            .parse()
            .unwrap_or_else(|_| panic!("{COUNT_ENV}={n:?} is not a count")),
        (false, Err(_)) => DEFAULT_COUNT,
    };
    let mut out = std::env::var_os(OUT_ENV).map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()))
    });
    for kind in Kind::ALL {
        let id = format!("{}/{}", benches::ids::MEMORY, kind.id());
        if !args.selects(&id) {
            continue;
        }
        if args.list {
            println!("{id}: benchmark");
            continue;
        }
        let sample = memory::measure(kind, count).unwrap_or_else(|e| panic!("{id}: {e}"));
        println!(
            "{id:<24} {count} parked: RSS {:>9.0} B each, address space {:>11.0} B each",
            sample.rss_per_unit(),
            sample.vsz_per_unit()
        );
        if let Some(file) = out.as_mut() {
            let line = serde_json::to_string(&sample).unwrap_or_default();
            writeln!(file, "{line}").unwrap_or_else(|e| panic!("{OUT_ENV}: {e}"));
        }
    }
}
