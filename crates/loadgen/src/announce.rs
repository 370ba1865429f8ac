//! The line loadgen prints on stderr as its clock starts, naming its measured window in wall
//! time, so that a harness beside it on the same CPU can keep still for exactly that long
//! (xtask reads it back with [`parse_window_line`]).

use std::time::{Duration, SystemTime};

const PREFIX: &str = "loadgen: measuring from ";

/// The line for a window of `len` starting at `start`.
pub fn window_line(start: SystemTime, len: Duration) -> String {
    let unix = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    format!(
        "{PREFIX}{:.3} to {:.3} (unix s)",
        unix(start),
        unix(start + len)
    )
}

/// The window's start and end, in Unix seconds, from a line of loadgen's stderr.
pub fn parse_window_line(line: &str) -> Option<(f64, f64)> {
    let rest = line.trim().strip_prefix(PREFIX)?;
    let (start, rest) = rest.split_once(" to ")?;
    let end = rest.strip_suffix(" (unix s)")?;
    let (start, end) = (start.parse::<f64>().ok()?, end.parse::<f64>().ok()?);
    (start.is_finite() && end >= start).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_reads_back() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(1_765_000_000_250);
        let line = window_line(start, Duration::from_secs(4));
        assert_eq!(
            parse_window_line(&line),
            Some((1_765_000_000.25, 1_765_000_004.25))
        );
        assert_eq!(
            parse_window_line("loadgen:   3.0 s warmup: 5 replies"),
            None
        );
        assert_eq!(
            parse_window_line("loadgen: measuring from 9 to 3 (unix s)"),
            None
        );
    }
}
