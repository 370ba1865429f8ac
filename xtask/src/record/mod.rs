//! The record layer: what a run keeps on disk. It owns the run directory (`run_dir`),
//! `meta.json` (`meta`), the summary of each point over its repeats (`summary`:
//! `summary.csv` and `summary.json`, written as each point ends) and the statistics it
//! takes (`stats`).
//!
//! It may call the plan and run layers (to read what was planned and measured), never the
//! report layer.

pub(crate) mod meta;
pub(crate) mod row;
pub(crate) mod run_dir;
pub(crate) mod stats;
pub(crate) mod summary;
