//! Finding the server binaries, building them first, once per test process.
//!
//! The Rust servers are built by a nested `cargo build` with the profile and the
//! target directory of the running test binary, so the suite never builds anything
//! twice. `cargo test` releases its lock on the target directory once the tests are
//! built and before it runs them, so the nested build does not wait on it. All Rust
//! servers of the list are built by one invocation, which compiles them in parallel.

use std::env;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::SERVERS;

/// The Go peer's binary name; every other server is a Rust `[[bin]]`.
const GO_BIN: &str = "srv-go";
/// The command that fetches the Go peer's modules, which a skip names.
pub const GO_FETCH: &str = "cd peers/go && go mod download";
/// A build that takes longer than this is stuck (a lock, a hung toolchain), not slow.
const BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What [`crate::ServerSpec::resolve`] found.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// The binary exists; this is the server to test.
    Ready(crate::Target),
    /// The server cannot run on this machine; the reason says why.
    Skipped(String),
}

/// The path of `bin`, built if need be, or (`Ok(Err(reason))`) why it cannot exist here.
pub(crate) fn locate(bin: &str) -> io::Result<Result<PathBuf, String>> {
    let dirs = Dirs::of_current_exe()?;
    if bin == GO_BIN {
        return go_binary(&dirs);
    }
    static ALL: OnceLock<Result<(), String>> = OnceLock::new();
    // Serialises builds of binaries outside the list (callers with their own spec).
    static OTHERS: Mutex<()> = Mutex::new(());
    let listed: Vec<&str> = rust_bins();
    if listed.contains(&bin) {
        ALL.get_or_init(|| cargo_build(&dirs, &listed))
            .clone()
            .map_err(io::Error::other)?;
    } else {
        let _guard = OTHERS.lock().unwrap_or_else(|e| e.into_inner());
        cargo_build(&dirs, &[bin]).map_err(io::Error::other)?;
    }
    Ok(Ok(dirs.profile.join(bin)))
}

fn rust_bins() -> Vec<&'static str> {
    let mut bins: Vec<&str> = SERVERS
        .iter()
        .map(|s| s.bin)
        .filter(|b| *b != GO_BIN)
        .collect();
    bins.sort_unstable();
    bins.dedup();
    bins
}

/// Where the running test binary lives, and so where the servers go.
#[derive(Debug)]
struct Dirs {
    /// The workspace root, which holds `Cargo.toml` and `peers/`.
    workspace: PathBuf,
    /// `target` (or whatever `--target-dir` / `CARGO_TARGET_DIR` made it).
    target: PathBuf,
    /// `target/debug`, `target/release`, `target/<triple>/debug`, …
    profile: PathBuf,
    /// `--profile` for cargo: `dev` for `debug`, otherwise the directory's name.
    profile_name: String,
    /// `--target` for cargo when the test was cross-built for a triple.
    triple: Option<String>,
}

impl Dirs {
    fn of_current_exe() -> io::Result<Dirs> {
        let exe = env::current_exe()?;
        // Test binaries live in `<profile>/deps`, examples in `<profile>/examples`.
        let mut profile = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        if profile
            .file_name()
            .is_some_and(|n| n == "deps" || n == "examples")
        {
            profile.pop();
        }
        let unknown = || io::Error::other(format!("cannot tell the target directory from {exe:?}"));
        let profile_name = match profile.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev".to_owned(),
            Some(name) => name.to_owned(),
            None => return Err(unknown()),
        };
        let mut target = profile.parent().ok_or_else(unknown)?.to_path_buf();
        let mut triple = None;
        // Cargo marks the root of every target directory with CACHEDIR.TAG; a
        // directory in between is the target triple of a `--target` build.
        if !target.join("CACHEDIR.TAG").exists()
            && let Some(parent) = target.parent().filter(|p| p.join("CACHEDIR.TAG").exists())
        {
            triple = target
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_owned);
            target = parent.to_path_buf();
        }
        // The crate sits at `<workspace>/crates/conformance`.
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let workspace = workspace.canonicalize().unwrap_or(workspace);
        Ok(Dirs {
            workspace,
            target,
            profile,
            profile_name,
            triple,
        })
    }
}

fn cargo_build(dirs: &Dirs, bins: &[&str]) -> Result<(), String> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&dirs.workspace)
        .env("CARGO_TARGET_DIR", &dirs.target)
        .args(["build", "--profile", &dirs.profile_name]);
    if let Some(triple) = &dirs.triple {
        cmd.args(["--target", triple]);
    }
    for bin in bins {
        cmd.args(["--bin", bin]);
    }
    run_build(cmd, &format!("cargo build of {}", bins.join(", ")))
}

