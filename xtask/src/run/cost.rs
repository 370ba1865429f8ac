//! The server's cost over a point's measured window: its CPU (mean, per request, the user and
//! system split) from the counter read at the window's edges ([`WindowCpu`]: the server's
//! cgroup, or its process tree), and from the 500 ms samples of its process tree the CPU's
//! coefficient of variation, context switches, memory per connection (the kernel's thread
//! stacks and socket memory beside the process tree's own), what else ran on its CPUs, and
//! the time the hypervisor stole. Where no edge reading was made (an old loadgen), the CPU is
//! interpolated from the samples, and the cost says so (`cpu_exact`).
//!
//! It may call the run layer's `procfs` (the samples), `series` (the arithmetic) and
//! `counters` (what the kernel counted, kept beside the CPU).

use loadgen::account::{CpuSource, CpuStates, CpuTime};
use serde::{Deserialize, Serialize};

use crate::run::procfs::Sample;
use crate::run::series;

/// The server's CPU over the measured window, read at its edges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct WindowCpu {
    /// What it was read from: `cgroup v2`, `cgroup v1` or `process tree`.
    pub(crate) accounting: String,
    pub(crate) cpu_s: f64,
    pub(crate) user_s: f64,
    pub(crate) sys_s: f64,
    /// What the server's CPUs did over the window (`/proc/stat`), where read.
    pub(crate) cpus: Option<loadgen::account::CpuStates>,
}

/// One reading of the server's side at an edge of its window, where the harness reads it (client
/// hosts, outside clients; a local loadgen reads its own): its CPU counter and its CPUs' states.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EdgeReading {
    cpu: Option<CpuTime>,
    states: Option<CpuStates>,
}

impl EdgeReading {
    /// `counter` and the states of `cpus`, now.
    pub(crate) fn read(counter: &CpuSource, cpus: &[usize]) -> EdgeReading {
        EdgeReading {
            cpu: counter.read().ok(),
            states: CpuStates::read(cpus).ok(),
        }
    }

    /// What the server used between this reading and `later`, where both read its counter.
    pub(crate) fn until(self, later: EdgeReading, counter: &CpuSource) -> Option<WindowCpu> {
        let t = self.cpu?.until(later.cpu?);
        Some(WindowCpu {
            accounting: counter.accounting().into(),
            cpu_s: t.total_ns as f64 / 1e9,
            user_s: t.user_ns as f64 / 1e9,
            sys_s: t.system_ns as f64 / 1e9,
            cpus: self.states.zip(later.states).map(|(a, b)| a.until(b)),
        })
    }
}

/// The server's cost over the measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ServerCost {
    /// What the CPU figures come from: `cgroup v2`, `cgroup v1`, `process tree` (read at the
    /// window's edges), or `samples` (interpolated from the 500 ms samples of the live
    /// threads, which loses what exited threads and reaped processes used).
    #[serde(default)]
    pub(crate) cpu_accounting: Option<String>,
    /// Softirq and hard-interrupt time on the server's CPUs over the window, percent of one
    /// CPU (`/proc/stat` ticks). On loopback it is mostly the peer's receive path run on the
    /// server's CPU; on a kernel without IRQ time accounting the tick is also charged to the
    /// task it interrupted, so this overlaps the server's own CPU rather than adding to it.
    #[serde(default)]
    pub(crate) irq_softirq_pct: Option<f64>,
    /// Mean CPU over the window, percent of one CPU (as top shows it).
    pub(crate) cpu_mean_pct: Option<f64>,
    /// Coefficient of variation of the 500 ms CPU samples in the window.
    pub(crate) cpu_cv: Option<f64>,
    pub(crate) user_us_per_req: Option<f64>,
    pub(crate) sys_us_per_req: Option<f64>,
    pub(crate) cpu_us_per_req: Option<f64>,
    pub(crate) vol_cs_per_req: Option<f64>,
    pub(crate) invol_cs_per_req: Option<f64>,
    pub(crate) vol_cs_per_sec: Option<f64>,
    pub(crate) invol_cs_per_sec: Option<f64>,
    /// The largest memory (PSS over the tree) seen during the point.
    pub(crate) peak_mem_bytes: u64,
    /// (peak memory in the window - memory before the first connection) / connections.
    pub(crate) mem_per_conn_bytes: Option<f64>,
    pub(crate) max_procs: usize,
    pub(crate) max_threads: usize,
    /// What else kept the server's CPUs busy over the window, percent of one CPU: their whole
    /// load less the server's own CPU. Above a few percent, something disturbed the point.
    pub(crate) other_load_pct: Option<f64>,
    /// Time stolen by the hypervisor from the watched CPUs, percent of the window.
    pub(crate) steal_pct: Option<f64>,
    /// Growth of the kernel's thread stacks per connection (system-wide `KernelStack`).
    pub(crate) kernel_stack_per_conn_bytes: Option<f64>,
    /// Growth of TCP socket memory per connection (system-wide `sockstat`).
    pub(crate) socket_mem_per_conn_bytes: Option<f64>,
    /// CPU percent per sample interval, time relative to the window start (warmup shows as
    /// negative times).
    pub(crate) cpu_series: Vec<(f64, f64)>,
    /// What the kernel counted for the server over the window, per request (`run::counters`):
    /// system calls, context switches, faults, ...; `None` in a run from before them.
    #[serde(default)]
    pub(crate) counted: Option<crate::run::counters::Counted>,
}

