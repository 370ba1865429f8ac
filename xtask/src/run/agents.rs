//! Load from other hosts: one `loadgen agent` per `--client-hosts` destination, started with
//! the system's OpenSSH client (`BatchMode=yes`, the user's ssh configuration honoured, or
//! `--ssh-config FILE` as `-F FILE`) and driven over its stdin and stdout as a
//! `loadgen::fleet::Fleet`: no listening port for control.
//!
//! The agent is the loadgen binary of this build, copied to each host once per run
//! (`/tmp/ringside-loadgen-<hash>`, so an unchanged binary is copied again only by name), or
//! the one `--client-loadgen PATH` names there. A point's connections and rate are split
//! exactly among the agents; their histograms are added. A point writes what a local loadgen
//! writes (`loadgen.json`, `hist`, `hgrm`, `intervals.hlog`, the merged figures, so the record
//! layer reads them as ever) and beside them each agent's own (`agent<i>.json`,
//! `agent<i>.hist`, `agent<i>.hgrm`) and `agents.json` (who ran what, their clocks). An agent
//! that cannot start, fails, or is lost fails the point with its own stderr; the next point
//! starts the fleet again.
//!
//! It may call the plan layer; loadgen's library does the protocol.

use std::collections::hash_map::DefaultHasher;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use loadgen::fleet::{Fleet, Merged, share_args, split};

use crate::plan::placement::CpuList;

/// How long ssh may take to bring every agent up.
const START: Duration = Duration::from_secs(60);

/// The client hosts of a run.
#[derive(Debug)]
pub(crate) struct Agents {
    hosts: Vec<String>,
    ssh_config: Option<PathBuf>,
    /// The loadgen each host runs.
    remote: String,
    /// Copy this build's loadgen to `remote` before the first point.
    copy_from: Option<PathBuf>,
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
        let (remote, copy_from) = match given {
            Some(path) => (path, None),
            None => {
                let bytes =
                    std::fs::read(local).with_context(|| format!("reading {}", local.display()))?;
                let mut h = DefaultHasher::new();
                bytes.hash(&mut h);
                (
                    format!("/tmp/ringside-loadgen-{:016x}", h.finish()),
                    Some(local.to_path_buf()),
                )
            }
        };
        Ok(Agents {
            hosts,
            ssh_config,
            remote,
            copy_from,
            client_cpus,
            fleet: Mutex::new(None),
        })
    }

    /// `ssh` (or `scp`) with the options every call takes.
    fn ssh_command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
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
        cmd
    }

    /// Copies loadgen to every host (unless `--client-loadgen` names one there), then checks
    /// that each agent starts and speaks this build's protocol.
    pub(crate) fn prepare(&self) -> Result<()> {
        if let Some(local) = &self.copy_from {
            for host in &self.hosts {
                let out = self
                    .ssh_command("scp")
                    .arg("-q")
                    .arg(local)
                    .arg(format!("{host}:{}", self.remote))
                    .output()
                    .context("running scp (install openssh-client)")?;
                if !out.status.success() {
                    bail!(
                        "copying loadgen to {host} failed ({}): {}; give a loadgen that is \
                         there with --client-loadgen PATH",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
            }
        }
        let fleet = self.start()?;
        for (name, host, cpus) in fleet.hosts() {
            eprintln!("client host {name}: {host}, {cpus} CPUs, loadgen agent ready");
        }
        *self
            .fleet
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fleet);
        Ok(())
    }

    fn start(&self) -> Result<Fleet> {
        let agents = self
            .hosts
            .iter()
            .map(|host| {
                let mut cmd = self.ssh_command("ssh");
                cmd.args(["-T", host.as_str(), "--", self.remote.as_str(), "agent"]);
                (host.clone(), cmd)
            })
            .collect();
        Fleet::start(agents, START).map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Runs one point: `args` is loadgen's command line for the whole load (without output
    /// files), split among the agents. Returns the merged run, or why there is none.
    pub(crate) fn run(
        &self,
        args: &[String],
        conns: usize,
        rate: Option<f64>,
        warmup: f64,
        run_timeout: Duration,
        files: &PointFiles<'_>,
    ) -> Result<Merged, String> {
        let mut slot = self
            .fleet
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
        let merged = match fleet.run(&per_agent, ready, run_timeout) {
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

    /// Ends the agents.
    pub(crate) fn stop(&self) {
        if let Some(fleet) = self
            .fleet
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            fleet.stop(Duration::from_secs(5));
        }
    }
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
                "--cpus",
                &cpus.to_string(),
                "--threads",
                "4"
            ]
        );
        let a = agent_args(&base, &share, None, 16);
        assert_eq!(a, ["echo", "--conns", "50", "--threads", "16"]);
        let few = Share {
            conns: 2,
            rate: None,
        };
        assert_eq!(agent_args(&base, &few, None, 16).last().unwrap(), "2");
    }
}
