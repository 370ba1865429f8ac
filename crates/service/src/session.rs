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

use crate::commit::Pending;
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
    /// A `SAY` was appended and its `ACK` waits for the group commit's sync
    /// (`--fsync always`): write `out`, take [`Session::take_pending`], and once its
    /// outcome is in, call [`Session::synced`] before reading further lines. Other
    /// connections are served meanwhile.
    Syncing,
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
    /// A `SAY` waiting for its sync: the room and the seq its `ACK` will carry, and
    /// the sync until [`Session::take_pending`] takes it.
    syncing: Option<(String, u64, Option<Pending>)>,
}

impl Session {
    /// A new connection, named `anon` until it sends `NICK`.
    pub fn new<S: Subscriber>(hub: &Hub<S>) -> Self {
        Session {
            conn: hub.new_conn_id(),
            name: "anon".to_owned(),
            joined: Vec::new(),
            replaying: None,
            syncing: None,
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
            self.replaying.is_none() && self.syncing.is_none(),
            "lines are read only between JOINs and between syncs"
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
            Command::Say { room, text } => {
                match hub.say_pending(room, self.conn, &self.name, text) {
                    Ok((seq, None)) => Reply::Ack { room, seq }.encode(out),
                    Ok((seq, Some(pending))) => {
                        self.syncing = Some((room.to_owned(), seq, Some(pending)));
                        return Flow::Syncing;
                    }
                    Err(e) => storage_failure(room, &e, out),
                }
            }
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

    /// After [`Flow::Syncing`]: the sync the `ACK` waits for. The runtime hands it a
    /// callback (`Pending::on_done`) that stores the outcome and wakes the connection,
    /// or blocks on it (`Pending::wait`) where blocking is the runtime's way.
    pub fn take_pending(&mut self) -> Option<Pending> {
        self.syncing.as_mut().and_then(|s| s.2.take())
    }

    /// The sync after [`Flow::Syncing`] is done: appends the `ACK`, or
    /// `ERR storage failure` if the sync failed, to `out`. Lines may be read again.
    pub fn synced(&mut self, result: io::Result<()>, out: &mut Vec<u8>) {
        let Some((room, seq, _)) = self.syncing.take() else {
            return;
        };
        match result {
            Ok(()) => Reply::Ack { room: &room, seq }.encode(out),
            Err(e) => storage_failure(&room, &e, out),
        }
    }

    /// Whether a `SAY` of this connection waits for its sync.
    pub fn is_syncing(&self) -> bool {
        self.syncing.is_some()
    }

    /// The connection is gone: unsubscribe from every room.
    pub fn close<S: Subscriber>(&mut self, hub: &Hub<S>) {
        for room in self.joined.drain(..) {
            hub.leave(&room, self.conn);
        }
        self.replaying = None;
        self.syncing = None;
    }
}

fn storage_failure(room: &str, e: &io::Error, out: &mut Vec<u8>) {
    eprintln!("chat: room {room}: storage failure: {e}");
    Reply::err(ChatError::StorageFailure).encode(out);
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::hub::Line;
    use crate::log::Fsync;

    /// A subscriber that keeps what it is sent, in order.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Subscriber for Sink {
        fn offer(&self, line: &Line) -> bool {
            self.0.lock().unwrap().extend_from_slice(line);
            true
        }
        fn push_seam(&self, lines: Vec<u8>) {
            self.0.lock().unwrap().extend_from_slice(&lines);
        }
    }

    impl Sink {
        fn take(&self) -> String {
            String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
        }
    }

    /// One connection: its session, its subscriber, and what it was sent.
    struct Conn {
        session: Session,
        sink: Sink,
    }

    impl Conn {
        fn new(hub: &Hub<Sink>) -> Self {
            Conn {
                session: Session::new(hub),
                sink: Sink::default(),
            }
        }

        /// Sends `line` and returns everything the connection got, in order, as
        /// a server following the ordering rule would write it.
        fn send(&mut self, hub: &Hub<Sink>, line: &str) -> (String, Flow) {
            let mut out = Vec::new();
            let mut flow = self
                .session
                .handle_line(Ok(line.as_bytes()), hub, &self.sink, &mut out);
            let mut got = String::new();
            while flow == Flow::Replaying {
                got.push_str(&String::from_utf8(std::mem::take(&mut out)).unwrap());
                flow = self.session.replay_more(hub, &self.sink, &mut out);
            }
            got.push_str(&self.sink.take());
            got.push_str(&String::from_utf8(out).unwrap());
            (got, flow)
        }
    }

    fn hub() -> Hub<Sink> {
        Hub::open(None, Fsync::Never).unwrap()
    }

    #[test]
    fn every_command_gets_its_reply() {
        let hub = hub();
        let mut a = Conn::new(&hub);
        assert_eq!(a.send(&hub, "NICK ada").0, "OK\n");
        assert_eq!(a.send(&hub, "PING x y").0, "PONG x y\n");
        assert_eq!(a.send(&hub, "JOIN r 0").0, "JOINED r 1\n");
        assert_eq!(a.send(&hub, "SAY r hi there").0, "ACK r 1\n");
        assert_eq!(a.send(&hub, "LEAVE r").0, "LEFT r\n");
        // SAY to a room not joined is allowed.
        assert_eq!(a.send(&hub, "SAY r again").0, "ACK r 2\n");
    }

    #[test]
    fn others_get_msg_with_the_senders_name_and_the_sender_does_not() {
        let hub = hub();
        let (mut a, mut b) = (Conn::new(&hub), Conn::new(&hub));
        a.send(&hub, "NICK ada");
        a.send(&hub, "JOIN r 0");
        b.send(&hub, "JOIN r 0");
        assert_eq!(a.send(&hub, "SAY r hello").0, "ACK r 1\n");
        assert_eq!(b.sink.take(), "MSG r 1 ada hello\n");
        assert_eq!(b.send(&hub, "SAY r back").0, "ACK r 2\n");
        assert_eq!(a.sink.take(), "MSG r 2 anon back\n");
        b.send(&hub, "LEAVE r");
        a.send(&hub, "SAY r gone");
        assert_eq!(b.sink.take(), "");
    }

    #[test]
    fn state_errors_leave_subscriptions_alone() {
        let hub = hub();
        let mut a = Conn::new(&hub);
        assert_eq!(a.send(&hub, "LEAVE r").0, "ERR not joined\n");
        a.send(&hub, "JOIN r 0");
        assert_eq!(a.send(&hub, "JOIN r 0").0, "ERR already joined\n");
        assert_eq!(a.send(&hub, "LEAVE r").0, "LEFT r\n");
        assert_eq!(a.send(&hub, "LEAVE r").0, "ERR not joined\n");
        assert_eq!(a.send(&hub, "nick x").0, "ERR unknown command\n");
    }

    #[test]
    fn a_line_too_long_closes() {
        let hub = hub();
        let mut a = Conn::new(&hub);
        let mut out = Vec::new();
        let flow = a
            .session
            .handle_line(Err(ChatError::LineTooLong), &hub, &a.sink, &mut out);
        assert_eq!(
            (out.as_slice(), flow),
            (&b"ERR line too long\n"[..], Flow::Close)
        );
    }

    #[test]
    fn a_long_replay_comes_in_batches_then_the_seam_then_live() {
        let hub = hub();
        let text = "x".repeat(1000);
        let n = 3 * REPLAY_BATCH / 1000;
        let mut a = Conn::new(&hub);
        for _ in 0..n {
            a.send(&hub, &format!("SAY big {text}"));
        }
        let mut b = Conn::new(&hub);
        let mut out = Vec::new();
        let mut flow = b
            .session
            .handle_line(Ok(b"JOIN big 0"), &hub, &b.sink, &mut out);
        let mut batches = 0;
        let mut got = String::new();
        while flow == Flow::Replaying {
            batches += 1;
            assert!(out.len() <= REPLAY_BATCH + 1100, "a batch is bounded");
            got.push_str(std::str::from_utf8(&out).unwrap());
            out.clear();
            flow = b.session.replay_more(&hub, &b.sink, &mut out);
        }
        assert!(batches >= 2, "{batches} batches");
        a.send(&hub, "SAY big live");
        got.push_str(&b.sink.take());
        let seqs: Vec<&str> = got.lines().map(|l| l.split(' ').nth(2).unwrap()).collect();
        let want: Vec<String> = (1..=n + 1).chain([n + 1]).map(|s| s.to_string()).collect();
        assert_eq!(seqs, want, "replay 1..=n, JOINED n+1, then live n+1");
        assert!(got.lines().nth(n).unwrap().starts_with("JOINED big"));
    }

    #[test]
    fn close_unsubscribes_everywhere() {
        let hub = hub();
        let (mut a, mut b) = (Conn::new(&hub), Conn::new(&hub));
        b.send(&hub, "JOIN r1 0");
        b.send(&hub, "JOIN r2 0");
        b.session.close(&hub);
        a.send(&hub, "SAY r1 x");
        a.send(&hub, "SAY r2 y");
        assert_eq!(b.sink.take(), "");
        assert!(!hub.leave("r1", b.session.conn()));
    }

    #[test]
    fn with_fsync_always_the_ack_waits_for_the_sync() {
        let hub: Hub<Sink> = Hub::open(None, Fsync::Always).unwrap();
        let (mut a, mut b) = (Conn::new(&hub), Conn::new(&hub));
        b.send(&hub, "JOIN r 0");
        let mut out = Vec::new();
        let flow = a
            .session
            .handle_line(Ok(b"SAY r durable"), &hub, &a.sink, &mut out);
        assert_eq!((flow, out.as_slice()), (Flow::Syncing, &b""[..]));
        assert!(a.session.is_syncing());
        // Subscribers are offered the line at once; the sender's ACK waits.
        assert_eq!(b.sink.take(), "MSG r 1 anon durable\n");
        let pending = a.session.take_pending().expect("a pending sync");
        a.session.synced(pending.wait(), &mut out);
        assert_eq!(out, b"ACK r 1\n");
        assert!(!a.session.is_syncing());
        a.session.synced(Err(io::Error::other("late")), &mut out);
        assert_eq!(out, b"ACK r 1\n", "no second reply without a SAY");
        assert_eq!(a.send(&hub, "PING x").0, "PONG x\n");
    }
}
