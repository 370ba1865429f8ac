//! Outside servers in the ring, through the real command line: `cargo xtask conform` passes
//! our own srv-threads at echo, kv and http (so the checks hold what ours do), passes the
//! fifty-line Python echo server of docs/examples, and refuses one that answers wrongly,
//! naming the check; then a tiny sweep of srv-threads beside the Python server and the wrong
//! one measures the first two side by side and leaves the third out, the check named in the
//! report, and exits 1 naming it last (a server named in --servers that was not measured). Without
//! python3 the Python half says so and skips.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A server that upper-cases what it echoes, then closes: wrong at the first check.
const UPPER: &str = "python3 -c \"import socket as s;l=s.create_server(('127.0.0.1',int('{port}')))\nwhile 1:c=l.accept()[0];c.sendall(c.recv(99).upper());c.close()\"";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn conform(command: &str, protos: &str) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .current_dir(root())
        .args(["conform", command, "--proto", protos])
        .output()
        .expect("running cargo xtask conform");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn python() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn outside_servers_are_checked_then_measured_beside_ours() {
    let out = util::fresh_out("xtask-ring");
    let py = python();
    let echo = "python3 docs/examples/echo_server.py --addr {addr} --workers {workers}";
    let mut servers = String::from("threads");
    if py {
        servers.push_str(&format!(",ext:py-echo={echo},ext:upper={UPPER}"));
    } else {
        eprintln!("skipped the outside servers: no python3 (apt-get install python3)");
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.current_dir(root()).args([
        "bench",
        "--cargo-profile",
        "dev",
        "--servers",
        &servers,
        "--conns",
        "10",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--rate",
        "1000",
        "--repeat",
        "1",
        "--quiet-wait",
        "0",
    ]);
    cmd.arg("--out").arg(&out);
    let (status, stderr) = util::run_capturing("cargo xtask bench with outside servers", &mut cmd);
    if py {
        // `upper`, named in --servers, was refused: everything else is written, and the run
        // exits 1 naming it last.
        assert_eq!(status.code(), Some(1), "{stderr}");
        let last = stderr.trim_end().lines().last().unwrap_or_default();
        assert!(
            last.contains("1 named in --servers not measured (upper: refused, not measured"),
            "{last}"
        );
    } else {
        assert!(status.success(), "{stderr}");
    }

    // Our own server passes the wire checks of every protocol they have.
    let threads = Path::new(env!("CARGO_BIN_EXE_xtask")).with_file_name("srv-threads");
    let (ok, stdout, stderr) = conform(
        &format!(
            "{} --proto {{proto}} --addr {{addr}} --workers {{workers}}",
            threads.display()
        ),
        "echo,kv,http",
    );
    assert!(ok, "{stdout}{stderr}");
    assert_eq!(stdout.matches("every check passed").count(), 3, "{stdout}");

    if py {
        let (ok, stdout, stderr) = conform(echo, "echo");
        assert!(ok, "{stdout}{stderr}");
        assert!(
            stdout.contains("echo: every check passed (echo_bytes"),
            "{stdout}"
        );
        let (ok, _, stderr) = conform(UPPER, "echo");
        assert!(!ok);
        assert!(
            stderr
                .trim_end()
                .ends_with("echoed 6 bytes that differ from those sent at byte 0")
                && stderr.contains("`echo_bytes`"),
            "{stderr}"
        );

        let rows: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        for server in ["threads", "py-echo"] {
            let mine: Vec<_> = rows.iter().filter(|r| r["server"] == server).collect();
            assert_eq!(mine.len(), 2, "{server}: {rows:#?}");
            assert!(
                mine.iter().all(|r| r["ok"] == 1 && r["errors"] == 0),
                "{mine:#?}"
            );
        }
        assert!(!rows.iter().any(|r| r["server"] == "upper"));
        let report = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(
            report
                .contains("| **py-echo** | outside server: `python3 docs/examples/echo_server.py"),
            "{report}"
        );
        assert!(
            report.contains(
                "upper: refused, not measured: it failed the echo conformance check `echo_bytes`"
            ),
            "{report}"
        );
        // Stopped by SIGTERM like any program, not killed after the grace.
        assert!(!report.contains("did not stop within"), "{report}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
