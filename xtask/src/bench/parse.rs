//! The bench command line's own value parsers, checks and help: connection lists, positive
//! and non-negative numbers, `--points` against the suites' points, what `--help` says of
//! `--servers`.
//!
//! It may call what `bench` may.

use std::str::FromStr;

use anyhow::Result;

use super::BenchArgs;
use crate::plan::Usage;
use crate::plan::suites::Point;

use crate::plan::suites::{self, Suite};

/// A list of connection counts, `1,10,100`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnList(pub(crate) Vec<usize>);

impl FromStr for ConnList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        suites::parse_conns(s).map(ConnList)
    }
}

pub(super) fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a positive number")),
    }
}

pub(super) fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds (0 or more)")),
    }
}

/// What `--help` says of `--servers`: the suites that add servers to the default ones say
/// which.
pub(super) fn servers_help() -> String {
    let extra: Vec<&str> = Suite::ALL
        .iter()
        .filter_map(|s| s.default_servers_help())
        .collect();
    format!(
        "The servers, comma-separated: a name plus runtime flags, as in \
         `threads,tokio-per-core,fiber+completer`; `+name=LABEL` names a variant, so that one \
         server can run twice (`reactor,reactor+name=again`: an A/A run, where every verdict \
         must be `~`). Any other program that speaks a ringside protocol joins as \
         `ext:NAME=COMMAND`, with {{addr}}, {{host}}, {{port}}, {{workers}}, {{cpus}} and {{proto}} \
         filled in; it is put through the protocol's conformance checks first (`cargo xtask \
         conform`; docs/RING.md). Default: one of each server this checkout can build, and {}. \
         `--list` names them",
        extra.join(", ")
    )
}

/// Every prefix of `--points` starts a point of the suites, or it is refused with their
/// series.
pub(super) fn check_points(args: &BenchArgs) -> Result<()> {
    let all: Vec<Point> = args
        .suites()
        .into_iter()
        .flat_map(|s| s.points(&args.overrides(args.workers())))
        .collect();
    for prefix in &args.points {
        if !all.iter().any(|p| p.id.starts_with(prefix.as_str())) {
            let mut series: Vec<&str> = Vec::new();
            for p in &all {
                if !series.contains(&p.series.as_str()) {
                    series.push(&p.series);
                }
            }
            return Err(anyhow::Error::new(Usage(format!(
                "--points {prefix}: no point of these suites starts with it; their points \
                 start with their series: {}",
                series.join(", ")
            ))));
        }
    }
    Ok(())
}
