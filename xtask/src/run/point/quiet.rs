//! The harness keeps still on loadgen's CPU while loadgen measures: it shares that CPU (on a
//! small machine there is no other beside the server's), and each of its wake-ups, a 500 ms
//! sample of a server of 1000 threads above all (a walk of 1000 `/proc` entries), is a delay
//! of the client's and so latency charged to the server. Loadgen names its window as its clock
//! starts (`loadgen::announce`); from a little before the window to just after it, the harness
//! takes no sample, draws no progress and waits for nothing but loadgen's end, and it samples
//! the server at both edges instead.

use crate::plan::suites::{Point, Suite};

/// How long before the window, at the least, the harness takes its last sample and goes
/// still: past the longest pause between two of its looks (50 ms).
pub(crate) const BEFORE_S: f64 = 0.25;

/// How long before the window the harness goes still when a sample of the server takes
/// `sample_s` (a server of 1000 processes takes long to read): a sample begun just before
/// it and the edge's own sample both end 50 ms before the window.
pub(crate) fn lead_s(sample_s: f64) -> f64 {
    BEFORE_S.max(2.0 * sample_s + 0.05)
}

/// How long after the window it wakes: loadgen has read the window's edges by then.
pub(crate) const AFTER_S: f64 = 0.05;

/// Whether the harness keeps still through `point`'s window: every point's but the chat-cpu
/// suite's, whose subject is the server's CPU over time (the C-versus-Go paper's coefficient
/// of variation, from 500 ms samples in the window), not its latency.
pub(crate) fn keeps_still(point: &Point) -> bool {
    point.suite != Suite::ChatCpu
}

/// What the harness does at a moment of a point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step {
    /// Watch as usual (sample when due, tell the progress), pausing at most this many
    /// seconds before looking again.
    Watch { most_s: f64 },
    /// Take a sample now, then wait for loadgen's end until this time (Unix seconds), doing
    /// nothing else; sample again on waking.
    Still { until: f64 },
}

/// The step at `now` (Unix seconds) of a point whose measured window is `window` (`None`:
/// not yet known), going still `lead_s` before it.
pub(crate) fn step(now: f64, window: Option<(f64, f64)>, lead_s: f64) -> Step {
    let Some((start, end)) = window else {
        return Step::Watch { most_s: f64::MAX };
    };
    let still_from = start - lead_s;
    let until = end + AFTER_S;
    if now >= until {
        Step::Watch { most_s: f64::MAX }
    } else if now >= still_from {
        Step::Still { until }
    } else {
        Step::Watch {
            most_s: still_from - now,
        }
    }
}

/// The window loadgen announced on its stderr, if it has.
pub(crate) fn announced(lines: &[String]) -> Option<(f64, f64)> {
    lines
        .iter()
        .find_map(|l| loadgen::announce::parse_window_line(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_never_watches_inside_the_window() {
        // A window of 4 s from t = 100; the harness looks at every moment it could wake:
        // after each pause it was allowed, or after 1 ms at the most.
        let window = Some((100.0, 104.0));
        let mut now = 90.0;
        let mut still = 0;
        // Bounded: time moves forward by at least a microsecond each pass.
        while now < 110.0 {
            match step(now, window, BEFORE_S) {
                Step::Watch { most_s } => {
                    assert!(
                        !(100.0 - BEFORE_S..104.0 + AFTER_S).contains(&now),
                        "watching at {now}"
                    );
                    // It may wake at most this late, and never later than asked.
                    now += most_s.clamp(1e-6, 1e-3);
                }
                Step::Still { until } => {
                    assert!(now < until && until == 104.0 + AFTER_S);
                    still += 1;
                    now = until;
                }
            }
        }
        assert_eq!(still, 1, "one wait covers the whole window");
    }

    #[test]
    fn every_suite_keeps_still_but_chat_cpu_whose_subject_is_cpu_over_time() {
        let o = crate::plan::suites::Overrides::default();
        for suite in [
            Suite::Quick,
            Suite::EmperEcho,
            Suite::ChatRoom,
            Suite::Memory,
        ] {
            assert!(suite.points(&o).iter().all(keeps_still), "{suite:?}");
        }
        let chat = Suite::ChatCpu.points(&o);
        assert!(!chat.is_empty() && !chat.iter().any(keeps_still));
    }

    #[test]
    fn a_server_slow_to_sample_makes_the_harness_go_still_earlier() {
        assert_eq!(lead_s(0.01), BEFORE_S);
        assert!((lead_s(0.3) - 0.65).abs() < 1e-9);
        assert_eq!(
            step(99.0, Some((100.0, 104.0)), lead_s(0.5)),
            Step::Still {
                until: 104.0 + AFTER_S
            }
        );
    }

    #[test]
    fn before_the_window_is_known_the_harness_watches() {
        assert_eq!(step(5.0, None, BEFORE_S), Step::Watch { most_s: f64::MAX });
        assert_eq!(
            step(99.0, Some((100.0, 104.0)), BEFORE_S),
            Step::Watch {
                most_s: 1.0 - BEFORE_S
            }
        );
        assert_eq!(
            step(104.1, Some((100.0, 104.0)), BEFORE_S),
            Step::Watch { most_s: f64::MAX }
        );
    }

    #[test]
    fn the_window_is_read_from_loadgens_stderr() {
        let lines = vec![
            "loadgen: 1000/1000 connections up".to_string(),
            "loadgen: measuring from 100.500 to 104.500 (unix s)".to_string(),
        ];
        assert_eq!(announced(&lines), Some((100.5, 104.5)));
        assert_eq!(announced(&lines[..1]), None);
    }
}
