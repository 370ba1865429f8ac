//! ripgrep as the peer: the command line that searches what the programs search, and its
//! counts.
//!
//! `rg -a -F --count-matches --no-ignore --hidden --no-follow --threads N` reads binary
//! files as text (`-a`), takes the needle literally (`-F`), reads ignore files of no kind,
//! includes hidden files and follows no link: the same files as [`crate::walk`]. With
//! `--null` each line of its output is a path, a NUL, and that file's count, so that any
//! path (a colon, a name that is not UTF-8) parses.
//!
//! One difference is left to the corpus: ripgrep transcodes a file that starts with a
//! UTF-16 byte-order mark before searching it; the generated corpus has none.

use std::path::Path;
use std::process::Command;

/// How to install ripgrep where it is missing.
pub const INSTALL: &str = "apt-get install ripgrep";

/// ripgrep's version line, or why it cannot run (with the install command).
pub fn version() -> Result<String, String> {
    match Command::new("rg").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("ripgrep")
            .to_owned()),
        Ok(out) => Err(format!(
            "`rg --version` failed ({}); reinstall it: {INSTALL}",
            out.status
        )),
        Err(e) => Err(format!(
            "ripgrep (rg) is not runnable here ({e}); install it: {INSTALL}"
        )),
    }
}

/// The command that counts `needle` under `roots` with `threads` threads.
pub fn command<P: AsRef<Path>>(needle: &str, threads: usize, roots: &[P]) -> Command {
    let mut cmd = Command::new("rg");
    cmd.args([
        "-a",
        "-F",
        "--count-matches",
        "--no-ignore",
        "--hidden",
        "--no-follow",
    ])
    .args(["--null", "--threads"])
    .arg(threads.to_string())
    .arg("-e")
    .arg(needle)
    .arg("--");
    for r in roots {
        cmd.arg(r.as_ref().as_os_str());
    }
    cmd
}

/// What ripgrep counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Files with at least one match (the lines of its output).
    pub files_matched: u64,
    /// Matches over all files.
    pub matches: u64,
}

/// Why ripgrep's output could not be read.
#[derive(Debug, thiserror::Error)]
#[error("ripgrep output line {line}: {what}")]
pub struct ParseError {
    /// 1-based line of the output.
    pub line: usize,
    /// What was wrong with it.
    pub what: String,
}

/// Adds up `--null --count-matches` output.
pub fn parse(stdout: &[u8]) -> Result<Counts, ParseError> {
    let mut counts = Counts::default();
    for (i, line) in stdout.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad = |what: &str| ParseError {
            line: i + 1,
            what: what.to_owned(),
        };
        let nul = line
            .iter()
            .rposition(|&b| b == 0)
            .ok_or_else(|| bad("no NUL after the path (is --null given?)"))?;
        let count = std::str::from_utf8(&line[nul + 1..])
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| bad("the count is not a number"))?;
        counts.files_matched += 1;
        counts.matches += count;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_odd_paths_parse() {
        let out = b"a/b.c\x003\nweird:name\x001\ncaf\xe9\x0010\n";
        assert_eq!(
            parse(out).unwrap(),
            Counts {
                files_matched: 3,
                matches: 14
            }
        );
        assert!(parse(b"a/b.c:3\n").is_err());
        assert!(parse(b"a\x00x\n").is_err());
        assert_eq!(parse(b"").unwrap(), Counts::default());
    }
}
