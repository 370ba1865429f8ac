//! What a run does: the workload, the load shape (closed or open loop), when it stops, and where
//! its threads run. The command line maps onto [`Config`] one to one; the xtask and the tests
//! build it directly.

use std::time::Duration;

use crate::account::CpuSource;
use crate::dist::{KeyDist, Sizes};
use crate::error::Error;
use crate::http::HttpPath;
use crate::pacing::Pacing;

/// The traffic each connection generates.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// Messages of `msg_size` bytes, each reply checked byte for byte.
    Echo,
    /// The chat line protocol.
    Chat(ChatConfig),
    /// RESP `GET`s and `SET`s of `msg_size`-byte values; every reply checked against what
    /// the store must hold.
    Kv(KvConfig),
    /// HTTP/1.1 `GET`s of one path, every response checked (status, `Date`,
    /// `Content-Length`, body).
    Http(HttpPath),
}

/// Options of the kv workload.
#[derive(Debug, Clone, PartialEq)]
pub struct KvConfig {
    /// The share of requests that are `GET`s, 0 to 1; the rest are `SET`s.
    pub get_ratio: f64,
    /// Keys `key:000000000000` up to `keys - 1`, each request's drawn from `key_dist`;
    /// stored before the clock starts when the mix has `GET`s.
    pub keys: u64,
    /// How each request's key is drawn: uniformly, or by Zipf's law.
    pub key_dist: KeyDist,
}

impl Default for KvConfig {
    fn default() -> Self {
        KvConfig {
            get_ratio: 0.9,
            // redis-benchmark's `-r 100000`, the article's key space.
            keys: 100_000,
            key_dist: KeyDist::Uniform,
        }
    }
}

/// How open-loop messages are spaced in time (see `schedule`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Arrivals {
    /// Evenly spaced: the connections take turns, one message every `1 / rate`.
    #[default]
    Uniform,
    /// Each connection a Poisson process of `rate / conns`: exponential gaps, drawn from the
    /// run's seed.
    Poisson,
    /// Bursts: every connection silent in the off-periods and a Poisson process in the
    /// on-periods (all connections in step, from the epoch: `on_ns` on, `off_ns` off), at
    /// the rate that keeps the average at `rate`.
    OnOff {
        /// Length of an on-period, nanoseconds.
        on_ns: u64,
        /// Length of an off-period, nanoseconds.
        off_ns: u64,
    },
    /// Each connection's gaps drawn from a generalized Pareto distribution of this shape
    /// (0 to 1, exclusive) and location 0, scaled to the mean gap of `rate / conns`:
    /// mutilate's `fb_ia` is the shape 0.154971. Heavier-tailed than Poisson: long silences
    /// and tight bunches.
    Pareto {
        /// The shape ξ; the tail's weight grows with it, the mean is infinite from 1 on.
        shape: f64,
    },
}

impl Arrivals {
    /// Whether the gaps are exponential, as the self-check tests them.
    pub fn is_poisson(self) -> bool {
        self == Arrivals::Poisson
    }
}

impl std::fmt::Display for Arrivals {
    /// As `--arrivals` takes it and the summary names it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arrivals::Uniform => f.write_str("uniform"),
            Arrivals::Poisson => f.write_str("poisson"),
            Arrivals::OnOff { on_ns, off_ns } => {
                write!(f, "onoff:{}:{}", *on_ns as f64 / 1e6, *off_ns as f64 / 1e6)
            }
            Arrivals::Pareto { shape } => write!(f, "pareto:{shape}"),
        }
    }
}

impl std::str::FromStr for Arrivals {
    type Err = String;

