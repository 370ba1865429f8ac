//! Server-to-client chat lines: [`Reply`], its encoder (what servers send) and its
//! parser (what clients, the load generator and the conformance tests read).

use super::{
    ChatError, MAX_SERVER_LINE, ReplyError, is_valid_name, parse_seq, push_u64, split_args,
    split_args_and_rest, split_word,
};

/// One line a server sends, borrowing its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `OK`: the answer to `NICK`.
    Ok,
    /// `MSG <room> <seq> <name> <text>`: a message of a joined room, replayed or live.
    Msg {
        /// The room the message belongs to.
        room: &'a str,
        /// The message's seq in its room.
        seq: u64,
        /// The sender's nick.
        name: &'a str,
        /// The rest of the line: possibly empty, spaces allowed.
        text: &'a str,
    },
    /// `ACK <room> <seq>`: the sender's own `SAY` is durable under `seq`.
    Ack {
        /// The room the message was appended to.
        room: &'a str,
        /// The seq the message got.
        seq: u64,
    },
    /// `JOINED <room> <next>`: the replay is over; live messages follow.
    Joined {
        /// The room joined.
        room: &'a str,
        /// The seq the room's next message will get.
        next: u64,
    },
    /// `LEFT <room>`: the answer to `LEAVE`.
    Left {
        /// The room left.
        room: &'a str,
    },
    /// `PONG <token>`: the answer to `PING`, echoing its token.
    Pong {
        /// The rest of the line: 1 byte or more, spaces allowed.
        token: &'a str,
    },
    /// `ERR <reason>`: a [`ChatError`]'s reason, or another text from a foreign server.
    Err {
        /// The rest of the line: 1 byte or more.
        reason: &'a str,
    },
}

impl<'a> Reply<'a> {
    /// Appends the line and its `\n` to `out`, such as `b"ACK room 7\n"`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Reply::Ok => out.extend_from_slice(b"OK"),
            Reply::Msg {
                room,
                seq,
                name,
                text,
            } => {
                // One reservation for the line: MSG lines are the bulk of a server's output.
                out.reserve(4 + room.len() + 22 + name.len() + 1 + text.len() + 1);
                out.extend_from_slice(b"MSG ");
                out.extend_from_slice(room.as_bytes());
                out.push(b' ');
                push_u64(out, seq);
                out.push(b' ');
                out.extend_from_slice(name.as_bytes());
                out.push(b' ');
                out.extend_from_slice(text.as_bytes());
            }
            Reply::Ack { room, seq } => {
                out.extend_from_slice(b"ACK ");
                out.extend_from_slice(room.as_bytes());
                out.push(b' ');
                push_u64(out, seq);
            }
            Reply::Joined { room, next } => {
                out.extend_from_slice(b"JOINED ");
                out.extend_from_slice(room.as_bytes());
                out.push(b' ');
                push_u64(out, next);
            }
            Reply::Left { room } => {
                out.extend_from_slice(b"LEFT ");
                out.extend_from_slice(room.as_bytes());
            }
            Reply::Pong { token } => {
                out.extend_from_slice(b"PONG ");
                out.extend_from_slice(token.as_bytes());
            }
            Reply::Err { reason } => {
                out.extend_from_slice(b"ERR ");
                out.extend_from_slice(reason.as_bytes());
            }
        }
        out.push(b'\n');
    }

    /// Parses one server line WITHOUT its `\n`.
    ///
    /// Unlike [`Command::parse`](super::Command::parse), a trailing `\r` is kept: servers
    /// end lines in `\n` alone, and a `\r` at the end of a `MSG` text or a `PONG` token is
    /// part of what the client sent. Every line a ringside server sends parses; the
    /// checks run in the same order as for commands (length, UTF-8, reply, number of
    /// fields, fields left to right), and rooms, names and seqs are held to the protocol's
    /// rules so that a client notices a server that breaks them. An `ERR` reason may be
    /// any non-empty text; [`ChatError::from_reason`] says whether it is one of ours.
    pub fn parse(line: &'a [u8]) -> Result<Reply<'a>, ReplyError> {
        if line.len() > MAX_SERVER_LINE - 1 {
            return Err(ReplyError::LineTooLong);
        }
        let line = std::str::from_utf8(line).map_err(|_| ReplyError::InvalidUtf8)?;
        let (word, rest) = split_word(line);
        match word {
            "OK" => match rest {
                None => Ok(Reply::Ok),
                Some(_) => Err(ReplyError::WrongArgs { reply: "OK" }),
            },
            "MSG" => {
                const REPLY: &str = "MSG";
                let ([room, seq, name], text) =
                    split_args_and_rest(rest).ok_or(ReplyError::WrongArgs { reply: REPLY })?;
                let room = check_room(room, REPLY)?;
                let seq = check_seq(seq, REPLY)?;
                if !is_valid_name(name.as_bytes()) {
                    return Err(ReplyError::BadName);
                }
                Ok(Reply::Msg {
                    room,
                    seq,
                    name,
                    text,
                })
            }
            "ACK" => {
                const REPLY: &str = "ACK";
                let [room, seq] = split_args(rest).ok_or(ReplyError::WrongArgs { reply: REPLY })?;
                Ok(Reply::Ack {
                    room: check_room(room, REPLY)?,
                    seq: check_seq(seq, REPLY)?,
                })
            }
            "JOINED" => {
                const REPLY: &str = "JOINED";
                let [room, next] =
                    split_args(rest).ok_or(ReplyError::WrongArgs { reply: REPLY })?;
                Ok(Reply::Joined {
                    room: check_room(room, REPLY)?,
                    next: check_seq(next, REPLY)?,
                })
            }
            "LEFT" => {
                const REPLY: &str = "LEFT";
                let [room] = split_args(rest).ok_or(ReplyError::WrongArgs { reply: REPLY })?;
                Ok(Reply::Left {
                    room: check_room(room, REPLY)?,
                })
            }
            "PONG" => match rest {
                Some(token) if !token.is_empty() => Ok(Reply::Pong { token }),
                _ => Err(ReplyError::WrongArgs { reply: "PONG" }),
            },
            "ERR" => match rest {
                Some(reason) if !reason.is_empty() => Ok(Reply::Err { reason }),
                _ => Err(ReplyError::WrongArgs { reply: "ERR" }),
            },
            _ => Err(ReplyError::UnknownReply {
                word: truncated(word, 64).to_owned(),
            }),
        }
    }

    /// The `ERR` line for `e`: `Reply::Err { reason: e.reason() }`.
    pub fn err(e: ChatError) -> Reply<'static> {
        Reply::Err { reason: e.reason() }
    }
}

