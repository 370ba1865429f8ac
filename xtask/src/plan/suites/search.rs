//! The `search` suite: the io_uring paper's file-content search (its Figure 9), every search
//! program and ripgrep on one tree, 15 rotated runs each. It has no load points: the
//! programs are timed whole, and the suite runs alone (`run::search` runs it).
//!
//! It may call the suites' shared parts (`plan::suites`).

use clap::ValueEnum;

use super::{Defaults, NO_RATE, Point, Sweep};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "search",
    title: "File-content search as in the io_uring (EMPER) paper's Figure 9",
    help: "The io_uring paper's file-content search (Figure 9): every search program and ripgrep on one tree, 15 rotated runs each; runs alone, by the `search` module",
    // A search is timed whole, not in a window.
    duration: 0.0,
    warmup: 1.0,
    conns: &[],
    // The paper's count.
    repeats: 15,
    rate_meaning: NO_RATE,
    extra_servers: &[],
    default_servers_help: None,
};

/// No loadgen points: `run::search` runs the programs itself.
pub(super) fn points(_: &Sweep<'_>) -> Vec<Point> {
    Vec::new()
}

/// What `--list` says of the suite, which runs alone and has no points.
pub(super) fn list_text(repeats: usize) -> String {
    format!(
        "  {:<11} {} (alone: every search-* program and ripgrep, {} rotated runs each; \
         --tree, --corpus, --needle, --cold)",
        DEFAULTS.name, DEFAULTS.title, repeats
    )
}

/// The generated corpus to search when no `--tree` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CorpusSize {
    /// About 40,000 files, 300 MB (written once, about a minute).
    Full,
    /// 2,000 files, 16 MB: to see the suite work in seconds.
    Small,
}

impl CorpusSize {
    pub(crate) fn spec(self) -> ::search::corpus::Spec {
        match self {
            CorpusSize::Full => ::search::corpus::Spec::FULL,
            CorpusSize::Small => ::search::corpus::Spec::SMALL,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            CorpusSize::Full => "full",
            CorpusSize::Small => "small",
        }
    }
}
