//! The cgroup accounting's tests: the controllers found, a quota that throttles, every
//! thread and process that burned CPU in a group counted, by the group and by the
//! process-tree fallback, and a child that forks at its start in its group whole.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::mpsc;

use super::quota::period_for;
use super::*;

#[test]
fn finds_the_controller_and_picks_a_period() {
    let v1 = "cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\n\
              cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n";
    assert_eq!(
        find_hierarchy(v1),
        Some(Hierarchy::V1(PathBuf::from("/sys/fs/cgroup/cpu")))
    );
    let both = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n";
    assert!(matches!(find_hierarchy(both), Some(Hierarchy::V1(_))));
    assert_eq!(find_hierarchy("proc /proc proc rw 0 0\n"), None);
    assert_eq!(period_for(0.5), 2_000);
    assert_eq!(period_for(2.0), 2_000);
    assert_eq!(period_for(0.25), 4_000);
    let s = parse_cpu_stat("nr_periods 10\nnr_throttled 4\nthrottled_time 2000000000\n");
    assert_eq!((s.nr_periods, s.nr_throttled, s.throttled_s), (10, 4, 2.0));
    let s = parse_cpu_stat("usage_usec 5\nnr_periods 3\nnr_throttled 1\nthrottled_usec 1500\n");
    assert_eq!(
        (s.nr_periods, s.nr_throttled, s.throttled_s),
        (3, 1, 0.0015)
    );
}

#[test]
fn a_busy_process_in_a_quota_group_is_throttled() {
    let quota = match Quota::new(0.2) {
        Ok(q) => q,
        Err(why) => {
            eprintln!("skipped: cgroups are not writable here: {why}");
            return;
        }
    };
    let group = quota.cap(None).unwrap();
    // A shell that spins for a bounded time; killed below whatever happens.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done"]);
    group.join_on_exec(&mut cmd).unwrap();
    let mut child = cmd.spawn().unwrap();
    let before = group.stat();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut after = before;
    while after.nr_throttled <= before.nr_throttled && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after = group.stat();
    }
    let _ = child.kill();
    let _ = child.wait();
    let t = group.between(before, after).unwrap();
    assert!(t.nr_periods > 0, "{t:?}");
    assert!(t.nr_throttled > 0, "{t:?}");
    drop(group);
}

/// A fresh counting group, or `None` (the test skipped, saying why) where none can be made.
fn counting_group() -> Option<Group> {
    let accounting = Accounting::new(None);
    if let Accounting::Tree { why } = &accounting {
        // On a benchmark host, where the figures must be exact, a skip is a failure.
        assert!(
            std::env::var_os("RINGSIDE_REQUIRE_CGROUPS").is_none(),
            "RINGSIDE_REQUIRE_CGROUPS is set, but no cgroup can be made here: {why}"
        );
        eprintln!("skipped: cgroups are not writable here: {why}");
        return None;
    }
    Some(accounting.server_group().unwrap().unwrap())
}

/// What the burning workload (this test binary run again, see [`burn_workload`]) does,
/// told by this variable: `threads` (threads that burn and exit), `procs` (processes
/// forked, burning, reaped), `one` (one process that burns).
const BURN: &str = "RINGSIDE_TEST_BURN";
/// CPU each burning thread or process uses, by its own clock.
const BURN_NS: u64 = 40_000_000;
/// How many threads or processes burn.
const BURNERS: usize = 6;

/// Burns `ns` of the calling thread's own CPU time (or, with `process`, the process's)
/// and returns what its clock says it used.
fn burn(ns: u64, process: bool) -> u64 {
    use nix::time::{ClockId, clock_gettime};
    let clock = if process {
        ClockId::CLOCK_PROCESS_CPUTIME_ID
    } else {
        ClockId::CLOCK_THREAD_CPUTIME_ID
    };
    let now = || {
        clock_gettime(clock).map_or(0, |t| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
                + u64::try_from(t.tv_nsec()).unwrap_or(0)
        })
    };
    let mut x = 0u64;
    // Bounded: a few million turns at most between readings of a clock that moves.
    for _ in 0..100_000 {
        if now() >= ns {
            break;
        }
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
    }
    std::hint::black_box(x);
    now()
}

