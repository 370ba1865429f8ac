//! The smallest latency a capacity run can tell apart, measured before its searches: the
//! floor server (`floor-epoll`, one thread on epoll and nothing else) probed at the first
//! rate the searches try, under the same quota and placement, with the same client. Its
//! latency at the objective's percentile is what the kernel, the machine and the client cost
//! alone; a server cannot show less, so an objective below it would find every server
//! wanting (or call every miss the client's) and measure nothing of the runtimes. Such an
//! objective is refused, with the number and an objective this machine can resolve.

use crate::plan::capacity::Slo;

/// The server whose latency is the machine's resolution.
pub(super) const FLOOR: &str = "floor-epoll";

/// The floor's latency at the objective's percentile, at one rate.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Resolution {
    pub(super) rate: f64,
    pub(super) percentile: String,
    pub(super) value_us: f64,
    /// Whether the client kept its schedule in the probe (else the figure is the client's).
    pub(super) schedule_ok: bool,
}

impl Resolution {
    /// The line the run prints and the report keeps.
    pub(super) fn line(&self) -> String {
        format!(
            "resolution: {FLOOR}'s {} at {:.0}/s is {}{}: the least latency this machine and its client can show at that percentile",
            self.percentile,
            self.rate,
            show(self.value_us),
            if self.schedule_ok {
                ""
            } else {
                " (the client did not keep its schedule: the figure is partly its own)"
            }
        )
    }

    /// Why `slo` cannot be measured here, when it lies below the resolution.
    pub(super) fn refusal(&self, slo: &Slo) -> Option<String> {
        (slo.percentile == self.percentile && slo.limit_us < self.value_us).then(|| {
            format!(
                "this machine cannot resolve {slo}: {FLOOR}'s {} at {:.0}/s is {} (the kernel, \
                 the machine and the client alone, no runtime), so every server would miss it; \
                 choose an objective above it, such as --slo {}={}",
                self.percentile,
                self.rate,
                show(self.value_us),
                self.percentile,
                suggestion(self.value_us)
            )
        })
    }
}

fn show(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// An objective twice the resolution, rounded up to a number `--slo` takes and a reader
/// remembers: 1, 2 or 5 times a power of ten, in µs or ms.
fn suggestion(resolution_us: f64) -> String {
    let want = (resolution_us * 2.0).max(1.0);
    let mut scale = 1.0;
    // Bounded: the scale grows tenfold each pass past any finite latency.
    while scale * 10.0 <= want {
        scale *= 10.0;
    }
    let nice = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * scale)
        .find(|v| *v >= want)
        .unwrap_or(scale * 10.0);
    if nice >= 1000.0 {
        format!("{}ms", nice / 1000.0)
    } else {
        format!("{nice}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(value_us: f64) -> Resolution {
        Resolution {
            rate: 2000.0,
            percentile: "p99".into(),
            value_us,
            schedule_ok: true,
        }
    }

    #[test]
    fn an_objective_below_the_floor_is_refused_with_the_number_and_one_above_is_not() {
        let slo: Slo = "p99=1ms".parse().unwrap();
        let why = res(1300.0).refusal(&slo).expect("below the floor");
        assert!(why.contains("cannot resolve p99=1ms"), "{why}");
        assert!(why.contains("1.30 ms"), "{why}");
        assert!(why.contains("--slo p99=5ms"), "{why}");
        assert_eq!(res(400.0).refusal(&slo), None);
        // Another percentile than the one probed is not judged by it.
        let p999: Slo = "p99.9=1ms".parse().unwrap();
        assert_eq!(res(1300.0).refusal(&p999), None);
    }

    #[test]
    fn the_suggestion_is_a_round_objective_at_least_twice_the_floor() {
        assert_eq!(suggestion(310.0), "1ms");
        assert_eq!(suggestion(240.0), "500us");
        assert_eq!(suggestion(1300.0), "5ms");
        assert_eq!(suggestion(4000.0), "10ms");
        for us in [1.0, 7.0, 99.0, 501.0, 12_345.0] {
            let s: Slo = format!("p99={}", suggestion(us)).parse().unwrap();
            assert!(s.limit_us >= 2.0 * us, "{us}: {s}");
        }
    }
}
