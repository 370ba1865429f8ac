//! The controller's side of [`crate::agent`]: a fleet of agents, each a child process that
//! speaks the control protocol on its stdin and stdout (`ssh HOST loadgen agent`, or a local
//! `loadgen agent` in tests), driven through one run after another.
//!
//! A run is split exactly among the agents ([`split`]), started behind a barrier (every agent
//! connects and reports ready, then every agent gets its go; the warmup absorbs the spread of
//! the go's arrival), and merged by adding histograms ([`Merged`]). An agent that cannot start,
//! speaks another protocol version, fails its run, goes silent past a deadline or loses its
//! connection fails the whole run with its own stderr: no partial result is ever returned.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::agent::{self, FromAgent, PROTOCOL, ToAgent};
use crate::hist::{Histograms, Percentiles, merge};
use crate::summary::Summary;

/// Lines of an agent's stderr kept to explain its failure.
const STDERR_LINES: usize = 20;
/// Pings per agent to estimate its clock offset.
const PINGS: u64 = 8;

/// One agent's share of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// The agent's place among them, from 0: its Poisson arrivals draw from its own seed
    /// (every agent numbers its connections from 0).
    pub index: usize,
    /// Connections.
    pub conns: usize,
    /// Open-loop messages per second, in proportion to the connections.
    pub rate: Option<f64>,
}

/// Splits `conns` connections and an open-loop `rate` among `agents`: the connections as
/// evenly as whole numbers allow (the first `conns % agents` get one more), the rate in
/// proportion, so that every connection sends at `rate / conns` whichever agent holds it.
/// Agents that would get no connection are left out.
pub fn split(conns: usize, rate: Option<f64>, agents: usize) -> Vec<Share> {
    let agents = agents.max(1);
    (0..agents)
        .map(|i| conns / agents + usize::from(i < conns % agents))
        .filter(|&c| c > 0)
        .enumerate()
        .map(|(index, c)| Share {
            index,
            conns: c,
            rate: rate.map(|r| r * c as f64 / conns as f64),
        })
        .collect()
}

/// `args` (a loadgen command line after its name) with `--conns` and `--rate` set to `share`,
/// and `--seed` to the agent's own (the given one, or the default, plus its index), so that
/// no two agents draw the same Poisson gaps.
pub fn share_args(args: &[String], share: &Share) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 6);
    let mut seed = crate::config::DEFAULT_SEED;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--conns" | "--rate" => {
                it.next();
            }
            "--seed" => {
                seed = it.next().and_then(|v| v.parse().ok()).unwrap_or(seed);
            }
            _ if a.starts_with("--seed=") => {
                seed = a["--seed=".len()..].parse().unwrap_or(seed);
            }
            _ if a.starts_with("--conns=") || a.starts_with("--rate=") => {}
            _ => out.push(a.clone()),
        }
    }
    out.extend(["--conns".to_string(), share.conns.to_string()]);
    out.extend([
        "--seed".to_string(),
        seed.wrapping_add(share.index as u64).to_string(),
    ]);
    if let Some(r) = share.rate {
        out.extend(["--rate".to_string(), format!("{r}")]);
    }
    out
}

/// An agent's wall clock against the controller's, from the control channel's round trips:
/// `offset_ns` = agent − controller at the same instant, within `± uncertainty_ns` (half the
/// shortest round trip). A diagnostic only: no figure depends on two clocks agreeing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockOffset {
    /// Agent minus controller, nanoseconds.
    pub offset_ns: i64,
    /// Half the shortest round trip, nanoseconds.
    pub uncertainty_ns: u64,
}

/// Why a fleet or one of its runs failed: which agent, what happened, and the end of its
/// stderr.
#[derive(Debug, thiserror::Error)]
#[error("agent {agent}: {what}{}", stderr_note(.stderr))]
pub struct AgentError {
    /// The agent's name (its host as given).
    pub agent: String,
    /// What went wrong.
    pub what: String,
    /// The last lines the agent wrote on stderr.
    pub stderr: String,
    /// The agent said it was the user's to fix (a bad option, no server at the address).
    pub usage: bool,
}

fn stderr_note(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; its stderr: {}", stderr.trim())
    }
}

/// What one agent measured in a run.
#[derive(Debug, Clone)]
pub struct AgentRun {
    /// The agent's name.
    pub agent: String,
    /// The host it reported.
    pub host: String,
    /// Its summary; its `histograms` hold the latency and service histograms it sent.
    pub summary: Summary,
    /// Its clock against the controller's.
    pub clock: ClockOffset,
}

