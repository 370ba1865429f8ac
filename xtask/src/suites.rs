//! The benchmark suites: which load points each one runs, for every server. A point is one
//! server start, one loadgen run against it, and one row of the summary.
//!
//! | suite        | what                                                                   |
//! |--------------|------------------------------------------------------------------------|
//! | `quick`      | echo 16 B closed loop at 1..1000 conns, plus two open-loop points      |
//! | `emper-echo` | the io_uring paper's Figures 5 to 8: 1..10,000 conns, 0 and 200 µs work |
//! | `chat-cpu`   | the C-versus-Go paper's Figure 3: chat ingest at 1 Mbit/s per conn     |
//! | `chat-room`  | fan-out delivery latency and completeness, rooms of 2 to 1000          |
//! | `memory`     | memory per idle connection at 1,000 and 10,000 conns                   |
//! | `kv`         | RESP GET and SET at 1, 50, 1000 conns, pipeline 1 and 16, beside Redis |

use clap::ValueEnum;
use serde::Serialize;

/// A suite, as `--suite` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Suite {
    /// Echo 16 B, closed loop at 1, 10, 100, 1000 connections, and two open-loop points (a
    /// rate every server sustains, and one near the slowest one's saturation): CPU per echo
    /// and latency at equal load; 5 rotated repeats, enough for the significance test to
    /// tell servers apart (about 6 min).
    Quick,
    /// The io_uring paper's echo benchmark (Figures 5 to 8): 1 to 10,000 connections, 2500
    /// echoes each or a bounded duration, without and with 200 µs of work per echo.
    EmperEcho,
    /// The C-versus-Go paper's Figure 3: chat ingest at 1 Mbit/s per connection, 1 to 64
    /// connections, 60 s a point: CPU mean and coefficient of variation.
    ChatCpu,
    /// Chat rooms of 2 to 1000 members: fan-out delivery latency and completeness.
    ChatRoom,
    /// Memory per idle connection at 1,000 and 10,000 connections.
    Memory,
    /// The io_uring paper's file-content search (Figure 9): every search program and
    /// ripgrep on one tree, 15 rotated runs each; runs alone, by the `search` module.
    Search,
    /// The Redis subset: GET and SET at 1, 50 and 1000 connections, pipeline 1 and 16,
    /// driven by redis-benchmark and by loadgen, every server beside redis-server itself.
    Kv,
}

impl Suite {
    pub(crate) const ALL: [Suite; 7] = [
        Suite::Quick,
        Suite::EmperEcho,
        Suite::ChatCpu,
        Suite::ChatRoom,
        Suite::Memory,
        Suite::Search,
        Suite::Kv,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Suite::Quick => "quick",
            Suite::EmperEcho => "emper-echo",
            Suite::ChatCpu => "chat-cpu",
            Suite::ChatRoom => "chat-room",
            Suite::Memory => "memory",
            Suite::Search => "search",
            Suite::Kv => "kv",
        }
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Suite::Quick => "Echo, 16-byte messages",
            Suite::EmperEcho => "Echo as in the io_uring (EMPER) paper",
            Suite::ChatCpu => "Chat ingest CPU as in the C-versus-Go paper",
            Suite::ChatRoom => "Chat room fan-out",
            Suite::Memory => "Memory per idle connection",
            Suite::Search => "File-content search as in the io_uring (EMPER) paper's Figure 9",
            Suite::Kv => "A Redis subset, GET and SET, beside redis-server",
        }
    }

    /// Seconds of the measured window of each point, unless `--duration` says otherwise.
    fn default_duration(self) -> f64 {
        match self {
            // Short points, so that 5 rotated repeats fit in about 6 minutes: the repeats,
            // not long windows, are what give an interval and a test. This is the open
            // points' window; the closed ones take `QUICK_CLOSED_SECS`.
            Suite::Quick => 0.75,
            Suite::EmperEcho | Suite::ChatRoom => 10.0,
            Suite::ChatCpu => 60.0,
            Suite::Memory => 3.0,
            // A search is timed whole, not in a window.
            Suite::Search => 0.0,
            // 24 points a server: short ones, as quick's.
            Suite::Kv => 1.5,
        }
    }

    fn default_warmup(self) -> f64 {
        match self {
            Suite::Quick => 0.35,
            Suite::Kv => 0.5,
            Suite::ChatCpu => 2.0,
            _ => 1.0,
        }
    }

    fn default_conns(self) -> Vec<usize> {
        match self {
            Suite::Quick => vec![1, 10, 100, 1000],
            Suite::EmperEcho => vec![1, 3, 10, 30, 100, 300, 1000, 3000, 5000, 10_000],
            Suite::ChatCpu => vec![1, 2, 4, 8, 16, 32, 64],
            Suite::ChatRoom => vec![1000],
            Suite::Memory => vec![1000, 10_000],
            Suite::Search => vec![],
            // The article's redis-benchmark default (50) and the two ends.
            Suite::Kv => vec![1, 50, 1000],
        }
    }

    /// Runs of each point, unless `--repeat` says otherwise: quick's comparisons come with
    /// intervals and a significance test, which need repeats; the papers' long sweeps run once.
    /// Quick takes 5: the Mann-Whitney test of 3 + 3 repeats cannot go below p = 0.10, of
    /// 4 + 4 only to 0.029 with no overlap at all, while 5 + 5 reaches 0.008 and still says
    /// p < 0.05 with two of the 25 pairs out of order.
    pub(crate) fn default_repeats(self) -> u32 {
        match self {
            Suite::Quick => 5,
            // The paper's count.
            Suite::Search => 15,
            _ => 1,
        }
    }

    /// What `--rate` sets in this suite, for `--help` and `--list`.
    pub(crate) fn rate_meaning(self) -> &'static str {
        match self {
            Suite::Quick => {
                "echoes/s of the first open-loop point (default 20000); the second runs at 2.5 times it"
            }
            Suite::ChatRoom => "MSG deliveries/s in total (default 5000)",
            _ => "not used",
        }
    }
}

