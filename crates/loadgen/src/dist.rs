//! The distributions a run draws from per message, each a pure function of `(conn, seq)` so
//! that nothing is stored per message and the reply check derives the draw again: message
//! sizes ([`Sizes`], `--msg-size` and kv's `--value-size`) and kv's keys ([`KeyDist`],
//! `--key-dist`).
//!
//! A draw is a hash of the connection, the message's seq and a salt of its own (SplitMix64's
//! finaliser, [`mix`]): as good as a seeded generator for a benchmark's purposes, and free of
//! state. What a run may draw is fixed before the clock starts (a size's cumulative
//! thresholds, the Zipf sampler's constants), so a draw allocates nothing.

use std::fmt;
use std::str::FromStr;

/// A bijection on `u64` with good avalanche (the SplitMix64 finaliser).
pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The hash of message `seq` of connection `conn` under `salt`.
pub(crate) fn draw(conn: u32, seq: u64, salt: u64) -> u64 {
    mix(seq ^ (u64::from(conn) << 40) ^ salt)
}

/// `h`'s top 53 bits as a fraction in `[0, 1)`.
pub(crate) fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The salt of the size draws, so that a message's size does not predict its kv op or key.
const SIZE_SALT: u64 = 0x5A5A_0000_0000_0000;

/// The sizes of a run's messages (echo) or values (kv): one size, or a mix of sizes each with
/// its weight, message `seq` of connection `conn` drawn from it by a hash.
///
/// `--msg-size` grammar: comma-separated `SIZE[:WEIGHT]`, a size in bytes with an optional
/// `K`/`KiB` or `M`/`MiB` suffix, a weight any positive number (default 1): `64` is one size,
/// `64,1024` half and half, `64:95,64K:5` 95% of 64 B and 5% of 64 KiB.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes {
    /// Each size with its weight, as given.
    entries: Vec<(usize, f64)>,
    /// Per entry, the hash values below which (and above the previous entry's) it is drawn;
    /// the last is `u64::MAX`.
    cum: Vec<u64>,
}

impl Sizes {
    /// Every message of `size` bytes.
    pub fn fixed(size: usize) -> Sizes {
        Sizes {
            entries: vec![(size, 1.0)],
            cum: vec![u64::MAX],
        }
    }

    /// A mix of sizes with their weights; an error when empty, or a weight is not positive.
    pub fn mix(entries: Vec<(usize, f64)>) -> Result<Sizes, String> {
        if entries.is_empty() {
            return Err("no size given".into());
        }
        if let Some((_, w)) = entries.iter().find(|(_, w)| !(w.is_finite() && *w > 0.0)) {
            return Err(format!("a weight must be a positive number, not {w}"));
        }
        let total: f64 = entries.iter().map(|(_, w)| w).sum();
        let mut acc = 0.0;
        let mut cum: Vec<u64> = entries
            .iter()
            .map(|(_, w)| {
                acc += w;
                // The cast saturates: the last threshold is set exactly below.
                (acc / total * u64::MAX as f64) as u64
            })
            .collect();
        if let Some(last) = cum.last_mut() {
            *last = u64::MAX;
        }
        Ok(Sizes { entries, cum })
    }

    /// The one size, if there is only one.
    pub fn single(&self) -> Option<usize> {
        match self.entries.as_slice() {
            [(size, _)] => Some(*size),
            _ => None,
        }
    }

    /// The size of message `seq` of connection `conn`.
    pub fn pick(&self, conn: u32, seq: u64) -> usize {
        if let [(size, _)] = self.entries.as_slice() {
            return *size;
        }
        let h = draw(conn, seq, SIZE_SALT);
        // A few entries: a linear scan is as fast as anything.
        let i = self.cum.iter().position(|&c| h <= c).unwrap_or(0);
        self.entries[i].0
    }

    /// The smallest size.
    pub fn min(&self) -> usize {
        self.entries.iter().map(|e| e.0).min().unwrap_or(0)
    }

    /// The largest size.
    pub fn max(&self) -> usize {
        self.entries.iter().map(|e| e.0).max().unwrap_or(0)
    }

    /// The mean size the weights give.
    pub fn mean(&self) -> f64 {
        let total: f64 = self.entries.iter().map(|e| e.1).sum();
        self.entries.iter().map(|&(s, w)| s as f64 * w).sum::<f64>() / total
    }
}

