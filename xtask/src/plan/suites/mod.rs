//! The benchmark suites as data: which load points each one runs, for every server. A point
//! is one server start, one client run against it, and one row of the summary. Each suite is
//! a file of its own here, with its points, its defaults and what `--list` says of it; this
//! file holds what they share (the `Suite` names, a `Point` and its parts, the overrides of the
//! command line).
//!
//! | suite        | what                                                                   |
//! |--------------|------------------------------------------------------------------------|
//! | `quick`      | echo 16 B closed loop at 1..1000 conns, plus two open-loop points      |
//! | `emper-echo` | the io_uring paper's Figures 5 to 8: 1..10,000 conns, 0 and 200 µs work |
//! | `chat-cpu`   | the C-versus-Go paper's Figure 3: chat ingest at 1 Mbit/s per conn     |
//! | `chat-room`  | fan-out delivery latency and completeness, rooms of 2 to 1000          |
//! | `memory`     | memory per idle connection at 1,000 and 10,000 conns                   |
//! | `kv`         | RESP GET and SET at 1, 50, 1000 conns, pipeline 1 and 16, beside a peer |
//! | `http`       | plaintext (pipelined 16) and json at 16, 256, 1024 conns, beside nginx  |
//! | `scaling`    | workers 1, 2, 4, … up to the server's CPUs: closed, equal load, Fig. 7 |
//! | `search`     | the io_uring paper's file-content search, programs timed whole         |
//! | `capacity`   | latency under load: curves, and each server's capacity at an objective |
//! | `churn`      | the client closes after R = 1, 10, 100, ∞ requests, 64..4096 conns    |
//! | `idle`       | 1k and 10k conns, 100%, 10%, 1% of them active at one open-loop rate  |
//! | `sizes`      | echo of 16 B, 1 KiB, 64 KiB, 1 MiB and a 95% 64 B, 5% 64 KiB mix      |
//! | `bursts`     | Poisson, Pareto and on-off arrivals at 50, 70, 90% of a capacity      |
//! | `skew`       | kv keys uniform, Zipf 0.99 and 1.2, SET:GET 1:30 and 1:1              |
//!
//! It may call nothing else of xtask.

mod bursts;
pub(crate) mod capacity;
mod chat_cpu;
mod chat_room;
mod churn;
mod emper_echo;
mod http;
mod idle;
mod kv;
mod memory;
mod quick;
mod scaling;
mod search;
mod shape;
mod sizes;
mod skew;
mod workload;

use clap::ValueEnum;
use clap::builder::PossibleValue;
use serde::Serialize;

pub(crate) use chat_cpu::{CHAT_BYTE_RATE, CHAT_LINE};
pub(crate) use emper_echo::EMPER_COMPUTE_US;
pub(crate) use http::{HTTP_EQUAL_SERIES, HttpDriver, HttpPath, http_series};
pub(crate) use kv::{KV_KEYS, KV_VALUE_SIZE, KvDriver};
pub(crate) use scaling::{littles_law_bound, placement_for, stop_reason as scaling_stop_reason};
pub(crate) use search::CorpusSize;
pub(crate) use shape::{Arrivals, Shape};
pub(crate) use workload::Workload;

/// A suite, as `--suite` names it (each says what it is in its own file: `Defaults::help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Suite {
    Quick,
    EmperEcho,
    ChatCpu,
    ChatRoom,
    Memory,
    Search,
    Kv,
    Http,
    Scaling,
    Capacity,
    Churn,
    Idle,
    Sizes,
    Bursts,
    Skew,
}

impl ValueEnum for Suite {
    fn value_variants<'a>() -> &'a [Self] {
        &Suite::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.defaults().help))
    }
}

/// What a suite is when the command line does not say otherwise.
#[derive(Debug)]
struct Defaults {
    /// As `--suite` and the run directory name it.
    name: &'static str,
    /// For people, in the report and `--list`.
    title: &'static str,
    /// What `--help` says of it.
    help: &'static str,
    /// Seconds of the measured window of each point, unless `--duration` says otherwise.
    duration: f64,
    /// Seconds of load before it, unless `--warmup` says otherwise.
    warmup: f64,
    /// The connection counts to sweep, unless `--conns` says otherwise.
    conns: &'static [usize],
    /// Runs of each point, unless `--repeat` says otherwise.
    repeats: u32,
    /// What `--rate` sets in this suite, for `--help` and `--list`.
    rate_meaning: &'static str,
    /// Servers (`--servers` entries) that join the default ones in this suite.
    extra_servers: &'static [&'static str],
    /// What `--help` says of the servers this suite adds to the default ones (its extra
    /// servers and its peer), if any.
    default_servers_help: Option<&'static str>,
}

