//! `meta.json`: what a run was made on and how, so that a number can be traced to a machine,
//! a commit and a command line.
//!
//! It may call the plan layer's `order` and the run layer's `machine` (the machine's steal).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::plan::order::PointOrder;

/// The machine and software of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub(crate) run_id: String,
    /// UTC, ISO 8601.
    pub(crate) started: String,
    pub(crate) finished: Option<String>,
    pub(crate) commit: Option<String>,
    /// Uncommitted changes in the checkout when the run started.
    pub(crate) dirty: bool,
    pub(crate) kernel: Option<String>,
    pub(crate) cpu_model: Option<String>,
    /// Logical CPUs online.
    pub(crate) cores: usize,
    /// `/sys/devices/system/cpu/vulnerabilities`: each vulnerability and its mitigation.
    pub(crate) mitigations: BTreeMap<String, String>,
    pub(crate) rustc: Option<String>,
    pub(crate) go: Option<String>,
    /// The exact command line.
    pub(crate) command: String,
    /// Everything the command line resolved to (suites, servers with their flags, CPUs).
    pub(crate) settings: serde_json::Value,
    /// The run was stopped by Ctrl-C before its end.
    pub(crate) interrupted: bool,
    /// `/proc/loadavg` (1, 5, 15 minutes) when the run started and ended: how busy the
    /// machine was besides the bench.
    pub(crate) load_average_start: Option<String>,
    pub(crate) load_average_end: Option<String>,
    /// Percent of the machine's CPU time the hypervisor stole during the run (`steal` of
    /// /proc/stat): a few percent means the host was busy with other guests.
    #[serde(default)]
    pub(crate) steal_pct: Option<f64>,
    /// The order the servers ran in within each round of each point (`plan::order`): what
    /// `--resume` keeps. Empty in a run from before it was recorded (those ran A B C).
    #[serde(default)]
    pub(crate) orders: Vec<PointOrder>,
    /// The seed that drew who plays which part of each point's order (`--order-seed`). None
    /// in a run from before orders were drawn.
    #[serde(default)]
    pub(crate) order_seed: Option<u64>,
    /// How the servers' CPU was counted (a cgroup per server start, or the process tree, and
    /// why). None in a run from before: its CPU was summed from 500 ms samples of the live
    /// threads, which loses what threads and processes that exit used.
    #[serde(default)]
    pub(crate) accounting: Option<String>,
    /// Each `--resume` that completed the run from another commit, or from a tree with
    /// uncommitted changes: `<commit>[ (uncommitted changes)] at <time>`. The run's `commit`
    /// stays the one it was started (and mostly measured) with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) resumed_with: Vec<String>,
    /// The CPU frequency governor and the turbo (boost) state when the run started. None in
    /// a run from before they were recorded.
    #[serde(default)]
    pub(crate) cpu_frequency: Option<CpuFrequency>,
}

/// What the kernel says of the CPUs' frequency scaling: a governor that lowers the clock
/// when idle, or a turbo that raises it while it can, moves CPU-time figures between runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct CpuFrequency {
    /// `scaling_governor` of every CPU (`performance`, `powersave`, `schedutil`; several,
    /// comma-separated, where CPUs differ), or `not exposed` (a VM, most often).
    pub(crate) governor: String,
    /// `on` or `off`, from `intel_pstate/no_turbo` or `cpufreq/boost`, with which; or `not
    /// exposed`.
    pub(crate) turbo: String,
}

/// Not in sysfs here.
const NOT_EXPOSED: &str = "not exposed";

