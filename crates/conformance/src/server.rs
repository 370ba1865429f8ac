//! Server processes: start one and wait for its `READY` line, signal it, kill it, wait
//! for its exit, read its memory use.
//!
//! A server's processes are found by a tag in their environment, which every forked
//! child inherits: process groups and parent links do not do, since the children of
//! `srv-threads --mode process` lead process groups of their own and are orphaned
//! when their parent dies first.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{self, Signal};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

use crate::binaries::{self, Resolved};
use crate::net;

/// How long a server may take from spawn to `READY` (recovery of small logs included).
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after a signal or a fatal error.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Every server is started with this many workers unless a test says otherwise.
const DEFAULT_WORKERS: &str = "2";

/// One entry of the server list: a binary and the arguments that select its variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSpec {
    /// The test module name, such as `threads_process`.
    pub id: &'static str,
    /// The binary, such as `srv-threads`.
    pub bin: &'static str,
    /// Arguments that come first on every command line, such as `--mode process`.
    pub args: &'static [&'static str],
    /// What the server does not serve, or needs of the machine; empty for most.
    pub limits: &'static [Limit],
    /// How `cargo xtask bench` names and describes it, if it is one of the bench's
    /// named servers (the other entries are variants the bench reaches by `+flag`s).
    pub bench: Option<BenchEntry>,
}

/// What `cargo xtask bench` knows of a server of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchEntry {
    /// The name `--servers` takes, such as `threads-process`.
    pub name: &'static str,
    /// Run when `--servers` is not given.
    pub default: bool,
    /// What it is, one line, for the report.
    pub about: &'static str,
}

/// What sets a server apart from the full face of docs/PROTOCOL.md and docs/DESIGN.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Serves plain echo only: no chat, no `--compute-us` (srv-floor, the kernel's floor,
    /// refuses them with exit status 2).
    EchoOnly,
    /// Runs only where io_uring is allowed: skipped with a message elsewhere.
    IoUring,
    /// Not built on `launch` and `service` (srv-go): it prints a stop line of its own
    /// (`conns=`, `msgs=`, no count of cut subscribers) and words its one-line errors its
    /// own way (`srv-go: cannot listen on …`, without `error:`).
    NotLaunch,
    /// Serves no `--proto kv` (srv-threads `--mode process`: its processes share no
    /// store, so it refuses kv with exit status 2).
    NoKv,
    /// Serves no `--proto chat` (srv-go `--model poll`, the Go article's busy loop, serves
    /// echo and kv only, and `--model sessions` echo, kv and http; both refuse chat with
    /// exit status 2).
    NoChat,
    /// Serves no `--proto http` (srv-go `--model poll`: it refuses http with exit
    /// status 2).
    NoHttp,
    /// Cannot stop reading a connection whose output waits (srv-go `--model gnet`: gnet
    /// reads every readable socket into its own buffer and has no call to pause one, gnet
    /// issue #722). It cuts a client that sends and never reads instead, once the client's
    /// unsent output passes a limit, which `servers_that_cannot_pause_cut_*` check in place
    /// of the backpressure checks.
    NoReadPause,
}

/// What a check needs of a server beyond plain echo and the common command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `--proto chat`.
    Chat,
    /// `--compute-us`.
    Compute,
    /// The stop line of `service::counters` (`accepted=… bytes_out=… messages=…
    /// cut_subscribers=…`), which a check reads to see what the server counted.
    Counters,
    /// `--proto kv`.
    Kv,
    /// `--proto http`.
    Http,
    /// Not reading a connection while 64 KiB of its output wait (docs/PROTOCOL.md's
    /// backpressure), which the bounded-memory checks measure.
    ReadPause,
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Need::Chat => "--proto chat",
            Need::Compute => "--compute-us",
            Need::Counters => "the service counters on its stop line",
            Need::Kv => "--proto kv",
            Need::Http => "--proto http",
            Need::ReadPause => "not reading a client while its output waits (backpressure)",
        })
    }
}