fn check_room<'a>(room: &'a str, reply: &'static str) -> Result<&'a str, ReplyError> {
    if is_valid_name(room.as_bytes()) {
        Ok(room)
    } else {
        Err(ReplyError::BadRoom { reply })
    }
}

fn check_seq(seq: &str, reply: &'static str) -> Result<u64, ReplyError> {
    parse_seq(seq).ok_or(ReplyError::BadSeq { reply })
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary, so that
/// an error never carries a whole 8 KiB line.
fn truncated(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::super::{MAX_LINE, MAX_NAME};
    use super::*;

    fn encoded(reply: Reply<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        reply.encode(&mut out);
        out
    }

    #[test]
    fn encodes_every_reply() {
        assert_eq!(encoded(Reply::Ok), b"OK\n");
        assert_eq!(
            encoded(Reply::Msg {
                room: "r",
                seq: 12,
                name: "bob",
                text: "hi there"
            }),
            b"MSG r 12 bob hi there\n"
        );
        assert_eq!(
            encoded(Reply::Msg {
                room: "r",
                seq: 1,
                name: "bob",
                text: ""
            }),
            b"MSG r 1 bob \n"
        );
        assert_eq!(
            encoded(Reply::Ack {
                room: "room",
                seq: 7
            }),
            b"ACK room 7\n"
        );
        assert_eq!(
            encoded(Reply::Joined { room: "r", next: 1 }),
            b"JOINED r 1\n"
        );
        assert_eq!(encoded(Reply::Left { room: "r" }), b"LEFT r\n");
        assert_eq!(encoded(Reply::Pong { token: "a b" }), b"PONG a b\n");
        assert_eq!(
            encoded(Reply::err(ChatError::WrongArgs)),
            b"ERR wrong number of arguments\n"
        );
    }

    #[test]
    fn err_lines_for_every_error() {
        for e in ChatError::ALL {
            let line = encoded(Reply::err(e));
            assert_eq!(line, format!("ERR {}\n", e.reason()).as_bytes());
            let parsed = Reply::parse(&line[..line.len() - 1]);
            assert_eq!(parsed, Ok(Reply::Err { reason: e.reason() }));
        }
    }

    #[test]
    fn parses_every_reply() {
        assert_eq!(Reply::parse(b"OK"), Ok(Reply::Ok));
        assert_eq!(
            Reply::parse(b"MSG r 3 bob  two  spaces "),
            Ok(Reply::Msg {
                room: "r",
                seq: 3,
                name: "bob",
                text: " two  spaces "
            })
        );
        assert_eq!(
            Reply::parse(b"MSG r 3 bob "),
            Ok(Reply::Msg {
                room: "r",
                seq: 3,
                name: "bob",
                text: ""
            })
        );
        assert_eq!(
            Reply::parse(b"MSG r 3 bob a\r"),
            Ok(Reply::Msg {
                room: "r",
                seq: 3,
                name: "bob",
                text: "a\r"
            })
        );
        assert_eq!(
            Reply::parse(b"ACK r 18446744073709551615"),
            Ok(Reply::Ack {
                room: "r",
                seq: u64::MAX
            })
        );
        assert_eq!(
            Reply::parse(b"JOINED r 1"),
            Ok(Reply::Joined { room: "r", next: 1 })
        );
        assert_eq!(Reply::parse(b"LEFT r"), Ok(Reply::Left { room: "r" }));
        assert_eq!(Reply::parse(b"PONG  x "), Ok(Reply::Pong { token: " x " }));
        assert_eq!(
            Reply::parse(b"ERR something new"),
            Ok(Reply::Err {
                reason: "something new"
            })
        );
    }

    #[test]
    fn accepts_the_longest_msg_a_server_sends() {
        // The longest SAY a client can send, relayed with the longest room, name and seq.
        let room = "r".repeat(MAX_NAME);
        let name = "n".repeat(MAX_NAME);
        let text = "t".repeat(MAX_LINE - 1 - "SAY ".len() - room.len() - 1);
        let line = encoded(Reply::Msg {
            room: &room,
            seq: u64::MAX,
            name: &name,
            text: &text,
        });
        assert!(line.len() <= MAX_SERVER_LINE);
        assert_eq!(
            Reply::parse(&line[..line.len() - 1]),
            Ok(Reply::Msg {
                room: &room,
                seq: u64::MAX,
                name: &name,
                text: &text
            })
        );
    }

    #[test]
    fn rejects_malformed_lines() {
        let too_long = format!("PONG {}", "x".repeat(MAX_SERVER_LINE));
        let cases: [(&[u8], ReplyError); 22] = [
            (too_long.as_bytes(), ReplyError::LineTooLong),
            (b"PONG \xff", ReplyError::InvalidUtf8),
            (
                b"",
                ReplyError::UnknownReply {
                    word: String::new(),
                },
            ),
            (b"ok", ReplyError::UnknownReply { word: "ok".into() }),
            (
                b"OK\r",
                ReplyError::UnknownReply {
                    word: "OK\r".into(),
                },
            ),
            (b"OK ", ReplyError::WrongArgs { reply: "OK" }),
            (b"MSG r 1 bob", ReplyError::WrongArgs { reply: "MSG" }),
            (b"MSG r 1", ReplyError::WrongArgs { reply: "MSG" }),
            (b"MSG", ReplyError::WrongArgs { reply: "MSG" }),
            (b"MSG r.x 1 bob hi", ReplyError::BadRoom { reply: "MSG" }),
            (b"MSG r x bob hi", ReplyError::BadSeq { reply: "MSG" }),
            (b"MSG r 1 b.b hi", ReplyError::BadName),
            (b"MSG r 1  hi", ReplyError::BadName),
            (b"ACK r", ReplyError::WrongArgs { reply: "ACK" }),
            (b"ACK r 1 ", ReplyError::WrongArgs { reply: "ACK" }),
            (b"ACK  1", ReplyError::BadRoom { reply: "ACK" }),
            (b"JOINED r -1", ReplyError::BadSeq { reply: "JOINED" }),
            (b"LEFT", ReplyError::WrongArgs { reply: "LEFT" }),
            (b"LEFT r.x", ReplyError::BadRoom { reply: "LEFT" }),
            (b"PONG ", ReplyError::WrongArgs { reply: "PONG" }),
            (b"PONG", ReplyError::WrongArgs { reply: "PONG" }),
            (b"ERR ", ReplyError::WrongArgs { reply: "ERR" }),
        ];
        for (line, want) in cases {
            assert_eq!(Reply::parse(line), Err(want), "{line:?}");
        }
    }

    #[test]
    fn unknown_reply_word_is_cut() {
        let word = "é".repeat(100);
        match Reply::parse(word.as_bytes()) {
            Err(ReplyError::UnknownReply { word: cut }) => {
                assert_eq!(cut, "é".repeat(32));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
