//! How `cargo xtask bench` ends: 0 when every planned point ran, 1 when one failed (after
//! everything measured is written, the last line saying how many and where the report says
//! why), 2 for a refusal before anything ran (`plan::Usage`), 130 when interrupted. `main`
//! maps the error to the status; this file holds what a failed point's end says.
//!
//! It may call the plan and record layers.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::plan::Usage;
use crate::record::row::Row;

/// The exit statuses, for `cargo xtask bench --help`.
pub(crate) const HELP: &str = "Exit status:
  0    every planned point ran (also a --resume that completes a run)
  1    a point failed: everything measured is written, and the last line says how
       many failed and where report.md says why; or the run could not go on (a
       build failed, a client host could not be reached)
  2    refused before anything ran (the options, an unknown server, a --resume
       of what is no run)
  130  interrupted (Ctrl-C); --resume DIR completes the run";

/// The end of a bench that wrote everything it measured but not every planned point ran:
/// `main` exits 1 with this as the last line.
#[derive(Debug)]
pub(crate) struct PointsFailed {
    pub(crate) failed: usize,
    pub(crate) of: usize,
    /// The report, and where in it each failure is said.
    pub(crate) report: PathBuf,
    pub(crate) section: &'static str,
}

impl std::fmt::Display for PointsFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} points failed; why: {}, {}",
            self.failed,
            self.of,
            self.report.display(),
            self.section
        )
    }
}

impl std::error::Error for PointsFailed {}

/// `Ok` when every point of `rows` (a server at one point) ran in all its rounds, else
/// [`PointsFailed`].
pub(super) fn all_ran(rows: &[Row], out: &Path) -> Result<()> {
    let failed = rows.iter().filter(|r| r.ok < r.repeats).count();
    if failed == 0 {
        return Ok(());
    }
    Err(anyhow::Error::new(PointsFailed {
        failed,
        of: rows.len(),
        report: out.join("report.md"),
        section: "section \"Failures and notes\"",
    }))
}

/// `e` as a refusal before anything ran (exit status 2): what the command line asked cannot
/// be done here, as an unknown server in `--servers`.
pub(super) fn refused(e: anyhow::Error) -> Usage {
    Usage(format!("{e:#}"))
}