impl ServerSpec {
    /// Finds the binary, building it first (once per process): a Rust server with a
    /// nested `cargo build` in the running test's target directory and profile, `srv-go`
    /// with `go build` in `peers/go`. Skipped when Go or `peers/go` is missing.
    pub fn resolve(&self) -> io::Result<Resolved> {
        if self.limits.contains(&Limit::IoUring)
            && let Err(reason) = io_uring_usable()
        {
            return Ok(Resolved::Skipped(reason));
        }
        Ok(match binaries::locate(self.bin)? {
            Ok(path) => Resolved::Ready(Target { spec: *self, path }),
            Err(reason) => Resolved::Skipped(reason),
        })
    }

    /// Whether the server serves what a check needs.
    pub fn serves(&self, need: Need) -> bool {
        match need {
            Need::Compute => !self.limits.contains(&Limit::EchoOnly),
            Need::Chat => !self
                .limits
                .iter()
                .any(|l| matches!(l, Limit::EchoOnly | Limit::NoChat)),
            Need::Http => !self
                .limits
                .iter()
                .any(|l| matches!(l, Limit::EchoOnly | Limit::NoHttp)),
            Need::Counters => !self.limits.contains(&Limit::NotLaunch),
            Need::ReadPause => !self.limits.contains(&Limit::NoReadPause),
            Need::Kv => !self
                .limits
                .iter()
                .any(|l| matches!(l, Limit::EchoOnly | Limit::NoKv)),
        }
    }

    /// `bin args…`, for messages.
    pub fn command_line(&self) -> String {
        std::iter::once(self.bin)
            .chain(self.args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The operations every io_uring server of the list submits (its sockets' and files' I/O,
/// its timers and cancellations), with their names for a refusal.
const IO_URING_OPS: [(u8, &str); 8] = {
    use io_uring::opcode::{Accept, AsyncCancel, Close, Read, Recv, Send, Timeout, Write};
    [
        (Accept::CODE, "ACCEPT"),
        (Recv::CODE, "RECV"),
        (Send::CODE, "SEND"),
        (Read::CODE, "READ"),
        (Write::CODE, "WRITE"),
        (Close::CODE, "CLOSE"),
        (AsyncCancel::CODE, "ASYNC_CANCEL"),
        (Timeout::CODE, "TIMEOUT"),
    ]
};

/// `Ok` if this kernel lets a process set up the ring the io_uring servers ask for
/// (SINGLE_ISSUER|DEFER_TASKRUN, Linux 6.1) and its probe lists every operation of
/// [`IO_URING_OPS`], or why not; probed once per process. `cargo xtask bench` leaves the
/// io_uring servers out with this line, the tests skip them.
pub fn io_uring_usable() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let ring = io_uring::IoUring::<io_uring::squeue::Entry>::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(2)
                .map_err(|e| {
                    let disabled = fs::read_to_string("/proc/sys/kernel/io_uring_disabled").ok();
                    io_uring_refusal(&e, disabled.as_deref())
                })?;
            let mut probe = io_uring::Probe::new();
            ring.submitter().register_probe(&mut probe).map_err(|e| {
                format!("this kernel's io_uring cannot be probed ({e}); skipping the io_uring servers")
            })?;
            let lacking: Vec<&str> = IO_URING_OPS
                .iter()
                .filter(|(code, _)| !probe.is_supported(*code))
                .map(|(_, name)| *name)
                .collect();
            if lacking.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "this kernel's io_uring lacks {} (Linux 6.1+ has them); skipping the io_uring servers",
                    lacking.join(", ")
                ))
            }
        })
        .clone()
}

