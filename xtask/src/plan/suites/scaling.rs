//! The `scaling` suite: the same server at 1, 2, 4, … workers, up to its CPUs (`--server-cpus`).
//! At each worker count, three points: the closed loop at 1000 connections (throughput, CPU per
//! echo, p99), one open-loop point whose rate grows with the workers (equal load per worker),
//! and the io_uring paper's Figure 7 point (10,000 connections, 200 µs of work per echo, under
//! the Little's-law bound of the workers). Every point carries its own worker count, and runs
//! on that many of the server's CPUs ([`placement_for`]).
//!
//! The sweep stops at the largest power of two that the server's CPUs hold, and says why
//! ([`stop_reason`]): on a 2-CPU machine the default placement gives the server one CPU, so the
//! suite runs one worker and says so.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, EMPER_COMPUTE_US, Load, Point, Stop, Sweep, Workload};
use crate::plan::placement::Placement;
use cpulist::CpuList;

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "scaling",
    title: "Scaling with workers",
    help: "Workers 1, 2, 4, … up to the server's CPUs (--server-cpus): at each, the closed loop at 1000 connections, an equal load of 20,000 echoes/s per worker, and the io_uring paper's Figure 7 point (10,000 connections, 200 µs of work, under the Little's-law bound); --workers is not used, --conns C[,C7] sets the first two points' connections and Figure 7's, --rate the rate per worker",
    // The Figure 7 point's window: at one worker its 10,000 connections get an echo each every
    // 2 s (Little's law), so 3 s sees each about once and a half. The other points take
    // `SHORT_SECS`.
    duration: 3.0,
    warmup: 0.4,
    // The closed-loop and equal-load points' connections, then Figure 7's.
    conns: &[1000, 10_000],
    // Efficiency is a ratio of medians: 3 repeats in Williams-ordered rounds, as the 16-core table of issue 26.
    repeats: 3,
    rate_meaning: "echoes/s per worker of the equal-load point (default 20000): W workers get W times it",
    extra_servers: &[],
    default_servers_help: None,
};

/// The equal-load rate of one worker: what every default server sustains on one worker of a
/// 2-CPU machine (quick's first open-loop rate).
const RATE_PER_WORKER: f64 = 20_000.0;

/// The closed-loop and equal-load points' window, unless `--duration` says otherwise.
const SHORT_SECS: f64 = 1.0;

/// The worker counts of the sweep: 1, 2, 4, … up to `server_cpus`.
pub(crate) fn worker_counts(server_cpus: usize) -> Vec<usize> {
    let mut out = vec![1];
    while out[out.len() - 1] * 2 <= server_cpus {
        out.push(out[out.len() - 1] * 2);
    }
    out
}

/// Why the sweep stops where it does, for `--list`, the console and the report: the server's
/// CPUs `server_cpus` on a machine of `machine_cpus`.
pub(crate) fn stop_reason(server_cpus: &CpuList, machine_cpus: usize) -> String {
    let n = server_cpus.len().max(1);
    let last = *worker_counts(n).last().unwrap_or(&1);
    let flag = format!("--server-cpus {server_cpus}");
    if n == 1 {
        let more = if machine_cpus <= 2 {
            format!(", on a machine with more than 2 (this one has {machine_cpus})")
        } else {
            String::new()
        };
        format!(
            "scaling stops at 1 worker: the server has 1 CPU ({flag}); give it more CPUs{more}, \
             to see scaling"
        )
    } else if last == n {
        format!("scaling stops at {last} workers, one per server CPU ({flag})")
    } else {
        format!(
            "scaling stops at {last} workers: the next count, {}, is more than the server's {n} \
             CPUs ({flag})",
            last * 2
        )
    }
}

