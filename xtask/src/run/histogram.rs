//! Latency histograms as loadgen writes them (HdrHistogram, V2, in nanoseconds): decoded,
//! encoded, merged by adding them (never by averaging percentiles), their percentiles read in
//! microseconds, and the `.hgrm` percentile table written.
//!
//! It may call nothing else of xtask.

use std::io::{self, Write};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde::{Deserialize, Serialize};

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

pub(crate) const NS_PER_US: f64 = 1_000.0;

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
