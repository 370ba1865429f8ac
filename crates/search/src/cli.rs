//! The command line every search program shares, and pinning a worker to its CPU.

use std::path::PathBuf;

use clap::Parser;

use crate::matcher::Matcher;

/// `search-X --needle STR [--workers N] [--cpus LIST] [--chunk BYTES] DIR...`
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Counts a byte string in every regular file under DIR..., walking concurrently",
    long_about = "Counts the non-overlapping occurrences of a byte string in every regular \
        file under DIR..., walking the tree concurrently and reading each file in --chunk \
        byte reads. Symbolic links are not followed; FIFOs, sockets and devices are skipped; \
        hidden files are searched. Prints one JSON line: {\"files\", \"bytes\", \
        \"files_matched\", \"matches\", \"errors\", \"seconds\"}. An unreadable file or \
        directory is named on stderr and counted in errors; a missing DIR is exit status 2."
)]
pub struct Args {
    /// The byte string to count (not empty).
    #[arg(long, value_name = "STR")]
    pub needle: String,

    /// Worker threads [default: one per --cpus entry, else one per available CPU].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub workers: Option<u32>,

    /// CPUs to pin the workers to, one each in turn (`0,1` or `0-3`).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<CpuList>,

    /// Bytes per read.
    #[arg(long, value_name = "BYTES", default_value_t = 4096,
          value_parser = clap::value_parser!(u32).range(1..=(64 << 20)))]
    pub chunk: u32,

    /// Directories (or files) to search.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

/// A command line checked against the machine: the needle prepared, every root there.
#[derive(Debug, Clone)]
pub struct Config {
    /// The prepared needle.
    pub matcher: Matcher,
    /// Worker threads, at least 1.
    pub workers: usize,
    /// CPUs to pin worker `i` to (`cpus[i % len]`); empty: not pinned.
    pub cpus: Vec<usize>,
    /// Bytes per read, at least 1.
    pub chunk: usize,
    /// The roots, in the order given.
    pub roots: Vec<PathBuf>,
}

/// Why a command line cannot run.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// `--needle ""`.
    #[error("--needle must not be empty")]
    EmptyNeedle,
    /// A root that cannot be looked at.
    #[error("{}: {source}", path.display())]
    Root {
        /// The root as given.
        path: PathBuf,
        /// What stat said.
        source: std::io::Error,
    },
}

impl Args {
    /// Checks the roots and prepares the needle.
    pub fn check(self) -> Result<Config, UsageError> {
        let matcher = Matcher::new(self.needle.as_bytes()).map_err(|_| UsageError::EmptyNeedle)?;
        for path in &self.dirs {
            // A root is followed if it is a link, as ripgrep does with the paths it is given.
            std::fs::metadata(path).map_err(|source| UsageError::Root {
                path: path.clone(),
                source,
            })?;
        }
        let cpus = self.cpus.map(|c| c.0).unwrap_or_default();
        let workers = match self.workers {
            Some(n) => n as usize,
            None if !cpus.is_empty() => cpus.len(),
            None => std::thread::available_parallelism().map_or(1, usize::from),
        };
        Ok(Config {
            matcher,
            workers,
            cpus,
            chunk: self.chunk as usize,
            roots: self.dirs,
        })
    }
}

/// Parses the command line of `program`; bad input is one line on stderr and exit status
/// 2 (clap's own convention for its errors, kept for the checks it cannot make).
pub fn parse_or_exit(program: &str) -> Config {
    match Args::parse().check() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{program}: {e}");
            std::process::exit(2);
        }
    }
}

/// A list of CPUs, `0,2,4-7`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl std::str::FromStr for CpuList {
    type Err = String;
    fn from_str(s: &str) -> Result<CpuList, String> {
        parse_cpus(s).map(CpuList)
    }
}

/// `0,2,4-7` into CPU numbers.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let bad = || format!("`{part}` is not a CPU number or range (like 0,1 or 0-3)");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
}

impl Config {
    /// Pins the calling thread (and so the threads it starts later) to all of `--cpus`, for
    /// runtimes that start threads of their own (Tokio's blocking pool).
    pub fn pin_all(&self) -> std::io::Result<()> {
        if self.cpus.is_empty() {
            return Ok(());
        }
        let mut set = nix::sched::CpuSet::new();
        for &cpu in &self.cpus {
            set.set(cpu).map_err(std::io::Error::from)?;
        }
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .map_err(|e| std::io::Error::other(format!("pinning to CPUs {:?}: {e}", self.cpus)))
    }

    /// Pins the calling thread, worker `index`, to its CPU when `--cpus` was given.
    pub fn pin(&self, index: usize) -> std::io::Result<()> {
        if self.cpus.is_empty() {
            return Ok(());
        }
        let cpu = self.cpus[index % self.cpus.len()];
        let mut set = nix::sched::CpuSet::new();
        set.set(cpu).map_err(std::io::Error::from)?;
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .map_err(|e| std::io::Error::other(format!("pinning to CPU {cpu}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("x").is_err());
    }

    #[test]
    fn a_missing_root_and_an_empty_needle_are_usage_errors() {
        let args = |needle: &str, dir: &str| {
            Args::try_parse_from(["search-x", "--needle", needle, dir]).unwrap()
        };
        assert!(matches!(
            args("", ".").check(),
            Err(UsageError::EmptyNeedle)
        ));
        let e = args("x", "/no/such/dir/here").check().unwrap_err();
        assert!(e.to_string().starts_with("/no/such/dir/here: "), "{e}");
        let c = args("x", ".").check().unwrap();
        assert!(c.workers >= 1);
        assert_eq!(c.chunk, 4096);
    }

    #[test]
    fn workers_follow_the_cpus() {
        let c = Args::try_parse_from(["s", "--needle", "x", "--cpus", "0-2", "."])
            .unwrap()
            .check()
            .unwrap();
        assert_eq!(c.workers, 3);
        assert!(Args::try_parse_from(["s", "--needle", "x", "--chunk", "0", "."]).is_err());
    }
}
