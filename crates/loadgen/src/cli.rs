//! The command line, as scripts and the xtask rely on it:
//!
//! ```text
//! loadgen echo|chat --addr HOST:PORT --conns N [--msg-size 16|SIZE:WEIGHT,...] [--depth 1]
//!         [--requests K | --duration SECS] [--warmup SECS] [--rate MSGS_PER_SEC]
//!         [--arrivals uniform|poisson|onoff:ON_MS:OFF_MS|pareto:SHAPE] [--seed N]
//!         [--requests-per-conn R] [--idle-conns N]
//!         [--threads T] [--cpus LIST] [--json FILE] [--hist FILE] [--hgrm FILE]
//!         [--interval-log FILE]
//! loadgen chat ... [--profile ingest|room] [--room-size N] [--byte-rate BYTES_PER_SEC]
//! loadgen kv ... [--get-ratio 0.9 | --ratio SET:GET] [--keys 100000]
//!         [--key-dist uniform|zipf:S] [--value-size 32|SIZE:WEIGHT,...]
//! loadgen http ... [--path /plaintext|/json]     (--pipeline N is --depth N)
//! loadgen agent          (runs from a controller, on stdin and stdout: `loadgen::agent`)
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::account::CpuSource;
use crate::config::{Arrivals, ChatConfig, ChatProfile, Config, KvConfig, Stop, Workload};
use crate::dist::{KeyDist, Sizes};
use crate::error::Error;
use crate::http::HttpPath;

/// A latency-correct load generator for the ringside servers.
#[derive(Debug, Parser)]
#[command(name = "loadgen", version, about, long_about = None)]
pub struct Cli {
    /// The workload.
    #[command(subcommand)]
    pub workload: Command,
}

/// The workloads.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Echo: messages of --msg-size bytes, every reply checked byte for byte.
    Echo(Common),
    /// Chat: SAY lines at a byte rate (ingest) or in rooms with fan-out (room).
    Chat(ChatArgs),
    /// Kv: RESP GETs and SETs (a Redis subset), every reply checked against what the store
    /// must hold; the key space is stored before the clock starts when there are GETs.
    Kv(KvArgs),
    /// Http: `GET /plaintext` or `GET /json` (TechEmpower's tests), pipelined --depth (or
    /// --pipeline) deep; every response checked: status 200, a Date, the Content-Length and
    /// the exact body.
    Http(HttpArgs),
    /// Serve a controller (xtask, over ssh) on stdin and stdout: runs arrive as loadgen
    /// command lines, results leave as JSON lines (the control protocol of `loadgen::agent`).
    Agent,
}

/// Options of the http workload.
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Options every workload has (--msg-size excepted: a request is the same bytes every
    /// time).
    #[command(flatten)]
    pub common: Common,
    /// The path every request asks for.
    #[arg(long, value_enum, default_value_t = PathArg::Plaintext)]
    pub path: PathArg,
}

/// `--path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PathArg {
    /// `Hello, World!` as text/plain.
    #[value(name = "/plaintext", alias = "plaintext")]
    Plaintext,
    /// `{"message":"Hello, World!"}` as application/json.
    #[value(name = "/json", alias = "json")]
    Json,
}

/// Options of the kv workload.
#[derive(Debug, Args)]
pub struct KvArgs {
    /// Options every workload has (--msg-size excepted: kv has --value-size).
    #[command(flatten)]
    pub common: Common,
    /// The share of requests that are GETs, 0 to 1 (1: GET only, 0: SET only)
    /// [default: 0.9].
    #[arg(long)]
    pub get_ratio: Option<f64>,
    /// The mix as memtier's --ratio gives it, SET:GET: 1:10 is 10 GETs to a SET (instead of
    /// --get-ratio).
    #[arg(long, value_name = "SET:GET")]
    pub ratio: Option<String>,
    /// Keys key:000000000000 up to key:<KEYS - 1>, as redis-benchmark -r makes them.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// How each request's key is drawn: uniform, or zipf:S (Zipf's law of exponent S, the
    /// first key the hottest; YCSB's is 0.99).
    #[arg(long, value_name = "uniform|zipf:S", default_value = "uniform")]
    pub key_dist: String,
    /// Bytes per value (at least 16: a value carries its key, its writer and a sequence
    /// number), or a mix drawn per SET, as --msg-size takes it.
    #[arg(long, value_name = "SIZE[:WEIGHT],...", default_value = "32")]
    pub value_size: String,
}

