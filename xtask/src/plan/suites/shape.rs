//! What a point changes in how its clients behave, beside what they send (its `Workload`):
//! how the open loop's sends are spaced ([`Arrivals`]), and the knobs of the workloads that
//! change the ranking (issue 62: [`Shape`]): connection churn, idle connections beside the
//! active ones, a mix of sizes, kv's key skew and its SET:GET mix.
//!
//! It may call nothing else of xtask.

use serde::Serialize;

/// How an open-loop point's sends are spaced (loadgen's `--arrivals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Arrivals {
    /// Evenly spaced, the connections taking turns.
    #[default]
    Uniform,
    /// Each connection a Poisson process: exponential gaps, bursts included.
    Poisson,
    /// Bursts: Poisson at twice the rate for 10 ms, then 10 ms of silence (loadgen's
    /// `onoff:10:10`), the average rate kept.
    #[value(name = "onoff")]
    #[serde(rename = "onoff")]
    OnOff,
    /// Generalized Pareto gaps of the rate's mean, of the shape of mutilate's `fb_ia`
    /// (Facebook's inter-arrival times): mostly short gaps, now and then a long one.
    Pareto,
}

/// The on and off periods of [`Arrivals::OnOff`], in milliseconds.
pub(crate) const ONOFF_MS: (u32, u32) = (10, 10);
/// The shape of [`Arrivals::Pareto`]: mutilate's `fb_ia`.
pub(crate) const PARETO_SHAPE: f64 = 0.154971;

impl Arrivals {
    /// As the report and `summary.csv` name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Arrivals::Uniform => "uniform",
            Arrivals::Poisson => "poisson",
            Arrivals::OnOff => "onoff",
            Arrivals::Pareto => "pareto",
        }
    }

    /// As loadgen's `--arrivals` takes it, its parameters included.
    pub(crate) fn loadgen_arg(self) -> String {
        match self {
            Arrivals::Uniform | Arrivals::Poisson => self.name().to_string(),
            Arrivals::OnOff => format!("onoff:{}:{}", ONOFF_MS.0, ONOFF_MS.1),
            Arrivals::Pareto => format!("pareto:{PARETO_SHAPE}"),
        }
    }
}

/// loadgen's knobs of issue 62 at a point; the default changes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Shape {
    /// Requests a connection carries before the client closes it and opens a fresh one
    /// (`--requests-per-conn`; redis-benchmark's `-k 0` where it is 1), or `None`: connections
    /// last the run.
    pub(crate) requests_per_conn: Option<u64>,
    /// Connections held open and silent beside the active ones (`--idle-conns`).
    pub(crate) idle_conns: usize,
    /// A mix of message sizes (echo's `--msg-size`) or value sizes (kv's `--value-size`), as
    /// loadgen takes it (`64:95,64K:5`), instead of the workload's one size.
    pub(crate) sizes: Option<&'static str>,
    /// Kv: how keys are drawn (`--key-dist`: `uniform`, `zipf:0.99`).
    pub(crate) key_dist: Option<&'static str>,
    /// Kv: the mix as memtier's `--ratio` gives it, SET:GET, instead of GET or SET only.
    pub(crate) ratio: Option<(u32, u32)>,
    /// Bursts: the load as this share of the server's capacity (0.9), each server's own where
    /// the run was given a capacity run (`--capacities`, `bench::shares`), else of `--rate`'s.
    pub(crate) capacity_share: Option<f64>,
}

impl Shape {
    /// Every connection the client holds: `active` and the idle ones beside.
    pub(crate) fn total_conns(&self, active: usize) -> usize {
        active + self.idle_conns
    }

    /// The mean of [`Shape::sizes`], where it is a mix loadgen reads.
    pub(crate) fn mean_size(&self) -> Option<f64> {
        self.sizes?.parse::<loadgen::Sizes>().ok().map(|s| s.mean())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_reach_loadgen_with_their_parameters() {
        let args: Vec<String> = [
            Arrivals::Uniform,
            Arrivals::Poisson,
            Arrivals::OnOff,
            Arrivals::Pareto,
        ]
        .iter()
        .map(|a| a.loadgen_arg())
        .collect();
        assert_eq!(
            args,
            ["uniform", "poisson", "onoff:10:10", "pareto:0.154971"]
        );
        // Each is one loadgen parses.
        for a in &args {
            assert!(a.parse::<loadgen::Arrivals>().is_ok(), "{a}");
        }
    }

    #[test]
    fn a_shape_counts_its_idle_connections_and_means_its_mix() {
        let s = Shape {
            idle_conns: 900,
            sizes: Some("64:95,64K:5"),
            ..Shape::default()
        };
        assert_eq!(s.total_conns(100), 1000);
        let mean = s.mean_size().unwrap();
        assert!(
            (mean - (0.95 * 64.0 + 0.05 * 65536.0)).abs() < 1e-6,
            "{mean}"
        );
        assert_eq!(Shape::default().mean_size(), None);
    }
}
