//! The `chat-cpu` suite: the C-versus-Go paper's Figure 3, chat ingest at 1 Mbit/s per
//! connection, 1 to 64 connections, 60 s a point: the server's CPU mean and its coefficient
//! of variation.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, Load, NO_RATE, Point, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "chat-cpu",
    title: "Chat ingest CPU as in the C-versus-Go paper",
    help: "The C-versus-Go paper's Figure 3: chat ingest at 1 Mbit/s per connection, 1 to 64 connections, 60 s a point: CPU mean and coefficient of variation",
    duration: 60.0,
    warmup: 2.0,
    conns: &[1, 2, 4, 8, 16, 32, 64],
    repeats: 1,
    rate_meaning: NO_RATE,
    extra_servers: &[],
    default_servers_help: None,
};

/// 1 Mbit/s, the C-versus-Go paper's load per connection.
pub(crate) const CHAT_BYTE_RATE: f64 = 125_000.0;
/// Bytes of each chat `SAY` line loadgen sends, newline included.
pub(crate) const CHAT_LINE: usize = 64;

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    cx.conns
        .iter()
        .map(|&c| {
            cx.point(
                "ingest",
                format!("ingest-c{c}"),
                format!("{} × 1 Mbit/s", conns_label(c)),
                c,
                Workload::ChatIngest {
                    byte_rate: CHAT_BYTE_RATE,
                },
                Load::Closed,
                Stop::Duration(cx.duration),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Stop, Suite};

    #[test]
    fn chat_cpu_and_memory() {
        let p = Suite::ChatCpu.points(&o());
        assert_eq!(p.len(), 7);
        assert_eq!(p[6].conns, 64);
        assert_eq!(p[0].stop, Stop::Duration(60.0));
        assert_eq!(p[0].workload.proto(), "chat");
        let m = Suite::Memory.points(&o());
        assert_eq!(
            m.iter().map(|p| p.conns).collect::<Vec<_>>(),
            [1000, 10_000]
        );
    }
}