/// Threads that each burn [`BURN_NS`] and exit, joined: what their own clocks say.
fn burn_in_threads() -> u64 {
    let threads: Vec<_> = (0..BURNERS)
        .map(|_| std::thread::spawn(|| burn(BURN_NS, false)))
        .collect();
    threads.into_iter().map(|t| t.join().unwrap_or(0)).sum()
}

/// This test binary run as a burner of kind `kind`, stdin and stdout piped.
fn burner(kind: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "run::cgroup::tests::burn_workload",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(BURN, kind)
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped());
    cmd
}

/// The number after `BURNED ` in `out`'s lines (the test harness may have begun the
/// line with the test's name).
fn burned(out: &mut impl std::io::BufRead) -> u64 {
    let mut line = String::new();
    // Bounded: the burner prints its line and then waits; at its end, EOF.
    while out.read_line(&mut line).unwrap_or(0) > 0 {
        if let Some(n) = line.split("BURNED ").nth(1) {
            return n.trim().parse().unwrap();
        }
        line.clear();
    }
    panic!("the burner said nothing");
}

/// The workload of the accounting tests, when this binary is run again as one: it waits
/// for a line, burns (in threads that exit, in processes it forks and reaps, or itself),
/// prints what its clocks say it used, and waits for a second line before it exits, so
/// that it is alive (its process tree readable) when the window's end is read. Run as a
/// test of its own, it checks that the threads burn what they are asked.
#[test]
fn burn_workload() {
    let Ok(kind) = std::env::var(BURN) else {
        let used = burn_in_threads();
        assert!(used >= BURNERS as u64 * BURN_NS, "{used}");
        return;
    };
    let mut line = String::new();
    let stdin = std::io::stdin();
    stdin.read_line(&mut line).unwrap();
    let used = match kind.as_str() {
        "threads" => burn_in_threads(),
        "procs" => {
            let children: Vec<_> = (0..BURNERS)
                .map(|_| burner("one").spawn().unwrap())
                .collect();
            children
                .into_iter()
                .map(|mut c| {
                    drop(c.stdin.take());
                    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
                    let n = burned(&mut out);
                    // The rest of what it says (the harness's result), until it exits.
                    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
                    c.wait().unwrap();
                    n
                })
                .sum()
        }
        _ => burn(BURN_NS, true),
    };
    println!("\nBURNED {used}");
    stdin.read_line(&mut line).unwrap();
}

/// Runs a burner of `kind` in a fresh group: its CPU as the group counts it, as its process
/// tree counts it, and as its own clocks say. `None` where no group can be made here.
fn measure_burner(kind: &str) -> Option<(u64, u64, u64)> {
    let group = counting_group()?;
    let mut cmd = burner(kind);
    group.join_on_exec(&mut cmd).unwrap();
    let mut child = cmd.spawn().unwrap();
    let counter = group.cpu_source();
    let tree = loadgen::account::CpuSource::Tree(child.id());
    let (cg0, tree0) = (counter.read().unwrap(), tree.read().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"go\n").unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let used = burned(&mut out);
    let (cg1, tree1) = (counter.read().unwrap(), tree.read().unwrap());
    std::io::Write::write_all(&mut stdin, b"end\n").unwrap();
    drop(stdin);
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    child.wait().unwrap();
    drop(group);
    Some((cg0.until(cg1).total_ns, tree0.until(tree1).total_ns, used))
}

