//! What the capacity suite found, per server and workload: `capacity.csv` (for people and
//! scripts) and `capacity.json` (what the report reads back), and the ranking the report leads
//! with, each server's capacity as a multiple of its workload's reference server's, with an
//! interval from the confirmation repeats of both.
//!
//! It may call the plan layer's `capacity` and the record layer's `stats`.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::record::stats;

/// One server's capacity at one workload: a line of `capacity.csv`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Capacity {
    pub(crate) server: String,
    /// `echo`, `kv` or `http`.
    pub(crate) workload: String,
    /// The latency objective, `p99=5ms`.
    pub(crate) objective: String,
    /// `capacity` (found and confirmed), `client-bound` (at least `capacity_per_sec`: the
    /// client bounded a probe above it), `below` (not even the least rate met the objective),
    /// `above` (the highest rate tried met it), `unconfirmed` (the repeats kept missing), or
    /// `failed` (the server did not run).
    pub(crate) result: String,
    /// The highest offered rate that met the objective (confirmed when `result` is
    /// `capacity`), per second.
    pub(crate) capacity_per_sec: Option<f64>,
    /// The rate the server achieved over the confirmation repeats: their median and
    /// distribution-free interval (`ci_level` its coverage: 75% for 3 repeats).
    pub(crate) achieved_per_sec: Option<f64>,
    pub(crate) achieved_ci_low: Option<f64>,
    pub(crate) achieved_ci_high: Option<f64>,
    pub(crate) ci_level: Option<f64>,
    /// Confirmation repeats at the rate found.
    pub(crate) repeats: usize,
    /// Probes the search made in all.
    pub(crate) probes: usize,
    /// The server's CPU quota, in CPUs (`--server-cpu-quota`).
    pub(crate) cpu_quota: Option<f64>,
    /// How the sends were spaced.
    pub(crate) arrivals: String,
    /// The workload's reference server, and this capacity as a multiple of its, with the
    /// interval of the two achieved intervals' ratio.
    pub(crate) reference: String,
    pub(crate) vs_reference: Option<f64>,
    pub(crate) vs_reference_low: Option<f64>,
    pub(crate) vs_reference_high: Option<f64>,
    /// Why the server has no capacity, when it did not run.
    pub(crate) failure: Option<String>,
}

impl Capacity {
    /// Sets the median and interval of the achieved rates of the confirmation repeats.
    pub(crate) fn set_achieved(&mut self, achieved: &[f64]) {
        self.repeats = achieved.len();
        self.achieved_per_sec = stats::median(achieved);
        match stats::median_interval(achieved) {
            Some(i) => {
                self.achieved_ci_low = Some(i.low);
                self.achieved_ci_high = Some(i.high);
                self.ci_level = Some(i.level);
            }
            None => {
                self.achieved_ci_low = self.achieved_per_sec;
                self.achieved_ci_high = self.achieved_per_sec;
            }
        }
    }

    /// Whether the figure is the server's (confirmed), not a bound the client set.
    pub(crate) fn is_the_servers(&self) -> bool {
        self.result == "capacity"
    }
}

/// Sets each line's multiple of its workload's reference server (the reference's own line is
/// 1), and orders them: workload after workload, the highest capacity first.
pub(crate) fn rank(lines: &mut [Capacity]) {
    let refs: Vec<Capacity> = lines
        .iter()
        .filter(|c| c.server == c.reference && c.is_the_servers())
        .cloned()
        .collect();
    for c in lines.iter_mut() {
        let Some(r) = refs.iter().find(|r| r.workload == c.workload) else {
            continue;
        };
        let (Some(mine), Some(theirs)) = (c.capacity_per_sec, r.capacity_per_sec) else {
            continue;
        };
        let ratio = mine / theirs;
        c.vs_reference = Some(ratio);
        // The widest ratio the two achieved intervals allow, widened to hold the ratio of the
        // capacities themselves (the rates offered, where the achieved ones scatter about).
        if let (Some(lo), Some(hi), Some(rl), Some(rh)) = (
            c.achieved_ci_low,
            c.achieved_ci_high,
            r.achieved_ci_low,
            r.achieved_ci_high,
        ) && rl > 0.0
            && rh > 0.0
        {
            c.vs_reference_low = Some((lo / rh).min(ratio));
            c.vs_reference_high = Some((hi / rl).max(ratio));
        }
    }
    lines.sort_by(|a, b| {
        workload_order(&a.workload)
            .cmp(&workload_order(&b.workload))
            .then(
                b.capacity_per_sec
                    .unwrap_or(-1.0)
                    .total_cmp(&a.capacity_per_sec.unwrap_or(-1.0)),
            )
            .then(a.server.cmp(&b.server))
    });
}

