//! Load from other hosts: one `loadgen agent` per `--client-hosts` destination, started with
//! the system's OpenSSH client (`BatchMode=yes`, the user's ssh configuration honoured, or
//! `--ssh-config FILE` as `-F FILE`) and driven over its stdin and stdout as a
//! `loadgen::fleet::Fleet`: no listening port for control.
//!
//! The agent is the loadgen binary of this build, or the one `--client-loadgen PATH` names
//! there. This build's is copied through the ssh session itself (no scp, so no SFTP
//! subsystem is needed: a host that accepts the agent's session accepts the copy): a small
//! `sh` script on the host makes a directory only the user can write (`mktemp -d`, mode
//! 0700), writes loadgen there from its stdin, checks its SHA-256 against ours, and only
//! then makes it executable. Each start of an agent checks the SHA-256 again before it runs
//! the file, and the directory is removed when the run ends. No fixed name in a shared
//! directory is ever written or run. A point's connections and rate are split
//! exactly among the agents; their histograms are added. A point writes what a local loadgen
//! writes (`loadgen.json`, `hist`, `hgrm`, `intervals.hlog`, the merged figures, so the record
//! layer reads them as ever) and beside them each agent's own (`agent<i>.json`,
//! `agent<i>.hist`, `agent<i>.hgrm`) and `agents.json` (who ran what, their clocks). An agent
//! that cannot start, fails, or is lost fails the point with its own stderr; the next point
//! starts the fleet again.
//!
//! It may call the plan layer; loadgen's library does the protocol.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use loadgen::fleet::{Fleet, Merged, share_args, split};

use crate::plan::placement::CpuList;

mod remote;

use remote::{INSTALL, RUN, remote_sh, sh_quote, sha256_hex, step_failed};

/// How long ssh may take to bring every agent up.
const START: Duration = Duration::from_secs(60);

/// The loadgen the hosts run.
#[derive(Debug)]
enum Loadgen {
    /// `--client-loadgen PATH`: there already, run as it is.
    Given(String),
    /// This build's, copied to each host by [`Agents::prepare`].
    Copied {
        local: PathBuf,
        /// Its SHA-256, in hex.
        sha256: String,
        /// The directory each host's copy is in, in the order of the hosts, once copied.
        dirs: Mutex<Vec<(String, String)>>,
    },
}

/// The client hosts of a run.
#[derive(Debug)]
pub(crate) struct Agents {
    hosts: Vec<String>,
    ssh_config: Option<PathBuf>,
    loadgen: Loadgen,
    /// Pin the agents' workers (`--client-cpus` on each host); `None` leaves them unpinned,
    /// with a worker per CPU the host has.
    client_cpus: Option<CpuList>,
    fleet: Mutex<Option<Fleet>>,
}

/// The files of one point driven by the agents.
#[derive(Debug)]
pub(crate) struct PointFiles<'a> {
    pub(crate) json: &'a Path,
    pub(crate) hist: &'a Path,
    pub(crate) hgrm: &'a Path,
    pub(crate) interval_log: &'a Path,
    /// Where each agent's files go: `<dir>/<stem>.agent<i>.json` and so on.
    pub(crate) dir: &'a Path,
    pub(crate) stem: &'a str,
}

impl PointFiles<'_> {
    fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.stem))
    }
}

impl Agents {
    /// Agents on `hosts`, running `given` there or a copy of `local`.
    pub(crate) fn new(
        hosts: Vec<String>,
        ssh_config: Option<PathBuf>,
        given: Option<String>,
        local: &Path,
        client_cpus: Option<CpuList>,
    ) -> Result<Agents> {
        if hosts.is_empty() {
            bail!("--client-hosts names no host");
        }
        let loadgen = match given {
            Some(path) => Loadgen::Given(path),
            None => {
                let bytes =
                    std::fs::read(local).with_context(|| format!("reading {}", local.display()))?;
                Loadgen::Copied {
                    local: local.to_path_buf(),
                    sha256: sha256_hex(&bytes),
                    dirs: Mutex::new(Vec::new()),
                }
            }
        };
        Ok(Agents {
            hosts,
            ssh_config,
            loadgen,
            client_cpus,
            fleet: Mutex::new(None),
        })
    }

