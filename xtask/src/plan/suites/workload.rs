//! What a point's clients send: echo, chat, kv or http, and the parameters of each.
//!
//! It may call the suites' shared parts (`plan::suites`).

use serde::Serialize;

use super::{HttpDriver, HttpPath, KvDriver};

/// What the clients send.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum Workload {
    /// Echo messages of `msg_size` bytes; the server spins `compute_us` per message.
    Echo { msg_size: usize, compute_us: u64 },
    /// Chat `SAY`s at `byte_rate` bytes/s per connection, every `ACK` awaited.
    ChatIngest { byte_rate: f64 },
    /// Chat rooms of `room_size` members; every member must get every message.
    ChatRoom { room_size: usize },
    /// Echo connections that are open and all but silent.
    Idle,
    /// RESP `GET`s (`get`) or `SET`s of [`super::KV_VALUE_SIZE`]-byte values over
    /// [`super::KV_KEYS`] keys, `pipeline` in flight per connection, sent by `driver`.
    Kv {
        get: bool,
        pipeline: usize,
        driver: KvDriver,
    },
    /// HTTP `GET`s of TechEmpower's `path`, `pipeline` in flight per connection, sent by
    /// `driver`.
    Http {
        path: HttpPath,
        pipeline: usize,
        driver: HttpDriver,
    },
}

impl Workload {
    /// The `--proto` the server serves.
    pub(crate) fn proto(self) -> &'static str {
        match self {
            Workload::Echo { .. } | Workload::Idle => "echo",
            Workload::ChatIngest { .. } | Workload::ChatRoom { .. } => "chat",
            Workload::Kv { .. } => "kv",
            Workload::Http { .. } => "http",
        }
    }

    pub(crate) fn compute_us(self) -> u64 {
        match self {
            Workload::Echo { compute_us, .. } => compute_us,
            _ => 0,
        }
    }

    /// The outside client that sends this workload, by its program's name, or `None` when
    /// loadgen does.
    pub(crate) fn outside_client(self) -> Option<&'static str> {
        match self {
            Workload::Kv { driver, .. } => driver.outside_client(),
            Workload::Http { driver, .. } => driver.outside_client(),
            _ => None,
        }
    }
}
