//! The anatomy columns of a summary row: what the kernel counted for the server per request
//! (`run::counters`), each the median over the repeats with its interval like every other
//! figure, the system calls by name (the median of each over the repeats that counted them),
//! and why what was not counted was not.
//!
//! It may call the record layer's `stats` and the run layer's `outcome` and `counters`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::stats;
use crate::run::outcome::Measured;

/// The per-request counts of a row (flattened into it: `syscalls_per_req`, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Counted {
    pub(crate) syscalls_per_req: Option<f64>,
    pub(crate) syscalls_per_req_ci_low: Option<f64>,
    pub(crate) syscalls_per_req_ci_high: Option<f64>,
    /// Context switches of every kind, then those of a task going to sleep (voluntary, as
    /// `/proc/PID/status` counts them) and the rest (involuntary: preempted, or yielding).
    pub(crate) context_switches_per_req: Option<f64>,
    pub(crate) context_switches_per_req_ci_low: Option<f64>,
    pub(crate) context_switches_per_req_ci_high: Option<f64>,
    pub(crate) voluntary_switches_per_req: Option<f64>,
    pub(crate) voluntary_switches_per_req_ci_low: Option<f64>,
    pub(crate) voluntary_switches_per_req_ci_high: Option<f64>,
    pub(crate) involuntary_switches_per_req: Option<f64>,
    pub(crate) involuntary_switches_per_req_ci_low: Option<f64>,
    pub(crate) involuntary_switches_per_req_ci_high: Option<f64>,
    pub(crate) migrations_per_req: Option<f64>,
    pub(crate) migrations_per_req_ci_low: Option<f64>,
    pub(crate) migrations_per_req_ci_high: Option<f64>,
    pub(crate) page_faults_per_req: Option<f64>,
    pub(crate) page_faults_per_req_ci_low: Option<f64>,
    pub(crate) page_faults_per_req_ci_high: Option<f64>,
    pub(crate) instructions_per_req: Option<f64>,
    pub(crate) instructions_per_req_ci_low: Option<f64>,
    pub(crate) instructions_per_req_ci_high: Option<f64>,
    pub(crate) cycles_per_req: Option<f64>,
    pub(crate) cycles_per_req_ci_low: Option<f64>,
    pub(crate) cycles_per_req_ci_high: Option<f64>,
    pub(crate) llc_misses_per_req: Option<f64>,
    pub(crate) llc_misses_per_req_ci_low: Option<f64>,
    pub(crate) llc_misses_per_req_ci_high: Option<f64>,
    pub(crate) dtlb_misses_per_req: Option<f64>,
    pub(crate) dtlb_misses_per_req_ci_low: Option<f64>,
    pub(crate) dtlb_misses_per_req_ci_high: Option<f64>,
    /// Instructions per cycle (the medians' ratio).
    pub(crate) ipc: Option<f64>,
    /// The system calls by name per request, the dearest first: `read 1.00, write 1.00, ...`.
    pub(crate) syscalls_by_name: Option<String>,
    /// The same, structured (summary.json only).
    pub(crate) syscalls_by_name_per_req: BTreeMap<String, f64>,
    /// What was not counted and why: `instructions, cycles: not available here: ...`.
    pub(crate) counters_unavailable: Option<String>,
    /// Counted in a round of its own after the measured ones (`--counters pass`), whose CPU
    /// the row does not use.
    pub(crate) counted_apart: bool,
}

/// The events of [`Counted`], as `run::counters` names them.
pub(crate) const KEYS: [&str; 10] = [
    "syscalls",
    "context_switches",
    "voluntary_switches",
    "involuntary_switches",
    "migrations",
    "page_faults",
    "instructions",
    "cycles",
    "llc_misses",
    "dtlb_misses",
];