/// `peers/go`, once Go is found on PATH and the peer's modules are in Go's module cache
/// (fetched first if need be), or (`Ok(Err(reason))`) why the Go peer cannot be built
/// here: no `peers/go`, no `go`, or modules neither cached nor fetchable (offline), the
/// reason then naming [`GO_FETCH`]. Checked once per test process.
pub fn go_peer() -> io::Result<Result<PathBuf, String>> {
    static PEER: OnceLock<Result<Result<PathBuf, String>, String>> = OnceLock::new();
    PEER.get_or_init(|| {
        let dirs = Dirs::of_current_exe().map_err(|e| e.to_string())?;
        let src = dirs.workspace.join("peers/go");
        if !src.join("go.mod").exists() {
            return Ok(Err(format!(
                "peers/go not found (no {})",
                src.join("go.mod").display()
            )));
        }
        match Command::new("go")
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Err("go not found on PATH".to_owned()));
            }
            Err(e) => return Err(format!("cannot run go: {e}")),
            Ok(_) => {}
        }
        Ok(go_modules(&src, &[]).map(|()| src))
    })
    .clone()
    .map_err(io::Error::other)
}

/// Whether the Go modules of the module at `src` are in the module cache, fetching them if
/// they are not (`go mod download`, with `env` added to the environment), or why they
/// cannot be had, naming [`GO_FETCH`].
fn go_modules(src: &Path, env: &[(&str, &std::ffi::OsStr)]) -> Result<(), String> {
    let mut cmd = Command::new("go");
    cmd.current_dir(src).args(["mod", "download"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_build(cmd, "go mod download in peers/go").map_err(|e| {
        let why = e
            .lines()
            .skip(1)
            .find(|l| !l.trim().is_empty())
            .unwrap_or(&e)
            .trim()
            .to_owned();
        format!(
            "the Go modules of peers/go are not cached and cannot be fetched here ({why}); \
             fetch them with `{GO_FETCH}` where the Go module proxy is reachable"
        )
    })
}

fn go_binary(dirs: &Dirs) -> io::Result<Result<PathBuf, String>> {
    static GO: OnceLock<Result<Result<PathBuf, String>, String>> = OnceLock::new();
    GO.get_or_init(|| {
        let src = match go_peer().map_err(|e| e.to_string())? {
            Ok(src) => src,
            Err(reason) => return Ok(Err(reason)),
        };
        let out = dirs.target.join(GO_BIN);
        let mut cmd = Command::new("go");
        cmd.current_dir(&src)
            .arg("build")
            .arg("-o")
            .arg(&out)
            .arg(".");
        run_build(cmd, "go build of peers/go").map(|()| Ok(out))
    })
    .clone()
    .map_err(io::Error::other)
}

/// Runs a build to completion within [`BUILD_TIMEOUT`]; the error carries its output.
fn run_build(mut cmd: Command, what: &str) -> Result<(), String> {
    // Straight to stderr, past libtest's capture: the first test may wait a while.
    let line = format!("conformance: {what} (once per test process)\n");
    let _ = io::stderr().write_all(line.as_bytes());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < BUILD_TIMEOUT => thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{what}: still running after {BUILD_TIMEOUT:?}, killed"
                ));
            }
            Err(e) => return Err(format!("{what}: wait failed: {e}")),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    Err(format!("{what} failed ({status}):\n{stdout}{stderr}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go installed but its modules neither cached nor fetchable (an empty module cache, the
    /// proxy off): the reason says so and names the command that fetches them.
    #[test]
    fn go_modules_that_cannot_be_had_name_the_fetch_command() {
        if Command::new("go").arg("version").output().is_err() {
            eprintln!("skipped: go is not on PATH (install Go to test the Go peer's checks)");
            return;
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers/go");
        let empty = tempfile::tempdir().expect("a temporary directory");
        let env = [
            ("GOFLAGS", std::ffi::OsStr::new("-mod=mod")),
            ("GOPROXY", std::ffi::OsStr::new("off")),
            ("GOMODCACHE", empty.path().as_os_str()),
        ];
        let why = go_modules(&src, &env).expect_err("no module can be had");
        assert!(
            why.contains("not cached and cannot be fetched") && why.contains(GO_FETCH),
            "{why}"
        );
    }
}