/// What the clients send.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum Workload {
    /// Echo messages of `msg_size` bytes; the server spins `compute_us` per message.
    Echo { msg_size: usize, compute_us: u64 },
    /// Chat `SAY`s at `byte_rate` bytes/s per connection, every `ACK` awaited.
    ChatIngest { byte_rate: f64 },
    /// Chat rooms of `room_size` members; every member must get every message.
    ChatRoom { room_size: usize },
    /// Echo connections that are open and all but silent.
    Idle,
    /// RESP `GET`s (`get`) or `SET`s of [`KV_VALUE_SIZE`]-byte values over [`KV_KEYS`] keys,
    /// `pipeline` in flight per connection, sent by `driver`.
    Kv {
        get: bool,
        pipeline: usize,
        driver: KvDriver,
    },
}

/// Who sends the kv requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum KvDriver {
    /// loadgen kv: latency from its histograms, every reply checked.
    Loadgen,
    /// redis-benchmark `--csv`: the client nobody here wrote, as the article ran it.
    RedisBenchmark,
}

impl KvDriver {
    pub(crate) fn name(self) -> &'static str {
        match self {
            KvDriver::Loadgen => "loadgen",
            KvDriver::RedisBenchmark => "redis-benchmark",
        }
    }
}

impl Workload {
    /// The `--proto` the server serves.
    pub(crate) fn proto(self) -> &'static str {
        match self {
            Workload::Echo { .. } | Workload::Idle => "echo",
            Workload::ChatIngest { .. } | Workload::ChatRoom { .. } => "chat",
            Workload::Kv { .. } => "kv",
        }
    }

    pub(crate) fn compute_us(self) -> u64 {
        match self {
            Workload::Echo { compute_us, .. } => compute_us,
            _ => 0,
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
}

impl Point {
    /// The x value of the point on its series' plot: room size for rooms, else connections.
    pub(crate) fn x(&self) -> f64 {
        match self.workload {
            Workload::ChatRoom { room_size } => room_size as f64,
            _ => self.conns as f64,
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
        0.5 + self.conns as f64 / 4000.0 + self.warmup + run
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
}

/// The paper's echoes per connection.
pub(crate) const EMPER_REQUESTS: u64 = 2500;
/// The paper's work per echo in Figures 6 and 7.
pub(crate) const EMPER_COMPUTE_US: u64 = 200;
const DEFAULT_OPEN_RATE: f64 = 20_000.0;
/// The measured window of quick's closed-loop points, unless `--duration` says otherwise:
/// shorter than the open points', whose CPU per echo is what the test compares; the closed
/// points' throughput is shown with its interval only.
const QUICK_CLOSED_SECS: f64 = 0.4;
/// Their warmup, unless `--warmup` says otherwise (at least a second per 2500 connections, as
/// every point's).
const QUICK_CLOSED_WARMUP: f64 = 0.2;
/// quick's second open-loop rate, as a multiple of the first: 50,000/s by default, near what
/// the slowest server (a process per connection) completes at 1000 connections on one core.
pub(crate) const HIGH_RATE_FACTOR: f64 = 2.5;
/// MSG deliveries a second in chat-room: what a process-per-connection server, which pays a
/// file lock and an inotify wake-up per delivery, still keeps up with on one core.
const DEFAULT_DELIVERY_RATE: f64 = 5_000.0;
const ROOM_SIZES: [usize; 4] = [2, 10, 100, 1000];
/// 1 Mbit/s, the C-versus-Go paper's load per connection.
pub(crate) const CHAT_BYTE_RATE: f64 = 125_000.0;
/// Bytes of each chat `SAY` line loadgen sends, newline included.
pub(crate) const CHAT_LINE: usize = 64;
/// The kv key space: redis-benchmark's `-r 100000`, as the anchor ran it.
pub(crate) const KV_KEYS: u64 = 100_000;
/// The kv value size, for both drivers (`-d 32`): room for loadgen's check of every value.
pub(crate) const KV_VALUE_SIZE: usize = 32;
/// The kv pipeline depths: none, and redis-benchmark's `-P 16` of the anchor.
pub(crate) const KV_PIPELINES: [usize; 2] = [1, 16];

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

impl Suite {
    /// The points of the suite, in the order they run.
    pub(crate) fn points(self, o: &Overrides) -> Vec<Point> {
        let conns = o.conns.clone().unwrap_or_else(|| self.default_conns());
        let duration = o.duration.unwrap_or(self.default_duration());
        // A server given thousands of connections at once may still be setting them up (a
        // thread or a process each) when the clock would start: the warmup grows with them.
        let default_warmup = self.default_warmup();
        let warmup_for = |c: usize| o.warmup.unwrap_or(default_warmup.max(c as f64 / 2500.0));
        let point = |series: &str, id: String, label: String, conns, workload, load, stop| Point {
            suite: self,
            series: series.to_string(),
            id,
            label,
            conns,
            workload,
            load,
            stop,
            warmup: warmup_for(conns),
        };
        let echo16 = Workload::Echo {
            msg_size: 16,
            compute_us: 0,
        };
        let mut out = Vec::new();
        match self {
            Suite::Quick => {
                let closed = o.duration.unwrap_or(QUICK_CLOSED_SECS);
                for &c in &conns {
                    out.push(Point {
                        warmup: o
                            .warmup
                            .unwrap_or(QUICK_CLOSED_WARMUP.max(c as f64 / 2500.0)),
                        ..point(
                            "closed",
                            format!("closed-c{c}"),
                            conns_label(c),
                            c,
                            echo16,
                            Load::Closed,
                            Stop::Duration(closed),
                        )
                    });
                }
                let c = conns.iter().copied().max().unwrap_or(1000);
                let low = o.rate.unwrap_or(DEFAULT_OPEN_RATE);
                for rate in [low, low * HIGH_RATE_FACTOR] {
                    out.push(point(
                        "open",
                        format!("open-c{c}-r{rate}"),
                        format!("{} @ {rate}/s", conns_label(c)),
                        c,
                        echo16,
                        Load::Open { rate },
                        Stop::Duration(duration),
                    ));
                }
            }
            Suite::EmperEcho => {
                for compute_us in [0, EMPER_COMPUTE_US] {
                    let series = if compute_us == 0 {
                        "no-work".to_string()
                    } else {
                        format!("work-{compute_us}us")
                    };
                    for &c in &conns {
                        // The paper's 2500 echoes a connection, unless that would take longer
                        // than the duration budget; then the budget bounds the point.
                        let fits = o.duration.is_none()
                            && c as f64 * EMPER_REQUESTS as f64
                                / expected_rate(compute_us, o.workers.max(1))
                                <= duration;
                        let (stop, mut how) = if fits {
                            (
                                Stop::Requests(EMPER_REQUESTS),
                                "2500 echoes/conn".to_string(),
                            )
                        } else {
                            (Stop::Duration(duration), format!("{duration} s"))
                        };
                        if compute_us > 0 {
                            how = format!("{compute_us} µs work, {how}");
                        }
                        out.push(point(
                            &series,
                            format!("{series}-c{c}"),
                            format!("{}, {how}", conns_label(c)),
                            c,
                            Workload::Echo {
                                msg_size: 16,
                                compute_us,
                            },
                            Load::Closed,
                            stop,
                        ));
                    }
                }
            }
            Suite::ChatCpu => {
                for &c in &conns {
                    out.push(point(
                        "ingest",
                        format!("ingest-c{c}"),
                        format!("{} × 1 Mbit/s", conns_label(c)),
                        c,
                        Workload::ChatIngest {
                            byte_rate: CHAT_BYTE_RATE,
                        },
                        Load::Closed,
                        Stop::Duration(duration),
                    ));
                }
            }
            Suite::ChatRoom => {
                let deliveries = o.rate.unwrap_or(DEFAULT_DELIVERY_RATE);
                for &c in &conns {
                    // loadgen deals the connections into rooms of equal size.
                    for s in ROOM_SIZES.into_iter().filter(|&s| s <= c && c % s == 0) {
                        let rate = (deliveries / (s - 1) as f64).max(1.0);
                        out.push(point(
                            "rooms",
                            format!("room-s{s}-c{c}"),
                            format!("rooms of {s}, {}", conns_label(c)),
                            c,
                            Workload::ChatRoom { room_size: s },
                            Load::Open { rate },
                            Stop::Duration(duration),
                        ));
                    }
                }
            }
            Suite::Kv => {
                for driver in [KvDriver::RedisBenchmark, KvDriver::Loadgen] {
                    for pipeline in KV_PIPELINES {
                        for get in [false, true] {
                            let op = if get { "get" } else { "set" };
                            let series = format!("{}-{op}-p{pipeline}", driver.name());
                            for &c in &conns {
                                out.push(point(
                                    &series,
                                    format!("{series}-c{c}"),
                                    format!(
                                        "{} {}, -P {pipeline}, {}",
                                        op.to_uppercase(),
                                        conns_label(c),
                                        driver.name()
                                    ),
                                    c,
                                    Workload::Kv {
                                        get,
                                        pipeline,
                                        driver,
                                    },
                                    Load::Closed,
                                    Stop::Duration(duration),
                                ));
                            }
                        }
                    }
                }
            }
            Suite::Memory => {
                for &c in &conns {
                    out.push(point(
                        "idle",
                        format!("idle-c{c}"),
                        format!("{c} idle conn{}", if c == 1 { "" } else { "s" }),
                        c,
                        Workload::Idle,
                        // One message a second over all connections: they are open and
                        // checked, and all but silent.
                        Load::Open { rate: 1.0 },
                        Stop::Duration(duration),
                    ));
                }
            }
            // No loadgen points: the `search` module runs the programs itself.
            Suite::Search => {}
        }
        out
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
mod tests {
    use super::*;

    fn o() -> Overrides {
        Overrides {
            workers: 1,
            ..Overrides::default()
        }
    }

    #[test]
    fn quick_has_four_closed_points_and_two_open() {
        let p = Suite::Quick.points(&o());
        let conns: Vec<usize> = p.iter().map(|p| p.conns).collect();
        assert_eq!(conns, [1, 10, 100, 1000, 1000, 1000]);
        assert_eq!(p[4].load, Load::Open { rate: 20_000.0 });
        assert_eq!(p[5].load, Load::Open { rate: 50_000.0 });
        assert!(p[..4].iter().all(|p| p.stop == Stop::Duration(0.4)));
        assert!(p[4..].iter().all(|p| p.stop == Stop::Duration(0.75)));
        assert_eq!(p[0].warmup, 0.2);
        assert_eq!(p[3].warmup, 0.4);
        assert_eq!(p[4].warmup, 0.4);
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        // A whole quick run of the nine default servers and its 5 repeats stays near six
        // minutes.
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>()
            * 9.0
            * f64::from(Suite::Quick.default_repeats());
        assert!(secs < 400.0, "{secs}");
    }

    #[test]
    fn overrides_replace_conns_duration_and_rate() {
        let ov = Overrides {
            conns: Some(vec![1, 10]),
            duration: Some(1.0),
            warmup: Some(0.0),
            rate: Some(500.0),
            workers: 1,
        };
        let p = Suite::Quick.points(&ov);
        assert_eq!(p.len(), 4);
        assert_eq!(p[2].conns, 10);
        assert_eq!(p[2].load, Load::Open { rate: 500.0 });
        assert_eq!(p[3].load, Load::Open { rate: 1250.0 });
        assert!(
            p.iter()
                .all(|p| p.stop == Stop::Duration(1.0) && p.warmup == 0.0)
        );
    }

    #[test]
    fn emper_echo_uses_2500_echoes_where_they_fit() {
        let p = Suite::EmperEcho.points(&o());
        assert_eq!(p.len(), 20);
        let first = &p[0];
        assert_eq!((first.conns, first.stop), (1, Stop::Requests(2500)));
        let big = p.iter().find(|p| p.conns == 10_000).unwrap();
        assert_eq!(big.stop, Stop::Duration(10.0));
        assert_eq!(big.warmup, 4.0);
        assert!(
            p.iter()
                .any(|p| p.label == "10 conns, 200 µs work, 2500 echoes/conn")
        );
        // With 200 µs a echo and one worker, 10 connections would take 6 s of 10: they fit;
        // 30 would not.
        let work: Vec<&Point> = p
            .iter()
            .filter(|p| p.workload.compute_us() == 200)
            .collect();
        assert_eq!(work[2].stop, Stop::Requests(2500));
        assert_eq!(work[3].stop, Stop::Duration(10.0));
        // An explicit duration bounds every point.
        let short = Suite::EmperEcho.points(&Overrides {
            duration: Some(2.0),
            ..o()
        });
        assert!(short.iter().all(|p| p.stop == Stop::Duration(2.0)));
    }

    #[test]
    fn chat_room_sizes_divide_the_connections() {
        let p = Suite::ChatRoom.points(&o());
        let sizes: Vec<f64> = p.iter().map(Point::x).collect();
        assert_eq!(sizes, [2.0, 10.0, 100.0, 1000.0]);
        assert_eq!(p[0].load, Load::Open { rate: 5_000.0 });
        assert_eq!(
            p[3].load,
            Load::Open {
                rate: 5_000.0 / 999.0
            }
        );
        let small = Suite::ChatRoom.points(&Overrides {
            conns: Some(vec![20]),
            ..o()
        });
        assert_eq!(small.iter().map(Point::x).collect::<Vec<_>>(), [2.0, 10.0]);
    }

    #[test]
    fn chat_cpu_and_memory() {
        let p = Suite::ChatCpu.points(&o());
        assert_eq!(p.len(), 7);
        assert_eq!(p[6].conns, 64);
        assert_eq!(p[0].stop, Stop::Duration(60.0));
        assert_eq!(p[0].workload.proto(), "chat");
        let m = Suite::Memory.points(&o());
        assert_eq!(
            m.iter().map(|p| p.conns).collect::<Vec<_>>(),
            [1000, 10_000]
        );
    }

    #[test]
    fn kv_crosses_drivers_pipelines_ops_and_conns() {
        let p = Suite::Kv.points(&o());
        assert_eq!(p.len(), 2 * 2 * 2 * 3);
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        assert!(p.iter().all(|p| p.workload.proto() == "kv"));
        let first = &p[0];
        assert_eq!(first.series, "redis-benchmark-set-p1");
        assert_eq!(first.label, "SET 1 conn, -P 1, redis-benchmark");
        assert_eq!(
            first.workload,
            Workload::Kv {
                get: false,
                pipeline: 1,
                driver: KvDriver::RedisBenchmark
            }
        );
        assert!(p.iter().any(|p| p.id == "loadgen-get-p16-c1000"));
        // A quick look: two connection counts and short points.
        let quick = Suite::Kv.points(&Overrides {
            conns: Some(vec![1, 50]),
            duration: Some(0.5),
            ..o()
        });
        assert_eq!(quick.len(), 16);
        assert!(quick.iter().all(|p| p.stop == Stop::Duration(0.5)));
    }

    #[test]
    fn conns_lists() {
        assert_eq!(parse_conns("1,10, 100"), Ok(vec![1, 10, 100]));
        assert!(parse_conns("0").is_err());
        assert!(parse_conns("1,,2").is_err());
        assert!(parse_conns("ten").is_err());
    }
}