/// Why the kernel refused a ring, in words a reader can act on: `error` is what
/// `io_uring_setup(2)` returned, `disabled` the text of `kernel.io_uring_disabled`.
fn io_uring_refusal(error: &io::Error, disabled: Option<&str>) -> String {
    let why = match error.raw_os_error() {
        Some(nix::libc::ENOSYS) => "this kernel has no io_uring (ENOSYS)".to_owned(),
        Some(nix::libc::EPERM) => match disabled.map(str::trim) {
            Some(level @ ("1" | "2")) => format!(
                "io_uring is forbidden here: sysctl kernel.io_uring_disabled = {level} (EPERM)"
            ),
            _ => "io_uring is forbidden here (EPERM: a seccomp filter or a container's policy)"
                .to_owned(),
        },
        Some(nix::libc::EINVAL) => {
            "this kernel's io_uring lacks SINGLE_ISSUER or DEFER_TASKRUN (EINVAL; Linux 6.1+)"
                .to_owned()
        }
        _ => format!("io_uring is unavailable here ({error})"),
    };
    format!("{why}; skipping the io_uring servers")
}

/// A server binary that exists, ready to be started any number of times.
#[derive(Debug, Clone)]
pub struct Target {
    spec: ServerSpec,
    path: PathBuf,
}

impl Target {
    /// The list entry this target was made from.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The binary.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The command line for `args`: the spec's arguments, `--workers 2` unless the spec
    /// or `args` name `--workers`, then `args`. A `--workers` in `args` replaces the
    /// spec's (a check that needs a worker count of its own gets it, and the flag is
    /// never given twice). Stdin is null, stdout and stderr are captured, and the process
    /// stays in the test's process group, so that a Ctrl-C of the test run reaches it too.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.path);
        let own_workers = args.contains(&"--workers");
        let mut spec_args = self.spec.args.iter();
        while let Some(arg) = spec_args.next() {
            if own_workers && *arg == "--workers" {
                spec_args.next();
            } else {
                cmd.arg(arg);
            }
        }
        if !own_workers && !self.spec.args.contains(&"--workers") {
            cmd.args(["--workers", DEFAULT_WORKERS]);
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Starts the server and waits for its `READY <addr>` line.
    pub fn start(&self, args: &[&str]) -> io::Result<Server> {
        self.start_env(args, &[])
    }

    /// [`Target::start`] with extra environment variables (test hooks such as
    /// `RINGSIDE_TEST_SYNC_GATE`).
    pub fn start_env(&self, args: &[&str], env: &[(&str, &OsStr)]) -> io::Result<Server> {
        let mut cmd = self.command(args);
        cmd.envs(env.iter().copied());
        let mut server = Server::spawn(cmd, self.describe(args))?;
        let deadline = Instant::now() + START_TIMEOUT;
        let first = lock(&server.first_line).recv_timeout(START_TIMEOUT);
        match first {
            Ok(Some(line)) => {
                let addr = line
                    .strip_prefix("READY ")
                    .and_then(|a| a.trim_end_matches('\n').parse().ok())
                    .ok_or_else(|| {
                        io::Error::other(format!(
                            "{}: first stdout line is {line:?}, not \"READY <addr>\"",
                            server.what
                        ))
                    })?;
                server.addr = addr;
                Ok(server)
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                // Stdout closed without a line: the server is exiting; say how.
                let left = deadline.saturating_duration_since(Instant::now());
                let exit = server.wait_exit(left.max(Duration::from_secs(1)))?;
                Err(io::Error::other(format!(
                    "{}: exited before READY with {}; stderr: {}",
                    server.what,
                    exit.describe_status(),
                    exit.stderr.trim_end()
                )))
            }
            Err(RecvTimeoutError::Timeout) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{}: no READY line within {START_TIMEOUT:?}", server.what),
            )),
        }
    }

    /// Runs the server expecting it to exit on its own (a bad argument, an unusable
    /// `--data`): returns how it exited. A server that prints `READY` instead, or is
    /// still running after [`EXIT_TIMEOUT`], is killed and reported as an error.
    pub fn run_to_exit(&self, args: &[&str]) -> io::Result<Exit> {
        let mut server = Server::spawn(self.command(args), self.describe(args))?;
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(exit) = server.poll_exit()? {
                return Ok(exit);
            }
            if let Ok(Some(line)) = lock(&server.first_line).try_recv() {
                return Err(io::Error::other(format!(
                    "{}: expected an exit, but it started and printed {:?}",
                    server.what,
                    line.trim_end()
                )));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{}: still running after {EXIT_TIMEOUT:?}", server.what),
                ));
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    fn describe(&self, args: &[&str]) -> String {
        format!("`{} {}`", self.spec.command_line(), args.join(" "))
    }
}

