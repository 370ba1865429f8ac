//! A tiny seeded random number generator (xorshift64*) and a seekable byte pattern, so
//! that random tests print their seed and can be replayed exactly with
//! `CONFORMANCE_SEED=<seed>`.

use std::env;
use std::time::{SystemTime, UNIX_EPOCH};

/// xorshift64* (Vigna, 2016): plenty for choosing split sizes, and a few lines long.
#[derive(Debug, Clone)]
pub struct Rng {
    /// # Invariant
    /// Never zero, which is xorshift's only fixed point.
    state: u64,
}

impl Rng {
    /// A generator for `seed`; equal seeds give equal streams.
    pub fn new(seed: u64) -> Rng {
        Rng {
            state: splitmix64(seed) | 1,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`; `n` must not be 0.
    pub fn below(&mut self, n: u64) -> u64 {
        // The modulo bias is at most n / 2^64: irrelevant for test sizes.
        self.next_u64() % n
    }

    /// A size in `1..=max`, log-uniform: every power of two is as likely as any
    /// other, so single bytes and whole mebibytes both come up often.
    pub fn log_size(&mut self, max: usize) -> usize {
        let bits = usize::BITS - max.leading_zeros();
        let base = 1usize << self.below(u64::from(bits));
        (base + self.below(base as u64) as usize).min(max)
    }
}

/// The seed for this test: `CONFORMANCE_SEED` if set, otherwise the clock.
pub fn seed() -> u64 {
    if let Some(seed) = env::var("CONFORMANCE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    now.as_secs() ^ u64::from(now.subsec_nanos()).rotate_left(32)
}

/// Fills `buf` with the bytes at `offset..offset + buf.len()` of the endless
/// pseudo-random stream named by `seed`: the writer and the reader of a test derive
/// the same bytes independently, whatever sizes they write and read in.
pub fn pattern(seed: u64, offset: u64, buf: &mut [u8]) {
    let mut pos = offset;
    let mut i = 0;
    while i < buf.len() {
        let word = splitmix64(seed ^ (pos / 8).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes();
        let skip = (pos % 8) as usize;
        let n = (8 - skip).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word[skip..skip + n]);
        i += n;
        pos += n as u64;
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_seekable() {
        let mut whole = vec![0; 100];
        pattern(7, 3, &mut whole);
        let mut parts = vec![0; 100];
        let (a, b) = parts.split_at_mut(13);
        pattern(7, 3, a);
        pattern(7, 16, b);
        assert_eq!(whole, parts);
        let mut other = vec![0; 100];
        pattern(8, 3, &mut other);
        assert_ne!(whole, other);
    }

    #[test]
    fn log_size_stays_in_range_and_reaches_both_ends() {
        let mut rng = Rng::new(1);
        let sizes: Vec<usize> = (0..2000).map(|_| rng.log_size(1 << 20)).collect();
        assert!(sizes.iter().all(|&s| (1..=1 << 20).contains(&s)));
        assert!(sizes.contains(&1));
        assert!(sizes.iter().any(|&s| s > 1 << 19));
    }
}
