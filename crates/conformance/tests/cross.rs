//! The room files are a format shared by every server (docs/room-log.md): a room
//! written by one server must be recovered and replayed by any other. The servers of
//! the list take turns on one `--data` directory, round the ring and back to the
//! first: each replays everything its predecessors stored, then adds its own.
//!
//! Also runs the Go peer's own unit tests (`go test` in peers/go) when Go is here, so
//! the README's one test command covers the whole project.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use conformance::{ChatClient, Need, Resolved, SERVERS, Signal, Target};

#[test]
fn every_server_replays_every_other_servers_rooms() {
    let mut targets: Vec<Target> = Vec::new();
    for spec in SERVERS {
        if !spec.serves(Need::Chat) {
            eprintln!(
                "skipped {}: it does not serve --proto chat",
                spec.command_line()
            );
            continue;
        }
        match spec.resolve().expect("resolving a server binary") {
            Resolved::Ready(t) => targets.push(t),
            Resolved::Skipped(reason) => eprintln!("skipped {}: {reason}", spec.bin),
        }
    }
    assert!(!targets.is_empty(), "no server to test");
    let dir = tempfile::tempdir().unwrap();
    let mut stored: Vec<String> = Vec::new();
    // Round the ring, then the first server once more: it reads the last one's.
    for target in targets.iter().chain(targets.first()) {
        take_turn(target, dir.path(), &mut stored)
            .unwrap_or_else(|e| panic!("{}: {e:#}", target.spec().command_line()));
    }
}

/// Starts `target` on `dir`, checks it replays `stored` exactly, adds two messages
/// (one with an empty text, one with spaces) and stops it cleanly.
fn take_turn(target: &Target, dir: &Path, stored: &mut Vec<String>) -> Result<()> {
    let data = dir.to_str().context("temp dir path")?;
    let server = target.start(&["--proto", "chat", "--data", data])?;
    let id = target.spec().id;
    let mut c = ChatClient::connect(server.addr())?;
    c.expect(&format!("NICK {id}"), "OK")?;
    c.send("JOIN shared 0")?;
    for (i, want) in stored.iter().enumerate() {
        c.expect_line(&format!("replay of message {}", i + 1), want)?;
    }
    let next = stored.len() + 1;
    c.expect_line("end of replay", &format!("JOINED shared {next}"))?;
    for text in ["", &format!("from {id} with  spaces")] {
        let seq = stored.len() + 1;
        c.expect(&format!("SAY shared {text}"), &format!("ACK shared {seq}"))?;
        stored.push(format!("MSG shared {seq} {id} {text}"));
    }
    drop(c);
    server.signal(Signal::SIGTERM)?;
    let mut server = server;
    let exit = server.wait_exit(conformance::EXIT_TIMEOUT)?;
    ensure!(exit.code == Some(0), "stop: {}", exit.describe_status());
    Ok(())
}

#[test]
fn go_peer_unit_tests_pass() {
    let peer = match conformance::go_peer().expect("looking for the Go peer") {
        Ok(peer) => peer,
        Err(reason) => {
            // Past libtest's capture, as conformance::run_check reports a skip.
            let line = format!("skipped go test: {reason}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return;
        }
    };
    let out = Command::new("go")
        .args(["test", "./..."])
        .current_dir(&peer)
        .output()
        .expect("running go test");
    assert!(
        out.status.success(),
        "go test ./... failed in peers/go:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
