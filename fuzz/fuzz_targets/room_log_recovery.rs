//! Fuzzes the room-log recovery scan (`service::log::RoomLog::open`, docs/room-log.md)
//! with arbitrary file contents: it never panics; a refusal changes nothing; a recovery
//! leaves a prefix of the file that recovers again with nothing cut. The first byte
//! chooses how many valid records (0 to 7) come before the fuzzer's bytes; those are
//! acknowledged messages, so recovery must keep all of them or refuse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use service::log::{Fsync, LogError, RoomLog};

fuzz_target!(|data: &[u8]| {
    let [n, tail @ ..] = data else {
        return;
    };
    let n = u64::from(n % 8);
    let base = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir());
    let dir = base.expect("a temporary directory");
    {
        let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).expect("a new room");
        for i in 1..=n {
            log.append("anon", &format!("acknowledged {i}"))
                .expect("an append");
        }
    }
    let path = dir.path().join("r.log");
    let mut bytes = std::fs::read(&path).expect("the log");
    let acked = bytes.len();
    bytes.extend_from_slice(tail);
    std::fs::write(&path, &bytes).expect("the crafted log");
    match RoomLog::open(dir.path(), "r", Fsync::Never) {
        Ok(log) => {
            assert!(log.next_seq() > n, "an acknowledged message was cut");
            let after = std::fs::read(&path).expect("the log");
            assert!(after.len() >= acked && bytes.starts_with(&after));
            drop(log);
            let again = RoomLog::open(dir.path(), "r", Fsync::Never).expect("a second recovery");
            assert_eq!(std::fs::read(&path).expect("the log"), after);
            drop(again);
        }
        Err(LogError::Corrupt { .. }) => {
            assert_eq!(std::fs::read(&path).expect("the log"), bytes);
        }
        Err(e) => panic!("{e}"),
    }
});
