//! What the capacity suite found, per server and workload: `capacity.csv` (for people and
//! scripts) and `capacity.json` (what the report reads back), and the ranking the report leads
//! with, each server's capacity as a multiple of its workload's reference server's, with an
//! interval from the repeated searches of both. A result that is only a bound (`client-bound`,
//! `above`, `below`, `unconfirmed`) keeps its kind beside its multiple, so that no table shows
//! it as a plain one.
//!
//! It may call the plan layer's `capacity` and the record layer's `stats`.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::plan::capacity::Found;
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
    /// `capacity` (every search found and confirmed one), or what the searches that did not
    /// find one found: `client-bound` (at least `capacity_per_sec`: the client could not keep
    /// its schedule above it), `unconfirmed` (the confirmations kept missing), `below` (not
    /// even the least rate met the objective), `above` (the highest rate tried met it); or
    /// `failed` (the server did not run).
    pub(crate) result: String,
    /// With `capacity`, the median of the searches' capacities, per second; otherwise the
    /// bound (the least of the searches' rates, the greatest for `below`).
    pub(crate) capacity_per_sec: Option<f64>,
    /// The distribution-free interval of that median over the searches (`ci_level` its
    /// coverage: [min, max] and 75% for 3 searches, 50% for 2): where the capacity lands
    /// when it is measured again, not the spread of one search's probes.
    pub(crate) capacity_ci_low: Option<f64>,
    pub(crate) capacity_ci_high: Option<f64>,
    pub(crate) ci_level: Option<f64>,
    /// The searches run (`--repeat`), and the rate each found, in order.
    pub(crate) searches: usize,
    pub(crate) capacities: Vec<f64>,
    /// Probes the searches made in all.
    pub(crate) probes: usize,
    /// The server's CPU quota, in CPUs (`--server-cpu-quota`).
    pub(crate) cpu_quota: Option<f64>,
    /// How the sends were spaced.
    pub(crate) arrivals: String,
    /// The workload's reference server, and this capacity (or bound) as a multiple of its
    /// capacity, with the widest ratio of the two intervals (capacities only).
    pub(crate) reference: String,
    pub(crate) vs_reference: Option<f64>,
    pub(crate) vs_reference_low: Option<f64>,
    pub(crate) vs_reference_high: Option<f64>,
    /// Why the server has no capacity, when it did not run.
    pub(crate) failure: Option<String>,
}