/// A suite that takes no `--rate`.
const NO_RATE: &str = "not used";

impl Suite {
    pub(crate) const ALL: [Suite; 15] = [
        Suite::Quick,
        Suite::EmperEcho,
        Suite::ChatCpu,
        Suite::ChatRoom,
        Suite::Memory,
        Suite::Search,
        Suite::Kv,
        Suite::Http,
        Suite::Scaling,
        Suite::Capacity,
        Suite::Churn,
        Suite::Idle,
        Suite::Sizes,
        Suite::Bursts,
        Suite::Skew,
    ];

    fn defaults(self) -> &'static Defaults {
        match self {
            Suite::Quick => &quick::DEFAULTS,
            Suite::EmperEcho => &emper_echo::DEFAULTS,
            Suite::ChatCpu => &chat_cpu::DEFAULTS,
            Suite::ChatRoom => &chat_room::DEFAULTS,
            Suite::Memory => &memory::DEFAULTS,
            Suite::Search => &search::DEFAULTS,
            Suite::Kv => &kv::DEFAULTS,
            Suite::Http => &http::DEFAULTS,
            Suite::Scaling => &scaling::DEFAULTS,
            Suite::Capacity => &capacity::DEFAULTS,
            Suite::Churn => &churn::DEFAULTS,
            Suite::Idle => &idle::DEFAULTS,
            Suite::Sizes => &sizes::DEFAULTS,
            Suite::Bursts => &bursts::DEFAULTS,
            Suite::Skew => &skew::DEFAULTS,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        self.defaults().name
    }

    pub(crate) fn title(self) -> &'static str {
        self.defaults().title
    }

    /// Runs of each point, unless `--repeat` says otherwise: quick's comparisons come with
    /// intervals and a significance test, which need repeats; the papers' long sweeps run once.
    pub(crate) fn default_repeats(self) -> u32 {
        self.defaults().repeats
    }

    /// What `--rate` sets in this suite, for `--help` and `--list`.
    pub(crate) fn rate_meaning(self) -> &'static str {
        self.defaults().rate_meaning
    }

    /// Servers that join the default ones when this suite runs and `--servers` is not given
    /// (each where its base server is among the defaults).
    pub(crate) fn extra_servers(self) -> &'static [&'static str] {
        self.defaults().extra_servers
    }

    /// What `--help` says of the servers this suite adds to the default ones, if any.
    pub(crate) fn default_servers_help(self) -> Option<&'static str> {
        self.defaults().default_servers_help
    }

    /// Whether the peers of `other` (redis-server for kv) join this suite: its own, the
    /// capacity suite's kv and http, the kv points of churn, sizes and skew.
    pub(crate) fn runs_peers_of(self, other: Suite) -> bool {
        self == other
            || match self {
                Suite::Capacity => matches!(other, Suite::Kv | Suite::Http),
                Suite::Churn | Suite::Sizes | Suite::Skew => other == Suite::Kv,
                _ => false,
            }
    }

    /// The server this suite's verdicts compare every other with, where it is in the run,
    /// named in advance (never picked by the medians it is then tested against): the
    /// kernel's floor for echo (issue 62's echo workloads too), redis-server for kv (and
    /// skew), nginx for http, the paper's fiber program for search.
    pub(crate) fn own_reference(self) -> Option<&'static str> {
        match self {
            Suite::Quick | Suite::Churn | Suite::Idle | Suite::Sizes | Suite::Bursts => {
                Some("floor-epoll")
            }
            Suite::Kv | Suite::Skew => Some("redis"),
            Suite::Http => Some("nginx"),
            Suite::Search => Some("search-fiber"),
            _ => None,
        }
    }

    /// The reference of this suite's verdicts among `servers` (the run's, in `--servers`'
    /// order): `explicit` (`--reference`) where it is one of them, else
    /// [`Suite::own_reference`] where it is, else the first server.
    pub(crate) fn reference(self, servers: &[String], explicit: Option<&str>) -> Option<String> {
        let here = |name: &str| servers.iter().any(|s| s == name);
        explicit
            .filter(|&e| here(e))
            .or(self.own_reference().filter(|&o| here(o)))
            .map(str::to_string)
            .or_else(|| servers.first().cloned())
    }

    /// What `--list` says of the suite: `points` is what [`Suite::points`] gives with the
    /// command line's overrides, `repeats` the runs of each, `servers` how many servers run
    /// by default.
    pub(crate) fn list_text(self, points: &[Point], repeats: usize, servers: usize) -> String {
        if self == Suite::Search {
            return search::list_text(repeats);
        }
        if self == Suite::Capacity {
            return capacity::list_text(points, repeats, servers);
        }
        let secs: f64 = points.iter().map(Point::estimate_secs).sum::<f64>()
            * repeats as f64
            * servers.max(1) as f64;
        format!(
            "  {:<11} {} ({} points a server, about {:.0} min with the {} default servers)\n              --rate: {}",
            self.name(),
            self.title(),
            points.len(),
            secs / 60.0,
            servers,
            self.rate_meaning()
        )
    }

    /// The points of the suite, in the order they run.
    pub(crate) fn points(self, o: &Overrides) -> Vec<Point> {
        let d = self.defaults();
        let cx = Sweep {
            suite: self,
            o,
            conns: o.conns.clone().unwrap_or_else(|| d.conns.to_vec()),
            duration: o.duration.unwrap_or(d.duration),
            warmup: d.warmup,
        };
        match self {
            Suite::Quick => quick::points(&cx),
            Suite::EmperEcho => emper_echo::points(&cx),
            Suite::ChatCpu => chat_cpu::points(&cx),
            Suite::ChatRoom => chat_room::points(&cx),
            Suite::Memory => memory::points(&cx),
            Suite::Search => search::points(&cx),
            Suite::Kv => kv::points(&cx),
            Suite::Http => http::points(&cx),
            Suite::Scaling => scaling::points(&cx),
            Suite::Capacity => capacity::points(&cx),
            Suite::Churn => churn::points(&cx),
            Suite::Idle => idle::points(&cx),
            Suite::Sizes => sizes::points(&cx),
            Suite::Bursts => bursts::points(&cx),
            Suite::Skew => skew::points(&cx),
        }
    }
}

