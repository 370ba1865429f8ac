//! Every search program (search-threads, -tokio, -tokio-uring, -fiber, -may and -go) on the
//! walk's edge cases, on unreadable entries, on a bad command line, and against ripgrep
//! on a small generated tree. Programs that cannot run here (Go missing, no io_uring) and
//! the ripgrep comparison (rg missing) are skipped with a message.

mod util;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use search::corpus::{self, NEEDLE, Spec};
use search::ripgrep;
use search::tally::Summary;
use util::{PROGRAMS, locate, run, try_run};

/// The programs runnable here, each with its path; the others are named as skipped.
fn programs() -> Vec<(&'static str, std::path::PathBuf)> {
    let uring = io_uring::IoUring::new(8).is_ok();
    let mut out = Vec::new();
    for p in PROGRAMS {
        if !uring && (p.ends_with("uring") || p.ends_with("fiber")) {
            eprintln!("skipped {p}: io_uring is not available on this kernel");
            continue;
        }
        match locate(p) {
            Ok(path) => out.push((*p, path)),
            Err(why) => eprintln!("skipped {p}: {why}"),
        }
    }
    out
}

fn search(path: &Path, args: &[&str], roots: &[&Path]) -> Command {
    let mut cmd = Command::new(path);
    cmd.args(["--needle", NEEDLE]).args(args);
    for r in roots {
        cmd.arg(r);
    }
    cmd
}

/// The counts, without the time.
fn counts(s: Summary) -> [u64; 5] {
    [s.files, s.bytes, s.files_matched, s.matches, s.errors]
}

/// A tree of every edge case the walk must get right, and what a search of it must count.
fn edge_tree(root: &Path) -> [u64; 5] {
    let mut files = Vec::<(std::path::PathBuf, Vec<u8>, u64)>::new();
    let mut add =
        |rel: &Path, data: Vec<u8>, matches: u64| files.push((root.join(rel), data, matches));
    add(Path::new("empty.txt"), Vec::new(), 0);
    add(
        Path::new("end.txt"),
        [&b"x".repeat(100)[..], NEEDLE.as_bytes()].concat(),
        1,
    );
    // Across the first and second 4096-byte read edges.
    let mut edge = b"a".repeat(4093);
    edge.extend_from_slice(NEEDLE.as_bytes());
    edge.resize(8190, b'b');
    edge.extend_from_slice(NEEDLE.as_bytes());
    edge.extend_from_slice(b"tail");
    add(Path::new("edge.txt"), edge, 2);
    add(
        Path::new("binary.dat"),
        [
            &b"\0\x01\xff\xfe"[..],
            NEEDLE.as_bytes(),
            b"\0\0\x80",
            NEEDLE.as_bytes(),
            b"\0",
        ]
        .concat(),
        2,
    );
    add(
        Path::new(".hidden/h.txt"),
        format!("{NEEDLE} {NEEDLE} {NEEDLE}\n").into_bytes(),
        3,
    );
    let deep: std::path::PathBuf = (0..60).map(|i| format!("d{i}")).collect();
    add(&deep.join("deep.txt"), NEEDLE.as_bytes().to_vec(), 1);
    add(
        Path::new(std::ffi::OsStr::from_bytes(b"n\xffme.txt")),
        format!("{NEEDLE}\n").into_bytes(),
        1,
    );
    let mut want = [0u64; 5];
    for (path, data, matches) in &files {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, data).unwrap();
        want[0] += 1;
        want[1] += data.len() as u64;
        want[2] += u64::from(*matches > 0);
        want[3] += matches;
    }
    // Not searched: a FIFO (no writer: opening it for reading would block), a link loop, a
    // link to a file with matches, a link to a directory, a dangling link.
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    std::os::unix::fs::symlink(".", root.join("loop")).unwrap();
    std::os::unix::fs::symlink("end.txt", root.join("link-to-file")).unwrap();
    std::os::unix::fs::symlink(".hidden", root.join("link-to-dir")).unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
    want
}

