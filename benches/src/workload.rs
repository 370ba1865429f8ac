//! The protocol and storage workloads: a deterministic corpus of chat lines for the
//! parse and encode benchmarks, and room logs in a temporary directory for the append
//! and replay benchmarks. Every workload checks its output (lines parsed, bytes encoded,
//! seqs returned, records replayed) so that a broken path fails instead of timing nothing.

use std::io;
use std::time::{Duration, Instant};

use proto::chat::{Command, Reply};
use service::log::{Fsync, RoomLog};
use tempfile::TempDir;

/// A small deterministic generator (xorshift64*): the corpus is the same on every run
/// and every machine.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `lo..hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo) as u64) as usize
    }
}

/// Printable ASCII with spaces, as chat texts are.
fn text(rng: &mut Rng, len: usize) -> String {
    const ALPHABET: &[u8] =
        b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,!?";
    (0..len)
        .map(|_| char::from(ALPHABET[rng.range(0, ALPHABET.len())]))
        .collect()
}

/// Client lines as a chat session sends them: mostly `SAY` with texts of 16 to 200 bytes,
/// with some `PING`, `JOIN`, `NICK` and `LEAVE`. Each line ends in `\n`.
#[derive(Debug, Clone)]
pub struct CommandCorpus {
    /// The lines, back to back.
    pub bytes: Vec<u8>,
    /// How many lines.
    pub lines: usize,
}

impl CommandCorpus {
    /// Generates `lines` lines.
    pub fn new(lines: usize) -> CommandCorpus {
        let mut rng = Rng(0x5eed_cafe_f00d_0001);
        let mut bytes = Vec::new();
        for i in 0..lines {
            let room = format!("room-{}", rng.range(0, 8));
            let len = rng.range(16, 200);
            let text = text(&mut rng, len);
            let command = match i % 16 {
                0 => Command::Ping { token: &text },
                5 => Command::Join {
                    room: &room,
                    since: rng.next() % 100_000,
                },
                9 => Command::Nick { name: "someone_42" },
                13 => Command::Leave { room: &room },
                _ => Command::Say {
                    room: &room,
                    text: &text,
                },
            };
            command.encode(&mut bytes);
        }
        CommandCorpus { bytes, lines }
    }

    /// Parses every line, as a server does; returns how many were `SAY`, after checking
    /// that every line parsed.
    pub fn parse_all(&self) -> io::Result<usize> {
        let mut says = 0;
        let mut lines = 0;
        for line in lines_of(&self.bytes) {
            lines += 1;
            match Command::parse(line) {
                Ok(Command::Say { .. }) => says += 1,
                Ok(_) => {}
                Err(e) => {
                    return Err(io::Error::other(format!(
                        "corpus line {lines} did not parse: {e}"
                    )));
                }
            }
        }
        if lines != self.lines {
            return Err(io::Error::other(format!(
                "parsed {lines} lines of {}",
                self.lines
            )));
        }
        Ok(says)
    }

    /// The parsed commands, borrowing from the corpus (for the encode benchmark).
    pub fn commands(&self) -> io::Result<Vec<Command<'_>>> {
        lines_of(&self.bytes)
            .map(|line| Command::parse(line).map_err(io::Error::other))
            .collect()
    }
}

/// Server lines as a chat server sends them: mostly `MSG` (replay and live), with `ACK`,
/// `PONG` and `JOINED`. Each line ends in `\n`.
#[derive(Debug, Clone)]
pub struct ReplyCorpus {
    /// The lines, back to back.
    pub bytes: Vec<u8>,
    /// How many lines.
    pub lines: usize,
}

impl ReplyCorpus {
    /// Generates `lines` lines.
    pub fn new(lines: usize) -> ReplyCorpus {
        let mut rng = Rng(0x5eed_cafe_f00d_0002);
        let mut bytes = Vec::new();
        for i in 0..lines {
            let room = format!("room-{}", rng.range(0, 8));
            let len = rng.range(16, 200);
            let text = text(&mut rng, len);
            let seq = rng.next() % 1_000_000;
            let reply = match i % 16 {
                0 => Reply::Pong { token: &text },
                5 => Reply::Ack { room: &room, seq },
                9 => Reply::Joined {
                    room: &room,
                    next: seq,
                },
                _ => Reply::Msg {
                    room: &room,
                    seq,
                    name: "someone_42",
                    text: &text,
                },
            };
            reply.encode(&mut bytes);
        }
        ReplyCorpus { bytes, lines }
    }

