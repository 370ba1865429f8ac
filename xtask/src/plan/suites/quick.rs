//! The `quick` suite: 16-byte echo in closed loop at 1, 10, 100 and 1000 connections, and two
//! open-loop points where every server handles the same rate, 5 rotated repeats of short
//! points so that the Mann-Whitney test can give verdicts.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, Load, Point, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "quick",
    title: "Echo, 16-byte messages",
    help: "Echo 16 B, closed loop at 1, 10, 100, 1000 connections, and two open-loop points (a rate every server sustains, and one near the slowest one's saturation): CPU per echo and latency at equal load; 5 rotated repeats, enough for the significance test to tell servers apart (about 6 min)",
    // Short points, so that 5 rotated repeats fit in about 6 minutes: the repeats, not long
    // windows, are what give an interval and a test. This is the open points' window; the
    // closed ones take `CLOSED_SECS`.
    duration: 0.75,
    warmup: 0.35,
    conns: &[1, 10, 100, 1000],
    // The Mann-Whitney test of 3 + 3 repeats cannot go below p = 0.10, of 4 + 4 only to
    // 0.029 with no overlap at all, while 5 + 5 reaches 0.008 and still says p < 0.05 with
    // two of the 25 pairs out of order.
    repeats: 5,
    rate_meaning: "echoes/s of the first open-loop point (default 20000); the second runs at 2.5 times it",
    extra_servers: &[],
    default_servers_help: None,
};

const DEFAULT_OPEN_RATE: f64 = 20_000.0;
/// The measured window of the closed-loop points, unless `--duration` says otherwise:
/// shorter than the open points', whose CPU per echo is what the test compares; the closed
/// points' throughput is shown with its interval only.
const CLOSED_SECS: f64 = 0.4;
/// Their warmup, unless `--warmup` says otherwise (at least a second per 2500 connections, as
/// every point's).
const CLOSED_WARMUP: f64 = 0.2;
/// The second open-loop rate, as a multiple of the first: 50,000/s by default, near what the
/// slowest server (a process per connection) completes at 1000 connections on one core.
const HIGH_RATE_FACTOR: f64 = 2.5;

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
    let low = cx.o.rate.unwrap_or(DEFAULT_OPEN_RATE);
    for rate in [low, low * HIGH_RATE_FACTOR] {
        out.push(cx.point(
            "open",
            format!("open-c{c}-r{rate}"),
            format!("{} @ {rate}/s", conns_label(c)),
            c,
            echo16,
            Load::Open { rate },
            Stop::Duration(cx.duration),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Load, Overrides, Point, Stop, Suite};

    #[test]
    fn quick_has_four_closed_points_and_two_open() {
        let p = Suite::Quick.points(&o());
        let conns: Vec<usize> = p.iter().map(|p| p.conns).collect();
        assert_eq!(conns, [1, 10, 100, 1000, 1000, 1000]);
        assert_eq!(p[4].load, Load::Open { rate: 20_000.0 });
        assert_eq!(p[5].load, Load::Open { rate: 50_000.0 });
        assert!(p[..4].iter().all(|p| p.stop == Stop::Duration(0.4)));
        assert!(p[4..].iter().all(|p| p.stop == Stop::Duration(0.75)));
        assert_eq!(p[0].warmup, 0.2);
        assert_eq!(p[3].warmup, 0.4);
        assert_eq!(p[4].warmup, 0.4);
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        // A whole quick run of the nine default servers and its 5 repeats stays near six
        // minutes.
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>()
            * 9.0
            * f64::from(Suite::Quick.default_repeats());
        assert!(secs < 400.0, "{secs}");
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
        };
        let p = Suite::Quick.points(&ov);
        assert_eq!(p.len(), 4);
        assert_eq!(p[2].conns, 10);
        assert_eq!(p[2].load, Load::Open { rate: 500.0 });
        assert_eq!(p[3].load, Load::Open { rate: 1250.0 });
        assert!(
            p.iter()
                .all(|p| p.stop == Stop::Duration(1.0) && p.warmup == 0.0)
        );
    }
}
