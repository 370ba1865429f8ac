//! Every process the harness starts, and how each one is stopped: children run in process
//! groups of their own and are registered, so that Ctrl-C, an error or a panic stops every one
//! of them (the forked connections of `srv-threads --mode process` included) and nothing is
//! left running.
//!
//! Ctrl-C, SIGTERM and SIGHUP are blocked in every harness thread and read from a signalfd by
//! one watcher thread. The children do not inherit the blocked mask: std resets the signal
//! mask of a process it spawns.
//!
//! It may call the run layer's `procfs` (a process's descendants and start time).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::{SigSet, Signal, kill, killpg};
use nix::sys::signalfd::SignalFd;
use nix::unistd::Pid;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Process groups of the children alive now.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Whether the user asked the harness to stop.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Blocks the stop signals in this thread (and in the threads it starts from now on) and
/// starts the watcher that turns them into a clean stop. Call it before starting any thread.
pub(crate) fn install_interrupt_handler() -> Result<()> {
    let mut mask = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        mask.add(sig);
    }
    mask.thread_block().context("blocking SIGINT and SIGTERM")?;
    let fd = SignalFd::new(&mask).context("creating a signalfd")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if fd.read_signal().is_err() {
                return;
            }
            INTERRUPTED.store(true, Ordering::Relaxed);
            eprintln!("\ncargo xtask: stopping every child and writing what was measured");
            signal_all(Signal::SIGTERM);
            // The main thread notices within half a second and stops on its own; these are
            // the backstops for a child that ignores SIGTERM and a harness that hangs.
            std::thread::sleep(Duration::from_secs(3));
            signal_all(Signal::SIGKILL);
            std::thread::sleep(Duration::from_secs(20));
            eprintln!("cargo xtask: giving up on a clean stop");
            std::process::exit(130);
        })
        .context("starting the signal watcher")?;
    Ok(())
}

fn signal_all(sig: Signal) {
    let groups = GROUPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), sig);
    }
}

/// The last lines a child wrote on a stream, for error messages.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    lines: VecDeque<String>,
    /// The stream has ended (the child closed it or exited).
    closed: bool,
}

/// A child's stream as it is followed: its tail, and a wake-up for whoever waits for its end.
#[derive(Debug, Default)]
pub(crate) struct Followed {
    tail: Mutex<Tail>,
    ended: Condvar,
}

const TAIL_LINES: usize = 12;

impl Tail {
    fn push(&mut self, line: String) {
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    pub(crate) fn text(&self) -> String {
        let v: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        v.join("\n")
    }

    pub(crate) fn last(&self) -> Option<&str> {
        self.lines.back().map(String::as_str)
    }
}

/// Copies a child's stream into `log` line by line and keeps its last lines.
fn follow(
    stream: impl Read + Send + 'static,
    mut log: File,
    followed: Arc<Followed>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("child-output".into())
        .spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let _ = log.write_all(&line);
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                followed
                    .tail
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(text);
                line.clear();
            }
            followed
                .tail
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .closed = true;
            followed.ended.notify_all();
        })
}

/// A running child in its own process group, stopped when dropped.
#[derive(Debug)]
pub(crate) struct Proc {
    child: Child,
    stdout: Option<std::process::ChildStdout>,
    stderr_pipe: Option<std::process::ChildStderr>,
    stderr: Arc<Followed>,
    readers: Vec<JoinHandle<()>>,
    status: Option<ExitStatus>,
    /// Descendants seen while it ran, with their start times: killed at the stop even if the
    /// child died first and they were handed to init.
    seen: Vec<(i32, u64)>,
}

