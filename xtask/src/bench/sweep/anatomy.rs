//! The anatomy pass (`--counters pass`, the default): one more round of every point after
//! the measured ones, each server's start counted by `run::counters`, whose counts per
//! request go into the measured rows while its own CPU is not used. The counters' system-call
//! tracepoints send every system call of the machine, loadgen's too, down the kernel's slow
//! path: with them on, CPU per echo read 1.34-1.51x here (docs/METHOD.md), too much to
//! count in the rounds whose CPU the verdicts judge.
//!
//! It may call what `sweep` may.

use std::path::Path;

use anyhow::Result;
use clap::ValueEnum;
use serde::Serialize;

use super::{Inventory, Plan, Sweep, schedule};
use crate::plan::order::PointOrder;
use crate::record::row::Row;
use crate::run::cgroup::Accounting;

/// When the counters count (`--counters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Counters {
    /// In one more round after the measured ones, whose CPU is not used.
    Pass,
    /// In every round; the CPU figures carry their cost.
    On,
    /// Not at all.
    Off,
}

/// Runs every point once more, counted, into `out/anatomy/`, and gives each measured row the
/// counts of its server at its point there.
pub(super) fn pass(
    plan: &Plan,
    inv: &Inventory,
    out: &Path,
    accounting: &Accounting,
    orders: &[PointOrder],
    rows: &mut [Row],
) -> Result<()> {
    let counting = accounting.clone().with_counters(true);
    if let Some(why) = counting.cannot_count() {
        eprintln!("the anatomy of a request: no round of its own, nothing can be counted ({why})");
        for r in rows.iter_mut() {
            r.counted.counters_unavailable = Some(why.clone());
        }
        return Ok(());
    }
    let dir = out.join("anatomy");
    std::fs::create_dir_all(&dir)?;
    let first: Vec<PointOrder> = orders
        .iter()
        .map(|o| PointOrder {
            rounds: o.rounds.iter().take(1).cloned().collect(),
            ..o.clone()
        })
        .collect();
    let runs = schedule(&first, &plan.servers);
    eprintln!(
        "the anatomy of a request: one more round, counted (its CPU is not used: the counters \
         slow every system call)"
    );
    let mut sweep = Sweep::new(plan, inv, &dir, &counting, &runs)?;
    sweep.run_all(&runs)?;
    merge(rows, &sweep.finish());
    Ok(())
}

/// Each row of `rows` takes the counts of the `counted` row of its suite, server and point,
/// marked as counted apart; a row the pass has no row for keeps what it has.
fn merge(rows: &mut [Row], counted: &[Row]) {
    for r in rows.iter_mut() {
        if let Some(c) = counted
            .iter()
            .find(|c| c.suite == r.suite && c.server == r.server && c.point == r.point)
        {
            r.counted = c.counted.clone();
            r.counted.counted_apart = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    #[test]
    fn each_row_takes_the_counts_of_its_server_at_its_point_marked_apart() {
        let mut rows = vec![
            row("fiber", "c1", 1.0, 100.0),
            row("tokio", "c1", 1.0, 90.0),
        ];
        rows[1].counted.counters_unavailable = Some("not counted: --counters pass".into());
        let mut fiber = row("fiber", "c1", 1.0, 80.0);
        fiber.counted.syscalls_per_req = Some(2.0);
        let mut elsewhere = row("tokio", "c1000", 1000.0, 80.0);
        elsewhere.counted.syscalls_per_req = Some(9.0);
        merge(&mut rows, &[fiber, elsewhere]);
        assert_eq!(rows[0].counted.syscalls_per_req, Some(2.0));
        assert!(rows[0].counted.counted_apart);
        // Its CPU and throughput stay the measured rounds'.
        assert_eq!(rows[0].throughput_per_sec, Some(100.0));
        // No row of its point in the pass: what it had.
        assert_eq!(rows[1].counted.syscalls_per_req, None);
        assert!(!rows[1].counted.counted_apart);
        assert!(rows[1].counted.counters_unavailable.is_some());
    }
}
