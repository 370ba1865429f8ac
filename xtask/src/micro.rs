//! `cargo xtask micro [--out DIR]`: the microbenchmarks of `benches/` with short
//! settings, and `micro.md`, our figures beside the papers' cost tables. The work
//! is `benches`' own `micro-report` binary; this task only runs it from the
//! workspace root, so there is one place that knows how.
//!
//! It may call the plan layer (`project_root`).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;

use crate::plan::project_root;

#[derive(Debug, Args)]
pub(crate) struct MicroArgs {
    /// Where micro.md and micro.json go (default: results/<run-id>/).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub(crate) fn run(args: &MicroArgs) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(project_root()).args([
        "run",
        "--release",
        "-p",
        "benches",
        "--bin",
        "micro-report",
        "--",
    ]);
    if let Some(out) = &args.out {
        cmd.arg("--out").arg(out);
    }
    let status = cmd.status().context("running the benches' micro-report")?;
    if !status.success() {
        bail!("micro-report failed ({status})");
    }
    Ok(())
}