/// The server's cost from its samples: `baseline` is before any connection, the window is
/// `[start, end]` in epoch seconds, and `per_sec` is loadgen's throughput over it.
pub(crate) fn server_cost(
    baseline: &Sample,
    samples: &[Sample],
    (start, end): (f64, f64),
    per_sec: f64,
    conns: usize,
    edges: Option<&WindowCpu>,
) -> ServerCost {
    let series = |f: fn(&Sample) -> f64| -> Vec<(f64, f64)> {
        samples.iter().map(|s| (s.t, f(s))).collect()
    };
    let cpu = series(|s| s.cpu_s);
    let vol = series(|s| s.vol_cs as f64);
    let free = series(|s| s.cpus_free_s);
    let watched = samples.iter().map(|s| s.cpus_watched).max().unwrap_or(0);
    let invol = series(|s| s.invol_cs as f64);
    let window = (end - start).max(0.0);
    let rates = series::interval_rates(&cpu, start, end);
    let pcts: Vec<f64> = rates.iter().map(|r| r.1 * 100.0).collect();
    let grow = |s: &[(f64, f64)]| series::growth(s, start, end);
    let per_req_us =
        |s: &[(f64, f64)]| grow(s).and_then(|g| series::us_per_request(g, per_sec, window));
    let cpu_us_per_req = per_req_us(&cpu);
    let user_share = user_share(baseline, samples, (start, end));
    let per_req = |s: &[(f64, f64)]| grow(s).and_then(|g| series::per_request(g, per_sec, window));
    let per_sec_of = |s: &[(f64, f64)]| grow(s).filter(|_| window > 0.0).map(|g| g / window);
    let in_window = || {
        samples
            .iter()
            .filter(|s| s.t >= start - 0.6 && s.t <= end + 0.6)
    };
    let window_peak = in_window().map(|s| s.mem_bytes).max();
    // The kernel's share, system-wide: what grew from before the first connection to the
    // window's peak, per connection.
    let kernel_per_conn = |f: fn(&Sample) -> u64| {
        in_window()
            .map(f)
            .max()
            .filter(|_| conns > 0)
            .map(|p| (p as f64 - f(baseline) as f64) / conns as f64)
    };
    let steal = series(|s| s.cpus_steal_s);
    let mut cost = ServerCost {
        cpu_accounting: Some("samples".into()),
        irq_softirq_pct: None,
        cpu_mean_pct: per_sec_of(&cpu).map(|c| c * 100.0),
        cpu_cv: series::coefficient_of_variation(&pcts),
        user_us_per_req: cpu_us_per_req.zip(user_share).map(|(c, u)| c * u),
        sys_us_per_req: cpu_us_per_req.zip(user_share).map(|(c, u)| c * (1.0 - u)),
        cpu_us_per_req,
        vol_cs_per_req: per_req(&vol),
        invol_cs_per_req: per_req(&invol),
        vol_cs_per_sec: per_sec_of(&vol),
        invol_cs_per_sec: per_sec_of(&invol),
        peak_mem_bytes: samples
            .iter()
            .chain([baseline])
            .map(|s| s.mem_bytes)
            .max()
            .unwrap_or(0),
        mem_per_conn_bytes: window_peak
            .filter(|_| conns > 0)
            .map(|p| (p as f64 - baseline.mem_bytes as f64) / conns as f64),
        // The CPUs' busy time (what the wall clock leaves of their free time) less the
        // server's. /proc/stat counts in 10 ms ticks: small negatives are rounding.
        other_load_pct: per_sec_of(&free)
            .zip(per_sec_of(&cpu))
            .filter(|_| watched > 0)
            .map(|(f, c)| ((watched as f64 - f - c) * 100.0).max(0.0)),
        steal_pct: per_sec_of(&steal)
            .filter(|_| watched > 0)
            .map(|s| s * 100.0 / watched as f64),
        kernel_stack_per_conn_bytes: kernel_per_conn(|s| s.kernel_stack_bytes),
        socket_mem_per_conn_bytes: kernel_per_conn(|s| s.socket_mem_bytes),
        max_procs: samples.iter().map(|s| s.procs).max().unwrap_or(0),
        max_threads: samples.iter().map(|s| s.threads).max().unwrap_or(0),
        // Warmup and window; the teardown after the window (connections closing, processes
        // exiting) is not the load being measured.
        cpu_series: series::interval_rates(&cpu, f64::MIN, end + 0.3)
            .into_iter()
            .map(|(t, r)| (t - start, r * 100.0))
            .collect(),
        counted: None,
    };
    if let Some(w) = edges {
        at_the_edges(&mut cost, w, window, per_sec);
    }
    cost
}

