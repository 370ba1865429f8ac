//! Client-to-server chat lines: [`Command`], its parser (which picks the `ERR` a server
//! answers) and its encoder (what clients and the load generator send).

use super::{
    ChatError, MAX_LINE, is_valid_name, parse_seq, push_u64, split_args, split_args_and_rest,
    split_word,
};

/// One line a client sends, borrowing its arguments from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// `NICK <name>`: names the connection.
    Nick {
        /// 1 to 64 bytes of `[A-Za-z0-9_-]`.
        name: &'a str,
    },
    /// `JOIN <room> <since>`: replays the room's messages after `since`, then subscribes.
    Join {
        /// 1 to 64 bytes of `[A-Za-z0-9_-]`.
        room: &'a str,
        /// The last seq the client has seen; 0 replays the whole room.
        since: u64,
    },
    /// `LEAVE <room>`: unsubscribes.
    Leave {
        /// 1 to 64 bytes of `[A-Za-z0-9_-]`.
        room: &'a str,
    },
    /// `SAY <room> <text>`: appends a message to the room.
    Say {
        /// 1 to 64 bytes of `[A-Za-z0-9_-]`.
        room: &'a str,
        /// The rest of the line: opaque, possibly empty, spaces allowed.
        text: &'a str,
    },
    /// `PING <token>`: asks for `PONG <token>`.
    Ping {
        /// The rest of the line: 1 byte or more, spaces allowed.
        token: &'a str,
    },
}

impl<'a> Command<'a> {
    /// Parses one line WITHOUT its `\n`; a trailing `\r` is dropped.
    ///
    /// The checks run in the order `docs/protocol-notes.md` fixes, and the first failure
    /// is the error: line length (over `MAX_LINE - 1` bytes here is
    /// [`ChatError::LineTooLong`], though cutting the stream is [`LineBuffer`]'s job),
    /// UTF-8, command, number of arguments, then each argument left to right. Whether a
    /// room is already joined is the caller's business, so [`ChatError::AlreadyJoined`],
    /// [`ChatError::NotJoined`] and [`ChatError::StorageFailure`] never come from here.
    ///
    /// [`LineBuffer`]: super::LineBuffer
    pub fn parse(line: &'a [u8]) -> Result<Command<'a>, ChatError> {
        if line.len() > MAX_LINE - 1 {
            return Err(ChatError::LineTooLong);
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = std::str::from_utf8(line).map_err(|_| ChatError::InvalidUtf8)?;
        let (word, rest) = split_word(line);
        match word {
            "NICK" => {
                let [name] = split_args(rest).ok_or(ChatError::WrongArgs)?;
                check_name(name)?;
                Ok(Command::Nick { name })
            }
            "JOIN" => {
                let [room, since] = split_args(rest).ok_or(ChatError::WrongArgs)?;
                check_room(room)?;
                let since = parse_seq(since).ok_or(ChatError::BadSeq)?;
                Ok(Command::Join { room, since })
            }
            "LEAVE" => {
                let [room] = split_args(rest).ok_or(ChatError::WrongArgs)?;
                check_room(room)?;
                Ok(Command::Leave { room })
            }
            "SAY" => {
                let ([room], text) = split_args_and_rest(rest).ok_or(ChatError::WrongArgs)?;
                check_room(room)?;
                Ok(Command::Say { room, text })
            }
            "PING" => match rest {
                Some(token) if !token.is_empty() => Ok(Command::Ping { token }),
                _ => Err(ChatError::WrongArgs),
            },
            _ => Err(ChatError::UnknownCommand),
        }
    }

    /// Appends the line and its `\n` to `out`.
    ///
    /// The command is written as it is: the caller keeps it valid (names and rooms per
    /// [`is_valid_name`], no `\n` in a text or token, a text or token that does not end
    /// in `\r`, the whole line within [`MAX_LINE`]), so that it parses back to itself.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Command::Nick { name } => {
                out.extend_from_slice(b"NICK ");
                out.extend_from_slice(name.as_bytes());
            }
            Command::Join { room, since } => {
                out.extend_from_slice(b"JOIN ");
                out.extend_from_slice(room.as_bytes());
                out.push(b' ');
                push_u64(out, since);
            }
            Command::Leave { room } => {
                out.extend_from_slice(b"LEAVE ");
                out.extend_from_slice(room.as_bytes());
            }
            Command::Say { room, text } => {
                out.extend_from_slice(b"SAY ");
                out.extend_from_slice(room.as_bytes());
                out.push(b' ');
                out.extend_from_slice(text.as_bytes());
            }
            Command::Ping { token } => {
                out.extend_from_slice(b"PING ");
                out.extend_from_slice(token.as_bytes());
            }
        }
        end_line(out);
    }
}