    /// `ssh` with the options every call takes, to `host`, running `remote` there.
    fn ssh_command(&self, host: &str, remote: &str) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args([
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]);
        if let Some(cfg) = &self.ssh_config {
            cmd.arg("-F").arg(cfg);
        }
        cmd.args(["-T", host, "--", remote]);
        cmd
    }

    /// Copies loadgen to every host (unless `--client-loadgen` names one there), then checks
    /// that each agent starts and speaks this build's protocol.
    pub(crate) fn prepare(&self) -> Result<()> {
        if let Loadgen::Copied {
            local,
            sha256,
            dirs,
        } = &self.loadgen
        {
            for host in &self.hosts {
                let dir = self.copy_to(host, local, sha256)?;
                eprintln!(
                    "client host {host}: loadgen copied to {dir}/loadgen, SHA-256 {}… checked",
                    &sha256[..12]
                );
                lock(dirs).push((host.clone(), dir));
            }
        }
        let fleet = self.start()?;
        for (name, host, cpus) in fleet.hosts() {
            eprintln!("client host {name}: {host}, {cpus} CPUs, loadgen agent ready");
        }
        *lock(&self.fleet) = Some(fleet);
        Ok(())
    }

    /// Sends `local` to `host` through an ssh session, into a directory of its own there
    /// (`INSTALL`); returns the directory.
    fn copy_to(&self, host: &str, local: &Path, sha256: &str) -> Result<String> {
        let step = "copying loadgen";
        let mut file = File::open(local).with_context(|| format!("reading {}", local.display()))?;
        let mut child = self
            .ssh_command(host, &remote_sh(INSTALL, &[sha256]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running ssh (install openssh-client)")?;
        let mut stdin = child.stdin.take().context("ssh's stdin")?;
        // Written beside the wait: a host that fails early stops reading, and its stderr says
        // why (a write cut short then is no error of its own).
        let writer = std::thread::spawn(move || {
            let copied = std::io::copy(&mut file, &mut stdin);
            drop(stdin);
            copied
        });
        let out = child.wait_with_output().context("waiting for ssh")?;
        let written = writer.join().unwrap_or(Ok(0));
        if !out.status.success() {
            let e = step_failed(host, step, &out);
            if out.status.code() == Some(255) {
                return Err(e);
            }
            bail!("{e}; fix the host, or give a loadgen that is there with --client-loadgen PATH");
        }
        written.with_context(|| {
            format!("{step} to client host {host}: sending {}", local.display())
        })?;
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !dir.starts_with('/') || dir.contains('\n') {
            bail!("{step} to client host {host}: the host named no directory (it said {dir:?})");
        }
        Ok(dir)
    }

    /// The command that starts the agent on `host` (the `i`th).
    fn agent_command(&self, i: usize, host: &str) -> Result<Command> {
        let remote = match &self.loadgen {
            // As given, for the host's shell (`~/bin/loadgen` works).
            Loadgen::Given(path) => format!("{path} agent"),
            Loadgen::Copied { sha256, dirs, .. } => {
                let dirs = lock(dirs);
                let Some((_, dir)) = dirs.get(i).filter(|(h, _)| h == host) else {
                    bail!("no copy of loadgen on client host {host}");
                };
                remote_sh(RUN, &[dir, sha256, "agent"])
            }
        };
        Ok(self.ssh_command(host, &remote))
    }

    fn start(&self) -> Result<Fleet> {
        let mut agents = Vec::new();
        for (i, host) in self.hosts.iter().enumerate() {
            agents.push((host.clone(), self.agent_command(i, host)?));
        }
        Fleet::start(agents, START).map_err(|e| anyhow!("{e}"))
    }

    /// Removes each host's copy of loadgen (a host that cannot be reached now is named).
    fn remove_copies(&self) {
        let Loadgen::Copied { dirs, .. } = &self.loadgen else {
            return;
        };
        for (host, dir) in std::mem::take(&mut *lock(dirs)) {
            let rm = format!("rm -rf -- {}", sh_quote(&dir));
            match self.ssh_command(&host, &rm).stdin(Stdio::null()).output() {
                Ok(out) if out.status.success() => {}
                Ok(out) => eprintln!(
                    "warning: {:#}; remove {dir} there by hand",
                    step_failed(&host, "removing the copy of loadgen", &out)
                ),
                Err(e) => eprintln!("warning: cannot run ssh to remove {dir} on {host}: {e}"),
            }
        }
    }

    /// Runs one point: `args` is loadgen's command line for the whole load (without output
    /// files), split among the agents; `on_go` is called as the go is sent. Returns the merged
    /// run, or why there is none.
    #[allow(clippy::too_many_arguments)] // What a point's run needs, each of its own kind.
    pub(crate) fn run(
        &self,
        args: &[String],
        conns: usize,
        rate: Option<f64>,
        warmup: f64,
        run_timeout: Duration,
        files: &PointFiles<'_>,
        on_go: &dyn Fn(),
    ) -> Result<Merged, String> {
        let mut slot = lock(&self.fleet);
        if slot.is_none() {
            *slot = Some(self.start().map_err(|e| e.to_string())?);
        }
        let fleet = slot.as_mut().expect("started above");
        let hosts = fleet.hosts();
        let shares = split(conns, rate, fleet.len());
        if shares.len() < fleet.len() {
            return Err(format!(
                "{conns} connections cannot be split among {} client hosts",
                fleet.len()
            ));
        }
        let per_agent: Vec<Vec<String>> = shares
            .iter()
            .zip(&hosts)
            .map(|(share, (_, _, cpus))| agent_args(args, share, self.client_cpus.as_ref(), *cpus))
            .collect();
        let ready = Duration::from_secs_f64(10.0 + conns as f64 / 250.0 + 10.0);
        let merged = match fleet.run_telling_go(&per_agent, ready, run_timeout, on_go) {
            Ok(m) => m,
            Err(e) => {
                // The fleet called its agents off; the next point starts a new one.
                *slot = None;
                return Err(e.to_string());
            }
        };
        write_files(&merged, &shares, warmup, files).map_err(|e| format!("{e:#}"))?;
        Ok(merged)
    }

    /// Ends the agents and removes the copies of loadgen (again: nothing).
    pub(crate) fn stop(&self) {
        let fleet = lock(&self.fleet).take();
        if let Some(fleet) = fleet {
            fleet.stop(Duration::from_secs(5));
        }
        self.remove_copies();
    }
}

impl Drop for Agents {
    /// A run that ends early (an error, a failed copy to the next host) leaves no agent and
    /// no copy behind either.
    fn drop(&mut self) {
        self.stop();
    }
}

/// The value behind `m`, even if a thread panicked holding it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One agent's command line: its share of `args`, pinned to `client_cpus` with a worker a CPU
/// where given, else unpinned with a worker per CPU its host has (`host_cpus`); never more
/// workers than connections.
fn agent_args(
    args: &[String],
    share: &loadgen::fleet::Share,
    client_cpus: Option<&CpuList>,
    host_cpus: usize,
) -> Vec<String> {
    let mut a = share_args(args, share);
    let workers = client_cpus.map_or(host_cpus, CpuList::len);
    if let Some(list) = client_cpus {
        a.extend(["--cpus".into(), list.to_string()]);
    }
    let threads = workers.min(share.conns).max(1);
    a.extend(["--threads".into(), threads.to_string()]);
    a
}

/// The merged figures where a local loadgen writes its own, and each agent's beside them.
fn write_files(
    merged: &Merged,
    shares: &[loadgen::fleet::Share],
    warmup: f64,
    files: &PointFiles<'_>,
) -> Result<()> {
    let create = |p: &Path| -> Result<BufWriter<File>> {
        Ok(BufWriter::new(
            File::create(p).with_context(|| format!("writing {}", p.display()))?,
        ))
    };
    let mut summary = merged.summary.clone();
    // The server's window starts a warmup after the go, on this host's clock.
    summary.histograms.window_start = SystemTime::UNIX_EPOCH
        + Duration::from_nanos(merged.go_wall_ns)
        + Duration::from_secs_f64(warmup);
    serde_json::to_writer_pretty(create(files.json)?, &summary)?;
    summary.histograms.write_v2(&mut create(files.hist)?)?;
    summary.histograms.write_hgrm(&mut create(files.hgrm)?)?;
    summary
        .histograms
        .write_interval_log(&mut create(files.interval_log)?)?;
    let mut who = Vec::new();
    for (i, (a, share)) in merged.agents.iter().zip(shares).enumerate() {
        let stem = format!("agent{i}");
        serde_json::to_writer_pretty(create(&files.path(&format!("{stem}.json")))?, &a.summary)?;
        a.summary
            .histograms
            .write_v2(&mut create(&files.path(&format!("{stem}.hist")))?)?;
        a.summary
            .histograms
            .write_hgrm(&mut create(&files.path(&format!("{stem}.hgrm")))?)?;
        who.push(serde_json::json!({
            "agent": a.agent,
            "host": a.host,
            "conns": share.conns,
            "rate": share.rate,
            "messages": a.summary.messages,
            "throughput_per_sec": a.summary.throughput_per_sec,
            "p99_us": a.summary.latency_us.p99,
            "client_cpu_per_msg_us": a.summary.client_cpu_per_msg_us,
            "client_bound": a.summary.client_bound,
            "clock_offset_ns": a.clock.offset_ns,
            "clock_uncertainty_ns": a.clock.uncertainty_ns,
        }));
    }
    serde_json::to_writer_pretty(create(&files.path("agents.json"))?, &who)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen::fleet::Share;

    #[test]
    fn an_agent_gets_a_worker_per_cpu_and_never_more_than_connections() {
        let base: Vec<String> = ["echo", "--conns", "100"].map(String::from).to_vec();
        let share = Share {
            index: 0,
            conns: 50,
            rate: None,
        };
        let cpus: CpuList = "0-3".parse().unwrap();
        let a = agent_args(&base, &share, Some(&cpus), 16);
        assert_eq!(
            a,
            [
                "echo",
                "--conns",
                "50",
                "--seed",
                "1",
                "--cpus",
                &cpus.to_string(),
                "--threads",
                "4"
            ]
        );
        let a = agent_args(&base, &share, None, 16);
        assert_eq!(
            a,
            ["echo", "--conns", "50", "--seed", "1", "--threads", "16"]
        );
        let few = Share {
            index: 1,
            conns: 2,
            rate: None,
        };
        assert_eq!(agent_args(&base, &few, None, 16).last().unwrap(), "2");
    }
}
