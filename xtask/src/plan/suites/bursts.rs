//! The `bursts` suite: the same average load, sent evenly at random (Poisson), in Pareto gaps
//! (mutilate's `fb_ia`: mostly short gaps, now and then a long one) and on-off (twice the
//! rate for 10 ms, then 10 ms of silence), at 50%, 70% and 90% of a capacity (`--rate`,
//! default 40,000/s, two thirds of the slowest default server's closed-loop throughput at
//! 1000 connections in the quick run of 2026-12-06, threads-process's 61,000/s), 16-byte echo
//! at 100 connections. Every server gets the same offered load, unless the run is given a
//! capacity run (`--capacities RUN`, `bench::shares`): then each server runs at 50%, 70% and
//! 90% of its own capacity there, as the mutilate and Lancet runs load a server. The
//! report asks whether the ranking under bursts is the ranking under Poisson (a rank
//! correlation), by p99 and p99.9 against load.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Arrivals, Defaults, Load, Point, Shape, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "bursts",
    title: "Bursts: Poisson, Pareto and on-off arrivals",
    help: "Bursts: 16 B echo at 100 connections, Poisson, Pareto (mutilate's fb_ia) and on-off (10 ms at twice the rate, 10 ms silent) arrivals at 50, 70 and 90% of a capacity (each server's own from `--capacities RUN`, else `--rate`, default 40000/s): p99 and p99.9 against load, and whether the ranking under bursts is Poisson's (about 4 min with the 16 default servers)",
    duration: 1.0,
    warmup: 0.35,
    conns: &[100],
    repeats: 1,
    rate_meaning: "the capacity the loads are shares of, echoes/s (default 40000)",
    extra_servers: &[],
    default_servers_help: None,
};

/// The capacity the loads are shares of, unless `--rate` says otherwise.
const DEFAULT_CAPACITY: f64 = 40_000.0;
/// The loads, in percent of the capacity.
pub(crate) const LOAD_PERCENT: [u32; 3] = [50, 70, 90];
/// The arrivals compared, Poisson (the ranking the others are held against) first.
pub(crate) const ARRIVALS: [Arrivals; 3] = [Arrivals::Poisson, Arrivals::Pareto, Arrivals::OnOff];

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let capacity = cx.o.rate.unwrap_or(DEFAULT_CAPACITY);
    let echo16 = Workload::Echo {
        msg_size: 16,
        compute_us: 0,
    };
    let mut out = Vec::new();
    for &c in &cx.conns {
        for arrivals in ARRIVALS {
            for pct in LOAD_PERCENT {
                let rate = (capacity * f64::from(pct) / 100.0).round();
                let series = arrivals.name();
                out.push(Point {
                    arrivals,
                    shape: Shape {
                        capacity_share: Some(f64::from(pct) / 100.0),
                        ..Shape::default()
                    },
                    ..cx.point(
                        series,
                        format!("{series}-l{pct}-c{c}"),
                        format!("{series} @ {pct}% of capacity, {}", conns_label(c)),
                        c,
                        echo16,
                        Load::Open { rate },
                        Stop::Duration(cx.duration),
                    )
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{default_servers, o};
    use super::super::{Arrivals, Load, Overrides, Point, Suite};

    #[test]
    fn bursts_cross_arrivals_and_loads_of_one_capacity() {
        let p = Suite::Bursts.points(&o());
        assert_eq!(p.len(), 3 * 3);
        let got: Vec<(Arrivals, Load)> = p.iter().map(|p| (p.arrivals, p.load)).collect();
        assert_eq!(got[0], (Arrivals::Poisson, Load::Open { rate: 20_000.0 }));
        assert_eq!(got[4], (Arrivals::Pareto, Load::Open { rate: 28_000.0 }));
        assert_eq!(got[8], (Arrivals::OnOff, Load::Open { rate: 36_000.0 }));
        assert_eq!(p[8].id, "onoff-l90-c100");
        // The plots' x is the share of the capacity, whoever's capacity it is.
        assert_eq!(p[8].x(), 90.0);
        assert_eq!(p[8].shape.capacity_share, Some(0.9));
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>() * default_servers();
        assert!(secs < 5.0 * 60.0, "{secs}");
        // --rate is the capacity; --arrivals does not change what the suite compares.
        let other = Suite::Bursts.points(&Overrides {
            rate: Some(10_000.0),
            arrivals: Some(Arrivals::Uniform),
            ..o()
        });
        assert_eq!(other[2].load, Load::Open { rate: 9000.0 });
        assert_eq!(other[3].arrivals, Arrivals::Pareto);
    }
}