impl Proc {
    /// Takes over a child spawned with `process_group(0)`: its stderr (and its stdout, unless
    /// the caller took it to read the READY line) is copied to `log`.
    pub(crate) fn adopt(mut child: Child, log: &Path) -> Result<Proc> {
        let pgid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        GROUPS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pgid);
        let stderr = Arc::new(Followed::default());
        let mut proc = Proc {
            stdout: child.stdout.take(),
            stderr_pipe: child.stderr.take(),
            child,
            stderr,
            readers: Vec::new(),
            status: None,
            seen: Vec::new(),
        };
        let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        if let Some(out) = proc.stdout.take() {
            let copy = file.try_clone().context("duplicating a log file")?;
            proc.readers.push(follow(out, copy, Arc::default())?);
        }
        if let Some(err) = proc.stderr_pipe.take() {
            proc.readers
                .push(follow(err, file, Arc::clone(&proc.stderr))?);
        }
        Ok(proc)
    }

    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Notes processes of the child's tree (its own pid is skipped), to be killed at the stop.
    pub(crate) fn remember(&mut self, members: &[(i32, u64)]) {
        let me = i32::try_from(self.child.id()).unwrap_or(i32::MAX);
        for m in members {
            if m.0 != me && !self.seen.contains(m) {
                self.seen.push(*m);
            }
        }
    }

    /// The exit status, if the child has exited.
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// The lines of its stderr it still keeps, as they are now, the child running or not.
    pub(crate) fn stderr_lines(&self) -> Vec<String> {
        let tail = self
            .stderr
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        tail.lines.iter().cloned().collect()
    }

    /// Waits up to `most` for the child's stderr to end (it exited, or was killed); whether
    /// it has. The waiting thread does not wake before then.
    pub(crate) fn wait_stderr_end(&self, most: Duration) -> bool {
        let tail = self
            .stderr
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (tail, _) = self
            .stderr
            .ended
            .wait_timeout_while(tail, most, |t| !t.closed)
            .unwrap_or_else(PoisonError::into_inner);
        tail.closed
    }

    /// The last lines of its stderr, once the child has exited and its stderr is drained.
    pub(crate) fn stderr_tail(&mut self) -> String {
        if self.status.is_some() {
            for r in self.readers.drain(..) {
                let _ = r.join();
            }
        }
        self.stderr
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .text()
    }

    /// The last line of its stderr (a server's counters line, after a clean stop).
    pub(crate) fn last_stderr_line(&mut self) -> Option<String> {
        let _ = self.stderr_tail();
        self.stderr
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .map(str::to_string)
    }

    /// Stops the child: SIGTERM to it, and after `grace` SIGKILL to its whole process group.
    /// Whatever is left of the group and of its descendants (forked connections) is killed in
    /// any case, so nothing outlives the stop. Returns the exit status, `None` if it had to be killed.
    pub(crate) fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX));
        // Connection processes may sit in process groups of their own; they are found now,
        // while they are still the server's children.
        let mut descendants = crate::run::procfs::descendants(self.child.id());
        descendants.append(&mut self.seen);
        let mut clean = None;
        if self.try_wait().is_none() {
            let _ = kill(pid, Signal::SIGTERM);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if let Some(status) = self.try_wait() {
                    clean = Some(status);
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        } else {
            clean = self.status;
        }
        let _ = killpg(pid, Signal::SIGKILL);
        for (child, started) in descendants {
            if crate::run::procfs::start_time(child) == Some(started) {
                let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
            }
        }
        if self.status.is_none() {
            self.status = self.child.wait().ok();
        }
        GROUPS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|&g| g != pid.as_raw());
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        clean
    }
}

/// How a child ended, and the end of its stderr.
pub(crate) fn last_words(status: std::process::ExitStatus, proc: &mut Proc) -> String {
    let tail = proc.stderr_tail();
    if tail.is_empty() {
        format!("{status}, nothing on stderr")
    } else {
        format!("{status}; stderr: {tail}")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let registered = GROUPS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&i32::try_from(self.child.id()).unwrap_or(i32::MAX));
        if registered {
            self.stop(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    #[test]
    fn stop_kills_the_whole_group_and_keeps_the_stderr_tail() {
        let dir = std::env::temp_dir().join(format!("xtask-children-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The shell ignores SIGTERM and has a child in a session of its own (as connection
        // processes may have): only the group kill and the descendant kill end both.
        let child = Command::new("sh")
            .args([
                "-c",
                "trap '' TERM; echo started >&2; setsid sleep 30 & wait",
            ])
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut proc = Proc::adopt(child, &dir.join("sh.log")).unwrap();
        let mut sampler = crate::run::procfs::Sampler::new(proc.id());
        let deadline = Instant::now() + Duration::from_secs(5);
        while sampler.sample().map_or(0, |s| s.procs) < 2 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        let kids = crate::run::procfs::descendants(proc.id());
        assert_eq!(kids.len(), 1);
        assert_eq!(
            proc.stop(Duration::from_millis(200)),
            None,
            "SIGTERM was ignored"
        );
        assert!(sampler.sample().is_err());
        // The sleep is gone, or dead and waiting for init to reap it. It closes its files
        // (which ends the stderr copy the stop waits for) before it turns into a zombie, so
        // on a busy machine it may still show as running for a moment.
        let state_of_sleep = || {
            let stat =
                std::fs::read_to_string(format!("/proc/{}/stat", kids[0].0)).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next()
                .map(str::to_string);
            (state, stat)
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let (mut state, mut stat) = state_of_sleep();
        while !matches!(state.as_deref(), None | Some("Z")) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            (state, stat) = state_of_sleep();
        }
        assert!(matches!(state.as_deref(), None | Some("Z")), "{stat}");
        assert_eq!(proc.stderr_tail(), "started");
        let log = std::fs::read_to_string(dir.join("sh.log")).unwrap();
        assert_eq!(log, "started\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut t = Tail::default();
        for i in 0..20 {
            t.push(format!("line {i}"));
        }
        assert_eq!(t.text().lines().count(), TAIL_LINES);
        assert_eq!(t.last(), Some("line 19"));
    }
}
