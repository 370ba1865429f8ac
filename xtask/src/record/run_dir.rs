//! The run directory, `results/<run-id>/` unless `--out` names another: made empty at the
//! start of a run (a directory with something in it is refused, so that no run overwrites
//! another), and `meta.json` and the other JSON files written into it. Every file is written
//! whole or not at all (a temporary file renamed into place), and each run of a point leaves
//! its outcome beside its files as it ends (`<stem>.outcome.json`), so that a run killed at
//! any moment leaves a directory the report renders and `--resume` completes.
//!
//! It may call the record layer's `meta` and the run layer's `outcome`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::record::meta::Meta;
use crate::run::outcome::{Failure, Measured, RunFiles};

/// The run directory: `out` when given, else `results/<run_id>` under `root`.
pub(crate) fn path(out: Option<&Path>, root: &Path, run_id: &str) -> PathBuf {
    out.map_or_else(|| root.join("results").join(run_id), Path::to_path_buf)
}

/// Makes the run directory `out`, refusing one that exists and is not empty.
pub(crate) fn create(out: &Path) -> Result<()> {
    if out.is_dir() && std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
        bail!(
            "{} exists and is not empty; choose another --out",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))
}

/// Writes `meta.json`.
pub(crate) fn write_meta(out: &Path, meta: &Meta) -> Result<()> {
    write_json(out, "meta.json", meta)
}

/// Writes `value` as pretty JSON to `out/name`.
pub(crate) fn write_json(out: &Path, name: &str, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    write_whole(&out.join(name), text.as_bytes())
}

/// Writes `path` whole or not at all: into a temporary file beside it, then renamed over it.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

/// Where the outcome of the run whose files are `files` is kept.
fn outcome_path(files: &RunFiles) -> PathBuf {
    files.path("outcome.json")
}

/// Keeps the outcome of one run of a point, as it ends.
pub(crate) fn save_outcome(files: &RunFiles, outcome: &Result<Measured, Failure>) -> Result<()> {
    std::fs::create_dir_all(&files.dir)
        .with_context(|| format!("creating {}", files.dir.display()))?;
    let text = serde_json::to_string_pretty(outcome)?;
    write_whole(&outcome_path(files), text.as_bytes())
}

/// The outcome a run left, if it ended before (an interrupted run is not one that ended: it
/// runs again).
pub(crate) fn load_outcome(files: &RunFiles) -> Option<Result<Measured, Failure>> {
    let text = std::fs::read_to_string(outcome_path(files)).ok()?;
    let outcome: Result<Measured, Failure> = serde_json::from_str(&text).ok()?;
    (!matches!(outcome, Err(Failure::Interrupted))).then_some(outcome)
}

/// The `meta.json` of a run directory.
pub(crate) fn read_meta(out: &Path) -> Result<Meta> {
    let path = out.join("meta.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Where the named baselines are kept: `results/baselines/NAME`, each a file holding its
/// run directory's path (local to a checkout: not committed).
fn baseline_file(root: &Path, name: &str) -> PathBuf {
    root.join("results").join("baselines").join(name)
}

/// Checks a baseline's name: letters, digits, `.`, `_` and `-`, not starting with `.`.
pub(crate) fn baseline_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(name.to_string())
    } else {
        Err(format!(
            "`{name}` is not a baseline name (letters, digits, `.`, `_`, `-`; as in `main`)"
        ))
    }
}

/// Saves the run in `dir` as the baseline `name` (`bench --save-baseline`), replacing one of
/// that name.
pub(crate) fn save_baseline(root: &Path, name: &str, dir: &Path) -> Result<PathBuf> {
    let file = baseline_file(root, name);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    std::fs::write(&file, format!("{}\n", dir.display()))
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// The run directory saved as the baseline `name` (`compare --baseline`).
pub(crate) fn baseline(root: &Path, name: &str) -> Result<PathBuf> {
    let file = baseline_file(root, name);
    let text = std::fs::read_to_string(&file).with_context(|| {
        let saved: Vec<String> = std::fs::read_dir(root.join("results").join("baselines"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        format!(
            "no baseline `{name}` ({}; `cargo xtask bench --save-baseline {name}` saves one)",
            if saved.is_empty() {
                "none saved".to_string()
            } else {
                format!("saved: {}", saved.join(", "))
            }
        )
    })?;
    Ok(PathBuf::from(text.trim()))
}

#[cfg(test)]
mod baseline_tests {
    use super::*;

    #[test]
    fn a_saved_baseline_is_found_by_its_name() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("results").join("20261201-000000-abc");
        std::fs::create_dir_all(&run).unwrap();
        save_baseline(root.path(), "main", &run).unwrap();
        assert_eq!(baseline(root.path(), "main").unwrap(), run);
        let e = format!("{:#}", baseline(root.path(), "other").unwrap_err());
        assert!(e.contains("no baseline `other` (saved: main;"), "{e}");
        assert!(baseline_name("../x").is_err() && baseline_name(".x").is_err());
        assert!(baseline_name("v1.2_rc-3").is_ok());
    }
}
