//! Crash trials (`conformance::crash`): a few `kill -9`s of every chat server in the
//! middle of a `SAY` flood, with `--fsync never` and `--fsync always`; no acknowledged
//! message may be missing after the restart. `cargo xtask crash --trials 100` runs more.

use anyhow::{Result, ensure};
use conformance::Target;
use conformance::crash::{self, Outcome};

conformance::conformance_tests!(crash_trials needs Chat);

/// Trials per server and `--fsync` setting in the test suite: a few, to stay fast.
const TRIALS: u64 = 2;

fn crash_trials(target: &Target) -> Result<()> {
    for extra in [&[][..], &["--fsync", "always"][..]] {
        let mut sum = Outcome::default();
        for t in 0..TRIALS {
            sum.add(crash::trial(target, t, extra)?);
        }
        ensure!(
            sum.lost == 0,
            "{extra:?}: {} of {} acknowledged messages lost after kill -9",
            sum.lost,
            sum.acked
        );
        ensure!(sum.acked > 0, "{extra:?}: no message was acknowledged");
    }
    Ok(())
}