/// What a suite's points are made from: the command line's overrides over its defaults.
#[derive(Debug)]
struct Sweep<'a> {
    suite: Suite,
    o: &'a Overrides,
    conns: Vec<usize>,
    duration: f64,
    /// The suite's default warmup (see [`Sweep::warmup_for`]).
    warmup: f64,
}

impl Sweep<'_> {
    /// A server given thousands of connections at once may still be setting them up (a
    /// thread or a process each) when the clock would start: the warmup grows with them.
    fn warmup_for(&self, conns: usize, default: f64) -> f64 {
        self.o.warmup.unwrap_or(default.max(conns as f64 / 2500.0))
    }

    /// A point of the suite, its warmup the suite's.
    #[allow(clippy::too_many_arguments)] // Every field of a point but its suite and warmup.
    fn point(
        &self,
        series: &str,
        id: String,
        label: String,
        conns: usize,
        workload: Workload,
        load: Load,
        stop: Stop,
    ) -> Point {
        Point {
            suite: self.suite,
            series: series.to_string(),
            id,
            label,
            conns,
            workload,
            load,
            stop,
            warmup: self.warmup_for(conns, self.warmup),
            workers: None,
            arrivals: self.o.arrivals.unwrap_or(if self.suite == Suite::Capacity {
                Arrivals::Poisson
            } else {
                Arrivals::Uniform
            }),
            seed: None,
            shape: Shape::default(),
        }
    }

    /// [`Sweep::point`] with `shape`, its warmup counting the idle connections too.
    #[allow(clippy::too_many_arguments)] // Every field of a point but its suite and warmup.
    fn shaped(
        &self,
        series: &str,
        id: String,
        label: String,
        conns: usize,
        (workload, shape): (Workload, Shape),
        load: Load,
        stop: Stop,
    ) -> Point {
        Point {
            shape,
            warmup: self.warmup_for(shape.total_conns(conns), self.warmup),
            ..self.point(series, id, label, conns, workload, load, stop)
        }
    }
}

/// Closed loop (one message in flight per connection) or open loop at a fixed total rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum Load {
    Closed,
    Open { rate: f64 },
}

/// When a point's measured window ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Stop {
    /// After this many seconds.
    Duration(f64),
    /// After this many replies per connection.
    Requests(u64),
}

