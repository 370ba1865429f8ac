//! Arbitrary bytes against the room-log recovery scan (docs/room-log.md), bounded, in
//! the normal test suite; `fuzz/` runs the same checks unbounded under cargo-fuzz.
//!
//! Whatever follows the acknowledged records, recovery keeps every one of them or
//! refuses; a refusal changes nothing; what recovery leaves recovers again unchanged.
//! Damage to any byte of an acknowledged record that is not the last is refused.

use std::path::Path;

use proptest::prelude::*;
use service::log::{Fsync, LogError, RoomLog};

/// Writes `n` acknowledged messages to room `r` in `dir`; returns the bytes and the
/// offset of each record.
fn acknowledged(dir: &Path, n: u64) -> (Vec<u8>, Vec<usize>) {
    let mut log = RoomLog::open(dir, "r", Fsync::Never).unwrap();
    let mut offsets = Vec::new();
    let mut len = 0;
    for i in 1..=n {
        offsets.push(len);
        log.append("anon", &format!("acknowledged {i}")).unwrap();
        len = std::fs::metadata(log.path()).unwrap().len() as usize;
    }
    (std::fs::read(log.path()).unwrap(), offsets)
}

/// Tails that look like what a crash or a power loss leaves, and plain garbage.
fn tail() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        (0usize..5000).prop_map(|n| vec![0; n]),
        (proptest::collection::vec(any::<u8>(), 0..40), 0usize..2000).prop_map(|(mut b, z)| {
            b.resize(b.len() + z, 0);
            b
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn acknowledged_records_survive_any_tail(n in 0u64..6, tail in tail()) {
        let dir = tempfile::tempdir().unwrap();
        let (base, _) = acknowledged(dir.path(), n);
        let path = dir.path().join("r.log");
        let mut bytes = base.clone();
        bytes.extend_from_slice(&tail);
        std::fs::write(&path, &bytes).unwrap();
        match RoomLog::open(dir.path(), "r", Fsync::Never) {
            Ok(log) => {
                prop_assert!(log.next_seq() > n, "an acknowledged message was cut");
                let after = std::fs::read(&path).unwrap();
                prop_assert!(after.len() >= base.len() && bytes.starts_with(&after));
                let next = log.next_seq();
                drop(log);
                let again = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
                prop_assert_eq!(again.next_seq(), next);
                prop_assert_eq!(std::fs::read(&path).unwrap(), after);
            }
            Err(LogError::Corrupt { offset, .. }) => {
                prop_assert!(offset >= base.len() as u64);
                prop_assert_eq!(std::fs::read(&path).unwrap(), bytes);
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
    }

    #[test]
    fn damage_before_the_last_record_is_refused(
        n in 2u64..6,
        pick in any::<prop::sample::Index>(),
        flip in 1u8..=255,
        tail in tail(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (base, offsets) = acknowledged(dir.path(), n);
        let last = offsets[offsets.len() - 1];
        let at = pick.index(last);
        let mut bytes = base.clone();
        bytes[at] ^= flip;
        bytes.extend_from_slice(&tail);
        let path = dir.path().join("r.log");
        std::fs::write(&path, &bytes).unwrap();
        let damaged = offsets.iter().rposition(|&o| o <= at).unwrap();
        match RoomLog::open(dir.path(), "r", Fsync::Never) {
            Err(LogError::Corrupt { offset, .. }) => {
                prop_assert_eq!(offset, offsets[damaged] as u64);
                prop_assert_eq!(std::fs::read(&path).unwrap(), bytes);
            }
            other => prop_assert!(false, "byte {} of record {}: {:?}", at, damaged + 1, other),
        }
    }

    #[test]
    fn arbitrary_files_never_panic_recovery(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.log");
        std::fs::write(&path, &bytes).unwrap();
        match RoomLog::open(dir.path(), "r", Fsync::Never) {
            Ok(_) => prop_assert!(bytes.starts_with(&std::fs::read(&path).unwrap())),
            Err(LogError::Corrupt { .. }) => {
                prop_assert_eq!(std::fs::read(&path).unwrap(), bytes);
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
}
