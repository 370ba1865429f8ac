//! `micro-report`: runs every benchmark of this package with short criterion settings and
//! writes `<out>/micro.md` (our figures beside the papers') and `<out>/micro.json` (the
//! same data for tools). `cargo xtask micro [--out DIR]` is this binary.
//!
//! ```text
//! cargo run --release -p benches --bin micro-report -- [--out DIR] [--warm-up-time S]
//!     [--measurement-time S] [--memory-count N] [--raw DIR [--no-run]]
//! ```

#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use benches::memory::{self, Sample};
use benches::report::{self, Meta, Report};
use clap::Parser;

/// Run the microbenchmarks and write micro.md beside the papers' figures.
#[derive(Debug, Parser)]
#[command(name = "micro-report")]
struct Args {
    /// Directory for micro.md and micro.json [default: results/<run-id> in the workspace]
    #[arg(long)]
    out: Option<PathBuf>,
    /// Criterion's warm-up time per benchmark, in seconds.
    #[arg(long, default_value_t = 1.0)]
    warm_up_time: f64,
    /// Criterion's measurement time per benchmark, in seconds.
    #[arg(long, default_value_t = 2.0)]
    measurement_time: f64,
    /// Units of each kind parked for the memory measurement.
    #[arg(long, default_value_t = memory::DEFAULT_COUNT)]
    memory_count: u64,
    /// Keep criterion's raw output and the memory samples here [default: a temporary
    /// directory, removed afterwards]
    #[arg(long)]
    raw: Option<PathBuf>,
    /// Do not run the benchmarks: write the report from what an earlier run left in --raw.
    #[arg(long, requires = "raw")]
    no_run: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(args.warm_up_time > 0.0 && args.measurement_time > 0.0) {
        bail!("--warm-up-time and --measurement-time must be positive numbers of seconds");
    }
    let root = workspace_root();
    let commit = commit(&root);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_secs();
    let run_id = report::run_id(now, &commit);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| root.join("results").join(&run_id));

    let temp;
    let raw = match &args.raw {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::tempdir().context("creating a temporary directory")?;
            temp.path().to_owned()
        }
    };
    let criterion_dir = raw.join("criterion");
    let memory_file = raw.join("memory.jsonl");
    let bench_args = [
        "--warm-up-time".to_owned(),
        args.warm_up_time.to_string(),
        "--measurement-time".to_owned(),
        args.measurement_time.to_string(),
        "--noplot".to_owned(),
    ];
    let command = format!(
        "CRITERION_HOME=<raw>/criterion cargo bench -p benches --benches -- {}",
        bench_args.join(" ")
    );
    if !args.no_run {
        run_benches(
            &root,
            &criterion_dir,
            &memory_file,
            &bench_args,
            args.memory_count,
        )?;
    }

    let estimates = report::load_estimates(&criterion_dir)
        .with_context(|| format!("reading criterion's results in {}", criterion_dir.display()))?;
    if estimates.is_empty() {
        bail!("no criterion results in {}", criterion_dir.display());
    }
    let memory = read_samples(&memory_file)?;
    let report = Report {
        meta: Meta {
            run_id,
            commit,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            rustc: tool_version("rustc"),
            mitigations: mitigations(),
            warm_up_s: args.warm_up_time,
            measurement_s: args.measurement_time,
            memory_count: memory.first().map_or(args.memory_count, |s| s.count),
            command,
        },
        estimates,
        memory,
    };

    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let md = out.join("micro.md");
    std::fs::write(&md, report.markdown()).with_context(|| format!("writing {}", md.display()))?;
    let json = out.join("micro.json");
    let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
    std::fs::write(&json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    println!("{}", md.display());
    Ok(())
}

/// Runs `cargo bench` on this package with criterion's output in `criterion_dir` and the
/// memory samples appended to `memory_file` (both cleared first).
fn run_benches(
    root: &Path,
    criterion_dir: &Path,
    memory_file: &Path,
    bench_args: &[String],
    memory_count: u64,
) -> Result<()> {
    if criterion_dir.exists() {
        std::fs::remove_dir_all(criterion_dir)
            .with_context(|| format!("clearing {}", criterion_dir.display()))?;
    }
    if memory_file.exists() {
        std::fs::remove_file(memory_file)
            .with_context(|| format!("clearing {}", memory_file.display()))?;
    }
    std::fs::create_dir_all(criterion_dir)
        .with_context(|| format!("creating {}", criterion_dir.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(root)
        .args(["bench", "-p", "benches", "--benches", "--"])
        .args(bench_args)
        .env("CRITERION_HOME", criterion_dir)
        .env(memory::OUT_ENV, memory_file)
        .env(memory::COUNT_ENV, memory_count.to_string())
        .status()
        .with_context(|| format!("running {} bench", cargo.to_string_lossy()))?;
    if !status.success() {
        bail!("cargo bench failed ({status}); its output above says which benchmark");
    }
    Ok(())
}

fn read_samples(path: &Path) -> Result<Vec<Sample>> {
    if !path.exists() {
        // The memory target was filtered out or failed; the report says what is missing.
        return Ok(Vec::new());
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .with_context(|| format!("{}: bad sample line {line:?}", path.display()))
        })
        .collect()
}

/// The workspace root: this package's parent directory.
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_owned()
}

/// The short commit, with `-dirty` when tracked files have changes.
fn commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(hash) = git(&["rev-parse", "--short=7", "HEAD"]) else {
        return "unknown".to_owned();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{hash}-dirty"),
        _ => hash,
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, v)| v.trim().to_owned())
            })
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn tool_version(tool: &str) -> String {
    Command::new(tool)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || format!("{tool} unknown"),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        )
}

/// `name: status` for each CPU vulnerability the kernel does not call "Not affected".
fn mitigations() -> Vec<String> {
    let dir = Path::new("/sys/devices/system/cpu/vulnerabilities");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let status = std::fs::read_to_string(e.path()).ok()?;
            let status = status.trim();
            (status != "Not affected")
                .then(|| format!("{}: {status}", e.file_name().to_string_lossy()))
        })
        .collect();
    found.sort();
    found
}
