//! The run layer: carrying out a plan. It owns the processes (`children`, `cpus`, `cgroup`),
//! building the binaries (`build`), a server's start and stop (`server`), an outside
//! server's wire checks before it is measured (`conform`), the load point
//! (`point`: a server, loadgen against it, the samples turned into the server's cost by
//! `cost` and `series`), /proc sampling (`procfs`), loadgen's command line and output
//! (`loadgen_cli`, `histogram`), the peers behind one trait (`peer`: kv's `redis`, http's
//! `nginx`), the outside clients behind one interface (`outside`: kv's redis-benchmark,
//! http's `wrk`), load from other hosts (`agents`: loadgen agents over ssh), and the
//! file-content search, timed whole (`search`). What a run of a point yields
//! is `outcome`. Completion-queue overflows of a server's io_uring rings are read by `rings`.
//!
//! It may call the plan layer, never the record or report layers: what it measures it hands
//! back, and the caller records it. This file lists the peers and the outside clients; each
//! is a file of its own.

pub(crate) mod agents;
pub(crate) mod build;
pub(crate) mod cgroup;
pub(crate) mod children;
pub(crate) mod conform;
pub(crate) mod cost;
pub(crate) mod counters;
pub(crate) mod cpus;
pub(crate) mod histogram;
pub(crate) mod loadgen_cli;
pub(crate) mod machine;
pub(crate) mod nginx;
pub(crate) mod outcome;
pub(crate) mod outside;
pub(crate) mod peer;
pub(crate) mod point;
pub(crate) mod procfs;
pub(crate) mod redis;
pub(crate) mod rings;
pub(crate) mod search;
pub(crate) mod series;
pub(crate) mod server;
pub(crate) mod wrk;

use outside::OutsideClient;
use peer::Peer;

/// Every peer, whether it is installed or not.
pub(crate) fn peers() -> [&'static dyn Peer; 2] {
    [&redis::PEER, &nginx::PEER]
}

/// The peer whose program is `binary`, if any.
pub(crate) fn find_peer(binary: &str) -> Option<&'static dyn Peer> {
    peers().into_iter().find(|p| p.program() == binary)
}

/// Every outside client, whether it is installed or not.
pub(crate) fn outside_clients() -> [&'static dyn OutsideClient; 2] {
    [&redis::benchmark::CLIENT, &wrk::CLIENT]
}

/// The outside client whose program is `name` (as a point names it), if any.
pub(crate) fn find_client(name: &str) -> Option<&'static dyn OutsideClient> {
    outside_clients().into_iter().find(|c| c.program() == name)
}
