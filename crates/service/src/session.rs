//! One chat connection's protocol state, runtime-free: it turns each line the
//! client sent into calls on the [`Hub`] and reply bytes. Every in-process chat
//! server (threads, reactor, Tokio, tokio-uring, fibers) runs this same code and
//! differs only in how bytes reach the socket.
//!
//! # The one ordering rule
//!
//! A server keeps ONE outbound path per connection, fed in this order: the
//! bytes [`Session`] leaves in `out`, and the lines the hub hands the
//! connection's [`Subscriber`] (`push_seam`, `offer`). Whatever is in `out`
//! when a `JOIN` completes is taken into the seam, so replies, replay and live
//! lines reach the client in the order they were produced, provided the server
//! writes `out` (or queues it behind what the subscriber already holds) before
//! it handles the next line.

use std::io;

use proto::chat::{ChatError, Command, Reply};

use crate::hub::{ConnId, Hub, JoinStep, Subscriber};

/// Replay is produced in batches of about this many bytes, so that a client
/// catching up on a long room never makes the server buffer the whole room.
pub const REPLAY_BATCH: usize = 64 * 1024;

/// What the server does after [`Session::handle_line`] or
/// [`Session::replay_more`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Write `out`, then go on reading lines.
    Continue,
    /// A `JOIN` is replaying: write `out` (with backpressure), then call
    /// [`Session::replay_more`] before reading further lines.
    Replaying,
    /// Write `out`, then close the connection (the line was too long).
    Close,
}

/// The protocol state of one chat connection.
#[derive(Debug)]
pub struct Session {
    conn: ConnId,
    name: String,
    /// Rooms this connection is subscribed to; a handful at most, so a Vec.
    joined: Vec<String>,
    /// A `JOIN` in progress: the room and the last seq replayed so far.
    replaying: Option<(String, u64)>,
}

impl Session {
    /// A new connection, named `anon` until it sends `NICK`.
    pub fn new<S: Subscriber>(hub: &Hub<S>) -> Self {
        Session {
            conn: hub.new_conn_id(),
            name: "anon".to_owned(),
            joined: Vec::new(),
            replaying: None,
        }
    }

    /// This connection's id in the hub.
    pub fn conn(&self) -> ConnId {
        self.conn
    }

    /// Handles one line from [`proto::chat::LineBuffer::next_line`], appending
    /// replies to `out`.
    pub fn handle_line<S: Subscriber>(
        &mut self,
        line: Result<&[u8], ChatError>,
        hub: &Hub<S>,
        sub: &S,
        out: &mut Vec<u8>,
    ) -> Flow {
        debug_assert!(
            self.replaying.is_none(),
            "lines are read only between JOINs"
        );
        let command = match line.and_then(Command::parse) {
            Ok(command) => command,
            Err(e) => {
                Reply::err(e).encode(out);
                return if e.closes_connection() {
                    Flow::Close
                } else {
                    Flow::Continue
                };
            }
        };
        match command {
            Command::Nick { name } => {
                name.clone_into(&mut self.name);
                Reply::Ok.encode(out);
            }
            Command::Ping { token } => Reply::Pong { token }.encode(out),
            Command::Say { room, text } => match hub.say(room, self.conn, &self.name, text) {
                Ok(seq) => Reply::Ack { room, seq }.encode(out),
                Err(e) => storage_failure(room, &e, out),
            },
            Command::Leave { room } => match self.joined.iter().position(|r| r == room) {
                Some(i) => {
                    self.joined.swap_remove(i);
                    hub.leave(room, self.conn);
                    Reply::Left { room }.encode(out);
                }
                None => Reply::err(ChatError::NotJoined).encode(out),
            },
            Command::Join { room, since } => {
                if self.joined.iter().any(|r| r == room) {
                    Reply::err(ChatError::AlreadyJoined).encode(out);
                } else {
                    self.replaying = Some((room.to_owned(), since));
                    return self.replay_more(hub, sub, out);
                }
            }
        }
        Flow::Continue
    }

    /// Produces the next batch of a `JOIN`'s replay into `out`; when the replay
    /// reaches the live end, the hub takes `out` into the seam and subscribes
    /// `sub`, and the flow is [`Flow::Continue`] again.
    pub fn replay_more<S: Subscriber>(&mut self, hub: &Hub<S>, sub: &S, out: &mut Vec<u8>) -> Flow {
        let Some((room, since)) = self.replaying.take() else {
            return Flow::Continue;
        };
        match hub.join_step(&room, since, self.conn, sub, out, REPLAY_BATCH) {
            Ok(JoinStep::Joined { .. }) => {
                self.joined.push(room);
                Flow::Continue
            }
            Ok(JoinStep::More { since }) => {
                self.replaying = Some((room, since));
                Flow::Replaying
            }
            Err(e) => {
                storage_failure(&room, &e, out);
                Flow::Continue
            }
        }
    }

    /// The connection is gone: unsubscribe from every room.
    pub fn close<S: Subscriber>(&mut self, hub: &Hub<S>) {
        for room in self.joined.drain(..) {
            hub.leave(&room, self.conn);
        }
        self.replaying = None;
    }
}

fn storage_failure(room: &str, e: &io::Error, out: &mut Vec<u8>) {
    eprintln!("chat: room {room}: storage failure: {e}");
    Reply::err(ChatError::StorageFailure).encode(out);
}
