//! The record layer: what a run keeps on disk. It owns the run directory (`run_dir`),
//! `meta.json` (`meta`), the summary of each point over its repeats (`summary`:
//! `summary.csv` and `summary.json`, written as each point ends), each repeat's value by
//! its round (`rounds`, for the verdicts' model) and the statistics it takes (`stats`: medians and
//! their intervals; `verdict`: which servers differ from a column's reference, on Student's t
//! of `student`; `method` tests them on synthetic runs), and the capacity suite's findings
//! ranked against each workload's reference server (`capacity`: `capacity.csv`), and what
//! the workloads of issue 62 count (`workloads`: churn, idle connections, sizes, skew).
//!
//! It may call the plan and run layers (to read what was planned and measured), never the
//! report layer.

pub(crate) mod capacity;
pub(crate) mod counted;
pub(crate) mod meta;
#[cfg(test)]
mod method;
pub(crate) mod rounds;
pub(crate) mod row;
pub(crate) mod run_dir;
pub(crate) mod stats;
pub(crate) mod student;
pub(crate) mod summary;
pub(crate) mod verdict;
pub(crate) mod workloads;
