//! The criterion ids of every benchmark, shared by the bench targets that register them
//! and the report that looks them up, so the two cannot drift apart.
//!
//! A full id is `group/function[/parameter]`, as criterion prints it and stores it in
//! `benchmark.json` (`full_id`).

use crate::switch::Placement;
use crate::sys::RingSetup;
use crate::syscall::Technique;

/// The group of the system-call techniques (Table I).
pub const EVENTFD_READ: &str = "eventfd_read";
/// The group of reference points: one trap, one io_uring NOP.
pub const BASELINE: &str = "baseline";
/// Functions of the [`BASELINE`] group.
pub const TRAP: &str = "getppid";
pub const IO_URING_NOP: &str = "io_uring_nop_batch64";
/// One io_uring NOP submitted and waited for by a fiber (one enter each).
pub const FIBER_NOP: &str = "fiber_nop";
/// The group of one-way switches.
pub const SWITCH: &str = "switch";
/// The group of spawn-and-join.
pub const SPAWN_JOIN: &str = "spawn_join";
/// The group of the chat codec benchmarks.
pub const CHAT: &str = "chat";
/// The group of the room-log benchmarks.
pub const ROOM_LOG: &str = "room_log";
/// The pseudo-group of the memory measurements (not criterion's).
pub const MEMORY: &str = "memory";

/// Functions of the [`SWITCH`] group.
pub const THREAD_HANDOFF: &str = "thread_handoff";
pub const COROUTINE_RAW: &str = "coroutine_raw";
pub const TOKIO_PINGPONG: &str = "tokio_pingpong";
pub const FIBER_YIELD: &str = "fiber_yield";
/// Functions of the [`SPAWN_JOIN`] group.
pub const SPAWN_THREAD: &str = "thread";
pub const SPAWN_TOKIO: &str = "tokio";
pub const SPAWN_FIBER: &str = "fiber";
/// Parameters of [`SPAWN_TOKIO`].
pub const CURRENT_THREAD: &str = "current_thread";
pub const MULTI_THREAD: &str = "multi_thread";
/// Functions of the [`CHAT`] group.
pub const PARSE_COMMAND: &str = "parse_command";
pub const ENCODE_COMMAND: &str = "encode_command";
pub const PARSE_REPLY: &str = "parse_reply";
pub const ENCODE_REPLY: &str = "encode_reply";
/// Functions of the [`ROOM_LOG`] group.
pub const APPEND: &str = "append";
pub const REPLAY: &str = "replay";

/// `group/function` or `group/function/parameter`.
pub fn full(group: &str, function: &str, parameter: Option<&str>) -> String {
    match parameter {
        Some(p) => format!("{group}/{function}/{p}"),
        None => format!("{group}/{function}"),
    }
}

impl Technique {
    /// The function part of the id: `blocking`, `io_uring_batch16`, ...
    pub fn function_id(&self) -> String {
        match self {
            Technique::Blocking => "blocking".into(),
            Technique::Epoll => "epoll".into(),
            Technique::IoUring { batch, .. } => format!("io_uring_batch{batch}"),
            Technique::LinuxAio => "linux_aio".into(),
            Technique::PosixAio => "posix_aio".into(),
        }
    }

    /// The parameter part of the id: the ring setup, for io_uring.
    pub fn parameter(&self) -> Option<&'static str> {
        match self {
            Technique::IoUring { setup, .. } => Some(setup.label()),
            _ => None,
        }
    }

    /// `eventfd_read/<function>[/<setup>]`.
    pub fn full_id(&self) -> String {
        full(EVENTFD_READ, &self.function_id(), self.parameter())
    }

    /// Every technique the benchmarks time, in the order of the report.
    pub fn all() -> Vec<Technique> {
        let mut all = vec![
            Technique::Blocking,
            Technique::Epoll,
            Technique::LinuxAio,
            Technique::PosixAio,
        ];
        for batch in IO_URING_BATCHES {
            for setup in RingSetup::ALL {
                all.push(Technique::IoUring { setup, batch });
            }
        }
        all
    }
}

/// Reads per io_uring submission that are timed.
pub const IO_URING_BATCHES: [usize; 3] = [1, 16, 64];

/// `switch/thread_handoff/<placement>`.
pub fn thread_handoff(placement: Placement) -> String {
    full(SWITCH, THREAD_HANDOFF, Some(placement.label()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_well_formed() {
        let ids: Vec<String> = Technique::all().iter().map(Technique::full_id).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        assert!(ids.contains(&"eventfd_read/io_uring_batch16/coop_taskrun".to_owned()));
        assert!(ids.contains(&"eventfd_read/posix_aio".to_owned()));
        assert_eq!(
            thread_handoff(Placement::AcrossCores),
            "switch/thread_handoff/across_cores"
        );
    }
}
