//! Finding (and building, once per test process) the search programs, and running one
//! with a bound on its time.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use search::tally::Summary;

/// Every program; `search-go` is the Go peer, the others Rust `[[bin]]`s.
pub(crate) const PROGRAMS: &[&str] = &[
    "search-threads",
    "search-tokio",
    "search-tokio-uring",
    "search-fiber",
    "search-monoio",
    "search-compio",
    "search-glommio",
    "search-smol",
    "search-may",
    "search-go",
];

/// A build longer than this is stuck, not slow.
const BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// A search of a test tree takes milliseconds; one that takes this long is blocked (on a
/// FIFO, a link loop).
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `target/debug` (or whichever profile directory the test binary is in) and its profile
/// name for cargo.
fn profile_dir() -> (PathBuf, String) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut dir = exe.parent().expect("a directory").to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let name = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_owned(),
        Some(n) => n.to_owned(),
        None => "dev".to_owned(),
    };
    (dir, name)
}

fn wait_bounded(
    mut child: Child,
    limit: Duration,
    what: &str,
) -> Result<std::process::ExitStatus, String> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} took more than {limit:?} and was killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

fn build_rust() -> Result<(), String> {
    let (dir, profile) = profile_dir();
    let target = dir.parent().expect("the target directory").to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace())
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "--profile", &profile]);
    for p in PROGRAMS.iter().filter(|p| **p != "search-go") {
        cmd.args(["--bin", p]);
    }
    let child = cmd.spawn().map_err(|e| format!("cargo build: {e}"))?;
    match wait_bounded(child, BUILD_TIMEOUT, "cargo build of the search programs")? {
        s if s.success() => Ok(()),
        s => Err(format!("cargo build of the search programs failed ({s})")),
    }
}

fn build_go() -> Result<PathBuf, String> {
    let (dir, _) = profile_dir();
    let out = dir
        .parent()
        .expect("the target directory")
        .join("search-go");
    let child = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg("./cmd/search-go")
        .current_dir(workspace().join("peers/go"))
        .spawn()
        .map_err(|e| format!("go is not runnable here ({e}); install Go to test search-go"))?;
    match wait_bounded(child, BUILD_TIMEOUT, "go build of search-go")? {
        s if s.success() => Ok(out),
        s => Err(format!("go build of search-go failed ({s})")),
    }
}

/// The path of `program`, or why it cannot run here (Go missing).
pub(crate) fn locate(program: &str) -> Result<PathBuf, String> {
    static RUST: OnceLock<Result<(), String>> = OnceLock::new();
    static GO: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    if program == "search-go" {
        return GO.get_or_init(build_go).clone();
    }
    if let Err(e) = RUST.get_or_init(build_rust) {
        panic!("{e}");
    }
    Ok(profile_dir().0.join(program))
}

/// What a run gave.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) code: Option<i32>,
    /// Raw: ripgrep prints paths that are not UTF-8 as they are.
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

impl Ran {
    /// The JSON line of a successful run.
    pub(crate) fn summary(&self) -> Summary {
        assert_eq!(self.code, Some(0), "stderr: {}", self.stderr);
        let text = String::from_utf8_lossy(&self.stdout);
        Summary::from_stdout(&text).unwrap_or_else(|e| panic!("not a summary line ({e}): {text:?}"))
    }
}

/// Runs `cmd` to its end, killing it after [`RUN_TIMEOUT`].
pub(crate) fn run(cmd: Command) -> Ran {
    try_run(cmd).unwrap_or_else(|e| panic!("{e}"))
}

/// [`run`], or why `cmd` could not be started.
pub(crate) fn try_run(mut cmd: Command) -> Result<Ran, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {cmd:?}: {e}"))?;
    // Pipes are read on threads so that a chatty child cannot fill one and block.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    });
    let status =
        wait_bounded(child, RUN_TIMEOUT, &format!("{cmd:?}")).unwrap_or_else(|e| panic!("{e}"));
    Ok(Ran {
        code: status.code(),
        stdout: out.join().expect("reader"),
        stderr: err.join().expect("reader"),
    })
}
