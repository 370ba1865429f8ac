//! One worker thread: its share of the connections, one `mio::Poll` over them, its own
//! histograms and counters.
//!
//! The loop is built to cost the client as little as possible per message, since on a small
//! machine the client's CPU is the benchmark's ceiling:
//!
//! - one `epoll_wait` per wakeup, then every ready connection is served: its replies read,
//!   checked and recorded, and the next messages written, all the messages one connection may
//!   send in one `write`;
//! - a read that returns less than the buffer ends the reading of that connection (see
//!   [`Worker::read`]), so a reply costs one `read`, not a second one that says `EAGAIN`;
//! - buffers are the worker's and reused: nothing is allocated per message;
//! - the open-loop schedule is one cursor per worker (see `schedule`), paced as `pacing`
//!   says: a worker with a CPU of its own spins (polls with a zero timeout, checking the
//!   schedule between events), one that shares its CPU sleeps on an absolute `timerfd` to
//!   shortly before the due time, since `epoll_wait` alone only sleeps in whole milliseconds;
//! - a message's send lag is taken at its write, and one held back by `--depth` (its
//!   connection had no room) is charged only the lag of its release;
//! - histograms are made before the window: the interval histograms come from a pool, so
//!   nothing is allocated or cloned on the hot path.
//!
//! With `--requests-per-conn R` a connection that has carried R requests and had every reply
//! is closed by the client, and a fresh one opened in its place ([`Worker::recycle`]); the
//! messages that fall due meanwhile wait for it as they wait for `--depth` room (the
//! server's delay, not the client's: their lag is taken at their release). `--idle-conns`
//! are opened beside the active ones and held, silent, to the end ([`IdleConn`]).
//!
//! Everything a server does wrong is a [`Fault`] counted against the connection, which is then
//! closed; the loop ends on time whatever the server does.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use proto::chat::{Command, LineBuffer, MAX_SERVER_LINE, Reply};

use crate::chat::{self, Member};
use crate::config::{ChatProfile, Config, Workload};
use crate::dist::Sizes;
use crate::echo::Expect;
use crate::error::{Error, Fault, FaultCounts};
use crate::hist::new_histogram;
use crate::http::{self, HttpPath};
use crate::kv;
use crate::pacing::{self, Busy, Held, Pacing, Wait};
use crate::schedule::{Clock, Cursor, Schedule};
use crate::selfcheck::Gaps;
use crate::sys;

/// Reads go into a buffer this large; a read that fills it is followed by another.
const RX_BUF: usize = 64 * 1024;
/// An open-loop message released this long after it was due missed its send time through
/// the client's fault: the worker was busy or not scheduled (the timerfd itself wakes it
/// within tens of microseconds); `sends_late` counts them.
pub(crate) const LATE_NS: u64 = 1_000_000;
/// The token of the worker's timer; connections use their index.
const TIMER: Token = Token(usize::MAX);

/// What every worker shares, fixed before the first connection is made.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) cfg: Config,
    pub(crate) addr: SocketAddr,
    /// The open-loop schedule; `None` in the closed loop.
    pub(crate) schedule: Option<Schedule>,
    /// Start of the measured window, nanoseconds after the epoch.
    pub(crate) warm_ns: u64,
    /// End of the measured window (duration runs).
    pub(crate) end_ns: Option<u64>,
    /// Measured messages per connection (request-count runs).
    pub(crate) requests: Option<u64>,
    /// Measured replies so far, per worker, for the progress line.
    pub(crate) progress: Vec<ProgressSlot>,
    /// The rooms of the room profile.
    pub(crate) rooms: Option<Rooms>,
}

/// What the workers of a room-profile run share to tell when every room has gone quiet.
///
/// A member can only know it has received everything once every sender of its room, in
/// whatever thread, has stopped and had its last `ACK`: then the room's last seq is known,
/// and the member waits (within the grace period) until it has seen everything up to it.
#[derive(Debug)]
pub(crate) struct Rooms {
    /// Members per room; connection `c` is in room `c / size`.
    pub(crate) size: usize,
    /// Per room, one more than the highest seq any sender got acknowledged (0: none).
    pub(crate) last: Vec<AtomicU64>,
    /// Workers whose senders have all stopped and been acknowledged.
    pub(crate) drained: AtomicUsize,
}

impl Rooms {
    fn last(&self, room: usize) -> Option<u64> {
        self.last[room].load(Ordering::Acquire).checked_sub(1)
    }
}

/// A counter on a cache line of its own, so that workers storing to theirs do not slow each
/// other down.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct ProgressSlot(pub(crate) AtomicU64);

/// The main thread's word to a connected worker.
#[derive(Debug)]
pub(crate) enum Control {
    /// Go; the run's clock starts at this instant.
    Start(Instant),
    /// Give up: the run cannot go on.
    Abort,
}

/// A worker's word to the main thread.
#[derive(Debug)]
pub(crate) enum Up {
    /// The worker finished connecting.
    Connected(Result<Connected, Error>),
    /// The worker finished its run.
    Done(usize, Box<Result<Report, Error>>),
}

/// How connecting went for one worker.
#[derive(Debug)]
pub(crate) struct Connected {
    pub(crate) ok: usize,
    /// Idle connections that came up.
    pub(crate) idle_ok: usize,
    pub(crate) faults: FaultCounts,
    pub(crate) first_error: Option<io::Error>,
    /// Why the first chat handshake that failed did, if one did.
    pub(crate) handshake_error: Option<String>,
}

/// What a worker measured.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) latency: Histogram<u64>,
    pub(crate) service: Histogram<u64>,
    pub(crate) delivery: Option<Histogram<u64>>,
    /// Kv: the latency of GETs and of SETs apart, `[get, set]`.
    pub(crate) ops: Option<[Histogram<u64>; 2]>,
    pub(crate) intervals: Vec<Histogram<u64>>,
    pub(crate) faults: FaultCounts,
    /// Measured `MSG` deliveries (room profile).
    pub(crate) deliveries: u64,
    /// Measured replies.
    pub(crate) measured: u64,
    /// Every reply, warmup included.
    pub(crate) replies: u64,
    /// Every message sent, warmup included.
    pub(crate) sent: u64,
    pub(crate) bytes_written: u64,
    pub(crate) bytes_read: u64,
    /// CPU time of this thread over its measured window.
    pub(crate) cpu_ns: u64,
    /// Wall time of this thread's measured window.
    pub(crate) wall_ns: u64,
    /// When the last measured reply arrived, nanoseconds after the epoch.
    pub(crate) last_reply_ns: u64,
    /// Open loop: how long after its due time each measured message was released, and how
    /// many of them more than [`LATE_NS`].
    pub(crate) send_lag: Histogram<u64>,
    pub(crate) released_late: u64,
    /// Open loop: measured messages held back because their connection had `depth` in
    /// flight.
    pub(crate) held: u64,
    /// Open loop: the intended and achieved gaps of the measured sends.
    pub(crate) gaps: Gaps,
    /// The time this worker spent working over its window, and its hiccups.
    pub(crate) work_ns: u64,
    pub(crate) hiccups: pacing::Hiccups,
    /// Connections opened, the first ones and those that replaced a closed one.
    pub(crate) opened: u64,
    /// Idle connections still open at the end, handed to the main thread, which closes
    /// them once every worker is done: they are held through every worker's window.
    pub(crate) idle: Vec<TcpStream>,
}

/// One in-flight message.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    /// When it was due (open loop) or sent (closed loop); the payload carries it.
    pub(crate) due_ns: u64,
    /// When it was written.
    pub(crate) sent_ns: u64,
    /// Whether its latency counts.
    pub(crate) measured: bool,
}

