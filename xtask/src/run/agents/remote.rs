//! What runs on a client host, through its ssh session: the `sh` scripts that copy this
//! build's loadgen into a directory only the user can write and check its SHA-256 (`INSTALL`),
//! and that run it only while its SHA-256 is still the one copied (`RUN`); how their words
//! are quoted for the host's shell, and what a failed step says.
//!
//! It calls nothing of the harness.

use std::process::Output;

use anyhow::anyhow;
use sha2::{Digest, Sha256};

/// Run on a host as `sh -c INSTALL ringside SHA256`, this build's loadgen on its stdin: a
/// directory only the user can write, the copy written there, its SHA-256 checked, and only
/// then made executable. Prints the directory. Each failing step says which it was, and
/// leaves nothing behind.
pub(super) const INSTALL: &str = r#"set -u
sha=$1
d=
fail() { echo "$1" >&2; if [ -n "$d" ]; then rm -rf -- "$d"; fi; exit 1; }
umask 077
d=$(mktemp -d "${TMPDIR:-/tmp}/ringside-loadgen.XXXXXXXXXX") || fail "making a private directory with mktemp -d failed"
cat > "$d/loadgen" || fail "writing $d/loadgen from the ssh session failed"
got=$(sha256sum < "$d/loadgen" 2>/dev/null || shasum -a 256 < "$d/loadgen") || fail "computing the SHA-256 of $d/loadgen failed (no sha256sum or shasum there?)"
got=${got%% *}
[ "$got" = "$sha" ] || fail "checking the SHA-256 of the copy: it is $got, not $sha as sent; not made executable, removed"
chmod 0700 "$d/loadgen" || fail "chmod 0700 $d/loadgen failed"
echo "$d"
"#;

/// Run on a host as `sh -c RUN ringside DIR SHA256 ARGS...`: runs `DIR/loadgen ARGS...`
/// only if its SHA-256 is still the one copied.
pub(super) const RUN: &str = r#"set -u
f=$1/loadgen
sha=$2
shift 2
got=$(sha256sum < "$f" 2>/dev/null || shasum -a 256 < "$f") || { echo "computing the SHA-256 of $f failed; not running it" >&2; exit 1; }
got=${got%% *}
if [ "$got" != "$sha" ]; then echo "$f has SHA-256 $got, not $sha as copied: it changed since the copy; not running it" >&2; exit 1; fi
exec "$f" "$@"
"#;

/// The SHA-256 of `bytes`, in lowercase hex.
pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `s` as one word of a POSIX shell command line.
pub(super) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command line, for the host's shell, that runs `script` under `sh` with `args`.
pub(super) fn remote_sh(script: &str, args: &[&str]) -> String {
    let mut line = format!("sh -c {} ringside", sh_quote(script));
    for a in args {
        line.push(' ');
        line.push_str(&sh_quote(a));
    }
    line
}

/// Why a step on `host` failed, from what ssh returned: ssh's own failure (exit 255: the
/// host not reached, the login refused, the connection lost) or the step's.
pub(super) fn step_failed(host: &str, step: &str, out: &Output) -> anyhow::Error {
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let said = if said.is_empty() {
        "(nothing on stderr)".to_string()
    } else {
        said
    };
    if out.status.code() == Some(255) {
        anyhow!(
            "{step} on client host {host}: ssh failed ({}): {said}",
            out.status
        )
    } else {
        anyhow!(
            "{step} on client host {host} failed ({}): {said}",
            out.status
        )
    }
}