impl Capacity {
    /// Sets what the searches found: with a capacity from every one, their median and its
    /// interval; otherwise the bound that the searches without one set (a client-bound one
    /// first, then an unconfirmed, a below and an above one), at its most cautious rate.
    pub(crate) fn set_findings(&mut self, found: &[Found]) {
        let rates: Vec<f64> = found.iter().map(|f| f.rate()).collect();
        self.searches = found.len();
        self.capacities = rates.clone();
        let rank = |f: &Found| match f {
            Found::ClientBound { .. } => 0,
            Found::Unconfirmed { .. } => 1,
            Found::Below { .. } => 2,
            Found::Above { .. } => 3,
            Found::Capacity { .. } => 4,
        };
        let Some(worst) = found.iter().min_by_key(|f| rank(f)) else {
            return;
        };
        self.result = worst.name().to_string();
        if let Found::Capacity { .. } = worst {
            self.capacity_per_sec = stats::median(&rates);
            let i = stats::median_interval(&rates);
            self.capacity_ci_low = i.map_or(self.capacity_per_sec, |i| Some(i.low));
            self.capacity_ci_high = i.map_or(self.capacity_per_sec, |i| Some(i.high));
            self.ci_level = i.map(|i| i.level);
        } else if let Found::Below { .. } = worst {
            self.capacity_per_sec = rates.iter().copied().reduce(f64::max);
        } else {
            self.capacity_per_sec = rates.iter().copied().reduce(f64::min);
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
        (c.vs_reference, c.vs_reference_low, c.vs_reference_high) = (None, None, None);
        let Some(r) = refs.iter().find(|r| r.workload == c.workload) else {
            continue;
        };
        let (Some(mine), Some(theirs)) = (c.capacity_per_sec, r.capacity_per_sec) else {
            continue;
        };
        let ratio = mine / theirs;
        c.vs_reference = Some(ratio);
        // A bound's multiple is a bound too (its kind in `result`): no interval.
        if !c.is_the_servers() {
            continue;
        }
        // The widest ratio the two intervals allow, widened to hold the ratio of the medians.
        // One search has no interval: nor has its multiple.
        if c.searches < 2 || r.searches < 2 {
            continue;
        }
        if let (Some(lo), Some(hi), Some(rl), Some(rh)) = (
            c.capacity_ci_low,
            c.capacity_ci_high,
            r.capacity_ci_low,
            r.capacity_ci_high,
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
    ["echo", "churn", "kv", "http"]
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
    "capacity_ci_low",
    "capacity_ci_high",
    "ci_level",
    "searches",
    "capacities",
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
            .map(|k| match &v[*k] {
                // The searches' capacities, one field: `52000;51000;53040`.
                serde_json::Value::Array(a) => a
                    .iter()
                    .map(|x| x.as_f64().map_or(String::new(), |f| format!("{f:.0}")))
                    .collect::<Vec<_>>()
                    .join(";"),
                x => crate::record::row::csv_field(x),
            })
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
    let mut lines: Vec<Capacity> =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    // Ranked again, so that a run reads by today's rules (a multiple's interval).
    rank(&mut lines);
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(server: &str, capacities: &[f64]) -> Capacity {
        let mut c = Capacity {
            server: server.into(),
            workload: "echo".into(),
            reference: "floor-epoll".into(),
            ..Capacity::default()
        };
        let found: Vec<Found> = capacities
            .iter()
            .map(|&rate| Found::Capacity { rate })
            .collect();
        c.set_findings(&found);
        c
    }

    #[test]
    fn capacities_are_ranked_as_multiples_of_the_reference() {
        let mut lines = vec![
            line("tokio", &[19_900.0, 20_000.0, 20_100.0]),
            line("floor-epoll", &[39_000.0, 40_000.0, 41_000.0]),
            line("threads", &[9_000.0, 10_000.0, 11_000.0]),
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
        assert_eq!(lines[0].searches, 3);
        assert_eq!(lines[0].ci_level, Some(0.75));
    }

    #[test]
    fn the_capacity_and_its_interval_come_from_the_searches() {
        let c = line("tokio", &[52_000.0, 48_000.0, 50_960.0]);
        assert_eq!(c.result, "capacity");
        assert_eq!(c.capacity_per_sec, Some(50_960.0));
        assert_eq!(
            (c.capacity_ci_low, c.capacity_ci_high),
            (Some(48_000.0), Some(52_000.0))
        );
        // One search: no interval to speak of, the capacity its own bounds.
        let one = line("tokio", &[50_000.0]);
        assert_eq!(one.capacity_ci_low, Some(50_000.0));
        assert_eq!(one.ci_level, None);
    }

    #[test]
    fn a_search_without_a_capacity_makes_the_line_a_bound() {
        let mut c = line("tokio", &[]);
        c.set_findings(&[
            Found::Capacity { rate: 50_000.0 },
            Found::ClientBound { rate: 40_000.0 },
            Found::Unconfirmed { rate: 45_000.0 },
        ]);
        assert_eq!(c.result, "client-bound");
        assert_eq!(c.capacity_per_sec, Some(40_000.0));
        assert_eq!(c.capacity_ci_low, None);
        assert_eq!(c.capacities, [50_000.0, 40_000.0, 45_000.0]);
        c.set_findings(&[Found::Below { rate: 10.0 }, Found::Below { rate: 20.0 }]);
        assert_eq!(
            (c.result.as_str(), c.capacity_per_sec),
            ("below", Some(20.0))
        );
        // A bound's multiple has no interval: it is not the server's capacity.
        let mut lines = vec![line("floor-epoll", &[40_000.0, 40_000.0]), c.clone()];
        lines[1].set_findings(&[Found::ClientBound { rate: 60_000.0 }]);
        rank(&mut lines);
        let bound = lines.iter().find(|l| l.server == "tokio").unwrap();
        assert_eq!(bound.vs_reference, Some(1.5));
        assert_eq!(bound.vs_reference_low, None);
    }

    #[test]
    fn without_a_confirmed_reference_there_is_no_multiple() {
        let mut r = line("floor-epoll", &[5_000.0]);
        r.result = "client-bound".into();
        let mut lines = vec![r, line("tokio", &[4_000.0])];
        rank(&mut lines);
        assert!(lines.iter().all(|c| c.vs_reference.is_none()));
    }

    #[test]
    fn what_is_written_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = vec![line("tokio", &[19_900.0, 20_100.0])];
        rank(&mut lines);
        write(dir.path(), &lines).unwrap();
        assert_eq!(read(dir.path()).unwrap(), lines);
        let csv = std::fs::read_to_string(dir.path().join("capacity.csv")).unwrap();
        let mut rows = csv.lines();
        assert_eq!(rows.next().unwrap().split(',').count(), COLUMNS.len());
        let row = rows.next().unwrap();
        assert!(row.starts_with("tokio,echo,"), "{row}");
        assert!(row.contains(",19900;20100,"), "{row}");
        assert_eq!(row.split(',').count(), COLUMNS.len(), "{row}");
        assert!(read(&dir.path().join("none")).unwrap().is_empty());
    }
}
