//! A peer: a server of someone else's, run beside ours at one protocol's points so that our
//! figures stand next to the program people know (redis-server for kv, nginx for http;
//! remote load agents are the next ones). A peer is one trait: how it is found or
//! said to be missing (with the install command), started on given CPUs, known to be ready,
//! and stopped. Each peer is a file of its own, the only one that names its program; the run
//! layer's `mod.rs` lists them.
//!
//! What every peer's start and wait does the same way is here too: a free loopback port, the
//! spawn on the server's CPUs and into its cgroup, and the bounded wait for a probe to pass.
//!
//! It may call the plan layer and the run layer's `children`, `cpus`, `cgroup` and `outcome`.

use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::plan::placement::CpuList;
use crate::plan::servers::{PeerEntry, Variant};
use crate::plan::suites::Suite;
use crate::run::cgroup::{self, Group};
use crate::run::children::{self, Proc};
use crate::run::cpus;
use crate::run::outcome::Failure;

/// How long a peer may take to serve after its start.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// What a peer is, as data: each peer has one.
#[derive(Debug)]
pub(crate) struct Facts {
    /// Its name in `--servers` and in the results.
    pub(crate) name: &'static str,
    /// Its program, looked up on PATH.
    pub(crate) program: &'static str,
    /// How to install it (Debian and Ubuntu).
    pub(crate) install: &'static str,
    /// The `--proto` of the points it runs at; it sits out the others.
    pub(crate) proto: &'static str,
    /// The suite whose default servers it joins.
    pub(crate) suite: Suite,
    /// Why it takes no `+flags`, for the error that refuses them.
    pub(crate) fixed: &'static str,
}

/// A server of someone else's that xtask starts and stops itself.
pub(crate) trait Peer: Sync {
    /// What it is: name, program, install command, protocol, suite.
    fn facts(&self) -> &'static Facts;

    /// Its name in `--servers` and in the results.
    fn name(&self) -> &'static str {
        self.facts().name
    }
    /// Its program, looked up on PATH.
    fn program(&self) -> &'static str {
        self.facts().program
    }
    /// How to install it (Debian and Ubuntu).
    fn install(&self) -> &'static str {
        self.facts().install
    }
    /// The `--proto` of the points it runs at; it sits out the others.
    fn proto(&self) -> &'static str {
        self.facts().proto
    }
    /// The suite whose default servers it joins.
    fn suite(&self) -> Suite {
        self.facts().suite
    }
    /// Why it takes no `+flags`, for the error that refuses them.
    fn fixed(&self) -> &'static str {
        self.facts().fixed
    }
    /// What it is, for the report: its version and how xtask runs it.
    fn about(&self) -> String;

    /// Found: the first line of its `--version`, or `None` when it does not run.
    fn version(&self) -> Option<String> {
        version(self.program())
    }

    /// Why it cannot run here, with the install command, or `None` when it can.
    fn missing(&self) -> Option<String> {
        self.version()
            .is_none()
            .then(|| format!("`{}` is not on PATH ({})", self.program(), self.install()))
    }

    /// Starts it on `cpus` with `workers` workers where it has a setting for them (in `group`
    /// when the server runs under a CPU quota), its stderr kept in `log`; returns it and the
    /// address it will serve on.
    fn start(
        &self,
        cpus: &CpuList,
        workers: usize,
        log: &Path,
        group: Option<&Group>,
    ) -> Result<(Proc, String), Failure>;

    /// Waits until it serves at `addr`, or fails with why it did not.
    fn ready(&self, proc: &mut Proc, addr: &str) -> Result<(), Failure>;

    /// Asks it to stop its own way; the harness's SIGTERM (then SIGKILL) ends what is left.
    fn stop(&self, addr: &str);

    /// The peer as the plan sees it, among the servers `--servers` takes.
    fn entry(&self) -> PeerEntry {
        PeerEntry {
            name: self.name(),
            program: self.program(),
            proto: self.proto(),
            suite: self.suite(),
            fixed: self.fixed(),
            missing: self.missing(),
            variant: Variant {
                name: self.name().to_string(),
                binary: self.program().to_string(),
                flags: Vec::new(),
                about: self.about(),
                command: None,
            },
        }
    }
}

/// The first line of `program --version`, or `None` when it does not run.
pub(crate) fn version(program: &str) -> Option<String> {
    Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
}

/// A loopback port the kernel just handed out and took back: free unless another program
/// takes it in between, in which case the peer fails to bind and says so.
pub(crate) fn free_port() -> Result<u16, Failure> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Failure::Start(format!("no free port: {e}")))
}

/// Starts `cmd` (the peer `program`) as the harness starts a server: its stdout closed, its
/// stderr kept in `log`, a process group of its own, on `cpus` and in `group`.
pub(crate) fn spawn(
    program: &str,
    install: &str,
    cmd: &mut Command,
    cpus: &CpuList,
    log: &Path,
    group: Option<&Group>,
) -> Result<Proc, Failure> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    // In its group from its first instruction: a peer may fork its workers as it starts.
    if let Some(g) = group {
        g.join_on_exec(cmd)
            .map_err(|e| Failure::Start(format!("cannot put {program} in its cgroup: {e}")))?;
    }
    let joining = cgroup::or_joining(group);
    let child = cpus::spawn_on(cpus, || cmd.spawn())
        .map_err(|e| Failure::Start(format!("cannot run {program}{joining}: {e:#} ({install})")))?;
    Proc::adopt(child, log).map_err(|e| Failure::Start(format!("{e:#}")))
}

/// Waits until `probe` passes at `addr`, or fails with why it did not: the peer exited (its
/// last words), Ctrl-C, or [`READY_TIMEOUT`] passed (then it is stopped; `what` says what was
/// waited for).
pub(crate) fn wait_ready(
    program: &str,
    server: &mut Proc,
    addr: &str,
    what: &str,
    probe: impl Fn(&SocketAddr) -> bool,
) -> Result<(), Failure> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| Failure::Start(format!("{program} at {addr}: {e}")))?;
    let until = Instant::now() + READY_TIMEOUT;
    // Bounded by the deadline: every pass sleeps or ends.
    loop {
        if probe(&addr) {
            return Ok(());
        }
        if let Some(status) = server.try_wait() {
            return Err(Failure::Start(children::last_words(status, server)));
        }
        if children::interrupted() {
            return Err(Failure::Interrupted);
        }
        if Instant::now() > until {
            server.stop(Duration::from_secs(1));
            return Err(Failure::Start(format!(
                "{program} did not {what} on {addr} within {} s",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
