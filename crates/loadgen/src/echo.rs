//! The echo payload: what each message carries, and the check of every reply byte.
//!
//! ```text
//!  0        8        16                         msg_size
//!  +--------+--------+--------------------------+
//!  |  seq   | stamp  | filler(conn, seq)  ...   |
//!  +--------+--------+--------------------------+
//!   u64 LE   u64 LE   repeating 8-byte word
//! ```
//!
//! `seq` counts the connection's messages from 0, `stamp` is the due time (open loop) or the
//! send time (closed loop) in nanoseconds after the run's epoch. The filler depends on the
//! connection and the seq, so a reply that belongs to another message or another connection
//! fails the check as surely as a flipped bit. A reply is checked against the message rebuilt
//! from `(conn, seq, stamp)`; nothing is stored per message but the stamp. With a mix of
//! sizes (`--msg-size 64:95,64K:5`) a message's size is drawn from `(conn, seq)` too
//! (`dist::Sizes::pick`), so the check derives it again.

/// The header: seq and stamp.
pub(crate) const MIN_MSG_SIZE: usize = 16;
/// Far above any message size the servers are measured with; keeps buffers bounded.
pub(crate) const MAX_MSG_SIZE: usize = 1 << 20;

/// Writes message `seq` of connection `conn` into `out`, whose length is the message size.
pub(crate) fn encode(conn: u32, seq: u64, stamp: u64, out: &mut [u8]) {
    out[..8].copy_from_slice(&seq.to_le_bytes());
    out[8..16].copy_from_slice(&stamp.to_le_bytes());
    let word = filler(conn, seq).to_le_bytes();
    for chunk in out[16..].chunks_mut(8) {
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

fn filler(conn: u32, seq: u64) -> u64 {
    // Any mixing that differs between neighbouring (conn, seq) pairs will do; this one is an
    // odd multiplier (a bijection on u64) over both.
    (seq ^ (u64::from(conn) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// Rebuilds the messages of one connection to check replies against, one at a time.
///
/// Replies arrive split at any byte; the checker keeps the message it is in the middle of.
#[derive(Debug)]
pub(crate) struct Expect {
    /// As long as the largest message; the one being checked is its first `len` bytes.
    buf: Vec<u8>,
    len: usize,
    /// The (conn, seq) that `buf` holds, if any.
    holds: Option<(u32, u64)>,
}

impl Expect {
    /// A checker of messages of at most `max_size` bytes.
    pub(crate) fn new(max_size: usize) -> Expect {
        Expect {
            buf: vec![0; max_size],
            len: 0,
            holds: None,
        }
    }

    /// Whether `got` equals bytes `[off, off + got.len())` of message `seq` of `conn`, of
    /// `size` bytes.
    pub(crate) fn matches(
        &mut self,
        (conn, seq, stamp): (u32, u64, u64),
        size: usize,
        off: usize,
        got: &[u8],
    ) -> bool {
        if self.holds != Some((conn, seq)) || self.len != size {
            self.len = size.min(self.buf.len());
            encode(conn, seq, stamp, &mut self.buf[..self.len]);
            self.holds = Some((conn, seq));
        }
        self.buf[..self.len].get(off..off + got.len()) == Some(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_of_every_size_is_checked() {
        for size in [16, 17, 23, 24, 100, 4096] {
            let mut msg = vec![0; size];
            encode(3, 77, 123_456, &mut msg);
            // The checker is sized for the largest message of a mix.
            let mut expect = Expect::new(8192);
            let m = (3, 77, 123_456);
            assert!(expect.matches(m, size, 0, &msg));
            for i in 0..size {
                let mut bad = msg.clone();
                bad[i] ^= 0x01;
                assert!(!expect.matches(m, size, 0, &bad), "byte {i} of {size}");
            }
            // Split at every point, as a TCP stream may split it.
            for cut in 0..size {
                assert!(expect.matches(m, size, 0, &msg[..cut]));
                assert!(expect.matches(m, size, cut, &msg[cut..]));
            }
        }
    }

    #[test]
    fn another_message_or_connection_does_not_match() {
        let mut a = vec![0; 40];
        encode(1, 5, 9, &mut a);
        let mut expect = Expect::new(40);
        assert!(!expect.matches((1, 6, 9), 40, 0, &a));
        assert!(!expect.matches((2, 5, 9), 40, 0, &a));
        assert!(!expect.matches((1, 5, 10), 40, 0, &a));
        assert!(!expect.matches((1, 5, 9), 40, 30, &a[..20]), "past the end");
    }
}