/// A run of the whole fleet: every agent's part, and their sum.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Each agent's part, in the fleet's order.
    pub agents: Vec<AgentRun>,
    /// The sum: counts and bytes added, latency and service percentiles from the added
    /// histograms, client CPU added, client-bound if any agent was.
    pub summary: Summary,
    /// The controller's wall clock (nanoseconds since the epoch) when it sent the go: each
    /// agent's window starts its warmup after it, give or take the go's travel.
    pub go_wall_ns: u64,
}

/// One agent process.
struct Agent {
    name: String,
    host: String,
    cpus: usize,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Result<FromAgent, String>>,
    stderr: Arc<StderrTail>,
    clock: ClockOffset,
}

/// The last lines of an agent's stderr, and whether it has ended.
#[derive(Debug, Default)]
struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Agent {
    fn error(&self, what: impl Into<String>) -> AgentError {
        AgentError {
            agent: self.name.clone(),
            what: what.into(),
            stderr: self.stderr_tail(),
            usage: false,
        }
    }

    fn stderr_tail(&self) -> String {
        // A dying agent's last words may still be on their way: wait a moment for its stderr
        // to end (it does not, for an agent that is alive but silent).
        let deadline = Instant::now() + Duration::from_millis(300);
        while !self.stderr.closed.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let lines = self
            .stderr
            .lines
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default();
        Vec::from(lines).join(" | ")
    }

    fn send(&mut self, msg: &ToAgent) -> Result<(), AgentError> {
        let mut line = serde_json::to_vec(msg).map_err(|e| self.error(e.to_string()))?;
        line.push(b'\n');
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(self.error("its input is closed"));
        };
        if let Err(e) = stdin.write_all(&line).and_then(|()| stdin.flush()) {
            return Err(self.error(format!("lost (writing to it: {e})")));
        }
        Ok(())
    }

    fn recv(&mut self, until: Instant, waiting_for: &str) -> Result<FromAgent, AgentError> {
        match self
            .lines
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            Ok(Ok(msg)) => Ok(msg),
            Ok(Err(garbled)) => Err(self.error(format!(
                "sent a line that is not a control message: {garbled}"
            ))),
            Err(RecvTimeoutError::Timeout) => {
                Err(self.error(format!("no {waiting_for} before the deadline")))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self
                    .child
                    .wait()
                    .map_or_else(|e| e.to_string(), |s| s.to_string());
                Err(self.error(format!("lost while waiting for {waiting_for} ({status})")))
            }
        }
    }
}

/// Agents driven together.
#[derive(Debug)]
pub struct Fleet {
    agents: Vec<Agent>,
}