/// A running server. Dropping it kills every process it started.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// The value of [`TAG_VAR`] in the environment of this server's processes.
    tag: String,
    what: String,
    addr: SocketAddr,
    output: Arc<Output>,
    /// The first stdout line, or `None` if stdout closed first. In a mutex so that a
    /// `&Server` can be shared by a test's threads.
    first_line: Mutex<Receiver<Option<String>>>,
    /// Set once the exit of the server process has been seen and the rest killed.
    exit: Option<WaitStatus>,
    /// The server's TMPDIR, removed after the `Drop` below has killed its processes
    /// (fields drop after `drop` runs).
    _tmp: tempfile::TempDir,
}

/// Everything a server wrote, and whether each pipe has reached EOF.
#[derive(Debug, Default)]
struct Output {
    stdout: Mutex<Vec<u8>>,
    stderr: Mutex<Vec<u8>>,
    closed: Mutex<u8>,
    all_closed: std::sync::Condvar,
}

/// How a server exited, and all it wrote.
#[derive(Debug, Clone)]
pub struct Exit {
    /// The exit status, if it exited normally.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<Signal>,
    /// Everything on stdout, the `READY` line included.
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
}

impl Exit {
    /// "exit status 2" or "signal SIGKILL", for messages.
    pub fn describe_status(&self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "an unknown status".to_owned(),
        }
    }
}

impl Server {
    fn spawn(mut cmd: Command, what: String) -> io::Result<Server> {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        raise_fd_limit();
        let tag = format!(
            "{}.{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        );
        cmd.env(TAG_VAR, &tag);
        // A chat server without `--data` keeps its rooms in a directory of its own under
        // TMPDIR and removes it when it stops cleanly; one that a test kills cannot. This
        // TMPDIR goes with the `Server`, so nothing is left in /tmp either way.
        let tmp = tempfile::Builder::new()
            .prefix("ringside-server-")
            .tempdir()
            .map_err(|e| net::annotate(e, &format!("cannot make a TMPDIR for {what}")))?;
        cmd.env("TMPDIR", tmp.path());
        let mut child = cmd
            .spawn()
            .map_err(|e| net::annotate(e, &format!("cannot start {what}")))?;
        let output = Arc::new(Output::default());
        let (tx, first_line) = mpsc::channel();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let out = Arc::clone(&output);
        thread::spawn(move || read_stdout(stdout, &out, &tx));
        let out = Arc::clone(&output);
        thread::spawn(move || read_stderr(stderr, &out));
        let addr = SocketAddr::from(([0, 0, 0, 0], 0));
        Ok(Server {
            child,
            tag,
            what,
            addr,
            output,
            first_line: Mutex::new(first_line),
            exit: None,
            _tmp: tmp,
        })
    }

    /// The address from the `READY` line.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's process id (in process mode, the parent's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new connection to the server, see [`net::connect`].
    pub fn connect(&self) -> io::Result<TcpStream> {
        net::connect(self.addr).map_err(|e| net::annotate(e, &format!("connect to {}", self.what)))
    }

    /// Stdout after the `READY` line so far; a server should never write any.
    pub fn stdout_after_ready(&self) -> String {
        let all = lock(&self.output.stdout);
        let text = String::from_utf8_lossy(&all);
        text.split_once('\n')
            .map(|(_, rest)| rest.to_owned())
            .unwrap_or_default()
    }

    /// Stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&lock(&self.output.stderr)).into_owned()
    }

