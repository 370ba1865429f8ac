//! What `cargo xtask bench` exits with when not every planned point ran (issue 46): a run in
//! which one server fails its points writes everything, exits 1 and says last how many
//! points failed and where the report says why, and `cargo xtask report` of it exits 0; a
//! client host whose sshd is down fails the run with a message that names the host and says
//! the connection was refused; an unknown server is refused with 2 before anything runs; a
//! reader of stdout that stops early (`| head`) changes neither the files `report` writes nor
//! the gate's exit status. (A
//! run whose every point ran exits 0: `bench_e2e`; a `--resume` that completes a run, too:
//! `resume_e2e`.)

mod util;

use std::process::Command;

/// The options of a short run of the quick suite's three points (closed loop at 2 and 4
/// connections, open loop at 4).
const SHORT: &[&str] = &[
    "--cargo-profile",
    "dev",
    "--conns",
    "2,4",
    "--duration",
    "0.3",
    "--warmup",
    "0",
    "--rate",
    "500",
    "--repeat",
    "1",
    "--quiet-wait",
    "0",
];

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or_default()
}

#[test]
fn a_run_with_failed_points_exits_1_and_its_report_renders() {
    let out = util::fresh_out("xtask-exit-failed");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    // `broken` is srv-threads with a worker count it refuses: it never starts.
    cmd.args([
        "bench",
        "--servers",
        "threads,threads+name=broken+workers=0",
    ])
    .args(SHORT)
    .arg("--out")
    .arg(&out);
    let (status, stderr) = util::run_capturing("a bench with a broken server", &mut cmd);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let last = last_line(&stderr);
    assert!(last.contains("3 of 6 points failed"), "{last}");
    assert!(
        last.contains(&out.join("report.md").display().to_string()),
        "{last}"
    );
    assert!(last.contains("\"Failures and notes\""), "{last}");

    // Everything measured is written.
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), 6, "{rows:#?}");
    for r in &rows {
        let ok = if r["server"] == "threads" { 1 } else { 0 };
        assert_eq!(r["ok"], ok, "{r:#?}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Failures and notes"), "{report}");
    assert!(report.contains("/ broken /"), "{report}");

    // The report of that run renders, and that is a success.
    std::fs::remove_file(out.join("report.md")).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("report")
        .arg(&out)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "report of a run with failed points");
    let again = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(again.contains("## Failures and notes"), "{again}");
}

#[test]
fn a_client_host_whose_sshd_is_down_is_named_with_connection_refused() {
    if Command::new("ssh").arg("-V").output().is_err() {
        eprintln!("skipped: no ssh client here (apt-get install openssh-client)");
        return;
    }
    // A port of this host with nothing listening: what a host whose sshd is down answers.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("ssh_config");
    std::fs::write(
        &config,
        format!(
            "Host sshd-down\n    HostName 127.0.0.1\n    Port {port}\n    \
             UserKnownHostsFile /dev/null\n    StrictHostKeyChecking no\n"
        ),
    )
    .unwrap();
    let out = util::fresh_out("xtask-exit-sshd-down");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["bench", "--servers", "threads"])
        .args(SHORT)
        .args(["--client-hosts", "sshd-down", "--server-addr", "127.0.0.1"])
        .arg("--ssh-config")
        .arg(&config)
        .arg("--out")
        .arg(&out);
    let (status, stderr) = util::run_capturing("a bench with an unreachable host", &mut cmd);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let last = last_line(&stderr);
    assert!(
        last.contains("copying loadgen on client host sshd-down"),
        "{last}"
    );
    assert!(last.contains("Connection refused"), "{last}");
}

#[test]
fn an_unknown_server_is_refused_with_2_before_anything_runs() {
    let out = util::fresh_out("xtask-exit-refused");
    let refused = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "bench",
            "--no-build",
            "--servers",
            "threads,nosuch",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown server `nosuch`"), "{stderr}");
    assert!(!out.exists(), "a refused run wrote {}", out.display());
}

#[test]
fn bad_capacity_options_are_refused_with_2_and_a_reason() {
    for (args, says) in [
        (
            &["--suite", "capacity", "--slo", "p98=5ms"][..],
            "`p98` is not a percentile",
        ),
        (
            &["--suite", "capacity", "--slo", "p99=0ms"][..],
            "not a positive time",
        ),
        (&["--slo", "p99=5ms"][..], "add --suite capacity"),
        (
            &["--suite", "capacity,quick"][..],
            "--suite capacity runs alone",
        ),
    ] {
        let out = util::fresh_out("xtask-exit-capacity");
        let refused = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("bench")
            .arg("--no-build")
            .args(args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.exists(), "a refused run wrote {}", out.display());
    }
}

/// `cmd` run with its standard output a pipe whose reader is already gone, as under
/// `cargo xtask report DIR | head` once head has its lines: its status and stderr.
fn with_stdout_closed(cmd: &mut Command) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = cmd
        .stdout(writer)
        .output()
        .expect("running the xtask binary");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_stops_early_changes_neither_the_files_nor_the_exit_status() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate");
    let run = util::fresh_out("xtask-exit-closed-stdout");
    std::fs::create_dir_all(&run).unwrap();
    for file in ["meta.json", "summary.json"] {
        std::fs::copy(fixtures.join("base").join(file), run.join(file)).unwrap();
    }
    let (status, stderr) = with_stdout_closed(
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("report")
            .arg(&run),
    );
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("floor-epoll"), "{report}");

    // The gate's verdict reaches the exit status whether or not anyone reads its table:
    // reactor 5 µs dearer per echo fails it.
    let gate = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
        cmd.arg("compare")
            .arg(fixtures.join("base"))
            .arg(fixtures.join("compute"))
            .args(["--fail-above", "5%"]);
        cmd
    };
    let read = gate().output().unwrap();
    assert_eq!(read.status.code(), Some(1), "{read:?}");
    let (status, stderr) = with_stdout_closed(&mut gate());
    assert_eq!(status.code(), read.status.code(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
