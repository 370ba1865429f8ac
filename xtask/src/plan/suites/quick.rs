//! The `quick` suite: 16-byte echo in closed loop at 1 and 1000 connections, and an open-loop
//! point where every server handles the same rate, 5 repeats in Williams-ordered rounds of short points so that
//! the column's verdicts (`record::verdict`) find a 10% difference at 2% noise.
//!
//! Its points are cut to what 16 default servers × 5 repeats can run in about 5 minutes on 2
//! CPUs, so that `cargo xtask bench` from a clean clone ends within 10, its build included
//! (docs/METHOD.md says what the build costs): each point costs about half a second of start, stop
//! and settling beyond its windows, so points, not seconds of window, are what a default run
//! can spend. The closed loop at 10 and 100 connections (`--conns 1,10,100,1000`) and the
//! second open rate (`--rate 50000`, near the slowest server's saturation) are a command line
//! away.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, Load, Point, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "quick",
    title: "Echo, 16-byte messages",
    help: "Echo 16 B, closed loop at 1 and 1000 connections, and an open-loop point at a rate every server sustains: CPU per echo and latency at equal load; 5 repeats in rounds (a counterbalanced Williams order), enough for the significance test to tell servers apart (about 5 min with the 16 default servers)",
    // Short points, so that 5 rounds of 16 servers fit in about 5 minutes: the
    // repeats, not long windows, are what give an interval and a test. This is the open
    // point's window (0.75 s before the new servers came; 10,000 echoes at 20,000/s); the
    // closed ones take `CLOSED_SECS`. The warmup of a point at 1000 connections is 0.4 s
    // whatever this says (`warmup_for`).
    duration: 0.5,
    warmup: 0.35,
    conns: &[1, 1000],
    // Five rounds give each server 4 degrees of freedom in the verdicts' model, enough for a
    // column of sixteen to find a 10% difference at 2% noise in 96% of runs while holding its
    // false verdicts to 5% (docs/VERDICTS.md); three give 2, with little power.
    repeats: 5,
    rate_meaning: "echoes/s of the open-loop point (default 20000)",
    extra_servers: &[],
    default_servers_help: None,
};

const DEFAULT_OPEN_RATE: f64 = 20_000.0;
/// The measured window of the closed-loop points, unless `--duration` says otherwise:
/// shorter than the open point's, whose CPU per echo is what the test compares; the closed
/// points' throughput is shown with its interval only (0.4 s before the new servers came).
const CLOSED_SECS: f64 = 0.3;
/// Their warmup, unless `--warmup` says otherwise (at least a second per 2500 connections, as
/// every point's).
const CLOSED_WARMUP: f64 = 0.15;

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let echo16 = Workload::Echo {
        msg_size: 16,
        compute_us: 0,
    };
    let mut out = Vec::new();
    let closed = cx.o.duration.unwrap_or(CLOSED_SECS);
    for &c in &cx.conns {
        out.push(Point {
            warmup: cx.warmup_for(c, CLOSED_WARMUP),
            ..cx.point(
                "closed",
                format!("closed-c{c}"),
                conns_label(c),
                c,
                echo16,
                Load::Closed,
                Stop::Duration(closed),
            )
        });
    }
    let c = cx.conns.iter().copied().max().unwrap_or(1000);
    let rate = cx.o.rate.unwrap_or(DEFAULT_OPEN_RATE);
    out.push(cx.point(
        "open",
        format!("open-c{c}-r{rate}"),
        format!("{} @ {rate}/s", conns_label(c)),
        c,
        echo16,
        Load::Open { rate },
        Stop::Duration(cx.duration),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Load, Overrides, Point, Stop, Suite};

    #[test]
    fn quick_has_two_closed_points_and_one_open() {
        let p = Suite::Quick.points(&o());
        let conns: Vec<usize> = p.iter().map(|p| p.conns).collect();
        assert_eq!(conns, [1, 1000, 1000]);
        assert_eq!(p[2].load, Load::Open { rate: 20_000.0 });
        assert!(p[..2].iter().all(|p| p.stop == Stop::Duration(0.3)));
        assert_eq!(p[2].stop, Stop::Duration(0.5));
        assert_eq!(p[0].warmup, 0.15);
        assert_eq!(p[1].warmup, 0.4);
        assert_eq!(p[2].warmup, 0.4);
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        // A whole quick run of the sixteen default servers and its 5 repeats stays near five
        // minutes, so that the default bench, its release build included, ends within ten.
        let servers = conformance::SERVERS
            .iter()
            .filter(|s| s.bench.is_some_and(|b| b.default))
            .count();
        assert_eq!(servers, 16);
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>()
            * servers as f64
            * f64::from(Suite::Quick.default_repeats());
        assert!(secs < 330.0, "{secs}");
    }

    #[test]
    fn overrides_replace_conns_duration_and_rate() {
        let ov = Overrides {
            conns: Some(vec![1, 10]),
            duration: Some(1.0),
            warmup: Some(0.0),
            rate: Some(500.0),
            workers: 1,
            server_cpus: None,
            arrivals: None,
        };
        let p = Suite::Quick.points(&ov);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].conns, 10);
        assert_eq!(p[2].load, Load::Open { rate: 500.0 });
        assert!(
            p.iter()
                .all(|p| p.stop == Stop::Duration(1.0) && p.warmup == 0.0)
        );
    }
}
