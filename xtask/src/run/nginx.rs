//! nginx, the http suite's peer: xtask writes it a configuration of its own (in the point's
//! run directory, beside the server's log: nothing under /etc or /var is read or written),
//! starts it in the foreground with a master and one worker per server worker, each pinned
//! as our servers pin theirs, on a free loopback port, and knows it ready when a `GET`
//! answers. It answers TechEmpower's two paths with the bytes our servers send, from
//! `return` directives (no file, no module beyond the core). The harness's SIGTERM stops it
//! (nginx's fast shutdown). Where nginx is missing the suite says so, with the install
//! command, and runs the rest. This file is the only place that names it.
//!
//! It may call the plan layer and the run layer's `peer`, `outcome`, `children` and
//! `cgroup`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::plan::placement::CpuList;
use crate::plan::suites::Suite;
use crate::run::cgroup::Group;
use crate::run::children::Proc;
use crate::run::outcome::Failure;
use crate::run::peer::{self, Facts, Peer};

/// The server binary, looked up on PATH (Debian puts it in /usr/sbin).
const SERVER: &str = "nginx";
/// How to get it on Debian and Ubuntu.
pub(crate) const INSTALL: &str = "apt-get install nginx";
/// The name `--servers` and the results give it.
pub(crate) const NAME: &str = "nginx";
/// Connections a worker takes: every point's connections on one worker, with room.
const WORKER_CONNECTIONS: usize = 20_000;

/// nginx as a peer.
#[derive(Debug)]
pub(crate) struct Nginx;

/// The one nginx peer, for `run::peers`.
pub(crate) static PEER: Nginx = Nginx;

/// What nginx is to the harness.
static FACTS: Facts = Facts {
    name: NAME,
    program: SERVER,
    install: INSTALL,
    proto: "http",
    suite: Suite::Http,
    fixed: "xtask writes its configuration",
};

impl Peer for Nginx {
    fn facts(&self) -> &'static Facts {
        &FACTS
    }

    /// nginx has no `--version`: `-v` prints it on stderr.
    fn version(&self) -> Option<String> {
        let out = Command::new(SERVER)
            .arg("-v")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .next()
            .map(|l| l.trim_start_matches("nginx version: ").to_string())
    }

    fn about(&self) -> String {
        format!(
            "{}, a worker process per server worker pinned like ours, `return` of the two bodies, access log off, keep-alive without a request limit",
            self.version().unwrap_or_else(|| SERVER.to_string())
        )
    }

    /// Writes the configuration into `nginx/` beside `log` and starts nginx on `cpus` with
    /// `workers` worker processes, on a free loopback port.
    fn start(
        &self,
        cpus: &CpuList,
        workers: usize,
        log: &Path,
        group: Option<&Group>,
    ) -> Result<(Proc, String), Failure> {
        let port = peer::free_port()?;
        // One directory a point: `<point>.server.nginx/` beside `<point>.server.log`.
        let prefix = log.with_extension("nginx");
        let conf_path = prefix.join("nginx.conf");
        let conf = config(&Config {
            workers,
            cpus,
            port,
            prefix: &prefix,
        });
        std::fs::create_dir_all(&prefix)
            .and_then(|()| std::fs::write(&conf_path, conf))
            .map_err(|e| Failure::Start(format!("writing {}: {e}", conf_path.display())))?;
        let mut cmd = Command::new(SERVER);
        // `-e stderr`: not even the compiled-in error log is opened before the configuration
        // is read; `-p`: relative paths resolve in the point's directory.
        cmd.args(["-e", "stderr", "-p"])
            .arg(&prefix)
            .arg("-c")
            .arg(&conf_path);
        let server = peer::spawn(SERVER, INSTALL, &mut cmd, cpus, log, group)?;
        Ok((server, SocketAddr::from(([127, 0, 0, 1], port)).to_string()))
    }

    /// Waits until a `GET /plaintext` gets its `200` (nginx prints no `READY` line of ours).
    fn ready(&self, server: &mut Proc, addr: &str) -> Result<(), Failure> {
        peer::wait_ready(SERVER, server, addr, "answer GET /plaintext", get_ok)
    }

    /// Nothing of its own: nginx's master handles the harness's SIGTERM (it waits for signals
    /// in `sigsuspend` with none blocked, and its workers unblock all), stops its workers
    /// and exits.
    fn stop(&self, _addr: &str) {}
}

/// What a configuration is made of.
#[derive(Debug)]
struct Config<'a> {
    workers: usize,
    cpus: &'a CpuList,
    port: u16,
    /// Where the pid file and the temp paths go.
    prefix: &'a Path,
}

