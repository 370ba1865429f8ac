//! The sans-I/O matcher: counts the non-overlapping occurrences of a byte string in a
//! stream that arrives in chunks, exactly as a search of the whole stream at once would
//! (leftmost first, each match consuming its bytes), whatever the chunk boundaries.
//!
//! Every program of every runtime feeds the chunks it reads into a [`Scan`], so that what
//! differs between them is how they read, never how they count. The search inside a chunk
//! is `memchr::memmem`; only a match that straddles a boundary needs more: the scan keeps
//! the last `needle.len() - 1` bytes of the previous chunk that no match consumed (the
//! carry), and looks for a match that starts in the carry in a small window of the carry
//! and the first bytes of the next chunk:
//!
//! ```text
//!  previous chunk            next chunk
//!  ... x x x [c c c]  |  [d d d] d d d d d ...
//!            carry       needle.len()-1 bytes
//!            └── window ────┘
//! ```
//!
//! At most one match can start in the carry (it is shorter than the needle), and one that
//! does ends `skip` bytes into the next chunk, where the in-chunk search then starts.

use memchr::memmem::Finder;

/// Why a needle cannot be searched for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NeedleError {
    /// Every byte string contains the empty string everywhere: no count would mean anything.
    #[error("the needle is empty")]
    Empty,
}

/// A needle, prepared once and shared (read-only) by every scan of every worker.
#[derive(Debug, Clone)]
pub struct Matcher {
    finder: Finder<'static>,
}

impl Matcher {
    /// Prepares `needle` for searching.
    pub fn new(needle: &[u8]) -> Result<Matcher, NeedleError> {
        if needle.is_empty() {
            return Err(NeedleError::Empty);
        }
        Ok(Matcher {
            finder: Finder::new(needle).into_owned(),
        })
    }

    /// The needle's bytes.
    pub fn needle(&self) -> &[u8] {
        self.finder.needle()
    }

    /// A scan of one stream (one file) from its start.
    pub fn scan(&self) -> Scan<'_> {
        Scan {
            matcher: self,
            carry: Vec::with_capacity(self.needle().len().saturating_sub(1)),
            window: Vec::with_capacity(2 * self.needle().len()),
            matches: 0,
            bytes: 0,
        }
    }

    /// Occurrences in `haystack` searched whole: what a [`Scan`] over any split of it counts.
    pub fn count(&self, haystack: &[u8]) -> u64 {
        self.finder.find_iter(haystack).count() as u64
    }
}

/// The state of one stream's search between chunks.
#[derive(Debug)]
pub struct Scan<'m> {
    matcher: &'m Matcher,
    /// The tail of the stream so far that no match consumed, at most `needle.len() - 1`
    /// bytes: the only bytes a match that has not been counted yet can start in.
    ///
    /// # Invariant
    /// `carry.len() < needle.len()`, and no occurrence lies wholly inside it (it would
    /// have been counted already).
    carry: Vec<u8>,
    /// Scratch for the carry plus the next chunk's first bytes, kept to avoid an
    /// allocation per chunk.
    window: Vec<u8>,
    matches: u64,
    bytes: u64,
}