/// One load point of a suite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Point {
    pub(crate) suite: Suite,
    /// The curve the point belongs to (`closed`, `open`, `compute-200`, ...): a plot draws one
    /// line per server and series.
    pub(crate) series: String,
    /// File-name-safe and unique within the suite.
    pub(crate) id: String,
    /// For people: `1000 conns`, `1000 conns @ 20000/s`.
    pub(crate) label: String,
    pub(crate) conns: usize,
    pub(crate) workload: Workload,
    pub(crate) load: Load,
    pub(crate) stop: Stop,
    pub(crate) warmup: f64,
    /// The server's workers at this point (`--workers`), or `None` for the run's
    /// (`Placement::workers`): the scaling suite gives each point its own.
    pub(crate) workers: Option<usize>,
    /// How the open loop's sends are spaced (`--arrivals`; Poisson in the capacity suite).
    pub(crate) arrivals: Arrivals,
    /// Poisson arrivals: the seed of the gaps (loadgen's `--seed`), or `None` for loadgen's
    /// own. The capacity suite gives each probe of a search its own, so that its repeats draw
    /// new gaps while every server's nth probe draws the same.
    pub(crate) seed: Option<u64>,
    /// Churn, idle connections, a mix of sizes, key skew (issue 62's knobs); the default
    /// changes nothing.
    pub(crate) shape: Shape,
}

impl Point {
    /// The x value of the point on its series' plot: workers for a point with its own worker
    /// count, room size for rooms, a bursts point's share of capacity in percent, else
    /// connections.
    pub(crate) fn x(&self) -> f64 {
        if let Some(w) = self.workers {
            return w as f64;
        }
        match (self.suite, self.workload, self.load) {
            (_, Workload::ChatRoom { room_size }, _) => room_size as f64,
            (Suite::Sizes, Workload::Echo { msg_size, .. }, _) => {
                self.shape.mean_size().unwrap_or(msg_size as f64)
            }
            (Suite::Bursts, _, _) => self.shape.capacity_share.map_or(0.0, |s| 100.0 * s),
            _ => self.shape.total_conns(self.conns) as f64,
        }
    }

    /// A guess of the seconds the point takes, start and stop included, for the ETA.
    pub(crate) fn estimate_secs(&self) -> f64 {
        let run = match self.stop {
            Stop::Duration(d) => d,
            Stop::Requests(k) => (self.conns as f64 * k as f64
                / expected_rate(self.workload.compute_us(), 1))
            .max(0.1),
        };
        // Measured on 2 cores: about half a second to start and stop a server and loadgen and
        // to wait for quiet CPUs, more with thousands of connections to open and close.
        0.5 + self.shape.total_conns(self.conns) as f64 / 4000.0 + self.warmup + run
    }
}

/// What the command line changes in a suite.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Overrides {
    pub(crate) conns: Option<Vec<usize>>,
    pub(crate) duration: Option<f64>,
    pub(crate) warmup: Option<f64>,
    pub(crate) rate: Option<f64>,
    /// Server workers: the Little's law bound of emper-echo depends on them.
    pub(crate) workers: usize,
    /// The server's CPUs (`--server-cpus`): the scaling suite's worker counts go up to them.
    pub(crate) server_cpus: Option<cpulist::CpuList>,
    /// How open-loop sends are spaced (`--arrivals`), when given.
    pub(crate) arrivals: Option<Arrivals>,
}

/// `1 conn`, `10 conns`.
fn conns_label(c: usize) -> String {
    if c == 1 {
        "1 conn".into()
    } else {
        format!("{c} conns")
    }
}

/// A conservative echo rate of one worker, for deciding whether 2500 echoes per connection
/// fit in the time budget: with work per echo, 80% of the Little's law bound.
fn expected_rate(compute_us: u64, workers: usize) -> f64 {
    if compute_us == 0 {
        20_000.0
    } else {
        0.8 * workers as f64 * 1e6 / compute_us as f64
    }
}

/// Parses `--conns`: a comma-separated list of positive counts.
pub(crate) fn parse_conns(s: &str) -> Result<Vec<usize>, String> {
    let v: Result<Vec<usize>, String> = s
        .split(',')
        .map(|t| match t.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "`{t}` is not a connection count (write a list like 1,10,100)"
            )),
        })
        .collect();
    v
}

#[cfg(test)]
mod tests;
