//! The room-log record format of `docs/room-log.md`, from the outside: the suite
//! crafts logs (valid, torn, corrupt) for servers to recover, and reads back what
//! servers wrote, so that every server keeps files every other server accepts.

use std::io;

/// Bytes of a record header: `body_len` u32 LE, then the CRC-32 of the body, u32 LE.
pub const HEADER_LEN: usize = 8;
/// The largest `body_len` a valid record may have.
pub const MAX_BODY: usize = 1 << 20;
/// The smallest `body_len`: seq (8), name_len (1), a name of one byte, no text.
pub const MIN_BODY: usize = 10;

/// One message of a room, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub name: String,
    pub text: String,
}

/// The body of a record, raw: no check that name or text are valid, so that tests can
/// craft bad ones.
pub fn body(seq: u64, name: &[u8], text: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(9 + name.len() + text.len());
    body.extend_from_slice(&seq.to_le_bytes());
    // A name longer than 255 bytes cannot be encoded at all; tests only craft short ones.
    body.push(name.len() as u8);
    body.extend_from_slice(name);
    body.extend_from_slice(text);
    body
}

/// A whole record around `body`, with its true length and CRC.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// A valid record of message `seq` from `name`.
pub fn record(seq: u64, name: &str, text: &str) -> Vec<u8> {
    frame(&body(seq, name.as_bytes(), text.as_bytes()))
}

/// Parses a whole log strictly: every byte must belong to a valid record, seqs must
/// run 1, 2, 3, … The error names the offset of the first bad record.
pub fn parse(bytes: &[u8]) -> io::Result<Vec<Record>> {
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("record at offset {offset}: {why}"),
            )
        };
        let header = bytes
            .get(offset..offset + HEADER_LEN)
            .ok_or_else(|| bad("short header"))?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if !(MIN_BODY..=MAX_BODY).contains(&len) {
            return Err(bad(&format!("body_len {len} out of range")));
        }
        let start = offset + HEADER_LEN;
        let body = bytes
            .get(start..start + len)
            .ok_or_else(|| bad("short body"))?;
        if crc32fast::hash(body) != crc {
            return Err(bad("CRC mismatch"));
        }
        let seq = u64::from_le_bytes(body[..8].try_into().map_err(|_| bad("short seq"))?);
        let name_len = usize::from(body[8]);
        if !(1..=64).contains(&name_len) || 9 + name_len > len {
            return Err(bad(&format!("name_len {name_len} invalid")));
        }
        let name = &body[9..9 + name_len];
        if !crate::chat::is_valid_name(name) {
            return Err(bad("invalid name"));
        }
        let text = std::str::from_utf8(&body[9 + name_len..]).map_err(|_| bad("text not UTF-8"))?;
        let want = records.len() as u64 + 1;
        if seq != want {
            return Err(bad(&format!("seq {seq}, expected {want}")));
        }
        records.push(Record {
            seq,
            name: String::from_utf8_lossy(name).into_owned(),
            text: text.to_owned(),
        });
        offset = start + len;
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_size_from_the_doc() {
        // docs/room-log.md: a 16-byte text from nick `anon` takes 37 bytes.
        assert_eq!(record(1, "anon", "0123456789abcdef").len(), 37);
    }

    #[test]
    fn round_trip_and_rejections() {
        let mut log = record(1, "alice", "hi there");
        log.extend(record(2, "bob", ""));
        let parsed = parse(&log).unwrap();
        assert_eq!(
            parsed[1],
            Record {
                seq: 2,
                name: "bob".into(),
                text: String::new()
            }
        );

        let mut torn = log.clone();
        torn.extend_from_slice(&record(3, "bob", "x")[..12]);
        assert!(parse(&torn).is_err());

        let mut gap = log.clone();
        gap.extend(record(4, "bob", "x"));
        assert!(parse(&gap).is_err());

        let mut flipped = log;
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(parse(&flipped).is_err());
    }
}
