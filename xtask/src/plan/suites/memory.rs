//! The `memory` suite: memory per idle connection at 1,000 and 10,000 connections.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, Load, NO_RATE, Point, Stop, Sweep, Workload};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "memory",
    title: "Memory per idle connection",
    help: "Memory per idle connection at 1,000 and 10,000 connections",
    duration: 3.0,
    warmup: 1.0,
    conns: &[1000, 10_000],
    repeats: 1,
    rate_meaning: NO_RATE,
    extra_servers: &[],
    default_servers_help: None,
};

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    cx.conns
        .iter()
        .map(|&c| {
            cx.point(
                "idle",
                format!("idle-c{c}"),
                format!("{c} idle conn{}", if c == 1 { "" } else { "s" }),
                c,
                Workload::Idle,
                // One message a second over all connections: they are open and checked, and
                // all but silent.
                Load::Open { rate: 1.0 },
                Stop::Duration(cx.duration),
            )
        })
        .collect()
}