impl From<usize> for Sizes {
    fn from(size: usize) -> Sizes {
        Sizes::fixed(size)
    }
}

impl fmt::Display for Sizes {
    /// As `--msg-size` takes it: `64`, or `64:95,65536:5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(size) = self.single() {
            return write!(f, "{size}");
        }
        for (i, (size, w)) in self.entries.iter().enumerate() {
            write!(f, "{}{size}:{w}", if i > 0 { "," } else { "" })?;
        }
        Ok(())
    }
}

/// A size in bytes, with an optional binary suffix.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let n: usize = digits.parse().ok()?;
    let scale = match unit {
        "" => 1,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        _ => return None,
    };
    n.checked_mul(scale)
}

impl FromStr for Sizes {
    type Err = String;

    fn from_str(s: &str) -> Result<Sizes, String> {
        let bad = || {
            format!(
                "{s:?} is not a size or a mix of sizes (64, 64,1024, or 64:95,64K:5: SIZE[:WEIGHT], K and M are KiB and MiB)"
            )
        };
        let entries = s
            .split(',')
            .map(|item| {
                let (size, weight) = match item.split_once(':') {
                    Some((size, w)) => (size, w.parse::<f64>().map_err(|_| bad())?),
                    None => (item, 1.0),
                };
                Ok((parse_size(size).ok_or_else(bad)?, weight))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Sizes::mix(entries).map_err(|e| format!("{s:?}: {e}"))
    }
}

/// How kv's keys are drawn (`--key-dist`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    #[default]
    Uniform,
    /// Zipf with this exponent: key `k` (from 0) drawn in proportion to `1 / (k + 1)^s`, so
    /// `key:000000000000` is the hottest (YCSB's 0.99, memtier's `--key-zipf-exp`).
    Zipf(f64),
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::Uniform => f.write_str("uniform"),
            KeyDist::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

impl FromStr for KeyDist {
    type Err = String;

    fn from_str(s: &str) -> Result<KeyDist, String> {
        let bad =
            || format!("--key-dist takes uniform or zipf:S (S above 0, at most 10), not {s:?}");
        match s {
            "uniform" => Ok(KeyDist::Uniform),
            _ => {
                let exp: f64 = s
                    .strip_prefix("zipf:")
                    .and_then(|e| e.parse().ok())
                    .ok_or_else(bad)?;
                if exp > 0.0 && exp <= 10.0 {
                    Ok(KeyDist::Zipf(exp))
                } else {
                    Err(bad())
                }
            }
        }
    }
}

/// Zipf's law over ranks `1..=n` by rejection-inversion (Hörmann and Derflinger, "Rejection-
/// inversion to generate variates from monotone discrete distributions", 1996, as Apache
/// Commons RNG has it): constant time and memory whatever `n`, a handful of `ln` and `exp`
/// per draw, and on average fewer than 1.1 uniforms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Zipf {
    n: f64,
    exp: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

/// Uniforms a Zipf draw may take before it settles for its last candidate (each is
/// accepted with probability over 0.5; 64 refusals in a row do not happen).
const ZIPF_TRIES: u64 = 64;

impl Zipf {
    /// Ranks `1..=n` (at least 1), exponent `exp > 0`.
    pub(crate) fn new(n: u64, exp: f64) -> Zipf {
        let mut z = Zipf {
            n: n as f64,
            exp,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A rank from 1 to `n`, from the hash `h` (and further hashes of it when the first
    /// candidate is refused).
    pub(crate) fn sample(&self, h: u64) -> u64 {
        let mut k = 1.0;
        for i in 0..ZIPF_TRIES {
            let u01 = unit(if i == 0 { h } else { mix(h ^ i) });
            let u = self.h_integral_n + u01 * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                break;
            }
        }
        k as u64
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exp * x.ln()).exp()
    }

    /// The integral of `h`, `(x^(1 - exp) - 1) / (1 - exp)` (`ln x` at `exp = 1`).
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exp) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exp)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, and its limit 1 at 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, and its limit 1 at 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_one_a_list_and_a_weighted_mix() {
        let one: Sizes = "64".parse().unwrap();
        assert_eq!(one, Sizes::fixed(64));
        assert_eq!(one.single(), Some(64));
        assert_eq!(one.to_string(), "64");
        let list: Sizes = "64,1K,1MiB".parse().unwrap();
        assert_eq!((list.min(), list.max()), (64, 1 << 20));
        assert_eq!(list.single(), None);
        let m: Sizes = "64:95,64K:5".parse().unwrap();
        assert_eq!(m.to_string(), "64:95,65536:5");
        assert_eq!(m.to_string().parse::<Sizes>().unwrap(), m);
        assert!((m.mean() - (0.95 * 64.0 + 0.05 * 65536.0)).abs() < 1e-9);
        for bad in ["", "x", "64:", "64:0", "64:-1", "64,", "12Q", "64:95,,1"] {
            assert!(bad.parse::<Sizes>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_mix_has_its_stated_mean_and_shares_over_a_long_sequence() {
        // 95% of 64 B, 5% of 64 KiB, over 400,000 messages of 4 connections: the share of
        // large ones has a standard error of 0.034 points, the mean of 0.7%; 3% is far
        // outside chance and far inside a wrong weighting.
        let m: Sizes = "64:95,64K:5".parse().unwrap();
        let n = 100_000u64;
        let (mut large, mut sum) = (0u64, 0u64);
        for conn in 0..4 {
            for seq in 0..n {
                let s = m.pick(conn, seq);
                assert!(s == 64 || s == 65536);
                large += u64::from(s == 65536);
                sum += s as u64;
            }
        }
        let share = large as f64 / (4 * n) as f64;
        assert!((share - 0.05).abs() < 0.002, "{share}");
        let mean = sum as f64 / (4 * n) as f64;
        assert!(
            (mean / m.mean() - 1.0).abs() < 0.03,
            "{mean} vs {}",
            m.mean()
        );
        // An even list: each size about a third.
        let l: Sizes = "16,100,1000".parse().unwrap();
        let mean = (0..n).map(|s| l.pick(9, s) as f64).sum::<f64>() / n as f64;
        assert!((mean / l.mean() - 1.0).abs() < 0.02, "{mean}");
        assert_eq!(
            m.pick(3, 77),
            m.pick(3, 77),
            "a pure function of (conn, seq)"
        );
    }

    #[test]
    fn key_dists_parse_and_refuse_nonsense() {
        assert_eq!("uniform".parse(), Ok(KeyDist::Uniform));
        assert_eq!("zipf:0.99".parse(), Ok(KeyDist::Zipf(0.99)));
        assert_eq!(KeyDist::Zipf(1.2).to_string(), "zipf:1.2");
        for bad in [
            "zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:x", "zipf:11", "normal",
        ] {
            assert!(bad.parse::<KeyDist>().is_err(), "{bad:?} was accepted");
        }
    }

    /// `sum_{k=1}^{n} k^-s`.
    fn harmonic(n: u64, s: f64) -> f64 {
        (1..=n).map(|k| (k as f64).powf(-s)).sum()
    }

    #[test]
    fn zipf_gives_its_top_ranks_the_frequency_the_law_says() {
        // 1,000,000 draws: the top rank's count (around 10-20% of them) has a standard error
        // under 0.1% of the draws; 2% relative is well outside chance and well inside an
        // exponent off by 0.05.
        let draws = 1_000_000u64;
        for (n, s) in [
            (1000u64, 0.99),
            (100_000, 0.99),
            (1000, 1.0),
            (1000, 1.2),
            (50, 0.5),
        ] {
            let z = Zipf::new(n, s);
            let mut top = [0u64; 3];
            for i in 0..draws {
                let k = z.sample(mix(i ^ 0xABCD));
                assert!((1..=n).contains(&k));
                if k <= 3 {
                    top[k as usize - 1] += 1;
                }
            }
            let h = harmonic(n, s);
            for (r, &count) in top.iter().enumerate() {
                let want = ((r + 1) as f64).powf(-s) / h;
                let got = count as f64 / draws as f64;
                assert!(
                    (got / want - 1.0).abs() < 0.02,
                    "n {n}, s {s}: rank {} drawn {got}, Zipf says {want}",
                    r + 1
                );
            }
        }
    }
}
