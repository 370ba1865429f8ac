//! The chat protocol's errors: [`ChatError`], what a server answers with `ERR <reason>`,
//! and [`ReplyError`], what a client finds wrong in a server's line.

use super::MAX_SERVER_LINE;

/// Everything a server answers with `ERR <reason>`; [`reason`](Self::reason) is the exact
/// text of `docs/protocol-notes.md`, and `Display` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The line is longer than [`MAX_LINE`](super::MAX_LINE) bytes, newline included.
    #[error("{}", self.reason())]
    LineTooLong,
    /// The line is not valid UTF-8.
    #[error("{}", self.reason())]
    InvalidUtf8,
    /// The line is empty, or its first token is not a command.
    #[error("{}", self.reason())]
    UnknownCommand,
    /// Too few or too many arguments for the command.
    #[error("{}", self.reason())]
    WrongArgs,
    /// `NICK` with a name that is not 1 to 64 bytes of `[A-Za-z0-9_-]`.
    #[error("{}", self.reason())]
    BadName,
    /// A room that is not 1 to 64 bytes of `[A-Za-z0-9_-]`.
    #[error("{}", self.reason())]
    BadRoom,
    /// `JOIN` whose `<since>` is not a u64 in decimal.
    #[error("{}", self.reason())]
    BadSeq,
    /// `JOIN` of a room the connection has already joined.
    #[error("{}", self.reason())]
    AlreadyJoined,
    /// `LEAVE` of a room the connection has not joined.
    #[error("{}", self.reason())]
    NotJoined,
    /// `SAY` whose append to the room log failed.
    #[error("{}", self.reason())]
    StorageFailure,
}

impl ChatError {
    /// Every error, in the order of the table in `docs/protocol-notes.md`.
    pub const ALL: [ChatError; 10] = [
        ChatError::LineTooLong,
        ChatError::InvalidUtf8,
        ChatError::UnknownCommand,
        ChatError::WrongArgs,
        ChatError::BadName,
        ChatError::BadRoom,
        ChatError::BadSeq,
        ChatError::AlreadyJoined,
        ChatError::NotJoined,
        ChatError::StorageFailure,
    ];

    /// The text after `ERR ` on the wire, exactly as `docs/protocol-notes.md` fixes it.
    pub fn reason(&self) -> &'static str {
        match self {
            ChatError::LineTooLong => "line too long",
            ChatError::InvalidUtf8 => "invalid utf-8",
            ChatError::UnknownCommand => "unknown command",
            ChatError::WrongArgs => "wrong number of arguments",
            ChatError::BadName => "bad name",
            ChatError::BadRoom => "bad room",
            ChatError::BadSeq => "bad seq",
            ChatError::AlreadyJoined => "already joined",
            ChatError::NotJoined => "not joined",
            ChatError::StorageFailure => "storage failure",
        }
    }

    /// Whether the server closes the connection after sending this error: only for a
    /// line too long, since the rest of the stream can no longer be split into lines.
    pub fn closes_connection(&self) -> bool {
        matches!(self, ChatError::LineTooLong)
    }

    /// The error whose [`reason`](Self::reason) is `reason`, for clients that read an
    /// `ERR` line; `None` for a reason this protocol does not define.
    pub fn from_reason(reason: &str) -> Option<ChatError> {
        ChatError::ALL.into_iter().find(|e| e.reason() == reason)
    }
}

/// What a client finds wrong in a line from a server (see
/// [`Reply::parse`](super::Reply::parse)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// The line is longer than [`MAX_SERVER_LINE`] bytes, newline included.
    #[error("server line longer than {MAX_SERVER_LINE} bytes")]
    LineTooLong,
    /// The line is not valid UTF-8.
    #[error("server line is not valid UTF-8")]
    InvalidUtf8,
    /// The first token is not a reply this protocol defines.
    #[error("unknown server reply {word:?}")]
    UnknownReply {
        /// The first token of the line, cut to at most 64 bytes.
        word: String,
    },
    /// Too few or too many fields for the reply, or an empty `PONG` token or `ERR` reason.
    #[error("{reply} line has the wrong number of fields")]
    WrongArgs {
        /// The reply's first token, such as `"ACK"`.
        reply: &'static str,
    },
    /// A room that is not 1 to 64 bytes of `[A-Za-z0-9_-]`.
    #[error("{reply} line has a bad room")]
    BadRoom {
        /// The reply's first token, such as `"ACK"`.
        reply: &'static str,
    },
    /// A seq that is not a u64 in decimal.
    #[error("{reply} line has a bad seq")]
    BadSeq {
        /// The reply's first token, such as `"ACK"`.
        reply: &'static str,
    },
    /// A `MSG` whose sender name is not 1 to 64 bytes of `[A-Za-z0-9_-]`.
    #[error("MSG line has a bad name")]
    BadName,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_reason() {
        for e in ChatError::ALL {
            assert_eq!(e.to_string(), e.reason());
        }
    }

    #[test]
    fn reasons_are_the_documented_ones() {
        let reasons: Vec<&str> = ChatError::ALL.iter().map(ChatError::reason).collect();
        assert_eq!(
            reasons,
            [
                "line too long",
                "invalid utf-8",
                "unknown command",
                "wrong number of arguments",
                "bad name",
                "bad room",
                "bad seq",
                "already joined",
                "not joined",
                "storage failure",
            ]
        );
    }

    #[test]
    fn only_line_too_long_closes() {
        for e in ChatError::ALL {
            assert_eq!(e.closes_connection(), e == ChatError::LineTooLong, "{e:?}");
        }
    }

    #[test]
    fn from_reason_inverts_reason() {
        for e in ChatError::ALL {
            assert_eq!(ChatError::from_reason(e.reason()), Some(e));
        }
        assert_eq!(ChatError::from_reason("Bad Name"), None);
        assert_eq!(ChatError::from_reason(""), None);
    }

    #[test]
    fn reply_errors_describe_themselves() {
        assert_eq!(
            ReplyError::LineTooLong.to_string(),
            "server line longer than 8192 bytes"
        );
        assert_eq!(
            ReplyError::BadSeq { reply: "ACK" }.to_string(),
            "ACK line has a bad seq"
        );
        assert_eq!(
            ReplyError::UnknownReply {
                word: "HELLO".into()
            }
            .to_string(),
            "unknown server reply \"HELLO\""
        );
    }
}
