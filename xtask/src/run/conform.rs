//! An outside server put through the wire checks of a protocol (`conformance::wire`) before
//! it is measured: started as a point would start it (`run::server`), checked at its
//! address, stopped. What failed is named: the check, and why.
//!
//! It may call the plan layer and the run layer's `server` and `outcome`.

use std::net::SocketAddr;
use std::path::Path;

use crate::plan::placement::Placement;
use crate::plan::servers::Variant;
use crate::plan::suites::Workload;
use crate::run::outcome::RunFiles;
use crate::run::server::{self, STOP_GRACE};

/// Starts `variant` for a point of `workload` on `place`, its stderr kept beside `files`, runs
/// the wire checks of the workload's protocol against it, and stops it: `Err` says which
/// check failed and why (or why it did not start).
pub(crate) fn check(
    workload: Workload,
    variant: &Variant,
    place: &Placement,
    files: &RunFiles,
) -> Result<(), String> {
    let proto = workload.proto();
    let (mut proc, addr) = server::start(workload, variant, Path::new("sh"), place, files, None)
        .map_err(|f| format!("{f}"))?;
    let result = addr
        .parse::<SocketAddr>()
        .map_err(|e| ("address", format!("its READY address `{addr}`: {e}")))
        .and_then(|a| conformance::wire::run(proto, a));
    server::ask_to_stop(variant, &addr);
    proc.stop(STOP_GRACE);
    result.map_err(|(name, why)| format!("failed the {proto} conformance check `{name}`: {why}"))
}