    /// `uniform`, `poisson`, `onoff:ON_MS:OFF_MS` (milliseconds, fractions allowed) or
    /// `pareto:SHAPE`.
    fn from_str(s: &str) -> Result<Arrivals, String> {
        let bad = |why: &str| {
            format!(
                "--arrivals takes uniform, poisson, onoff:ON_MS:OFF_MS or pareto:SHAPE, not {s:?}{why}"
            )
        };
        if let Some(rest) = s.strip_prefix("onoff:") {
            let ms = |v: &str| {
                v.parse::<f64>()
                    .ok()
                    .filter(|m| m.is_finite() && *m > 0.0 && *m <= 3.6e6)
                    .map(|m| (m * 1e6) as u64)
            };
            let (on, off) = rest.split_once(':').ok_or_else(|| bad(""))?;
            return match (ms(on), ms(off)) {
                (Some(on_ns), Some(off_ns)) if on_ns > 0 && off_ns > 0 => {
                    Ok(Arrivals::OnOff { on_ns, off_ns })
                }
                _ => Err(bad(
                    ": ON_MS and OFF_MS are positive milliseconds, at most an hour",
                )),
            };
        }
        if let Some(shape) = s.strip_prefix("pareto:") {
            return match shape.parse::<f64>() {
                Ok(shape) if shape > 0.0 && shape < 1.0 => Ok(Arrivals::Pareto { shape }),
                _ => Err(bad(
                    ": SHAPE is above 0 (0 would be poisson) and below 1 (from 1 on the mean is infinite)",
                )),
            };
        }
        match s {
            "uniform" => Ok(Arrivals::Uniform),
            "poisson" => Ok(Arrivals::Poisson),
            _ => Err(bad("")),
        }
    }
}

/// The seed of the Poisson gaps when none is given: runs draw the same gaps unless told not to.
pub const DEFAULT_SEED: u64 = 1;

/// The two chat workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatProfile {
    /// Every connection `SAY`s at a constant byte rate; every `ACK` is awaited and counted.
    Ingest,
    /// Connections join rooms of `room_size` members and `SAY` at the open-loop rate; every
    /// member must receive every message of its room exactly once, in seq order.
    Room,
}

/// Options of the chat workloads.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatConfig {
    /// Which chat workload.
    pub profile: ChatProfile,
    /// Members per room (room profile).
    pub room_size: usize,
    /// Bytes per second each connection sends (ingest profile); 125 000 is 1 Mbit/s.
    pub byte_rate: f64,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            profile: ChatProfile::Ingest,
            room_size: 8,
            byte_rate: 125_000.0,
        }
    }
}

/// When the sending stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Each connection sends this many measured messages (after the warmup).
    Requests(u64),
    /// Messages are sent for this long after the warmup.
    Duration(Duration),
}

/// A run, fully described.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The traffic.
    pub workload: Workload,
    /// `HOST:PORT` of the server.
    pub addr: String,
    /// Number of connections, all established before the clock starts.
    pub conns: usize,
    /// Bytes per echo message, one size or a mix drawn per message; for chat, bytes per
    /// `SAY` line, newline included (one size); for kv, bytes per value (one size or a mix).
    pub msg_size: Sizes,
    /// Messages in flight per connection (closed loop), or at most in flight (open loop).
    pub depth: usize,
    /// When sending stops.
    pub stop: Stop,
    /// Requests a connection carries before the client closes it and opens a fresh one in
    /// its place (1: a connection per request); `None`: connections last the run.
    pub requests_per_conn: Option<u64>,
    /// Connections opened beside the `conns` active ones before the clock starts, and held
    /// open and silent until the run ends.
    pub idle_conns: usize,
    /// Time after all connections are up and before the measured window; not recorded.
    pub warmup: Duration,
    /// Open loop: messages per second in total, spread evenly over the connections. `None`
    /// is the closed loop.
    pub rate: Option<f64>,
    /// Open loop: evenly spaced or Poisson arrivals.
    pub arrivals: Arrivals,
    /// Open loop, Poisson: the seed of the gaps (connection `c` draws from stream `c` of it).
    pub seed: u64,
    /// Open loop: how a worker waits for its next send; `None`: spin where every worker has
    /// a CPU of its own, else sleep (`Pacing::default_for`).
    pub pacing: Option<Pacing>,
    /// Worker threads; connections are dealt to them round robin.
    pub threads: usize,
    /// CPUs to pin the workers to, worker `i` to `cpus[i % cpus.len()]`. Empty: not pinned.
    pub cpus: Vec<usize>,
    /// How long all connections (and chat handshakes) may take to come up.
    pub connect_timeout: Duration,
    /// No byte for this long while replies are owed counts as a stall (the connection goes on).
    pub stall: Duration,
    /// No byte for this long while replies are owed gives the connection up.
    pub reply_timeout: Duration,
    /// After the window, how long replies still owed are waited for.
    pub grace: Duration,
    /// Length of the interval histograms for the interval log; `None` keeps none.
    pub interval: Option<Duration>,
    /// Print progress and warnings on stderr.
    pub progress: bool,
    /// Where the server's CPU time is read at the window's edges (its cgroup, or its process
    /// tree), to report it per message beside the client's.
    pub server: Option<CpuSource>,
    /// The server's CPUs: what `/proc/stat` says of them over the window (interrupts and
    /// softirqs charged to no task among it).
    pub server_cpus: Vec<usize>,
}