/// Options of the chat workload.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Options every workload has.
    #[command(flatten)]
    pub common: Common,
    /// ingest: every connection SAYs at --byte-rate and awaits every ACK; room: connections
    /// JOIN rooms of --room-size members and SAY, and every member checks it receives every
    /// message once, in order.
    #[arg(long, value_enum, default_value_t = Profile::Ingest)]
    pub profile: Profile,
    /// Members per room (room profile).
    #[arg(long, default_value_t = 8)]
    pub room_size: usize,
    /// Bytes per second each connection sends (ingest profile); 125000 is 1 Mbit/s.
    #[arg(long, default_value_t = 125_000.0)]
    pub byte_rate: f64,
}

/// The chat profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// Constant byte rate per connection, ACKs counted.
    Ingest,
    /// Rooms with fan-out, deliveries checked.
    Room,
}

/// Options every workload has.
#[derive(Debug, Args)]
pub struct Common {
    /// The server, HOST:PORT.
    #[arg(long)]
    pub addr: String,
    /// Connections, all established before the clock starts.
    #[arg(long)]
    pub conns: usize,
    /// Bytes per echo message (at least 16: it carries a sequence number and the send time),
    /// or per chat SAY line, newline included [default: 16 for echo, 64 for chat]. Echo
    /// takes a list or a weighted mix too, each message's size drawn from it: 64,1024 (half
    /// each) or 64:95,64K:5 (95% 64 B, 5% 64 KiB); K and M are KiB and MiB.
    #[arg(long, value_name = "SIZE[:WEIGHT],...")]
    pub msg_size: Option<String>,
    /// Messages in flight per connection (requests pipelined, for kv and http).
    #[arg(long, visible_alias = "pipeline", default_value_t = 1)]
    pub depth: usize,
    /// Measured messages per connection (closed loop: the paper's 2500 echoes).
    #[arg(long, conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// Length of the measured window in seconds [default: 10].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Seconds of load before the measured window, not recorded.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Open loop: messages per second in total, spread evenly over the connections; latency
    /// counts from when each message was due. Without it, the loop is closed.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open loop: how sends are spaced: uniform (evenly, the connections taking turns),
    /// poisson (each connection a Poisson process, exponential gaps: how independent users
    /// arrive), onoff:ON_MS:OFF_MS (bursts: Poisson in on-periods at the rate that keeps the
    /// average, silence in off-periods) or pareto:SHAPE (generalized Pareto gaps of the
    /// rate's mean, SHAPE in (0, 1); mutilate's fb_ia is 0.154971). Latency counts from the
    /// due time whatever the arrivals.
    #[arg(
        long,
        value_name = "uniform|poisson|onoff:ON_MS:OFF_MS|pareto:SHAPE",
        default_value = "uniform"
    )]
    pub arrivals: String,
    /// Open loop, but for uniform: the seed of the gaps; the same seed draws the same
    /// schedule.
    #[arg(long, default_value_t = crate::config::DEFAULT_SEED)]
    pub seed: u64,
    /// Open loop: how a worker waits for its next send. spin: never sleeps, polls with a
    /// zero timeout (right where each worker has a CPU of its own, the default there); sleep:
    /// a nanosecond timer to 20 µs before the due time, then spins (the default where
    /// workers share CPUs or are not pinned).
    #[arg(long, value_name = "spin|sleep", value_parser = str::parse::<crate::Pacing>)]
    pub pacing: Option<crate::Pacing>,
    /// Requests a connection carries before the client closes it and opens a fresh one in
    /// its place (1: a connection per request). Without it, connections last the run.
    #[arg(long, value_name = "R")]
    pub requests_per_conn: Option<u64>,
    /// Connections opened beside the --conns active ones, before the clock starts, and
    /// held open and silent to the end.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub idle_conns: usize,
    /// Worker threads; connections are dealt to them round robin.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// CPUs to pin the workers to, as taskset -c takes them (0 or 0,2 or 0-3).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Write the summary as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the latency histogram, V2-encoded (HdrHistogram), to FILE.
    #[arg(long, value_name = "FILE")]
    pub hist: Option<PathBuf>,
    /// Write the latency percentile table (HdrHistogram .hgrm text, microseconds) to FILE.
    #[arg(long, value_name = "FILE")]
    pub hgrm: Option<PathBuf>,
    /// Write per-second latency histograms as an HdrHistogram interval log to FILE.
    #[arg(long, value_name = "FILE")]
    pub interval_log: Option<PathBuf>,
    /// Milliseconds without a reply (while replies are owed) that count as a stall.
    #[arg(long, default_value_t = 250)]
    pub stall_ms: u64,
    /// Seconds without a reply after which a connection is given up.
    #[arg(long, default_value_t = 10.0)]
    pub reply_timeout: f64,
    /// Seconds all connections may take to come up.
    #[arg(long, default_value_t = 10.0)]
    pub connect_timeout: f64,
    /// Seconds replies still owed are waited for after the window.
    #[arg(long, default_value_t = 2.0)]
    pub grace: f64,
    /// The server's pid: the CPU time of its process tree over the window (from
    /// /proc/PID/stat, exited threads and reaped children included) is reported per
    /// message beside the client's.
    #[arg(long, value_name = "PID", conflicts_with = "server_cgroup")]
    pub server_pid: Option<u32>,
    /// The server's cgroup directory (v2, or v1 cpuacct): its CPU counter, which keeps what
    /// every task that ever ran in it used, is read at the window's edges instead.
    #[arg(long, value_name = "DIR")]
    pub server_cgroup: Option<PathBuf>,
    /// The server's CPUs: their interrupt and softirq time over the window (/proc/stat) is
    /// reported beside the server's own.
    #[arg(long, value_name = "LIST")]
    pub server_cpus: Option<String>,
    /// No progress or warnings on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Where the results go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs {
    /// `--json`.
    pub json: Option<PathBuf>,
    /// `--hist`.
    pub hist: Option<PathBuf>,
    /// `--hgrm`.
    pub hgrm: Option<PathBuf>,
    /// `--interval-log`.
    pub interval_log: Option<PathBuf>,
}

