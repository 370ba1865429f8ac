//! `loadgen agent`: loadgen run by another program, one JSON line per message over the
//! agent's standard input and output, so that a controller (xtask) can drive the same load
//! from several hosts at once through `ssh HOST loadgen agent`: no listening port, no second
//! binary, the user's ssh configuration doing the rest.
//!
//! ```text
//!   controller                                    agent (this module)
//!   ----------                                    -------------------
//!                    <- hello {protocol, version, host}
//!   ping {seq, ..}   ->                              (any number, any time between runs:
//!                    <- pong {seq, wall_ns}           the clock offset is estimated from them)
//!   run {protocol, args}  ->                         args: a loadgen command line, its share
//!                    <- ready {connected}             every connection is up; the clock waits
//!   go               ->                              (a barrier across every agent)
//!                    <- done {summary, latency, service}   or   failed {message, usage}
//!   ... another run, or abort / end of input: the agent exits.
//! ```
//!
//! Latency is measured on the agent's own monotonic clock from each message's intended send
//! time, as a local run does, so no two hosts' clocks need agree; the histograms travel as
//! HdrHistogram V2 (deflated, base64) so that the controller adds them, never averages
//! percentiles. A version mismatch, a bad command line, output files (an agent's results go
//! over stdout), or a run that fails is answered with `failed`.

use std::io::{self, BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use clap::Parser;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use crate::cli::Cli;
use crate::error::Error;
use crate::summary::Summary;

/// The version of the control protocol. A controller and an agent speak only their own, and
/// say so before a run.
pub const PROTOCOL: u32 = 1;

/// A message to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToAgent {
    /// Answer with a `pong` carrying the agent's wall clock.
    Ping {
        /// Echoed back.
        seq: u64,
    },
    /// Connect and report `ready`: the run's command line, as `loadgen` takes it after its
    /// name (`echo --addr ... --conns ...`), without output files or `--server-pid`.
    Run {
        /// The controller's [`PROTOCOL`].
        protocol: u32,
        /// The command line.
        args: Vec<String>,
    },
    /// Start the clock of the run that is `ready`.
    Go,
    /// Give up the run (if any) and exit.
    Abort,
}

/// A message from an agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromAgent {
    /// The first line an agent writes.
    Hello {
        /// The agent's [`PROTOCOL`].
        protocol: u32,
        /// loadgen's crate version.
        version: String,
        /// The host's name, for the report.
        host: String,
        /// The CPUs the agent may run on there.
        #[serde(default)]
        cpus: usize,
    },
    /// The answer to a `ping`.
    Pong {
        /// The ping's.
        seq: u64,
        /// The agent's wall clock (nanoseconds since the Unix epoch) when it answered.
        wall_ns: u64,
    },
    /// Every connection of the run is up (`connected` of them); waiting for `go`.
    Ready {
        /// Connections that came up.
        connected: usize,
    },
    /// The run is over.
    Done {
        /// What it measured, as `--json` writes it.
        summary: Box<Summary>,
        /// The latency histogram, V2 deflated, base64.
        latency: String,
        /// The service-time histogram, likewise.
        service: String,
    },
    /// The run could not be made; nothing was measured.
    Failed {
        /// Why, in one line.
        message: String,
        /// Whether it is the user's to fix (a bad option, no server at the address).
        usage: bool,
    },
}

/// A histogram as it travels: V2 deflated, then base64.
pub fn encode_histogram(h: &Histogram<u64>) -> io::Result<String> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| io::Error::other(format!("encoding a histogram: {e:?}")))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The histogram [`encode_histogram`] made.
pub fn decode_histogram(text: &str) -> io::Result<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("base64: {e}")))?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("histogram: {e:?}")))
}

/// Nanoseconds since the Unix epoch on this host's wall clock.
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// This host's name, or `?`.
fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "?".into())
}

/// What the input gave: a message, a line that is not one, or its end.
enum Input {
    Message(ToAgent),
    Garbled(String),
    Closed,
}