impl CpuFrequency {
    /// Read from `sys` (`/sys/devices/system/cpu`).
    pub(crate) fn read(sys: &Path) -> CpuFrequency {
        let mut governors: Vec<String> = std::fs::read_dir(sys)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                name.strip_prefix("cpu")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .filter_map(|e| std::fs::read_to_string(e.path().join("cpufreq/scaling_governor")).ok())
            .map(|g| g.trim().to_string())
            .collect();
        governors.sort();
        governors.dedup();
        let read = |p: &str| {
            std::fs::read_to_string(sys.join(p))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let turbo = match (read("intel_pstate/no_turbo"), read("cpufreq/boost")) {
            (Some(v), _) => format!(
                "{} (intel_pstate/no_turbo = {v})",
                if v == "0" { "on" } else { "off" }
            ),
            (None, Some(v)) => format!(
                "{} (cpufreq/boost = {v})",
                if v == "0" { "off" } else { "on" }
            ),
            (None, None) => NOT_EXPOSED.into(),
        };
        CpuFrequency {
            governor: if governors.is_empty() {
                NOT_EXPOSED.into()
            } else {
                governors.join(", ")
            },
            turbo,
        }
    }
}

impl Meta {
    /// This run's meta as the completion of `before` (`--resume`): the run keeps its id,
    /// its start, its command and the commit it was started with; a resume from another
    /// commit, or from a dirty tree, is added to `resumed_with`.
    pub(crate) fn resuming(mut self, before: &Meta) -> Meta {
        let now = (self.commit.take(), self.dirty);
        self.run_id.clone_from(&before.run_id);
        self.started.clone_from(&before.started);
        self.command.clone_from(&before.command);
        self.commit.clone_from(&before.commit);
        self.dirty = before.dirty;
        self.resumed_with.clone_from(&before.resumed_with);
        if now.0 != before.commit || now.1 {
            self.resumed_with.push(format!(
                "{}{} at {}",
                now.0.as_deref().map_or("?", |c| &c[..c.len().min(12)]),
                if now.1 { " (uncommitted changes)" } else { "" },
                iso8601(SystemTime::now())
            ));
        }
        self
    }
}

/// The percent of CPU time stolen since `start` (stolen and total ticks of
/// `run::machine::machine_steal_ticks`).
pub(crate) fn steal_since(start: Option<(u64, u64)>) -> Option<f64> {
    let (s0, t0) = start?;
    let (s1, t1) = crate::run::machine::machine_steal_ticks()?;
    let total = t1.checked_sub(t0).filter(|&t| t > 0)?;
    Some(s1.saturating_sub(s0) as f64 * 100.0 / total as f64)
}

/// The mitigations in one line: how many of the listed vulnerabilities are mitigated, not
/// affected, or left vulnerable, naming the vulnerable ones.
pub(crate) fn mitigations_line(m: &BTreeMap<String, String>) -> String {
    if m.is_empty() {
        return "not readable".into();
    }
    let vulnerable: Vec<&str> = m
        .iter()
        .filter(|(_, v)| v.starts_with("Vulnerable"))
        .map(|(k, _)| k.as_str())
        .collect();
    let mitigated = m.values().filter(|v| v.starts_with("Mitigation")).count();
    let unaffected = m.values().filter(|v| v.starts_with("Not affected")).count();
    let mut s = format!("{mitigated} mitigated, {unaffected} not affected");
    if !vulnerable.is_empty() {
        s.push_str(&format!(", vulnerable: {}", vulnerable.join(", ")));
    }
    s
}

/// The three load averages of `/proc/loadavg`.
pub(crate) fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

fn output(cmd: &str, args: &[&str], dir: &Path) -> Option<String> {
    Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

impl Meta {
    /// Reads what can be read about this machine and checkout.
    pub(crate) fn collect(root: &Path, go: Option<String>) -> Meta {
        let now = SystemTime::now();
        let commit = output("git", &["rev-parse", "HEAD"], root);
        // Changes under results/ are runs and their index (which every bench whose run lands
        // there rewrites), not the code measured: they do not make a run dirty.
        let dirty = output(
            "git",
            &[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)results",
            ],
            root,
        )
        .is_some_and(|s| !s.is_empty());
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|x| x.1.trim().to_string())
            })
        });
        let mut mitigations = BTreeMap::new();
        if let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu/vulnerabilities") {
            for e in dir.flatten() {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    mitigations.insert(
                        e.file_name().to_string_lossy().to_string(),
                        text.trim().to_string(),
                    );
                }
            }
        }
        let short = commit
            .as_deref()
            .map_or("nogit", |c| &c[..c.len().min(9)])
            .to_string();
        Meta {
            run_id: format!("{}-{short}", compact(now)),
            started: iso8601(now),
            finished: None,
            commit,
            dirty,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_string()),
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mitigations,
            rustc: output("rustc", &["--version"], root),
            go,
            command: std::iter::once("cargo xtask".to_string())
                .chain(std::env::args().skip(1))
                .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
                .collect::<Vec<_>>()
                .join(" "),
            settings: serde_json::Value::Null,
            interrupted: false,
            load_average_start: load_average(),
            load_average_end: None,
            steal_pct: None,
            orders: Vec::new(),
            order_seed: None,
            accounting: None,
            resumed_with: Vec::new(),
            cpu_frequency: Some(CpuFrequency::read(Path::new("/sys/devices/system/cpu"))),
        }
    }
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn parts(t: SystemTime) -> (i64, u32, u32, u64, u64, u64) {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil((secs / 86_400) as i64);
    let s = secs % 86_400;
    (y, m, d, s / 3600, s / 60 % 60, s % 60)
}

