//! The `idle` suite: many connections, few of them active. 1,000 and 10,000 connections in
//! all (`--conns`), of which 100%, 10% and 1% send 16-byte echoes at one open-loop rate
//! whatever their number (`--rate`, default 10,000/s), the rest connected, silent and held
//! through the window (loadgen's `--idle-conns`); and at the largest count a quiet point, one
//! connection at 10/s beside all the others idle: the server's CPU at no load.
//!
//! 100,000 connections need 100,000 descriptors in the server and as many in loadgen: a
//! command line away (`--conns 1000,10000,100000`) where `ulimit -n` allows them and memory
//! holds them (this 2-CPU host's hard limit is 20,000, so they are not a default).
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, Load, Point, Shape, Stop, Sweep, Workload};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "idle",
    title: "Many idle connections, few active",
    help: "Many idle connections, few active: 1,000 and 10,000 connections, of which 100%, 10% and 1% send 16 B echoes at 10,000/s in all (`--rate`), the rest idle, and a quiet point (one at 10/s): memory per idle and per active connection, CPU at no load, the active clients' p99 as idle ones grow (about 9 min with the 16 default servers; 100,000 with --conns where ulimit -n allows)",
    duration: 0.5,
    warmup: 0.35,
    conns: &[1000, 10_000],
    repeats: 1,
    rate_meaning: "echoes/s of the active connections, whatever their share (default 10000)",
    extra_servers: &[],
    default_servers_help: None,
};

/// The active connections' rate in all, unless `--rate` says otherwise.
const DEFAULT_RATE: f64 = 10_000.0;
/// The shares of the connections that are active, in percent.
pub(crate) const ACTIVE_PERCENT: [usize; 3] = [100, 10, 1];
/// The quiet point's one active connection's rate.
const QUIET_RATE: f64 = 10.0;

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let echo16 = Workload::Echo {
        msg_size: 16,
        compute_us: 0,
    };
    let rate = cx.o.rate.unwrap_or(DEFAULT_RATE);
    let point = |series: String, total: usize, active: usize, rate: f64| {
        let shape = Shape {
            idle_conns: total - active,
            ..Shape::default()
        };
        cx.shaped(
            &series,
            format!("{series}-c{total}"),
            format!("{total} conns, {active} active @ {rate}/s"),
            active,
            (echo16, shape),
            Load::Open { rate },
            Stop::Duration(cx.duration),
        )
    };
    let mut out = Vec::new();
    for &total in &cx.conns {
        for pct in ACTIVE_PERCENT {
            let active = (total * pct / 100).max(1);
            out.push(point(format!("active-{pct}"), total, active, rate));
        }
    }
    if let Some(&total) = cx.conns.iter().max() {
        out.push(point("quiet".into(), total, 1, QUIET_RATE));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{default_servers, o};
    use super::super::{Load, Overrides, Point, Suite};

    #[test]
    fn idle_holds_the_total_and_the_active_rate_fixed_across_shares() {
        let p = Suite::Idle.points(&o());
        assert_eq!(p.len(), 2 * 3 + 1);
        let got: Vec<(usize, usize, String)> = p
            .iter()
            .map(|p| (p.conns, p.shape.idle_conns, p.series.clone()))
            .collect();
        assert_eq!(got[0], (1000, 0, "active-100".into()));
        assert_eq!(got[1], (100, 900, "active-10".into()));
        assert_eq!(got[2], (10, 990, "active-1".into()));
        assert_eq!(got[5], (100, 9900, "active-1".into()));
        assert_eq!(got[6], (1, 9999, "quiet".into()));
        assert!(
            p[..6]
                .iter()
                .all(|p| p.load == Load::Open { rate: 10_000.0 })
        );
        assert_eq!(p[6].load, Load::Open { rate: 10.0 });
        // The plots' x is every connection, idle ones included; the warmup waits for all.
        assert!(
            p.iter()
                .all(|p| p.x() == (p.conns + p.shape.idle_conns) as f64)
        );
        assert!(p[3..].iter().all(|p| p.warmup >= 4.0));
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>() * default_servers();
        assert!(secs < 10.0 * 60.0, "{secs}");
        // Where the machine allows, 100,000, and another rate.
        let big = Suite::Idle.points(&Overrides {
            conns: Some(vec![100_000]),
            rate: Some(2000.0),
            ..o()
        });
        assert_eq!(big[2].conns, 1000);
        assert_eq!(big[2].shape.idle_conns, 99_000);
        assert_eq!(big[0].load, Load::Open { rate: 2000.0 });
    }
}
