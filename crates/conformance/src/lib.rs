//! The conformance harness: starts any ringside server binary by name and talks to it
//! over real loopback sockets, so that one suite (`tests/echo.rs`, `tests/chat.rs`,
//! `tests/cli.rs`, `tests/runtimes.rs`) holds every server to `docs/PROTOCOL.md`,
//! `docs/protocol-notes.md` and `docs/room-log.md`. It is the one harness that starts
//! server binaries: other crates' tests (loadgen's) use it too, and `cargo xtask` reads
//! its server list.
//!
//! What it is: a small library of process and socket helpers, the one list of servers
//! ([`server_list!`]) and the macro that turns every check into a `#[test]` per server
//! ([`conformance_tests!`]). What it is not: a load generator, or a second copy of the
//! servers' logic; it knows the wire formats only as far as a client needs them.
//!
//! Binaries are built on demand, once per test process: the Rust servers with
//! `cargo build` into the very target directory and profile of the running test (see
//! [`ServerSpec::resolve`]), `srv-go` with `go build` in `peers/go` when Go is installed
//! and its modules are cached or can be fetched ([`go_peer`]; else its checks skip,
//! naming [`GO_FETCH`]).
//! Every process a server starts carries a tag in its environment, and all of them are
//! killed when its [`Server`] handle drops, so a failing test leaves none behind.
//! Random checks print their seed; `CONFORMANCE_SEED=<seed>` replays one.
//!
//! # Example
//!
//! A test file lists its checks once; each becomes `<server>::<check>`, for instance
//! `threads_process::echo_half_close`:
//!
//! ```no_run
//! use std::io::{Read, Write};
//!
//! use conformance::Target;
//!
//! conformance::conformance_tests!(echo_hello);
//!
//! fn echo_hello(target: &Target) -> std::io::Result<()> {
//!     let server = target.start(&["--proto", "echo"])?;
//!     let mut stream = server.connect()?;
//!     stream.write_all(b"hello")?;
//!     let mut back = [0; 5];
//!     stream.read_exact(&mut back)?;
//!     assert_eq!(&back, b"hello");
//!     Ok(())
//! }
//! # fn main() {}
//! ```
#![forbid(unsafe_code)]

mod binaries;
pub mod chat;
pub mod crash;
pub mod net;
pub mod rng;
pub mod roomlog;
mod server;
pub mod wire;

use std::fmt;
use std::io::{self, Write};

pub use binaries::{GO_FETCH, Resolved, go_peer};
pub use chat::ChatClient;
pub use net::{Deadline, IO_TIMEOUT, connect};
pub use nix::sys::signal::Signal;
pub use server::{
    BenchEntry, EXIT_TIMEOUT, Exit, Limit, Need, START_TIMEOUT, Server, ServerSpec, Target,
    io_uring_usable,
};