/// The messages of a connection that await their replies, oldest first; replies come back in
/// the order the messages went out.
#[derive(Debug)]
pub(crate) struct Flight {
    /// A ring of `depth` slots; message `n` lives in `slots[n % depth]`.
    slots: Box<[Slot]>,
    /// Messages sent.
    pub(crate) sent: u64,
    /// Replies received.
    pub(crate) answered: u64,
}

impl Flight {
    fn new(depth: usize) -> Flight {
        Flight {
            slots: vec![Slot::default(); depth].into_boxed_slice(),
            sent: 0,
            answered: 0,
        }
    }

    pub(crate) fn owed(&self) -> u64 {
        self.sent - self.answered
    }

    fn room(&self) -> u64 {
        self.slots.len() as u64 - self.owed()
    }

    fn push(&mut self, slot: Slot) {
        debug_assert!(self.room() > 0);
        let i = (self.sent % self.slots.len() as u64) as usize;
        self.slots[i] = slot;
        self.sent += 1;
    }

    /// The oldest message still owed a reply.
    pub(crate) fn oldest(&self) -> Option<Slot> {
        (self.owed() > 0).then(|| self.slots[(self.answered % self.slots.len() as u64) as usize])
    }

    /// Marks the oldest message answered and returns it.
    pub(crate) fn pop(&mut self) -> Option<Slot> {
        let slot = self.oldest()?;
        self.answered += 1;
        Some(slot)
    }
}

/// Where replies are recorded.
#[derive(Debug)]
pub(crate) struct Recorder {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    /// The histogram of the current interval, when interval histograms are kept.
    interval: Option<Histogram<u64>>,
    intervals: Vec<Histogram<u64>>,
    /// Empty histograms made before the run, taken as each interval starts.
    spare: Vec<Histogram<u64>>,
    /// Deliveries to room members, from the stamp in the text.
    delivery: Option<Histogram<u64>>,
    /// Kv: GETs' latency and SETs', `[get, set]`.
    ops: Option<[Histogram<u64>; 2]>,
    deliveries: u64,
    /// The measured window, nanoseconds after the epoch: deliveries stamped inside count.
    warm_ns: u64,
    end_ns: Option<u64>,
    /// Arrival time of the bytes being processed.
    pub(crate) now: u64,
    measured: u64,
    replies: u64,
    last_reply_ns: u64,
}

impl Recorder {
    fn new(plan: &Plan) -> Recorder {
        Recorder {
            latency: new_histogram(),
            service: new_histogram(),
            interval: plan.cfg.interval.is_some().then(new_histogram),
            intervals: Vec::with_capacity(intervals_expected(plan)),
            spare: (0..intervals_expected(plan))
                .map(|_| new_histogram())
                .collect(),
            delivery: plan.rooms.is_some().then(new_histogram),
            ops: matches!(plan.cfg.workload, crate::config::Workload::Kv(_))
                .then(|| [new_histogram(), new_histogram()]),
            deliveries: 0,
            warm_ns: plan.warm_ns,
            end_ns: plan.end_ns,
            now: 0,
            measured: 0,
            replies: 0,
            last_reply_ns: 0,
        }
    }

    /// Records the arrival at `self.now` of another member's message stamped `stamp`.
    fn deliver(&mut self, stamp: u64) {
        if stamp < self.warm_ns || self.end_ns.is_some_and(|end| stamp >= end) {
            return;
        }
        if let Some(h) = &mut self.delivery {
            h.saturating_record(self.now.saturating_sub(stamp));
            self.deliveries += 1;
        }
    }

    /// Records the reply to `slot`, arrived at `self.now`.
    pub(crate) fn reply(&mut self, slot: Slot) {
        self.replies += 1;
        if !slot.measured {
            return;
        }
        let latency = self.now.saturating_sub(slot.due_ns);
        self.latency.saturating_record(latency);
        self.service
            .saturating_record(self.now.saturating_sub(slot.sent_ns));
        if let Some(h) = &mut self.interval {
            h.saturating_record(latency);
        }
        self.measured += 1;
        self.last_reply_ns = self.now;
    }

    /// Records the reply to the kv request in `slot`, a GET where `get`: its latency counts
    /// in all and among its operation's.
    pub(crate) fn reply_op(&mut self, slot: Slot, get: bool) {
        if slot.measured
            && let Some(ops) = &mut self.ops
        {
            ops[usize::from(!get)].saturating_record(self.now.saturating_sub(slot.due_ns));
        }
        self.reply(slot);
    }

    /// Closes the current interval and starts the next in a spare histogram (a new one only
    /// when a run outlasts the spares it was given, a request-count run).
    fn roll_interval(&mut self) {
        let Some(cur) = &mut self.interval else {
            return;
        };
        let next = self.spare.pop().unwrap_or_else(new_histogram);
        self.intervals.push(std::mem::replace(cur, next));
    }
}

/// The interval histograms a run will fill: its warmup and window over `--interval`, and two
/// for the edges; a request-count run, whose length is not known, a few.
fn intervals_expected(plan: &Plan) -> usize {
    let Some(len) = plan.cfg.interval else {
        return 0;
    };
    let secs = match plan.end_ns {
        Some(end) => end as f64 / 1e9,
        None => 8.0 * len.as_secs_f64(),
    };
    (secs / len.as_secs_f64().max(1e-3)).ceil() as usize + 2
}

/// The state of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Connecting,
    /// Chat room profile: waiting for `OK` and `JOINED`.
    Handshake,
    /// Sending and receiving.
    Active,
    /// Sent all its measured messages and got every reply (request-count runs); a room
    /// member stays open to receive the others' messages.
    Done,
    /// Given up after a fault, or never connected.
    Dead,
}

/// The protocol side of a connection: how messages are written and replies checked.
#[derive(Debug)]
enum Codec {
    /// `rx_off`: how far into the oldest owed message the replies have got.
    Echo {
        rx_off: usize,
    },
    Chat(Box<ChatConn>),
    Kv(Box<KvConn>),
    Http(Box<HttpConn>),
}

/// The http side of a connection.
#[derive(Debug)]
struct HttpConn {
    /// Responses that arrived in part.
    partial: http::Partial,
    /// What every request asks for.
    path: HttpPath,
}

/// The kv side of a connection.
#[derive(Debug)]
struct KvConn {
    /// Replies that arrived in part.
    partial: kv::Partial,
    /// Which request each message is.
    mix: kv::Mix,
}

/// The chat side of a connection.
#[derive(Debug)]
struct ChatConn {
    lines: LineBuffer,
    /// Index of the room (0 for the ingest room).
    room: usize,
    room_name: String,
    /// Bytes of the text of every `SAY` to this room.
    text_len: usize,
    /// Room profile: the order check, from `JOINED` on.
    member: Option<Member>,
    /// Room profile: the `OK` to `NICK` is still to come.
    awaiting_ok: bool,
    /// Highest seq acknowledged to this connection.
    last_ack: Option<u64>,
}

#[derive(Debug)]
struct Conn {
    /// Global connection number, carried in the payload.
    id: u32,
    stream: Option<TcpStream>,
    state: State,
    flight: Flight,
    codec: Codec,
    /// Open loop: the due times of the messages this connection sends, in order (the cursor
    /// walks a twin of it to release them).
    clock: Option<Clock>,
    /// Open loop: messages the schedule has released to this connection.
    released: u64,
    /// Open loop: released messages that are measured.
    released_measured: u64,
    /// Open loop: whether the schedule has nothing more for this connection.
    released_all: bool,
    /// Open loop: released messages not yet written because the connection had `depth` in
    /// flight; their lag was taken at their release.
    held: Held,
    /// Measured messages sent (request-count runs stop at the count).
    measured_sent: u64,
    /// Bytes a short write left behind; written when the socket is writable again.
    pending: Vec<u8>,
    /// Whether the current socket is connected (false while a replacement connects).
    up: bool,
    /// Messages written on the current socket (`--requests-per-conn`).
    on_socket: u64,
    /// Since when the connection has owed replies without receiving a byte.
    idle_since: u64,
    /// Whether the current idle spell has been counted as a stall.
    stalled: bool,
}

