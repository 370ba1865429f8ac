//! The in-process room hub: every room of a server, each with its durable log and its
//! subscribers, shared by all connections of one process whatever runtime drives them.
//!
//! Locking: one global lock only finds or creates a room; each room has its own lock,
//! held while a `SAY` appends and fans out, and while a `JOIN` step replays. Because the
//! last replay chunk, the `JOINED` line and the registration happen under one hold of
//! the room's lock, a joining subscriber sees every message exactly once: what was in
//! the log by then through replay, everything later as a live offer.
//!
//! ```text
//!  JOIN r 0                        room lock held                  live
//!  | More: MSG 1..k  | More: ... | MSG j..n, JOINED r n+1 (seam) | offer(MSG n+1) ...
//!  '-- caller writes these out --'-- sub.push_seam, register ----'-- sub.offer
//! ```

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use proto::chat::Reply;
use tempfile::TempDir;

use crate::commit::{GroupCommit, Pending};
use crate::log::{Fsync, LogError, RoomLog, recover_dir};
use proto::chat::is_valid_name;

/// One encoded server line, shared by every subscriber it goes to (encoded once per SAY).
pub type Line = Arc<[u8]>;

/// Names a connection to the hub; see [`Hub::new_conn_id`].
pub type ConnId = u64;

/// A connection's outbound queue as the hub sees it. Each runtime implements it over a
/// queue under a short `std::sync::Mutex` and its own way of waking the connection:
/// `blocking::Outbox` (a [`crate::blocking::Wakeup`]: a condvar for srv-threads, a
/// parked fiber for srv-fiber), srv-tokio's and srv-tokio-uring's outboxes (one byte
/// buffer and `tokio::sync::Notify`), srv-reactor's `Mailbox` (shared lines and a message
/// to the owning reactor). None is a channel: the slow-subscriber rule counts bytes.
pub trait Subscriber: Clone + Send + Sync + 'static {
    /// A live `MSG` line. Must not block: it is called with the room locked. Returns
    /// false when the subscriber is closed or its queued output has passed its pending
    /// limit; the hub then forgets it (the implementation has already arranged for the
    /// connection to be closed).
    fn offer(&self, line: &Line) -> bool;

    /// The last replay lines and the `JOINED` line, which must reach the client before any
    /// live line offered later. Called with the room locked. Never refused.
    fn push_seam(&self, lines: Vec<u8>);
}

/// What one [`Hub::join_step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinStep {
    /// The replay reached the end of the room: the seam went to the subscriber, which is
    /// now registered. `next` is the seq the room's next message will get.
    Joined { next: u64 },
    /// `out` holds a chunk of replay ending at seq `since`; write it to the client and
    /// call again with this `since`.
    More { since: u64 },
}

/// Counters for the exit line of a server.
#[derive(Debug, Default, Clone, Copy)]
pub struct HubStats {
    /// Rooms known to the hub (recovered at start or created since).
    pub rooms: usize,
    /// Messages appended through this hub since it opened.
    pub messages: u64,
    /// Subscribers forgotten because they refused a live line.
    pub cut_subscribers: u64,
}

struct Room<S> {
    log: RoomLog,
    /// In join order, each connection at most once.
    subs: Vec<(ConnId, S)>,
    /// Messages appended and subscribers cut since the hub opened, counted under the
    /// room's lock (already held) rather than in a line every room would share.
    messages: u64,
    cut_subscribers: u64,
}

/// Every room of a server.
pub struct Hub<S: Subscriber> {
    rooms: Mutex<HashMap<String, Arc<Mutex<Room<S>>>>>,
    dir: PathBuf,
    fsync: Fsync,
    next_conn: AtomicU64,
    /// With [`Fsync::Always`], the group commit that syncs the rooms' appends.
    commit: Option<GroupCommit>,
    /// Declared last so that the rooms' files are closed before the directory goes.
    _temp: Option<TempDir>,
}

impl<S: Subscriber> fmt::Debug for Hub<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("dir", &self.dir)
            .field("fsync", &self.fsync)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<S: Subscriber> Drop for Hub<S> {
    fn drop(&mut self) {
        if let Some(commit) = &self.commit {
            commit.stop();
        }
    }
}

