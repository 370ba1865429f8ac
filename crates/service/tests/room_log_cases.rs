//! The crafted room logs of `testdata/room-log/`, which the Go peer's tests read too:
//! this test makes each file from its recipe, checks the committed file has exactly those
//! bytes (`RINGSIDE_BLESS=1` rewrites them), and recovers a copy of each with
//! [`RoomLog::open`], expecting what `cases.txt` says.
//!
//! `cases.txt` has one case a line: `<file> clean <next_seq>`, `<file> cut <offset>
//! <next_seq>` (a torn tail cut at `offset`, the file left that long) or `<file> corrupt
//! <offset>` (refused, the error names `offset`, the file unchanged).

use std::path::{Path, PathBuf};

use service::log::{Fsync, LogError, RoomLog};

/// A record as docs/room-log.md lays it out.
fn record(seq: u64, name: &str, text: &str) -> Vec<u8> {
    let mut body = seq.to_le_bytes().to_vec();
    body.push(name.len() as u8);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(text.as_bytes());
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Messages 1..=5 of a room, 30 bytes each, and the offset of each record.
fn five() -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut offsets = Vec::new();
    for seq in 1..=5 {
        offsets.push(bytes.len());
        bytes.extend(record(seq, "anon", &format!("message {seq}")));
    }
    (bytes, offsets)
}

/// Every case: file name, bytes, and what `cases.txt` says after the name.
fn cases() -> Vec<(&'static str, Vec<u8>, String)> {
    let (base, off) = five();
    let end = base.len();
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = base.clone();
        f(&mut b);
        b
    };
    let sixth = record(6, "anon", "message 6, never acknowledged");
    vec![
        ("empty.log", Vec::new(), "clean 1".into()),
        ("clean.log", base.clone(), "clean 6".into()),
        (
            // The third record's length overwritten by one past the end of the file.
            "damaged-length-mid.log",
            with(&|b| b[off[2]..off[2] + 4].copy_from_slice(&0x00ff_ff00u32.to_le_bytes())),
            format!("corrupt {}", off[2]),
        ),
        (
            // ...and by one too small for any body.
            "short-length-mid.log",
            with(&|b| b[off[2]..off[2] + 4].copy_from_slice(&3u32.to_le_bytes())),
            format!("corrupt {}", off[2]),
        ),
        (
            "zero-tail-1.log",
            with(&|b| b.push(0)),
            format!("cut {end} 6"),
        ),
        (
            "zero-tail-4k.log",
            with(&|b| b.resize(end + 4096, 0)),
            format!("cut {end} 6"),
        ),
        (
            "zero-tail-100k.log",
            with(&|b| b.resize(end + 100 * 1024, 0)),
            format!("cut {end} 6"),
        ),
        ("zero-only-4k.log", vec![0; 4096], "cut 0 1".into()),
        (
            // A crash in the middle of the sixth write.
            "torn-final.log",
            with(&|b| b.extend_from_slice(&sixth[..sixth.len() / 2])),
            format!("cut {end} 6"),
        ),
        (
            // A power loss: the sixth record's first bytes reached the disk, the rest of
            // the file's new length is zeros.
            "torn-final-zero-body.log",
            with(&|b| {
                b.extend_from_slice(&sixth[..12]);
                b.resize(end + sixth.len(), 0);
            }),
            format!("cut {end} 6"),
        ),
        (
            "flipped-byte-mid.log",
            with(&|b| b[off[2] + 25] ^= 0x01),
            format!("corrupt {}", off[2]),
        ),
        (
            // A whole last record with a bad checksum: its write was cut short.
            "flipped-byte-last.log",
            with(&|b| b[off[4] + 25] ^= 0x01),
            format!("cut {} 5", off[4]),
        ),
        (
            // A hole of zeros where the third record was, the fourth and fifth intact.
            "zero-hole-mid.log",
            with(&|b| b[off[2]..off[3]].fill(0)),
            format!("corrupt {}", off[2]),
        ),
        (
            // Messages 1, 2, 4, 5: each record whole, the third out of order.
            "seq-gap.log",
            [1, 2, 4, 5]
                .iter()
                .flat_map(|&s| record(s, "anon", &format!("message {s}")))
                .collect(),
            format!("corrupt {}", off[2]),
        ),
        (
            // A whole last record that repeats a seq: written whole, so corruption.
            "seq-repeat-last.log",
            with(&|b| b.extend(record(5, "anon", "again"))),
            format!("corrupt {end}"),
        ),
    ]
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/room-log")
}

#[test]
fn committed_cases_match_their_recipes() {
    let dir = testdata();
    let bless = std::env::var_os("RINGSIDE_BLESS").is_some();
    let mut manifest = String::new();
    for (name, bytes, expect) in cases() {
        manifest.push_str(&format!("{name} {expect}\n"));
        let path = dir.join(name);
        if bless {
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (RINGSIDE_BLESS=1 writes it)", path.display()));
        assert!(committed == bytes, "{name} differs from its recipe");
    }
    let manifest_path = dir.join("cases.txt");
    if bless {
        std::fs::write(&manifest_path, &manifest).unwrap();
    }
    assert_eq!(std::fs::read_to_string(manifest_path).unwrap(), manifest);
}

#[test]
fn every_case_recovers_as_cases_txt_says() {
    let manifest = std::fs::read_to_string(testdata().join("cases.txt")).unwrap();
    let mut seen = 0;
    for line in manifest.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (name, outcome, args) = (words[0], words[1], &words[2..]);
        let num = |i: usize| -> u64 { args[i].parse().unwrap() };
        let bytes = std::fs::read(testdata().join(name)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.log");
        std::fs::write(&path, &bytes).unwrap();
        let opened = RoomLog::open(dir.path(), "r", Fsync::Never);
        let after = std::fs::read(&path).unwrap();
        match (outcome, opened) {
            ("clean", Ok(log)) => {
                assert_eq!(log.next_seq(), num(0), "{name}");
                assert_eq!(after, bytes, "{name}");
            }
            ("cut", Ok(log)) => {
                assert_eq!(log.next_seq(), num(1), "{name}");
                assert_eq!(after, bytes[..num(0) as usize], "{name}");
            }
            (
                "corrupt",
                Err(LogError::Corrupt {
                    path: p, offset, ..
                }),
            ) => {
                assert_eq!((p, offset), (path.clone(), num(0)), "{name}");
                assert_eq!(after, bytes, "{name}: a refused file must be left alone");
            }
            (_, other) => panic!("{name}: expected {line}, got {other:?}"),
        }
        seen += 1;
    }
    assert_eq!(seen, cases().len());
}
