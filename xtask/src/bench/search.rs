//! `cargo xtask bench --suite search`, which runs alone, from its `SearchPlan`: the programs
//! found and built and the tree chosen (`run::search`), the run directory made (`record`),
//! every program timed in rotation (`run::search`), then `meta.json`, `search.json` and the
//! report (`report::search`).
//!
//! It may call every layer.

use std::path::Path;

use anyhow::{Result, bail};

use super::plan::SearchPlan;
use crate::plan::placement;
use crate::plan::servers::Inventory;
use crate::record::meta::{self, Meta};
use crate::record::run_dir;
use crate::report;
use crate::report::stdout;
use crate::run::children;
use crate::run::search::{self, SearchRun};

/// Runs the search suite (`bench::run` hands over to it).
pub(super) fn run(plan: &SearchPlan, root: &Path, inv: &Inventory) -> Result<()> {
    children::install_interrupt_handler()?;
    placement::check_allowed(&plan.cpus, "--server-cpus")?;
    let profile = plan.profile.as_str();
    let wanted = search::wanted(plan.programs.as_deref())?;
    let (programs, not_run) = search::programs(root, inv, profile, plan.no_build)?;
    let programs = search::keep(programs, wanted.as_deref());
    if programs.is_empty() {
        bail!(
            "none of the programs --servers names can run here: {}",
            not_run.join("; ")
        );
    }
    let (tree, manifest, needle) =
        search::tree(plan.tree.as_deref(), plan.corpus, &plan.needle, inv)?;

    let mut meta = Meta::collect(root, inv.go_version.clone());
    let out = run_dir::path(plan.out.as_deref(), root, &meta.run_id);
    run_dir::create(&out)?;
    let cpus = plan.cpus.clone();
    let mut run = SearchRun {
        tree: tree.canonicalize().unwrap_or(tree),
        needle,
        cold: plan.cold,
        cpus: cpus.to_string(),
        workers: plan.workers,
        repeat: plan.repeat,
        reference: manifest
            .as_ref()
            .map(|m| ("the corpus manifest".to_owned(), m.files_matched, m.matches)),
        manifest,
        not_run,
        measures: Vec::new(),
    };
    meta.settings = serde_json::json!({
        "suites": ["search"],
        "tree": run.tree,
        "needle": run.needle,
        "cold": run.cold,
        "cpus": run.cpus,
        "workers": run.workers,
        "repeat": run.repeat,
        "reference": plan.reference,
        "cargo_profile": profile,
    });
    search::measure_all(&mut run, &programs, &cpus)?;
    meta.finished = Some(meta::iso8601(std::time::SystemTime::now()));
    run_dir::write_meta(&out, &meta)?;
    run_dir::write_json(&out, "search.json", &run)?;
    let table = report::search::write(&out, &run, &meta)?;
    stdout::line(&table);
    eprintln!("results in {}", out.display());
    // A program that failed in any round is a failed point.
    let mut failed: Vec<&str> = run
        .measures
        .iter()
        .filter(|m| m.failure.is_some())
        .map(|m| m.program.as_str())
        .collect();
    failed.sort_unstable();
    failed.dedup();
    if failed.is_empty() {
        return Ok(());
    }
    Err(anyhow::Error::new(super::exit::PointsFailed {
        failed: failed.len(),
        of: programs.len(),
        refused: Vec::new(),
        report: out.join("report.md"),
        section: "the table's last column",
    }))
}
