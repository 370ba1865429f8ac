//! What the end-to-end tests of `cargo xtask bench` share: a fresh output directory, and
//! one run of the real xtask binary into it, bounded in time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Builds may be slow on a busy machine; the runs themselves take seconds.
pub(crate) const DEADLINE: Duration = Duration::from_secs(900);

/// An empty directory for one test's run, named after it and this process.
pub(crate) fn fresh_out(name: &str) -> PathBuf {
    let out = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    out
}

/// Runs `xtask bench <args> --out <out>` and panics (killing it first) unless it
/// succeeds within [`DEADLINE`]; `what` names the run in the messages.
#[allow(dead_code)] // Not every test binary that shares this module runs it.
pub(crate) fn run_bench(what: &str, args: &[&str], out: &Path) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.arg("bench").args(args);
    run_command(what, &mut cmd, out);
}

/// Runs `cmd --out <out>` (an xtask bench command line, however it is started) as
/// [`run_bench`] does.
pub(crate) fn run_command(what: &str, cmd: &mut Command, out: &Path) {
    let mut child = cmd
        .arg("--out")
        .arg(out)
        .spawn()
        .expect("running the xtask binary");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the xtask") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} ran for more than {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{what} failed: {status}");
}

/// Runs `cmd` (an xtask command line), its stderr shown as it comes and kept, and returns
/// its status and stderr; panics (killing it first) if it runs past [`DEADLINE`].
#[allow(dead_code)] // Not every test binary that shares this module runs it.
pub(crate) fn run_capturing(what: &str, cmd: &mut Command) -> (std::process::ExitStatus, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running the xtask binary");
    let pipe = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut kept = String::new();
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            eprintln!("{line}");
            kept.push_str(&line);
            kept.push('\n');
        }
        kept
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the xtask") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} ran for more than {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, reader.join().unwrap_or_default())
}