    /// Parses every line, as a client does; returns how many were `MSG`, after checking
    /// that every line parsed.
    pub fn parse_all(&self) -> io::Result<usize> {
        let mut msgs = 0;
        let mut lines = 0;
        for line in lines_of(&self.bytes) {
            lines += 1;
            match Reply::parse(line) {
                Ok(Reply::Msg { .. }) => msgs += 1,
                Ok(_) => {}
                Err(e) => {
                    return Err(io::Error::other(format!(
                        "corpus line {lines} did not parse: {e}"
                    )));
                }
            }
        }
        if lines != self.lines {
            return Err(io::Error::other(format!(
                "parsed {lines} lines of {}",
                self.lines
            )));
        }
        Ok(msgs)
    }

    /// The parsed replies, borrowing from the corpus (for the encode benchmark).
    pub fn replies(&self) -> io::Result<Vec<Reply<'_>>> {
        lines_of(&self.bytes)
            .map(|line| Reply::parse(line).map_err(io::Error::other))
            .collect()
    }
}

/// The lines of `bytes` without their `\n` (the last line ends in one).
fn lines_of(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .strip_suffix(b"\n")
        .unwrap_or(bytes)
        .split(|&b| b == b'\n')
}

/// Encodes every command into `out` (cleared first) and checks the total length.
pub fn encode_commands(
    commands: &[Command<'_>],
    out: &mut Vec<u8>,
    expected: usize,
) -> io::Result<()> {
    out.clear();
    for command in commands {
        command.encode(out);
    }
    check_len(out.len(), expected)
}

/// Encodes every reply into `out` (cleared first) and checks the total length.
pub fn encode_replies(replies: &[Reply<'_>], out: &mut Vec<u8>, expected: usize) -> io::Result<()> {
    out.clear();
    for reply in replies {
        reply.encode(out);
    }
    check_len(out.len(), expected)
}

fn check_len(got: usize, expected: usize) -> io::Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "encoded {got} bytes, expected {expected}"
        )))
    }
}

/// Appends per room file before the benchmark starts a fresh one, so that a long
/// measurement does not grow one file (and its index) without bound.
const APPENDS_PER_FILE: u64 = 100_000;

/// The text of every appended message: 64 bytes, a typical chat line.
const APPEND_TEXT: &str = "a chat message of sixty-four bytes, as a person would type it...";

/// A room log in a temporary directory, appended to with [`Fsync::Never`] (the servers'
/// default: a message survives a crash of the process, not of the machine).
#[derive(Debug)]
pub struct LogAppend {
    dir: TempDir,
    log: RoomLog,
    files: u64,
    per_file: u64,
}

impl LogAppend {
    /// Creates the directory and the first room file.
    pub fn new() -> io::Result<LogAppend> {
        LogAppend::with_file_limit(APPENDS_PER_FILE)
    }

    /// Like [`LogAppend::new`], starting a fresh file every `per_file` appends.
    pub fn with_file_limit(per_file: u64) -> io::Result<LogAppend> {
        let dir = tempfile::tempdir()?;
        let log = open(&dir, "bench-0")?;
        Ok(LogAppend {
            dir,
            log,
            files: 1,
            per_file: per_file.max(1),
        })
    }

    /// Appends `n` messages, checking that each got the next seq; returns the time spent
    /// appending (not the time spent replacing a full file).
    pub fn append(&mut self, n: u64) -> io::Result<Duration> {
        let mut total = Duration::ZERO;
        let mut left = n;
        while left > 0 {
            let room_left = self.per_file.saturating_sub(self.log.next_seq() - 1);
            if room_left == 0 {
                self.next_file()?;
                continue;
            }
            let batch = left.min(room_left);
            let first = self.log.next_seq();
            let start = Instant::now();
            for expected in first..first + batch {
                let seq = self.log.append("someone_42", APPEND_TEXT)?;
                if seq != expected {
                    return Err(io::Error::other(format!(
                        "append returned seq {seq}, expected {expected}"
                    )));
                }
            }
            total += start.elapsed();
            left -= batch;
        }
        Ok(total)
    }

    /// Replaces the full room file with an empty one.
    fn next_file(&mut self) -> io::Result<()> {
        let old = self.log.path().to_owned();
        self.log = open(&self.dir, &format!("bench-{}", self.files))?;
        self.files += 1;
        std::fs::remove_file(old)
    }
}

