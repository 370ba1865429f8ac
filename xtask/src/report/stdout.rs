//! What the tasks print on standard output, written so that a reader who stops early
//! (`cargo xtask report DIR | head`) does not stop the task: the run directory's files hold
//! everything printed, so once stdout is closed the rest goes unprinted and the task goes on
//! to its end and its exit status. (`println!` panics there instead: Rust ignores SIGPIPE,
//! so a write to a closed pipe is an error, and the macro turns it into a panic.)

use std::fmt::Display;
use std::io::{self, ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set when a write found stdout closed: nothing more is tried.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Prints `text` as it is.
pub(crate) fn put(text: impl Display) {
    write(format_args!("{text}"));
}

/// Prints `text` and a newline.
pub(crate) fn line(text: impl Display) {
    write(format_args!("{text}\n"));
}

fn write(args: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            eprintln!("cargo xtask: standard output failed ({e}); the rest goes unprinted");
        }
    }
}
