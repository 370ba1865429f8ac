//! netbed: the test bed on which ringside's multi-host load (`cargo xtask bench
//! --client-hosts`) is tested on one machine.
//!
//! A [`Testbed`] is one server network namespace and N client namespaces, each client
//! joined to the server by its own veth pair, and (the ssh tier) an sshd in each client
//! namespace with a temporary host key and a temporary authorized key, plus an ssh client
//! configuration naming the clients `client0`, `client1`, …. A program run in the server
//! namespace reaches client k as `ssh -F <config> clientk`, as it would reach a client host
//! of a real testbed.
//!
//! It is not a network emulator (no delay, loss or bandwidth shaping: veth pairs are as
//! fast as the machine) and not a container: the namespaces share the file system, the
//! users and the processes' view of the machine; only the network is separate. It needs
//! root and `ip netns`; the ssh tier also `/usr/sbin/sshd`, `ssh` and `ssh-keygen`. Tests
//! call [`Testbed::probe`] first and skip with its message where it fails.
//!
//! # Address plan
//!
//! Every address comes from 198.18.0.0/15, the range RFC 2544 sets aside for
//! benchmarking. No namespace is linked to the root namespace and none has a default route,
//! so nothing sent inside the test bed can leave it, and the root namespace has no route
//! into it.
//!
//! ```text
//!   root namespace: untouched, no link to any of the below
//!
//!   ringside-<pid>-<n>-server
//!   ┌──────────────────────────────────────────────┐
//!   │ lo         127.0.0.1, 198.19.0.1/32           │  <- the server address every
//!   │ veth-c0    198.18.0.1/24 ──┐                  │     client uses (server_addr)
//!   │ veth-c1    198.18.1.1/24 ──┼──┐               │
//!   │ …                          │  │               │
//!   └────────────────────────────┼──┼───────────────┘
//!                     veth pair  │  │  veth pair
//!   ringside-<pid>-<n>-client0   │  │   ringside-<pid>-<n>-client1
//!   ┌────────────────────────────┴┐ ┌┴────────────────────────────┐
//!   │ veth0  198.18.0.2/24        │ │ veth0  198.18.1.2/24        │
//!   │ lo     127.0.0.1            │ │ lo     127.0.0.1            │
//!   │ route  198.19.0.1/32        │ │ route  198.19.0.1/32        │
//!   │        via 198.18.0.1       │ │        via 198.18.1.1       │
//!   │ sshd   198.18.0.2:22        │ │ sshd   198.18.1.2:22        │
//!   └─────────────────────────────┘ └─────────────────────────────┘
//! ```
//!
//! Client k's link is 198.18.k.0/24: the server side is 198.18.k.1, the client side
//! 198.18.k.2 ([`Testbed::client_addr`], what the server side uses to reach the client).
//! The server also has 198.19.0.1 on its loopback, and each client a host route to it
//! over its link, so that one address ([`Testbed::server_addr`]) reaches a server
//! listening on `0.0.0.0` in the server namespace from every client. Clients do not reach
//! one another: the server namespace does not forward (a new namespace's `ip_forward` is
//! 0) and the clients have no route beyond their own link and that host route.
//!
//! # Names and cleanup
//!
//! Namespaces are named `ringside-<pid>-<n>-server` and `ringside-<pid>-<n>-client<k>`,
//! `n` counting the test beds of this process, so tests in parallel, in one process or
//! several, do not collide. Interfaces are created inside the namespaces (`ip -n`), never
//! in the root namespace, so their names only need to be unique within each. Dropping a
//! [`Testbed`] kills its sshds and every other process still in its namespaces, deletes
//! the namespaces (their veth pairs go with them) and removes the temporary directory; a
//! [`Testbed`] whose setup fails is dropped the same way, undoing what was made. A run
//! killed with SIGKILL cannot clean up, so the first [`Builder::build`] of a process also
//! removes namespaces of this naming whose pid is no longer alive (killing what still runs
//! in them, an orphaned sshd) and the ssh tier's temporary directories of such a pid,
//! `ringside-netbed-<pid>-*`. A pid is judged alive by `/proc` of this machine's pid
//! namespace: two containers that share `/run/netns` or the temporary directory but not
//! their pids would take each other's for stale.
//!
//! # Example
//!
//! ```no_run
//! use std::process::Command;
//!
//! let testbed = match netbed::Testbed::probe() {
//!     Ok(()) => netbed::Testbed::new(2)?,
//!     Err(skip) => {
//!         eprintln!("skipped: {skip}");
//!         return Ok(());
//!     }
//! };
//! // In the server namespace, as xtask would start an agent on a client host:
//! let out = testbed
//!     .in_server("ssh")
//!     .arg("-F")
//!     .arg(testbed.ssh_config())
//!     .args([testbed.ssh_host(1).as_str(), "ip", "-o", "addr"])
//!     .output()?;
//! assert!(String::from_utf8_lossy(&out.stdout).contains(&testbed.client_addr(1).to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod cmd;
mod error;
mod probe;
mod ssh;
mod stale;

