//! What netbed's tests share: skipping where the machine cannot host a test bed, bounded
//! commands, and the echo helper started in a namespace.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard, mpsc};
use std::thread;
use std::time::Duration;

use netbed::Builder;

/// The bound of every command a test runs.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// The echo helper, built with the tests.
pub(crate) const ECHO: &str = env!("CARGO_BIN_EXE_netbed-echo");

/// Whether `builder`'s test bed can be built here; if not, says so past libtest's capture
/// (one write, so that the line stays whole among the other tests' output).
pub(crate) fn can_build(builder: &Builder, test: &str) -> bool {
    match builder.probe() {
        Ok(()) => true,
        Err(skip) => {
            let _ = std::io::stderr().write_all(format!("skipped {test}: {skip}\n").as_bytes());
            false
        }
    }
}

/// Tests that look at every namespace of this process take the write side; the others,
/// which only add and remove their own, the read side.
static NAMESPACES: RwLock<()> = RwLock::new(());

pub(crate) fn sharing() -> RwLockReadGuard<'static, ()> {
    NAMESPACES.read().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn alone() -> RwLockWriteGuard<'static, ()> {
    NAMESPACES.write().unwrap_or_else(|e| e.into_inner())
}

/// Runs `cmd` within [`TIMEOUT`] and returns its stdout, panicking with its stderr if it
/// fails.
pub(crate) fn stdout_of(cmd: &mut Command) -> String {
    let line = format!("{cmd:?}");
    let out = netbed::bounded_output(cmd, TIMEOUT).unwrap_or_else(|e| panic!("{line}: {e}"));
    assert!(
        out.status.success(),
        "{line}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The names `ip netns list` shows.
pub(crate) fn namespaces() -> Vec<String> {
    stdout_of(Command::new("ip").args(["netns", "list"]))
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// A `netbed-echo listen` running in a namespace, killed when dropped.
#[derive(Debug)]
pub(crate) struct Listener {
    child: Child,
    /// Where it listens, as it said on its READY line.
    pub(crate) addr: SocketAddr,
}

impl Listener {
    /// Starts `cmd` (a `netbed-echo listen ADDR` wrapped in a namespace) and waits for its
    /// READY line.
    pub(crate) fn start(mut cmd: Command) -> Listener {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start netbed-echo");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("netbed-echo did not say READY within {TIMEOUT:?}");
            }
        };
        let mut listener = Listener {
            child,
            addr: "0.0.0.0:0".parse().expect("an address"),
        };
        listener.addr = line
            .strip_prefix("READY ")
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("netbed-echo said {line:?}, not READY <addr>"));
        listener
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
