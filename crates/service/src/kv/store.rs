//! The key-value store every worker of a server shares: a fixed number of shards, each a
//! `HashMap` behind its own `Mutex`, a key's shard chosen by its hash.
//!
//! Why sharded locks: a command touches one key (or a few), and holds its shard's lock
//! for a map lookup and a copy, a few hundred nanoseconds. With [`SHARDS`] shards two
//! workers meet on the same lock about once in 64 commands, and then wait that long;
//! one global lock would make every command of every worker pass through one cache line,
//! and a lock-free map is not in the project's dependencies. The one-owner design of the
//! Go article (one thread owns the map, connections send it commands) is the other
//! variant the servers offer (`--kv-owner`), measured beside this one.
//!
//! Expiry is lazy: a key whose `EX`/`PX` time has passed is removed when a command
//! touches it (and by `DBSIZE`, which sweeps every shard), never by a timer. Redis also
//! samples keys in the background; without that, a key that is never touched again keeps
//! its memory until `DBSIZE`, `FLUSHALL` or an overwrite.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// Number of shards: a power of two, far above any worker count the benchmarks use.
pub const SHARDS: usize = 64;

/// One stored value.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) value: Vec<u8>,
    /// When the key expires, in milliseconds since the Unix epoch (Redis's unit).
    pub(super) expires_at: Option<i64>,
}

/// One shard's keys.
pub(super) type Shard = HashMap<Vec<u8>, Entry>;

/// The shared store. Cheap to share (`Arc<Store>`); every method takes `&self`.
#[derive(Debug)]
pub struct Store {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

/// The current time in milliseconds since the Unix epoch, as Redis's `mstime()`.
pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Whether `entry` has expired at `now` (computed once, lazily, by the caller).
pub(super) fn is_expired(entry: &Entry, now: &mut Option<i64>) -> bool {
    match entry.expires_at {
        None => false,
        Some(at) => at <= *now.get_or_insert_with(now_ms),
    }
}

/// The live entry of `key` in `shard`, removing it first if it has expired.
pub(super) fn live<'s>(shard: &'s mut Shard, key: &[u8]) -> Option<&'s mut Entry> {
    let mut now = None;
    if shard.get(key).is_some_and(|e| is_expired(e, &mut now)) {
        shard.remove(key);
        return None;
    }
    shard.get_mut(key)
}

/// The shards a multi-key command holds, locked in index order so that two such
/// commands cannot deadlock.
pub(super) struct Locked<'a> {
    store: &'a Store,
    /// `(shard index, its guard)`, sorted by index, no index twice.
    guards: Vec<(usize, MutexGuard<'a, Shard>)>,
}

impl Locked<'_> {
    /// The shard of `key`, which must be one of the keys this lock was taken for.
    pub(super) fn shard(&mut self, key: &[u8]) -> &mut Shard {
        let index = self.store.shard_of(key);
        let at = self
            .guards
            .binary_search_by_key(&index, |(i, _)| *i)
            .unwrap_or_else(|_| unreachable!("a key outside the locked set"));
        &mut self.guards[at].1
    }
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }

    fn shard_of(&self, key: &[u8]) -> usize {
        // The map hashes the key again with its own seed; the high bits chosen here
        // keep the shard index independent of the bucket index inside the shard.
        (self.hasher.hash_one(key) >> 58) as usize % SHARDS
    }

    /// The locked shard of `key`.
    pub(super) fn lock(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_of(key)])
    }

    /// The shards of all `keys`, locked in index order.
    pub(super) fn lock_many<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Locked<'_> {
        let mut indices: Vec<usize> = keys.map(|k| self.shard_of(k)).collect();
        indices.sort_unstable();
        indices.dedup();
        Locked {
            store: self,
            guards: indices
                .into_iter()
                .map(|i| (i, lock(&self.shards[i])))
                .collect(),
        }
    }

    /// Number of live keys; removes the expired ones it meets.
    pub fn len(&self) -> usize {
        let mut now = None;
        self.shards
            .iter()
            .map(|s| {
                let mut shard = lock(s);
                shard.retain(|_, e| !is_expired(e, &mut now));
                shard.len()
            })
            .sum()
    }

    /// Whether the store holds no live key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every key.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            // Dropping a large map after the lock is released keeps other workers'
            // commands on this shard from waiting for the frees.
            let old = std::mem::take(&mut *lock(s));
            drop(old);
        }
    }
}

/// Locks a shard. A panic while a shard was held cannot leave an entry half written
/// (every update is one insert or one assignment), so a poisoned lock is taken as it is.
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}
