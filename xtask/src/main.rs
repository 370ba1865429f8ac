//! `cargo xtask`: the project's own tasks, run with `cargo xtask <task>` (an alias in
//! `.cargo/config.toml`). This file only parses the command line and dispatches; each task is
//! a module (`bench`, `compare`, `crash`, `micro`, `report`; `bench --suite search` hands over to `search_suite`), and what they share (servers, suites, /proc sampling,
//! statistics, the summary, plots, the report's Markdown) lives in modules of its own.
#![forbid(unsafe_code)]

mod bench;
mod cells;
mod cgroup;
mod children;
mod compare;
mod cpus;
mod crash;
mod figures;
mod loadgen_cli;
mod markdown;
mod meta;
mod micro;
mod plots;
mod procfs;
mod redis;
mod report;
mod runner;
mod search_report;
mod search_suite;
mod servers;
mod stats;
mod suites;
mod summary;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The project's tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Build every server and loadgen in release mode, run a benchmark suite, and write
    /// results/<run-id>/ (summary, histograms, plots, report.md).
    Bench(Box<bench::BenchArgs>),
    /// Show two result directories side by side, with ratios.
    Compare(compare::CompareArgs),
    /// Kill -9 every chat server during a SAY flood, N times, and count acknowledged
    /// messages lost after the restart (must be 0) and torn tails cut.
    Crash(crash::CrashArgs),
    /// Run the criterion microbenchmarks with short settings and write micro.md: our
    /// figures beside the papers' cost tables.
    Micro(micro::MicroArgs),
    /// Draw the plots and write report.md of a result directory again, from its
    /// summary.json and meta.json.
    Report(report::ReportArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Bench(args) => bench::run(*args),
        Task::Compare(args) => compare::run(&args),
        Task::Crash(args) => crash::run(&args),
        Task::Micro(args) => micro::run(&args),
        Task::Report(args) => report::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<Usage>().is_some() => {
            eprintln!("cargo xtask: {e:#}");
            ExitCode::from(2)
        }
        Err(e) if children::interrupted() => {
            eprintln!("cargo xtask: interrupted: {e:#}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("cargo xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A request this machine cannot carry out as asked (like a CPU quota where cgroups are not
/// writable): the task exits with status 2, as for a bad command line.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The workspace root: every path the tasks read or write starts here, whatever the current
/// directory is.
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
