//! The frames RECV sends SEND through their pipe. A frame is a tag byte, a
//! little-endian u32 payload length, and the payload:
//!
//! ```text
//! 'W' bytes              write these bytes to the client (a reply)
//! 'J' room, u64 since,   join: replay since..=upto, JOINED upto+1, then
//!     u64 upto           follow the room (upto is the room's last seq when
//!                        RECV handled the JOIN, so later appends are live)
//! 'L' room               leave: stop following, reply LEFT
//! 'A' room               an append to the room is about to happen
//! 'D' room, u64 seq      that append is done: seq, or 0 if it failed;
//!                        reply ACK (or ERR storage failure)
//! ```

use std::io::{self, ErrorKind, Read};

/// One frame, borrowed from the reader's buffer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Frame<'a> {
    Write(&'a [u8]),
    Join {
        room: &'a str,
        since: u64,
        upto: u64,
    },
    Leave {
        room: &'a str,
    },
    Appending {
        room: &'a str,
    },
    Appended {
        room: &'a str,
        seq: u64,
    },
}

const HEADER: usize = 5;

/// Appends a frame whose payload `fill` writes.
fn push(out: &mut Vec<u8>, tag: u8, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[tag, 0, 0, 0, 0]);
    fill(out);
    let len = u32::try_from(out.len() - start - HEADER).expect("frames are small");
    out[start + 1..start + HEADER].copy_from_slice(&len.to_le_bytes());
}

/// Appends a 'W' frame carrying what `fill` encodes.
pub(super) fn push_write(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    push(out, b'W', fill);
}

/// Appends any other frame.
pub(super) fn push_frame(out: &mut Vec<u8>, frame: &Frame<'_>) {
    match *frame {
        Frame::Write(bytes) => push(out, b'W', |o| o.extend_from_slice(bytes)),
        Frame::Join { room, since, upto } => push(out, b'J', |o| {
            o.extend_from_slice(room.as_bytes());
            o.extend_from_slice(&since.to_le_bytes());
            o.extend_from_slice(&upto.to_le_bytes());
        }),
        Frame::Leave { room } => push(out, b'L', |o| o.extend_from_slice(room.as_bytes())),
        Frame::Appending { room } => push(out, b'A', |o| o.extend_from_slice(room.as_bytes())),
        Frame::Appended { room, seq } => push(out, b'D', |o| {
            o.extend_from_slice(room.as_bytes());
            o.extend_from_slice(&seq.to_le_bytes());
        }),
    }
}

/// Reads frames from the pipe without blocking.
#[derive(Debug, Default)]
pub(super) struct FrameReader {
    buf: Vec<u8>,
    start: usize,
}

impl FrameReader {
    /// Reads what the pipe holds. Returns false at end of file (RECV is done).
    pub(super) fn fill(&mut self, pipe: &mut impl Read) -> io::Result<bool> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next complete frame, if one is buffered.
    pub(super) fn next_frame(&mut self) -> io::Result<Option<Frame<'_>>> {
        let rest = &self.buf[self.start..];
        if rest.len() < HEADER {
            return Ok(None);
        }
        let len = u32::from_le_bytes(rest[1..HEADER].try_into().expect("4 bytes")) as usize;
        if rest.len() < HEADER + len {
            return Ok(None);
        }
        let tag = rest[0];
        self.start += HEADER + len;
        let payload = &self.buf[self.start - len..self.start];
        let bad = || io::Error::new(ErrorKind::InvalidData, "bad frame from RECV");
        let room_and_u64 = || -> io::Result<(&str, u64)> {
            let cut = payload.len().checked_sub(8).ok_or_else(bad)?;
            let room = std::str::from_utf8(&payload[..cut]).map_err(|_| bad())?;
            let n = u64::from_le_bytes(payload[cut..].try_into().expect("8 bytes"));
            Ok((room, n))
        };
        let room = || std::str::from_utf8(payload).map_err(|_| bad());
        Ok(Some(match tag {
            b'W' => Frame::Write(payload),
            b'J' => {
                let cut = payload.len().checked_sub(16).ok_or_else(bad)?;
                let room = std::str::from_utf8(&payload[..cut]).map_err(|_| bad())?;
                let since = u64::from_le_bytes(payload[cut..cut + 8].try_into().expect("8 bytes"));
                let upto = u64::from_le_bytes(payload[cut + 8..].try_into().expect("8 bytes"));
                Frame::Join { room, since, upto }
            }
            b'D' => {
                let (room, seq) = room_and_u64()?;
                Frame::Appended { room, seq }
            }
            b'L' => Frame::Leave { room: room()? },
            b'A' => Frame::Appending { room: room()? },
            _ => return Err(bad()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_whatever_the_pipe_splits() {
        let frames = [
            Frame::Write(b"OK\n"),
            Frame::Join {
                room: "r1",
                since: 7,
                upto: 9,
            },
            Frame::Leave { room: "r1" },
            Frame::Appending { room: "a-b" },
            Frame::Appended {
                room: "a-b",
                seq: u64::MAX,
            },
            Frame::Write(b""),
        ];
        let mut bytes = Vec::new();
        for f in &frames {
            push_frame(&mut bytes, f);
        }
        for split in 1..bytes.len() {
            let mut reader = FrameReader::default();
            let mut got = Vec::new();
            for piece in bytes.chunks(split) {
                // A slice reads to its end, which looks like end of file.
                assert!(!reader.fill(&mut &piece[..]).unwrap());
                while let Some(f) = reader.next_frame().unwrap() {
                    got.push(format!("{f:?}"));
                }
            }
            let want: Vec<_> = frames.iter().map(|f| format!("{f:?}")).collect();
            assert_eq!(got, want, "split every {split} bytes");
        }
    }

    #[test]
    fn an_unknown_tag_is_an_error() {
        let mut reader = FrameReader::default();
        reader.fill(&mut &[b'?', 0, 0, 0, 0][..]).unwrap();
        assert!(reader.next_frame().is_err());
    }
}
