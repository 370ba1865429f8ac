//! The chat workloads: `SAY` lines that carry their own stamp, the checks of `ACK` and `MSG`
//! lines, and the per-member order check of the room profile.
//!
//! Every `SAY` line is exactly `msg_size` bytes, newline included. Its text is
//!
//! ```text
//!  stamp            conn     seq
//!  0123456789abcdef 0000002a 0000000000000007 xxxxxxxx...
//!  16 hex digits    8 hex    16 hex           padding to the line size
//! ```
//!
//! `stamp` is the due (open loop) or send (closed loop) time in nanoseconds after the run's
//! epoch, which the epoch shared by all threads makes a delivery latency at any member;
//! `conn` and `seq` name the message. A member rebuilds the text from those three fields
//! and compares it whole, so a byte changed anywhere in a delivered message is caught.

use std::collections::VecDeque;

use proto::chat::{Command, MAX_LINE};

/// `JOIN <room> <since>` with this `since` replays nothing: only live messages follow.
pub(crate) const NO_REPLAY: u64 = u64::MAX;
/// The one room of the ingest profile: every connection appends to it, as every client of
/// the C-versus-Go paper's chat server appends to its one chat file.
pub(crate) const INGEST_ROOM: &str = "ingest";
/// Hex digits of the stamp, the connection and the seq, and the spaces between them.
pub(crate) const TEXT_FIXED: usize = 16 + 1 + 8 + 1 + 16;
/// Own messages a member may have seen skipped by the `MSG` stream, or acknowledged ahead
/// of it, before the member is declared out of order. Far above any sane reordering.
const MAX_AHEAD: usize = 1 << 16;

/// The name of room `index` of the room profile.
pub(crate) fn room_name(index: usize) -> String {
    format!("r{index}")
}

/// The nick of connection `conn`; a member checks that a `MSG` names its sender.
pub(crate) fn nick(conn: u32) -> String {
    format!("c{conn}")
}

/// Bytes of a `SAY` line to `room` besides its text.
pub(crate) fn overhead(room: &str) -> usize {
    "SAY ".len() + room.len() + " ".len() + "\n".len()
}

/// The shortest and longest `SAY` line loadgen can send to `room`.
pub(crate) fn line_bounds(room: &str) -> (usize, usize) {
    (overhead(room) + TEXT_FIXED, MAX_LINE)
}

fn push_hex(out: &mut Vec<u8>, v: u64, digits: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(HEX[((v >> (4 * i)) & 0xf) as usize]);
    }
}

/// Writes the text of message `seq` of `conn`, exactly `len` bytes (at least
/// [`TEXT_FIXED`]), into `out`, which it clears first.
pub(crate) fn text(conn: u32, seq: u64, stamp: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    push_hex(out, stamp, 16);
    out.push(b' ');
    push_hex(out, u64::from(conn), 8);
    out.push(b' ');
    push_hex(out, seq, 16);
    if len > TEXT_FIXED {
        out.push(b' ');
        out.resize(len, b'x');
    }
}

/// Appends the `SAY` line of message `seq` of `conn` to `out`; `scratch` holds the text.
pub(crate) fn encode_say(
    room: &str,
    conn: u32,
    seq: u64,
    stamp: u64,
    line_len: usize,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    text(conn, seq, stamp, line_len - overhead(room), scratch);
    // The text is hex digits, spaces and `x`: always UTF-8.
    let text = std::str::from_utf8(scratch).unwrap_or_default();
    Command::Say { room, text }.encode(out);
}

/// The fields of a message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) stamp: u64,
    pub(crate) conn: u32,
    pub(crate) seq: u64,
}

fn hex(s: &[u8]) -> Option<u64> {
    s.iter().try_fold(0u64, |acc, &b| {
        let d = (b as char).to_digit(16)?;
        // Uppercase would parse too, but loadgen never writes it: such a text is corrupt.
        (!b.is_ascii_uppercase()).then_some(acc << 4 | u64::from(d))
    })
}