/// The group's count is all there (at least 0.98 of what the burners' own clocks say),
/// and the process tree's agrees with it to a few clock ticks a process.
fn assert_counted(kind: &str, processes: u64) {
    let Some((group, tree, used)) = measure_burner(kind) else {
        return;
    };
    eprintln!("{kind}: the group counted {group} ns, the process tree {tree}, own clocks {used}");
    assert!(used >= BURNERS as u64 * BURN_NS, "{kind}: burned {used}");
    assert!(
        group as f64 >= 0.98 * used as f64,
        "{kind}: the group counted {group} ns of {used}"
    );
    // The group holds nothing but the burner: what it counts beyond the burning is the
    // burner's start and its reading of stdin, far less than the burning itself.
    assert!(
        group < 2 * used,
        "{kind}: the group counted {group} ns of {used}"
    );
    // Ticks of 10 ms: each process's reading may be a tick short at each edge.
    let slack = 0.05 * group as f64 + (processes * 2 * 10_000_000) as f64;
    assert!(
        (tree as f64 - group as f64).abs() <= slack,
        "{kind}: the process tree counted {tree} ns, the group {group}"
    );
}

#[test]
fn threads_that_exit_are_counted_whole() {
    assert_counted("threads", 1);
}

#[test]
fn processes_forked_and_reaped_are_counted_whole() {
    assert_counted("procs", 1 + BURNERS as u64);
}

/// A shell started in `group` (joining it between fork and exec) as the leader of a process
/// group of its own, which is killed whole when this is dropped, whatever the test did.
struct Shell(Child);

impl Shell {
    fn start(group: &Group, script: &str) -> Shell {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0);
        group.join_on_exec(&mut cmd).unwrap();
        Shell(cmd.spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The first line it prints, waited for up to 30 s.
    fn line(&mut self) -> String {
        let out = self.0.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the shell said nothing within 30 s")
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(-(self.0.id() as i32));
        let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// The processes in each directory of `group`, sorted.
fn members(group: &Group) -> Vec<Vec<i32>> {
    group
        .dirs
        .iter()
        .map(|dir| {
            let text = fs::read_to_string(dir.join("cgroup.procs")).unwrap();
            let mut pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            pids.sort_unstable();
            pids.dedup();
            pids
        })
        .collect()
}

/// The shape of a server that forks its workers as it starts, a master and its workers:
/// joined before exec, its whole tree is in the group, and nothing else is.
#[test]
fn a_child_that_forks_at_its_start_is_in_its_group_whole() {
    let Some(group) = counting_group() else {
        return;
    };
    let mut shell = Shell::start(&group, "sleep 30 & sleep 30 & echo forked; wait");
    assert_eq!(shell.line().trim(), "forked");
    let mut tree: Vec<i32> = loadgen::account::process_tree(shell.pid() as i32)
        .unwrap()
        .into_iter()
        .map(|(pid, _)| pid)
        .collect();
    tree.sort_unstable();
    assert_eq!(tree.len(), 3, "the shell and its two sleeps: {tree:?}");
    for (dir, pids) in group.dirs.iter().zip(members(&group)) {
        assert_eq!(pids, tree, "{}", dir.display());
    }
    drop(shell);
    drop(group);
}

/// A grandchild that spins as soon as it is forked is counted: the group's counter holds at
/// least what the shell's process tree (its reaped child included) says it used.
#[test]
fn a_grandchild_forked_at_the_start_is_counted() {
    let Some(group) = counting_group() else {
        return;
    };
    let counter = group.cpu_source();
    let start = counter.read().unwrap();
    let mut shell = Shell::start(
        &group,
        "(i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done) & wait; echo spun; read x",
    );
    assert_eq!(shell.line().trim(), "spun");
    let tree = loadgen::account::CpuSource::Tree(shell.pid())
        .read()
        .unwrap()
        .total_ns;
    let counted = start.until(counter.read().unwrap()).total_ns;
    eprintln!("the group counted {counted} ns, the process tree {tree}");
    // The spin is a few hundred thousand turns of the shell's loop: far more than a tick.
    assert!(tree >= 30_000_000, "the spin used only {tree} ns");
    // Ticks of 10 ms: the tree's reading may be a tick short or long a process.
    assert!(
        counted as f64 >= tree as f64 - 2.0 * 10_000_000.0,
        "the group counted {counted} ns of the tree's {tree}"
    );
    drop(shell);
    drop(group);
}
