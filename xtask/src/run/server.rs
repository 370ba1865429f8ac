//! Starting and stopping the server of a point: ours, pinned to the server CPUs and ready
//! when it prints `READY <addr>`; an outside server (`ext:NAME=COMMAND`), its command line
//! filled in ([`fill`]) and started the same way (pinned, in its cgroup, its stderr kept), ready
//! at its READY line or when its port accepts; or a peer (`run::peer`), started, awaited and
//! stopped its own way behind the same two calls.
//!
//! It may call the plan layer (the point, the variant, the placement) and the run layer's
//! `children`, `cpus`, `cgroup` and `peer`.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::plan::placement::Placement;
use crate::plan::servers::Variant;
use crate::plan::suites::Workload;
use crate::run::cgroup::{self, Group};
use crate::run::children::{self, Proc};
use crate::run::cpus;
use crate::run::outcome::{Failure, RunFiles};

/// How long a server may take to be ready.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a server may take to exit after SIGTERM before it is killed.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(5);

/// Asks a peer to stop its own way before the harness's SIGTERM (see `Peer::stop`);
/// ours need nothing more than the signal.
pub(crate) fn ask_to_stop(variant: &Variant, addr: &str) {
    if let Some(peer) = crate::run::find_peer(&variant.binary) {
        peer.stop(addr);
    }
}

/// Starts the server of `variant` for a point of `workload`, pinned to the server CPUs (and in `group`
/// when it runs under a CPU quota), and waits until it serves: for ours, its `READY <addr>`
/// line; a peer, its own way. Returns the running server and its address.
pub(crate) fn start(
    workload: Workload,
    variant: &Variant,
    bin: &Path,
    place: &Placement,
    files: &RunFiles,
    group: Option<&Group>,
) -> Result<(Proc, String), Failure> {
    if let Some(peer) = crate::run::find_peer(&variant.binary) {
        let (mut server, addr) = peer.start(
            &place.server_cpus,
            place.workers,
            &files.path("server.log"),
            group,
        )?;
        peer.ready(&mut server, &addr)?;
        return Ok((server, addr));
    }
    let (cmd, probe) = match &variant.command {
        Some(line) => outside_command(line, workload, place)?,
        None => (our_command(workload, variant, bin, place), None),
    };
    let child = spawn(cmd, bin, place, group)?;
    let (server, ready) = read_ready(child, files)?;
    wait_until_ready(server, &ready, probe)
}

/// An outside server's command line `line` with its placeholders filled in: `{addr}`
/// (`host:port`), `{host}`, `{port}`, `{workers}`, `{cpus}` (as `0-3,8`) and `{proto}`.
pub(crate) fn fill(
    line: &str,
    addr: SocketAddr,
    workers: usize,
    cpus: &str,
    proto: &str,
) -> String {
    line.replace("{addr}", &addr.to_string())
        .replace("{host}", &addr.ip().to_string())
        .replace("{port}", &addr.port().to_string())
        .replace("{workers}", &workers.to_string())
        .replace("{cpus}", cpus)
        .replace("{proto}", proto)
}

/// The hidden task that starts an outside server: `xtask unblocked PROGRAM ARGS...`.
pub(crate) const UNBLOCKED: &str = "unblocked";

/// Unblocks SIGINT, SIGTERM and SIGHUP, which a child inherits blocked from the harness (its
/// threads keep them blocked for its signalfd, `children`), and becomes `program`: ours handle
/// the signals their own way, but an outside server must be stopped by SIGTERM as any program
/// is. Returns only when the exec failed.
pub(crate) fn exec_unblocked(program: &[String]) -> anyhow::Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let mut mask = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        mask.add(sig);
    }
    mask.thread_unblock()?;
    let (first, rest) = program
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("no program to run"))?;
    let e = Command::new(first).args(rest).exec();
    Err(anyhow::anyhow!("cannot run {first}: {e}"))
}

/// An outside server's command: `sh -c 'exec LINE'` with [`fill`]ed placeholders (`exec`, so
/// that the server itself is the process xtask started, through [`exec_unblocked`]), the same
/// values in the environment (`RINGSIDE_ADDR`, `_HOST`, `_PORT`, `_WORKERS`, `_CPUS`,
/// `_PROTO`), on a free port of the listening address, which is probed for readiness.
fn outside_command(
    line: &str,
    workload: Workload,
    place: &Placement,
) -> Result<(Command, Option<SocketAddr>), Failure> {
    let port = crate::run::peer::free_port()?;
    let addr: SocketAddr = format!("{}:{port}", place.listen)
        .parse()
        .map_err(|e| Failure::Start(format!("the address {}:{port}: {e}", place.listen)))?;
    let (cpus, proto) = (place.server_cpus.to_string(), workload.proto());
    let me = std::env::current_exe()
        .map_err(|e| Failure::Start(format!("cannot find the xtask binary to start it: {e}")))?;
    let mut cmd = Command::new(me);
    cmd.args([UNBLOCKED, "sh", "-c"])
        .arg(format!(
            "exec {}",
            fill(line, addr, place.workers, &cpus, proto)
        ))
        .env("RINGSIDE_ADDR", addr.to_string())
        .env("RINGSIDE_HOST", addr.ip().to_string())
        .env("RINGSIDE_PORT", port.to_string())
        .env("RINGSIDE_WORKERS", place.workers.to_string())
        .env("RINGSIDE_CPUS", cpus)
        .env("RINGSIDE_PROTO", proto);
    Ok((cmd, Some(addr)))
}

