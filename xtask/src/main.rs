//! `cargo xtask`: the project's own tasks, run with `cargo xtask <task>` (an alias in
//! `.cargo/config.toml`). This file only parses the command line and dispatches.
//!
//! A run flows through four layers, each a folder: plan → run → record → report. They are
//! stacked the other way up, the tasks on top: every `use` points down the stack, and nothing
//! below reaches up (`tests/tidy.rs` checks it, and that no modules use each other in a
//! cycle):
//!
//! - the tasks: `bench` drives all four layers; `crash` and `micro` run tools of their own;
//! - `report`: showing a run; `report.md`, the figures and plots, `compare`, and the
//!   `report` task;
//! - `record`: keeping it; the run directory, `meta.json`, the summary and its statistics;
//! - `run`: carrying it out; processes, the load point, sampling, peers and outside clients;
//! - `plan`: what to run; the suites as data, the servers and their variants, the placement.
// Denied, not forbidden: one function allows it, the hook by which a child joins its cgroup
// between fork and exec (`run/cgroup/join.rs`).
#![deny(unsafe_code)]

mod bench;
mod crash;
mod micro;
mod plan;
mod record;
mod report;
mod run;

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
    #[command(after_help = bench::exit::HELP)]
    Bench(Box<bench::BenchArgs>),
    /// Show two result directories side by side, with ratios; with --fail-above, a gate for a
    /// runtime's CI (exit 1 when a point of B is worse than A's by more than PCT with 95%
    /// confidence, 3 when it could not judge a point).
    #[command(after_help = report::compare::help())]
    Compare(report::compare::CompareArgs),
    /// Put a server's command line through the wire checks of its protocols (echo, kv,
    /// http): what `--servers 'ext:NAME=COMMAND'` does before it measures an outside server.
    #[command(after_help = bench::conform::HELP)]
    Conform(bench::conform::ConformArgs),
    /// Kill -9 every chat server during a SAY flood, N times, and count acknowledged
    /// messages lost after the restart (must be 0) and torn tails cut.
    Crash(crash::CrashArgs),
    /// Run the criterion microbenchmarks with short settings and write micro.md: our
    /// figures beside the papers' cost tables.
    Micro(micro::MicroArgs),
    /// Draw the plots and write report.md, report.html and verdicts.csv/.json of a result
    /// directory again, from its summary.json and meta.json; or, with --index, write
    /// results/index.md, every run with its date, commit, suite, servers and headline.
    Report(report::ReportArgs),
    /// (Internal.) Unblock the stop signals the harness blocks, then become PROGRAM: how an
    /// outside server is started, so that SIGTERM stops it (`run::server`).
    #[command(name = run::server::UNBLOCKED, hide = true)]
    Unblocked {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        program: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Bench(args) => bench::run(*args),
        Task::Compare(args) => report::compare::run(&args),
        Task::Conform(args) => bench::conform::run(&args),
        Task::Crash(args) => crash::run(&args),
        Task::Micro(args) => micro::run(&args),
        Task::Report(args) => report::run(&args),
        Task::Unblocked { program } => run::server::exec_unblocked(&program),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<plan::Usage>().is_some() => {
            eprintln!("cargo xtask: {e:#}");
            ExitCode::from(2)
        }
        // Everything measured is written; some points have no figures. Said last.
        Err(e) if e.downcast_ref::<bench::exit::PointsFailed>().is_some() => {
            eprintln!("cargo xtask: {e}");
            ExitCode::FAILURE
        }
        // The gate of `compare --fail-above`: failed (1) or inconclusive (3), the points as
        // the last line.
        Err(e) if e.downcast_ref::<report::compare::GateEnd>().is_some() => {
            eprintln!("cargo xtask: {e}");
            ExitCode::from(
                e.downcast_ref::<report::compare::GateEnd>()
                    .map_or(1, |end| end.status),
            )
        }
        Err(e) if run::children::interrupted() => {
            eprintln!("cargo xtask: interrupted: {e:#}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("cargo xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
