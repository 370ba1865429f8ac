//! How a bench run counts its servers' CPU: a cgroup per server start, under the run's quota
//! where `--server-cpu-quota` asks for one, or the process tree where no group can be made;
//! a quota this machine cannot give is a usage error, found before the build.

use anyhow::Result;

use crate::plan::Usage;
use crate::run::cgroup::{Accounting, Quota};

/// How the run counts the servers' CPU: a cgroup per server start (with `quota`, and with a
/// `perf_event` group for the counters where `counters`), or, where no group can be made, the
/// process tree, said on the terminal. A quota needs the groups: without
/// them it is a usage error, never a run that claims a quota it did not have.
pub(super) fn accounting_for(quota: Option<Quota>, counters: bool) -> Result<Accounting> {
    let capped = quota.as_ref().map(|q| q.fraction);
    let accounting = Accounting::new(quota).with_counters(counters);
    if let Accounting::Tree { why } = &accounting {
        if let Some(fraction) = capped {
            return Err(anyhow::Error::new(Usage(format!(
                "--server-cpu-quota {fraction}: the quota's cgroup can be made, but not the group \
                 that counts the server's CPU ({why}); run without --server-cpu-quota"
            ))));
        }
        eprintln!(
            "warning: no cgroup can be made here ({why}); the servers' CPU is read from their \
             process trees' /proc/PID/stat instead, exact to a 10 ms tick a process"
        );
    }
    Ok(accounting)
}

/// The server's CPU quota of `--server-cpu-quota FRACTION`, or a usage error where this
/// machine cannot give one.
pub(super) fn quota(fraction: f64) -> Result<Quota> {
    Quota::new(fraction).map_err(|why| {
        anyhow::Error::new(Usage(format!(
            "--server-cpu-quota {fraction}: {why}; run without --server-cpu-quota, or where \
             cgroups are writable"
        )))
    })
}
