//! Per-thread histograms merged by adding are the histogram of all the values.

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use loadgen::Percentiles;
use loadgen::hist::{merge, new_histogram};

/// A small deterministic generator (xorshift), so that the test needs no randomness crate
/// and fails the same way every time.
fn values(n: usize) -> impl Iterator<Item = u64> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Latencies from 1 us to about 1 s, skewed towards the low end like real ones.
        let exp = x % 20;
        1_000 + (x >> 20) % (1u64 << (10 + exp))
    })
}

#[test]
fn merging_per_thread_histograms_equals_recording_into_one() {
    for threads in [1, 2, 3, 8] {
        let mut one = new_histogram();
        let mut parts: Vec<_> = (0..threads).map(|_| new_histogram()).collect();
        for (i, v) in values(200_000).enumerate() {
            one.record(v).unwrap();
            parts[i % threads].record(v).unwrap();
        }
        let merged = merge(parts.iter());
        assert_eq!(merged, one, "{threads} threads");
        assert_eq!(Percentiles::of(&merged), Percentiles::of(&one));
    }
}

#[test]
fn merging_decoded_histograms_equals_recording_into_one() {
    // What a script does with the --hist files of several runs.
    let mut one = new_histogram();
    let mut files = Vec::new();
    for chunk in values(50_000).collect::<Vec<_>>().chunks(10_000) {
        let mut h = new_histogram();
        for &v in chunk {
            h.record(v).unwrap();
            one.record(v).unwrap();
        }
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&h, &mut bytes).unwrap();
        files.push(bytes);
    }
    let decoded: Vec<hdrhistogram::Histogram<u64>> = files
        .iter()
        .map(|b| Deserializer::new().deserialize(&mut &b[..]).unwrap())
        .collect();
    assert_eq!(merge(decoded.iter()), one);
}

#[test]
fn values_beyond_the_range_saturate_instead_of_failing() {
    let mut wide = hdrhistogram::Histogram::<u64>::new_with_bounds(1, u64::MAX / 4, 3).unwrap();
    wide.record(u64::MAX / 8).unwrap();
    wide.record(5).unwrap();
    let merged = merge([&wide]);
    assert_eq!(merged.len(), 2);
    assert_eq!(
        merged.max(),
        merged.highest_equivalent(loadgen::hist::HIGHEST_NS)
    );
}
