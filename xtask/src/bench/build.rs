//! The build step of `cargo xtask bench`: the plan's servers and loadgen built (or checked
//! built, with `--no-build`), a Go build that failed leaving the Go servers out, and every
//! `+flag` checked against its binary.
//!
//! It may call what `bench` may.

use anyhow::{Result, bail};

use super::plan::Plan;
use crate::plan::servers::Inventory;
use crate::run::children;

/// Builds the plan's servers and loadgen (or, with `--no-build`, checks that they are
/// built), then checks every `+flag` against its binary. Go servers whose build failed are
/// left out of the plan, each with a line, as where Go is missing.
pub(super) fn build(plan: &mut Plan, root: &std::path::Path, inv: &Inventory) -> Result<()> {
    let profile = plan.profile.clone();
    let profile = profile.as_str();
    if plan.no_build {
        for bin in plan
            .servers
            .iter()
            .filter(|v| !v.is_ext())
            .map(|v| v.binary.as_str())
            .filter(|b| inv.peer(b).is_none())
            .chain(["loadgen"])
        {
            let path = inv.binary_path(bin, profile);
            if !path.is_file() {
                bail!("{} is not built; run without --no-build", path.display());
            }
        }
    } else if let Some(why) = inv.build(root, &plan.servers, profile)? {
        eprintln!("leaving the Go servers out: {why}");
        for v in plan.servers.iter().filter(|v| v.binary == "srv-go") {
            plan.not_run.push(format!("{}: {why}", v.name));
        }
        plan.servers.retain(|v| v.binary != "srv-go");
        if plan.servers.is_empty() {
            bail!("no server is left to run: {why}");
        }
    }
    if children::interrupted() {
        bail!("interrupted during the build");
    }
    inv.check_flags(&plan.servers, profile)
}
