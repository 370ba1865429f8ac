//! Property tests of `service::kv`: random command sequences, fed to a `Connection` cut
//! into reads anywhere, get the replies of a plain `HashMap` model, byte for byte.

use std::collections::HashMap;

use proptest::prelude::*;
use proto::resp::{Reply, encode_request};
use service::kv::{Connection, Flow, Store};

#[derive(Debug, Clone)]
enum Op {
    Set(u8, Vec<u8>),
    Get(u8),
    Del(Vec<u8>),
    Exists(Vec<u8>),
    Incr(u8),
    MGet(Vec<u8>),
}

fn key(k: u8) -> Vec<u8> {
    vec![b'k', k]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..4;
    let keys = proptest::collection::vec(0u8..4, 1..4);
    // Values are often numbers, so that INCR meets both kinds.
    let value = prop_oneof![
        (0i64..100).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    prop_oneof![
        (k.clone(), value).prop_map(|(k, v)| Op::Set(k, v)),
        k.clone().prop_map(Op::Get),
        keys.clone().prop_map(Op::Del),
        keys.clone().prop_map(Op::Exists),
        k.prop_map(Op::Incr),
        keys.prop_map(Op::MGet),
    ]
}

/// The request bytes and the reply the model gives.
fn apply(model: &mut HashMap<Vec<u8>, Vec<u8>>, op: &Op, input: &mut Vec<u8>) -> Reply {
    let words = |name: &[u8], ks: &[u8]| {
        let mut w = vec![name.to_vec()];
        w.extend(ks.iter().map(|&k| key(k)));
        w
    };
    match op {
        Op::Set(k, v) => {
            encode_request(input, &[&b"SET"[..], &key(*k), v]);
            model.insert(key(*k), v.clone());
            Reply::Simple(b"OK".to_vec())
        }
        Op::Get(k) => {
            encode_request(input, &[&b"GET"[..], &key(*k)]);
            model
                .get(&key(*k))
                .map_or(Reply::Null, |v| Reply::Bulk(v.clone()))
        }
        Op::Del(ks) => {
            encode_request(input, &words(b"DEL", ks));
            let n = ks
                .iter()
                .filter(|&&k| model.remove(&key(k)).is_some())
                .count();
            Reply::Integer(n as i64)
        }
        Op::Exists(ks) => {
            encode_request(input, &words(b"EXISTS", ks));
            Reply::Integer(ks.iter().filter(|&&k| model.contains_key(&key(k))).count() as i64)
        }
        Op::Incr(k) => {
            encode_request(input, &[&b"INCR"[..], &key(*k)]);
            let current = model.get(&key(*k)).map(|v| proto::resp::parse_i64(v));
            match current {
                Some(None) => Reply::Error(b"ERR value is not an integer or out of range".to_vec()),
                // At most 8 digits stored, so one more never overflows.
                other => {
                    let next = other.flatten().unwrap_or(0) + 1;
                    model.insert(key(*k), next.to_string().into_bytes());
                    Reply::Integer(next)
                }
            }
        }
        Op::MGet(ks) => {
            encode_request(input, &words(b"MGET", ks));
            Reply::Array(
                ks.iter()
                    .map(|&k| {
                        model
                            .get(&key(k))
                            .map_or(Reply::Null, |v| Reply::Bulk(v.clone()))
                    })
                    .collect(),
            )
        }
    }
}

proptest! {
    #[test]
    fn replies_match_a_map_under_any_cut(
        ops in proptest::collection::vec(op(), 1..60),
        cuts in proptest::collection::vec(1usize..40, 1..20),
    ) {
        let mut model = HashMap::new();
        let mut input = Vec::new();
        let mut want = Vec::new();
        for op in &ops {
            apply(&mut model, op, &mut input).encode(&mut want);
        }
        let store = Store::new();
        let mut conn = Connection::new();
        let mut out = Vec::new();
        let mut at = 0;
        for size in cuts.iter().cycle() {
            if at >= input.len() {
                break;
            }
            let end = (at + size).min(input.len());
            conn.feed(&input[at..end]);
            at = end;
            // A small limit: execution stops and resumes mid-batch too, each batch
            // "written" (moved to `out`) before the next.
            let mut batch = Vec::new();
            loop {
                let flow = conn.execute(&store, &mut batch, 64);
                out.append(&mut batch);
                if flow != Flow::OutputFull {
                    break;
                }
            }
        }
        prop_assert_eq!(out, want);
    }
}
