//! `cargo xtask bench --suite search`: the io_uring paper's file-content search (its
//! Figure 9) with every search program and ripgrep on one tree.
//!
//! The suite builds `search-threads`, `search-tokio`, `search-tokio-uring`, `search-monoio`,
//! `search-compio`, `search-glommio`, `search-smol`, `search-may`, `search-fiber` (cargo) and
//! `search-go` (go, when it is there), writes the generated corpus once under
//! `target/search-corpus/` (or takes `--tree DIR`), and runs every program `--repeat` times
//! (15, the paper's count) in rotation, A B C A B C, so that a drift of the machine spreads
//! over all of them. Warm by default, after one untimed pass of each program; `--cold` drops
//! the page cache before every run instead. Each run is timed by the harness from spawn to
//! exit (wall) and charged the CPU time the child used (user and system, from
//! `getrusage(RUSAGE_CHILDREN)` around it), so ripgrep and the programs are measured alike.
//!
//! Every run's counts are checked against ripgrep's (or, without ripgrep, against the
//! corpus manifest): a program whose counts ever differ is marked failed and left out of the
//! plot and the comparisons. `report::search` writes the table, the box plot and report.md;
//! `bench` runs the suite, from this file's parts.
//!
//! It may call the plan layer and the run layer's `children` and `cpus`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::resource::{UsageWho, getrusage};
use serde::{Deserialize, Serialize};

use crate::plan::Usage;
use crate::plan::placement::CpuList;
use crate::plan::servers::Inventory;
use crate::plan::suites::CorpusSize;
use crate::run::build::cargo;
use crate::run::children;
use crate::run::cpus;

/// The Rust programs, each a `[[bin]]` of its runtime's crate.
const RUST_PROGRAMS: [&str; 9] = [
    "search-threads",
    "search-tokio",
    "search-tokio-uring",
    "search-monoio",
    "search-compio",
    "search-glommio",
    "search-smol",
    "search-may",
    "search-fiber",
];
/// The Go peer, built from `peers/go/cmd/search-go` to `target/search-go`.
const GO_PROGRAM: &str = "search-go";
/// ripgrep's name in the results.
pub(crate) const RIPGREP: &str = "ripgrep";
/// A run longer than this is stuck (a full corpus takes seconds, cold ones tens).
const RUN_TIMEOUT: Duration = Duration::from_secs(900);

/// One timed run of one program.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Measure {
    pub(crate) program: String,
    /// 1-based round.
    pub(crate) round: usize,
    /// Spawn to exit, measured by the harness.
    pub(crate) wall_s: f64,
    pub(crate) user_s: f64,
    pub(crate) sys_s: f64,
    pub(crate) files_matched: u64,
    pub(crate) matches: u64,
    /// The programs' own counts (ripgrep reports none of these).
    pub(crate) files: Option<u64>,
    pub(crate) bytes: Option<u64>,
    pub(crate) errors: Option<u64>,
    /// Why this run does not count: a failed exit, or counts that differ from the reference.
    pub(crate) failure: Option<String>,
}

/// Everything a search run wrote, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SearchRun {
    pub(crate) tree: PathBuf,
    pub(crate) needle: String,
    pub(crate) cold: bool,
    pub(crate) cpus: String,
    pub(crate) workers: usize,
    pub(crate) repeat: usize,
    /// What the counts were checked against, and its counts `(files_matched, matches)`.
    pub(crate) reference: Option<(String, u64, u64)>,
    /// The corpus manifest, for a generated tree.
    pub(crate) manifest: Option<::search::corpus::Manifest>,
    /// Programs not run, and why.
    pub(crate) not_run: Vec<String>,
    pub(crate) measures: Vec<Measure>,
}

/// A program to run: its name and how to start it.
#[derive(Debug)]
pub(crate) struct Program {
    name: String,
    path: PathBuf,
}

impl Program {
    fn command(&self, run: &SearchRun) -> Command {
        if self.name == RIPGREP {
            return ::search::ripgrep::command(&run.needle, run.workers, &[&run.tree]);
        }
        let mut cmd = Command::new(&self.path);
        cmd.arg("--needle")
            .arg(&run.needle)
            .arg("--workers")
            .arg(run.workers.to_string())
            .arg("--cpus")
            .arg(&run.cpus)
            .arg(&run.tree);
        cmd
    }
}

