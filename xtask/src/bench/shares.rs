//! The bursts suite's loads as shares of each server's own capacity (`--capacities RUN`): a
//! point that asks for a share of a capacity ([`Shape::capacity_share`]) is run, for each
//! server the capacity run measured, at that share of the server's capacity there, instead of
//! the share of the one capacity every server gets (`--rate`). The capacity run should be
//! measured as this run is (the same `--server-cpu-quota`, the same machine), else the shares
//! are of another machine's capacity.
//!
//! It may call the plan and the record of a capacity run.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::plan::suites::{Load, Point};
use crate::record::capacity::Capacity;

/// Each server's echo capacity, from a capacity run; empty without `--capacities`.
#[derive(Debug, Default)]
pub(crate) struct Shares {
    /// Server name to its echo capacity, per second.
    by_server: BTreeMap<String, f64>,
    /// The capacity.json read.
    pub(crate) from: Option<PathBuf>,
}

impl Shares {
    /// The capacities of `path`, a capacity run's directory or its `capacity.json`; none
    /// without a path. A file that is not a capacity run's, or holds no echo capacity, is
    /// refused with what it is missing.
    pub(crate) fn load(path: Option<&Path>) -> Result<Shares> {
        let Some(path) = path else {
            return Ok(Shares::default());
        };
        let file = if path.is_dir() {
            path.join("capacity.json")
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file).with_context(|| {
            format!(
                "--capacities: reading {} (a capacity run's directory or its capacity.json)",
                file.display()
            )
        })?;
        let lines: Vec<Capacity> = serde_json::from_str(&text)
            .with_context(|| format!("--capacities: {} is not a capacity.json", file.display()))?;
        let by_server = Self::echo_capacities(&lines);
        if by_server.is_empty() {
            bail!(
                "--capacities: {} holds no echo capacity (run `cargo xtask bench --suite capacity` first)",
                file.display()
            );
        }
        Ok(Shares {
            by_server,
            from: Some(file),
        })
    }

    /// The echo capacity of each server that has one: a capacity found, or the lower bound
    /// of a search that ended client-bound or unconfirmed (a server that met no rate, or
    /// failed, has none).
    fn echo_capacities(lines: &[Capacity]) -> BTreeMap<String, f64> {
        lines
            .iter()
            .filter(|c| c.workload == "echo")
            .filter(|c| {
                matches!(
                    c.result.as_str(),
                    "capacity" | "client-bound" | "unconfirmed"
                )
            })
            .filter_map(|c| Some((c.server.clone(), c.capacity_per_sec.filter(|r| *r > 0.0)?)))
            .collect()
    }

    /// The servers of `names` without a capacity here, while there are capacities: their
    /// shares are of `--rate`'s capacity.
    pub(crate) fn missing<'a>(&self, names: impl Iterator<Item = &'a str>) -> Vec<String> {
        if self.by_server.is_empty() {
            return Vec::new();
        }
        names
            .filter(|n| !self.by_server.contains_key(*n))
            .map(str::to_string)
            .collect()
    }

    /// `point` as `server` runs it and its row records it: [`Shares::point_for`]'s, else as
    /// planned.
    pub(crate) fn as_run<'a>(&self, point: &'a Point, server: &str) -> Cow<'a, Point> {
        self.point_for(point, server)
            .map_or(Cow::Borrowed(point), Cow::Owned)
    }

    /// `point` as `server` runs it: at its share of the server's own capacity where the point
    /// asks for a share and the server has a capacity here; `None` where it runs as planned.
    pub(crate) fn point_for(&self, point: &Point, server: &str) -> Option<Point> {
        let share = point.shape.capacity_share?;
        let capacity = self.by_server.get(server)?;
        let Load::Open { .. } = point.load else {
            return None;
        };
        Some(Point {
            load: Load::Open {
                rate: (capacity * share).round(),
            },
            ..point.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::suites::{Overrides, Suite};

    fn capacity(server: &str, result: &str, rate: Option<f64>) -> Capacity {
        Capacity {
            server: server.into(),
            workload: "echo".into(),
            objective: "p99=1ms".into(),
            result: result.into(),
            capacity_per_sec: rate,
            ..Capacity::default()
        }
    }

    #[test]
    fn each_server_runs_its_share_of_its_own_capacity_and_the_others_the_shared_one() {
        let dir = std::env::temp_dir().join(format!("xtask-shares-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lines = [
            capacity("fiber", "capacity", Some(30_000.0)),
            capacity("tokio", "client-bound", Some(20_000.0)),
            capacity("glommio", "below", Some(100.0)),
            capacity("smol", "failed", None),
        ];
        std::fs::write(
            dir.join("capacity.json"),
            serde_json::to_string(&lines).unwrap(),
        )
        .unwrap();
        let shares = Shares::load(Some(&dir)).unwrap();
        let points = Suite::Bursts.points(&Overrides::default());
        let p90 = points.iter().find(|p| p.id == "poisson-l90-c100").unwrap();
        let fiber = shares.point_for(p90, "fiber").unwrap();
        assert_eq!(fiber.load, Load::Open { rate: 27_000.0 });
        assert_eq!(fiber.id, p90.id);
        assert_eq!(
            shares.point_for(p90, "tokio").unwrap().load,
            Load::Open { rate: 18_000.0 }
        );
        // No capacity (met no rate, failed, absent): the point as planned.
        for s in ["glommio", "smol", "reactor"] {
            assert!(shares.point_for(p90, s).is_none(), "{s}");
        }
        assert_eq!(
            shares.missing(["fiber", "glommio", "reactor"].into_iter()),
            ["glommio", "reactor"]
        );
        // A point that asks for no share runs as planned.
        let quick = Suite::Quick.points(&Overrides::default());
        assert!(quick.iter().all(|p| shares.point_for(p, "fiber").is_none()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_path_no_shares_and_a_bad_file_is_refused_with_what_it_is() {
        let none = Shares::load(None).unwrap();
        assert!(none.missing(["fiber"].into_iter()).is_empty());
        let dir = std::env::temp_dir().join(format!("xtask-shares-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = Shares::load(Some(&dir)).unwrap_err();
        assert!(
            format!("{missing:#}").contains("capacity run's directory"),
            "{missing:#}"
        );
        std::fs::write(dir.join("capacity.json"), "[{\"server\": 1}]").unwrap();
        let bad = Shares::load(Some(&dir)).unwrap_err();
        assert!(
            format!("{bad:#}").contains("is not a capacity.json"),
            "{bad:#}"
        );
        std::fs::write(dir.join("capacity.json"), "[]").unwrap();
        let empty = Shares::load(Some(&dir)).unwrap_err();
        assert!(
            format!("{empty:#}").contains("holds no echo capacity"),
            "{empty:#}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