/// Serves one controller over `input` and `output` until it says `abort` or its input ends.
/// Returns `Ok` then; `Err` only when `output` cannot be written (the controller is gone).
///
/// Input is read on a thread of its own, so that a controller that vanishes during a run is
/// noticed: the agent then exits at once (status 1) rather than load a server for nobody.
pub fn serve(input: impl BufRead + Send + 'static, output: impl Write) -> io::Result<()> {
    let (tx, rx) = mpsc::channel();
    let measuring = Arc::new(AtomicBool::new(false));
    let watched = Arc::clone(&measuring);
    std::thread::Builder::new()
        .name("agent-input".into())
        .spawn(move || {
            for line in input.lines() {
                let msg = match line {
                    Ok(l) if l.trim().is_empty() => continue,
                    Ok(l) => match serde_json::from_str::<ToAgent>(&l) {
                        Ok(m) => Input::Message(m),
                        Err(e) => Input::Garbled(format!("not a control message ({e}): {l}")),
                    },
                    Err(_) => break,
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
            if watched.load(Ordering::SeqCst) {
                eprintln!("loadgen agent: the controller went away during a run; stopping");
                std::process::exit(1);
            }
            let _ = tx.send(Input::Closed);
        })?;
    let mut out = Sender(output);
    out.send(&FromAgent::Hello {
        protocol: PROTOCOL,
        version: env!("CARGO_PKG_VERSION").into(),
        host: host_name(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    })?;
    loop {
        let msg = match rx.recv() {
            Ok(Input::Message(m)) => m,
            Ok(Input::Garbled(why)) => {
                out.failed(&why, true)?;
                continue;
            }
            Ok(Input::Closed) | Err(_) => return Ok(()),
        };
        match msg {
            ToAgent::Ping { seq } => out.send(&FromAgent::Pong {
                seq,
                wall_ns: wall_ns(),
            })?,
            ToAgent::Go => out.failed("`go` with no run ready", true)?,
            ToAgent::Abort => return Ok(()),
            ToAgent::Run { protocol, args } => {
                if protocol != PROTOCOL {
                    out.failed(
                        &format!(
                            "control protocol {protocol} asked for, but this agent (loadgen {}) \
                             speaks {PROTOCOL}: give both ends the same loadgen",
                            env!("CARGO_PKG_VERSION")
                        ),
                        true,
                    )?;
                    continue;
                }
                let result = run_one(&args, &rx, &mut out, &measuring);
                measuring.store(false, Ordering::SeqCst);
                match result {
                    Ok(Some(done)) => out.send(&done)?,
                    Ok(None) => return Ok(()),
                    Err(e) => out.failed(&e.to_string(), e.is_usage())?,
                }
            }
        }
    }
}

/// One run: parse, connect, report ready, wait for go, measure. `Ok(None)` when the
/// controller aborted or went away before the go.
fn run_one(
    args: &[String],
    rx: &mpsc::Receiver<Input>,
    out: &mut Sender<impl Write>,
    measuring: &AtomicBool,
) -> Result<Option<FromAgent>, Error> {
    let cli = Cli::try_parse_from(std::iter::once("loadgen".to_string()).chain(args.to_vec()))
        .map_err(|e| Error::Config(first_paragraph(&e.to_string())))?;
    let (mut cfg, outputs) = cli.config()?;
    if outputs != crate::cli::Outputs::default() {
        return Err(Error::Config(
            "an agent sends its results to its controller: drop --json, --hist, --hgrm and \
             --interval-log"
                .into(),
        ));
    }
    if cfg.server.is_some() || !cfg.server_cpus.is_empty() {
        return Err(Error::Config(
            "an agent runs on another host than the server: drop --server-pid, \
             --server-cgroup and --server-cpus"
                .into(),
        ));
    }
    // Its stderr is the controller's to show; progress lines would only be noise there.
    cfg.progress = false;
    let mut called_off = false;
    let result = crate::run::run_gated(&cfg, &mut |connected| {
        out.send(&FromAgent::Ready { connected })
            .map_err(|e| Error::io("writing to the controller", e))?;
        loop {
            match rx.recv() {
                Ok(Input::Message(ToAgent::Go)) => {
                    measuring.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                Ok(Input::Message(ToAgent::Ping { seq })) => out
                    .send(&FromAgent::Pong {
                        seq,
                        wall_ns: wall_ns(),
                    })
                    .map_err(|e| Error::io("writing to the controller", e))?,
                Ok(Input::Message(ToAgent::Abort)) | Ok(Input::Closed) | Err(_) => {
                    called_off = true;
                    return Err(Error::CalledOff("the controller called the run off".into()));
                }
                Ok(Input::Message(other)) => {
                    called_off = true;
                    return Err(Error::CalledOff(format!(
                        "expected `go` after `ready`, got {other:?}"
                    )));
                }
                Ok(Input::Garbled(why)) => {
                    called_off = true;
                    return Err(Error::CalledOff(why));
                }
            }
        }
    });
    match result {
        Ok(summary) => {
            let latency = encode_histogram(&summary.histograms.latency)
                .map_err(|e| Error::io("encoding the latency histogram", e))?;
            let service = encode_histogram(&summary.histograms.service)
                .map_err(|e| Error::io("encoding the service-time histogram", e))?;
            Ok(Some(FromAgent::Done {
                summary: Box::new(summary),
                latency,
                service,
            }))
        }
        Err(Error::CalledOff(_)) if called_off => Ok(None),
        Err(e) => Err(e),
    }
}

/// The first paragraph of a (clap) message on one line, for `failed`: what is wrong,
/// without the usage that follows.
fn first_paragraph(s: &str) -> String {
    s.lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes messages, a line each, flushed.
struct Sender<W>(W);

impl<W: Write> Sender<W> {
    fn send(&mut self, msg: &FromAgent) -> io::Result<()> {
        let mut line = serde_json::to_vec(msg).map_err(io::Error::other)?;
        line.push(b'\n');
        self.0.write_all(&line)?;
        self.0.flush()
    }

    fn failed(&mut self, message: &str, usage: bool) -> io::Result<()> {
        self.send(&FromAgent::Failed {
            message: message.to_string(),
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_survive_the_trip() {
        let mut h = crate::hist::new_histogram();
        for v in [1_000u64, 2_000, 2_000, 3_500_000, 900_000_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h).unwrap()).unwrap();
        assert_eq!(back, h);
        assert!(decode_histogram("not base64!").is_err());
        assert!(decode_histogram("aGVsbG8=").is_err());
    }

    #[test]
    fn messages_are_one_tagged_line() {
        let line = serde_json::to_string(&ToAgent::Run {
            protocol: PROTOCOL,
            args: vec!["echo".into()],
        })
        .unwrap();
        assert_eq!(line, r#"{"type":"run","protocol":1,"args":["echo"]}"#);
        assert_eq!(
            serde_json::from_str::<ToAgent>(r#"{"type":"go"}"#).unwrap(),
            ToAgent::Go
        );
    }
}