/// Checks that the page cache can be dropped (root only); `bench` calls it first.
pub(crate) fn check_cold() -> Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .map(drop)
        .map_err(|e| {
            anyhow::Error::new(Usage(format!(
                "--cold drops the page cache through /proc/sys/vm/drop_caches, which this user \
                 cannot write ({e}): run as root, or without --cold"
            )))
        })
}

/// Writes back dirty pages, then drops the page cache, dentries and inodes.
pub(crate) fn drop_caches() -> Result<()> {
    nix::unistd::sync();
    fs::write("/proc/sys/vm/drop_caches", "3").context("writing 3 to /proc/sys/vm/drop_caches")
}

fn build(root: &Path, inv: &Inventory, profile: &str) -> Result<Option<String>> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root).args(["build", "--profile", profile]);
    for p in RUST_PROGRAMS {
        cmd.args(["--bin", p]);
    }
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build of the search programs failed ({status}); the output above says why");
    }
    let (Some(dir), Some(version)) = (&inv.go_dir, &inv.go_version) else {
        return Ok(Some(format!(
            "{GO_PROGRAM}: {}",
            inv.missing("srv-go")
                .unwrap_or_else(|| "go is not on PATH".into())
        )));
    };
    eprintln!("building {GO_PROGRAM} with {version}");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(go_path(inv))
        .arg("./cmd/search-go")
        .current_dir(dir)
        .status()
        .context("running go build")?;
    if !status.success() {
        bail!("go build of peers/go/cmd/search-go failed ({status}); the output above says why");
    }
    Ok(None)
}

fn go_path(inv: &Inventory) -> PathBuf {
    inv.target_dir.join(GO_PROGRAM)
}

/// Runs `cmd` on `cpus` to its end, timing it and charging it the CPU its process tree used.
fn measure(cmd: &mut Command, cpus: &CpuList) -> Result<(f64, f64, f64, std::process::Output)> {
    let before = getrusage(UsageWho::RUSAGE_CHILDREN).context("getrusage")?;
    let start = Instant::now();
    let mut child = cpus::spawn_on(cpus, || {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    })
    .with_context(|| format!("starting {cmd:?}"))?;
    // Output is read on threads so that a full pipe cannot stall the child; the wait is
    // bounded so that a stuck program cannot stall the suite.
    let mut out = child.stdout.take().context("stdout")?;
    let mut err = child.stderr.take().context("stderr")?;
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).map(|_| v)
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).map(|_| v)
    });
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for a search")? {
            break s;
        }
        if start.elapsed() > RUN_TIMEOUT || children::interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} did not finish within {RUN_TIMEOUT:?}; killed");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let wall = start.elapsed().as_secs_f64();
    let after = getrusage(UsageWho::RUSAGE_CHILDREN).context("getrusage")?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let user = secs(after.user_time()) - secs(before.user_time());
    let sys = secs(after.system_time()) - secs(before.system_time());
    let output = std::process::Output {
        status,
        stdout: out.join().map_err(|_| anyhow::anyhow!("stdout reader"))??,
        stderr: err.join().map_err(|_| anyhow::anyhow!("stderr reader"))??,
    };
    Ok((wall, user, sys, output))
}