fn workload_order(w: &str) -> usize {
    ["echo", "kv", "http"]
        .iter()
        .position(|x| *x == w)
        .unwrap_or(3)
}

/// The columns of `capacity.csv`, in order.
const COLUMNS: &[&str] = &[
    "server",
    "workload",
    "objective",
    "result",
    "capacity_per_sec",
    "achieved_per_sec",
    "achieved_ci_low",
    "achieved_ci_high",
    "ci_level",
    "repeats",
    "probes",
    "cpu_quota",
    "arrivals",
    "reference",
    "vs_reference",
    "vs_reference_low",
    "vs_reference_high",
    "failure",
];

/// Writes `capacity.csv` and `capacity.json` into the run directory.
pub(crate) fn write(dir: &Path, lines: &[Capacity]) -> Result<()> {
    let mut csv = COLUMNS.join(",");
    csv.push('\n');
    for c in lines {
        let v = serde_json::to_value(c)?;
        let fields: Vec<String> = COLUMNS
            .iter()
            .map(|k| crate::record::row::csv_field(&v[*k]))
            .collect();
        csv.push_str(&fields.join(","));
        csv.push('\n');
    }
    crate::record::run_dir::write_whole(&dir.join("capacity.csv"), csv.as_bytes())?;
    crate::record::run_dir::write_json(dir, "capacity.json", &lines)
}

/// The lines `write` left in `dir`; none when the run has no capacity suite.
pub(crate) fn read(dir: &Path) -> Result<Vec<Capacity>> {
    let path = dir.join("capacity.json");
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(server: &str, rate: f64, achieved: &[f64]) -> Capacity {
        let mut c = Capacity {
            server: server.into(),
            workload: "echo".into(),
            result: "capacity".into(),
            reference: "floor-epoll".into(),
            capacity_per_sec: Some(rate),
            ..Capacity::default()
        };
        c.set_achieved(achieved);
        c
    }

    #[test]
    fn capacities_are_ranked_as_multiples_of_the_reference() {
        let mut lines = vec![
            line("tokio", 20_000.0, &[19_900.0, 20_000.0, 20_100.0]),
            line("floor-epoll", 40_000.0, &[39_000.0, 40_000.0, 41_000.0]),
            line("threads", 10_000.0, &[9_000.0, 10_000.0, 11_000.0]),
        ];
        rank(&mut lines);
        let order: Vec<&str> = lines.iter().map(|c| c.server.as_str()).collect();
        assert_eq!(order, ["floor-epoll", "tokio", "threads"]);
        assert_eq!(lines[0].vs_reference, Some(1.0));
        assert_eq!(lines[1].vs_reference, Some(0.5));
        let (lo, hi) = (
            lines[2].vs_reference_low.unwrap(),
            lines[2].vs_reference_high.unwrap(),
        );
        assert!(
            (lo - 9_000.0 / 41_000.0).abs() < 1e-12 && (hi - 11_000.0 / 39_000.0).abs() < 1e-12
        );
        assert_eq!(lines[0].repeats, 3);
    }

    #[test]
    fn without_a_confirmed_reference_there_is_no_multiple() {
        let mut r = line("floor-epoll", 5_000.0, &[5_000.0]);
        r.result = "client-bound".into();
        let mut lines = vec![r, line("tokio", 4_000.0, &[4_000.0])];
        rank(&mut lines);
        assert!(lines.iter().all(|c| c.vs_reference.is_none()));
    }

    #[test]
    fn what_is_written_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = vec![line("tokio", 20_000.0, &[19_900.0, 20_100.0])];
        rank(&mut lines);
        write(dir.path(), &lines).unwrap();
        assert_eq!(read(dir.path()).unwrap(), lines);
        let csv = std::fs::read_to_string(dir.path().join("capacity.csv")).unwrap();
        let mut rows = csv.lines();
        assert_eq!(rows.next().unwrap().split(',').count(), COLUMNS.len());
        assert!(rows.next().unwrap().starts_with("tokio,echo,"));
        assert!(read(&dir.path().join("none")).unwrap().is_empty());
    }
}