/// The echo message size of the paper's benchmark.
const DEFAULT_MSG_SIZE: usize = 16;
/// The kv value size: room for the value's header and a filler word to check.
const DEFAULT_VALUE_SIZE: usize = 32;

impl Config {
    /// An echo run against `addr` with `conns` connections and every other option at its
    /// command-line default: 16-byte messages, depth 1, closed loop, 10 s, one thread.
    pub fn echo(addr: impl Into<String>, conns: usize) -> Config {
        Config {
            workload: Workload::Echo,
            addr: addr.into(),
            conns,
            msg_size: Sizes::fixed(DEFAULT_MSG_SIZE),
            depth: 1,
            stop: Stop::Duration(Duration::from_secs(10)),
            requests_per_conn: None,
            idle_conns: 0,
            warmup: Duration::ZERO,
            rate: None,
            arrivals: Arrivals::Uniform,
            seed: DEFAULT_SEED,
            pacing: None,
            threads: 1,
            cpus: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            stall: Duration::from_millis(250),
            reply_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(2),
            interval: None,
            progress: false,
            server: None,
            server_cpus: Vec::new(),
        }
    }

    /// A chat run; like [`Config::echo`] otherwise, with 64-byte lines.
    pub fn chat(addr: impl Into<String>, conns: usize, chat: ChatConfig) -> Config {
        Config {
            workload: Workload::Chat(chat),
            msg_size: Sizes::fixed(64),
            ..Config::echo(addr, conns)
        }
    }

    /// A kv run; like [`Config::echo`] otherwise, with 32-byte values.
    pub fn kv(addr: impl Into<String>, conns: usize, kv: KvConfig) -> Config {
        Config {
            workload: Workload::Kv(kv),
            msg_size: Sizes::fixed(DEFAULT_VALUE_SIZE),
            ..Config::echo(addr, conns)
        }
    }

    /// An http run of `GET path`; like [`Config::echo`] otherwise. Its message size is the
    /// request's.
    pub fn http(addr: impl Into<String>, conns: usize, path: HttpPath) -> Config {
        Config {
            workload: Workload::Http(path),
            msg_size: Sizes::fixed(path.request().len()),
            ..Config::echo(addr, conns)
        }
    }