fn secs(name: &str, v: f64) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| Error::Config(format!("--{name} must be a number of seconds, not {v}")))
}

/// `--msg-size` or `--value-size`: one size or a mix.
fn sizes(name: &str, text: &str) -> Result<Sizes, Error> {
    text.parse()
        .map_err(|e| Error::Config(format!("{name}: {e}")))
}

/// Kv's share of GETs: `--get-ratio`, or `--ratio SET:GET`, not both.
fn get_ratio(kv: &KvArgs) -> Result<f64, Error> {
    let Some(ratio) = &kv.ratio else {
        return Ok(kv.get_ratio.unwrap_or(KvConfig::default().get_ratio));
    };
    if kv.get_ratio.is_some() {
        return Err(Error::Config(
            "--ratio and --get-ratio both set the mix: give one".into(),
        ));
    }
    let bad = || {
        Error::Config(format!(
            "--ratio takes SET:GET, two counts not both 0 (1:10 is ten GETs to a SET), not {ratio:?}"
        ))
    };
    let (set, get) = ratio.split_once(':').ok_or_else(bad)?;
    let count = |v: &str| v.parse::<f64>().ok().filter(|c| c.is_finite() && *c >= 0.0);
    match (count(set), count(get)) {
        (Some(set), Some(get)) if set + get > 0.0 => Ok(get / (set + get)),
        _ => Err(bad()),
    }
}

