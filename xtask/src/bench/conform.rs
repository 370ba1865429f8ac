//! Outside servers (`--servers 'ext:NAME=COMMAND'`) held to their protocols: before the sweep,
//! each is started at the first point of each protocol it would run at and put through that
//! protocol's wire checks (`run::conform`); one that fails is left out of the run, the failing
//! check named on the terminal and in the report's "Not in this run". And `cargo xtask conform
//! 'COMMAND'`, which runs those checks alone: the first step of putting a runtime in the ring.
//!
//! It may call the plan and run layers.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;

use super::plan::Plan;
use crate::plan::Usage;
use crate::plan::placement::{CpuList, Placement};
use crate::plan::servers::{EXT, EXT_PROTOS, ext_variant};
use crate::plan::suites::{HttpDriver, HttpPath, KvDriver, Workload, placement_for};
use crate::report::stdout;
use crate::run::conform;
use crate::run::outcome::RunFiles;

/// A directory of this process's own for the checked servers' stderr.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ringside-conform-{}-{name}", std::process::id()))
}

/// Puts each outside server of `plan` through the wire checks of each protocol of its points,
/// and leaves out of the plan (into `not_run`, and `refused`: named in `--servers`, so the
/// run will exit 1) each one that fails.
pub(super) fn gate(plan: &mut Plan) -> Result<()> {
    let outside: Vec<_> = plan
        .servers
        .iter()
        .filter(|v| v.is_ext())
        .cloned()
        .collect();
    for v in outside {
        let mut protos: Vec<&str> = Vec::new();
        let mut failed = None;
        for point in plan.points.iter().filter(|p| v.serves(p.workload)) {
            let proto = point.workload.proto();
            if protos.contains(&proto) {
                continue;
            }
            protos.push(proto);
            let files = RunFiles {
                dir: scratch(&v.name),
                stem: proto.to_string(),
            };
            let place = placement_for(point, &plan.place);
            eprintln!("{}: the {proto} conformance checks", v.name);
            let result = std::fs::create_dir_all(&files.dir)
                .map_err(|e| format!("creating {}: {e}", files.dir.display()))
                .and_then(|()| conform::check(point.workload, &v, &place, &files));
            let _ = std::fs::remove_dir_all(&files.dir);
            if let Err(why) = result {
                failed = Some(why);
                break;
            }
        }
        match failed {
            None if protos.is_empty() => {
                eprintln!(
                    "{}: no point of this run is one it can serve ({})",
                    v.name,
                    EXT_PROTOS.join(", ")
                );
            }
            None => eprintln!("{}: passed ({})", v.name, protos.join(", ")),
            Some(why) => {
                eprintln!("{}: refused, not measured: {why}", v.name);
                let line = format!("{}: refused, not measured: it {why}", v.name);
                plan.not_run.push(line.clone());
                plan.refused.push(line);
                plan.servers.retain(|s| s.name != v.name);
            }
        }
    }
    if plan.servers.is_empty() {
        bail!("no server is left to measure: every one failed its conformance checks");
    }
    Ok(())
}

/// What `conform --help` says after the options.
pub(crate) const HELP: &str = "Exit status:
  0    every check of every protocol in --proto passed
  1    a check failed (the last line names the first that failed, and why), or the
       server could not be started or reached
  2    refused before anything ran (bad options: --cpus, an unknown --proto, a command
       that is empty)";

/// Options of `cargo xtask conform`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ConformArgs {
    /// The server's command line, as `--servers 'ext:NAME=COMMAND'` takes it, with
    /// `{addr}`, `{host}`, `{port}`, `{workers}`, `{cpus}` and `{proto}` filled in (and in the
    /// environment as RINGSIDE_ADDR, _HOST, _PORT, _WORKERS, _CPUS, _PROTO). It is ready when
    /// it prints `READY <addr>` on stdout or when its port accepts.
    pub(crate) command: String,
    /// The protocols to check, comma-separated: echo, kv, http.
    #[arg(long, value_delimiter = ',', default_value = "echo")]
    pub(crate) proto: Vec<String>,
    /// Its workers (`{workers}`).
    #[arg(long, default_value_t = 1)]
    pub(crate) workers: usize,
    /// Its CPUs (`{cpus}`), as `0-3,8`; it is pinned to them. Default: CPU 0.
    #[arg(long, default_value = "0")]
    pub(crate) cpus: String,
}

/// The workload a protocol's checks start a server for.
fn workload(proto: &str) -> Option<Workload> {
    Some(match proto {
        "echo" => Workload::Echo {
            msg_size: 16,
            compute_us: 0,
        },
        "kv" => Workload::Kv {
            get: true,
            pipeline: 1,
            driver: KvDriver::Loadgen,
        },
        "http" => Workload::Http {
            path: HttpPath::Plaintext,
            pipeline: 1,
            driver: HttpDriver::Loadgen,
        },
        _ => return None,
    })
}

/// Runs `cargo xtask conform`: exit 0 when every check of every protocol passed, 1 naming the
/// first that failed, 2 for bad options.
pub(crate) fn run(args: &ConformArgs) -> Result<()> {
    let cpus: CpuList = args
        .cpus
        .parse()
        .map_err(|e| Usage(format!("--cpus {}: {e}", args.cpus)))?;
    let variant = ext_variant(&format!("{EXT}conform={}", args.command))
        .map_err(|e| Usage(format!("{e:#}")))?;
    let place = Placement {
        client_cpus: cpus.clone(),
        server_cpus: cpus,
        workers: args.workers.max(1),
        listen: "127.0.0.1".into(),
    };
    for proto in &args.proto {
        let Some(w) = workload(proto) else {
            return Err(Usage(format!(
                "--proto {proto}: the checks are of {}",
                EXT_PROTOS.join(", ")
            ))
            .into());
        };
        let files = RunFiles {
            dir: scratch("conform"),
            stem: proto.clone(),
        };
        std::fs::create_dir_all(&files.dir)?;
        let result = conform::check(w, &variant, &place, &files);
        let _ = std::fs::remove_dir_all(&files.dir);
        match result {
            Ok(()) => stdout::line(format_args!(
                "{proto}: every check passed ({})",
                check_names(proto)
            )),
            Err(why) => bail!("{proto}: the server {why}"),
        }
    }
    Ok(())
}

/// The names of a protocol's checks, comma-separated.
fn check_names(proto: &str) -> String {
    conformance::wire::checks(proto)
        .unwrap_or_default()
        .iter()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ")
}
