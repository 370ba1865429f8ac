//! The kv workload: RESP `GET` and `SET` requests, the values they carry, and the check of
//! every reply against what the store must hold.
//!
//! Message `seq` of connection `conn` is a `GET` or a `SET` of one key (drawn uniformly or by
//! Zipf's law, `--key-dist`), both chosen by a hash of `(conn, seq)`, and a `SET`'s value
//! size too (one size or a mix, `--value-size`), so nothing is stored per message: the reply
//! check derives them again.
//! Keys are `key:` and twelve digits, as redis-benchmark's `-r` makes them, so that both
//! clients send requests of the same size.
//!
//! Many connections write the same keys, so a `GET` cannot know which `SET` it will see. A
//! value therefore says who wrote it, for which key, and is otherwise a function of that:
//!
//! ```text
//!  0        4        8                16                         value_size
//!  +--------+--------+----------------+--------------------------+
//!  |  key   | writer |   writer seq   | filler(key, writer, seq) |
//!  +--------+--------+----------------+--------------------------+
//!   u32 LE   u32 LE   u64 LE           repeating 8-byte word
//! ```
//!
//! A `GET` reply passes when it is a value written for the key asked for, of the length its
//! writer drew for that seq, by a writer of this run (a connection, or the preload), intact to the last byte. The
//! key space is preloaded before the clock starts whenever the mix has `GET`s, so a null reply
//! (the key is missing) is a fault too. A `SET` must be answered `+OK`; an error reply is the
//! server's fault, anything else a corrupt reply.
//!
//! Requests are written and replies read by `proto::resp`, the codec every server uses.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use proto::resp::{self, Reply};

use crate::config::KvConfig;
use crate::dist::{KeyDist, Sizes, Zipf, draw, mix, unit};
use crate::error::{Error, Fault};
use crate::torn::Torn;

/// The header: key, writer, writer seq.
pub(crate) const MIN_VALUE_SIZE: usize = 16;
/// Far above any value size the servers are measured with; keeps buffers bounded.
pub(crate) const MAX_VALUE_SIZE: usize = 1 << 20;
/// Largest key space: an index must fit the value's `u32` field.
pub(crate) const MAX_KEYS: u64 = u32::MAX as u64;
/// SETs the preload keeps in flight on its one connection.
const PRELOAD_BATCH: u64 = 512;

/// What connection `conn` sends as its message `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Op {
    pub(crate) get: bool,
    pub(crate) key: u32,
}

/// The mix of GETs and SETs and the key space, fixed for a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Mix {
    /// A GET when the hash's top 53 bits, as a fraction, fall below this.
    get_ratio: f64,
    keys: u64,
    /// Zipf keys: the sampler, its constants computed once.
    zipf: Option<Zipf>,
}

impl Mix {
    pub(crate) fn new(kv: &KvConfig) -> Mix {
        Mix {
            get_ratio: kv.get_ratio,
            keys: kv.keys,
            zipf: match kv.key_dist {
                KeyDist::Uniform => None,
                KeyDist::Zipf(s) => Some(Zipf::new(kv.keys, s)),
            },
        }
    }

    /// The operation of message `seq` of connection `conn`.
    pub(crate) fn op(&self, conn: u32, seq: u64) -> Op {
        let h = draw(conn, seq, 0x6B76_0000_0000_0000);
        // A second, independent hash for the key, so that the op does not predict it.
        let kh = mix(h ^ 0x5EED);
        let key = match &self.zipf {
            None => kh % self.keys,
            // Rank 1, the most frequent, is key 0.
            Some(z) => z.sample(kh) - 1,
        };
        Op {
            get: unit(h) < self.get_ratio,
            key: key as u32,
        }
    }
}

/// Appends the RESP array of a `GET` or `SET` to `out`; a `SET`'s value is written by
/// `writer` as its message `seq`, of the size `sizes` draws for it, built in `scratch`.
pub(crate) fn encode(
    op: Op,
    writer: u32,
    seq: u64,
    sizes: &Sizes,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    // `key:` and twelve digits: 16 bytes.
    let mut key = *b"key:000000000000";
    let mut k = op.key;
    for d in key[4..].iter_mut().rev() {
        *d = b'0' + (k % 10) as u8;
        k /= 10;
    }
    if op.get {
        resp::encode_request(out, &[&b"GET"[..], &key]);
    } else {
        scratch.clear();
        scratch.resize(sizes.pick(writer, seq), 0);
        write_value(op.key, writer, seq, scratch);
        resp::encode_request(out, &[&b"SET"[..], &key, scratch]);
    }
}

