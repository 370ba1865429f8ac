//! The counters of a search and the one JSON line every program prints.

use std::fmt::Display;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a search found: the line each program prints, and what xtask and the tests read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Regular files read to their end.
    pub files: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Files with at least one match.
    pub files_matched: u64,
    /// Non-overlapping occurrences of the needle, over all files.
    pub matches: u64,
    /// Files and directories that could not be opened, listed or read.
    pub errors: u64,
    /// Wall time of the walk, from the first directory opened to the last file closed.
    pub seconds: f64,
}

impl Summary {
    /// The JSON line.
    pub fn to_line(&self) -> String {
        // Serialising plain numbers cannot fail; the fallback keeps that out of the callers.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a program's stdout: its last non-empty line.
    pub fn from_stdout(stdout: &str) -> Result<Summary, serde_json::Error> {
        let line = stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        serde_json::from_str(line)
    }
}

/// Counters shared by every worker of one search.
#[derive(Debug, Default)]
pub struct Tally {
    files: AtomicU64,
    bytes: AtomicU64,
    files_matched: AtomicU64,
    matches: AtomicU64,
    errors: AtomicU64,
}

impl Tally {
    /// A new, zeroed tally.
    pub fn new() -> Tally {
        Tally::default()
    }

    /// One file read to its end.
    pub fn file(&self, bytes: u64, matches: u64) {
        // Relaxed: the totals are read once every worker has been joined, which orders them.
        self.files.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if matches > 0 {
            self.files_matched.fetch_add(1, Ordering::Relaxed);
            self.matches.fetch_add(matches, Ordering::Relaxed);
        }
    }

    /// A file or directory that failed: named on stderr, counted, never fatal.
    pub fn error(&self, path: &Path, what: &str, err: impl Display) {
        eprintln!("{}: {what}: {err}", path.display());
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The totals, with the walk's wall time.
    pub fn summary(&self, elapsed: Duration) -> Summary {
        Summary {
            files: self.files.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            files_matched: self.files_matched.load(Ordering::Relaxed),
            matches: self.matches.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            seconds: elapsed.as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_round_trips() {
        let t = Tally::new();
        t.file(10, 0);
        t.file(20, 3);
        t.error(Path::new("/x"), "open", "denied");
        let s = t.summary(Duration::from_millis(1500));
        let line = s.to_line();
        assert!(line.starts_with("{\"files\":2,\"bytes\":30,\"files_matched\":1,\"matches\":3,\"errors\":1,\"seconds\":1.5"), "{line}");
        assert_eq!(Summary::from_stdout(&format!("{line}\n\n")).unwrap(), s);
    }
}