/// The scripts, run here under `sh` as ssh would run them on a host (the same command line,
/// given to `sh -c` instead of the login shell).
#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    /// A stand-in for loadgen: a script that says how it was run.
    const FAKE: &[u8] = b"#!/bin/sh\necho \"fake loadgen ran: $*\"\n";

    /// Runs `line` as the host's shell would, with `stdin` and `TMPDIR` (unset when `None`).
    fn host(line: &str, stdin: &[u8], tmpdir: Option<&Path>) -> Output {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(line);
        match tmpdir {
            Some(t) => cmd.env("TMPDIR", t),
            None => cmd.env_remove("TMPDIR"),
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = child.stdin.take().unwrap();
        // A script that fails early stops reading; that is no failure of the test.
        let _ = pipe.write_all(stdin);
        drop(pipe);
        child.wait_with_output().unwrap()
    }

    fn install(bytes: &[u8], sha: &str, tmpdir: Option<&Path>) -> Output {
        host(&remote_sh(INSTALL, &[sha]), bytes, tmpdir)
    }

    fn stdout(out: &Output) -> String {
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn stderr(out: &Output) -> String {
        String::from_utf8_lossy(&out.stderr).trim().to_string()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn words_survive_the_hosts_shell() {
        let line = remote_sh("printf '%s|' \"$@\"", &["a b", "it's", "$HOME", "`x`"]);
        let out = host(&line, b"", None);
        assert_eq!(stdout(&out), "a b|it's|$HOME|`x`|", "{}", stderr(&out));
    }

    #[test]
    fn the_copy_lands_in_a_private_directory_and_runs_when_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let out = install(FAKE, &sha256_hex(FAKE), Some(tmp.path()));
        assert!(out.status.success(), "{}", stderr(&out));
        let dir = PathBuf::from(stdout(&out));
        assert!(dir.starts_with(tmp.path()), "{}", dir.display());
        assert_eq!(mode(&dir), 0o700, "only the user may write there");
        assert_eq!(mode(&dir.join("loadgen")), 0o700);
        assert_eq!(std::fs::read(dir.join("loadgen")).unwrap(), FAKE);
        let dir = dir.to_string_lossy().into_owned();
        let run = host(
            &remote_sh(RUN, &[&dir, &sha256_hex(FAKE), "agent"]),
            b"",
            None,
        );
        assert!(run.status.success(), "{}", stderr(&run));
        assert_eq!(stdout(&run), "fake loadgen ran: agent");
    }

    #[test]
    fn a_copy_that_arrives_changed_is_never_made_executable() {
        let tmp = tempfile::tempdir().unwrap();
        let out = install(FAKE, &sha256_hex(b"another binary"), Some(tmp.path()));
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("checking the SHA-256 of the copy"),
            "{}",
            stderr(&out)
        );
        // Nothing left behind, executable or not.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_copy_changed_after_it_landed_is_never_run() {
        let tmp = tempfile::tempdir().unwrap();
        let sha = sha256_hex(FAKE);
        let out = install(FAKE, &sha, Some(tmp.path()));
        assert!(out.status.success(), "{}", stderr(&out));
        let dir = stdout(&out);
        let marker = tmp.path().join("ran");
        let evil = format!("#!/bin/sh\ntouch '{}'\n", marker.display());
        std::fs::write(Path::new(&dir).join("loadgen"), evil).unwrap();
        let run = host(&remote_sh(RUN, &[&dir, &sha, "agent"]), b"", None);
        assert_eq!(run.status.code(), Some(1));
        assert!(
            stderr(&run).contains("changed since the copy; not running it"),
            "{}",
            stderr(&run)
        );
        assert!(!marker.exists(), "the changed file ran");
    }

    #[test]
    fn a_file_planted_at_the_old_fixed_path_is_never_run() {
        use std::hash::{DefaultHasher, Hash, Hasher};
        // Where the copy went before: /tmp/ringside-loadgen-<DefaultHasher of the bytes>.
        let mut h = DefaultHasher::new();
        FAKE.to_vec().hash(&mut h);
        let old = PathBuf::from(format!("/tmp/ringside-loadgen-{:016x}", h.finish()));
        let marker = tempfile::tempdir().unwrap();
        let marker = marker.path().join("ran");
        let _ = std::fs::remove_file(&old);
        std::fs::write(&old, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
        // As on a host with no TMPDIR: mktemp -d in /tmp.
        let sha = sha256_hex(FAKE);
        let out = install(FAKE, &sha, None);
        assert!(out.status.success(), "{}", stderr(&out));
        let dir = stdout(&out);
        let run = host(&remote_sh(RUN, &[&dir, &sha, "agent"]), b"", None);
        let _ = std::fs::remove_dir_all(&dir);
        let planted = std::fs::read_to_string(&old).unwrap_or_default();
        let _ = std::fs::remove_file(&old);
        assert_eq!(stdout(&run), "fake loadgen ran: agent", "{}", stderr(&run));
        assert!(!marker.exists(), "the planted file ran");
        assert!(
            planted.contains("touch"),
            "the planted file was overwritten"
        );
        assert_ne!(Path::new(&dir).join("loadgen"), old);
    }
}