/// The CPU figures of `cost` from the reading at the window's edges, which counts every task
/// that ran in it, in place of the samples' interpolation.
fn at_the_edges(cost: &mut ServerCost, w: &WindowCpu, window: f64, per_sec: f64) {
    let per_req = |secs: f64| series::us_per_request(secs, per_sec, window);
    cost.cpu_accounting = Some(w.accounting.clone());
    cost.cpu_us_per_req = per_req(w.cpu_s);
    let split = w.user_s + w.sys_s;
    // The split's own precision (v1's ticks) may not add up to the total: shares of it.
    cost.user_us_per_req = cost
        .cpu_us_per_req
        .filter(|_| split > 0.0)
        .map(|c| c * w.user_s / split);
    cost.sys_us_per_req = cost
        .cpu_us_per_req
        .filter(|_| split > 0.0)
        .map(|c| c * w.sys_s / split);
    if window > 0.0 {
        cost.cpu_mean_pct = Some(w.cpu_s / window * 100.0);
    }
    if let Some(c) = w.cpus.filter(|c| c.cpus > 0 && c.total_ns > 0) {
        // The CPUs' own clock for the window: what /proc/stat counted over it.
        let span_s = c.total_ns as f64 / 1e9 / c.cpus as f64;
        cost.irq_softirq_pct = Some((c.irq_ns + c.softirq_ns) as f64 / 1e9 / span_s * 100.0);
        // Other load is what the CPUs did besides the server and besides the interrupts:
        // on loopback the softirq is mostly the benchmark's own traffic (the peer's receive
        // path runs on the sender's CPU), so a server that sends more packets would otherwise
        // read its own work as a disturbance and escape its verdicts. With IRQ time
        // accounting the cgroup's counter leaves that time out; without it, the ticks that
        // land in an interrupt are in the task's time too, and this only reads lower.
        let busy_s = c.busy_ns.saturating_sub(c.irq_ns + c.softirq_ns) as f64 / 1e9;
        cost.other_load_pct = Some(((busy_s - w.cpu_s) / span_s * 100.0).max(0.0));
        cost.steal_pct = Some(c.steal_ns as f64 / c.total_ns as f64 * 100.0);
    }
}

/// The tick counters reliably charge only what they have had time to sample; below this many
/// seconds of ticks the user/system split is left unknown.
const MIN_TICKS_S: f64 = 0.2;