    /// Checks everything that does not need the network: the options every workload has,
    /// then the workload's own.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if self.conns == 0 {
            return bad("--conns must be at least 1".into());
        }
        if self.depth == 0 {
            return bad("--depth must be at least 1".into());
        }
        if self.threads == 0 {
            return bad("--threads must be at least 1".into());
        }
        if self.threads > self.conns {
            return bad(format!(
                "--threads {} is more than --conns {}: a thread without connections measures nothing",
                self.threads, self.conns
            ));
        }
        if let Some(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return bad(format!("--rate must be a positive number, not {rate}"));
        }
        match self.stop {
            Stop::Requests(0) => return bad("--requests must be at least 1".into()),
            Stop::Duration(d) if d.is_zero() => {
                return bad("--duration must be more than 0".into());
            }
            _ => {}
        }
        if self.stall.is_zero() || self.reply_timeout < self.stall {
            return bad("the stall threshold must be positive and below the reply timeout".into());
        }
        if let Some(i) = self.interval
            && i < Duration::from_millis(10)
        {
            return bad("interval histograms must cover at least 10 ms".into());
        }
        self.validate_workloads()?;
        match &self.workload {
            Workload::Echo => self.validate_echo(),
            Workload::Kv(kv) => self.validate_kv(kv),
            Workload::Http(path) => self.validate_http(*path),
            Workload::Chat(chat) => self.validate_chat(chat),
        }
    }

    /// The shape of the load beyond rate and arrivals: connection churn and idle
    /// connections.
    fn validate_workloads(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if let Some(r) = self.requests_per_conn {
            if r == 0 {
                return bad("--requests-per-conn must be at least 1".into());
            }
            if let Workload::Chat(_) = self.workload {
                return bad(
                    "--requests-per-conn is for echo, kv and http: a chat connection is a member of its room for the run".into(),
                );
            }
        }
        if self
            .conns
            .checked_add(self.idle_conns)
            .is_none_or(|n| n as u64 >= u64::from(u32::MAX))
        {
            return bad(format!("--idle-conns {} is too many", self.idle_conns));
        }
        Ok(())
    }

    /// Echo's message size: a sequence number and a send time fit, and no more than echo
    /// cuts.
    fn validate_echo(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if self.msg_size.min() < crate::echo::MIN_MSG_SIZE {
            return bad(format!(
                "--msg-size must be at least {} for echo: each message carries its sequence number and send time",
                crate::echo::MIN_MSG_SIZE
            ));
        }
        if self.msg_size.max() > crate::echo::MAX_MSG_SIZE {
            return bad(format!(
                "--msg-size must be at most {} for echo",
                crate::echo::MAX_MSG_SIZE
            ));
        }
        Ok(())
    }

    /// Kv's mix, key space and value size.
    fn validate_kv(&self, kv: &KvConfig) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if !(0.0..=1.0).contains(&kv.get_ratio) {
            return bad(format!(
                "--get-ratio must be between 0 and 1, not {}",
                kv.get_ratio
            ));
        }
        if kv.keys == 0 || kv.keys > crate::kv::MAX_KEYS {
            return bad(format!(
                "--keys must be 1 to {}, not {}",
                crate::kv::MAX_KEYS,
                kv.keys
            ));
        }
        let (min, max) = (crate::kv::MIN_VALUE_SIZE, crate::kv::MAX_VALUE_SIZE);
        if self.msg_size.min() < min || self.msg_size.max() > max {
            return bad(format!(
                "--value-size must be {min} to {max}: each value carries its key, its writer and a sequence number"
            ));
        }
        if self.conns as u64 >= u64::from(u32::MAX) {
            return bad("--conns is too large for kv".into());
        }
        Ok(())
    }

    /// Http's requests are of a fixed size.
    fn validate_http(&self, path: HttpPath) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if self.msg_size.single() != Some(path.request().len()) {
            return bad("http requests have a fixed size: no --msg-size".into());
        }
        Ok(())
    }

    /// Chat's profile (a byte rate, or rooms that divide the connections) and line size.
    fn validate_chat(&self, chat: &ChatConfig) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        let longest_room = match chat.profile {
            ChatProfile::Ingest => {
                if !(chat.byte_rate.is_finite() && chat.byte_rate > 0.0) {
                    return bad("--byte-rate must be a positive number".into());
                }
                if self.rate.is_some() {
                    return bad(
                        "chat --profile ingest sends at --byte-rate per connection; --rate is for echo and the room profile".into(),
                    );
                }
                crate::chat::INGEST_ROOM.to_owned()
            }
            ChatProfile::Room => {
                if chat.room_size < 2 {
                    return bad("--room-size must be at least 2".into());
                }
                if !self.conns.is_multiple_of(chat.room_size) {
                    return bad(format!(
                        "--conns {} is not a multiple of --room-size {}: every room has the same members",
                        self.conns, chat.room_size
                    ));
                }
                crate::chat::room_name(self.conns / chat.room_size - 1)
            }
        };
        let (min, max) = crate::chat::line_bounds(&longest_room);
        let Some(size) = self.msg_size.single() else {
            return bad("chat lines have one --msg-size, not a mix".into());
        };
        if !(min..=max).contains(&size) {
            return bad(format!(
                "--msg-size must be {min} to {max} for this chat run: a SAY line carries its room, a stamp, the connection and a sequence number"
            ));
        }
        Ok(())
    }
}