impl Scan<'_> {
    /// Counts what `chunk`, appended to the stream, completes.
    pub fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.bytes += chunk.len() as u64;
        let n = self.matcher.needle().len();
        // Bytes of `chunk` at the start that a match beginning in the carry consumed.
        let mut skip = 0;
        if !self.carry.is_empty() {
            let head = &chunk[..chunk.len().min(n - 1)];
            self.window.clear();
            self.window.extend_from_slice(&self.carry);
            self.window.extend_from_slice(head);
            if let Some(at) = self.matcher.finder.find(&self.window)
                && at < self.carry.len()
            {
                self.matches += 1;
                skip = at + n - self.carry.len();
            }
        }
        // The stream's tail after the last counted match starts at `tail_from` in `chunk`,
        // or (when nothing in `chunk` was consumed) still includes the carry.
        let mut tail_from = skip;
        let mut consumed = skip > 0;
        for at in self.matcher.finder.find_iter(&chunk[skip..]) {
            self.matches += 1;
            tail_from = skip + at + n;
            consumed = true;
        }
        let keep = n - 1;
        let rest = &chunk[tail_from..];
        if consumed || rest.len() >= keep {
            self.carry.clear();
            self.carry
                .extend_from_slice(&rest[rest.len().saturating_sub(keep)..]);
        } else {
            // A short chunk with no match: the carry grows by it, keeping its last bytes.
            self.carry.extend_from_slice(rest);
            let excess = self.carry.len().saturating_sub(keep);
            self.carry.drain(..excess);
        }
    }

    /// Occurrences counted so far.
    pub fn matches(&self) -> u64 {
        self.matches
    }

    /// Bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: a plain left-to-right scan that takes the first match and jumps
    /// past it, written without memchr so that it checks memmem too.
    fn naive(hay: &[u8], needle: &[u8]) -> u64 {
        let mut count = 0;
        let mut i = 0;
        while i + needle.len() <= hay.len() {
            if &hay[i..i + needle.len()] == needle {
                count += 1;
                i += needle.len();
            } else {
                i += 1;
            }
        }
        count
    }

    fn chunked(m: &Matcher, hay: &[u8], cuts: &[usize]) -> u64 {
        let mut scan = m.scan();
        let mut from = 0;
        for &cut in cuts {
            scan.feed(&hay[from..cut]);
            from = cut;
        }
        scan.feed(&hay[from..]);
        assert_eq!(scan.bytes(), hay.len() as u64);
        scan.matches()
    }

    #[test]
    fn empty_needle_is_an_error() {
        assert_eq!(Matcher::new(b"").unwrap_err(), NeedleError::Empty);
    }

    #[test]
    fn every_split_of_the_needle_over_one_boundary() {
        let needle = b"io_uring";
        let m = Matcher::new(needle).unwrap();
        let hay = b"xx io_uring yy";
        for cut in 0..=hay.len() {
            assert_eq!(chunked(&m, hay, &[cut]), 1, "cut at {cut}");
        }
    }

    #[test]
    fn every_split_over_two_boundaries() {
        let m = Matcher::new(b"abcab").unwrap();
        let hay = b"zabcabcabcabz";
        let want = naive(hay, b"abcab");
        for a in 0..=hay.len() {
            for b in a..=hay.len() {
                assert_eq!(chunked(&m, hay, &[a, b]), want, "cuts {a} {b}");
            }
        }
    }

    #[test]
    fn one_byte_chunks() {
        let m = Matcher::new(b"aba").unwrap();
        let hay = b"ababababa";
        let cuts: Vec<usize> = (1..hay.len()).collect();
        // Non-overlapping: "aba" "b" "aba" "ba" -> positions 0 and 4.
        assert_eq!(naive(hay, b"aba"), 2);
        assert_eq!(chunked(&m, hay, &cuts), 2);
    }

    #[test]
    fn overlapping_candidates_are_counted_once() {
        let m = Matcher::new(b"aa").unwrap();
        for cut in 0..=5 {
            assert_eq!(chunked(&m, b"aaaaa", &[cut]), 2, "cut at {cut}");
        }
    }

    #[test]
    fn needle_at_the_very_end_and_the_very_start() {
        let m = Matcher::new(b"end").unwrap();
        assert_eq!(chunked(&m, b"the end", &[4]), 1);
        assert_eq!(chunked(&m, b"endless", &[1]), 1);
    }

    #[test]
    fn single_byte_needle_keeps_no_carry() {
        let m = Matcher::new(b"\0").unwrap();
        assert_eq!(chunked(&m, b"\0a\0\0", &[1, 2, 3]), 3);
    }

    #[test]
    fn empty_chunks_change_nothing() {
        let m = Matcher::new(b"ring").unwrap();
        assert_eq!(chunked(&m, b"ring ring", &[2, 2, 2, 7, 7]), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any haystack over a small alphabet (so that partial matches abound), any needle,
        /// any cuts: the chunked count is the whole count.
        #[test]
        fn chunked_equals_whole(
            hay in proptest::collection::vec(0u8..3, 0..64),
            needle in proptest::collection::vec(0u8..3, 1..6),
            mut cuts in proptest::collection::vec(0usize..64, 0..6),
        ) {
            cuts.iter_mut().for_each(|c| *c = (*c).min(hay.len()));
            cuts.sort_unstable();
            let m = Matcher::new(&needle).unwrap();
            let want = naive(&hay, &needle);
            prop_assert_eq!(m.count(&hay), want);
            prop_assert_eq!(chunked(&m, &hay, &cuts), want);
        }
    }
}