/// The one list of servers, for the suite and for `cargo xtask`: `test_module: "binary"
/// [args] [limits]`, then, for a server the benchmark knows by name, `bench "name",
/// default, "what it is"`.
///
/// Adding a server to the whole suite is adding one line here. `[args]` select the
/// variant (a flavor, a mode, runtime flags, a worker count) and come first on every
/// command line. `[limits]` say what the server does not serve or needs of the machine
/// ([`Limit`]): a check that needs what the limits exclude (see [`Need`]) is skipped for
/// the server with a message, never weakened. The `bench` part makes the entry one of
/// `cargo xtask bench --servers` names (`default`: run when `--servers` is not given);
/// the entries without it are variants the suite tests and the bench reaches through
/// `+flag`s. A binary named `srv-go` is built from `peers/go` with Go; every other
/// binary is a Rust `[[bin]]` of the workspace. The macro hands the list to
/// `$crate::$callback!`, after `$args`.
#[macro_export]
macro_rules! server_list {
    ($callback:ident ! $args:tt) => {
        $crate::$callback! { $args
            threads: "srv-threads" ["--mode", "thread"] []
                bench "threads", true, "an OS thread per connection, blocking I/O",
            threads_process: "srv-threads" ["--mode", "process"] [NoKv]
                bench "threads-process", true,
                "a forked process per connection (the C server of the C-versus-Go paper)",
            reactor: "srv-reactor" [] []
                bench "reactor", true, "hand-written epoll reactor (mio), one per worker thread",
            reactor_reuseport: "srv-reactor" ["--accept", "reuseport"] [],
            tokio_multi: "srv-tokio" ["--flavor", "multi"] []
                bench "tokio", true, "Tokio multi-thread runtime, a task per connection",
            tokio_per_core: "srv-tokio" ["--flavor", "per-core"] []
                bench "tokio-per-core", false,
                "a current-thread Tokio runtime per worker, SO_REUSEPORT listeners",
            tokio_uring: "srv-tokio-uring" [] [IoUring]
                bench "tokio-uring", true, "tokio-uring, one io_uring runtime per worker thread",
            tokio_uring_one_worker: "srv-tokio-uring" ["--workers", "1"] [IoUring],
            monoio: "srv-monoio" [] [IoUring]
                bench "monoio", true, "monoio (io_uring driver), one runtime per worker thread",
            compio: "srv-compio" [] [IoUring]
                bench "compio", true, "compio (io_uring), one runtime per worker thread",
            compio_tuned: "srv-compio" ["--tuned"] [IoUring]
                bench "compio-tuned", false,
                "compio with srv-fiber's ring tuning through its own options (taskrun flags, single issuer, defer taskrun, echo reads from a provided-buffer pool)",
            glommio: "srv-glommio" [] [IoUring]
                bench "glommio", true,
                "glommio, an io_uring executor per worker pinned to its CPU, its own SO_REUSEPORT listener",
            smol: "srv-smol" [] []
                bench "smol", true,
                "smol, one executor on --workers threads over async-io's epoll reactor",
            may: "srv-may" [] []
                bench "may", true,
                "may's stackful coroutines, a coroutine per connection, blocking-style code",
            fiber: "srv-fiber" [] [IoUring]
                bench "fiber", true,
                "our io_uring runtime of stackful fibers, blocking-style code",
            fiber_completer: "srv-fiber" ["--completer", "--ring-flags", "none"] [IoUring],
            fiber_stealing: "srv-fiber" ["--io-stealing", "--ring-flags", "none"] [IoUring],
            fiber_work_stealing: "srv-fiber" ["--scheduler", "stealing"] [IoUring],
            fiber_plain_recv: "srv-fiber" ["--plain-recv", "--ring-flags", "coop_taskrun"] [IoUring],
            fiber_plain_fds: "srv-fiber" ["--fixed-files", "false"] [IoUring],
            fiber_plain: "srv-fiber" ["--ring-flags", "none", "--plain-recv"] [IoUring]
                bench "fiber-plain", false,
                "our fiber runtime without its ring tuning: no SINGLE_ISSUER/DEFER_TASKRUN, no multishot receive",
            go: "srv-go" [] [NotLaunch]
                bench "go", true,
                "Go, a goroutine per connection (the papers' reference); http on Go's net/http",
            go_sessions: "srv-go" ["--model", "sessions"] [NotLaunch, NoChat]
                bench "go-sessions", false,
                "Go, a goroutine per connection over the event loops' sessions (http: ringside's own HTTP/1.1 parser, peers/go/httpwire.go, not net/http; a read's responses written together); no chat",
            go_eventloop: "srv-go" ["--model", "eventloop"] [NotLaunch]
                bench "go-eventloop", true,
                "Go, a hand-written epoll loop per worker (the Go event-loop article's kqueue design)",
            go_poll: "srv-go" ["--model", "poll"] [NotLaunch, NoChat, NoHttp]
                bench "go-poll", false,
                "Go, a busy loop per worker trying every non-blocking socket (the article's); spends a CPU per worker even idle",
            go_gnet: "srv-go" ["--model", "gnet"] [NotLaunch, NoReadPause]
                bench "go-gnet", true, "Go on gnet v2, an event loop per worker",
            floor_epoll: "srv-floor" ["--api", "epoll"] [EchoOnly]
                bench "floor-epoll", true,
                "the kernel's floor: one thread, bare epoll, plain echo only",
            floor_uring: "srv-floor" ["--api", "io_uring"] [EchoOnly, IoUring]
                bench "floor-uring", true,
                "the kernel's floor: one thread, bare io_uring (multishot, buffer ring), plain echo only",
        }
    };
}

