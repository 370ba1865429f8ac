//! `cargo xtask crash`: crash trials on every chat server (`conformance::crash`), many
//! more than the test suite runs, and the table of what they found: acknowledged
//! messages lost after `kill -9` and a restart (must be 0), torn tails cut.
//!
//! The servers are the conformance suite's list, built in the xtask's own profile by
//! the same harness; srv-go is left out with a message when Go is missing.
//!
//! It may call nothing else of xtask: the trials are the conformance crate's.

use crate::report::stdout;
use anyhow::{Context, Result, bail};
use clap::Args;
use conformance::crash::{self, Outcome};
use conformance::{Need, Resolved, SERVERS};

#[derive(Debug, Args)]
pub(crate) struct CrashArgs {
    /// Trials per server.
    #[arg(long, default_value_t = 100)]
    trials: u64,
    /// Servers, comma-separated, by the names bench takes (threads, threads-process,
    /// reactor, go, ...) or their conformance ids (threads_process); all of them when not
    /// given.
    #[arg(long)]
    servers: Option<String>,
    /// `--fsync` for the servers.
    #[arg(long, default_value = "never", value_parser = ["never", "always"])]
    fsync: String,
}

/// The name bench gives `spec` (`threads-process`), or its conformance id where bench has
/// none.
fn name_of(spec: &conformance::ServerSpec) -> &'static str {
    spec.bench.map_or(spec.id, |b| b.name)
}

/// Whether `given` names `spec`: its bench name or its conformance id.
fn named(spec: &conformance::ServerSpec, given: &str) -> bool {
    name_of(spec) == given || spec.id == given
}

pub(crate) fn run(args: &CrashArgs) -> Result<()> {
    let wanted: Option<Vec<&str>> = args
        .servers
        .as_deref()
        .map(|s| s.split(',').map(str::trim).collect());
    if let Some(w) = &wanted {
        for id in w {
            if !SERVERS.iter().any(|s| named(s, id)) {
                let names: Vec<&str> = SERVERS.iter().map(name_of).collect();
                bail!(
                    "unknown server `{id}`; the servers are: {}",
                    names.join(", ")
                );
            }
        }
    }
    let extra = ["--fsync", args.fsync.as_str()];
    let mut rows = Vec::new();
    for spec in SERVERS.iter().filter(|s| {
        wanted
            .as_ref()
            .is_none_or(|w| w.iter().any(|id| named(s, id)))
    }) {
        if !spec.serves(Need::Chat) {
            eprintln!("skipped {}: it serves no chat rooms to crash", spec.id);
            continue;
        }
        let target = match spec
            .resolve()
            .with_context(|| format!("building {}", spec.bin))?
        {
            Resolved::Ready(target) => target,
            Resolved::Skipped(why) => {
                eprintln!("skipped {}: {why}", spec.id);
                continue;
            }
        };
        let mut sum = Outcome::default();
        for t in 0..args.trials {
            let outcome = crash::trial(&target, t, &extra)
                .with_context(|| format!("{} ({}): trial {t}", spec.id, spec.command_line()))?;
            sum.add(outcome);
        }
        eprintln!(
            "{}: {} trials, {} acknowledged, {} lost, {} torn tails cut",
            name_of(spec),
            sum.trials,
            sum.acked,
            sum.lost,
            sum.tails_cut
        );
        rows.push((name_of(spec), sum));
    }
    stdout::line("| server | trials | acknowledged | lost | torn tails cut |");
    stdout::line("| --- | ---: | ---: | ---: | ---: |");
    for (id, s) in &rows {
        stdout::line(format_args!(
            "| {id} | {} | {} | {} | {} |",
            s.trials, s.acked, s.lost, s.tails_cut
        ));
    }
    let lost: u64 = rows.iter().map(|(_, s)| s.lost).sum();
    if lost > 0 {
        bail!("{lost} acknowledged messages lost (--fsync {})", args.fsync);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_named_as_bench_names_it_or_by_its_id() {
        let process = SERVERS
            .iter()
            .find(|s| s.id == "threads_process")
            .expect("threads_process is in the list");
        assert!(named(process, "threads-process"));
        assert!(named(process, "threads_process"));
        assert!(!named(process, "threads"));
    }
}