use std::ffi::OsStr;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use std::{fs, io, process};

pub use cmd::bounded_output;
pub use error::{Error, Result};
pub use probe::Skip;

/// The most clients a test bed has: client k's link is 198.18.k.0/24.
pub const MAX_CLIENTS: usize = 256;

/// The address of the server namespace every client reaches it by (on its loopback).
const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

/// The sshd used unless [`Builder::sshd`] or `NETBED_SSHD` says otherwise.
const DEFAULT_SSHD: &str = "/usr/sbin/sshd";

/// The environment variable that overrides the sshd path: set it to a missing file to see
/// how the ssh tier's tests skip.
pub const SSHD_ENV: &str = "NETBED_SSHD";

/// How long one `ip` command may take.
const IP_TIMEOUT: Duration = Duration::from_secs(10);

/// What names this process's test beds apart: `ringside-<pid>-<n>`.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// How to build a [`Testbed`]: how many clients, and whether with the ssh tier.
#[derive(Debug, Clone)]
pub struct Builder {
    clients: usize,
    ssh: bool,
    sshd: PathBuf,
    sftp: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// One client, with the ssh tier, and the sshd of `NETBED_SSHD` or `/usr/sbin/sshd`.
    pub fn new() -> Self {
        let sshd =
            std::env::var_os(SSHD_ENV).map_or_else(|| PathBuf::from(DEFAULT_SSHD), PathBuf::from);
        Self {
            clients: 1,
            ssh: true,
            sshd,
            sftp: true,
        }
    }

    /// The number of client namespaces, 1 to [`MAX_CLIENTS`].
    pub fn clients(mut self, clients: usize) -> Self {
        self.clients = clients;
        self
    }

    /// Whether to start an sshd in each client namespace (the default) or only build the
    /// namespaces.
    pub fn ssh(mut self, ssh: bool) -> Self {
        self.ssh = ssh;
        self
    }

    /// Whether the sshds serve the SFTP subsystem (the default, which `scp` needs), or have
    /// no `Subsystem sftp` line, as minimal and hardened hosts often have not.
    pub fn sftp(mut self, sftp: bool) -> Self {
        self.sftp = sftp;
        self
    }

    /// The sshd binary (an absolute path: sshd re-executes itself for each connection).
    pub fn sshd(mut self, path: impl Into<PathBuf>) -> Self {
        self.sshd = path.into();
        self
    }

    /// Whether this machine can host the test bed this builder describes: the tools it
    /// needs, root, and a namespace that can be created and deleted. The error says why
    /// not in one line, with what to install.
    pub fn probe(&self) -> Result<(), Skip> {
        probe::probe(self.ssh.then_some(self.sshd.as_path()))
    }

