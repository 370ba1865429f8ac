//! `srv-threads`: the oldest server design there is. `--mode thread` gives every
//! connection its own OS thread doing blocking std I/O; `--mode process` forks a
//! process per connection, as the C chat server of the C-versus-Go paper does.
#![deny(unsafe_code)] // Only `fork.rs` may use it, and says why.

mod accept;
mod fork;
mod process_mode;
mod thread_mode;

use clap::{Parser, ValueEnum};

/// A thread per connection (or a process per connection) over blocking I/O.
#[derive(Debug, Parser)]
#[command(name = "srv-threads", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    /// `thread`: one OS thread per connection (two for chat: a reader and a
    /// writer). `process`: one forked process per connection (two for chat, as
    /// the C server of the papers: a reader that appends to the room files under
    /// flock, and a sender that follows them with inotify). --workers has no
    /// effect in either mode: the kernel schedules the connections. `--proto kv`
    /// needs `thread`: forked processes would share no store (http, stateless, is
    /// served in both).
    #[arg(long, value_enum, default_value_t = Mode::Thread)]
    mode: Mode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Thread,
    Process,
}

const NAME: &str = "srv-threads";

fn main() {
    launch::run::<Cli>(NAME, |cli| match cli.mode {
        Mode::Thread => thread_mode::serve(&cli.common),
        Mode::Process => process_mode::serve(&cli.common),
    })
}
