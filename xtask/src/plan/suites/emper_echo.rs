//! The `emper-echo` suite: the io_uring (EMPER) paper's echo benchmark, its Figures 5 to 8:
//! 1 to 10,000 connections, 2500 echoes each where they fit in the time budget, without and
//! with 200 µs of work per echo.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, Load, NO_RATE, Point, Stop, Sweep, Workload, conns_label, expected_rate};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "emper-echo",
    title: "Echo as in the io_uring (EMPER) paper",
    help: "The io_uring paper's echo benchmark (Figures 5 to 8): 1 to 10,000 connections, 2500 echoes each or a bounded duration, without and with 200 µs of work per echo",
    duration: 10.0,
    warmup: 1.0,
    conns: &[1, 3, 10, 30, 100, 300, 1000, 3000, 5000, 10_000],
    repeats: 1,
    rate_meaning: NO_RATE,
    extra_servers: &[],
    default_servers_help: None,
};

/// The paper's echoes per connection.
const EMPER_REQUESTS: u64 = 2500;
/// The paper's work per echo in Figures 6 and 7.
pub(crate) const EMPER_COMPUTE_US: u64 = 200;

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    let duration = cx.duration;
    for compute_us in [0, EMPER_COMPUTE_US] {
        let series = if compute_us == 0 {
            "no-work".to_string()
        } else {
            format!("work-{compute_us}us")
        };
        for &c in &cx.conns {
            // The paper's 2500 echoes a connection, unless that would take longer than the
            // duration budget; then the budget bounds the point.
            let fits = cx.o.duration.is_none()
                && c as f64 * EMPER_REQUESTS as f64
                    / expected_rate(compute_us, cx.o.workers.max(1))
                    <= duration;
            let (stop, mut how) = if fits {
                (
                    Stop::Requests(EMPER_REQUESTS),
                    "2500 echoes/conn".to_string(),
                )
            } else {
                (Stop::Duration(duration), format!("{duration} s"))
            };
            if compute_us > 0 {
                how = format!("{compute_us} µs work, {how}");
            }
            out.push(cx.point(
                &series,
                format!("{series}-c{c}"),
                format!("{}, {how}", conns_label(c)),
                c,
                Workload::Echo {
                    msg_size: 16,
                    compute_us,
                },
                Load::Closed,
                stop,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Overrides, Point, Stop, Suite};

    #[test]
    fn emper_echo_uses_2500_echoes_where_they_fit() {
        let p = Suite::EmperEcho.points(&o());
        assert_eq!(p.len(), 20);
        let first = &p[0];
        assert_eq!((first.conns, first.stop), (1, Stop::Requests(2500)));
        let big = p.iter().find(|p| p.conns == 10_000).unwrap();
        assert_eq!(big.stop, Stop::Duration(10.0));
        assert_eq!(big.warmup, 4.0);
        assert!(
            p.iter()
                .any(|p| p.label == "10 conns, 200 µs work, 2500 echoes/conn")
        );
        // With 200 µs a echo and one worker, 10 connections would take 6 s of 10: they fit;
        // 30 would not.
        let work: Vec<&Point> = p
            .iter()
            .filter(|p| p.workload.compute_us() == 200)
            .collect();
        assert_eq!(work[2].stop, Stop::Requests(2500));
        assert_eq!(work[3].stop, Stop::Duration(10.0));
        // An explicit duration bounds every point.
        let short = Suite::EmperEcho.points(&Overrides {
            duration: Some(2.0),
            ..o()
        });
        assert!(short.iter().all(|p| p.stop == Stop::Duration(2.0)));
    }
}
