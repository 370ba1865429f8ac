//! The chat line protocol: client commands, server replies, their errors, and the line
//! splitter both sides read through.
//!
//! Lines are UTF-8 and end in `\n`; a client's `\r` before the `\n` is dropped. Tokens
//! are separated by single spaces, so `NICK  bob` has an empty first argument (and two
//! arguments in all); a trailing text argument (`SAY`'s text, `PING`'s token) is the rest
//! of the line and may hold spaces. The exact rules and `ERR` reasons are those of
//! `docs/PROTOCOL.md` and `docs/protocol-notes.md`.

mod command;
mod error;
mod line_buffer;
mod reply;

pub use command::Command;
pub use error::{ChatError, ReplyError};
pub use line_buffer::LineBuffer;
pub use reply::Reply;

/// Longest line a client may send, newline included.
pub const MAX_LINE: usize = 4096;

/// Longest line a client accepts from a server, newline included: a `MSG` wraps room,
/// seq and nick around a text of up to about 4 KiB, so server lines may pass
/// [`MAX_LINE`].
pub const MAX_SERVER_LINE: usize = 8192;

/// Longest name or room, in bytes.
pub const MAX_NAME: usize = 64;

/// Whether `s` is a valid name: 1 to [`MAX_NAME`] bytes of `[A-Za-z0-9_-]`. Rooms follow
/// the same rule, which is also what makes a room name a safe file name.
pub fn is_valid_name(s: &[u8]) -> bool {
    (1..=MAX_NAME).contains(&s.len())
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Longest decimal u64, `u64::MAX` being 20 digits.
const MAX_SEQ_DIGITS: usize = 20;

/// Parses a seq: 1 to 20 ASCII digits that fit in a u64, nothing else (no sign, no
/// spaces). Leading zeros are digits like any other.
fn parse_seq(s: &str) -> Option<u64> {
    if !(1..=MAX_SEQ_DIGITS).contains(&s.len()) {
        return None;
    }
    s.bytes().try_fold(0u64, |acc, b| {
        let digit = match b {
            b'0'..=b'9' => u64::from(b - b'0'),
            _ => return None,
        };
        acc.checked_mul(10)?.checked_add(digit)
    })
}

/// Appends `n` in decimal, without going through `fmt` machinery on the hot path.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; MAX_SEQ_DIGITS];
    let mut at = digits.len();
    loop {
        at -= 1;
        // `n % 10` is below 10, so the cast loses nothing.
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Splits a line into its first token and the rest after the first space; the rest is
/// `None` when there is no space at all, which is a line with no arguments.
fn split_word(line: &str) -> (&str, Option<&str>) {
    match line.split_once(' ') {
        Some((word, rest)) => (word, Some(rest)),
        None => (line, None),
    }
}

/// Splits the arguments after the first token into exactly `N` single-space separated
/// tokens (any of which may be empty); `None` for any other count.
fn split_args<const N: usize>(rest: Option<&str>) -> Option<[&str; N]> {
    let mut tokens = rest?.split(' ');
    let mut args = [""; N];
    for arg in &mut args {
        *arg = tokens.next()?;
    }
    match tokens.next() {
        Some(_) => None,
        None => Some(args),
    }
}

/// Splits the arguments after the first token into `N` single-space separated tokens and
/// the rest of the line (which may be empty but must be preceded by its space); `None`
/// when the line stops before the rest begins.
fn split_args_and_rest<const N: usize>(rest: Option<&str>) -> Option<([&str; N], &str)> {
    let mut rest = rest?;
    let mut args = [""; N];
    for arg in &mut args {
        let (token, after) = rest.split_once(' ')?;
        *arg = token;
        rest = after;
    }
    Some((args, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_valid_name(b"a"));
        assert!(is_valid_name(b"Bob_the-2nd"));
        assert!(is_valid_name(&[b'x'; MAX_NAME]));
        assert!(!is_valid_name(&[b'x'; MAX_NAME + 1]));
        assert!(!is_valid_name(b""));
        assert!(!is_valid_name(b"bob smith"));
        assert!(!is_valid_name(b"bob."));
        assert!(!is_valid_name(b"b\xc3\xa9b"));
        assert!(!is_valid_name(b"a\n"));
    }

    #[test]
    fn seqs() {
        assert_eq!(parse_seq("0"), Some(0));
        assert_eq!(parse_seq("42"), Some(42));
        assert_eq!(parse_seq("00000000000000000042"), Some(42));
        assert_eq!(parse_seq("000000000000000000042"), None, "21 digits");
        assert_eq!(parse_seq("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_seq("18446744073709551616"), None, "u64::MAX + 1");
        assert_eq!(parse_seq("99999999999999999999"), None);
        for bad in ["", "+1", "-1", " 1", "1 ", "1a", "0x10", "１"] {
            assert_eq!(parse_seq(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn decimal_encoding() {
        for n in [0, 1, 9, 10, 99, 100, 12345, u64::MAX - 1, u64::MAX] {
            let mut out = b"x".to_vec();
            push_u64(&mut out, n);
            assert_eq!(out, format!("x{n}").as_bytes());
        }
    }

    #[test]
    fn argument_splitting() {
        assert_eq!(split_word("NICK bob"), ("NICK", Some("bob")));
        assert_eq!(split_word("NICK"), ("NICK", None));
        assert_eq!(split_word("NICK "), ("NICK", Some("")));
        assert_eq!(split_args::<1>(Some("")), Some([""]));
        assert_eq!(split_args::<1>(Some(" bob")), None);
        assert_eq!(split_args::<2>(Some(" bob")), Some(["", "bob"]));
        assert_eq!(split_args::<2>(None), None);
        assert_eq!(
            split_args_and_rest::<1>(Some("r hi there")),
            Some((["r"], "hi there"))
        );
        assert_eq!(split_args_and_rest::<1>(Some("r ")), Some((["r"], "")));
        assert_eq!(split_args_and_rest::<1>(Some("r")), None);
        assert_eq!(split_args_and_rest::<0>(Some("")), Some(([], "")));
    }
}
