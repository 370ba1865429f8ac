//! The bytes of a reply stream between reads: every whole message is checked where it lies in
//! the read, and only a message torn across reads is copied and kept, up to a bound (a longer
//! incomplete message than any valid one is a corrupt stream, so the buffer stays bounded
//! whatever the server sends). The kv and http workloads parse their replies through it.

use crate::error::Fault;

/// What is left of the stream after the last whole message.
#[derive(Debug, Default)]
pub(crate) struct Torn {
    buf: Vec<u8>,
}

impl Torn {
    /// Takes messages off the stream (what was kept, then `data`) with `take`, which checks
    /// the message at the front and returns its length, or `None` when it is incomplete;
    /// keeps the incomplete rest. Stops at `take`'s first fault, and fails with
    /// [`Fault::Corrupt`] when the rest is longer than `max_partial`.
    pub(crate) fn feed(
        &mut self,
        data: &[u8],
        max_partial: usize,
        mut take: impl FnMut(&[u8]) -> Result<Option<usize>, Fault>,
    ) -> Result<(), Fault> {
        // Most reads hold whole messages: parse them in place and copy only a torn tail.
        let owned;
        let mut rest: &[u8] = if self.buf.is_empty() {
            data
        } else {
            self.buf.extend_from_slice(data);
            owned = std::mem::take(&mut self.buf);
            &owned
        };
        // Bounded: each pass consumes at least one byte.
        while !rest.is_empty() {
            match take(rest)? {
                Some(used) => rest = &rest[used.clamp(1, rest.len())..],
                None => break,
            }
        }
        if rest.len() > max_partial {
            return Err(Fault::Corrupt);
        }
        let mut keep = std::mem::take(&mut self.buf);
        keep.clear();
        keep.extend_from_slice(rest);
        self.buf = keep;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages are lines; `take` returns a line's length with its newline.
    fn lines(torn: &mut Torn, data: &[u8], got: &mut Vec<String>) -> Result<(), Fault> {
        torn.feed(data, 8, |rest| {
            Ok(rest.iter().position(|&b| b == b'\n').map(|i| {
                got.push(String::from_utf8_lossy(&rest[..i]).into_owned());
                i + 1
            }))
        })
    }

    #[test]
    fn whole_torn_and_overlong_messages() {
        let mut torn = Torn::default();
        let mut got = Vec::new();
        lines(&mut torn, b"ab\ncd\nef", &mut got).unwrap();
        assert_eq!(got, ["ab", "cd"]);
        lines(&mut torn, b"g\n", &mut got).unwrap();
        assert_eq!(got, ["ab", "cd", "efg"]);
        assert_eq!(
            lines(&mut torn, b"123456789", &mut got),
            Err(Fault::Corrupt)
        );
    }
}