/// What `--server-cgroup`, `--server-pid` and `--server-cpus` ask to be read of the server at
/// the window's edges.
fn server_side(common: &Common, cfg: &mut Config) -> Result<(), Error> {
    cfg.server = match (&common.server_cgroup, common.server_pid) {
        (Some(dir), _) => Some(CpuSource::Cgroup(dir.clone())),
        (None, Some(pid)) => Some(CpuSource::Tree(pid)),
        (None, None) => None,
    };
    if let Some(list) = &common.server_cpus {
        let cpus: cpulist::CpuList = list
            .parse()
            .map_err(|e| Error::Config(format!("--server-cpus: {e}")))?;
        cfg.server_cpus = cpus.as_slice().to_vec();
    }
    Ok(())
}

impl Cli {
    /// The run and the outputs the command line asks for.
    pub fn config(&self) -> Result<(Config, Outputs), Error> {
        let (common, workload) = match &self.workload {
            Command::Agent => {
                return Err(Error::Config(
                    "`loadgen agent` takes its runs on stdin, one control message a line".into(),
                ));
            }
            Command::Echo(c) => (c, Workload::Echo),
            Command::Kv(kv) => {
                if kv.common.msg_size.is_some() {
                    return Err(Error::Config(
                        "kv sizes its values with --value-size, not --msg-size".into(),
                    ));
                }
                (
                    &kv.common,
                    Workload::Kv(KvConfig {
                        get_ratio: get_ratio(kv)?,
                        keys: kv.keys,
                        key_dist: kv.key_dist.parse::<KeyDist>().map_err(Error::Config)?,
                    }),
                )
            }
            Command::Http(http) => {
                if http.common.msg_size.is_some() {
                    return Err(Error::Config(
                        "http requests have a fixed size: no --msg-size".into(),
                    ));
                }
                let path = match http.path {
                    PathArg::Plaintext => HttpPath::Plaintext,
                    PathArg::Json => HttpPath::Json,
                };
                (&http.common, Workload::Http(path))
            }
            Command::Chat(chat) => (
                &chat.common,
                Workload::Chat(ChatConfig {
                    profile: match chat.profile {
                        Profile::Ingest => ChatProfile::Ingest,
                        Profile::Room => ChatProfile::Room,
                    },
                    room_size: chat.room_size,
                    byte_rate: chat.byte_rate,
                }),
            ),
        };
        let mut cfg = match workload {
            Workload::Echo => Config::echo(&common.addr, common.conns),
            Workload::Chat(chat) => Config::chat(&common.addr, common.conns, chat),
            Workload::Kv(kv) => Config::kv(&common.addr, common.conns, kv),
            Workload::Http(path) => Config::http(&common.addr, common.conns, path),
        };
        if let Command::Kv(kv) = &self.workload {
            cfg.msg_size = sizes("--value-size", &kv.value_size)?;
        }
        if let Some(size) = &common.msg_size {
            cfg.msg_size = sizes("--msg-size", size)?;
        }
        cfg.requests_per_conn = common.requests_per_conn;
        cfg.idle_conns = common.idle_conns;
        cfg.depth = common.depth;
        cfg.stop = match (common.requests, common.duration) {
            (Some(k), _) => Stop::Requests(k),
            (None, Some(d)) => Stop::Duration(secs("duration", d)?),
            (None, None) => cfg.stop,
        };
        cfg.warmup = secs("warmup", common.warmup)?;
        cfg.rate = common.rate;
        cfg.arrivals = common.arrivals.parse::<Arrivals>().map_err(Error::Config)?;
        cfg.seed = common.seed;
        cfg.pacing = common.pacing;
        cfg.threads = common.threads;
        if let Some(list) = &common.cpus {
            let cpus: cpulist::CpuList = list
                .parse()
                .map_err(|e| Error::Config(format!("--cpus: {e}")))?;
            cfg.cpus = cpus.as_slice().to_vec();
        }
        cfg.stall = Duration::from_millis(common.stall_ms);
        cfg.reply_timeout = secs("reply-timeout", common.reply_timeout)?;
        cfg.connect_timeout = secs("connect-timeout", common.connect_timeout)?;
        cfg.grace = secs("grace", common.grace)?;
        if common.interval_log.is_some() {
            cfg.interval = Some(Duration::from_secs(1));
        }
        cfg.progress = !common.quiet;
        server_side(common, &mut cfg)?;
        cfg.validate()?;
        let outputs = Outputs {
            json: common.json.clone(),
            hist: common.hist.clone(),
            hgrm: common.hgrm.clone(),
            interval_log: common.interval_log.clone(),
        };
        Ok((cfg, outputs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<(Config, Outputs), String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        cli.config().map_err(|e| e.to_string())
    }

    #[test]
    fn echo_defaults() {
        let (cfg, out) =
            parse(&["loadgen", "echo", "--addr", "127.0.0.1:1", "--conns", "3"]).unwrap();
        assert_eq!(
            cfg,
            Config {
                progress: true,
                ..Config::echo("127.0.0.1:1", 3)
            }
        );
        assert_eq!(out, Outputs::default());
    }

    #[test]
    fn every_option_lands() {
        let (cfg, out) = parse(&[
            "loadgen",
            "echo",
            "--addr",
            "h:1",
            "--conns",
            "100",
            "--msg-size",
            "64",
            "--depth",
            "4",
            "--requests",
            "2500",
            "--warmup",
            "1.5",
            "--rate",
            "5000",
            "--threads",
            "2",
            "--cpus",
            "0,2-3",
            "--json",
            "s.json",
            "--hist",
            "l.hist",
            "--hgrm",
            "l.hgrm",
            "--interval-log",
            "l.hlog",
            "--quiet",
        ])
        .unwrap();
        assert_eq!(cfg.msg_size, Sizes::fixed(64));
        assert_eq!(cfg.depth, 4);
        assert_eq!(cfg.stop, Stop::Requests(2500));
        assert_eq!(cfg.warmup, Duration::from_millis(1500));
        assert_eq!(cfg.rate, Some(5000.0));
        assert_eq!(cfg.threads, 2);
        assert_eq!(cfg.cpus, [0, 2, 3]);
        assert_eq!(cfg.interval, Some(Duration::from_secs(1)));
        assert!(!cfg.progress);
        assert_eq!(out.json, Some(PathBuf::from("s.json")));
        assert_eq!(out.hist, Some(PathBuf::from("l.hist")));
        assert_eq!(out.hgrm, Some(PathBuf::from("l.hgrm")));
        assert_eq!(out.interval_log, Some(PathBuf::from("l.hlog")));
    }

    #[test]
    fn chat_options() {
        let (cfg, _) = parse(&[
            "loadgen",
            "chat",
            "--addr",
            "h:1",
            "--conns",
            "16",
            "--profile",
            "room",
            "--room-size",
            "4",
            "--duration",
            "2",
        ])
        .unwrap();
        assert_eq!(cfg.stop, Stop::Duration(Duration::from_secs(2)));
        assert_eq!(
            cfg.workload,
            Workload::Chat(ChatConfig {
                profile: ChatProfile::Room,
                room_size: 4,
                byte_rate: 125_000.0
            })
        );
    }

    #[test]
    fn kv_options() {
        let (cfg, _) = parse(&[
            "loadgen",
            "kv",
            "--addr",
            "h:1",
            "--conns",
            "50",
            "--get-ratio",
            "1",
            "--keys",
            "1000",
            "--value-size",
            "64",
            "--depth",
            "16",
        ])
        .unwrap();
        assert_eq!(
            cfg.workload,
            Workload::Kv(KvConfig {
                get_ratio: 1.0,
                keys: 1000,
                key_dist: KeyDist::Uniform,
            })
        );
        assert_eq!((cfg.msg_size.single(), cfg.depth), (Some(64), 16));
        let (cfg, _) = parse(&["loadgen", "kv", "--addr", "h:1", "--conns", "1"]).unwrap();
        assert_eq!(cfg.workload, Workload::Kv(KvConfig::default()));
        assert_eq!(cfg.msg_size, Sizes::fixed(32));
        let base = ["loadgen", "kv", "--addr", "h:1", "--conns", "1"];
        for extra in [
            &["--get-ratio", "1.5"][..],
            &["--get-ratio", "-0.1"],
            &["--keys", "0"],
            &["--keys", "5000000000"],
            &["--value-size", "15"],
            &["--value-size", "32,8"],
            &["--msg-size", "32"],
            &["--ratio", "1"],
            &["--ratio", "0:0"],
            &["--ratio", "1:x"],
            &["--ratio", "1:10", "--get-ratio", "0.5"],
            &["--key-dist", "zipf"],
            &["--key-dist", "zipf:0"],
        ] {
            let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
            assert!(parse(&args).is_err(), "{args:?} was accepted");
        }
    }

    #[test]
    fn bad_combinations_are_refused() {
        let base = ["loadgen", "echo", "--addr", "h:1", "--conns"];
        let bad: &[&[&str]] = &[
            &["0"],
            &["1", "--requests", "5", "--duration", "1"],
            &["1", "--msg-size", "8"],
            &["1", "--depth", "0"],
            &["1", "--rate", "0"],
            &["1", "--duration", "-1"],
            &["2", "--threads", "3"],
            &["1", "--cpus", "x"],
            &["1", "--msg-size", "16,8"],
            &["1", "--msg-size", "16:0"],
            &["1", "--msg-size", "2M"],
            &["1", "--requests-per-conn", "0"],
            &["1", "--arrivals", "onoff:10"],
            &["1", "--arrivals", "pareto:1"],
            &["1", "--arrivals", "bursty"],
        ];
        for extra in bad {
            let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
            assert!(parse(&args).is_err(), "{args:?} was accepted");
        }
    }

    #[test]
    fn the_workload_options_land() {
        let (cfg, _) = parse(&[
            "loadgen",
            "echo",
            "--addr",
            "h:1",
            "--conns",
            "8",
            "--msg-size",
            "64:95,64K:5",
            "--requests-per-conn",
            "10",
            "--idle-conns",
            "1000",
            "--rate",
            "100",
            "--arrivals",
            "onoff:10:90",
        ])
        .unwrap();
        assert_eq!(cfg.msg_size, "64:95,65536:5".parse().unwrap());
        assert_eq!(cfg.requests_per_conn, Some(10));
        assert_eq!(cfg.idle_conns, 1000);
        assert_eq!(
            cfg.arrivals,
            Arrivals::OnOff {
                on_ns: 10_000_000,
                off_ns: 90_000_000
            }
        );
        let kv = |extra: &[&str]| {
            let base = ["loadgen", "kv", "--addr", "h:1", "--conns", "1"];
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            parse(&args).unwrap().0
        };
        let cfg = kv(&[
            "--ratio",
            "1:10",
            "--key-dist",
            "zipf:0.99",
            "--value-size",
            "32,1K",
        ]);
        let Workload::Kv(k) = &cfg.workload else {
            panic!("not kv: {cfg:?}");
        };
        assert!((k.get_ratio - 10.0 / 11.0).abs() < 1e-12);
        assert_eq!(k.key_dist, KeyDist::Zipf(0.99));
        assert_eq!((cfg.msg_size.min(), cfg.msg_size.max()), (32, 1024));
        let Workload::Kv(k) = kv(&["--ratio", "1:0"]).workload else {
            panic!("not kv");
        };
        assert_eq!(k.get_ratio, 0.0);
        // Churn is not for chat, and chat and http take one size.
        for args in [
            &[
                "loadgen",
                "chat",
                "--addr",
                "h:1",
                "--conns",
                "1",
                "--requests-per-conn",
                "5",
            ][..],
            &[
                "loadgen",
                "chat",
                "--addr",
                "h:1",
                "--conns",
                "1",
                "--msg-size",
                "64,128",
            ],
            &[
                "loadgen",
                "http",
                "--addr",
                "h:1",
                "--conns",
                "1",
                "--msg-size",
                "64",
            ],
        ] {
            assert!(parse(args).is_err(), "{args:?} was accepted");
        }
    }
}
