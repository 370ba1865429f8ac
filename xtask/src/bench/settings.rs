//! What `meta.json` keeps of a bench run's plan (`settings`): enough to read the run, to
//! render its report again and to `--resume` it.

use std::collections::BTreeMap;

use super::plan::Plan;
use crate::run::cgroup::Accounting;

/// What `meta.json` keeps of the plan: enough to read the run and to `--resume` it.
pub(super) fn settings(
    plan: &Plan,
    accounting: &Accounting,
    argv: serde_json::Value,
) -> serde_json::Value {
    let mut settings = serde_json::json!({
        "suites": plan.suites.iter().map(|s| s.name()).collect::<Vec<_>>(),
        "servers": plan.servers,
        "not_run": plan.not_run,
        "server_cpus": plan.place.server_cpus.to_string(),
        "client_cpus": plan.place.client_cpus.to_string(),
        "workers": plan.place.workers,
        "placement": plan.placed,
        "client_hosts": plan.client_hosts(),
        "repeat": plan.suites.iter().map(|&s| (s.name(), plan.repeats(s))).collect::<BTreeMap<_, _>>(),
        "server_cpu_quota": plan.cpu_quota,
        "cpu_quota_period_us": accounting.quota().map(|q| q.period_us),
        "cpu_accounting": accounting.kind(),
        "cargo_profile": plan.profile,
        "quiet_wait": plan.quiet_wait,
        "points": plan.points,
        "argv": argv,
    });
    if let (Some(all), Some(given)) = (settings.as_object_mut(), plan.given.as_object()) {
        all.extend(given.clone());
    }
    settings
}
