//! Latency histograms: how they are made, merged and written.
//!
//! Every worker records into its own HdrHistograms (nanoseconds, 3 significant digits, up to
//! an hour); the run's histogram is their sum. Percentiles are read off the sum, never averaged
//! across threads. Files come in the formats the HdrHistogram tools read: the V2 encoding
//! (`--hist`), the percentile table of `outputPercentileDistribution` (`--hgrm`) and the
//! interval log of `HistogramLogWriter` (`--interval-log`). Values are recorded in nanoseconds
//! and printed in microseconds.

use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
use serde::{Deserialize, Serialize};

/// The largest value a histogram tracks: an hour, in nanoseconds. Larger values are recorded
/// as this one.
pub const HIGHEST_NS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits of every histogram.
pub const SIGFIG: u8 = 3;
/// Recorded values are nanoseconds; printed ones are microseconds.
const NS_PER_US: f64 = 1_000.0;

/// A histogram with the bounds every loadgen histogram has, so that any two can be added.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NS, SIGFIG)
        .expect("1 ns to an hour at 3 significant digits are valid histogram bounds")
}

/// The sum of `parts`: what one histogram would hold had every value been recorded into it.
pub fn merge<'a>(parts: impl IntoIterator<Item = &'a Histogram<u64>>) -> Histogram<u64> {
    let mut sum = new_histogram();
    for part in parts {
        // Adding fails, before it changes anything, only for a source whose values the sum
        // cannot hold; a histogram made elsewhere with wider bounds is added value by value,
        // saturating like `record` does.
        if sum.add(part).is_err() {
            for v in part.iter_recorded() {
                sum.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }
    sum
}

/// Percentiles in microseconds, as they appear in the JSON summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// 99.99th percentile.
    pub p99_99: f64,
    /// 99.999th percentile.
    pub p99_999: f64,
    /// Largest value.
    pub max: f64,
    /// Smallest value.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Number of values.
    pub count: u64,
}

impl Percentiles {
    /// Each percentile the larger of the two: a bound on what a merged histogram would give
    /// where the histograms themselves are not at hand (the count is both's).
    pub fn most(&self, o: &Percentiles) -> Percentiles {
        Percentiles {
            p50: self.p50.max(o.p50),
            p90: self.p90.max(o.p90),
            p99: self.p99.max(o.p99),
            p99_9: self.p99_9.max(o.p99_9),
            p99_99: self.p99_99.max(o.p99_99),
            p99_999: self.p99_999.max(o.p99_999),
            max: self.max.max(o.max),
            min: self.min.min(o.min),
            mean: self.mean.max(o.mean),
            count: self.count + o.count,
        }
    }

    /// Reads the percentiles off a histogram of nanoseconds; all zero when it is empty.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let q = |q: f64| h.value_at_quantile(q) as f64 / NS_PER_US;
        Percentiles {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
            p99_999: q(0.99999),
            max: h.max() as f64 / NS_PER_US,
            min: h.min() as f64 / NS_PER_US,
            mean: h.mean() / NS_PER_US,
            count: h.len(),
        }
    }
}

/// The histograms of a run, merged over its threads. Values are nanoseconds.
#[derive(Debug, Clone)]
pub struct Histograms {
    /// Latency: from the due time in the open loop, from the send time in the closed loop.
    pub latency: Histogram<u64>,
    /// Service time: from the moment the message was written to its reply.
    pub service: Histogram<u64>,
    /// Chat room profile: from a message's send time to its arrival at each other member.
    pub delivery: Option<Histogram<u64>>,
    /// Latency per interval of `interval`, from the start of the window.
    pub intervals: Vec<Histogram<u64>>,
    /// Length of each of `intervals`.
    pub interval: Duration,
    /// Wall-clock time at which the measured window began.
    pub window_start: SystemTime,
}