/// Reads the fields of a text loadgen wrote, and checks that the whole text is what those
/// fields give; `None` for anything else.
pub(crate) fn parse_text(t: &str, len: usize, scratch: &mut Vec<u8>) -> Option<Fields> {
    let b = t.as_bytes();
    if b.len() != len || len < TEXT_FIXED {
        return None;
    }
    let fields = Fields {
        stamp: hex(&b[0..16])?,
        conn: u32::try_from(hex(&b[17..25])?).ok()?,
        seq: hex(&b[26..42])?,
    };
    text(fields.conn, fields.seq, fields.stamp, len, scratch);
    (scratch[..] == *b).then_some(fields)
}

/// What a room member has seen of its room, to check that it receives every message
/// exactly once and in seq order.
///
/// A member learns of the room's messages two ways: others' as `MSG` lines, which the
/// server sends in seq order, and its own as `ACK` lines, also in seq order, but not
/// necessarily in order with the `MSG` lines. So `next`, the lowest seq not yet accounted
/// for, moves on when either stream reaches it; a `MSG` that skips seqs leaves them as
/// `gaps` that only the member's own `ACK`s may fill, and an `ACK` that runs ahead of the
/// `MSG` stream waits in `ahead` until the stream catches up.
#[derive(Debug)]
pub(crate) struct Member {
    /// Lowest seq not yet seen.
    pub(crate) next: u64,
    /// Seqs below `next` that the `MSG` stream skipped: own messages whose `ACK` is owed.
    gaps: VecDeque<u64>,
    /// Own seqs at or above `next`, acknowledged before the `MSG` stream got there.
    ahead: VecDeque<u64>,
    /// Highest own seq acknowledged.
    pub(crate) last_ack: Option<u64>,
}

/// What went wrong with a member's view of its room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disorder {
    /// A seq arrived twice, or after a later one.
    RepeatOrReorder,
    /// A seq will never arrive.
    Missing,
}

impl Member {
    /// A member whose room's next message gets seq `next` (from `JOINED`).
    pub(crate) fn new(next: u64) -> Member {
        Member {
            next,
            gaps: VecDeque::new(),
            ahead: VecDeque::new(),
            last_ack: None,
        }
    }

    fn advance(&mut self) {
        self.next += 1;
        // Bounded by the length of `ahead`.
        while self.ahead.front() == Some(&self.next) {
            self.ahead.pop_front();
            self.next += 1;
        }
    }

    /// Another member's message `seq` arrived.
    pub(crate) fn on_msg(&mut self, seq: u64) -> Result<(), Disorder> {
        if seq < self.next {
            return Err(Disorder::RepeatOrReorder);
        }
        // Bounded: at most MAX_AHEAD gaps before this returns.
        while self.next < seq {
            if self.ahead.front() == Some(&self.next) {
                self.ahead.pop_front();
            } else {
                if self.gaps.len() >= MAX_AHEAD {
                    return Err(Disorder::Missing);
                }
                self.gaps.push_back(self.next);
            }
            self.next += 1;
        }
        if self.ahead.front() == Some(&seq) {
            // The server sent this member its own message.
            return Err(Disorder::RepeatOrReorder);
        }
        self.advance();
        Ok(())
    }

    /// The member's own message got `ACK ... seq`.
    pub(crate) fn on_ack(&mut self, seq: u64) -> Result<(), Disorder> {
        if self.last_ack.is_some_and(|last| seq <= last) {
            return Err(Disorder::RepeatOrReorder);
        }
        self.last_ack = Some(seq);
        if seq < self.next {
            // Bounded by the length of `gaps`: gaps older than this ACK can never be filled,
            // since own ACKs come in seq order.
            return match self.gaps.pop_front() {
                Some(g) if g == seq => Ok(()),
                Some(g) if g < seq => Err(Disorder::Missing),
                _ => Err(Disorder::RepeatOrReorder),
            };
        }
        if seq == self.next {
            self.advance();
        } else {
            if self.ahead.len() >= MAX_AHEAD {
                return Err(Disorder::Missing);
            }
            self.ahead.push_back(seq);
        }
        Ok(())
    }

    /// Messages still missing once the room's last seq is `last`: the room is quiet, so
    /// everything up to it should have arrived.
    pub(crate) fn missing(&self, last: Option<u64>) -> u64 {
        let below = match last {
            Some(last) if last >= self.next => {
                (last + 1 - self.next).saturating_sub(self.ahead.len() as u64)
            }
            _ => 0,
        };
        below + self.gaps.len() as u64
    }