impl Fleet {
    /// Starts one agent per `(name, command)`: the command must run `loadgen agent` (locally,
    /// or through ssh) with nothing else on its stdout. Waits up to `timeout` for each one's
    /// hello, checks its protocol version, and estimates its clock offset. Any agent that
    /// cannot start fails the fleet, and the others are stopped.
    pub fn start(agents: Vec<(String, Command)>, timeout: Duration) -> Result<Fleet, AgentError> {
        if agents.is_empty() {
            return Err(AgentError {
                agent: "-".into(),
                what: "a fleet needs at least one agent".into(),
                stderr: String::new(),
                usage: true,
            });
        }
        let mut fleet = Fleet { agents: Vec::new() };
        let until = Instant::now() + timeout;
        for (name, mut cmd) in agents {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().map_err(|e| AgentError {
                agent: name.clone(),
                what: format!("cannot start `{cmd:?}`: {e}"),
                stderr: String::new(),
                usage: true,
            })?;
            let stdin = child.stdin.take();
            let stdout = child.stdout.take().expect("stdout is piped");
            let stderr_pipe = child.stderr.take().expect("stderr is piped");
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let msg = serde_json::from_str::<FromAgent>(&line).map_err(|_| line);
                    if tx.send(msg).is_err() {
                        break;
                    }
                }
            });
            let stderr = Arc::new(StderrTail::default());
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr_pipe).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(mut t) = tail.lines.lock() {
                        if t.len() == STDERR_LINES {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
                tail.closed.store(true, Ordering::SeqCst);
            });
            fleet.agents.push(Agent {
                name,
                host: String::new(),
                cpus: 0,
                child,
                stdin,
                lines: rx,
                stderr,
                clock: ClockOffset::default(),
            });
        }
        for a in &mut fleet.agents {
            match a.recv(until, "hello")? {
                FromAgent::Hello {
                    protocol,
                    host,
                    version,
                    cpus,
                } => {
                    if protocol != PROTOCOL {
                        return Err(AgentError {
                            usage: true,
                            ..a.error(format!(
                                "speaks control protocol {protocol} (loadgen {version}), this \
                                 controller {PROTOCOL}: give both ends the same loadgen"
                            ))
                        });
                    }
                    a.host = host;
                    a.cpus = cpus.max(1);
                }
                other => return Err(a.error(format!("began with {other:?}, not hello"))),
            }
            a.clock = estimate_clock(a, until)?;
        }
        Ok(fleet)
    }

    /// How many agents there are.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The agents' names, hosts and CPUs, in order.
    pub fn hosts(&self) -> Vec<(String, String, usize)> {
        self.agents
            .iter()
            .map(|a| (a.name.clone(), a.host.clone(), a.cpus))
            .collect()
    }

    /// Runs `args[i]` on agent `i` (a loadgen command line after its name, see
    /// [`share_args`]), behind the barrier: every agent has its connections up within
    /// `ready_timeout`, then all get their go, and every one is done within `run_timeout` of
    /// the go. Any agent's failure fails the run, and the others are called off.
    pub fn run(
        &mut self,
        args: &[Vec<String>],
        ready_timeout: Duration,
        run_timeout: Duration,
    ) -> Result<Merged, AgentError> {
        self.run_telling_go(args, ready_timeout, run_timeout, &|| {})
    }

    /// [`Fleet::run`], calling `on_go` just before the go is sent: the caller's clock for
    /// the window's edges (a warmup after the go, then the duration), to read what it watches
    /// on the server's host there.
    pub fn run_telling_go(
        &mut self,
        args: &[Vec<String>],
        ready_timeout: Duration,
        run_timeout: Duration,
        on_go: &dyn Fn(),
    ) -> Result<Merged, AgentError> {
        assert_eq!(args.len(), self.agents.len(), "one command line per agent");
        let result = self.run_inner(args, ready_timeout, run_timeout, on_go);
        if result.is_err() {
            self.call_off();
        }
        result
    }

    fn run_inner(
        &mut self,
        args: &[Vec<String>],
        ready_timeout: Duration,
        run_timeout: Duration,
        on_go: &dyn Fn(),
    ) -> Result<Merged, AgentError> {
        for (a, args) in self.agents.iter_mut().zip(args) {
            a.send(&ToAgent::Run {
                protocol: PROTOCOL,
                args: args.clone(),
            })?;
        }
        let until = Instant::now() + ready_timeout;
        for a in &mut self.agents {
            expect_ready(a, until)?;
        }
        let go_wall_ns = agent::wall_ns();
        on_go();
        for a in &mut self.agents {
            a.send(&ToAgent::Go)?;
        }
        let until = Instant::now() + run_timeout;
        let mut runs = Vec::with_capacity(self.agents.len());
        for a in &mut self.agents {
            runs.push(expect_done(a, until)?);
        }
        let summary = merge_summaries(&runs).expect("a fleet has at least one agent");
        Ok(Merged {
            summary,
            agents: runs,
            go_wall_ns,
        })
    }

    /// Tells every agent to give up what it does and exit, and waits for them a moment.
    fn call_off(&mut self) {
        for a in &mut self.agents {
            let _ = a.send(&ToAgent::Abort);
            a.stdin = None;
        }
        for a in &mut self.agents {
            wait_or_kill(&mut a.child, Duration::from_secs(2));
        }
        self.agents.clear();
    }

    /// Ends every agent: abort, end of input, and a kill after `grace`.
    pub fn stop(mut self, grace: Duration) {
        for a in &mut self.agents {
            let _ = a.send(&ToAgent::Abort);
            a.stdin = None;
        }
        for a in &mut self.agents {
            wait_or_kill(&mut a.child, grace);
        }
        self.agents.clear();
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for a in &mut self.agents {
            a.stdin = None;
            let _ = a.child.kill();
            let _ = a.child.wait();
        }
    }
}

