//! The plan layer: what a benchmark runs, decided before anything runs. It owns the suites
//! as data (`suites`, one file per suite: its points, its defaults, its `--list` text), the
//! servers and their variants (`servers`), and where the server and the clients run
//! (`placement`, from the machine's `topology`), the order of the servers within each round
//! of a point (`order`); and, for every task, where paths start (`project_root`) and what a request
//! this machine cannot carry out is (`Usage`).
//!
//! It may call nothing else of xtask: the run, record and report layers read the plan, and
//! the plan knows none of them.

pub(crate) mod capacity;
pub(crate) mod order;
pub(crate) mod placement;
pub(crate) mod servers;
pub(crate) mod suites;
pub(crate) mod topology;

use std::path::{Path, PathBuf};

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