    /// Sends `sig` to the server process itself (not its children), as `kill` would.
    pub fn signal(&self, sig: Signal) -> io::Result<()> {
        signal::kill(self.leader(), sig).map_err(io::Error::from)
    }

    /// `kill -9` of every process of the server: a crash. Returns once all are dead.
    pub fn kill9(&mut self) -> io::Result<Exit> {
        if self.exit.is_none() {
            kill_tagged(&self.tag);
        }
        self.wait_exit(EXIT_TIMEOUT)
    }

    /// Waits up to `timeout` for the server to exit, then kills whatever it left behind
    /// (children in process mode) and returns the exit with all output.
    pub fn wait_exit(&mut self, timeout: Duration) -> io::Result<Exit> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(exit) = self.poll_exit()? {
                return Ok(exit);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} still running after {timeout:?}; stderr so far: {}",
                        self.what,
                        self.stderr().trim_end()
                    ),
                ));
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// The exit if the server process has exited, without reaping it: an unreaped
    /// process keeps its pid, so `Drop` can never signal an unrelated process by it.
    fn poll_exit(&mut self) -> io::Result<Option<Exit>> {
        if self.exit.is_none() {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            match waitid(Id::Pid(self.leader()), flags).map_err(io::Error::from)? {
                WaitStatus::StillAlive => return Ok(None),
                status => {
                    // Children left behind would hold the pipes open forever.
                    kill_tagged(&self.tag);
                    self.exit = Some(status);
                }
            }
        }
        // Both pipes reach EOF once every process of the server is gone.
        let mut closed = lock(&self.output.closed);
        let deadline = Instant::now() + EXIT_TIMEOUT;
        while *closed < 2 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::other(format!(
                    "{}: output still open after exit",
                    self.what
                )));
            }
            closed = self
                .output
                .all_closed
                .wait_timeout(closed, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(closed);
        let (code, signal) = match self.exit {
            Some(WaitStatus::Exited(_, code)) => (Some(code), None),
            Some(WaitStatus::Signaled(_, sig, _)) => (None, Some(sig)),
            _ => (None, None),
        };
        Ok(Some(Exit {
            code,
            signal,
            stdout: String::from_utf8_lossy(&lock(&self.output.stdout)).into_owned(),
            stderr: self.stderr(),
        }))
    }

    /// Resident memory of the server: the sum of `VmRSS` over all its live processes
    /// (the server and, in process mode, its per-connection children), in bytes.
    pub fn rss(&self) -> io::Result<u64> {
        self.status_sum("VmRSS:")
    }

    /// Peak resident memory of the server: the sum of `VmHWM` (the most `VmRSS` each
    /// process has had) over all its live processes, in bytes.
    pub fn peak_rss(&self) -> io::Result<u64> {
        self.status_sum("VmHWM:")
    }

    /// The sum of a `/proc/PID/status` field in kB over the server's live processes, in
    /// bytes.
    fn status_sum(&self, field: &str) -> io::Result<u64> {
        let mut total = 0;
        for pid in tagged(&self.tag)? {
            // A process may exit between listing and reading: it then uses nothing.
            let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            let kib = status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0);
            total += kib * 1024;
        }
        Ok(total)
    }

    fn leader(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_tagged(&self.tag);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment variable that tags every process of one server.
const TAG_VAR: &str = "RINGSIDE_CONFORMANCE_SERVER";

/// The live processes whose environment carries `tag`. Zombies have no environment
/// left to read, and processes of other users cannot be read: neither is listed.
fn tagged(tag: &str) -> io::Result<Vec<Pid>> {
    let needle = format!("{TAG_VAR}={tag}\0").into_bytes();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let name = entry?.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.windows(needle.len()).any(|w| w == needle.as_slice()) {
            pids.push(Pid::from_raw(pid));
        }
    }
    Ok(pids)
}