fn filler(key: u32, writer: u32, seq: u64) -> u64 {
    mix(seq ^ (u64::from(writer) << 32) ^ (u64::from(key) << 8)) | 1
}

/// Writes the value `writer` stores under `key` with its message `seq`; `out`'s length is
/// the value size.
fn write_value(key: u32, writer: u32, seq: u64, out: &mut [u8]) {
    out[..4].copy_from_slice(&key.to_le_bytes());
    out[4..8].copy_from_slice(&writer.to_le_bytes());
    out[8..16].copy_from_slice(&seq.to_le_bytes());
    let word = filler(key, writer, seq).to_le_bytes();
    for chunk in out[16..].chunks_mut(8) {
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// Whether `value` is one that some writer of this run (connections `0..writers`, and the
/// preload, numbered `writers`) stored under `key`, of the size it drew.
pub(crate) fn valid_value(value: &[u8], key: u32, writers: u32, sizes: &Sizes) -> bool {
    if value.len() < MIN_VALUE_SIZE {
        return false;
    }
    let u32_at =
        |i: usize| u32::from_le_bytes([value[i], value[i + 1], value[i + 2], value[i + 3]]);
    let (k, writer) = (u32_at(0), u32_at(4));
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&value[8..16]);
    let seq = u64::from_le_bytes(seq);
    if k != key || writer > writers || value.len() != sizes.pick(writer, seq) {
        return false;
    }
    let word = filler(key, writer, seq).to_le_bytes();
    value[16..]
        .chunks(8)
        .all(|chunk| chunk == &word[..chunk.len()])
}

/// How a reply to `op` is judged.
pub(crate) fn check(reply: &Reply, op: Op, writers: u32, sizes: &Sizes) -> Result<(), Fault> {
    match (reply, op.get) {
        (Reply::Error(_), _) => Err(Fault::ServerError),
        (Reply::Simple(s), false) if s == b"OK" => Ok(()),
        (Reply::Bulk(v), true) if valid_value(v, op.key, writers, sizes) => Ok(()),
        _ => Err(Fault::Corrupt),
    }
}

/// The replies of one connection that have arrived only in part.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    torn: Torn,
}

/// Bytes beyond the value a valid reply may take (`$`, the length, two CRLFs).
const REPLY_OVERHEAD: usize = 32;

impl Partial {
    /// Hands every whole reply of the stream (what came before, then `data`) to `each`, and
    /// keeps the bytes of a reply still incomplete. Stops at the first error `each` returns.
    /// An incomplete reply longer than any valid one (a bulk of `max_bulk` bytes) is a
    /// corrupt stream: the buffer stays bounded whatever the server announces.
    pub(crate) fn feed(
        &mut self,
        data: &[u8],
        max_bulk: usize,
        mut each: impl FnMut(&Reply) -> Result<(), Fault>,
    ) -> Result<(), Fault> {
        self.torn.feed(
            data,
            max_bulk + REPLY_OVERHEAD,
            |rest| match resp::parse_reply(rest).map_err(|_| Fault::Corrupt)? {
                Some((reply, used)) => {
                    each(&reply)?;
                    Ok(Some(used))
                }
                None => Ok(None),
            },
        )
    }
}

