//! One chat connection's protocol state where connections share no memory
//! (srv-threads `--mode process`: a pair of processes per connection), so that its rooms
//! are the room files alone (`RoomLog`'s locked appends and reads, `docs/room-log.md`),
//! not a [`crate::hub::Hub`].
//!
//! [`FileSession::handle`] decides what each line means. It writes the replies that
//! need nothing but the session (`OK`, `PONG`, every `ERR`) to `out`, and returns as a
//! [`Step`] what the connection's writer must carry out in order with the live stream: a
//! `JOIN` (replay, `JOINED`, follow), a `LEAVE` (`LEFT`), a `SAY` (which the caller
//! announces to the writer before [`FileSession::append`] makes it, so that the writer
//! knows the record is the connection's own before it can see it). [`reply_to_append`]
//! is the `SAY`'s answer once the append is done.
//!
//! [`crate::session::Session`] is the same protocol over a hub; the conformance suite
//! holds both to the same bytes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use proto::chat::{ChatError, Command, Reply};

use crate::log::{Fsync, RoomLog};

/// What the connection's writer must do for a line, beyond the replies in `out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// Nothing more: read on.
    Next,
    /// The reply in `out` is the last: the line was too long, close the connection.
    Close,
    /// Subscribe: replay `since..=upto`, send `JOINED <room> <upto + 1>`, then follow
    /// the room. `upto` is the room's last seq now, so what is appended later is live.
    Join {
        room: &'a str,
        since: u64,
        upto: u64,
    },
    /// Unsubscribe: stop following the room and send `LEFT <room>`.
    Leave { room: &'a str },
    /// Append `text` to `room` with [`FileSession::append`], after telling the writer.
    Say { room: &'a str, text: &'a str },
}

/// A chat connection's state: its name, the rooms it joined, its own handles on the
/// room files.
#[derive(Debug)]
pub struct FileSession {
    data: PathBuf,
    fsync: Fsync,
    name: String,
    joined: Vec<String>,
    logs: HashMap<String, RoomLog>,
}

impl FileSession {
    /// A new connection, named `anon`, on the rooms of `data`.
    pub fn new(data: &Path, fsync: Fsync) -> FileSession {
        FileSession {
            data: data.to_owned(),
            fsync,
            name: String::from("anon"),
            joined: Vec::new(),
            logs: HashMap::new(),
        }
    }

    /// Handles one line (or the error the line buffer found in it): encodes the replies
    /// it can give at once into `out` and says what is left for the writer.
    pub fn handle<'a>(&mut self, line: Result<&'a [u8], ChatError>, out: &mut Vec<u8>) -> Step<'a> {
        let command = match line.and_then(Command::parse) {
            Ok(command) => command,
            Err(e) => {
                Reply::err(e).encode(out);
                return if e.closes_connection() {
                    Step::Close
                } else {
                    Step::Next
                };
            }
        };
        match command {
            Command::Nick { name } => {
                name.clone_into(&mut self.name);
                Reply::Ok.encode(out);
                Step::Next
            }
            Command::Ping { token } => {
                Reply::Pong { token }.encode(out);
                Step::Next
            }
            Command::Join { room, since } => {
                if self.joined.iter().any(|r| r == room) {
                    Reply::err(ChatError::AlreadyJoined).encode(out);
                    return Step::Next;
                }
                // The JOIN takes effect now: what is in the room now is replayed, what
                // is appended later is live.
                let upto = self.log(room).and_then(|log| {
                    let next = log.refresh_locked().map_err(std::io::Error::other)?;
                    Ok(next - 1)
                });
                match upto {
                    Ok(upto) => {
                        self.joined.push(room.to_owned());
                        Step::Join { room, since, upto }
                    }
                    Err(e) => {
                        storage_failure(room, &e);
                        Reply::err(ChatError::StorageFailure).encode(out);
                        Step::Next
                    }
                }
            }
            Command::Leave { room } => match self.joined.iter().position(|r| r == room) {
                Some(i) => {
                    self.joined.swap_remove(i);
                    Step::Leave { room }
                }
                None => {
                    Reply::err(ChatError::NotJoined).encode(out);
                    Step::Next
                }
            },
            Command::Say { room, text } => Step::Say { room, text },
        }
    }

    /// Appends this connection's message to `room` under the file's exclusive lock:
    /// `Some(seq)`, or `None` after a storage failure (written to stderr).
    pub fn append(&mut self, room: &str, text: &str) -> Option<u64> {
        let name = self.name.clone();
        match self
            .log(room)
            .and_then(|log| log.append_locked(&name, text))
        {
            Ok(seq) => Some(seq),
            Err(e) => {
                storage_failure(room, &e);
                None
            }
        }
    }

    /// This connection's own handle on a room file, opened under the lock on first use.
    fn log(&mut self, room: &str) -> std::io::Result<&mut RoomLog> {
        if !self.logs.contains_key(room) {
            let log = RoomLog::open_locked(&self.data, room, self.fsync)
                .map_err(std::io::Error::other)?;
            self.logs.insert(room.to_owned(), log);
        }
        Ok(self.logs.get_mut(room).expect("inserted above"))
    }
}

