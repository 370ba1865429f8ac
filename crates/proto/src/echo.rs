//! The echo protocol: buffer sizes every echo server shares, and the message cutter
//! behind `--compute-us`.
//!
//! Echo itself needs no codec: every byte received is sent back unchanged. What the
//! servers must agree on is how much they read at once, how much unsent echo they hold
//! per connection, and, with `--compute-us N > 0`, where the stream's `--msg-size`
//! messages end (see `docs/protocol-notes.md`).

use std::num::NonZeroUsize;

/// Size of every server's read buffer, so that the runtimes compare on equal terms.
pub const READ_BUF: usize = 16 * 1024;

/// Most unsent echo bytes a server holds for one connection; past this it stops reading
/// that connection until the peer reads.
pub const MAX_PENDING: usize = 64 * 1024;

/// Default `--msg-size`, the message size of the echo benchmark in the io_uring paper.
pub const DEFAULT_MSG_SIZE: usize = 16;

/// Cuts an echo stream into `--msg-size` messages for `--compute-us`.
///
/// The cutter only counts: feed it the length of each chunk read, and it says how many
/// messages that chunk completed (each one costs a spin before it is echoed) and how many
/// bytes of the next message it has seen so far (the tail a server holds back until the
/// message completes, or echoes without a spin at EOF).
///
/// ```
/// use std::num::NonZeroUsize;
/// use proto::echo::MessageCutter;
///
/// let mut cutter = MessageCutter::new(NonZeroUsize::new(16).expect("non-zero"));
/// assert_eq!(cutter.feed(10), 0);
/// assert_eq!(cutter.partial_len(), 10);
/// assert_eq!(cutter.feed(40), 3); // bytes 0..48 are three messages
/// assert_eq!(cutter.partial_len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct MessageCutter {
    msg_size: NonZeroUsize,
    /// # Invariant
    /// `partial < msg_size`.
    partial: usize,
}

impl MessageCutter {
    /// A cutter at the start of a stream, for messages of `msg_size` bytes.
    pub fn new(msg_size: NonZeroUsize) -> Self {
        Self {
            msg_size,
            partial: 0,
        }
    }

    /// Accounts for `n` more bytes of the stream; returns how many messages became
    /// complete.
    pub fn feed(&mut self, n: usize) -> usize {
        let size = self.msg_size.get();
        let mut complete = n / size;
        let rest = n % size;
        // `partial + rest` can overflow for huge message sizes; compare against the room
        // left in the current message instead.
        let room = size - self.partial;
        if rest >= room {
            complete += 1;
            self.partial = rest - room;
        } else {
            self.partial += rest;
        }
        complete
    }

    /// Bytes of the message in progress (`0..msg_size`): the tail a server holds back.
    pub fn partial_len(&self) -> usize {
        self.partial
    }

    /// The message size this cutter was made with.
    pub fn msg_size(&self) -> usize {
        self.msg_size.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cutter(size: usize) -> MessageCutter {
        MessageCutter::new(NonZeroUsize::new(size).expect("test sizes are non-zero"))
    }

    #[test]
    fn whole_messages_in_one_chunk() {
        let mut c = cutter(16);
        assert_eq!(c.feed(64), 4);
        assert_eq!(c.partial_len(), 0);
        assert_eq!(c.msg_size(), 16);
    }

    #[test]
    fn message_completed_across_chunks() {
        let mut c = cutter(16);
        assert_eq!(c.feed(15), 0);
        assert_eq!(c.partial_len(), 15);
        assert_eq!(c.feed(1), 1);
        assert_eq!(c.partial_len(), 0);
        assert_eq!(c.feed(0), 0);
        assert_eq!(c.partial_len(), 0);
    }

    #[test]
    fn byte_at_a_time() {
        let mut c = cutter(3);
        let counts: Vec<usize> = (0..7).map(|_| c.feed(1)).collect();
        assert_eq!(counts, [0, 0, 1, 0, 0, 1, 0]);
        assert_eq!(c.partial_len(), 1);
    }

    #[test]
    fn size_one_counts_every_byte() {
        let mut c = cutter(1);
        assert_eq!(c.feed(5), 5);
        assert_eq!(c.partial_len(), 0);
    }

    #[test]
    fn huge_sizes_do_not_overflow() {
        let mut c = cutter(usize::MAX);
        assert_eq!(c.feed(usize::MAX - 1), 0);
        assert_eq!(c.feed(usize::MAX - 1), 1);
        assert_eq!(c.partial_len(), usize::MAX - 2);
    }
}