/// Ends an encoded command line. [`Command::parse`] drops one `\r` before the `\n`
/// (docs/PROTOCOL.md), so a line whose last byte is itself a `\r` (a `PING` token or a `SAY`
/// text that ends in one) gets a second `\r`: it then parses back to what was encoded.
fn end_line(out: &mut Vec<u8>) {
    if out.last() == Some(&b'\r') {
        out.push(b'\r');
    }
    out.push(b'\n');
}

fn check_name(name: &str) -> Result<(), ChatError> {
    if is_valid_name(name.as_bytes()) {
        Ok(())
    } else {
        Err(ChatError::BadName)
    }
}

fn check_room(room: &str) -> Result<(), ChatError> {
    if is_valid_name(room.as_bytes()) {
        Ok(())
    } else {
        Err(ChatError::BadRoom)
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_NAME;
    use super::*;
    use ChatError::*;

    fn parse(line: &[u8]) -> Result<Command<'_>, ChatError> {
        Command::parse(line)
    }

    fn encoded(cmd: Command<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        cmd.encode(&mut out);
        out
    }

    #[test]
    fn every_command() {
        assert_eq!(parse(b"NICK bob"), Ok(Command::Nick { name: "bob" }));
        assert_eq!(
            parse(b"JOIN lobby 0"),
            Ok(Command::Join {
                room: "lobby",
                since: 0
            })
        );
        assert_eq!(
            parse(b"JOIN r-1_x 18446744073709551615"),
            Ok(Command::Join {
                room: "r-1_x",
                since: u64::MAX
            })
        );
        assert_eq!(parse(b"LEAVE lobby"), Ok(Command::Leave { room: "lobby" }));
        assert_eq!(
            parse(b"SAY lobby hello  world "),
            Ok(Command::Say {
                room: "lobby",
                text: "hello  world "
            })
        );
        assert_eq!(
            parse("SAY lobby héllo ✓".as_bytes()),
            Ok(Command::Say {
                room: "lobby",
                text: "héllo ✓"
            })
        );
        assert_eq!(parse(b"PING 1 2 3"), Ok(Command::Ping { token: "1 2 3" }));
        assert_eq!(parse(b"PING  "), Ok(Command::Ping { token: " " }));
    }

    #[test]
    fn say_with_empty_text() {
        assert_eq!(
            parse(b"SAY r "),
            Ok(Command::Say {
                room: "r",
                text: ""
            })
        );
        assert_eq!(parse(b"SAY r"), Err(WrongArgs));
    }

    #[test]
    fn carriage_return_is_dropped_once() {
        assert_eq!(parse(b"NICK bob\r"), Ok(Command::Nick { name: "bob" }));
        assert_eq!(parse(b"PING x\r"), Ok(Command::Ping { token: "x" }));
        assert_eq!(
            parse(b"SAY r a\r\r"),
            Ok(Command::Say {
                room: "r",
                text: "a\r"
            })
        );
        assert_eq!(parse(b"NICK bob\r\r"), Err(BadName));
        assert_eq!(parse(b"NICK b\rob"), Err(BadName));
        assert_eq!(parse(b"\r"), Err(UnknownCommand));
        assert_eq!(parse(b"SAY r\r"), Err(WrongArgs));
        assert_eq!(parse(b"PING \r"), Err(WrongArgs));
    }

    #[test]
    fn err_line_too_long() {
        let mut line = b"SAY r ".to_vec();
        line.resize(MAX_LINE - 1, b'a');
        assert!(
            parse(&line).is_ok(),
            "4095 bytes + newline is exactly the limit"
        );
        line.push(b'a');
        assert_eq!(parse(&line), Err(LineTooLong));
        // The '\r' counts: it was on the wire.
        line.pop();
        line.pop();
        line.push(b'\r');
        assert!(parse(&line).is_ok());
        line.push(b'\r');
        assert_eq!(parse(&line), Err(LineTooLong));
        // Length is checked before anything else.
        assert_eq!(parse(&[0xff; MAX_LINE]), Err(LineTooLong));
    }

    #[test]
    fn err_invalid_utf8() {
        assert_eq!(parse(b"SAY r \xff"), Err(InvalidUtf8));
        assert_eq!(parse(b"SAY r \xc3"), Err(InvalidUtf8), "truncated sequence");
        assert_eq!(parse(b"SAY r \xed\xa0\x80"), Err(InvalidUtf8), "surrogate");
        assert_eq!(parse(b"\xffNICK bob"), Err(InvalidUtf8));
        // UTF-8 is checked before the command and the arguments.
        assert_eq!(parse(b"nick \xff"), Err(InvalidUtf8));
        assert_eq!(parse(b"NICK \xff \xff"), Err(InvalidUtf8));
    }

    #[test]
    fn err_unknown_command() {
        for line in [
            &b""[..],
            b"\r",
            b" ",
            b"nick bob",
            b"Nick bob",
            b"NICKNAME bob",
            b" NICK bob",
            b"NICK\tbob",
            b"HELLO",
            b"QUIT",
        ] {
            assert_eq!(parse(line), Err(UnknownCommand), "{line:?}");
        }
    }

    #[test]
    fn err_wrong_number_of_arguments() {
        // The examples of docs/protocol-notes.md.
        for line in [
            &b"NICK"[..],
            b"NICK a b",
            b"JOIN r",
            b"JOIN r 1 x",
            b"LEAVE",
            b"SAY r",
            b"PING",
        ] {
            assert_eq!(parse(line), Err(WrongArgs), "{line:?}");
        }
        // Tokens are separated by single spaces.
        for line in [
            &b"NICK  bob"[..],
            b"NICK bob ",
            b"JOIN r  1",
            b"JOIN",
            b"JOIN r 1 ",
            b"LEAVE r ",
            b"LEAVE a b",
            b"SAY",
            b"SAY ",
            b"PING ",
        ] {
            assert_eq!(parse(line), Err(WrongArgs), "{line:?}");
        }
        // The count is checked before the arguments themselves.
        assert_eq!(parse(b"NICK b.d b.d"), Err(WrongArgs));
        assert_eq!(parse(b"JOIN b.d"), Err(WrongArgs));
    }

    #[test]
    fn err_bad_name() {
        let long = format!("NICK {}", "n".repeat(MAX_NAME + 1));
        let longest = format!("NICK {}", "n".repeat(MAX_NAME));
        assert_eq!(parse(long.as_bytes()), Err(BadName));
        assert!(parse(longest.as_bytes()).is_ok());
        for line in [
            &b"NICK "[..],
            b"NICK bob!",
            b"NICK b.b",
            "NICK bøb".as_bytes(),
        ] {
            assert_eq!(parse(line), Err(BadName), "{line:?}");
        }
    }

    #[test]
    fn err_bad_room() {
        let long = "r".repeat(MAX_NAME + 1);
        for line in [
            format!("JOIN {long} 0"),
            format!("LEAVE {long}"),
            format!("SAY {long} hi"),
            "JOIN  0".to_string(),
            "JOIN r/x 0".to_string(),
            "LEAVE ".to_string(),
            "LEAVE ../etc".to_string(),
            "SAY  hi".to_string(),
            "SAY r.x hi".to_string(),
            "SAY r\u{e9} hi".to_string(),
        ] {
            assert_eq!(parse(line.as_bytes()), Err(BadRoom), "{line:?}");
        }
        // Arguments are checked left to right: the room before the seq.
        assert_eq!(parse(b"JOIN r.x y"), Err(BadRoom));
    }

    #[test]
    fn err_bad_seq() {
        for line in [
            &b"JOIN r "[..],
            b"JOIN r -1",
            b"JOIN r +1",
            b"JOIN r 1.0",
            b"JOIN r 0x1",
            b"JOIN r one",
            b"JOIN r 18446744073709551616",
            b"JOIN r 000000000000000000001",
        ] {
            assert_eq!(parse(line), Err(BadSeq), "{line:?}");
        }
        assert_eq!(
            parse(b"JOIN r 00000000000000000001"),
            Ok(Command::Join {
                room: "r",
                since: 1
            })
        );
    }

    #[test]
    fn encodes_lines() {
        assert_eq!(encoded(Command::Nick { name: "bob" }), b"NICK bob\n");
        assert_eq!(
            encoded(Command::Join {
                room: "r",
                since: 7
            }),
            b"JOIN r 7\n"
        );
        assert_eq!(encoded(Command::Leave { room: "r" }), b"LEAVE r\n");
        assert_eq!(
            encoded(Command::Say {
                room: "r",
                text: "a b"
            }),
            b"SAY r a b\n"
        );
        assert_eq!(
            encoded(Command::Say {
                room: "r",
                text: ""
            }),
            b"SAY r \n"
        );
        assert_eq!(encoded(Command::Ping { token: "t 1" }), b"PING t 1\n");
    }

    #[test]
    fn encode_appends() {
        let mut out = b"PING a\n".to_vec();
        Command::Leave { room: "r" }.encode(&mut out);
        assert_eq!(out, b"PING a\nLEAVE r\n");
    }
}