/// The answer to a `SAY` once [`FileSession::append`] returned `appended`.
pub fn reply_to_append(room: &str, appended: Option<u64>) -> Reply<'_> {
    match appended {
        Some(seq) => Reply::Ack { room, seq },
        None => Reply::err(ChatError::StorageFailure),
    }
}

fn storage_failure(room: &str, e: &std::io::Error) {
    eprintln!("chat: room {room}: storage failure: {e}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(session: &mut FileSession, input: &[&str]) -> (String, Vec<String>) {
        let mut out = Vec::new();
        let mut steps = Vec::new();
        for line in input {
            let step = session.handle(Ok(line.as_bytes()), &mut out);
            let step = match step {
                Step::Say { room, text } => {
                    let seq = session.append(room, text);
                    reply_to_append(room, seq).encode(&mut out);
                    format!("{step:?} -> {seq:?}")
                }
                other => format!("{other:?}"),
            };
            steps.push(step);
        }
        (String::from_utf8(out).unwrap(), steps)
    }

    #[test]
    fn replies_and_steps_follow_the_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = FileSession::new(dir.path(), Fsync::Never);
        let (out, steps) = lines(
            &mut a,
            &[
                "NICK ada",
                "PING x y",
                "SAY r one",
                "JOIN r 0",
                "JOIN r 5",
                "LEAVE r",
                "LEAVE r",
                "BOGUS",
            ],
        );
        assert_eq!(
            out,
            "OK\nPONG x y\nACK r 1\nERR already joined\nERR not joined\nERR unknown command\n"
        );
        assert_eq!(
            steps,
            [
                "Next",
                "Next",
                r#"Say { room: "r", text: "one" } -> Some(1)"#,
                r#"Join { room: "r", since: 0, upto: 1 }"#,
                "Next",
                r#"Leave { room: "r" }"#,
                "Next",
                "Next",
            ]
        );
        // Another connection's process sees the file: its JOIN replays up to seq 1, and
        // its own SAY is appended after it, under its own name.
        let mut b = FileSession::new(dir.path(), Fsync::Never);
        let (out, steps) = lines(&mut b, &["JOIN r 0", "SAY r two"]);
        assert_eq!(out, "ACK r 2\n");
        assert_eq!(steps[0], r#"Join { room: "r", since: 0, upto: 1 }"#);
        let mut log = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        let mut names = Vec::new();
        log.refresh_locked().unwrap();
        log.read_since(0, 1 << 20, |r| names.push(format!("{} {}", r.name, r.text)))
            .unwrap();
        assert_eq!(names, ["ada one", "anon two"]);
    }

    #[test]
    fn a_line_too_long_closes_and_a_storage_failure_is_an_err() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileSession::new(&dir.path().join("missing"), Fsync::Never);
        let mut out = Vec::new();
        assert_eq!(s.handle(Err(ChatError::LineTooLong), &mut out), Step::Close);
        assert_eq!(s.handle(Ok(b"JOIN r 0"), &mut out), Step::Next);
        assert_eq!(s.append("r", "lost"), None);
        reply_to_append("r", None).encode(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ERR line too long\nERR storage failure\nERR storage failure\n"
        );
    }
}
