//! Helpers for the tests that run a server binary (srv-tokio's, and srv-tokio-uring's
//! through a `#[path]` module): start it and wait for its READY line, talk to it
//! over loopback with timeouts, stop it with a signal; and the checks both run.
#![allow(dead_code)] // Each test file uses its own subset.

#[macro_use]
pub(crate) mod checks;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Every wait in these tests ends after this long.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// A running server, killed if a test ends without stopping it.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: SocketAddr,
}

/// Runs the binary with `args`; `Err` with its stderr and status if it exits
/// without printing READY.
pub(crate) fn try_start(bin: &str, args: &[&str]) -> Result<Server, (String, ExitStatus)> {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server binary runs");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(TIMEOUT).expect("READY or exit in time");
    match line.strip_prefix("READY ") {
        Some(addr) => Ok(Server {
            child,
            addr: addr.trim().parse().expect("READY names an address"),
        }),
        None => {
            let status = wait(&mut child).expect("a server without READY exits");
            let mut err = String::new();
            let _ = child.stderr.take().expect("piped").read_to_string(&mut err);
            Err((err, status))
        }
    }
}

pub(crate) fn start(bin: &str, args: &[&str]) -> Server {
    match try_start(bin, args) {
        Ok(server) => server,
        Err((err, status)) => panic!("server did not start ({status}): {err}"),
    }
}

fn wait(child: &mut Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("waitpid") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

impl Server {
    pub(crate) fn connect(&self) -> Client {
        let stream = TcpStream::connect_timeout(&self.addr, TIMEOUT).expect("connect");
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    /// Sends `signal`, waits for the exit, and returns the status and stderr.
    pub(crate) fn stop_with(mut self, signal: Signal) -> (ExitStatus, String) {
        kill(Pid::from_raw(self.child.id() as i32), signal).expect("signal the server");
        let status = wait(&mut self.child).expect("the server stops in time");
        let mut err = String::new();
        let _ = self
            .child
            .stderr
            .take()
            .expect("piped")
            .read_to_string(&mut err);
        (status, err)
    }

    pub(crate) fn stop(self) -> (ExitStatus, String) {
        self.stop_with(Signal::SIGTERM)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A line-oriented client with timeouts.
pub(crate) struct Client {
    pub(crate) stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    pub(crate) fn send(&mut self, text: &str) {
        self.stream.write_all(text.as_bytes()).expect("send");
    }

    /// The next line, without its newline; `None` at EOF or on a reset.
    pub(crate) fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(line.trim_end_matches('\n').to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("reading a line: {e}"),
        }
    }

    pub(crate) fn lines(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| self.line().unwrap_or_else(|| panic!("EOF after {i} lines")))
            .collect()
    }

    /// Sends `text` and returns the next `n` lines.
    pub(crate) fn ask(&mut self, text: &str, n: usize) -> Vec<String> {
        self.send(text);
        self.lines(n)
    }
}