/// SIGKILLs every process tagged `tag` until none is left, so that none can fork a
/// successor that outlives the sweep. Bounded: a process that will not die within a
/// few seconds is reported, not waited for.
fn kill_tagged(tag: &str) {
    let deadline = Instant::now() + EXIT_TIMEOUT;
    loop {
        let pids = match tagged(tag) {
            Ok(pids) => pids,
            Err(e) => {
                eprintln!("cannot list the processes of server {tag}: {e}");
                return;
            }
        };
        if pids.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            eprintln!("processes of server {tag} still alive after SIGKILL: {pids:?}");
            return;
        }
        for pid in pids {
            // ESRCH: it died since the listing, which is the goal.
            let _ = signal::kill(pid, Signal::SIGKILL);
        }
        thread::sleep(Duration::from_millis(1));
    }
}

fn read_stdout(pipe: Option<ChildStdout>, out: &Output, first_line: &mpsc::Sender<Option<String>>) {
    let mut sent = false;
    if let Some(mut pipe) = pipe {
        let mut buf = [0; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            let mut all = lock(&out.stdout);
            all.extend_from_slice(&buf[..n]);
            if !sent && let Some(end) = all.iter().position(|&b| b == b'\n') {
                let _ = first_line.send(Some(String::from_utf8_lossy(&all[..end]).into_owned()));
                sent = true;
            }
        }
    }
    if !sent {
        let _ = first_line.send(None);
    }
    out.close_one();
}

fn read_stderr(pipe: Option<ChildStderr>, out: &Output) {
    if let Some(mut pipe) = pipe {
        let mut buf = [0; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            lock(&out.stderr).extend_from_slice(&buf[..n]);
        }
    }
    out.close_one();
}

impl Output {
    fn close_one(&self) {
        *lock(&self.closed) += 1;
        self.all_closed.notify_all();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A test thread that panicked while holding the lock left valid bytes behind.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, once, before the first server
/// starts: servers inherit it, and a test with a thousand connections needs a thousand
/// descriptors on each side.
fn raise_fd_limit() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let want = hard.min(1 << 20);
            if soft < want {
                let _ = setrlimit(Resource::RLIMIT_NOFILE, want, hard);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_uring_refusals_name_their_cause() {
        let err = |code| io::Error::from_raw_os_error(code);
        assert!(io_uring_refusal(&err(nix::libc::ENOSYS), None).contains("no io_uring"));
        let sysctl = io_uring_refusal(&err(nix::libc::EPERM), Some("2\n"));
        assert!(sysctl.contains("kernel.io_uring_disabled = 2"), "{sysctl}");
        let seccomp = io_uring_refusal(&err(nix::libc::EPERM), Some("0\n"));
        assert!(seccomp.contains("seccomp"), "{seccomp}");
        assert!(io_uring_refusal(&err(nix::libc::EINVAL), None).contains("DEFER_TASKRUN"));
        assert!(io_uring_refusal(&err(nix::libc::ENOMEM), None).contains("unavailable"));
    }

    #[test]
    fn a_specs_worker_count_yields_to_a_checks() {
        let spec = ServerSpec {
            id: "x",
            bin: "srv-x",
            args: &["--workers", "1", "--flavor", "a"],
            limits: &[],
            bench: None,
        };
        let target = Target {
            spec,
            path: PathBuf::from("/bin/srv-x"),
        };
        let args = |cmd: Command| -> Vec<String> {
            cmd.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            args(target.command(&["--proto", "echo"])),
            ["--workers", "1", "--flavor", "a", "--proto", "echo"]
        );
        assert_eq!(
            args(target.command(&["--workers", "3"])),
            ["--flavor", "a", "--workers", "3"]
        );
        let plain = Target {
            spec: ServerSpec { args: &[], ..spec },
            path: PathBuf::from("/bin/srv-x"),
        };
        assert_eq!(args(plain.command(&[])), ["--workers", "2"]);
    }
}