    /// Builds the test bed: the namespaces, their links and addresses, and with the ssh
    /// tier an sshd per client, each answering a login from the server namespace before
    /// this returns. On an error, whatever was made is undone.
    pub fn build(&self) -> Result<Testbed> {
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            return Err(Error::Clients(self.clients));
        }
        stale::remove_once();
        let prefix = format!(
            "ringside-{}-{}",
            process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut testbed = Testbed {
            server: format!("{prefix}-server"),
            clients: (0..self.clients)
                .map(|k| format!("{prefix}-client{k}"))
                .collect(),
            made: Vec::new(),
            ssh: None,
        };
        // From here on an early return drops `testbed`, which deletes what `made` lists.
        testbed.add_namespace(0)?;
        let server = testbed.server.clone();
        ip([
            "-n",
            &server,
            "addr",
            "add",
            &format!("{SERVER_ADDR}/32"),
            "dev",
            "lo",
        ])?;
        for k in 0..self.clients {
            testbed.add_namespace(k + 1)?;
            testbed.link_client(k)?;
        }
        if self.ssh {
            let tier = testbed.ssh.insert(ssh::Tier::new()?);
            for (k, namespace) in testbed.clients.iter().enumerate() {
                tier.start_sshd(
                    &self.sshd,
                    namespace,
                    &client_name(k),
                    client_addr(k),
                    self.sftp,
                )?;
            }
            tier.write_client_config()?;
            tier.wait_until_ready(&testbed.server)?;
        }
        Ok(testbed)
    }
}

/// A server namespace and its client namespaces, with an sshd in each client namespace
/// when built with the ssh tier. Dropping it removes them all.
#[derive(Debug)]
pub struct Testbed {
    server: String,
    clients: Vec<String>,
    /// The namespaces this test bed created, which `Drop` deletes.
    ///
    /// # Invariant
    /// A name is pushed right after its `ip netns add` succeeds, before any other step
    /// can fail, so a failed setup leaves nothing that `Drop` does not know about.
    made: Vec<String>,
    ssh: Option<ssh::Tier>,
}

impl Testbed {
    /// Whether this machine can host a test bed with the ssh tier (see [`Builder::probe`]).
    pub fn probe() -> Result<(), Skip> {
        Builder::new().probe()
    }

    /// A test bed of `clients` client namespaces with the ssh tier (see [`Builder::build`]).
    pub fn new(clients: usize) -> Result<Testbed> {
        Builder::new().clients(clients).build()
    }

    /// A builder, for a test bed without the ssh tier or with another sshd.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The number of client namespaces.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// The server namespace's name, as `ip netns` knows it.
    pub fn server_namespace(&self) -> &str {
        &self.server
    }

    /// Client `k`'s namespace name.
    ///
    /// # Panics
    /// If `k` is not below [`Testbed::clients`].
    pub fn client_namespace(&self, k: usize) -> &str {
        &self.clients[k]
    }

    /// The address every client reaches the server namespace by; a server listening on
    /// `0.0.0.0` (or on this address) in the server namespace accepts there.
    pub fn server_addr(&self) -> Ipv4Addr {
        SERVER_ADDR
    }

    /// The address the server namespace reaches client `k` by (where its sshd listens).
    ///
    /// # Panics
    /// If `k` is not below [`Testbed::clients`].
    pub fn client_addr(&self, k: usize) -> Ipv4Addr {
        assert!(
            k < self.clients.len(),
            "client {k} of a test bed of {}",
            self.clients.len()
        );
        client_addr(k)
    }

    /// Client `k`'s name in [`Testbed::ssh_config`]: `client<k>`, a destination for `ssh`.
    pub fn ssh_host(&self, k: usize) -> String {
        assert!(
            k < self.clients.len(),
            "client {k} of a test bed of {}",
            self.clients.len()
        );
        client_name(k)
    }

    /// The ssh client configuration, a `Host client<k>` entry per client (address, root,
    /// the temporary key and known hosts, `BatchMode yes`), for `ssh -F` run in the server
    /// namespace.
    ///
    /// # Panics
    /// If the test bed was built without the ssh tier.
    pub fn ssh_config(&self) -> &Path {
        match &self.ssh {
            Some(tier) => tier.config(),
            None => panic!("netbed: ssh_config of a test bed built with ssh(false)"),
        }
    }

