//! SEND, the writing half of a chat connection's process pair and the only
//! writer to its socket: replies RECV passes on, `JOIN` replays, and the new
//! records of every room the connection follows, which it notices with inotify
//! and reads under a shared lock.
//!
//! A client that does not read blocks SEND's writes. Every write therefore
//! carries a timeout; when it expires, SEND measures how far behind the client
//! is (the bytes of the followed rooms it has not sent yet) and cuts the
//! connection off once that passes --max-pending. The backlog stays in the room
//! files, so a slow client never makes any process's memory grow.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::time::Duration;

use anyhow::Context;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use proto::chat::{ChatError, Reply};
use service::file_session::reply_to_append;
use service::log::RoomLog;

use super::ChildConfig;
use super::frames::{Frame, FrameReader};
use launch::{Count, Tally};

/// How long a write may block before SEND checks whether the client is too far
/// behind.
const WRITE_PATIENCE: Duration = Duration::from_millis(100);

/// Records are read and sent in batches of about this many bytes.
const BATCH: usize = 64 * 1024;

/// Never returns: SEND ends its process.
pub(super) fn serve(stream: &TcpStream, pipe: File, config: &ChildConfig, tally: Tally) -> ! {
    let mut send = Send {
        tally,
        stream,
        config,
        follows: HashMap::new(),
        rooms_by_watch: HashMap::new(),
        appending: HashMap::new(),
        out: Vec::with_capacity(BATCH),
    };
    match send.run(pipe) {
        Ok(()) => {}
        Err(Stop::Cut) => {
            send.tally.add(Count::Cut, 1);
            let _ = stream.shutdown(Shutdown::Both);
        }
        Err(Stop::Failed(e)) => {
            let gone = e.downcast_ref::<std::io::Error>().is_some_and(|e| {
                matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset)
            });
            if !gone {
                eprintln!("srv-threads: connection sender: {e:#}");
            }
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
    std::process::exit(0)
}

enum Stop {
    /// The client fell too far behind and was disconnected.
    Cut,
    Failed(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Stop {
    fn from(e: E) -> Self {
        Stop::Failed(e.into())
    }
}

/// A room this connection follows.
struct Follow {
    log: RoomLog,
    /// The last seq sent to the client.
    cursor: u64,
    watch: WatchDescriptor,
    /// Seqs this connection appended, not yet passed by `cursor`: skipped.
    own: VecDeque<u64>,
    /// inotify saw a change not yet sent.
    dirty: bool,
    /// The room's last seq when it was last snapshotted: records up to here
    /// are safe to send (see `run`).
    upto: u64,
}

struct Send<'a> {
    stream: &'a TcpStream,
    config: &'a ChildConfig,
    /// Where this process counts.
    tally: Tally,
    follows: HashMap<String, Follow>,
    rooms_by_watch: HashMap<WatchDescriptor, String>,
    /// Appends RECV announced and has not reported yet, per room.
    appending: HashMap<String, u32>,
    out: Vec<u8>,
}

impl Send<'_> {
    fn run(&mut self, mut pipe: File) -> Result<(), Stop> {
        let flags = OFlag::from_bits_truncate(fcntl(&pipe, FcntlArg::F_GETFL)?);
        fcntl(&pipe, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        self.stream.set_write_timeout(Some(WRITE_PATIENCE))?;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .context("creating an inotify instance")?;
        let mut frames = FrameReader::default();
        loop {
            // 1. Which followed rooms changed.
            match inotify.read_events() {
                Ok(events) => {
                    for ev in events {
                        if let Some(room) = self.rooms_by_watch.get(&ev.wd)
                            && let Some(f) = self.follows.get_mut(room)
                        {
                            f.dirty = true;
                        }
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => {}
                Err(e) => return Err(Stop::Failed(e.into())),
            }
            // 2. Snapshot those rooms BEFORE reading the pipe: RECV announces an
            // append before it makes it, so the announcement of every record in
            // the snapshot is in the pipe by now, and step 3 reads it.
            for f in self.follows.values_mut().filter(|f| f.dirty) {
                f.upto = f.log.refresh_locked()? - 1;
            }
            // 3. The pipe: replies, JOIN/LEAVE, announcements and own seqs.
            let open = frames.fill(&mut pipe)?;
            while let Some(frame) = frames.next_frame()? {
                self.apply(frame, &inotify)?;
            }
            if !open {
                return Ok(());
            }
            // 4. Send what the snapshots hold, skipping our own records.
            self.deliver_dirty()?;
            let mut fds = [
                PollFd::new(pipe.as_fd(), PollFlags::POLLIN),
                PollFd::new(inotify.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(Stop::Failed(e.into())),
            }
        }
    }

    fn apply(&mut self, frame: Frame<'_>, inotify: &Inotify) -> Result<(), Stop> {
        match frame {
            Frame::Write(bytes) => self.write(bytes, false),
            Frame::Appending { room } => {
                *self.appending.entry(room.to_owned()).or_default() += 1;
                Ok(())
            }
            Frame::Appended { room, seq } => {
                if let Some(n) = self.appending.get_mut(room) {
                    *n = n.saturating_sub(1);
                }
                // RECV reports a failed append as seq 0 (seqs start at 1).
                let appended = (seq != 0).then_some(seq);
                if let Some(seq) = appended
                    && let Some(f) = self.follows.get_mut(room)
                    && seq > f.cursor
                {
                    f.own.push_back(seq);
                }
                self.out.clear();
                reply_to_append(room, appended).encode(&mut self.out);
                self.write_out(false)
            }
            Frame::Join { room, since, upto } => self.join(room, since, upto, inotify),
            Frame::Leave { room } => {
                if let Some(f) = self.follows.remove(room) {
                    self.rooms_by_watch.remove(&f.watch);
                    let _ = inotify.rm_watch(f.watch);
                }
                self.out.clear();
                Reply::Left { room }.encode(&mut self.out);
                self.write_out(false)
            }
        }
    }

    /// Replays `since..=upto`, sends `JOINED upto+1`, and follows the room from
    /// there: records after `upto` are live (and this connection's own are
    /// skipped, since their announcements come after the JOIN in the pipe).
    fn join(&mut self, room: &str, since: u64, upto: u64, inotify: &Inotify) -> Result<(), Stop> {
        let c = self.config;
        let mut log = match RoomLog::open_locked(&c.data, room, c.fsync) {
            Ok(log) => log,
            Err(e) => {
                eprintln!("srv-threads: room {room}: storage failure: {e}");
                self.out.clear();
                Reply::err(ChatError::StorageFailure).encode(&mut self.out);
                return self.write_out(false);
            }
        };
        // Watch before replaying, so no append falls between the two.
        let watch = inotify
            .add_watch(log.path(), AddWatchFlags::IN_MODIFY)
            .context("watching a room file")?;
        log.refresh_locked()?;
        let mut cursor = since;
        while cursor < upto {
            self.out.clear();
            let out = &mut self.out;
            let last = log.read_since(cursor, BATCH, |r| {
                if r.seq <= upto {
                    Reply::Msg {
                        room,
                        seq: r.seq,
                        name: r.name,
                        text: r.text,
                    }
                    .encode(out)
                }
            })?;
            if last == cursor {
                break;
            }
            cursor = last;
            self.write_out(false)?;
        }
        let next = upto + 1;
        self.out.clear();
        Reply::Joined { room, next }.encode(&mut self.out);
        self.write_out(false)?;
        self.rooms_by_watch.insert(watch, room.to_owned());
        self.follows.insert(
            room.to_owned(),
            Follow {
                log,
                cursor: upto,
                watch,
                own: VecDeque::new(),
                dirty: true,
                upto,
            },
        );
        Ok(())
    }

    /// Sends the records of every changed room up to its snapshot, for rooms
    /// with no append announced and not yet reported.
    fn deliver_dirty(&mut self) -> Result<(), Stop> {
        let rooms: Vec<String> = self
            .follows
            .iter()
            .filter(|(room, f)| f.dirty && self.appending.get(*room).copied().unwrap_or(0) == 0)
            .map(|(room, _)| room.clone())
            .collect();
        for room in rooms {
            while let Some(f) = self.follows.get_mut(&room) {
                if f.cursor >= f.upto {
                    f.dirty = false;
                    break;
                }
                // `backlog` may index newer records while a write blocks; only
                // the snapshot is known to be announced, so stop at `upto`.
                let upto = f.upto;
                self.out.clear();
                let (out, own) = (&mut self.out, &mut f.own);
                let last = f.log.read_since(f.cursor, BATCH, |r| {
                    if r.seq > upto {
                        return;
                    }
                    while own.front().is_some_and(|&s| s < r.seq) {
                        own.pop_front();
                    }
                    if own.front() == Some(&r.seq) {
                        own.pop_front();
                    } else {
                        Reply::Msg {
                            room: &room,
                            seq: r.seq,
                            name: r.name,
                            text: r.text,
                        }
                        .encode(out);
                    }
                })?;
                f.cursor = last.min(upto);
                self.write_out(true)?;
            }
        }
        Ok(())
    }

    fn write_out(&mut self, live: bool) -> Result<(), Stop> {
        let out = std::mem::take(&mut self.out);
        let result = self.write(&out, live);
        self.out = out;
        result
    }

    /// Writes all of `bytes`, checking how far behind the client is whenever a
    /// write has blocked for WRITE_PATIENCE.
    fn write(&mut self, mut bytes: &[u8], live: bool) -> Result<(), Stop> {
        while !bytes.is_empty() {
            match (&*self.stream).write(bytes) {
                Ok(n) => {
                    self.tally.add(Count::BytesOut, n as u64);
                    bytes = &bytes[n..];
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    let unsent = if live { bytes.len() } else { 0 };
                    if self.backlog()? + unsent > self.config.max_pending {
                        return Err(Stop::Cut);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Bytes of records in followed rooms that the client has not been sent.
    fn backlog(&mut self) -> Result<usize, Stop> {
        let mut total = 0u64;
        for f in self.follows.values_mut() {
            f.log.refresh_locked()?;
            total += f.log.bytes_after(f.cursor);
        }
        Ok(usize::try_from(total).unwrap_or(usize::MAX))
    }
}
