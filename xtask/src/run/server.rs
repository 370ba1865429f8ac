//! Starting and stopping the server of a point: ours, pinned to the server CPUs and ready
//! when it prints `READY <addr>`, or a peer (`run::peer`), started, awaited and stopped its
//! own way behind the same two calls.
//!
//! It may call the plan layer (the point, the variant, the placement) and the run layer's
//! `children`, `cpus`, `cgroup` and `peer`.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::plan::placement::Placement;
use crate::plan::servers::Variant;
use crate::plan::suites::{Point, Workload};
use crate::run::cgroup::Group;
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

/// Starts the server of `variant` for `point`, pinned to the server CPUs (and in `group`
/// when it runs under a CPU quota), and waits until it serves: for ours, its `READY <addr>`
/// line; a peer, its own way. Returns the running server and its address.
pub(crate) fn start(
    point: &Point,
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
    let child = spawn(point, variant, bin, place, group)?;
    let (server, ready) = read_ready(child, files)?;
    wait_until_ready(server, &ready)
}

/// Starts our server binary with the common command line of the point, pinned to the
/// server CPUs, and into its cgroup at once.
fn spawn(
    point: &Point,
    variant: &Variant,
    bin: &Path,
    place: &Placement,
    group: Option<&Group>,
) -> Result<std::process::Child, Failure> {
    let mut cmd = Command::new(bin);
    cmd.args(["--proto", point.workload.proto()])
        .args(["--addr", &format!("{}:0", place.listen)])
        .args(["--workers", &place.workers.to_string()])
        .args(["--cpus", &place.server_cpus.to_string()]);
    if let Workload::Echo {
        msg_size,
        compute_us,
    } = point.workload
        && compute_us > 0
    {
        cmd.args(["--compute-us", &compute_us.to_string()])
            .args(["--msg-size", &msg_size.to_string()]);
    }
    cmd.args(&variant.flags)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cpus::spawn_on(&place.server_cpus, || cmd.spawn())
        .map_err(|e| Failure::Start(format!("cannot run {}: {e:#}", bin.display())))?;
    // Into its cgroup at once: before READY the server has only started its workers, and
    // threads and forked children made later follow the process.
    if let Some(g) = group
        && let Err(e) = g.add(child.id())
    {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Failure::Start(format!(
            "cannot move the server into its cgroup: {e}"
        )));
    }
    Ok(child)
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

/// Waits for the READY line's address, up to [`READY_TIMEOUT`]; a server that exits or says
/// nothing in time is stopped, and its last words are the failure.
fn wait_until_ready(
    mut server: Proc,
    rx: &mpsc::Receiver<String>,
) -> Result<(Proc, String), Failure> {
    let until = Instant::now() + READY_TIMEOUT;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(addr) => return Ok((server, addr)),
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