/// One run, its counts read and checked.
pub(crate) fn run_once(
    p: &Program,
    run: &SearchRun,
    cpus: &CpuList,
    round: usize,
) -> Result<Measure> {
    let (wall_s, user_s, sys_s, out) = measure(&mut p.command(run), cpus)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut m = Measure {
        program: p.name.clone(),
        round,
        wall_s,
        user_s,
        sys_s,
        files_matched: 0,
        matches: 0,
        files: None,
        bytes: None,
        errors: None,
        failure: None,
    };
    if p.name == RIPGREP {
        // 1: nothing found; 2: some file could not be read, the counts of the rest stand.
        if !matches!(out.status.code(), Some(0..=2)) {
            m.failure = Some(format!("exit {}: {}", out.status, stderr.trim()));
            return Ok(m);
        }
        match ::search::ripgrep::parse(&out.stdout) {
            Ok(c) => (m.files_matched, m.matches) = (c.files_matched, c.matches),
            Err(e) => m.failure = Some(e.to_string()),
        }
    } else {
        if !out.status.success() {
            m.failure = Some(format!("exit {}: {}", out.status, stderr.trim()));
            return Ok(m);
        }
        match ::search::tally::Summary::from_stdout(&String::from_utf8_lossy(&out.stdout)) {
            Ok(s) => {
                (m.files_matched, m.matches) = (s.files_matched, s.matches);
                (m.files, m.bytes, m.errors) = (Some(s.files), Some(s.bytes), Some(s.errors));
            }
            Err(e) => m.failure = Some(format!("not a summary line: {e}")),
        }
    }
    if let (None, Some((what, files_matched, matches))) = (&m.failure, &run.reference)
        && (m.files_matched, m.matches) != (*files_matched, *matches)
    {
        m.failure = Some(format!(
            "counts differ: {} files matched, {} matches; {what}: {files_matched}, {matches}",
            m.files_matched, m.matches
        ));
    }
    Ok(m)
}

/// The programs to run: the Rust ones and search-go built (unless `no_build`) with
/// `profile`, and ripgrep where it is installed; with a line for each one that is not run.
pub(crate) fn programs(
    root: &Path,
    inv: &Inventory,
    profile: &str,
    no_build: bool,
) -> Result<(Vec<Program>, Vec<String>)> {
    let mut not_run = Vec::new();
    let go_missing = if no_build {
        None
    } else {
        build(root, inv, profile)?
    };
    let mut programs: Vec<Program> = RUST_PROGRAMS
        .iter()
        .map(|p| Program {
            name: (*p).to_owned(),
            path: inv.binary_path(p, profile),
        })
        .collect();
    match go_missing {
        Some(why) => not_run.push(why),
        None => programs.push(Program {
            name: GO_PROGRAM.to_owned(),
            path: go_path(inv),
        }),
    }
    programs.retain(|p| {
        let there = p.path.is_file();
        if !there {
            not_run.push(format!("{}: {} is not built", p.name, p.path.display()));
        }
        there
    });
    match ::search::ripgrep::version() {
        Ok(v) => {
            eprintln!("peer: {v}");
            programs.push(Program {
                name: RIPGREP.to_owned(),
                path: PathBuf::from("rg"),
            });
        }
        Err(why) => not_run.push(format!("{RIPGREP}: {why}")),
    }
    for n in &not_run {
        eprintln!("not running {n}");
    }
    Ok((programs, not_run))
}

/// The programs `--servers` names, each as its name (`search-fiber`, `ripgrep`) or without
/// the `search-` prefix (`fiber`); `None` (no `--servers`) for all. A name that is not a search
/// program is a usage error, found before anything is built.
pub(crate) fn wanted(names: Option<&str>) -> Result<Option<Vec<&'static str>>> {
    let Some(names) = names else {
        return Ok(None);
    };
    let known: Vec<&'static str> = RUST_PROGRAMS
        .iter()
        .copied()
        .chain([GO_PROGRAM, RIPGREP])
        .collect();
    let mut out = Vec::new();
    for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let full = known
            .iter()
            .find(|k| **k == n || k.strip_prefix("search-") == Some(n))
            .ok_or_else(|| {
                anyhow::Error::new(Usage(format!(
                    "--servers {n}: the search suite runs {} (named with or without \
                     `search-`, without runtime flags)",
                    known.join(", ")
                )))
            })?;
        if !out.contains(full) {
            out.push(*full);
        }
    }
    Ok(Some(out))
}

/// The programs among `programs` that `wanted` keeps.
pub(crate) fn keep(programs: Vec<Program>, wanted: Option<&[&str]>) -> Vec<Program> {
    programs
        .into_iter()
        .filter(|p| wanted.is_none_or(|w| w.contains(&p.name.as_str())))
        .collect()
}