/// An idle connection: connected before the clock starts, silent, and held until the end; a
/// byte from the server, or its close, is a fault.
#[derive(Debug)]
struct IdleConn {
    stream: Option<TcpStream>,
    up: bool,
}

impl Conn {
    /// Connection `id`, not yet connected.
    fn new(plan: &Plan, id: usize) -> Conn {
        Conn {
            id: id as u32,
            stream: None,
            state: State::Dead,
            flight: Flight::new(plan.cfg.depth),
            codec: codec(plan, id),
            clock: plan.schedule.map(|s| s.clock(id)),
            released: 0,
            released_measured: 0,
            released_all: false,
            held: Held::default(),
            measured_sent: 0,
            pending: Vec::new(),
            up: false,
            on_socket: 0,
            idle_since: 0,
            stalled: false,
        }
    }

    /// How many more messages may be written now: up to `depth` in flight, and no more on
    /// this socket than `per_socket` (`--requests-per-conn`); none while it connects.
    fn room(&self, per_socket: Option<u64>) -> u64 {
        if !self.up {
            return 0;
        }
        let room = self.flight.room();
        per_socket.map_or(room, |r| room.min(r.saturating_sub(self.on_socket)))
    }
}

/// The worker's thread: its connections, its buffers, its measurements.
struct Worker<'p> {
    plan: &'p Plan,
    index: usize,
    poll: Poll,
    events: Events,
    conns: Vec<Conn>,
    /// Idle connections, tokens from `conns.len()` on.
    idle: Vec<IdleConn>,
    /// Connections opened so far.
    opened: u64,
    epoch: Instant,
    rx: Vec<u8>,
    tx: Vec<u8>,
    expect: Expect,
    /// Chat texts being written or checked.
    scratch: Vec<u8>,
    rec: Recorder,
    faults: FaultCounts,
    bytes_read: u64,
    bytes_written: u64,
    /// Writes (or queued writes) made: a turn that moved it did work.
    writes: u64,
    /// Connections that are `Active`.
    active: usize,
    /// Replies owed over all active connections.
    owed: u64,
    /// Whether the window has begun, and when (thread CPU, wall).
    window: Option<(u64, u64)>,
    /// No more messages are sent.
    stopped: bool,
    cursor: Option<Cursor>,
    /// Open-loop connections still being released messages (request-count runs).
    releasing: usize,
    /// Open loop: how long after its due time each measured message was released (the
    /// worker was busy or not scheduled: the client, not the server, held it back), and how
    /// many of them more than [`LATE_NS`].
    send_lag: Histogram<u64>,
    released_late: u64,
    held_measured: u64,
    /// Open loop: the gaps of the measured sends, for the self-check.
    gaps: Gaps,
    pacing: Pacing,
    busy: Busy,
    timer: Option<TimerFd>,
    timer_armed: Option<u64>,
    /// `CLOCK_MONOTONIC` at the run's epoch, in nanoseconds: the timer is armed in absolute
    /// time.
    mono_epoch_ns: u64,
    next_tick: u64,
    tick: u64,
    /// When waiting for the last replies (and deliveries) ends, once sending is over.
    drain_deadline: Option<u64>,
    /// Room profile: whether this worker has published its rooms' last seqs.
    published: bool,
}

/// Runs one worker: connects its connections, reports, waits for the start, runs, reports.
pub(crate) fn run(
    plan: Arc<Plan>,
    index: usize,
    cpu: Option<usize>,
    conn_ids: Vec<usize>,
    up: Sender<Up>,
    control: Receiver<Control>,
) {
    let mut worker = match Worker::new(&plan, index, cpu, &conn_ids) {
        Ok(w) => w,
        Err(e) => {
            // The main thread learns of the failure here; if it is gone there is no one to tell.
            let _ = up.send(Up::Connected(Err(e)));
            return;
        }
    };
    let connected = worker.connect_all();
    if up.send(Up::Connected(Ok(connected))).is_err() {
        return;
    }
    let epoch = match control.recv() {
        Ok(Control::Start(epoch)) => epoch,
        Ok(Control::Abort) | Err(_) => return,
    };
    let report = worker.measure(epoch);
    let _ = up.send(Up::Done(index, Box::new(report)));
}