/// `2026-11-21T10:04:05Z`.
pub(crate) fn iso8601(t: SystemTime) -> String {
    let (y, m, d, hh, mm, ss) = parts(t);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// `20261121-100405`, for run ids that sort by time.
fn compact(t: SystemTime) -> String {
    let (y, m, d, hh, mm, ss) = parts(t);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(iso8601(t), "2023-11-14T22:13:20Z");
        assert_eq!(compact(t), "20231114-221320");
        assert_eq!(iso8601(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // A leap day.
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_resumed_run_keeps_the_commit_it_was_measured_with() {
        let before = Meta {
            run_id: "20261201-000000-aaaaaaaaa".into(),
            started: "2026-12-01T00:00:00Z".into(),
            commit: Some("aaaaaaaaaaaa0000".into()),
            command: "cargo xtask bench".into(),
            ..Meta::default()
        };
        let now = Meta {
            run_id: "20261202-000000-bbbbbbbbb".into(),
            started: "2026-12-02T00:00:00Z".into(),
            commit: Some("bbbbbbbbbbbb1111".into()),
            dirty: true,
            command: "cargo xtask bench --resume x".into(),
            ..Meta::default()
        };
        let m = now.resuming(&before);
        assert_eq!(m.commit.as_deref(), Some("aaaaaaaaaaaa0000"));
        assert!(!m.dirty);
        assert_eq!(m.run_id, before.run_id);
        assert_eq!(m.started, before.started);
        assert_eq!(m.command, before.command);
        assert_eq!(m.resumed_with.len(), 1);
        assert!(
            m.resumed_with[0].starts_with("bbbbbbbbbbbb (uncommitted changes) at "),
            "{:?}",
            m.resumed_with
        );
        // Resumed again from the run's own clean commit: nothing more to say.
        let again = Meta {
            commit: before.commit.clone(),
            ..Meta::default()
        }
        .resuming(&m);
        assert_eq!(again.commit, before.commit);
        assert_eq!(again.resumed_with, m.resumed_with);
    }

    #[test]
    fn the_governor_and_turbo_are_read_or_not_exposed() {
        let sys = tempfile::tempdir().unwrap();
        assert_eq!(
            CpuFrequency::read(sys.path()),
            CpuFrequency {
                governor: "not exposed".into(),
                turbo: "not exposed".into()
            }
        );
        for (cpu, g) in [
            ("cpu0", "performance"),
            ("cpu1", "powersave"),
            ("cpu2", "performance"),
        ] {
            let dir = sys.path().join(cpu).join("cpufreq");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("scaling_governor"), format!("{g}\n")).unwrap();
        }
        std::fs::create_dir_all(sys.path().join("cpufreq")).unwrap();
        std::fs::write(sys.path().join("cpufreq/boost"), "1\n").unwrap();
        let f = CpuFrequency::read(sys.path());
        assert_eq!(f.governor, "performance, powersave");
        assert_eq!(f.turbo, "on (cpufreq/boost = 1)");
        std::fs::create_dir_all(sys.path().join("intel_pstate")).unwrap();
        std::fs::write(sys.path().join("intel_pstate/no_turbo"), "1\n").unwrap();
        assert_eq!(
            CpuFrequency::read(sys.path()).turbo,
            "off (intel_pstate/no_turbo = 1)"
        );
    }
}