fn wait_or_kill(child: &mut Child, grace: Duration) {
    let until = Instant::now() + grace;
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn estimate_clock(a: &mut Agent, until: Instant) -> Result<ClockOffset, AgentError> {
    let mut best: Option<(u64, i64)> = None;
    for seq in 0..PINGS {
        let sent = agent::wall_ns();
        let t0 = Instant::now();
        a.send(&ToAgent::Ping { seq })?;
        loop {
            match a.recv(until, "pong")? {
                FromAgent::Pong { seq: s, wall_ns } if s == seq => {
                    let rtt = t0.elapsed().as_nanos() as u64;
                    let mid = sent + rtt / 2;
                    let offset = wall_ns as i64 - mid as i64;
                    if best.is_none_or(|(r, _)| rtt < r) {
                        best = Some((rtt, offset));
                    }
                    break;
                }
                FromAgent::Pong { .. } => {}
                other => return Err(a.error(format!("answered a ping with {other:?}"))),
            }
        }
    }
    let (rtt, offset) = best.unwrap_or_default();
    Ok(ClockOffset {
        offset_ns: offset,
        uncertainty_ns: rtt / 2,
    })
}

fn failed(a: &Agent, message: String, usage: bool) -> AgentError {
    AgentError {
        usage,
        ..a.error(message)
    }
}

fn expect_ready(a: &mut Agent, until: Instant) -> Result<(), AgentError> {
    loop {
        match a.recv(until, "ready")? {
            FromAgent::Ready { .. } => return Ok(()),
            FromAgent::Failed { message, usage } => return Err(failed(a, message, usage)),
            FromAgent::Pong { .. } => {}
            other => return Err(a.error(format!("sent {other:?} instead of ready"))),
        }
    }
}

fn expect_done(a: &mut Agent, until: Instant) -> Result<AgentRun, AgentError> {
    loop {
        match a.recv(until, "the end of its run")? {
            FromAgent::Done {
                summary,
                latency,
                service,
            } => {
                let mut summary = *summary;
                summary.histograms.latency = agent::decode_histogram(&latency).map_err(|e| {
                    a.error(format!("sent a latency histogram that is not one: {e}"))
                })?;
                summary.histograms.service = agent::decode_histogram(&service).map_err(|e| {
                    a.error(format!("sent a service histogram that is not one: {e}"))
                })?;
                if summary.errors.total > 0 {
                    return Err(a.error(format!(
                        "its connections met {} errors: {:?}",
                        summary.errors.total, summary.errors
                    )));
                }
                return Ok(AgentRun {
                    agent: a.name.clone(),
                    host: a.host.clone(),
                    summary,
                    clock: a.clock,
                });
            }
            FromAgent::Failed { message, usage } => return Err(failed(a, message, usage)),
            FromAgent::Pong { .. } => {}
            other => return Err(a.error(format!("sent {other:?} instead of its results"))),
        }
    }
}

/// The sum of the agents' summaries. Counts, bytes, faults and client CPU add up; the
/// histograms are added and the percentiles read off the sums; throughput is the sum of the
/// agents' (each over its own window, which the barrier lines up to within the go's spread).
/// Kv's GET and SET latency are left out: their histograms do not travel, and percentiles
/// cannot be added. `None` for no runs.
pub fn merge_summaries(runs: &[AgentRun]) -> Option<Summary> {
    let parts: Vec<&Summary> = runs.iter().map(|r| &r.summary).collect();
    let first = parts.first()?;
    let latency: Histogram<u64> = merge(parts.iter().map(|s| &s.histograms.latency));
    let service: Histogram<u64> = merge(parts.iter().map(|s| &s.histograms.service));
    let sum_u = |f: fn(&Summary) -> u64| parts.iter().map(|s| f(s)).sum::<u64>();
    let sum_f = |f: fn(&Summary) -> f64| parts.iter().map(|s| f(s)).sum::<f64>();
    let messages = sum_u(|s| s.messages);
    let client_cpu_secs = sum_f(|s| s.client_cpu_secs);
    let errors = parts[1..]
        .iter()
        .fold(first.errors, |e, s| e.plus(&s.errors));
    let mut warnings = Vec::new();
    for r in runs {
        for w in &r.summary.warnings {
            warnings.push(format!("{}: {w}", r.agent));
        }
    }
    Some(Summary {
        conns: parts.iter().map(|s| s.conns).sum(),
        connected: parts.iter().map(|s| s.connected).sum(),
        connections_opened: sum_u(|s| s.connections_opened),
        idle_conns: parts.iter().map(|s| s.idle_conns).sum(),
        idle_connected: parts.iter().map(|s| s.idle_connected).sum(),
        idle_held: parts.iter().map(|s| s.idle_held).sum(),
        threads: parts.iter().map(|s| s.threads).sum(),
        rate: first.rate.map(|_| sum_f(|s| s.rate.unwrap_or(0.0))),
        window_secs: parts.iter().map(|s| s.window_secs).fold(0.0, f64::max),
        messages,
        throughput_per_sec: sum_f(|s| s.throughput_per_sec),
        sent_total: sum_u(|s| s.sent_total),
        replies_total: sum_u(|s| s.replies_total),
        bytes_sent: sum_u(|s| s.bytes_sent),
        bytes_received: sum_u(|s| s.bytes_received),
        latency_us: Percentiles::of(&latency),
        service_time_us: Percentiles::of(&service),
        delivery_latency_us: None,
        get_latency_us: None,
        set_latency_us: None,
        deliveries: sum_u(|s| s.deliveries),
        errors,
        client_cpu_secs,
        client_cpu_per_msg_us: if messages > 0 {
            client_cpu_secs * 1e6 / messages as f64
        } else {
            0.0
        },
        client_cpu_utilization: parts
            .iter()
            .map(|s| s.client_cpu_utilization)
            .fold(0.0, f64::max),
        client_cpus_busy: parts
            .iter()
            .filter_map(|s| s.client_cpus_busy)
            .reduce(f64::max),
        sends_late: sum_u(|s| s.sends_late),
        send_lag_us: parts
            .iter()
            .filter_map(|s| s.send_lag_us)
            .reduce(|a, b| a.most(&b)),
        client_bound: parts.iter().any(|s| s.client_bound),
        // The fleet kept its schedule where every agent kept its own; the figures shown are
        // those of the agent with the worst lag.
        schedule_ok: parts
            .iter()
            .filter_map(|s| s.schedule_ok)
            .reduce(|a, b| a && b),
        schedule_reason: Some(
            parts
                .iter()
                .filter_map(|s| s.schedule_reason.as_deref())
                .collect::<Vec<_>>()
                .join("; "),
        )
        .filter(|r| !r.is_empty()),
        schedule_check: parts
            .iter()
            .filter_map(|s| s.schedule_check.clone())
            .max_by(|a, b| a.lag_p99_us.total_cmp(&b.lag_p99_us)),
        server_accounting: None,
        server_cpu_secs: None,
        server_user_secs: None,
        server_system_secs: None,
        server_cpus: None,
        server_cpu_per_msg_us: None,
        nofile_limit: parts.iter().map(|s| s.nofile_limit).min().unwrap_or(0),
        warnings,
        histograms: Histograms {
            latency,
            service,
            window_start: parts
                .iter()
                .map(|s| s.histograms.window_start)
                .min()
                .unwrap_or(first.histograms.window_start),
            ..Histograms::default()
        },
        ..(*first).clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_exact() {
        let s = split(1001, Some(20_000.0), 3);
        assert_eq!(
            s.iter().map(|s| s.conns).collect::<Vec<_>>(),
            [334, 334, 333]
        );
        let total: f64 = s.iter().map(|s| s.rate.unwrap()).sum();
        assert!((total - 20_000.0).abs() < 1e-6, "{total}");
        // Every connection sends at the same rate whichever agent holds it.
        for share in &s {
            let per_conn = share.rate.unwrap() / share.conns as f64;
            assert!((per_conn - 20_000.0 / 1001.0).abs() < 1e-9);
        }
        assert_eq!(
            split(2, None, 3).len(),
            2,
            "an agent with no connection is left out"
        );
        assert_eq!(
            split(10, None, 1),
            [Share {
                index: 0,
                conns: 10,
                rate: None
            }]
        );
    }

    #[test]
    fn share_args_replace_conns_and_rate() {
        let base: Vec<String> = ["echo", "--addr", "h:1", "--conns", "1000", "--rate=9", "-q"]
            .map(String::from)
            .to_vec();
        let out = share_args(
            &base,
            &Share {
                index: 2,
                conns: 334,
                rate: Some(6.5),
            },
        );
        assert_eq!(
            out,
            [
                "echo", "--addr", "h:1", "-q", "--conns", "334", "--seed", "3", "--rate", "6.5"
            ]
        );
        // A seed given is each agent's base: agents never draw the same gaps.
        let seeded: Vec<String> = ["echo", "--seed", "40", "--arrivals", "poisson"]
            .map(String::from)
            .to_vec();
        let share = |index| Share {
            index,
            conns: 1,
            rate: Some(1.0),
        };
        let seeds: Vec<String> = (0..3)
            .map(|i| share_args(&seeded, &share(i)))
            .map(|a| a[a.iter().position(|w| w == "--seed").unwrap() + 1].clone())
            .collect();
        assert_eq!(seeds, ["40", "41", "42"]);
    }
}