impl<'p> Worker<'p> {
    fn new(
        plan: &'p Plan,
        index: usize,
        cpu: Option<usize>,
        conn_ids: &[usize],
    ) -> Result<Worker<'p>, Error> {
        if let Some(cpu) = cpu {
            sys::pin(&[cpu]).map_err(|e| {
                Error::Config(format!("cannot pin a worker to CPU {cpu} (--cpus): {e}"))
            })?;
        }
        let cfg = &plan.cfg;
        sys::exact_timers().map_err(|e| Error::io("setting the timer slack", e))?;
        let poll = Poll::new().map_err(|e| Error::io("creating an epoll instance", e))?;
        let timer = match plan.schedule {
            Some(_) => {
                let timer = TimerFd::new(
                    ClockId::CLOCK_MONOTONIC,
                    TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
                )
                .map_err(|e| Error::io("creating a timerfd", e))?;
                poll.registry()
                    .register(
                        &mut SourceFd(&timer.as_fd().as_raw_fd()),
                        TIMER,
                        Interest::READABLE,
                    )
                    .map_err(|e| Error::io("registering the timerfd", e))?;
                Some(timer)
            }
            None => None,
        };
        let conns = conn_ids.iter().map(|&id| Conn::new(plan, id)).collect();
        // The idle connections are dealt round robin, as the active ones are.
        let idle_share =
            cfg.idle_conns / cfg.threads + usize::from(index < cfg.idle_conns % cfg.threads);
        let idle = (0..idle_share)
            .map(|_| IdleConn {
                stream: None,
                up: false,
            })
            .collect();
        let cursor = plan
            .schedule
            .map(|schedule| Cursor::new(schedule, conn_ids));
        // Check for stalls often enough to see one soon after it passes the threshold, but not
        // so often that walking the connections costs anything.
        let tick = (cfg.stall.as_nanos() as u64 / 4).clamp(1_000_000, 50_000_000);
        Ok(Worker {
            plan,
            index,
            poll,
            events: Events::with_capacity(1024),
            conns,
            idle,
            opened: 0,
            epoch: Instant::now(),
            rx: vec![0; RX_BUF],
            tx: Vec::with_capacity(RX_BUF),
            expect: Expect::new(cfg.msg_size.max()),
            scratch: Vec::new(),
            rec: Recorder::new(plan),
            faults: [0; Fault::COUNT],
            bytes_read: 0,
            bytes_written: 0,
            writes: 0,
            active: 0,
            owed: 0,
            window: None,
            stopped: false,
            cursor,
            releasing: 0,
            send_lag: new_histogram(),
            released_late: 0,
            held_measured: 0,
            gaps: Gaps::new(),
            pacing: cfg
                .pacing
                .unwrap_or(Pacing::default_for(cfg.threads, &cfg.cpus)),
            busy: Busy::default(),
            timer,
            timer_armed: None,
            mono_epoch_ns: 0,
            next_tick: 0,
            tick,
            drain_deadline: None,
            published: false,
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Opens every connection and waits until each is up (and, in the room profile, has
    /// joined its room), refused or out of time.
    fn connect_all(&mut self) -> Connected {
        let deadline = Instant::now() + self.plan.cfg.connect_timeout;
        let mut first_error = None;
        let mut waiting = self.open_all(&mut first_error);
        // Bounded by the deadline: every pass either waits on it or settles a connection.
        while waiting > 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if let Err(e) = self.poll.poll(&mut self.events, Some(deadline - now)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                first_error.get_or_insert(e);
                break;
            }
            // As in `measure`: the events move out so that serving them may borrow the worker.
            let events = std::mem::replace(&mut self.events, Events::with_capacity(0));
            for ev in events.iter() {
                if self.settle(ev.token().0, &mut first_error) {
                    waiting -= 1;
                }
            }
            self.events = events;
        }
        let handshake_error = self.give_up_on_the_rest(&mut first_error);
        Connected {
            ok: self.active,
            idle_ok: self.idle.iter().filter(|c| c.up).count(),
            faults: self.faults,
            first_error,
            handshake_error,
        }
    }

    /// Starts connecting every connection, each registered with the poll; the number now
    /// connecting. A refusal at once counts as its fault.
    fn open_all(&mut self, first_error: &mut Option<io::Error>) -> usize {
        let mut waiting = 0usize;
        for (i, conn) in self.conns.iter_mut().enumerate() {
            let opened = connect(&self.poll, self.plan.addr, i);
            match opened {
                Ok(s) => {
                    conn.stream = Some(s);
                    conn.state = State::Connecting;
                    waiting += 1;
                }
                Err(e) => {
                    self.faults[Fault::of_connect_error(&e).index()] += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
        let base = self.conns.len();
        for (j, idle) in self.idle.iter_mut().enumerate() {
            // Writable tells the connect's end (once: the poll is edge-triggered); then a
            // byte or a close from the server is all there is to see.
            let opened = connect(&self.poll, self.plan.addr, base + j);
            match opened {
                Ok(s) => {
                    idle.stream = Some(s);
                    waiting += 1;
                }
                Err(e) => {
                    self.faults[Fault::of_connect_error(&e).index()] += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
        self.opened += waiting as u64;
        waiting
    }

    /// Moves connection `i` on after an event: connected (then active, or on to the chat
    /// handshake), joined, or dead. Whether it is settled (active or dead).
    fn settle(&mut self, i: usize, first_error: &mut Option<io::Error>) -> bool {
        if let Some(j) = i.checked_sub(self.conns.len()) {
            return self.settle_idle(j, first_error);
        }
        let Some(conn) = self.conns.get_mut(i) else {
            return false;
        };
        match conn.state {
            State::Connecting => {
                let Some(stream) = &mut conn.stream else {
                    return false;
                };
                let failed = match connect_outcome(stream) {
                    None => return false,
                    Some(Ok(())) => match start(stream, &conn.codec, conn.id) {
                        Ok(true) => {
                            conn.state = State::Handshake;
                            return false;
                        }
                        Ok(false) => {
                            conn.state = State::Active;
                            conn.up = true;
                            self.active += 1;
                            return true;
                        }
                        Err(e) => (Fault::ConnectFailed, e),
                    },
                    Some(Err(e)) => (Fault::of_connect_error(&e), e),
                };
                self.faults[failed.0.index()] += 1;
                first_error.get_or_insert(failed.1);
                conn.state = State::Dead;
                conn.stream = None;
                true
            }
            State::Handshake => {
                self.read(i);
                let conn = &mut self.conns[i];
                let joined = match &conn.codec {
                    Codec::Chat(c) => c.member.is_some(),
                    Codec::Echo { .. } | Codec::Kv(_) | Codec::Http(_) => true,
                };
                if conn.state == State::Dead {
                    true
                } else if joined {
                    conn.state = State::Active;
                    conn.up = true;
                    self.active += 1;
                    true
                } else {
                    false
                }
            }
            _ => false,
        }
    }

    /// Moves idle connection `j` on after an event while connecting: up, or dead. Whether
    /// it is settled.
    fn settle_idle(&mut self, j: usize, first_error: &mut Option<io::Error>) -> bool {
        let Some(idle) = self.idle.get_mut(j) else {
            return false;
        };
        let Some(stream) = &idle.stream else {
            return false;
        };
        if idle.up {
            // Bytes or a close before the clock: the run's loop sees to them.
            return false;
        }
        match connect_outcome(stream) {
            None => false,
            Some(Ok(())) => {
                idle.up = true;
                true
            }
            Some(Err(e)) => {
                self.faults[Fault::of_connect_error(&e).index()] += 1;
                first_error.get_or_insert(e);
                idle.stream = None;
                true
            }
        }
    }

    /// At the deadline: every connection still connecting or in its handshake is given up
    /// as timed out. Why the handshakes failed, if they did.
    fn give_up_on_the_rest(&mut self, first_error: &mut Option<io::Error>) -> Option<String> {
        let mut handshake_error = None;
        for idle in &mut self.idle {
            if idle.stream.is_some() && !idle.up {
                self.faults[Fault::ConnectTimeout.index()] += 1;
                idle.stream = None;
            }
        }
        for conn in &mut self.conns {
            match conn.state {
                State::Connecting => {
                    self.faults[Fault::ConnectTimeout.index()] += 1;
                    first_error.get_or_insert_with(|| {
                        io::Error::new(io::ErrorKind::TimedOut, "connect timed out")
                    });
                }
                State::Handshake => {
                    self.faults[Fault::ConnectTimeout.index()] += 1;
                    handshake_error.get_or_insert_with(|| {
                        "no OK and JOINED within the connect timeout: is it a chat server?"
                            .to_owned()
                    });
                }
                _ => continue,
            }
            conn.state = State::Dead;
            conn.stream = None;
        }
        if self.active == 0 && handshake_error.is_none() {
            // Handshakes that ended in a fault (an ERR, a line that is not chat) killed
            // their connection in `read`.
            let failed =
                self.faults[Fault::ServerError.index()] + self.faults[Fault::Corrupt.index()];
            if failed > 0 {
                handshake_error = Some(
                    "the server answered NICK or JOIN with ERR or with a line that is not chat"
                        .to_owned(),
                );
            }
        }
        handshake_error
    }

    /// The measured run, from the start signal to the end of the grace period.
    fn measure(mut self, epoch: Instant) -> Result<Report, Error> {
        self.epoch = epoch;
        // The faults of connecting went up in `Connected`; the report counts the run's.
        self.faults = [0; Fault::COUNT];
        self.mono_epoch_ns = sys::monotonic_ns().saturating_sub(self.now());
        let plan = self.plan;
        if plan.schedule.is_none() {
            // The closed loop starts with every connection sending its first messages.
            let now = self.now();
            for i in 0..self.conns.len() {
                self.top_up(i, now);
            }
        } else {
            self.releasing = self.active;
        }
        let mut now;
        // Bounded: every pass waits in `poll` for at most a tick, and the loop ends at the
        // end of the grace period (duration runs) or when every connection is done or has
        // been given up for want of replies (request-count runs).
        loop {
            now = self.now();
            self.busy.reading(now, self.measuring());
            let writes = self.writes;
            self.housekeeping(now);
            if self.finished(now) {
                break;
            }
            if self.writes != writes {
                // The schedule released messages and they went out: work, up to now.
                let done = self.now();
                self.busy.reading(done, self.measuring());
                self.busy.worked(now, done, self.measuring());
            }
            let wait = self.arm(now)?;
            if let Wait::Until(_) = wait {
                self.busy.sleeping();
            }
            if let Err(e) = self
                .poll
                .poll(&mut self.events, Some(wait.poll_timeout(now)))
            {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io("waiting for events", e));
            }
            let woke = self.now();
            match wait {
                Wait::Until(at) => self.busy.woke(at, woke, self.measuring()),
                Wait::Spin => self.busy.reading(woke, self.measuring()),
            }
            if self.serve_events() {
                // The turn's work ends with its last write: one more look at the clock.
                let done = self.now();
                self.busy.reading(done, self.measuring());
                self.busy.worked(woke, done, self.measuring());
            }
        }
        Ok(self.report(now))
    }

    /// Serves the events of one poll, releasing what falls due between them; whether there
    /// was any.
    fn serve_events(&mut self) -> bool {
        let mut served = false;
        // The events are moved out for the length of the pass so that serving them may
        // borrow the worker; the buffer goes back afterwards, so nothing is allocated.
        let events = std::mem::replace(&mut self.events, Events::with_capacity(0));
        for ev in events.iter() {
            let i = ev.token().0;
            if ev.token() == TIMER {
                continue;
            }
            if let Some(j) = i.checked_sub(self.conns.len()) {
                self.idle_event(j);
                continue;
            }
            if !self.conns[i].up {
                self.reconnected(i);
            }
            let mut now = None;
            if self.conns[i].up && (ev.is_readable() || ev.is_read_closed() || ev.is_error()) {
                now = self.read(i);
            }
            if ev.is_writable() && !self.conns[i].pending.is_empty() {
                self.flush(i);
            }
            // The replies just read were stamped microseconds ago; sending right after
            // them needs no second clock read.
            let now = now.unwrap_or_else(|| self.now());
            self.top_up(i, now);
            self.busy.reading(now, self.measuring());
            served = true;
            // The schedule is checked between events, so that a batch of replies does not
            // hold back a message that fell due meanwhile.
            if self.due_by(now) {
                self.release(now);
            }
        }
        self.events = events;
        served
    }

    /// Whether the window is open and messages are still sent: the stretch the self-check
    /// judges.
    fn measuring(&self) -> bool {
        self.window.is_some() && !self.stopped
    }

    /// Whether an open-loop message is due by `now`.
    fn due_by(&self, now: u64) -> bool {
        !self.stopped
            && self.releasing > 0
            && self.cursor.as_ref().is_some_and(|c| c.peek().at_ns <= now)
    }

    /// Phase changes, the open-loop schedule, the stall check and the interval roll.
    fn housekeeping(&mut self, now: u64) {
        let plan = self.plan;
        if self.window.is_none() && now >= plan.warm_ns {
            self.window = Some((sys::thread_cpu_ns(), now));
        }
        // The schedule goes first: a worker that was not scheduled for a while must still
        // release every message due before the end of the window, late, rather than drop
        // them because the clock has passed the end in the meantime.
        if self.cursor.is_some() {
            self.release(now);
        }
        if let Some(end) = plan.end_ns {
            let schedule_done = match &self.cursor {
                Some(c) => self.releasing == 0 || c.peek().at_ns >= end,
                None => true,
            };
            if !self.stopped && now >= end && schedule_done {
                self.stopped = true;
            }
        }
        if now >= self.next_tick {
            self.check_idle(now);
            self.next_tick = now + self.tick;
        }
        if let (Some(len), true) = (plan.cfg.interval, self.rec.interval.is_some()) {
            let len = len.as_nanos() as u64;
            // Bounded by the number of intervals the run has lasted.
            while now >= plan.warm_ns + (self.rec.intervals.len() as u64 + 1) * len {
                self.rec.roll_interval();
            }
        }
        plan.progress[self.index]
            .0
            .store(self.rec.measured, Ordering::Relaxed);
    }

    /// Whether the run is over for this worker: sending is over, and the last replies (and
    /// in the room profile the last deliveries) are in or the grace period has run out.
    fn finished(&mut self, now: u64) -> bool {
        let plan = self.plan;
        let open = self.conns.iter().any(|c| c.stream.is_some());
        if !open || (self.active == 0 && plan.rooms.is_none()) {
            return true;
        }
        // Duration runs stop sending at the end of the window; request-count runs when
        // every connection has sent its count (it is then `Done` or dead).
        if !(self.stopped || self.active == 0) {
            return false;
        }
        let grace = plan.cfg.grace.as_nanos() as u64;
        let deadline = *self
            .drain_deadline
            .get_or_insert_with(|| match plan.end_ns {
                Some(end) => end + grace,
                None => now + grace,
            });
        if now >= deadline {
            return true;
        }
        if self.owed > 0 {
            return false;
        }
        let Some(rooms) = &plan.rooms else {
            return true;
        };
        self.publish();
        rooms.drained.load(Ordering::Acquire) == plan.cfg.threads
            && self.conns.iter().all(|c| match &c.codec {
                Codec::Chat(chat) if c.stream.is_some() => chat
                    .member
                    .as_ref()
                    .is_none_or(|m| m.caught_up(rooms.last(chat.room))),
                _ => true,
            })
    }

    /// Room profile: tells the other workers the last seq this worker's senders got
    /// acknowledged in each room, once, when they have all stopped.
    fn publish(&mut self) {
        let Some(rooms) = &self.plan.rooms else {
            return;
        };
        if self.published {
            return;
        }
        self.published = true;
        for conn in &self.conns {
            if let Codec::Chat(chat) = &conn.codec
                && let Some(last) = chat.last_ack
            {
                rooms.last[chat.room].fetch_max(last + 1, Ordering::AcqRel);
            }
        }
        rooms.drained.fetch_add(1, Ordering::AcqRel);
    }

    /// How the worker waits for its next turn: the pacing's plan for the next due message
    /// and the worker's other deadlines, with the timer armed for it to the nanosecond.
    fn arm(&mut self, now: u64) -> Result<Wait, Error> {
        let plan = self.plan;
        let mut deadline = self.next_tick;
        if self.window.is_none() {
            deadline = deadline.min(plan.warm_ns);
        }
        if let Some(end) = plan.end_ns
            && !self.stopped
        {
            deadline = deadline.min(end);
        }
        if let Some(drain) = self.drain_deadline {
            deadline = deadline.min(drain);
        }
        let Some(timer) = &self.timer else {
            // The closed loop waits only for events and its housekeeping.
            return Ok(Wait::Until(deadline.max(now + 1)));
        };
        let due = self
            .cursor
            .as_ref()
            .filter(|_| !self.stopped && self.releasing > 0)
            .map(|c| c.peek().at_ns);
        let wait = pacing::plan(self.pacing, now, due, deadline);
        if let Wait::Until(at) = wait
            && self.timer_armed != Some(at)
        {
            let abs = Duration::from_nanos(self.mono_epoch_ns + at);
            timer
                .set(
                    Expiration::OneShot(TimeSpec::from_duration(abs)),
                    TimerSetTimeFlags::TFD_TIMER_ABSTIME,
                )
                .map_err(|e| Error::io("arming the timerfd", e))?;
            self.timer_armed = Some(at);
        }
        Ok(wait)
    }

    /// Releases the open-loop messages due by `now` to their connections.
    fn release(&mut self, now: u64) {
        let plan = self.plan;
        let Some(mut cursor) = self.cursor.take() else {
            return;
        };
        // Bounded: each pass moves the cursor past one message due by `now`.
        while !self.stopped && self.releasing > 0 {
            let due = cursor.peek();
            if due.at_ns > now {
                break;
            }
            if plan.end_ns.is_some_and(|end| due.at_ns >= end) {
                self.stopped = true;
                break;
            }
            cursor.advance();
            let conn = &mut self.conns[due.local];
            if conn.state != State::Active || conn.released_all {
                continue;
            }
            conn.released += 1;
            // No room in flight (or on this socket, or the socket is still connecting): the
            // message waits for the server, not for the client. Its lag is what it had at its
            // release.
            let room = conn.room(plan.cfg.requests_per_conn);
            let held = conn.held.release(conn.released - conn.flight.sent, room);
            if due.at_ns >= plan.warm_ns {
                if held {
                    note_lag(&mut self.send_lag, &mut self.released_late, due.at_ns, now);
                    self.held_measured += 1;
                }
                let conn = &mut self.conns[due.local];
                conn.released_measured += 1;
                if plan.requests.is_some_and(|k| conn.released_measured >= k) {
                    conn.released_all = true;
                    self.releasing -= 1;
                }
            }
            self.top_up(due.local, now);
        }
        self.cursor = Some(cursor);
    }

    /// Sends what connection `i` may send now: up to `depth` in flight, and in the open loop
    /// no more than the schedule has released. All of it goes out in one write.
    fn top_up(&mut self, i: usize, now: u64) {
        let plan = self.plan;
        let cfg = &plan.cfg;
        let conn = &mut self.conns[i];
        if conn.state != State::Active {
            return;
        }
        let mut n = conn.room(cfg.requests_per_conn);
        match plan.schedule {
            Some(_) => n = n.min(conn.released - conn.flight.sent),
            None => {
                if self.stopped || plan.end_ns.is_some_and(|end| now >= end) {
                    n = 0;
                } else if let Some(k) = plan.requests
                    && now >= plan.warm_ns
                {
                    n = n.min(k - conn.measured_sent);
                }
            }
        }
        if n == 0 {
            return;
        }
        if conn.flight.owed() == 0 {
            conn.idle_since = now;
        }
        // The open loop stamps the write itself: its lag is the client's delay up to the
        // write, not up to the loop's last look at the clock.
        let write_ns = match plan.schedule {
            Some(_) => self.epoch.elapsed().as_nanos() as u64,
            None => now,
        };
        // The first `held` of these waited for room; their lag was taken at their release.
        let mut held = conn.held.write(n);
        conn.on_socket += n;
        self.tx.clear();
        for _ in 0..n {
            let seq = conn.flight.sent;
            let due_ns = conn.clock.as_mut().map_or(now, Clock::next_ns);
            let measured = due_ns >= plan.warm_ns && plan.end_ns.is_none_or(|end| due_ns < end);
            conn.measured_sent += u64::from(measured);
            conn.flight.push(Slot {
                due_ns,
                sent_ns: write_ns,
                measured,
            });
            let was_held = held > 0;
            held -= u64::from(was_held);
            if plan.schedule.is_some() && measured && !was_held {
                note_lag(
                    &mut self.send_lag,
                    &mut self.released_late,
                    due_ns,
                    write_ns,
                );
                self.gaps.sent(due_ns, write_ns);
            }
            match &conn.codec {
                Codec::Echo { .. } => {
                    let at = self.tx.len();
                    self.tx.resize(at + cfg.msg_size.pick(conn.id, seq), 0);
                    crate::echo::encode(conn.id, seq, due_ns, &mut self.tx[at..]);
                }
                Codec::Chat(chat) => chat::encode_say(
                    &chat.room_name,
                    conn.id,
                    seq,
                    due_ns,
                    // One size: chat refuses a mix.
                    cfg.msg_size.max(),
                    &mut self.scratch,
                    &mut self.tx,
                ),
                Codec::Kv(c) => kv::encode(
                    c.mix.op(conn.id, seq),
                    conn.id,
                    seq,
                    &cfg.msg_size,
                    &mut self.scratch,
                    &mut self.tx,
                ),
                Codec::Http(c) => self.tx.extend_from_slice(c.path.request()),
            }
        }
        self.owed += n;
        self.writes += 1;
        if conn.pending.is_empty() {
            let tx = std::mem::take(&mut self.tx);
            self.write(i, &tx);
            self.tx = tx;
        } else {
            // The socket is full; these go out behind the earlier bytes when it drains.
            conn.pending.extend_from_slice(&self.tx);
        }
    }

    /// Writes `bytes` to connection `i` until they are all out or the socket is full; what
    /// does not fit waits in `pending` for the socket to become writable.
    fn write(&mut self, i: usize, bytes: &[u8]) {
        let conn = &mut self.conns[i];
        let Some(stream) = &mut conn.stream else {
            return;
        };
        let mut off = 0;
        // Bounded: each pass writes at least one byte or leaves.
        while off < bytes.len() {
            match stream.write(&bytes[off..]) {
                Ok(0) => {
                    self.kill(i, Fault::Closed);
                    return;
                }
                Ok(n) => {
                    off += n;
                    self.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.kill(i, Fault::of_io_error(&e));
                    return;
                }
            }
        }
        if off < bytes.len() {
            conn.pending.extend_from_slice(&bytes[off..]);
        }
    }

    /// Writes what a short write left behind, now that the socket has room.
    fn flush(&mut self, i: usize) {
        let pending = std::mem::take(&mut self.conns[i].pending);
        self.write(i, &pending);
        let conn = &mut self.conns[i];
        if conn.pending.is_empty() {
            // Keep the allocation for the next time the socket fills up.
            conn.pending = pending;
            conn.pending.clear();
        }
    }

    /// Reads and checks the replies waiting on connection `i`; returns when the last bytes
    /// arrived, if any did.
    fn read(&mut self, i: usize) -> Option<u64> {
        let plan = self.plan;
        let mut arrived = None;
        // Bounded: a read that does not fill the buffer ends the loop; an echo or ingest peer
        // cannot fill it forever without sending bytes nobody asked for (a fault), and a room
        // peer only as long as the room's other members keep talking.
        loop {
            let conn = &mut self.conns[i];
            let Some(stream) = &mut conn.stream else {
                return arrived;
            };
            match stream.read(&mut self.rx) {
                Ok(0) => {
                    self.kill(i, Fault::Closed);
                    return arrived;
                }
                Ok(n) => {
                    let now = self.epoch.elapsed().as_nanos() as u64;
                    arrived = Some(now);
                    self.bytes_read += n as u64;
                    self.rec.now = now;
                    let before = conn.flight.answered;
                    let outcome = match &mut conn.codec {
                        Codec::Echo { rx_off } => echo_replies(
                            conn.id,
                            rx_off,
                            &self.rx[..n],
                            &mut conn.flight,
                            &mut self.rec,
                            &mut self.expect,
                            &plan.cfg.msg_size,
                        ),
                        Codec::Chat(chat) => chat_lines(
                            conn.id,
                            chat,
                            &self.rx[..n],
                            &mut conn.flight,
                            &mut self.rec,
                            &mut self.scratch,
                            plan,
                        ),
                        Codec::Kv(kv) => kv_replies(
                            conn.id,
                            kv,
                            &self.rx[..n],
                            &mut conn.flight,
                            &mut self.rec,
                            plan,
                        ),
                        Codec::Http(c) => {
                            http_responses(c, &self.rx[..n], &mut conn.flight, &mut self.rec)
                        }
                    };
                    self.owed -= conn.flight.answered - before;
                    conn.idle_since = now;
                    conn.stalled = false;
                    if let Err(fault) = outcome {
                        self.kill(i, fault);
                        return arrived;
                    }
                    if self.answered_all(i, now) {
                        return arrived;
                    }
                    // A short read took everything the socket held: TCP hands over all
                    // queued bytes up to the buffer size, and bytes that arrive later raise
                    // a new edge. Skipping the read that would say EAGAIN saves a system
                    // call per wakeup.
                    if n < self.rx.len() {
                        return arrived;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return arrived,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.kill(i, Fault::of_io_error(&e));
                    return arrived;
                }
            }
        }
    }

    /// After replies on connection `i`: whether its socket is through, and reading it must
    /// stop. Done (a request-count run's last reply; closed, but for a room member), or
    /// `--requests-per-conn` spent (closed, and replaced while there is more to send).
    fn answered_all(&mut self, i: usize, now: u64) -> bool {
        let plan = self.plan;
        let conn = &mut self.conns[i];
        if conn.state != State::Active || conn.flight.owed() > 0 {
            return false;
        }
        if let Some(k) = plan.requests {
            let all_sent = match plan.schedule {
                Some(_) => conn.released_all && conn.flight.sent == conn.released,
                None => conn.measured_sent >= k,
            };
            if all_sent {
                conn.state = State::Done;
                self.active -= 1;
                // A room member stays to receive the others' messages.
                if plan.rooms.is_some() {
                    return false;
                }
                if let Some(mut s) = conn.stream.take() {
                    // Deregistering can only fail for a socket epoll no longer holds;
                    // dropping it closes it either way.
                    let _ = self.poll.registry().deregister(&mut s);
                }
                return true;
            }
        }
        let spent = plan
            .cfg
            .requests_per_conn
            .is_some_and(|r| conn.on_socket >= r);
        if spent && !self.stopped {
            self.recycle(i, now);
        }
        spent
    }

    /// Counts stalls, and gives up connections that have owed replies for too long.
    fn check_idle(&mut self, now: u64) {
        let cfg = &self.plan.cfg;
        let stall = cfg.stall.as_nanos() as u64;
        let give_up = cfg.reply_timeout.as_nanos() as u64;
        let connect = cfg.connect_timeout.as_nanos() as u64;
        for i in 0..self.conns.len() {
            let conn = &mut self.conns[i];
            if conn.state == State::Active && !conn.up {
                // A replacement connection, connecting since `idle_since`.
                if now.saturating_sub(conn.idle_since) >= connect {
                    self.kill(i, Fault::ConnectTimeout);
                }
                continue;
            }
            if conn.state != State::Active || conn.flight.owed() == 0 {
                continue;
            }
            let idle = now.saturating_sub(conn.idle_since);
            if idle >= give_up {
                self.kill(i, Fault::TimedOut);
            } else if idle >= stall && !conn.stalled {
                conn.stalled = true;
                self.faults[Fault::Stalled.index()] += 1;
            }
        }
    }

    /// Counts `fault` and closes connection `i`.
    fn kill(&mut self, i: usize, fault: Fault) {
        let conn = &mut self.conns[i];
        // An active connection without a socket is one whose replacement failed to open.
        if conn.stream.is_none() && conn.state != State::Active {
            return;
        }
        self.faults[fault.index()] += 1;
        if conn.state == State::Active {
            self.owed -= conn.flight.owed();
            self.active -= 1;
            if self.cursor.is_some() && !conn.released_all {
                conn.released_all = true;
                self.releasing -= 1;
            }
        }
        conn.state = State::Dead;
        if let Some(mut s) = conn.stream.take() {
            // As in `read`: closing does not depend on deregistering.
            let _ = self.poll.registry().deregister(&mut s);
        }
    }

    /// `--requests-per-conn`: connection `i` has carried its requests and had every reply.
    /// The client closes it (as a user's client would, not asking the server to) and opens
    /// a fresh one in its place; what falls due meanwhile waits for it.
    fn recycle(&mut self, i: usize, now: u64) {
        let conn = &mut self.conns[i];
        if let Some(mut s) = conn.stream.take() {
            // As in `read`: closing does not depend on deregistering.
            let _ = self.poll.registry().deregister(&mut s);
        }
        conn.up = false;
        conn.on_socket = 0;
        // The replacement's connect timeout counts from here (`check_idle`).
        conn.idle_since = now;
        let opened = connect(&self.poll, self.plan.addr, i);
        match opened {
            Ok(s) => {
                conn.stream = Some(s);
                self.opened += 1;
            }
            Err(e) => self.kill(i, Fault::of_connect_error(&e)),
        }
    }

    /// An event on connection `i` while its replacement connects: up, or dead.
    fn reconnected(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let Some(stream) = &mut conn.stream else {
            return;
        };
        match connect_outcome(stream) {
            None => {}
            Some(Ok(())) => match start(stream, &conn.codec, conn.id) {
                Ok(_) => conn.up = true,
                Err(e) => self.kill(i, Fault::of_io_error(&e)),
            },
            Some(Err(e)) => self.kill(i, Fault::of_connect_error(&e)),
        }
    }

    /// An event on idle connection `j`: it came up, or the server sent it bytes nobody asked
    /// for or closed it (a fault either way; it is dropped).
    fn idle_event(&mut self, j: usize) {
        let Some(idle) = self.idle.get_mut(j) else {
            return;
        };
        let Some(stream) = &mut idle.stream else {
            return;
        };
        if !idle.up {
            match connect_outcome(stream) {
                None => return,
                Some(Ok(())) => {
                    idle.up = true;
                    return;
                }
                Some(Err(e)) => {
                    self.faults[Fault::of_connect_error(&e).index()] += 1;
                    idle.stream = None;
                    return;
                }
            }
        }
        let fault = loop {
            match stream.read(&mut self.rx) {
                Ok(0) => break Fault::Closed,
                Ok(_) => break Fault::Corrupt,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Fault::of_io_error(&e),
            }
        };
        self.faults[fault.index()] += 1;
        if let Some(mut s) = idle.stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
    }

    fn report(mut self, now: u64) -> Report {
        let cpu_end = sys::thread_cpu_ns();
        // Workers waiting for this one's rooms must not wait out their grace period.
        self.publish();
        for conn in &self.conns {
            if conn.state == State::Active {
                self.faults[Fault::Unanswered.index()] += conn.flight.owed();
            }
            if let (Some(rooms), Codec::Chat(chat), Some(_)) =
                (&self.plan.rooms, &conn.codec, &conn.stream)
                && let Some(m) = &chat.member
                && !m.caught_up(rooms.last(chat.room))
            {
                self.faults[Fault::Delivery.index()] += 1;
            }
        }
        let (cpu_ns, wall_ns) = match self.window {
            Some((cpu0, t0)) => (cpu_end.saturating_sub(cpu0), now.saturating_sub(t0)),
            None => (0, 0),
        };
        if let Some(cur) = self.rec.interval.take()
            && !cur.is_empty()
        {
            self.rec.intervals.push(cur);
        }
        let sent = self.conns.iter().map(|c| c.flight.sent).sum();
        self.plan.progress[self.index]
            .0
            .store(self.rec.measured, Ordering::Relaxed);
        Report {
            latency: self.rec.latency,
            service: self.rec.service,
            delivery: self.rec.delivery,
            ops: self.rec.ops,
            intervals: self.rec.intervals,
            faults: self.faults,
            deliveries: self.rec.deliveries,
            measured: self.rec.measured,
            replies: self.rec.replies,
            sent,
            bytes_written: self.bytes_written,
            bytes_read: self.bytes_read,
            cpu_ns,
            wall_ns,
            last_reply_ns: self.rec.last_reply_ns,
            send_lag: self.send_lag,
            released_late: self.released_late,
            held: self.held_measured,
            gaps: self.gaps,
            work_ns: self.busy.work_ns,
            hiccups: self.busy.hiccups,
            opened: self.opened,
            idle: self
                .idle
                .iter_mut()
                .filter_map(|c| c.stream.take())
                .collect(),
        }
    }
}

/// Checks the echo bytes `data` against the messages owed, and records every reply they
/// complete. `rx_off` is how far into the oldest owed message earlier bytes got.
fn echo_replies(
    conn: u32,
    rx_off: &mut usize,
    mut data: &[u8],
    flight: &mut Flight,
    rec: &mut Recorder,
    expect: &mut Expect,
    sizes: &Sizes,
) -> Result<(), Fault> {
    // Bounded: each pass consumes at least one byte.
    while !data.is_empty() {
        // Bytes nobody asked for are as wrong as wrong bytes.
        let Some(slot) = flight.oldest() else {
            return Err(Fault::Corrupt);
        };
        let msg_size = sizes.pick(conn, flight.answered);
        let take = data.len().min(msg_size - *rx_off);
        let message = (conn, flight.answered, slot.due_ns);
        if !expect.matches(message, msg_size, *rx_off, &data[..take]) {
            return Err(Fault::Corrupt);
        }
        *rx_off += take;
        data = &data[take..];
        if *rx_off == msg_size {
            *rx_off = 0;
            if let Some(slot) = flight.pop() {
                rec.reply(slot);
            }
        }
    }
    Ok(())
}

/// Checks the kv replies in `data` against the requests owed, and records every one.
fn kv_replies(
    me: u32,
    kv: &mut KvConn,
    data: &[u8],
    flight: &mut Flight,
    rec: &mut Recorder,
    plan: &Plan,
) -> Result<(), Fault> {
    let sizes = &plan.cfg.msg_size;
    // The preload writes as the writer after the last connection.
    let writers = plan.cfg.conns as u32;
    let KvConn { partial, mix } = kv;
    partial.feed(data, sizes.max(), |reply| {
        // Bytes nobody asked for are as wrong as wrong bytes.
        let seq = flight.answered;
        let slot = flight.oldest().ok_or(Fault::Corrupt)?;
        let op = mix.op(me, seq);
        kv::check(reply, op, writers, sizes)?;
        flight.pop();
        rec.reply_op(slot, op.get);
        Ok(())
    })
}

/// Checks the http responses in `data`, one per request owed, and records every one.
fn http_responses(
    http: &mut HttpConn,
    data: &[u8],
    flight: &mut Flight,
    rec: &mut Recorder,
) -> Result<(), Fault> {
    http.partial.feed(data, http.path, || {
        // A response nobody asked for is as wrong as a wrong one.
        let slot = flight.pop().ok_or(Fault::Corrupt)?;
        rec.reply(slot);
        Ok(())
    })
}

/// Checks the chat lines in `data` and records every `ACK` and `MSG` they hold.
fn chat_lines(
    me: u32,
    chat: &mut ChatConn,
    data: &[u8],
    flight: &mut Flight,
    rec: &mut Recorder,
    scratch: &mut Vec<u8>,
    plan: &Plan,
) -> Result<(), Fault> {
    let ChatConn {
        lines,
        room,
        room_name,
        text_len,
        member,
        awaiting_ok,
        last_ack,
    } = chat;
    lines.extend_from_slice(data);
    // Bounded by the lines in `data` and before it.
    while let Some(line) = lines.next_line() {
        let line = line.map_err(|_| Fault::Corrupt)?;
        match Reply::parse(line).map_err(|_| Fault::Corrupt)? {
            Reply::Ack { room: r, seq } => {
                if r != room_name.as_str() || last_ack.is_some_and(|last| seq <= last) {
                    return Err(Fault::Corrupt);
                }
                *last_ack = Some(seq);
                if let Some(m) = member {
                    m.on_ack(seq).map_err(|_| Fault::Delivery)?;
                }
                let slot = flight.pop().ok_or(Fault::Corrupt)?;
                rec.reply(slot);
            }
            Reply::Msg {
                room: r,
                seq,
                name,
                text,
            } => {
                let (Some(m), Some(rooms)) = (member.as_mut(), &plan.rooms) else {
                    return Err(Fault::Corrupt);
                };
                if r != room_name.as_str() {
                    return Err(Fault::Corrupt);
                }
                let f = chat::parse_text(text, *text_len, scratch).ok_or(Fault::Corrupt)?;
                let from_my_room = f.conn as usize / rooms.size == *room;
                let named = name.strip_prefix('c').and_then(|n| n.parse::<u32>().ok());
                if f.conn == me || !from_my_room || named != Some(f.conn) {
                    return Err(Fault::Corrupt);
                }
                m.on_msg(seq).map_err(|_| Fault::Delivery)?;
                rec.deliver(f.stamp);
            }
            Reply::Ok if *awaiting_ok => *awaiting_ok = false,
            Reply::Joined { room: r, next }
                if !*awaiting_ok && member.is_none() && r == room_name.as_str() =>
            {
                *member = Some(Member::new(next));
            }
            Reply::Err { .. } => return Err(Fault::ServerError),
            _ => return Err(Fault::Corrupt),
        }
    }
    Ok(())
}

/// The protocol side of connection `id`.
fn codec(plan: &Plan, id: usize) -> Codec {
    match &plan.cfg.workload {
        Workload::Echo => Codec::Echo { rx_off: 0 },
        Workload::Http(path) => Codec::Http(Box::new(HttpConn {
            partial: http::Partial::default(),
            path: *path,
        })),
        Workload::Kv(c) => Codec::Kv(Box::new(KvConn {
            partial: kv::Partial::default(),
            mix: kv::Mix::new(c),
        })),
        Workload::Chat(c) => {
            let (room, room_name) = match c.profile {
                ChatProfile::Ingest => (0, chat::INGEST_ROOM.to_owned()),
                ChatProfile::Room => (id / c.room_size, chat::room_name(id / c.room_size)),
            };
            Codec::Chat(Box::new(ChatConn {
                lines: LineBuffer::new(MAX_SERVER_LINE),
                room,
                text_len: plan.cfg.msg_size.max() - chat::overhead(&room_name),
                room_name,
                member: None,
                awaiting_ok: c.profile == ChatProfile::Room,
                last_ack: None,
            }))
        }
    }
}

/// Readies a connected socket: `TCP_NODELAY`, and in the room profile the `NICK` and `JOIN`
/// lines. Returns whether a handshake is under way.
fn start(stream: &mut TcpStream, codec: &Codec, id: u32) -> io::Result<bool> {
    // Every ringside server sets TCP_NODELAY; the client does too, so that a small message
    // is never held back waiting for an ACK.
    stream.set_nodelay(true)?;
    let Codec::Chat(chat) = codec else {
        return Ok(false);
    };
    if !chat.awaiting_ok {
        return Ok(false);
    }
    let mut out = Vec::new();
    Command::Nick {
        name: &chat::nick(id),
    }
    .encode(&mut out);
    Command::Join {
        room: &chat.room_name,
        since: chat::NO_REPLAY,
    }
    .encode(&mut out);
    // A fresh socket has room for these few bytes; a short write here is a failure.
    stream.write_all(&out)?;
    Ok(true)
}

/// Records into `lag` (and, past [`LATE_NS`], `late`) the lag of a measured message due at
/// `due_ns` that the client let go at `at`.
fn note_lag(lag: &mut Histogram<u64>, late: &mut u64, due_ns: u64, at: u64) {
    let ns = at.saturating_sub(due_ns);
    lag.saturating_record(ns.max(1));
    *late += u64::from(ns > LATE_NS);
}

/// Starts connecting to `addr` for connection `i`, registered with `poll` under its token.
fn connect(poll: &Poll, addr: SocketAddr, i: usize) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    poll.registry()
        .register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)?;
    Ok(s)
}

/// Whether a connecting socket is up: `None` while the handshake is still going on.
fn connect_outcome(stream: &TcpStream) -> Option<io::Result<()>> {
    match stream.take_error() {
        Ok(Some(e)) | Err(e) => return Some(Err(e)),
        Ok(None) => {}
    }
    match stream.peer_addr() {
        Ok(_) => Some(Ok(())),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => None,
        Err(e) => Some(Err(e)),
    }
}