#[test]
fn every_program_gets_the_edge_cases_right() {
    let dir = tempfile::tempdir().unwrap();
    let want = edge_tree(dir.path());
    for (name, path) in programs() {
        for chunk in ["4096", "7", "1"] {
            let got = run(search(
                &path,
                &["--workers", "2", "--chunk", chunk],
                &[dir.path()],
            ));
            assert_eq!(
                counts(got.summary()),
                want,
                "{name} --chunk {chunk}: {}",
                got.stderr
            );
        }
        // A root that is a file, and one that is a link to a directory, are searched.
        let got = run(search(
            &path,
            &[],
            &[&dir.path().join("end.txt"), &dir.path().join("link-to-dir")],
        ));
        assert_eq!(
            counts(got.summary())[2..4],
            [2, 4],
            "{name}: {}",
            got.stderr
        );
    }
}

#[test]
fn ripgrep_counts_the_edge_cases_alike() {
    if let Err(why) = ripgrep::version() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let want = edge_tree(dir.path());
    let mut cmd = ripgrep::command(NEEDLE, 2, &[dir.path()]);
    let out = run(std::mem::replace(&mut cmd, Command::new("true")));
    let rg = ripgrep::parse(&out.stdout).unwrap();
    assert_eq!(
        [rg.files_matched, rg.matches],
        [want[2], want[3]],
        "{}",
        out.stderr
    );
}

#[test]
fn unreadable_entries_are_errors_not_failures() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::write(root.join("ok.txt"), NEEDLE).unwrap();
    fs::write(root.join("secret.txt"), NEEDLE).unwrap();
    fs::create_dir(root.join("locked")).unwrap();
    fs::write(root.join("locked/inside.txt"), NEEDLE).unwrap();
    fs::set_permissions(root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(root.join("secret.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads everything: the programs then run as nobody, for whom these are closed.
    // A file just made is owned by the effective user.
    let as_root =
        std::os::unix::fs::MetadataExt::uid(&fs::metadata(root.join("ok.txt")).unwrap()) == 0;
    for (name, path) in programs() {
        let mut cmd = search(&path, &["--workers", "2"], &[root]);
        if as_root {
            cmd.uid(65534).gid(65534);
        }
        // As nobody the binary itself may be out of reach (a checkout under /root): that
        // is a skip, not a pass; once started, the program must get everything right.
        let got = match try_run(cmd) {
            Ok(got) => got,
            Err(why) => {
                eprintln!("skipped {name}: it cannot run as nobody here: {why}");
                continue;
            }
        };
        assert_eq!(
            counts(got.summary())[2..],
            [1, 1, 2],
            "{name}: {}",
            got.stderr
        );
        assert!(
            got.stderr.contains("secret.txt"),
            "{name} names the file: {}",
            got.stderr
        );
        assert!(
            got.stderr.contains("locked"),
            "{name} names the directory: {}",
            got.stderr
        );
    }
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_missing_dir_or_an_empty_needle_is_exit_2() {
    for (name, path) in programs() {
        let got = run(search(&path, &[], &[Path::new("/no/such/dir")]));
        assert_eq!(got.code, Some(2), "{name}: {}", got.stderr);
        assert!(
            got.stderr.contains("/no/such/dir"),
            "{name}: {}",
            got.stderr
        );
        assert!(got.stdout.is_empty(), "{name}");
        let mut cmd = Command::new(&path);
        cmd.args(["--needle", "", "."]);
        assert_eq!(run(cmd).code, Some(2), "{name}");
    }
}

#[test]
fn every_program_agrees_with_ripgrep_and_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let man = corpus::ensure(&tree, Spec::TINY).unwrap();
    let want = [man.files, man.bytes, man.files_matched, man.matches, 0];
    match ripgrep::version() {
        Ok(_) => {
            let out = run(ripgrep::command(NEEDLE, 2, &[&tree]));
            let rg = ripgrep::parse(&out.stdout).unwrap();
            assert_eq!(
                [rg.files_matched, rg.matches],
                [man.files_matched, man.matches],
                "{}",
                out.stderr
            );
        }
        Err(why) => eprintln!("skipped the ripgrep side: {why}"),
    }
    for (name, path) in programs() {
        let got = run(search(&path, &["--workers", "2"], &[&tree]));
        assert_eq!(counts(got.summary()), want, "{name}: {}", got.stderr);
    }
}
