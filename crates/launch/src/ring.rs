//! The ring sizes of the io_uring peers (srv-monoio, srv-compio, srv-tokio-uring,
//! srv-glommio): `--sq-entries` and `--cq-entries`, which each server flattens into its
//! command line ([`RingArgs`]) and hands to its runtime's own option.
//!
//! The submission ring stays at its runtime's own default unless `--sq-entries` says
//! otherwise (each runtime submits on its own cadence, so its authors' size is its
//! fair one); the completion ring gets [`CQ_ENTRIES`], srv-fiber's, through the
//! runtime's own option where it has one, so that the completions of 10,000
//! connections a worker (the `emper-echo`, `memory` and `scaling` suites) do not
//! overflow to the kernel's list.

use clap::Args;

/// Completion-queue entries of each worker's ring for every io_uring server that can size
/// it apart from its submission queue: srv-fiber's (`fiber::DEFAULT_CQ_ENTRIES`), twice
/// the operations in flight of 16,000 connections.
pub const CQ_ENTRIES: u32 = 32_768;

/// The largest ring the kernel makes (`IORING_MAX_ENTRIES`, and twice it for the
/// completion queue, `IORING_MAX_CQ_ENTRIES`).
const MAX_SQ: u32 = 32_768;
const MAX_CQ: u32 = 2 * MAX_SQ;

/// `--sq-entries` and `--cq-entries`, for a server whose runtime runs io_uring.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct RingArgs {
    /// Submission-queue entries of each worker's ring (1 to 32768; the kernel rounds up
    /// to a power of two). Default: the runtime's own (see the server's --help and crate
    /// docs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_SQ as i64))]
    pub sq_entries: Option<u32>,

    /// Completion-queue entries of each worker's ring (1 to 65536, at least
    /// --sq-entries; the kernel rounds up to a power of two). Default 32768, srv-fiber's,
    /// where the runtime can size it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_CQ as i64))]
    pub cq_entries: Option<u32>,
}

impl RingArgs {
    /// The submission-queue entries: --sq-entries, or `default`, the runtime's own.
    pub fn sq(&self, default: u32) -> u32 {
        self.sq_entries.unwrap_or(default)
    }

    /// The completion-queue entries for a submission queue of `sq`: --cq-entries, or
    /// [`CQ_ENTRIES`]; an error when it is smaller than `sq` (the kernel refuses it).
    pub fn cq(&self, sq: u32) -> anyhow::Result<u32> {
        let cq = self.cq_entries.unwrap_or(CQ_ENTRIES.max(sq));
        anyhow::ensure!(
            cq >= sq,
            "--cq-entries {cq} is smaller than the {sq} submission entries (the kernel \
             needs a completion queue at least as large)"
        );
        Ok(cq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ring: RingArgs,
    }

    fn parse(args: &[&str]) -> Result<RingArgs, clap::Error> {
        let argv = std::iter::once("srv-test").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.ring)
    }

    #[test]
    fn defaults_are_the_runtimes_submission_ring_and_a_large_completion_ring() {
        let r = parse(&[]).unwrap();
        assert_eq!(r.sq(1024), 1024);
        assert_eq!(r.cq(1024).unwrap(), CQ_ENTRIES);
    }

    #[test]
    fn sizes_are_taken_and_checked() {
        let r = parse(&["--sq-entries", "4096", "--cq-entries", "8192"]).unwrap();
        assert_eq!(r.sq(1024), 4096);
        assert_eq!(r.cq(4096).unwrap(), 8192);
        let small = parse(&["--sq-entries", "4096", "--cq-entries", "2048"]).unwrap();
        assert!(small.cq(small.sq(1024)).is_err());
        assert!(parse(&["--sq-entries", "0"]).is_err());
        assert!(parse(&["--sq-entries", "65536"]).is_err());
        assert!(parse(&["--cq-entries", "131072"]).is_err());
        assert!(parse(&["--sq-entries", "x"]).is_err());
    }
}