impl Default for Histograms {
    /// Empty histograms, as a summary read back from JSON has (they travel apart).
    fn default() -> Histograms {
        Histograms {
            latency: new_histogram(),
            service: new_histogram(),
            delivery: None,
            intervals: Vec::new(),
            interval: Duration::from_secs(1),
            window_start: SystemTime::UNIX_EPOCH,
        }
    }
}

impl Histograms {
    /// Writes the latency histogram in the V2 encoding (uncompressed), which every HdrHistogram
    /// implementation decodes and adds.
    pub fn write_v2(&self, w: &mut impl Write) -> io::Result<()> {
        V2Serializer::new()
            .serialize(&self.latency, w)
            .map(drop)
            .map_err(|e| io::Error::other(format!("{e:?}")))
    }

    /// Writes the latency percentile table in the HdrHistogram text format, in microseconds.
    pub fn write_hgrm(&self, w: &mut impl Write) -> io::Result<()> {
        write_hgrm(&self.latency, NS_PER_US, w)
    }

    /// Writes the interval histograms as an HdrHistogram interval log (format 1.3), values in
    /// nanoseconds, `Interval_Max` in microseconds.
    pub fn write_interval_log(&self, w: &mut impl Write) -> io::Result<()> {
        let start = self
            .window_start
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        writeln!(w, "#[Logged with loadgen {}]", env!("CARGO_PKG_VERSION"))?;
        writeln!(w, "#[Histogram log format version 1.3]")?;
        writeln!(w, "#[StartTime: {start:.3} (seconds since epoch)]")?;
        writeln!(w, "#[BaseTime: {start:.3} (seconds since epoch)]")?;
        writeln!(
            w,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        )?;
        // The crate's writer prints its own header lines first, so it writes into a buffer
        // that follows ours; its only header line is a comment.
        let mut body = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        let mut log = IntervalLogWriterBuilder::new()
            .with_max_value_divisor(NS_PER_US)
            .begin_log_with(&mut body, &mut serializer)?;
        for (i, h) in self.intervals.iter().enumerate() {
            log.write_histogram(h, self.interval * i as u32, self.interval, None)
                .map_err(|e| io::Error::other(e.to_string()))?;
        }
        w.write_all(&body)
    }
}

/// Writes `h` as `outputPercentileDistribution` does, 5 ticks per half distance, values
/// divided by `unit_ratio`.
pub fn write_hgrm(h: &Histogram<u64>, unit_ratio: f64, w: &mut impl Write) -> io::Result<()> {
    let digits = usize::from(h.sigfig());
    writeln!(
        w,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let value = v.value_iterated_to() as f64 / unit_ratio;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                writeln!(
                    w,
                    "{value:>12.digits$} {q:>2.12} {total:>10} {:>14.2}",
                    1.0 / (1.0 - q)
                )?;
            } else {
                writeln!(w, "{value:>12.digits$} {q:>2.12} {total:>10}")?;
            }
        }
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            h.mean() / unit_ratio,
            h.stdev() / unit_ratio,
            h.max() as f64 / unit_ratio,
        )
    };
    writeln!(
        w,
        "#[Mean    = {mean:>12.digits$}, StdDeviation   = {stdev:>12.digits$}]"
    )?;
    writeln!(
        w,
        "#[Max     = {max:>12.digits$}, Total count    = {:>12}]",
        h.len()
    )?;
    writeln!(
        w,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    )
}