/// Locks a mutex, taking over the state a panicking holder left. Every critical section
/// of the hub leaves the state consistent between its steps (a `Vec::retain` keeps the
/// elements it had not yet visited), so a panic in a `Subscriber` must not take every
/// later message of the room down with it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: Subscriber> Hub<S> {
    /// `Some(dir)`: creates `dir` if missing and recovers every room in it now, so that
    /// errors (corruption, permissions) surface at start. `None`: a fresh temporary
    /// directory, removed when the hub is dropped.
    pub fn open(data: Option<&Path>, fsync: Fsync) -> Result<Self, LogError> {
        let (dir, temp) = match data {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|source| LogError::Io {
                    path: dir.to_owned(),
                    source,
                })?;
                (dir.to_owned(), None)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("ringside-chat-")
                    .tempdir()
                    .map_err(|source| LogError::Io {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                (temp.path().to_owned(), Some(temp))
            }
        };
        let rooms = recover_dir(&dir, fsync)?
            .into_iter()
            .map(|log| {
                let room = Room {
                    log,
                    subs: Vec::new(),
                    messages: 0,
                    cut_subscribers: 0,
                };
                (room.log.room().to_owned(), Arc::new(Mutex::new(room)))
            })
            .collect();
        Ok(Hub {
            rooms: Mutex::new(rooms),
            dir,
            fsync,
            next_conn: AtomicU64::new(1),
            commit: (fsync == Fsync::Always).then(GroupCommit::new),
            _temp: temp,
        })
    }

    /// The directory holding the room files.
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// A connection id never handed out before by this hub.
    pub fn new_conn_id(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// `SAY`, blocking the caller until the message is durable as `--fsync` asks: see
    /// [`Hub::say_pending`]; with [`Fsync::Always`] this waits for the group commit.
    pub fn say(&self, room: &str, from: ConnId, name: &str, text: &str) -> io::Result<u64> {
        let (seq, pending) = self.say_pending(room, from, name, text)?;
        match pending {
            Some(pending) => pending.wait().map(|()| seq),
            None => Ok(seq),
        }
    }

    /// `SAY`: under the room's lock, appends the message (one `write(2)`), encodes the
    /// `MSG` line once, offers it to every subscriber but `from`, and forgets those that
    /// refuse. Returns the message's seq and, with [`Fsync::Always`], the [`Pending`]
    /// sync the sender's `ACK` must wait for (the group commit's, outside the room's
    /// lock: other `SAY`s to the room go on meanwhile and share the next sync). Opens
    /// the room (and creates its file) if it is new.
    ///
    /// Errors: `InvalidInput` for a bad room or name, or a text the log cannot hold; the
    /// log's I/O error otherwise (the message was not stored and nobody was offered it).
    pub fn say_pending(
        &self,
        room: &str,
        from: ConnId,
        name: &str,
        text: &str,
    ) -> io::Result<(u64, Option<Pending>)> {
        let room_ref = self.room(room)?;
        let mut r = lock(&room_ref);
        let seq = r.log.append_unsynced(name, text)?;
        let pending = match (&self.commit, r.log.sync_target()) {
            (Some(commit), Some(target)) => Some(Pending::new(commit.clone(), Arc::clone(target))),
            _ => None,
        };
        r.messages += 1;
        if r.subs.iter().any(|(id, _)| *id != from) {
            let mut buf = Vec::new();
            Reply::Msg {
                room,
                seq,
                name,
                text,
            }
            .encode(&mut buf);
            let line = Line::from(buf);
            let mut cut = 0;
            r.subs.retain(|(id, sub)| {
                let keep = *id == from || sub.offer(&line);
                cut += u64::from(!keep);
                keep
            });
            r.cut_subscribers += cut;
        }
        Ok((seq, pending))
    }

    /// One step of `JOIN`. Under the room's lock, appends to `out` the `MSG` lines with
    /// seq > `since`, up to about `max_bytes` of records (at least one if any remain). If
    /// that reaches the end of the room it also appends `JOINED room next`, hands
    /// `std::mem::take(out)` (whatever `out` held before included) to `sub.push_seam`,
    /// registers a clone of `sub` under `conn` (replacing one already registered under
    /// it), and returns [`JoinStep::Joined`]. Otherwise it returns [`JoinStep::More`] with
    /// the last seq put in `out`, and the caller writes `out` to its client (with
    /// backpressure, outside any lock) and calls again.
    ///
    /// Opens the room (and creates its file) if it is new. On error `out` is as it was.
    pub fn join_step(
        &self,
        room: &str,
        since: u64,
        conn: ConnId,
        sub: &S,
        out: &mut Vec<u8>,
        max_bytes: usize,
    ) -> io::Result<JoinStep> {
        let room_ref = self.room(room)?;
        let mut r = lock(&room_ref);
        let next = r.log.next_seq();
        if since.saturating_add(1) < next {
            let mark = out.len();
            let last = r
                .log
                .read_since(since, max_bytes, |rec| {
                    Reply::Msg {
                        room,
                        seq: rec.seq,
                        name: rec.name,
                        text: rec.text,
                    }
                    .encode(out);
                })
                .inspect_err(|_| out.truncate(mark))?;
            if last + 1 < next {
                return Ok(JoinStep::More { since: last });
            }
        }
        Reply::Joined { room, next }.encode(out);
        sub.push_seam(std::mem::take(out));
        match r.subs.iter_mut().find(|(id, _)| *id == conn) {
            Some(slot) => slot.1 = sub.clone(),
            None => r.subs.push((conn, sub.clone())),
        }
        Ok(JoinStep::Joined { next })
    }

    /// Unsubscribes `conn` from `room`; false if it was not subscribed.
    pub fn leave(&self, room: &str, conn: ConnId) -> bool {
        let Some(room_ref) = lock(&self.rooms).get(room).cloned() else {
            return false;
        };
        let mut r = lock(&room_ref);
        match r.subs.iter().position(|(id, _)| *id == conn) {
            Some(i) => {
                r.subs.remove(i);
                true
            }
            None => false,
        }
    }

    /// `fdatasync(2)` every room, for a clean shutdown. Tries them all; returns the first
    /// error.
    pub fn sync_all(&self) -> io::Result<()> {
        let rooms: Vec<_> = lock(&self.rooms).values().cloned().collect();
        let mut result = Ok(());
        for room in rooms {
            let r = lock(&room);
            if let Err(e) = r.log.sync()
                && result.is_ok()
            {
                result = Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", r.log.path().display()),
                ));
            }
        }
        result
    }

    pub fn stats(&self) -> HubStats {
        let rooms: Vec<_> = lock(&self.rooms).values().cloned().collect();
        let mut stats = HubStats {
            rooms: rooms.len(),
            ..HubStats::default()
        };
        for room in rooms {
            let r = lock(&room);
            stats.messages += r.messages;
            stats.cut_subscribers += r.cut_subscribers;
        }
        stats
    }

    /// Finds the room, opening its log if it is new.
    fn room(&self, room: &str) -> io::Result<Arc<Mutex<Room<S>>>> {
        if !is_valid_name(room.as_bytes()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "invalid room name",
            ));
        }
        let mut rooms = lock(&self.rooms);
        if let Some(r) = rooms.get(room) {
            return Ok(Arc::clone(r));
        }
        // Opening under the global lock keeps two connections from opening one file
        // twice; it happens once per room.
        let log = RoomLog::open(&self.dir, room, self.fsync).map_err(|e| match e {
            LogError::Io { ref source, .. } => io::Error::new(source.kind(), e),
            LogError::Corrupt { .. } => io::Error::new(io::ErrorKind::InvalidData, e),
        })?;
        let r = Arc::new(Mutex::new(Room {
            log,
            subs: Vec::new(),
            messages: 0,
            cut_subscribers: 0,
        }));
        rooms.insert(room.to_owned(), Arc::clone(&r));
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A subscriber that keeps everything it is given, or refuses live lines on demand.
    #[derive(Debug, Clone, Default)]
    struct Sink {
        out: Arc<Mutex<Vec<u8>>>,
        refuse: Arc<AtomicBool>,
    }

    impl Subscriber for Sink {
        fn offer(&self, line: &Line) -> bool {
            if self.refuse.load(Ordering::Relaxed) {
                return false;
            }
            self.out.lock().unwrap().extend_from_slice(line);
            true
        }

        fn push_seam(&self, lines: Vec<u8>) {
            self.out.lock().unwrap().extend_from_slice(&lines);
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(self.out.lock().unwrap().clone()).unwrap()
        }
    }

    fn temp_hub() -> Hub<Sink> {
        Hub::open(None, Fsync::Never).unwrap()
    }

    /// Joins in one step (a room small enough for `max_bytes`).
    fn join(hub: &Hub<Sink>, room: &str, since: u64, conn: ConnId, sink: &Sink) -> u64 {
        let mut out = Vec::new();
        match hub
            .join_step(room, since, conn, sink, &mut out, usize::MAX)
            .unwrap()
        {
            JoinStep::Joined { next } => {
                assert!(out.is_empty(), "join_step must hand out over to the seam");
                next
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn hub_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Hub<Sink>>();
    }

    #[test]
    fn say_reaches_subscribers_but_not_the_sender() {
        let hub = temp_hub();
        let (a, b, c) = (hub.new_conn_id(), hub.new_conn_id(), hub.new_conn_id());
        assert!(a != b && b != c && a != c);
        let (sa, sb) = (Sink::default(), Sink::default());
        assert_eq!(join(&hub, "r", 0, a, &sa), 1);
        assert_eq!(join(&hub, "r", 0, b, &sb), 1);
        assert_eq!(hub.say("r", a, "alice", "hi there").unwrap(), 1);
        assert_eq!(hub.say("r", c, "carol", "").unwrap(), 2);
        assert_eq!(sa.text(), "JOINED r 1\nMSG r 2 carol \n");
        assert_eq!(
            sb.text(),
            "JOINED r 1\nMSG r 1 alice hi there\nMSG r 2 carol \n"
        );
        let stats = hub.stats();
        assert_eq!(
            (stats.rooms, stats.messages, stats.cut_subscribers),
            (1, 2, 0)
        );
    }

    #[test]
    fn say_to_a_room_nobody_joined_creates_it() {
        let hub = temp_hub();
        assert_eq!(hub.say("quiet", 1, "anon", "x").unwrap(), 1);
        assert!(hub.data_dir().join("quiet.log").is_file());
        assert_eq!(hub.stats().rooms, 1);
        let s = Sink::default();
        assert_eq!(join(&hub, "quiet", 0, 2, &s), 2);
        assert_eq!(s.text(), "MSG quiet 1 anon x\nJOINED quiet 2\n");
    }

    #[test]
    fn join_replays_in_steps() {
        let hub = temp_hub();
        for i in 1..=5 {
            hub.say("r", 1, "anon", &format!("m{i}")).unwrap();
        }
        let sink = Sink::default();
        let mut client = Vec::new();
        let mut out = Vec::new();
        let mut since = 0;
        let mut steps = Vec::new();
        let next = loop {
            assert!(steps.len() < 10, "join does not end");
            // Record bytes: 8 + 9 + 4 + 2 = 23; two per step.
            match hub.join_step("r", since, 2, &sink, &mut out, 46).unwrap() {
                JoinStep::More { since: last } => {
                    steps.push(last);
                    client.append(&mut out);
                    since = last;
                }
                JoinStep::Joined { next } => break next,
            }
        };
        assert_eq!(steps, vec![2, 4]);
        assert_eq!(next, 6);
        assert!(out.is_empty());
        assert_eq!(
            String::from_utf8(client).unwrap(),
            "MSG r 1 anon m1\nMSG r 2 anon m2\nMSG r 3 anon m3\nMSG r 4 anon m4\n"
        );
        assert_eq!(sink.text(), "MSG r 5 anon m5\nJOINED r 6\n");
        // Asking past the end joins at once.
        let late = Sink::default();
        assert_eq!(join(&hub, "r", 99, 3, &late), 6);
        assert_eq!(late.text(), "JOINED r 6\n");
    }

    #[test]
    fn leave_stops_offers() {
        let hub = temp_hub();
        let s = Sink::default();
        join(&hub, "r", 0, 7, &s);
        assert!(hub.leave("r", 7));
        assert!(!hub.leave("r", 7));
        assert!(!hub.leave("elsewhere", 7));
        hub.say("r", 1, "anon", "x").unwrap();
        assert_eq!(s.text(), "JOINED r 1\n");
    }

    #[test]
    fn rejoining_replaces_the_subscription() {
        let hub = temp_hub();
        let (old, new) = (Sink::default(), Sink::default());
        join(&hub, "r", 0, 7, &old);
        join(&hub, "r", 0, 7, &new);
        hub.say("r", 1, "anon", "x").unwrap();
        assert_eq!(old.text(), "JOINED r 1\n");
        assert_eq!(new.text(), "JOINED r 1\nMSG r 1 anon x\n");
        assert!(hub.leave("r", 7));
        assert!(!hub.leave("r", 7));
    }

    #[test]
    fn refusing_subscriber_is_forgotten_and_counted() {
        let hub = temp_hub();
        let (slow, fine) = (Sink::default(), Sink::default());
        join(&hub, "r", 0, 1, &slow);
        join(&hub, "r", 0, 2, &fine);
        slow.refuse.store(true, Ordering::Relaxed);
        hub.say("r", 3, "anon", "a").unwrap();
        assert_eq!(hub.stats().cut_subscribers, 1);
        assert!(
            !hub.leave("r", 1),
            "a refusing subscriber must be forgotten"
        );
        slow.refuse.store(false, Ordering::Relaxed);
        hub.say("r", 3, "anon", "b").unwrap();
        assert_eq!(slow.text(), "JOINED r 1\n");
        assert_eq!(fine.text(), "JOINED r 1\nMSG r 1 anon a\nMSG r 2 anon b\n");
        assert_eq!(hub.stats().cut_subscribers, 1);
    }

    #[test]
    fn bad_arguments_are_refused_and_store_nothing() {
        let hub = temp_hub();
        let s = Sink::default();
        for room in ["", "a b", "../etc", &"r".repeat(65)] {
            assert_eq!(
                hub.say(room, 1, "anon", "x").unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
            let mut out = b"kept".to_vec();
            let err = hub.join_step(room, 0, 1, &s, &mut out, 100).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(out, b"kept");
        }
        assert_eq!(
            hub.say("r", 1, "bad nick", "x").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            hub.say("r", 1, "anon", "two\nlines").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(hub.say("r", 1, "anon", "ok").unwrap(), 1);
        assert_eq!(hub.stats().messages, 1);
        assert_eq!(s.text(), "");
    }

    #[test]
    fn open_recovers_a_data_dir_and_continues_seq() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("nested/data");
        {
            let hub: Hub<Sink> = Hub::open(Some(&dir), Fsync::Always).unwrap();
            assert_eq!(hub.data_dir(), dir);
            for i in 1..=3 {
                assert_eq!(hub.say("r", 1, "anon", "x").unwrap(), i);
            }
            hub.say("other", 1, "anon", "y").unwrap();
            hub.sync_all().unwrap();
        }
        let hub: Hub<Sink> = Hub::open(Some(&dir), Fsync::Never).unwrap();
        assert_eq!(hub.stats().rooms, 2);
        assert_eq!(hub.stats().messages, 0);
        assert_eq!(hub.say("r", 1, "anon", "z").unwrap(), 4);
        let s = Sink::default();
        assert_eq!(join(&hub, "other", 1, 2, &s), 2);
        assert_eq!(s.text(), "JOINED other 2\n");
        assert!(format!("{hub:?}").contains("rooms: 2"));
    }

    #[test]
    fn open_refuses_a_corrupt_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        {
            let hub = Hub::<Sink>::open(Some(dir.path()), Fsync::Never).unwrap();
            hub.say("r", 1, "anon", "one").unwrap();
            hub.say("r", 1, "anon", "two").unwrap();
        }
        // A flipped byte in the first record's text, with a good record after it.
        let path = dir.path().join("r.log");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let err = Hub::<Sink>::open(Some(dir.path()), Fsync::Never).unwrap_err();
        assert!(matches!(err, LogError::Corrupt { offset: 0, .. }), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }

    #[test]
    fn open_trims_a_zero_filled_log() {
        // What a file system can leave after a power loss: a length, no data.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("r.log"), [0u8; 64]).unwrap();
        let hub = Hub::<Sink>::open(Some(dir.path()), Fsync::Never).unwrap();
        assert_eq!(hub.say("r", 1, "anon", "x").unwrap(), 1);
    }

    #[test]
    fn temporary_dir_is_removed_on_drop() {
        let hub = temp_hub();
        hub.say("r", 1, "anon", "x").unwrap();
        let dir = hub.data_dir().to_owned();
        assert!(dir.join("r.log").is_file());
        drop(hub);
        assert!(!dir.exists());
    }

    /// Splits a stream into lines and returns, for each, its kind and seq.
    fn parse(stream: &str) -> Vec<(&str, u64)> {
        stream
            .lines()
            .map(|line| {
                let mut words = line.split(' ');
                let kind = words.next().unwrap();
                assert_eq!(words.next(), Some("r"), "{line}");
                (kind, words.next().unwrap().parse().unwrap())
            })
            .collect()
    }

    /// Joins room `r` one record per step, each More letting other threads in between;
    /// returns what the caller wrote to its client.
    fn join_in_steps(hub: &Hub<Sink>, me: ConnId, sink: &Sink, max_steps: u64) -> Vec<u8> {
        let (mut client, mut out, mut since) = (Vec::new(), Vec::new(), 0);
        for _ in 0..max_steps {
            match hub.join_step("r", since, me, sink, &mut out, 40).unwrap() {
                JoinStep::More { since: last } => {
                    assert!(last > since);
                    client.append(&mut out);
                    since = last;
                }
                JoinStep::Joined { .. } => return client,
            }
        }
        panic!("join did not finish in {max_steps} steps");
    }

    #[test]
    fn joining_mid_stream_sees_every_seq_once_in_order() {
        const SAYERS: u64 = 3;
        const EACH: u64 = 300;
        const BEFORE: u64 = 50;
        const MAX_JOINS: usize = 64;
        let hub = temp_hub();
        for _ in 0..BEFORE {
            hub.say("r", 0, "early", "x").unwrap();
        }
        let start = std::sync::Barrier::new(SAYERS as usize + 1);
        let saying = AtomicU64::new(SAYERS);
        let joined = AtomicU64::new(0);
        // Each join: what the caller wrote to its client, and its subscriber.
        let joins: Vec<(Vec<u8>, Sink)> = std::thread::scope(|s| {
            for t in 0..SAYERS {
                let (hub, start, saying, joined) = (&hub, &start, &saying, &joined);
                s.spawn(move || {
                    let me = hub.new_conn_id();
                    start.wait();
                    // Go on until a few joins have overlapped the sayers, within a bound.
                    for i in 0..10 * EACH {
                        if i >= EACH && joined.load(Ordering::Relaxed) >= 4 {
                            break;
                        }
                        hub.say("r", me, &format!("t{t}"), &format!("{i}")).unwrap();
                    }
                    saying.fetch_sub(1, Ordering::Relaxed);
                });
            }
            let joiner = s.spawn(|| {
                start.wait();
                // Join again and again while the sayers run, so that seams land mid-stream.
                let mut joins = Vec::new();
                while joins.len() < MAX_JOINS
                    && (joins.len() < 2 || saying.load(Ordering::Relaxed) > 0)
                {
                    let (me, sink) = (hub.new_conn_id(), Sink::default());
                    let client = join_in_steps(&hub, me, &sink, BEFORE + SAYERS * EACH * 10 + 1);
                    joins.push((client, sink));
                    joined.fetch_add(1, Ordering::Relaxed);
                }
                joins
            });
            joiner.join().unwrap()
        });
        let total = hub.stats().messages;
        assert!(total >= BEFORE + SAYERS * EACH);
        for (client, sink) in joins {
            let mut stream = String::from_utf8(client).unwrap();
            stream.push_str(&sink.text());
            let lines = parse(&stream);
            let seam = lines.iter().position(|l| l.0 == "JOINED").unwrap();
            let next = lines[seam].1;
            assert!((1..=total + 1).contains(&next));
            let mut expected: Vec<(&str, u64)> = (1..next).map(|s| ("MSG", s)).collect();
            expected.push(("JOINED", next));
            expected.extend((next..=total).map(|s| ("MSG", s)));
            assert_eq!(lines, expected);
        }
    }
}