    /// A command that runs `program` in the server namespace (`ip netns exec`); add its
    /// arguments, environment and stdio as to any `Command`.
    pub fn in_server(&self, program: impl AsRef<OsStr>) -> Command {
        in_namespace(&self.server, program.as_ref())
    }

    /// A command that runs `program` in client `k`'s namespace.
    ///
    /// # Panics
    /// If `k` is not below [`Testbed::clients`].
    pub fn in_client(&self, k: usize, program: impl AsRef<OsStr>) -> Command {
        in_namespace(&self.clients[k], program.as_ref())
    }

    /// Creates namespace `index` (0 the server, k + 1 client k) with its loopback up.
    fn add_namespace(&mut self, index: usize) -> Result<()> {
        let name = if index == 0 {
            self.server.clone()
        } else {
            self.clients[index - 1].clone()
        };
        ip(["netns", "add", &name])?;
        self.made.push(name.clone());
        ip(["-n", &name, "link", "set", "lo", "up"])
    }

    /// Joins client `k` to the server: the veth pair, made in the server namespace with its
    /// peer put straight into the client's, so that it never appears in the root namespace.
    fn link_client(&self, k: usize) -> Result<()> {
        let (server, client) = (&self.server, &self.clients[k]);
        let server_side = format!("veth-c{k}");
        let [a, b, c, _] = client_addr(k).octets();
        ip([
            "-n",
            server,
            "link",
            "add",
            &server_side,
            "type",
            "veth",
            "peer",
            "name",
            "veth0",
            "netns",
            client,
        ])?;
        ip([
            "-n",
            server,
            "addr",
            "add",
            &format!("{a}.{b}.{c}.1/24"),
            "dev",
            &server_side,
        ])?;
        ip(["-n", server, "link", "set", &server_side, "up"])?;
        ip([
            "-n",
            client,
            "addr",
            "add",
            &format!("{}/24", client_addr(k)),
            "dev",
            "veth0",
        ])?;
        ip(["-n", client, "link", "set", "veth0", "up"])?;
        ip([
            "-n",
            client,
            "route",
            "add",
            &format!("{SERVER_ADDR}/32"),
            "via",
            &format!("{a}.{b}.{c}.1"),
        ])
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(tier) = &mut self.ssh {
            tier.stop();
        }
        for name in self.made.drain(..).rev() {
            if let Err(e) = remove_namespace(&name) {
                warn(&format!("netbed: cannot delete namespace {name}: {e}"));
            }
        }
        // The ssh tier's temporary directory goes when the field is dropped, after this.
    }
}

/// Client `k`'s address on its link.
fn client_addr(k: usize) -> Ipv4Addr {
    debug_assert!(k < MAX_CLIENTS);
    Ipv4Addr::new(198, 18, k as u8, 2)
}

/// Client `k`'s name in the ssh configuration.
fn client_name(k: usize) -> String {
    format!("client{k}")
}

fn in_namespace(namespace: &str, program: &OsStr) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", namespace]).arg(program);
    cmd
}

/// Runs `ip` with `args`, failing with its stderr if it fails.
fn ip<const N: usize>(args: [&str; N]) -> Result<()> {
    cmd::run(Command::new("ip").args(args), IP_TIMEOUT).map(drop)
}

/// Kills every process still in `namespace`, then deletes it. The processes first, so
/// that the namespace itself goes now rather than when the last of them exits.
fn remove_namespace(namespace: &str) -> Result<()> {
    let pids = cmd::run(
        Command::new("ip").args(["netns", "pids", namespace]),
        IP_TIMEOUT,
    )?;
    for pid in pids
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        // ESRCH (it exited meanwhile) is what we wanted anyway.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
    ip(["netns", "del", namespace])
}

/// One line on stderr, in one write, past libtest's capture (a `Drop` has no caller to
/// return an error to).
fn warn(line: &str) {
    let _ = io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Whether `/proc` shows a process `pid`.
fn alive(pid: u32) -> bool {
    fs::metadata(format!("/proc/{pid}")).is_ok()
}