    /// Whether everything up to `last` has arrived.
    pub(crate) fn caught_up(&self, last: Option<u64>) -> bool {
        self.missing(last) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn say_lines_are_exactly_the_size() {
        let mut scratch = Vec::new();
        for size in [line_bounds("r7").0, 64, 100, 4096] {
            let mut out = Vec::new();
            encode_say("r7", 42, 7, 0x1234, size, &mut scratch, &mut out);
            assert_eq!(out.len(), size);
            let line = std::str::from_utf8(&out[..size - 1]).unwrap();
            let text = line.strip_prefix("SAY r7 ").unwrap();
            let f = parse_text(text, text.len(), &mut scratch).unwrap();
            assert_eq!(
                f,
                Fields {
                    stamp: 0x1234,
                    conn: 42,
                    seq: 7
                }
            );
        }
    }

    #[test]
    fn a_changed_byte_anywhere_in_a_text_is_caught() {
        let mut t = Vec::new();
        text(3, 9, 77, 60, &mut t);
        let mut scratch = Vec::new();
        let good = String::from_utf8(t.clone()).unwrap();
        assert!(parse_text(&good, 60, &mut scratch).is_some());
        assert!(parse_text(&good, 61, &mut scratch).is_none());
        for i in 0..t.len() {
            let mut bad = t.clone();
            bad[i] = if bad[i] == b'y' { b'z' } else { b'y' };
            let bad = String::from_utf8(bad).unwrap();
            assert!(parse_text(&bad, 60, &mut scratch).is_none(), "byte {i}");
        }
    }

    #[test]
    fn member_accepts_any_interleaving_of_acks_and_msgs() {
        // Own messages 11 and 13; others 10, 12, 14.
        let orders: &[&[(bool, u64)]] = &[
            &[
                (false, 10),
                (true, 11),
                (false, 12),
                (true, 13),
                (false, 14),
            ],
            &[
                (false, 10),
                (false, 12),
                (false, 14),
                (true, 11),
                (true, 13),
            ],
            &[
                (true, 11),
                (true, 13),
                (false, 10),
                (false, 12),
                (false, 14),
            ],
            &[
                (true, 11),
                (false, 10),
                (false, 12),
                (false, 14),
                (true, 13),
            ],
        ];
        for order in orders {
            let mut m = Member::new(10);
            for &(own, seq) in *order {
                let r = if own { m.on_ack(seq) } else { m.on_msg(seq) };
                assert_eq!(r, Ok(()), "{order:?} at {seq}");
            }
            assert_eq!(m.next, 15, "{order:?}");
            assert!(m.caught_up(Some(14)));
            assert_eq!(m.missing(Some(16)), 2);
        }
    }

    #[test]
    fn member_catches_repeats_reorders_and_losses() {
        let mut m = Member::new(1);
        m.on_msg(1).unwrap();
        assert_eq!(m.on_msg(1), Err(Disorder::RepeatOrReorder));

        let mut m = Member::new(1);
        m.on_msg(2).unwrap();
        assert_eq!(m.on_msg(1), Err(Disorder::RepeatOrReorder));

        // 1 was skipped by the MSG stream and the member's own ACK says 2: 1 is lost.
        let mut m = Member::new(1);
        m.on_msg(3).unwrap();
        assert_eq!(m.on_ack(2), Err(Disorder::Missing));

        // Its own message delivered to it as a MSG.
        let mut m = Member::new(1);
        m.on_ack(2).unwrap();
        assert_eq!(m.on_msg(2), Err(Disorder::RepeatOrReorder));

        // A message that never arrives shows at the end.
        let mut m = Member::new(1);
        m.on_msg(1).unwrap();
        m.on_msg(2).unwrap();
        assert!(!m.caught_up(Some(3)));
        assert_eq!(m.missing(Some(3)), 1);

        // ACKs out of order.
        let mut m = Member::new(1);
        m.on_ack(3).unwrap();
        assert_eq!(m.on_ack(2), Err(Disorder::RepeatOrReorder));
    }
}
