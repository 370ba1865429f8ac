//! The counters against a process whose every system call and switch is known: this test
//! binary run again as the child (`COUNTED_CHILD`), in a cgroup of its own, makes exactly N
//! `getppid` calls and blocks M times on a pipe the parent feeds one byte at a time, echoing
//! each back so that the parent feeds the next only after the child took the last. Root only
//! (the cgroup and the counters need it): elsewhere it says why it skips.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use super::*;
use crate::run::cgroup::Accounting;

/// The child's calls and switches.
const N: usize = 5_000;
const M: usize = 300;
/// The variable that makes this test's binary the child.
const CHILD: &str = "COUNTED_CHILD";

/// What the child does: N getppid, then M blocking reads, each echoed.
fn child() {
    for _ in 0..N {
        std::hint::black_box(nix::unistd::getppid());
    }
    let (mut stdin, mut stdout) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut b = [0u8; 1];
    for _ in 0..M {
        if stdin.read_exact(&mut b).is_err() || stdout.write_all(&b).is_err() {
            return;
        }
        let _ = stdout.flush();
    }
}

#[test]
fn a_process_of_known_calls_and_switches_is_counted_so() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let accounting = Accounting::new(None).with_counters(true);
    let group = match accounting.server_group() {
        Ok(Some(g)) => g,
        other => return eprintln!("skipped: no cgroup can be made here: {other:?}"),
    };
    let dir = match accounting.perf_dir(Some(&group)) {
        Ok(d) => d,
        Err(why) => return eprintln!("skipped: no perf_event group here: {why}"),
    };
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    let counting = Counting::open(&dir, &cpus);
    if let Some(why) = ["syscalls", "context_switches"]
        .iter()
        .find_map(|k| counting.unavailable.get(*k))
    {
        return eprintln!("skipped: {why}");
    }
    let before = counting.read();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "run::counters::tests::a_process_of_known_calls_and_switches_is_counted_so",
        "--test-threads=1",
        "--nocapture",
        "-q",
    ])
    .env(CHILD, "1")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    group.join_on_exec(&mut cmd).unwrap();
    // Apart, the child is never preempted by the parent it wakes: its switches are its
    // blocking reads (on one CPU each echo would add an involuntary one).
    let apart = cpus.len() >= 2;
    if apart {
        crate::run::cpus::pin_current_thread(&"0".parse().unwrap()).unwrap();
    }
    let child_cpus = if apart { "1" } else { "0" }.parse().unwrap();
    let mut proc = crate::run::cpus::spawn_on(&child_cpus, || cmd.spawn()).unwrap();
    let (mut to, mut from) = (proc.stdin.take().unwrap(), proc.stdout.take().unwrap());
    // The child's echoes arrive among libtest's own lines: each byte sent is looked for in
    // what comes back (a byte libtest never writes).
    let mut buf = [0u8; 256];
    for _ in 0..M {
        // Give the child time to block on its read before the byte arrives (a switch each).
        std::thread::sleep(std::time::Duration::from_millis(1));
        to.write_all(&[0xfe]).unwrap();
        // Bounded: the child echoes each byte once, or its stdout closes (read gives 0).
        loop {
            let n = from.read(&mut buf).unwrap();
            if n == 0 || buf[..n].contains(&0xfe) {
                break;
            }
        }
    }
    drop(to);
    let _ = from.read_to_end(&mut Vec::new());
    assert!(proc.wait().unwrap().success());
    let c = counting.between(&before, &counting.read());
    let getppid = c.syscalls.get("getppid").copied().unwrap_or(0.0);
    assert!(
        (N as f64..N as f64 + 20.0).contains(&getppid),
        "getppid {getppid}: {c:?}"
    );
    let all = c.totals["syscalls"];
    assert!(all >= (N + 2 * M) as f64, "system calls {all}");
    // Each read blocked once (a voluntary switch); libtest's threads and the exec add a few.
    let switches = c.totals["context_switches"];
    if !apart {
        return eprintln!("the switches are not checked on one CPU: {switches}");
    }
    assert!(
        (M as f64..(M + M / 5 + 60) as f64).contains(&switches),
        "context switches {switches}: {c:?}"
    );
    // Each of them a switch to sleep: voluntary, as /proc/PID/status counts them.
    let vol = c.totals["voluntary_switches"];
    assert!(
        (M as f64..(M + M / 5 + 60) as f64).contains(&vol),
        "voluntary switches {vol}: {c:?}"
    );
    assert_eq!(c.totals["involuntary_switches"], switches - vol);
    let per = c.per(N as f64).unwrap();
    assert!((per.syscalls["getppid"] - getppid / N as f64).abs() < 1e-12);
}

#[test]
fn what_cannot_be_opened_is_not_available_with_its_reason_never_zero() {
    let c = Counting::open(std::path::Path::new("/proc/ringside-no-such-group"), &[0]);
    let counted = c.between(&c.read(), &c.read());
    assert!(counted.totals.is_empty() && counted.syscalls.is_empty());
    assert!(counted.unavailable["all"].contains("ringside-no-such-group"));
    assert_eq!(c.never_read().unavailable, counted.unavailable);
}

#[test]
fn a_multiplexed_counter_is_scaled_and_one_never_run_is_not_available() {
    let v = |count, enabled, running| Value {
        count,
        enabled,
        running,
    };
    assert_eq!(scaled(v(10, 100, 100), v(110, 200, 200)), Ok(100.0));
    assert_eq!(scaled(v(0, 0, 0), v(50, 100, 50)), Ok(100.0));
    assert!(
        scaled(v(0, 0, 0), v(0, 100, 0))
            .unwrap_err()
            .contains("not available here")
    );
}

#[test]
fn the_rest_of_the_calls_is_other_and_counts_are_divided_by_the_requests() {
    let mut c = Counting::default();
    for (key, by_name) in [("syscalls", false), ("read", true), ("write", true)] {
        c.events.push(Event {
            key: key.into(),
            by_name,
            fds: Vec::new(),
        });
    }
    let at = |t: f64, counts: [u64; 3]| Snapshot {
        t,
        values: counts
            .iter()
            .map(|&count| {
                Some(Value {
                    count,
                    enabled: 1,
                    running: 1,
                })
            })
            .collect(),
    };
    let counted = c.between(&at(10.0, [0, 0, 0]), &at(12.0, [3000, 1000, 1000]));
    assert_eq!(counted.seconds, 2.0);
    assert_eq!(counted.syscalls["other"], 1000.0);
    let per = counted.per_request(500.0).unwrap();
    assert_eq!(per.requests, Some(1000.0));
    assert_eq!(per.totals["syscalls"], 3.0);
    assert_eq!(per.syscalls["read"], 1.0);
    assert_eq!(counted.per_request(0.0), None);
}
