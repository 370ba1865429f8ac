//! The bench command line's own value parsers and help: connection lists, positive and
//! non-negative numbers, what `--help` says of `--servers`.
//!
//! It may call what `bench` may.

use std::str::FromStr;

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