/// The tree to search and the needle: `tree` as given, or the generated corpus of `size`
/// (written once under the target directory) with the needle it plants.
pub(crate) fn tree(
    tree: Option<&Path>,
    size: CorpusSize,
    needle: &str,
    inv: &Inventory,
) -> Result<(PathBuf, Option<::search::corpus::Manifest>, String)> {
    Ok(match tree {
        Some(t) => {
            if !t.is_dir() {
                return Err(anyhow::Error::new(Usage(format!(
                    "--tree {}: not a directory",
                    t.display()
                ))));
            }
            (t.to_path_buf(), None, needle.to_owned())
        }
        None => {
            let tree = inv.target_dir.join("search-corpus").join(size.name());
            eprintln!("corpus: {} (written once)", tree.display());
            let m = ::search::corpus::ensure(&tree, size.spec())
                .with_context(|| format!("writing the corpus at {}", tree.display()))?;
            if needle != m.needle {
                eprintln!(
                    "the generated corpus plants {:?}; searching for it",
                    m.needle
                );
            }
            let needle = m.needle.clone();
            (tree, Some(m), needle)
        }
    })
}

/// Runs every program `run.repeat` times in rotation on `cpus`, into `run.measures`: first
/// ripgrep once for the reference counts, then (warm) one untimed pass of each.
pub(crate) fn measure_all(run: &mut SearchRun, programs: &[Program], cpus: &CpuList) -> Result<()> {
    let repeat = run.repeat;
    // ripgrep is the reference where it runs: its counts of the first pass.
    if let Some(rg) = programs.iter().find(|p| p.name == RIPGREP) {
        if run.cold {
            drop_caches()?;
        }
        let first = run_once(
            rg,
            &SearchRun {
                reference: None,
                ..run.clone()
            },
            cpus,
            0,
        )?;
        if let Some(f) = &first.failure {
            bail!("ripgrep failed on {}: {f}", run.tree.display());
        }
        if let Some((_, fm, m)) = &run.reference
            && (first.files_matched, first.matches) != (*fm, *m)
        {
            bail!(
                "ripgrep counts {} files matched and {} matches, the corpus manifest {fm} \
                 and {m}: the corpus or ripgrep is not what this suite expects",
                first.files_matched,
                first.matches
            );
        }
        run.reference = Some(("ripgrep".to_owned(), first.files_matched, first.matches));
    }
    // Warm: one untimed pass of every program, so that every run finds the tree cached.
    if !run.cold {
        for p in programs {
            eprintln!("warm-up pass: {}", p.name);
            run_once(p, run, cpus, 0)?;
        }
    }
    let total = repeat * programs.len();
    for round in 1..=repeat {
        for p in programs {
            if children::interrupted() {
                bail!("interrupted");
            }
            if run.cold {
                drop_caches()?;
            }
            let m = run_once(p, run, cpus, round)?;
            eprintln!(
                "[{:>3}/{total}] {:<20} round {round:>2}: {:.3} s wall, {:.3} s user, {:.3} s sys{}",
                run.measures.len() + 1,
                p.name,
                m.wall_s,
                m.user_s,
                m.sys_s,
                m.failure
                    .as_deref()
                    .map(|f| format!("  FAILED: {f}"))
                    .unwrap_or_default()
            );
            run.measures.push(m);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_name_search_programs_with_or_without_their_prefix() {
        assert_eq!(wanted(None).unwrap(), None);
        assert_eq!(
            wanted(Some("fiber,search-threads,ripgrep,fiber")).unwrap(),
            Some(vec!["search-fiber", "search-threads", "ripgrep"])
        );
        let e = wanted(Some("fiber,reactor")).unwrap_err().to_string();
        assert!(e.contains("--servers reactor"), "{e}");
        assert!(e.contains("search-go"), "{e}");
        let e = wanted(Some("fiber+completer")).unwrap_err().to_string();
        assert!(e.contains("without runtime flags"), "{e}");
        let programs = || {
            ["search-fiber", "search-threads", RIPGREP].map(|n| Program {
                name: n.to_owned(),
                path: PathBuf::from(n),
            })
        };
        let kept = keep(programs().into(), Some(&["search-threads"]));
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].name, "search-threads");
        assert_eq!(keep(programs().into(), None).len(), 3);
    }
}