/// Stores a value under every key of `mix` before the clock starts, over one connection that
/// keeps [`PRELOAD_BATCH`] `SET`s in flight, so that every measured `GET` has a value to
/// find. Bounded by `timeout` for each read and write.
pub(crate) fn preload(
    addr: SocketAddr,
    keys: u64,
    writer: u32,
    sizes: &Sizes,
    timeout: Duration,
) -> Result<(), Error> {
    let fail = |reason: String| Error::Preload {
        addr: addr.to_string(),
        reason,
    };
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|source| Error::Unreachable {
            addr: addr.to_string(),
            source,
        })?;
    let setup = |s: &TcpStream| -> io::Result<()> {
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)
    };
    setup(&stream).map_err(|e| fail(format!("setting up the connection: {e}")))?;
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    let mut rx = vec![0u8; 64 * 1024];
    let mut partial = Partial::default();
    let mut next = 0u64;
    // Bounded: each pass stores up to a batch of keys or fails on a timeout.
    while next < keys {
        let batch = PRELOAD_BATCH.min(keys - next);
        out.clear();
        for k in next..next + batch {
            let op = Op {
                get: false,
                key: k as u32,
            };
            encode(op, writer, k, sizes, &mut scratch, &mut out);
        }
        stream
            .write_all(&out)
            .map_err(|e| fail(format!("writing SETs: {e}")))?;
        let mut answered = 0u64;
        while answered < batch {
            let n = match stream.read(&mut rx) {
                Ok(0) => return Err(fail("the server closed the connection".into())),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(fail(format!("waiting for +OK: {e}"))),
            };
            let mut first_bad = None;
            let fed = partial.feed(&rx[..n], MAX_VALUE_SIZE, |reply| {
                answered += 1;
                if matches!(reply, Reply::Simple(s) if s == b"OK") {
                    Ok(())
                } else {
                    first_bad = Some(describe(reply));
                    Err(Fault::Corrupt)
                }
            });
            if fed.is_err() || answered > batch {
                let got = first_bad.unwrap_or_else(|| "bytes that are not RESP".into());
                return Err(fail(format!(
                    "SET was answered with {got}, not +OK: is it a kv server?"
                )));
            }
        }
        next += batch;
    }
    Ok(())
}