impl Counted {
    /// The median, low and high of `key` (one of [`KEYS`]).
    fn slots(&mut self, key: &str) -> [&mut Option<f64>; 3] {
        match key {
            "syscalls" => [
                &mut self.syscalls_per_req,
                &mut self.syscalls_per_req_ci_low,
                &mut self.syscalls_per_req_ci_high,
            ],
            "context_switches" => [
                &mut self.context_switches_per_req,
                &mut self.context_switches_per_req_ci_low,
                &mut self.context_switches_per_req_ci_high,
            ],
            "voluntary_switches" => [
                &mut self.voluntary_switches_per_req,
                &mut self.voluntary_switches_per_req_ci_low,
                &mut self.voluntary_switches_per_req_ci_high,
            ],
            "involuntary_switches" => [
                &mut self.involuntary_switches_per_req,
                &mut self.involuntary_switches_per_req_ci_low,
                &mut self.involuntary_switches_per_req_ci_high,
            ],
            "migrations" => [
                &mut self.migrations_per_req,
                &mut self.migrations_per_req_ci_low,
                &mut self.migrations_per_req_ci_high,
            ],
            "page_faults" => [
                &mut self.page_faults_per_req,
                &mut self.page_faults_per_req_ci_low,
                &mut self.page_faults_per_req_ci_high,
            ],
            "instructions" => [
                &mut self.instructions_per_req,
                &mut self.instructions_per_req_ci_low,
                &mut self.instructions_per_req_ci_high,
            ],
            "cycles" => [
                &mut self.cycles_per_req,
                &mut self.cycles_per_req_ci_low,
                &mut self.cycles_per_req_ci_high,
            ],
            "llc_misses" => [
                &mut self.llc_misses_per_req,
                &mut self.llc_misses_per_req_ci_low,
                &mut self.llc_misses_per_req_ci_high,
            ],
            _ => [
                &mut self.dtlb_misses_per_req,
                &mut self.dtlb_misses_per_req_ci_low,
                &mut self.dtlb_misses_per_req_ci_high,
            ],
        }
    }

    /// The median of `key` (one of [`KEYS`]) per request.
    pub(crate) fn per_req(&self, key: &str) -> Option<f64> {
        match key {
            "syscalls" => self.syscalls_per_req,
            "context_switches" => self.context_switches_per_req,
            "voluntary_switches" => self.voluntary_switches_per_req,
            "involuntary_switches" => self.involuntary_switches_per_req,
            "migrations" => self.migrations_per_req,
            "page_faults" => self.page_faults_per_req,
            "instructions" => self.instructions_per_req,
            "cycles" => self.cycles_per_req,
            "llc_misses" => self.llc_misses_per_req,
            "dtlb_misses" => self.dtlb_misses_per_req,
            _ => None,
        }
    }
}

/// The anatomy of a row from its repeats: each count's median and interval (each repeat's
/// value also into `per_repeat` as `<key>_per_req`), the calls by name, the reasons.
pub(crate) fn aggregate(ok: &[&Measured], per_repeat: &mut BTreeMap<String, Vec<f64>>) -> Counted {
    let mut out = Counted::default();
    let counted: Vec<&crate::run::counters::Counted> =
        ok.iter().filter_map(|m| m.cost.counted.as_ref()).collect();
    for key in KEYS {
        let v: Vec<f64> = counted
            .iter()
            .filter_map(|c| c.totals.get(key).copied())
            .collect();
        let interval = stats::median_interval(&v);
        let [median, low, high] = out.slots(key);
        *median = stats::median(&v);
        *low = interval.map(|i| i.low);
        *high = interval.map(|i| i.high);
        if !v.is_empty() {
            per_repeat.insert(format!("{key}_per_req"), v);
        }
    }
    out.ipc = out
        .instructions_per_req
        .zip(out.cycles_per_req)
        .filter(|(_, c)| *c > 0.0)
        .map(|(i, c)| i / c);
    let mut names: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for c in &counted {
        for (name, v) in &c.syscalls {
            names.entry(name.clone()).or_default().push(*v);
        }
    }
    out.syscalls_by_name_per_req = names
        .into_iter()
        .filter_map(|(k, v)| Some((k, stats::median(&v)?)))
        .collect();
    out.syscalls_by_name = by_name(&out.syscalls_by_name_per_req, 0.005);
    out.counters_unavailable = unavailable(&counted);
    out
}

/// The calls of `per_req` of at least `least` per request, the most frequent first (`other`
/// last), two decimals: `read 1.00, write 1.00, epoll_wait 0.21, other 0.02`.
pub(crate) fn by_name(per_req: &BTreeMap<String, f64>, least: f64) -> Option<String> {
    let mut calls: Vec<(&String, f64)> = per_req
        .iter()
        .filter(|(k, v)| **v >= least && *k != "other")
        .map(|(k, v)| (k, *v))
        .collect();
    calls.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let mut parts: Vec<String> = calls.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
    if let Some(o) = per_req.get("other").filter(|o| **o >= least) {
        parts.push(format!("other {o:.2}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Why what was not counted was not, the events of one reason together, from the first repeat
/// that says.
fn unavailable(counted: &[&crate::run::counters::Counted]) -> Option<String> {
    let first = counted.iter().find(|c| !c.unavailable.is_empty())?;
    let mut by_reason: BTreeMap<&String, Vec<&str>> = BTreeMap::new();
    for (k, why) in &first.unavailable {
        by_reason.entry(why).or_default().push(k);
    }
    let parts: Vec<String> = by_reason
        .into_iter()
        .map(|(why, keys)| format!("{}: {why}", keys.join(", ")))
        .collect();
    Some(parts.join("; "))
}