/// Where `point` runs: a point with its own worker count W gets W of the server's CPUs, those
/// loadgen does not use first (when loadgen runs on this host, its clients on loopback), so
/// that W workers means W CPUs for every runtime (srv-threads' threads would otherwise spread
/// over every CPU the server has); any other point, the run's placement.
pub(crate) fn placement_for(point: &Point, place: &Placement) -> Placement {
    let Some(w) = point.workers else {
        return place.clone();
    };
    let local = place.listen.starts_with("127.");
    let (alone, shared): (Vec<usize>, Vec<usize>) = place
        .server_cpus
        .as_slice()
        .iter()
        .partition(|c| !local || !place.client_cpus.as_slice().contains(c));
    let mine: Vec<String> = alone
        .into_iter()
        .chain(shared)
        .take(w.max(1))
        .map(|c| c.to_string())
        .collect();
    Placement {
        server_cpus: mine
            .join(",")
            .parse()
            .unwrap_or_else(|_| place.server_cpus.clone()),
        workers: w,
        ..place.clone()
    }
}

/// Little's law: with `compute_us` of work per echo, `workers` busy workers complete at most
/// `workers × 10⁶ / compute_us` echoes a second, however many connections wait.
pub(crate) fn littles_law_bound(workers: usize, compute_us: u64) -> f64 {
    workers as f64 * 1e6 / compute_us.max(1) as f64
}

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let cpus = cx.o.server_cpus.as_ref().map_or(1, CpuList::len);
    let conns = cx.conns.first().copied().unwrap_or(1000);
    let fig7_conns = cx.conns.last().copied().unwrap_or(10_000);
    let short = cx.o.duration.unwrap_or(SHORT_SECS);
    let per_worker = cx.o.rate.unwrap_or(RATE_PER_WORKER);
    let echo = |compute_us| Workload::Echo {
        msg_size: 16,
        compute_us,
    };
    let mut out = Vec::new();
    for w in worker_counts(cpus) {
        let workers = if w == 1 {
            "1 worker".to_string()
        } else {
            format!("{w} workers")
        };
        let rate = per_worker * w as f64;
        let own = |p: Point| Point {
            workers: Some(w),
            ..p
        };
        out.push(own(cx.point(
            "closed",
            format!("closed-w{w}"),
            format!("{workers}, {conns} conns"),
            conns,
            echo(0),
            Load::Closed,
            Stop::Duration(short),
        )));
        out.push(own(cx.point(
            "open",
            format!("open-w{w}"),
            format!("{workers}, {conns} conns @ {rate}/s"),
            conns,
            echo(0),
            Load::Open { rate },
            Stop::Duration(short),
        )));
        out.push(own(cx.point(
            &format!("work-{EMPER_COMPUTE_US}us"),
            format!("work-w{w}"),
            format!("{workers}, {fig7_conns} conns, {EMPER_COMPUTE_US} µs work"),
            fig7_conns,
            echo(EMPER_COMPUTE_US),
            Load::Closed,
            Stop::Duration(cx.duration),
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Load, Overrides, Point, Stop, Suite};
    use super::*;

    fn cpus(n: usize) -> Overrides {
        Overrides {
            server_cpus: Some(
                (0..n)
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
                    .parse()
                    .unwrap(),
            ),
            ..o()
        }
    }

    #[test]
    fn worker_counts_are_powers_of_two_within_the_cpus() {
        assert_eq!(worker_counts(1), [1]);
        assert_eq!(worker_counts(2), [1, 2]);
        assert_eq!(worker_counts(3), [1, 2]);
        assert_eq!(worker_counts(8), [1, 2, 4, 8]);
        assert_eq!(worker_counts(0), [1]);
    }

    #[test]
    fn each_worker_count_has_three_points_of_its_own() {
        let p = Suite::Scaling.points(&cpus(8));
        assert_eq!(p.len(), 12);
        let workers: Vec<usize> = p.iter().map(|p| p.workers.unwrap()).collect();
        assert_eq!(workers, [1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8]);
        // Plotted against workers.
        assert!(p.iter().all(|p| p.x() == p.workers.unwrap() as f64));
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        // Equal load per worker: 20,000/s a worker.
        let rates: Vec<f64> = p
            .iter()
            .filter_map(|p| match p.load {
                Load::Open { rate } => Some(rate),
                Load::Closed => None,
            })
            .collect();
        assert_eq!(rates, [20_000.0, 40_000.0, 80_000.0, 160_000.0]);
        assert!(p.iter().all(|p| p.conns == 1000 || p.conns == 10_000));
        let fig7: Vec<&Point> = p.iter().filter(|p| p.series == "work-200us").collect();
        assert_eq!(fig7.len(), 4);
        assert!(fig7.iter().all(|p| p.conns == 10_000
            && p.workload.compute_us() == 200
            && p.load == Load::Closed
            && p.stop == Stop::Duration(3.0)
            && p.warmup == 4.0));
        assert_eq!(p[0].stop, Stop::Duration(1.0));
        assert_eq!(p[0].label, "1 worker, 1000 conns");
        assert_eq!(p[4].label, "2 workers, 1000 conns @ 40000/s");
        // 3 and 1 CPUs.
        assert_eq!(Suite::Scaling.points(&cpus(3)).len(), 6);
        assert_eq!(Suite::Scaling.points(&cpus(1)).len(), 3);
        assert_eq!(Suite::Scaling.points(&o()).len(), 3);
    }

    #[test]
    fn overrides_set_conns_rate_and_duration() {
        let p = Suite::Scaling.points(&Overrides {
            conns: Some(vec![10]),
            duration: Some(0.5),
            rate: Some(1000.0),
            ..cpus(2)
        });
        assert_eq!(p.len(), 6);
        assert!(
            p.iter()
                .all(|p| p.conns == 10 && p.stop == Stop::Duration(0.5))
        );
        assert_eq!(p[4].load, Load::Open { rate: 2000.0 });
        let two = Suite::Scaling.points(&Overrides {
            conns: Some(vec![100, 500]),
            ..cpus(1)
        });
        assert_eq!(
            two.iter().map(|p| p.conns).collect::<Vec<_>>(),
            [100, 100, 500]
        );
    }

    #[test]
    fn the_stop_is_explained() {
        let one: CpuList = "1".parse().unwrap();
        let why = stop_reason(&one, 2);
        assert!(why.contains("1 worker"), "{why}");
        assert!(
            why.contains("the server has 1 CPU (--server-cpus 1)"),
            "{why}"
        );
        assert!(why.contains("more than 2 (this one has 2)"), "{why}");
        assert!(!stop_reason(&one, 16).contains("more than 2"));
        let why = stop_reason(&"0-2".parse().unwrap(), 16);
        assert!(
            why.contains("stops at 2 workers: the next count, 4, is more than the server's 3 CPUs (--server-cpus 0,1,2)"),
            "{why}"
        );
        let why = stop_reason(&"0-7".parse().unwrap(), 16);
        assert!(
            why.contains("stops at 8 workers, one per server CPU"),
            "{why}"
        );
    }

    #[test]
    fn a_point_runs_on_as_many_cpus_as_workers_away_from_loadgen_first() {
        let place = |s: &str, c: &str| Placement {
            server_cpus: s.parse().unwrap(),
            client_cpus: c.parse().unwrap(),
            workers: 1,
            listen: "127.0.0.1".into(),
        };
        let p = Suite::Scaling.points(&cpus(8));
        let on = |i: usize, pl: &Placement| placement_for(&p[i], pl);
        let wide = place("0-7", "8-15");
        assert_eq!(on(0, &wide).server_cpus.to_string(), "0");
        assert_eq!(on(3, &wide).server_cpus.to_string(), "0,1");
        assert_eq!(on(9, &wide).server_cpus.to_string(), "0,1,2,3,4,5,6,7");
        assert_eq!(
            (on(6, &wide).workers, on(6, &wide).client_cpus),
            (4, wide.client_cpus.clone())
        );
        // Sharing a CPU with loadgen, one worker takes the other.
        let overlap = place("0,1", "0");
        assert_eq!(on(0, &overlap).server_cpus.to_string(), "1");
        assert_eq!(on(3, &overlap).server_cpus.to_string(), "1,0");
        // Clients on other hosts: their CPU numbers are theirs.
        let remote = Placement {
            listen: "198.18.0.1".into(),
            ..overlap.clone()
        };
        assert_eq!(on(0, &remote).server_cpus.to_string(), "0");
        // A point of another suite keeps the run's placement.
        let q = &Suite::Quick.points(&o())[0];
        assert_eq!(placement_for(q, &wide).server_cpus, wide.server_cpus);
    }

    #[test]
    fn littles_law() {
        assert_eq!(littles_law_bound(1, 200), 5000.0);
        assert_eq!(littles_law_bound(8, 200), 40_000.0);
    }
}
