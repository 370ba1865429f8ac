//! [`OutBuf`]: a chat connection's write buffer, the bytes on their way to the
//! socket. Appends go to the end, writes take from the front; the front is
//! reclaimed lazily, so a connection that keeps up never moves a byte.

/// Bytes waiting for the socket, in order.
#[derive(Debug, Default)]
pub(crate) struct OutBuf {
    buf: Vec<u8>,
    /// # Invariant
    /// `sent <= buf.len()`; `buf[sent..]` is what is still to be written, and
    /// `sent == 0` whenever that is empty.
    sent: usize,
}

impl OutBuf {
    /// The bytes still to be written.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.sent..]
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.sent
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `bytes` behind what is pending.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        // Reclaim the written front once it is at least half the buffer: each
        // byte is then moved at most once on average, and the buffer does not
        // grow while the client keeps reading.
        if self.sent > 0 && self.sent >= self.buf.len() / 2 {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Moves `bytes` behind what is pending, leaving `bytes` empty. Into an
    /// empty buffer the two are swapped, so nothing is copied.
    pub(crate) fn append(&mut self, bytes: &mut Vec<u8>) {
        if self.is_empty() {
            std::mem::swap(&mut self.buf, bytes);
            bytes.clear();
        } else {
            self.extend(bytes);
            bytes.clear();
        }
    }

    /// Records that the first `n` pending bytes were written.
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.sent += n.min(self.len());
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_across_partial_writes_and_reclaims_the_front() {
        let mut out = OutBuf::default();
        out.extend(b"hello ");
        out.extend(b"world");
        out.consume(3);
        assert_eq!(out.pending(), b"lo world");
        out.extend(b"!");
        assert_eq!(out.pending(), b"lo world!");
        out.consume(7);
        assert_eq!(out.pending(), b"d!");
        // More than half written: the next append moves the tail to the front.
        out.extend(b"?");
        assert_eq!((out.sent, out.pending()), (0, &b"d!?"[..]));
        out.consume(3);
        assert!(out.is_empty());
        assert_eq!(out.buf.len(), 0);
    }

    #[test]
    fn appending_to_an_empty_buffer_swaps_and_otherwise_copies() {
        let mut out = OutBuf::default();
        let mut bytes = b"abc".to_vec();
        let ptr = bytes.as_ptr();
        out.append(&mut bytes);
        assert!(bytes.is_empty());
        assert_eq!((out.pending(), out.buf.as_ptr()), (&b"abc"[..], ptr));
        let mut more = b"de".to_vec();
        out.append(&mut more);
        assert!(
            more.is_empty() && more.capacity() >= 2,
            "the caller keeps its memory"
        );
        assert_eq!(out.pending(), b"abcde");
    }
}
