//! How `cargo xtask bench` ends: 0 when every planned point ran, 1 when one failed or a
//! server named in `--servers` was refused (after everything measured is written, the last
//! line saying how many and where the report says why), 2 for a refusal before anything ran
//! (`plan::Usage`), 130 when interrupted. `main`
//! maps the error to the status; this file holds what a failed point's end says.
//!
//! It may call the plan and record layers.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::plan::Usage;
use crate::record::row::Row;

/// The exit statuses, for `cargo xtask bench --help`.
pub(crate) const HELP: &str = "Exit status:
  0    every planned point ran (also a --resume that completes a run); a default
       server left out for a missing optional tool (Go, say), a Go build that
       failed or a kernel whose io_uring will not do is a line of the report's
       \"Not in this run\", not a failure
  1    a point failed, or a server named in --servers was refused and not measured
       (an ext: server that failed its conformance checks): everything measured is
       written, and the last line says what and where report.md says why; or the run
       could not go on (the Rust build failed, a client host could not be reached)
  2    refused before anything ran (the options, an unknown server, a --resume
       of what is no run)
  130  interrupted (Ctrl-C); --resume DIR completes the run";

/// The end of a bench that wrote everything it measured but not every planned point ran, or
/// not every server named in `--servers`: `main` exits 1 with this as the last line.
#[derive(Debug)]
pub(crate) struct PointsFailed {
    pub(crate) failed: usize,
    pub(crate) of: usize,
    /// The servers named in `--servers` that were refused, not measured, each with why.
    pub(crate) refused: Vec<String>,
    /// The report, and where in it each failure is said.
    pub(crate) report: PathBuf,
    pub(crate) section: &'static str,
}

impl std::fmt::Display for PointsFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.failed > 0 {
            write!(f, "{} of {} points failed; ", self.failed, self.of)?;
        }
        if !self.refused.is_empty() {
            write!(
                f,
                "{} named in --servers not measured ({}); ",
                self.refused.len(),
                self.refused.join("; ")
            )?;
        }
        let section = if self.failed > 0 {
            self.section
        } else {
            "section \"Not in this run\""
        };
        write!(f, "why: {}, {section}", self.report.display())
    }
}

impl std::error::Error for PointsFailed {}

/// `Ok` when every point of `rows` (a server at one point) ran in all its rounds and no
/// server named in `--servers` was `refused`, else [`PointsFailed`].
pub(super) fn all_ran(rows: &[Row], refused: &[String], out: &Path) -> Result<()> {
    let failed = rows.iter().filter(|r| r.ok < r.repeats).count();
    if failed == 0 && refused.is_empty() {
        return Ok(());
    }
    Err(anyhow::Error::new(PointsFailed {
        failed,
        of: rows.len(),
        refused: refused.to_vec(),
        report: out.join("report.md"),
        section: "section \"Failures and notes\"",
    }))
}

/// `e` as a refusal before anything ran (exit status 2): what the command line asked cannot
/// be done here, as an unknown server in `--servers`.
pub(super) fn refused(e: anyhow::Error) -> Usage {
    Usage(format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    #[test]
    fn a_refused_server_named_in_servers_fails_the_run_after_the_report() {
        let rows = vec![row("reactor", "c1", 1.0, 1000.0)];
        let out = Path::new("results/r");
        assert!(all_ran(&rows, &[], out).is_ok());
        let refused = ["bad: refused, not measured: it failed echo_bytes".to_string()];
        let e = all_ran(&rows, &refused, out).unwrap_err();
        let end = e.downcast_ref::<PointsFailed>().expect("exit status 1");
        assert_eq!(end.failed, 0);
        assert_eq!(
            end.to_string(),
            "1 named in --servers not measured (bad: refused, not measured: it failed \
             echo_bytes); why: results/r/report.md, section \"Not in this run\""
        );
        // With a failed point too, both are said.
        let mut failed = rows.clone();
        failed[0].repeats = 2;
        let e = all_ran(&failed, &refused, out).unwrap_err().to_string();
        assert!(
            e.starts_with("1 of 1 points failed; 1 named in --servers"),
            "{e}"
        );
    }
}
