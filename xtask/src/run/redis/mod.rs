//! redis-server, the kv suite's peer: started with persistence off on a free loopback port,
//! pinned like the others, ready when it accepts a connection, stopped by `SHUTDOWN NOSAVE`.
//! Its companion client, redis-benchmark, is `benchmark`. Both are optional programs: where
//! one is missing the suite says so, with the install command, and runs what it can. Beside
//! the list in `run/mod.rs`, no other place of the run layer names them.
//!
//! It may call the plan layer and the run layer's `peer`, `outside`, `outcome`, `children`,
//! `cpus` and `cgroup`.

pub(crate) mod benchmark;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::plan::placement::CpuList;
use crate::plan::suites::Suite;
use crate::run::cgroup::Group;
use crate::run::children::Proc;
use crate::run::outcome::Failure;
use crate::run::peer::{self, Facts, Peer};

/// The server binary, looked up on PATH.
const SERVER: &str = "redis-server";
/// How to get redis-server and redis-benchmark on Debian and Ubuntu.
pub(crate) const INSTALL: &str = "apt-get install redis-server redis-tools";
/// The name `--servers` and the results give it.
pub(crate) const NAME: &str = "redis";

/// redis-server as a peer.
#[derive(Debug)]
pub(crate) struct Redis;

/// The one redis-server peer, for `run::peers`.
pub(crate) static PEER: Redis = Redis;

/// What redis-server is to the harness.
static FACTS: Facts = Facts {
    name: NAME,
    program: SERVER,
    install: INSTALL,
    proto: "kv",
    suite: Suite::Kv,
    fixed: "xtask starts it with persistence off",
};

impl Peer for Redis {
    fn facts(&self) -> &'static Facts {
        &FACTS
    }

    /// Its flags are its own (see `start`), so none are listed for the `--help`
    /// check the ringside servers get.
    fn about(&self) -> String {
        format!(
            "{}, persistence off (--save '' --appendonly no), one I/O thread",
            peer::version(SERVER).unwrap_or_else(|| SERVER.to_string())
        )
    }

    /// Starts redis-server pinned to `cpus`, persistence off, on a free loopback port (its one
    /// I/O thread whatever the workers).
    fn start(
        &self,
        cpus: &CpuList,
        _workers: usize,
        log: &Path,
        group: Option<&Group>,
    ) -> Result<(Proc, String), Failure> {
        let port = peer::free_port()?;
        let mut cmd = Command::new(SERVER);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            // Thousands of clients, as the other servers take them.
            .args(["--maxclients", "20000", "--tcp-backlog", "4096"])
            // Its log on stderr, where the harness keeps a server's last words.
            .args(["--logfile", "/dev/stderr"]);
        let server = peer::spawn(SERVER, INSTALL, &mut cmd, cpus, log, group)?;
        Ok((server, SocketAddr::from(([127, 0, 0, 1], port)).to_string()))
    }

    /// Waits until it accepts connections (it prints no `READY` line of ours).
    fn ready(&self, server: &mut Proc, addr: &str) -> Result<(), Failure> {
        peer::wait_ready(SERVER, server, addr, "accept connections", |a| {
            TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok()
        })
    }

    /// Asks redis-server to exit (`SHUTDOWN NOSAVE`) and waits up to 2 s for it to close the
    /// connection. The harness blocks SIGTERM (it reads its stop signals from a signalfd) and
    /// children inherit the blocked mask: the ringside servers read theirs from a signalfd
    /// too, but redis-server, which installs handlers, would never see the SIGTERM of a stop
    /// and be killed after the grace period.
    fn stop(&self, addr: &str) {
        let Ok(addr) = addr.parse::<SocketAddr>() else {
            return;
        };
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            return;
        };
        let timeout = Some(Duration::from_secs(2));
        if s.set_write_timeout(timeout).is_err() || s.set_read_timeout(timeout).is_err() {
            return;
        }
        if s.write_all(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
            .is_err()
        {
            return;
        }
        // The server closes the connection as it exits; whatever happens, the stop that follows
        // (SIGTERM, then SIGKILL) ends it.
        let mut sink = [0u8; 256];
        let until = Instant::now() + Duration::from_secs(2);
        // Bounded by the deadline and the read timeout.
        while Instant::now() < until {
            match s.read(&mut sink) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::servers::{Inventory, Variant};
    use crate::plan::suites::{KvDriver, Workload};

    #[test]
    fn redis_and_kv_owners_serve_kv_only_and_process_mode_no_kv() {
        let inv = Inventory {
            peers: vec![PEER.entry()],
            ..Inventory::default()
        };
        let kv = Workload::Kv {
            get: true,
            pipeline: 1,
            driver: KvDriver::Loadgen,
        };
        let echo = Workload::Echo {
            msg_size: 16,
            compute_us: 0,
        };
        let redis = &inv.peers[0].variant;
        assert_eq!(redis.binary, SERVER);
        assert!(inv.serves(redis, kv) && !inv.serves(redis, echo));
        let process = Variant {
            name: "threads-process".into(),
            binary: "srv-threads".into(),
            flags: vec!["--mode".into(), "process".into()],
            about: String::new(),
            command: None,
        };
        assert!(!inv.serves(&process, kv) && inv.serves(&process, echo));
        let owner = Variant {
            name: "fiber+kv-owner".into(),
            binary: "srv-fiber".into(),
            flags: vec!["--kv-owner".into()],
            about: String::new(),
            command: None,
        };
        assert!(inv.serves(&owner, kv) && !inv.serves(&owner, echo));
    }
}