/// The user share of CPU time, from the tick counters: over the window when they moved enough
/// there, else over the whole point (connection processes are charged when they exit).
fn user_share(baseline: &Sample, samples: &[Sample], (start, end): (f64, f64)) -> Option<f64> {
    let user: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.user_ticks_s)).collect();
    let sys: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.sys_ticks_s)).collect();
    let share = |u: f64, s: f64| (u + s >= MIN_TICKS_S).then(|| u / (u + s));
    let in_window = series::growth(&user, start, end)
        .zip(series::growth(&sys, start, end))
        .and_then(|(u, s)| share(u, s));
    in_window.or_else(|| {
        let last = samples.last()?;
        share(
            last.user_ticks_s - baseline.user_ticks_s,
            last.sys_ticks_s - baseline.sys_ticks_s,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, cpu: f64, vol: u64, mem: u64) -> Sample {
        Sample {
            t,
            cpu_s: cpu,
            user_ticks_s: cpu * 0.25,
            sys_ticks_s: cpu * 0.75,
            vol_cs: vol,
            invol_cs: vol / 10,
            mem_bytes: mem,
            // The CPU is free for what the server and 10% more of its load leave.
            cpus_free_s: t - cpu * 1.1,
            cpus_watched: 1,
            cpus_steal_s: t * 0.03,
            kernel_stack_bytes: 1_000_000 + (cpu * 16384.0) as u64,
            socket_mem_bytes: 0,
            procs: 1,
            threads: 3,
            cq_backlog: None,
        }
    }

    #[test]
    fn cost_over_the_window() {
        let base = sample(99.0, 0.0, 0, 1_000_000);
        // Half a CPU from 100 s to 102 s, then a full CPU to 104 s; window 101..103.
        let samples: Vec<Sample> = [
            (100.0, 0.0),
            (100.5, 0.25),
            (101.0, 0.5),
            (101.5, 0.75),
            (102.0, 1.0),
            (102.5, 1.5),
            (103.0, 2.0),
            (103.5, 2.5),
        ]
        .iter()
        .map(|&(t, c)| sample(t, c, (c * 1000.0) as u64, 1_000_000 + (c * 1e6) as u64))
        .collect();
        let c = server_cost(&base, &samples, (101.0, 103.0), 1000.0, 500, None);
        assert_eq!(c.cpu_accounting.as_deref(), Some("samples"));
        // 1.5 CPU-seconds over 2 s: 75%; 2000 requests: 750 µs each, a quarter of it user.
        assert!((c.cpu_mean_pct.unwrap() - 75.0).abs() < 1e-6);
        assert!((c.cpu_us_per_req.unwrap() - 750.0).abs() < 1e-6);
        assert!((c.user_us_per_req.unwrap() - 187.5).abs() < 1e-6);
        assert!((c.sys_us_per_req.unwrap() - 562.5).abs() < 1e-6);
        assert!((c.vol_cs_per_req.unwrap() - 0.75).abs() < 1e-6);
        // Samples of 50, 50, 100, 100 %.
        let cv = crate::run::series::coefficient_of_variation(&[50.0, 50.0, 100.0, 100.0]).unwrap();
        assert!((c.cpu_cv.unwrap() - cv).abs() < 1e-9);
        assert_eq!(c.peak_mem_bytes, 3_500_000);
        // The CPUs were 10% busier than the server: 7.5% of a CPU over the window.
        assert!((c.other_load_pct.unwrap() - 7.5).abs() < 1e-6);
        // Peak in the window (2 CPU-s at 103 s) less the baseline, over 500 connections.
        assert!((c.mem_per_conn_bytes.unwrap() - 2_500_000.0 / 500.0).abs() < 1e-6 * 5000.0);
        assert_eq!(c.cpu_series.len(), 6);
        // 3% of the CPU stolen; kernel stacks grew as memory did (2.5 "CPU-s" at 16 KiB).
        assert!((c.steal_pct.unwrap() - 3.0).abs() < 1e-6);
        assert!((c.kernel_stack_per_conn_bytes.unwrap() - 2.5 * 16384.0 / 500.0).abs() < 1e-6);
        assert_eq!(c.socket_mem_per_conn_bytes, Some(0.0));
        assert!((c.cpu_series[0].0 - (100.25 - 101.0)).abs() < 1e-9);
    }

    #[test]
    fn nothing_done_has_no_per_request_cost() {
        let base = sample(0.0, 0.0, 0, 0);
        let c = server_cost(&base, &[sample(1.0, 0.1, 1, 0)], (0.0, 1.0), 0.0, 1, None);
        assert_eq!(c.cpu_us_per_req, None);
        assert_eq!(c.cpu_cv, None);
    }

    #[test]
    fn the_edges_reading_replaces_the_interpolation() {
        let base = sample(99.0, 0.0, 0, 1_000_000);
        let samples: Vec<Sample> = (0..8)
            .map(|i| sample(100.0 + f64::from(i) * 0.5, f64::from(i) * 0.1, 0, 1_000_000))
            .collect();
        // 2 s window, 1000 requests a second: 2000 requests; 1.2 CPU-s read at the edges,
        // a third of it user; the CPU was busy 1.5 s of 2 s, 0.1 s of it in softirq.
        let states = loadgen::account::CpuStates {
            busy_ns: 1_500_000_000,
            irq_ns: 0,
            softirq_ns: 100_000_000,
            steal_ns: 20_000_000,
            total_ns: 2_000_000_000,
            cpus: 1,
        };
        let w = WindowCpu {
            accounting: "cgroup v1".into(),
            cpu_s: 1.2,
            user_s: 0.3,
            sys_s: 0.6,
            cpus: Some(states),
        };
        let c = server_cost(&base, &samples, (101.0, 103.0), 1000.0, 500, Some(&w));
        assert_eq!(c.cpu_accounting.as_deref(), Some("cgroup v1"));
        assert!((c.cpu_us_per_req.unwrap() - 600.0).abs() < 1e-9);
        assert!((c.user_us_per_req.unwrap() - 200.0).abs() < 1e-9);
        assert!((c.sys_us_per_req.unwrap() - 400.0).abs() < 1e-9);
        assert!((c.cpu_mean_pct.unwrap() - 60.0).abs() < 1e-9);
        assert!((c.irq_softirq_pct.unwrap() - 5.0).abs() < 1e-9);
        // Busy 1.5 s less the softirq's 0.1 s less the server's 1.2 s, over 2 s: the
        // server's own softirq is not other load.
        assert!((c.other_load_pct.unwrap() - 10.0).abs() < 1e-9);
        assert!((c.steal_pct.unwrap() - 1.0).abs() < 1e-9);
    }
}
