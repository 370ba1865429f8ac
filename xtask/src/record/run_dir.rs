//! The run directory, `results/<run-id>/` unless `--out` names another: made empty at the
//! start of a run (a directory with something in it is refused, so that no run overwrites
//! another), and `meta.json` and the other JSON files written into it.
//!
//! It may call the record layer's `meta`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::record::meta::Meta;

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
    std::fs::write(out.join(name), text).with_context(|| format!("writing {name}"))
}