/// Every server of [`server_list!`], for code that wants to iterate over them.
pub const SERVERS: &[ServerSpec] = server_list!(__spec_array![]);

/// Expands `check_a, check_b needs Chat, check_c needs Chat & Counters, …` into one
/// module per server holding one `#[test]` per check, each calling the caller's
/// `fn check_a(&Target) -> Result<(), E>` through [`run_check`]. `needs <Need> & …` marks
/// a check that only servers serving every such [`Need`] can pass.
#[macro_export]
macro_rules! conformance_tests {
    ($($check:ident $(needs $($need:ident)&+)?),+ $(,)?) => {
        $crate::server_list!(__expand_tests![$($check $(needs $($need)&+)?),+]);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __spec_array {
    ($ignored:tt $($id:ident : $bin:literal [$($arg:literal),*] [$($limit:ident),*]
        $(bench $name:literal, $default:literal, $about:literal)?),* $(,)?) => {
        &[$($crate::ServerSpec {
            id: stringify!($id),
            bin: $bin,
            args: &[$($arg),*],
            limits: &[$($crate::Limit::$limit),*],
            bench: $crate::__bench_entry!($($name, $default, $about)?),
        }),*]
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __bench_entry {
    () => {
        None
    };
    ($name:literal, $default:literal, $about:literal) => {
        Some($crate::BenchEntry {
            name: $name,
            default: $default,
            about: $about,
        })
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __expand_tests {
    ($checks:tt $($id:ident : $bin:literal [$($arg:literal),*] [$($limit:ident),*]
        $(bench $name:literal, $default:literal, $about:literal)?),* $(,)?) => {
        $(
            mod $id {
                const SPEC: $crate::ServerSpec = $crate::ServerSpec {
                    id: stringify!($id),
                    bin: $bin,
                    args: &[$($arg),*],
                    limits: &[$($crate::Limit::$limit),*],
                    bench: $crate::__bench_entry!($($name, $default, $about)?),
                };
                $crate::__expand_checks!($checks);
            }
        )*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __expand_checks {
    ([$($check:ident $(needs $($need:ident)&+)?),+]) => {
        $(
            #[test]
            fn $check() {
                $crate::run_check(
                    &SPEC,
                    stringify!($check),
                    &[$($($crate::Need::$need),+)?],
                    super::$check,
                );
            }
        )+
    };
}

/// Runs one check, named `name`, that needs `needs`, against one server: builds or finds
/// the binary, then calls `check`.
///
/// A server that cannot exist here (Go not installed, io_uring unavailable) or that does
/// not serve what the check needs (chat, for an echo-only server) is skipped with a line
/// `skipped <bin>: <reason>` written straight to stderr, past libtest's capture, so it
/// shows in a normal `cargo test` run. A binary that fails to build, or a check that
/// returns an error, panics with the server named.
pub fn run_check<E: fmt::Debug>(
    spec: &ServerSpec,
    name: &str,
    needs: &[Need],
    check: impl FnOnce(&Target) -> Result<(), E>,
) {
    if let Some(need) = needs.iter().find(|&&n| !spec.serves(n)) {
        let line = format!(
            "skipped {} ({}): {name} needs {need}, which it does not serve\n",
            spec.bin,
            spec.command_line()
        );
        let _ = io::stderr().write_all(line.as_bytes());
        return;
    }
    match spec.resolve() {
        Ok(Resolved::Ready(target)) => {
            if let Err(e) = check(&target) {
                panic!("{} ({}): {e:?}", spec.id, spec.command_line());
            }
        }
        Ok(Resolved::Skipped(reason)) => {
            // libtest captures print!/eprint! only; a direct write reaches the terminal,
            // and one write keeps the line whole among the other tests' output.
            let line = format!("skipped {}: {reason}\n", spec.bin);
            let _ = io::stderr().write_all(line.as_bytes());
        }
        Err(e) => panic!("{}: cannot get the server binary: {e}", spec.id),
    }
}
