//! The summary math, kept apart from I/O so that it can be checked by hand: mean, coefficient
//! of variation, medians and spread over repeats, counters read between samples, cost per
//! request, and latency histograms merged by adding them (never by averaging percentiles).

use std::io::{self, Write};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde::{Deserialize, Serialize};

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

/// The median (the mean of the middle two for an even count), or `None` for no values.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The spread of repeats: (max - min) / median, as a fraction. `None` for fewer than two
/// values or a zero median.
pub(crate) fn spread(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = median(values)?;
    if m.abs() < f64::EPSILON {
        return None;
    }
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    Some((max - min) / m)
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

/// Latency percentiles in microseconds, read off a histogram of nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Percentiles {
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p95: f64,
    pub(crate) p99: f64,
    pub(crate) p99_9: f64,
    pub(crate) p99_99: f64,
    pub(crate) p99_999: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
    pub(crate) count: u64,
}

const NS_PER_US: f64 = 1_000.0;

impl Percentiles {
    pub(crate) fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let q = |q: f64| h.value_at_quantile(q) as f64 / NS_PER_US;
        Percentiles {
            p50: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
            p99_999: q(0.99999),
            max: h.max() as f64 / NS_PER_US,
            mean: h.mean() / NS_PER_US,
            count: h.len(),
        }
    }
}

/// An empty histogram that any loadgen histogram can be added to: it grows to fit (for
/// the tests: a histogram not made by loadgen).
#[cfg(test)]
pub(crate) fn empty_histogram() -> Histogram<u64> {
    let mut h = Histogram::new(3).expect("3 significant digits is a valid precision");
    h.auto(true);
    h
}

/// Decodes a histogram in the V2 encoding (plain or deflated), as loadgen's `--hist` writes.
pub(crate) fn decode_histogram(bytes: &[u8]) -> Result<Histogram<u64>> {
    Deserializer::new()
        .deserialize(&mut io::Cursor::new(bytes))
        .map_err(|e| anyhow::anyhow!("{e:?}"))
        .context("decoding an HdrHistogram (V2)")
}

/// Encodes a histogram in the V2 encoding, which every HdrHistogram implementation reads.
pub(crate) fn encode_histogram(h: &Histogram<u64>) -> Result<Vec<u8>> {
    use hdrhistogram::serialization::{Serializer, V2Serializer};
    let mut out = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut out)
        .map_err(|e| anyhow::anyhow!("{e:?}"))
        .context("encoding an HdrHistogram (V2)")?;
    Ok(out)
}

/// The sum of `parts`: the histogram one run would have recorded had it made every
/// measurement of all of them.
pub(crate) fn merge<'a>(parts: impl IntoIterator<Item = &'a Histogram<u64>>) -> Histogram<u64> {
    loadgen::hist::merge(parts)
}

/// Writes the percentile table of `h` (nanoseconds) in microseconds, in the text format of
/// HdrHistogram's `outputPercentileDistribution` (5 ticks per half distance), which the
/// HdrHistogram plotter reads: loadgen's own `--hgrm` writer.
pub(crate) fn write_hgrm(h: &Histogram<u64>, w: &mut impl Write) -> io::Result<()> {
    loadgen::hist::write_hgrm(h, NS_PER_US, w)
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
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(spread(&[90.0, 100.0, 110.0]), Some(0.2));
        assert_eq!(spread(&[100.0]), None);
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

    #[test]
    fn merging_equals_recording_into_one() {
        let mut a = empty_histogram();
        let mut b = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        let mut one = empty_histogram();
        for v in 1..=10_000u64 {
            let ns = v * 997;
            if v % 3 == 0 {
                a.record(ns).unwrap();
            } else {
                b.record(ns).unwrap();
            }
            one.record(ns).unwrap();
        }
        let sum = merge([&a, &b]);
        assert_eq!(sum.len(), one.len());
        assert_eq!(Percentiles::of(&sum), Percentiles::of(&one));
        // Averaging the parts' percentiles would not give this.
        let p99 = Percentiles::of(&sum).p99;
        assert!(close(p99, one.value_at_quantile(0.99) as f64 / 1000.0));
    }

    #[test]
    fn histograms_survive_encoding() {
        let mut h = empty_histogram();
        for v in [1_000u64, 2_000, 50_000, 1_000_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h).unwrap()).unwrap();
        assert_eq!(Percentiles::of(&back), Percentiles::of(&h));
        assert!(decode_histogram(b"not a histogram").is_err());
    }

    #[test]
    fn hgrm_has_the_standard_shape() {
        let mut h = empty_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let mut out = Vec::new();
        write_hgrm(&h, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)"));
        assert!(text.contains("#[Max     ="));
        let last_row = text.lines().rfind(|l| !l.starts_with('#')).unwrap();
        assert!(last_row.contains("1.000000000000"), "{last_row}");
    }
}
