//! The command line every server shares (docs/DESIGN.md, "Every server binary"): a bad
//! argument, a port in use or an unusable `--data` is a one-line error and exit status
//! 2; SIGTERM and SIGINT stop the server cleanly with one line of counters.

use std::io::{Read, Write};
use std::net::TcpListener;

use anyhow::{Context, Result, ensure};
use conformance::{ChatClient, EXIT_TIMEOUT, Exit, Signal, Target};

conformance::conformance_tests!(
    cli_unknown_flag,
    cli_bad_proto,
    cli_zero_workers,
    cli_port_in_use,
    cli_data_is_a_file needs Chat,
    cli_sigterm,
    cli_sigint needs Chat,
);

/// Exactly one non-empty line, as `what` says of stderr.
fn ensure_one_line(text: &str, what: &str) -> Result<()> {
    let lines: Vec<&str> = text.trim_end_matches('\n').split('\n').collect();
    ensure!(
        lines.len() == 1 && !lines[0].trim().is_empty(),
        "{what}: expected exactly one line on stderr, got {} lines: {text:?}",
        lines.len()
    );
    Ok(())
}

/// The server refuses to start: exit status 2, nothing on stdout, one line on stderr.
fn expect_refusal(target: &Target, args: &[&str]) -> Result<Exit> {
    let what = format!("`{}`", args.join(" "));
    let exit = target.run_to_exit(args).with_context(|| what.clone())?;
    ensure!(
        exit.code == Some(2),
        "{what}: expected exit status 2, got {}; stderr: {:?}",
        exit.describe_status(),
        exit.stderr
    );
    ensure!(
        exit.stdout.is_empty(),
        "{what}: wrote to stdout: {:?}",
        exit.stdout
    );
    ensure_one_line(&exit.stderr, &what)?;
    Ok(exit)
}

fn cli_unknown_flag(target: &Target) -> Result<()> {
    expect_refusal(target, &["--proto", "echo", "--no-such-flag"])?;
    Ok(())
}

fn cli_bad_proto(target: &Target) -> Result<()> {
    expect_refusal(target, &["--proto", "nope"])?;
    Ok(())
}

fn cli_zero_workers(target: &Target) -> Result<()> {
    expect_refusal(target, &["--proto", "echo", "--workers", "0"])?;
    Ok(())
}

fn cli_port_in_use(target: &Target) -> Result<()> {
    let taken = TcpListener::bind("127.0.0.1:0")?;
    let addr = taken.local_addr()?.to_string();
    expect_refusal(target, &["--proto", "echo", "--addr", &addr])?;
    Ok(())
}

fn cli_data_is_a_file(target: &Target) -> Result<()> {
    let file = tempfile::NamedTempFile::new()?;
    let path = file.path().to_str().context("temp file path")?;
    expect_refusal(target, &["--proto", "chat", "--data", path])?;
    Ok(())
}

/// Checks a clean stop: exit status 0, one line of counters on stderr, and nothing on
/// stdout but the READY line.
fn expect_clean_stop(exit: &Exit, ready: &str, signal: Signal) -> Result<()> {
    ensure!(
        exit.code == Some(0),
        "after {signal}: expected exit status 0, got {}; stderr: {:?}",
        exit.describe_status(),
        exit.stderr
    );
    ensure!(
        exit.stdout == format!("{ready}\n"),
        "stdout is not just the READY line: {:?}",
        exit.stdout
    );
    ensure_one_line(&exit.stderr, &format!("after {signal}"))?;
    ensure!(
        exit.stderr.bytes().any(|b| b.is_ascii_digit()),
        "after {signal}: the stderr line holds no counters: {:?}",
        exit.stderr
    );
    Ok(())
}

/// SIGTERM stops an echo server with a client still connected.
fn cli_sigterm(target: &Target) -> Result<()> {
    let mut server = target.start(&["--proto", "echo"])?;
    let ready = format!("READY {}", server.addr());
    let mut client = server.connect()?;
    client.write_all(b"before the signal")?;
    let mut back = [0; 17];
    client.read_exact(&mut back)?;
    server.signal(Signal::SIGTERM)?;
    let exit = server.wait_exit(EXIT_TIMEOUT)?;
    expect_clean_stop(&exit, &ready, Signal::SIGTERM)
}

/// SIGINT stops a chat server with a client still connected, and what it acknowledged
/// is there after a restart on the same `--data`.
fn cli_sigint(target: &Target) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().to_str().context("temp dir path")?;
    let mut server = target.start(&["--proto", "chat", "--data", data])?;
    let ready = format!("READY {}", server.addr());
    let mut client = ChatClient::connect(server.addr())?;
    client.expect("SAY room kept", "ACK room 1")?;
    server.signal(Signal::SIGINT)?;
    let exit = server.wait_exit(EXIT_TIMEOUT)?;
    expect_clean_stop(&exit, &ready, Signal::SIGINT)?;
    drop(server);

    let server = target.start(&["--proto", "chat", "--data", data])?;
    let mut client = ChatClient::connect(server.addr())?;
    client.send("JOIN room 0")?;
    client.expect_line("replay after SIGINT", "MSG room 1 anon kept")?;
    client.expect_line("replay after SIGINT", "JOINED room 2")?;
    Ok(())
}
