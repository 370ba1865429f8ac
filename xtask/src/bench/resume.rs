//! `--resume`'s command line: the bench's own arguments as given (what `meta.json` keeps,
//! without `--out`), and the options of a run to complete, parsed again from them.
//!
//! It may call what `bench` may.

use anyhow::Result;

use super::BenchArgs;
use crate::plan::Usage;

/// The bench command line as given, after `bench`, without `--out` (the run directory is
/// the run's own): what `--resume` parses again.
pub(crate) fn own_argv() -> Vec<String> {
    let all: Vec<String> = std::env::args().collect();
    let start = all
        .iter()
        .position(|a| a == "bench")
        .map_or(all.len(), |i| i + 1);
    let mut out = Vec::new();
    let mut it = all[start..].iter();
    while let Some(a) = it.next() {
        if a == "--out" {
            it.next();
        } else if !a.starts_with("--out=") {
            out.push(a.clone());
        }
    }
    out
}

/// The options of the run in `dir`, to complete it: parsed again from its `meta.json`, with
/// `--no-build` and `--quiet-wait` as given now.
pub(super) fn resumed(dir: &std::path::Path, now: &BenchArgs) -> Result<BenchArgs> {
    #[derive(clap::Parser)]
    struct Again {
        #[command(flatten)]
        bench: BenchArgs,
    }
    let meta = crate::record::run_dir::read_meta(dir)
        .map_err(|e| anyhow::Error::new(Usage(format!("--resume {}: {e:#}", dir.display()))))?;
    let Some(argv) = meta.settings["argv"].as_array() else {
        return Err(anyhow::Error::new(Usage(format!(
            "--resume {}: its meta.json does not record the bench's options (a run made before \
             --resume existed, or not by cargo xtask bench)",
            dir.display()
        ))));
    };
    let argv: Vec<String> = argv
        .iter()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    let mut args =
        <Again as clap::Parser>::try_parse_from(std::iter::once("bench".to_string()).chain(argv))
            .map_err(|e| {
                anyhow::Error::new(Usage(format!(
                    "--resume {}: its recorded options no longer parse: {}",
                    dir.display(),
                    e.to_string().lines().next().unwrap_or_default()
                )))
            })?
            .bench;
    args.out = Some(dir.to_path_buf());
    args.resuming = true;
    args.no_build = now.no_build;
    args.quiet_wait = now.quiet_wait;
    Ok(args)
}