/// Our server binary's command: the common command line of the point.
fn our_command(workload: Workload, variant: &Variant, bin: &Path, place: &Placement) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["--proto", workload.proto()])
        .args(["--addr", &format!("{}:0", place.listen)])
        .args(["--workers", &place.workers.to_string()])
        .args(["--cpus", &place.server_cpus.to_string()]);
    if let Workload::Echo {
        msg_size,
        compute_us,
    } = workload
        && compute_us > 0
    {
        cmd.args(["--compute-us", &compute_us.to_string()])
            .args(["--msg-size", &msg_size.to_string()]);
    }
    cmd.args(&variant.flags);
    cmd
}

/// Starts a server's command, pinned to the server CPUs and in its cgroup from its first
/// instruction (it joins between fork and exec), so that every process it forks is counted.
fn spawn(
    mut cmd: Command,
    bin: &Path,
    place: &Placement,
    group: Option<&Group>,
) -> Result<std::process::Child, Failure> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(g) = group {
        g.join_on_exec(&mut cmd)
            .map_err(|e| Failure::Start(format!("cannot put the server in its cgroup: {e}")))?;
    }
    cpus::spawn_on(&place.server_cpus, || cmd.spawn()).map_err(|e| {
        let joining = cgroup::or_joining(group);
        Failure::Start(format!("cannot run {}{joining}: {e:#}", what(&cmd, bin)))
    })
}

/// What `cmd` runs, for an error: the binary, or an outside server's command line.
fn what(cmd: &Command, bin: &Path) -> String {
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match args.get(3) {
        Some(line) if args.first().is_some_and(|a| a == UNBLOCKED) => line.clone(),
        _ => bin.display().to_string(),
    }
}

/// The server adopted (its stderr kept), and its stdout read on a thread that sends the
/// address of its READY line.
fn read_ready(
    mut child: std::process::Child,
    files: &RunFiles,
) -> Result<(Proc, mpsc::Receiver<String>), Failure> {
    let stdout = child.stdout.take();
    let server = Proc::adopt(child, &files.path("server.log"))
        .map_err(|e| Failure::Start(format!("{e:#}")))?;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = stdout {
        // The server's stdout carries the READY line and nothing else; the rest is drained so
        // that the server never blocks on a full pipe.
        let spawned = std::thread::Builder::new()
            .name("ready".into())
            .spawn(move || {
                let mut sent = false;
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if !sent && let Some(addr) = line.strip_prefix("READY ") {
                        sent = tx.send(addr.trim().to_string()).is_ok();
                    }
                }
            });
        if let Err(e) = spawned {
            return Err(Failure::Start(format!(
                "cannot read the server's stdout: {e}"
            )));
        }
    }
    Ok((server, rx))
}

/// Waits for the READY line's address, or (an outside server) for `probe` to accept a
/// connection, up to [`READY_TIMEOUT`]; a server that exits or says nothing in time is
/// stopped, and its last words are the failure.
fn wait_until_ready(
    mut server: Proc,
    rx: &mpsc::Receiver<String>,
    probe: Option<SocketAddr>,
) -> Result<(Proc, String), Failure> {
    let until = Instant::now() + READY_TIMEOUT;
    let accepts =
        |a: &SocketAddr| TcpStream::connect_timeout(a, Duration::from_millis(100)).is_ok();
    loop {
        if let Some(a) = probe.filter(accepts) {
            return Ok((server, a.to_string()));
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(addr) => return Ok((server, addr)),
            // An outside server may close its stdout and serve on: its port says when.
            Err(mpsc::RecvTimeoutError::Disconnected) if probe.is_some() => {
                if let Some(status) = server.try_wait() {
                    return Err(Failure::Start(children::last_words(status, &mut server)));
                }
                std::thread::sleep(Duration::from_millis(50));
                if Instant::now() > until {
                    server.stop(Duration::from_secs(1));
                    return Err(Failure::Start(format!(
                        "no READY line and no port accepting within {} s; stderr: {}",
                        READY_TIMEOUT.as_secs(),
                        server.stderr_tail()
                    )));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Its stdout closed before a READY line: it exited, or is about to.
                let words = match server.stop(Duration::from_secs(1)) {
                    Some(status) => children::last_words(status, &mut server),
                    None => server.stderr_tail(),
                };
                return Err(Failure::Start(words));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if children::interrupted() {
                    return Err(Failure::Interrupted);
                }
                if Instant::now() > until {
                    server.stop(Duration::from_secs(1));
                    return Err(Failure::Start(format!(
                        "no READY line within {} s; stderr: {}",
                        READY_TIMEOUT.as_secs(),
                        server.stderr_tail()
                    )));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_in() {
        let addr: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        assert_eq!(
            fill(
                "srv --addr {addr} -h {host} -p {port} -w {workers} -c {cpus} {proto} {x}",
                addr,
                2,
                "0-1",
                "echo"
            ),
            "srv --addr 127.0.0.1:7000 -h 127.0.0.1 -p 7000 -w 2 -c 0-1 echo {x}"
        );
    }
}
