//! Running a program with a deadline: every `ip`, `ssh-keygen` and `ssh` the test bed runs,
//! and what its users run in the namespaces, is killed rather than waited for forever.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How often a running program is looked at. A poll with a deadline rather than a
/// blocking wait, because std has no wait with a timeout.
const POLL: Duration = Duration::from_millis(5);

/// Runs `cmd` to completion with stdin from /dev/null, collecting its stdout and stderr,
/// and kills it if it has not exited (and closed both) within `timeout`.
///
/// A non-zero exit status is not an error here: it is in the [`Output`].
pub fn bounded_output(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    let deadline = Instant::now() + timeout;
    let command = describe(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn {
            command: command.clone(),
            source,
        })?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let timed_out = || Error::Timeout {
        command: command.clone(),
        timeout,
    };
    let status = match wait_until(&mut child, deadline) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(timed_out());
        }
        Err(source) => {
            return Err(Error::Io {
                what: format!("waiting for `{command}`"),
                source,
            });
        }
    };
    // A process it left behind may hold the pipes open; that counts against the deadline too.
    let left = || deadline.saturating_duration_since(Instant::now());
    let stdout = stdout.recv_timeout(left()).map_err(|_| timed_out())?;
    let stderr = stderr.recv_timeout(left()).map_err(|_| timed_out())?;
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs `cmd` as [`bounded_output`] does and returns its stdout, or fails with its stderr
/// if it exits unsuccessfully.
pub(crate) fn run(cmd: &mut Command, timeout: Duration) -> Result<String> {
    let out = bounded_output(cmd, timeout)?;
    if !out.status.success() {
        return Err(Error::Failed {
            command: describe(cmd),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Waits for `child` until `deadline`: `None` if it is still running then.
pub(crate) fn wait_until(
    child: &mut Child,
    deadline: Instant,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        thread::sleep(POLL);
    }
}

/// Sleeps one poll interval: the step of every wait with a deadline in this crate.
pub(crate) fn pause() {
    thread::sleep(POLL);
}

/// `program arg arg …`, for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut line = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

/// Reads a pipe to its end on a thread of its own, so that a program filling one pipe
/// does not block while the other is read.
fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error ends the output early; the exit status still tells.
            let _ = pipe.read_to_end(&mut buf);
        }
        let _ = tx.send(buf);
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_output_and_status() {
        let out = bounded_output(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn kills_what_overruns() {
        let err = bounded_output(Command::new("sleep").arg("30"), Duration::from_millis(100))
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }

    #[test]
    fn run_reports_stderr_of_a_failure() {
        let err = run(
            Command::new("sh").args(["-c", "echo no such thing >&2; exit 1"]),
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert!(err.to_string().contains("no such thing"), "{err}");
    }
}