/// The sub-bucket count HdrHistogram derives from the significant digits: the power of two
/// that holds `2 * 10^sigfig` distinct values.
fn sub_bucket_count(sigfig: u8) -> u64 {
    let largest = 2 * 10u64.pow(u32::from(sigfig));
    largest.next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_of_two_sets_of_percentiles_bounds_each() {
        let (mut a, mut b) = (new_histogram(), new_histogram());
        for v in 1..=1000u64 {
            a.record(v * 1000).unwrap();
            b.record(v * 500 + 200_000).unwrap();
        }
        let (pa, pb) = (Percentiles::of(&a), Percentiles::of(&b));
        let m = pa.most(&pb);
        assert_eq!(m.p50, pa.p50.max(pb.p50));
        assert_eq!(m.p99, pa.p99.max(pb.p99));
        assert_eq!(m.max, pa.max.max(pb.max));
        assert_eq!(m.min, pa.min.min(pb.min));
        assert_eq!(m.count, 2000);
        // No less than what the merged histogram gives.
        let merged = Percentiles::of(&merge([&a, &b]));
        assert!(
            m.p99 >= merged.p99 && m.p50 >= merged.p50,
            "{m:?} {merged:?}"
        );
    }

    #[test]
    fn hgrm_has_the_standard_shape() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let mut out = Vec::new();
        write_hgrm(&h, 1000.0, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "       Value     Percentile TotalCount 1/(1-Percentile)"
        );
        assert_eq!(lines[1], "");
        assert!(lines[2].starts_with("       1.000 0.000000000000          1           1.00"));
        let last_row = lines[lines.len() - 4];
        assert!(
            last_row.contains(" 1.000000000000       1000"),
            "{last_row}"
        );
        assert!(lines[lines.len() - 3].starts_with("#[Mean    =      500.5"));
        assert!(lines[lines.len() - 2].contains("Total count    =         1000]"));
        assert_eq!(
            lines[lines.len() - 1],
            format!(
                "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
                h.buckets(),
                2048
            )
        );
    }

    #[test]
    fn percentiles_are_in_microseconds() {
        let mut h = new_histogram();
        for v in 1..=100_000u64 {
            h.record(v * 10).unwrap();
        }
        let p = Percentiles::of(&h);
        assert!((p.p50 - 500.0).abs() / 500.0 < 0.001, "{p:?}");
        assert!((p.p99 - 990.0).abs() / 990.0 < 0.001, "{p:?}");
        assert_eq!(p.count, 100_000);
        assert_eq!(Percentiles::of(&new_histogram()), Percentiles::default());
    }

    #[test]
    fn interval_log_parses_back() {
        use hdrhistogram::serialization::Deserializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
        let mut a = new_histogram();
        a.record(5_000).unwrap();
        let mut b = new_histogram();
        b.record(7_000).unwrap();
        b.record(9_000).unwrap();
        let hs = Histograms {
            latency: merge([&a, &b]),
            service: new_histogram(),
            delivery: None,
            intervals: vec![a, b],
            interval: Duration::from_secs(1),
            window_start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        };
        let mut out = Vec::new();
        hs.write_interval_log(&mut out).unwrap();
        let mut counts = Vec::new();
        let mut starts = Vec::new();
        for entry in IntervalLogIterator::new(&out) {
            match entry.unwrap() {
                LogEntry::Interval(i) => {
                    starts.push(i.start_timestamp());
                    let bytes = decode_base64(i.encoded_histogram());
                    let h: Histogram<u64> =
                        Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                    counts.push(h.len());
                }
                LogEntry::StartTime(t) | LogEntry::BaseTime(t) => {
                    assert_eq!(t, Duration::from_secs(1_700_000_000));
                }
            }
        }
        assert_eq!(counts, [1, 2]);
        assert_eq!(starts, [Duration::ZERO, Duration::from_secs(1)]);
    }

    /// Standard base64 with padding, enough to read back what the log writer wrote.
    fn decode_base64(s: &str) -> Vec<u8> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        };
        let mut out = Vec::new();
        for chunk in s.trim_end_matches('=').as_bytes().chunks(4) {
            let mut acc = 0u32;
            for (i, &c) in chunk.iter().enumerate() {
                acc |= u32::from(value(c)) << (18 - 6 * i);
            }
            let bytes = acc.to_be_bytes();
            out.extend_from_slice(&bytes[1..chunk.len()]);
        }
        out
    }
}