/// The whole configuration: the same bytes as our servers for `/plaintext` and `/json`
/// (`Server`, `Date` and `Content-Length` are nginx's own), 404 elsewhere.
fn config(c: &Config<'_>) -> String {
    let dir = c.prefix.display();
    // Worker i on the CPU our servers give worker i (`CpuList::for_worker`).
    let affinity: Vec<String> = (0..c.workers.max(1))
        .map(|i| mask(c.cpus.for_worker(i)))
        .collect();
    format!(
        "# Written by `cargo xtask bench` for one http point: nginx beside the ringside servers.
daemon off;
master_process on;
worker_processes {workers};
worker_cpu_affinity {affinity};
worker_rlimit_nofile {nofile};
pid {dir}/nginx.pid;
error_log stderr warn;

events {{
    worker_connections {WORKER_CONNECTIONS};
}}

http {{
    access_log off;
    # Keep-alive as TechEmpower's entries run it: no limit a run reaches.
    keepalive_requests 100000000;
    keepalive_timeout 65s;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /plaintext {{
            default_type text/plain;
            return 200 \"Hello, World!\";
        }}
        location = /json {{
            default_type application/json;
            return 200 '{{\"message\":\"Hello, World!\"}}';
        }}
        location / {{
            return 404;
        }}
    }}
}}
",
        workers = c.workers.max(1),
        affinity = affinity.join(" "),
        nofile = 2 * WORKER_CONNECTIONS + 1024,
        port = c.port,
    )
}

/// nginx's CPU mask of one CPU: a binary number, CPU 0 rightmost.
fn mask(cpu: usize) -> String {
    let mut m = "0".repeat(cpu + 1);
    m.replace_range(0..1, "1");
    m
}

/// Whether a `GET /plaintext` at `addr` gets a `200` within a second.
fn get_ok(addr: &SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(addr, Duration::from_millis(200)) else {
        return false;
    };
    let timeout = Some(Duration::from_secs(1));
    if s.set_read_timeout(timeout).is_err() || s.set_write_timeout(timeout).is_err() {
        return false;
    }
    if s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: ready\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    reply.starts_with(b"HTTP/1.1 200 ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::servers::Inventory;
    use crate::plan::suites::{HttpDriver, HttpPath, KvDriver, Workload};

    #[test]
    fn the_configuration_serves_both_paths_pinned_and_keeps_to_its_directory() {
        let cpus: CpuList = "1,3".parse().unwrap();
        let conf = config(&Config {
            workers: 3,
            cpus: &cpus,
            port: 8123,
            prefix: Path::new("/tmp/run/p1/nginx"),
        });
        for want in [
            "daemon off;",
            "master_process on;",
            "worker_processes 3;",
            // Workers 0, 1, 2 on CPUs 1, 3, 1, as our servers deal them.
            "worker_cpu_affinity 10 1000 10;",
            "pid /tmp/run/p1/nginx/nginx.pid;",
            "error_log stderr warn;",
            "access_log off;",
            "keepalive_requests 100000000;",
            "client_body_temp_path /tmp/run/p1/nginx/client_body;",
            "listen 127.0.0.1:8123 backlog=4096;",
            "location = /plaintext {\n            default_type text/plain;\n            return 200 \"Hello, World!\";",
            "location = /json {\n            default_type application/json;\n            return 200 '{\"message\":\"Hello, World!\"}';",
        ] {
            assert!(conf.contains(want), "{want:?} not in\n{conf}");
        }
        // Nothing outside its directory: every absolute path is under the prefix.
        for word in conf.split_whitespace().filter(|w| w.starts_with('/')) {
            let path = word.trim_end_matches(';');
            assert!(
                path.starts_with("/tmp/run/p1/nginx/")
                    || path.starts_with("/plaintext")
                    || path.starts_with("/json")
                    || path == "/",
                "{path} is outside the point's directory"
            );
        }
        assert_eq!(mask(0), "1");
        assert_eq!(mask(5), "100000");
    }

    #[test]
    fn nginx_serves_http_only() {
        let inv = Inventory {
            peers: vec![PEER.entry()],
            ..Inventory::default()
        };
        let nginx = &inv.peers[0].variant;
        assert_eq!(nginx.binary, SERVER);
        let http = Workload::Http {
            path: HttpPath::Json,
            pipeline: 1,
            driver: HttpDriver::Wrk,
        };
        let kv = Workload::Kv {
            get: true,
            pipeline: 1,
            driver: KvDriver::Loadgen,
        };
        assert!(inv.serves(nginx, http) && !inv.serves(nginx, kv));
        if let Some(why) = &inv.peers[0].missing {
            assert!(why.contains(INSTALL), "{why}");
        }
    }
}