/// A reply as a person reads it, for error messages.
fn describe(reply: &Reply) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned();
    match reply {
        Reply::Simple(s) => format!("+{}", text(s)),
        Reply::Error(e) => format!("-{}", text(e)),
        Reply::Null => "a null bulk".into(),
        Reply::Bulk(b) => format!("a bulk of {} bytes", b.len()),
        Reply::Integer(n) => format!(":{n}"),
        Reply::Array(_) | Reply::NullArray => "an array".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_resp_arrays_with_fixed_size_keys() {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        encode(
            Op { get: true, key: 42 },
            0,
            0,
            &Sizes::fixed(16),
            &mut scratch,
            &mut out,
        );
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000042\r\n");
        out.clear();
        encode(
            Op {
                get: false,
                key: 99_999,
            },
            3,
            7,
            &Sizes::fixed(20),
            &mut scratch,
            &mut out,
        );
        let head = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000099999\r\n$20\r\n";
        assert!(out.starts_with(head));
        assert!(out.ends_with(b"\r\n"));
        assert_eq!(out.len(), head.len() + 20 + 2);
        let value = &out[head.len()..head.len() + 20];
        assert!(valid_value(value, 99_999, 3, &Sizes::fixed(20)));
    }

    #[test]
    fn a_value_is_valid_only_for_its_key_length_and_writers() {
        for size in [16, 17, 24, 32, 100] {
            let mut v = vec![0; size];
            write_value(5, 2, 77, &mut v);
            let sizes = &Sizes::fixed(size);
            assert!(valid_value(&v, 5, 2, sizes));
            assert!(valid_value(&v, 5, 9, sizes), "any writer up to the preload");
            assert!(!valid_value(&v, 6, 2, sizes), "another key");
            assert!(
                !valid_value(&v, 5, 1, sizes),
                "a writer that does not exist"
            );
            assert!(!valid_value(&v, 5, 2, &Sizes::fixed(size + 1)));
            for i in 0..size {
                let mut bad = v.clone();
                bad[i] ^= 0x10;
                // A flipped header byte names another key, writer or seq, whose filler
                // differs; with no filler (16 bytes) a seq bit is the one change that passes.
                if size > 16 || i < 8 {
                    assert!(!valid_value(&bad, 5, 2, sizes), "byte {i} of {size}");
                }
            }
        }
    }

    #[test]
    fn the_mix_follows_the_ratio_and_covers_the_keys() {
        let kv = |get_ratio, keys| {
            Mix::new(&KvConfig {
                get_ratio,
                keys,
                key_dist: KeyDist::Uniform,
            })
        };
        let m = kv(0.9, 1000);
        let mut gets = 0;
        let mut seen = vec![false; 1000];
        for seq in 0..100_000 {
            let op = m.op(seq as u32 % 7, seq);
            gets += u32::from(op.get);
            seen[op.key as usize] = true;
        }
        assert!((89_000..91_000).contains(&gets), "{gets}");
        assert!(seen.iter().all(|&s| s));
        assert!((0..1000).all(|s| !kv(0.0, 10).op(1, s).get));
        assert!((0..1000).all(|s| kv(1.0, 10).op(1, s).get));
        assert_eq!(m.op(3, 4), m.op(3, 4), "a pure function of (conn, seq)");
    }

    #[test]
    fn torn_replies_are_kept_and_a_runaway_one_is_cut() {
        let stream = b"+OK\r\n$5\r\nhello\r\n$-1\r\n-ERR no\r\n:12\r\n";
        for cut in 0..stream.len() {
            let mut p = Partial::default();
            let mut n = 0;
            for part in [&stream[..cut], &stream[cut..]] {
                p.feed(part, 100, |_| {
                    n += 1;
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(n, 5, "cut at {cut}");
        }
        let mut p = Partial::default();
        assert_eq!(p.feed(b"?x\r\n", 100, |_| Ok(())), Err(Fault::Corrupt));
        // A bulk announced longer than any value: refused once its bytes pass the bound.
        let mut p = Partial::default();
        assert_eq!(p.feed(b"$100000\r\n", 100, |_| Ok(())), Ok(()));
        assert_eq!(p.feed(&[b'x'; 200], 100, |_| Ok(())), Err(Fault::Corrupt));
        // The first error of `each` ends the feed.
        let mut p = Partial::default();
        assert_eq!(
            p.feed(b"+OK\r\n+OK\r\n", 100, |_| Err(Fault::ServerError)),
            Err(Fault::ServerError)
        );
    }

    #[test]
    fn checks_tell_server_errors_from_corruption() {
        let get = Op { get: true, key: 1 };
        let set = Op { get: false, key: 1 };
        let mut v = vec![0; 32];
        write_value(1, 0, 3, &mut v);
        let ok = Reply::Simple(b"OK".to_vec());
        let s32 = &Sizes::fixed(32);
        assert_eq!(check(&Reply::Bulk(v.clone()), get, 4, s32), Ok(()));
        assert_eq!(check(&ok, set, 4, s32), Ok(()));
        assert_eq!(
            check(&Reply::Null, get, 4, s32),
            Err(Fault::Corrupt),
            "the key space is preloaded"
        );
        assert_eq!(check(&ok, get, 4, s32), Err(Fault::Corrupt));
        assert_eq!(check(&Reply::Integer(1), set, 4, s32), Err(Fault::Corrupt));
        assert_eq!(
            check(&Reply::Error(b"ERR x".to_vec()), set, 4, s32),
            Err(Fault::ServerError)
        );
        assert_eq!(
            check(&Reply::Bulk(v), Op { get: true, key: 2 }, 4, s32),
            Err(Fault::Corrupt)
        );
    }

    #[test]
    fn zipf_keys_follow_the_law_and_values_of_a_mix_are_checked_at_their_drawn_size() {
        // 200,000 requests over 1,000 keys at Zipf 0.99: key 0 takes 1 / H(1000, 0.99), about
        // 13%; its count's standard error is 0.08 points, 3% relative is outside chance.
        let m = Mix::new(&KvConfig {
            get_ratio: 0.5,
            keys: 1000,
            key_dist: KeyDist::Zipf(0.99),
        });
        let n = 200_000u64;
        let mut counts = vec![0u64; 1000];
        for seq in 0..n {
            counts[m.op(seq as u32 % 5, seq).key as usize] += 1;
        }
        let h: f64 = (1..=1000).map(|k| (k as f64).powf(-0.99)).sum();
        for (k, &count) in counts.iter().take(2).enumerate() {
            let want = ((k + 1) as f64).powf(-0.99) / h;
            let got = count as f64 / n as f64;
            assert!((got / want - 1.0).abs() < 0.03, "key {k}: {got} vs {want}");
        }
        // A mix of value sizes: a value passes only at the size its writer drew for its seq.
        let sizes: Sizes = "16,100:3".parse().expect("a mix");
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let set = Op { get: false, key: 7 };
        let mut seen = [false; 2];
        for seq in 0..64 {
            out.clear();
            encode(set, 2, seq, &sizes, &mut scratch, &mut out);
            let size = sizes.pick(2, seq);
            seen[usize::from(size == 100)] = true;
            let value = &out[out.len() - 2 - size..out.len() - 2];
            assert!(valid_value(value, 7, 3, &sizes));
            let mut longer = value.to_vec();
            longer.resize(if size == 16 { 100 } else { 16 }, 0);
            assert!(
                !valid_value(&longer, 7, 3, &sizes),
                "another size of the mix"
            );
        }
        assert_eq!(seen, [true, true], "both sizes drawn");
    }
}