/// A room log of `messages` messages, replayed from the start the way a `JOIN room 0`
/// is: `read_since` in chunks of `service::session::REPLAY_BATCH` bytes.
#[derive(Debug)]
pub struct LogReplay {
    _dir: TempDir,
    log: RoomLog,
    messages: u64,
    text_bytes: u64,
}

impl LogReplay {
    /// Writes the room: `messages` messages of 16 to 200 bytes of text.
    pub fn new(messages: u64) -> io::Result<LogReplay> {
        let dir = tempfile::tempdir()?;
        let mut log = open(&dir, "replay")?;
        let mut rng = Rng(0x5eed_cafe_f00d_0003);
        let mut text_bytes = 0;
        for _ in 0..messages {
            let len = rng.range(16, 200);
            let text = text(&mut rng, len);
            text_bytes += text.len() as u64;
            log.append("someone_42", &text)?;
        }
        Ok(LogReplay {
            _dir: dir,
            log,
            messages,
            text_bytes,
        })
    }

    /// How many messages the room holds.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Bytes of text the room holds.
    pub fn text_bytes(&self) -> u64 {
        self.text_bytes
    }

    /// Replays the whole room, checking that the seqs run 1, 2, ... without a gap and
    /// that the text adds up; returns the number of records.
    pub fn replay(&self) -> io::Result<u64> {
        let mut since = 0;
        let mut next = 1;
        let mut text_bytes = 0;
        let mut bad = None;
        while since < self.messages {
            let last = self
                .log
                .read_since(since, service::session::REPLAY_BATCH, |record| {
                    if record.seq != next && bad.is_none() {
                        bad = Some((record.seq, next));
                    }
                    next = record.seq + 1;
                    text_bytes += record.text.len() as u64;
                })?;
            if last == since {
                return Err(io::Error::other(format!(
                    "replay stopped at seq {since} of {}",
                    self.messages
                )));
            }
            since = last;
        }
        if let Some((got, expected)) = bad {
            return Err(io::Error::other(format!(
                "replay returned seq {got} where {expected} was due"
            )));
        }
        if text_bytes != self.text_bytes {
            return Err(io::Error::other(format!(
                "replay returned {text_bytes} bytes of text, the room holds {}",
                self.text_bytes
            )));
        }
        Ok(next - 1)
    }
}

fn open(dir: &TempDir, room: &str) -> io::Result<RoomLog> {
    RoomLog::open(dir.path(), room, Fsync::Never).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_corpus_parses_and_encodes_back() {
        let corpus = CommandCorpus::new(100);
        let says = corpus.parse_all().unwrap();
        // 4 of every 16 lines are not SAY.
        assert_eq!(says, 100 - 25);
        let commands = corpus.commands().unwrap();
        let mut out = Vec::new();
        encode_commands(&commands, &mut out, corpus.bytes.len()).unwrap();
        assert_eq!(out, corpus.bytes);
        assert!(encode_commands(&commands, &mut out, corpus.bytes.len() + 1).is_err());
    }

    #[test]
    fn reply_corpus_parses_and_encodes_back() {
        let corpus = ReplyCorpus::new(100);
        assert_eq!(corpus.parse_all().unwrap(), 100 - 19);
        let replies = corpus.replies().unwrap();
        let mut out = Vec::new();
        encode_replies(&replies, &mut out, corpus.bytes.len()).unwrap();
        assert_eq!(out, corpus.bytes);
    }

    #[test]
    fn a_bad_line_fails_the_parse() {
        let mut corpus = CommandCorpus::new(10);
        corpus.bytes.extend_from_slice(b"BOGUS\n");
        corpus.lines += 1;
        assert!(corpus.parse_all().is_err());
    }

    #[test]
    fn appends_roll_over_to_a_fresh_file() {
        let mut append = LogAppend::with_file_limit(50).unwrap();
        append.append(10).unwrap();
        assert_eq!(append.log.next_seq(), 11);
        append.append(50 - 10 + 3).unwrap();
        assert_eq!(append.files, 2);
        assert_eq!(append.log.next_seq(), 4);
        let files = std::fs::read_dir(append.dir.path()).unwrap().count();
        assert_eq!(files, 1, "the full file was removed");
    }

    #[test]
    fn replay_returns_every_record() {
        let replay = LogReplay::new(2000).unwrap();
        assert_eq!(replay.replay().unwrap(), 2000);
        assert!(replay.text_bytes() > 2000 * 16);
    }
}
