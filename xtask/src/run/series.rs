//! The arithmetic of sampled counters, kept apart from I/O so that it can be checked by hand:
//! a cumulative counter read between samples, its growth and rate over a window, a cost per
//! request, and the mean and coefficient of variation of a series of samples (as the
//! C-versus-Go paper computes it from CPU samples).
//!
//! It may call nothing else of xtask.

/// The arithmetic mean, or `None` for no values.
pub(crate) fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The sample standard deviation (divided by n - 1), or `None` below two values.
pub(crate) fn stdev(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values)?;
    let ss: f64 = values.iter().map(|v| (v - m) * (v - m)).sum();
    Some((ss / (values.len() - 1) as f64).sqrt())
}

/// The coefficient of variation, σ/μ, as the C-versus-Go paper computes it from CPU samples:
/// `None` below two values or when the mean is zero (an idle process has no variation to
/// speak of).
pub(crate) fn coefficient_of_variation(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    if m.abs() < f64::EPSILON {
        return None;
    }
    Some(stdev(values)? / m)
}

/// The value of a cumulative counter at time `t`, read off samples `(time, value)` sorted by
/// time: linear between the two samples around `t`, the first or last value outside them.
pub(crate) fn value_at(samples: &[(f64, f64)], t: f64) -> Option<f64> {
    let first = samples.first()?;
    let last = samples.last()?;
    if t <= first.0 {
        return Some(first.1);
    }
    if t >= last.0 {
        return Some(last.1);
    }
    let i = samples.partition_point(|s| s.0 <= t);
    let (a, b) = (samples[i - 1], samples[i]);
    let span = b.0 - a.0;
    if span <= 0.0 {
        return Some(b.1);
    }
    Some(a.1 + (b.1 - a.1) * (t - a.0) / span)
}

/// How much a cumulative counter grew between `start` and `end`.
pub(crate) fn growth(samples: &[(f64, f64)], start: f64, end: f64) -> Option<f64> {
    Some(value_at(samples, end)? - value_at(samples, start)?)
}

/// The rate of a cumulative counter over each interval between consecutive samples that lies
/// wholly within `[start, end]`: `(interval midpoint, growth per second)`.
pub(crate) fn interval_rates(samples: &[(f64, f64)], start: f64, end: f64) -> Vec<(f64, f64)> {
    // A little slack, so that a sample a millisecond past the window's end still closes the
    // last interval: the samples are 500 ms apart, the window's ends are not on the grid.
    let slack = 0.05;
    samples
        .windows(2)
        .filter(|w| w[0].0 >= start - slack && w[1].0 <= end + slack && w[1].0 > w[0].0)
        .map(|w| {
            (
                (w[0].0 + w[1].0) / 2.0,
                (w[1].1 - w[0].1) / (w[1].0 - w[0].0),
            )
        })
        .collect()
}

/// A cost per request, in microseconds: `seconds` of some resource spent while the server
/// completed `per_sec` requests a second for `window` seconds. `None` when nothing was
/// completed.
pub(crate) fn us_per_request(seconds: f64, per_sec: f64, window: f64) -> Option<f64> {
    let requests = per_sec * window;
    (requests >= 1.0).then(|| seconds * 1e6 / requests)
}

/// A count per request, like [`us_per_request`] but for events (context switches).
pub(crate) fn per_request(count: f64, per_sec: f64, window: f64) -> Option<f64> {
    let requests = per_sec * window;
    (requests >= 1.0).then(|| count / requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn cv_is_stdev_over_mean() {
        // Mean 5, sample variance 32/7.
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!(close(mean(&v).unwrap(), 5.0));
        assert!(close(stdev(&v).unwrap(), (32.0f64 / 7.0).sqrt()));
        assert!(close(
            coefficient_of_variation(&v).unwrap(),
            (32.0f64 / 7.0).sqrt() / 5.0
        ));
        assert_eq!(coefficient_of_variation(&[3.0, 3.0, 3.0]), Some(0.0));
        assert_eq!(coefficient_of_variation(&[3.0]), None);
        assert_eq!(coefficient_of_variation(&[0.0, 0.0]), None);
    }

    #[test]
    fn counters_between_samples() {
        let s = [(0.0, 0.0), (1.0, 10.0), (2.0, 30.0)];
        assert_eq!(value_at(&s, 0.5), Some(5.0));
        assert_eq!(value_at(&s, 1.5), Some(20.0));
        assert_eq!(value_at(&s, -1.0), Some(0.0));
        assert_eq!(value_at(&s, 9.0), Some(30.0));
        assert_eq!(growth(&s, 0.5, 1.5), Some(15.0));
        assert_eq!(value_at(&[], 1.0), None);
        let rates = interval_rates(&s, 0.0, 2.0);
        assert_eq!(rates, vec![(0.5, 10.0), (1.5, 20.0)]);
        assert_eq!(interval_rates(&s, 0.5, 2.0), vec![(1.5, 20.0)]);
    }

    #[test]
    fn cost_per_request() {
        // Half a CPU-second over 2 s at 50,000 requests/s: 5 µs a request.
        assert!(close(us_per_request(0.5, 50_000.0, 2.0).unwrap(), 5.0));
        assert!(close(per_request(300.0, 100.0, 3.0).unwrap(), 1.0));
        assert_eq!(us_per_request(1.0, 0.0, 5.0), None);
    }
}
