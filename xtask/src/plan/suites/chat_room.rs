//! The `chat-room` suite: chat rooms of 2 to 1000 members, fan-out delivery latency and
//! completeness at a fixed rate of deliveries.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, Load, Point, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "chat-room",
    title: "Chat room fan-out",
    help: "Chat rooms of 2 to 1000 members: fan-out delivery latency and completeness",
    duration: 10.0,
    warmup: 1.0,
    conns: &[1000],
    repeats: 1,
    rate_meaning: "MSG deliveries/s in total (default 5000)",
    extra_servers: &[],
    default_servers_help: None,
};

/// MSG deliveries a second: what a process-per-connection server, which pays a file lock and
/// an inotify wake-up per delivery, still keeps up with on one core.
const DEFAULT_DELIVERY_RATE: f64 = 5_000.0;
const ROOM_SIZES: [usize; 4] = [2, 10, 100, 1000];

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let deliveries = cx.o.rate.unwrap_or(DEFAULT_DELIVERY_RATE);
    let mut out = Vec::new();
    for &c in &cx.conns {
        // loadgen deals the connections into rooms of equal size.
        for s in ROOM_SIZES.into_iter().filter(|&s| s <= c && c % s == 0) {
            let rate = (deliveries / (s - 1) as f64).max(1.0);
            out.push(cx.point(
                "rooms",
                format!("room-s{s}-c{c}"),
                format!("rooms of {s}, {}", conns_label(c)),
                c,
                Workload::ChatRoom { room_size: s },
                Load::Open { rate },
                Stop::Duration(cx.duration),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Load, Overrides, Point, Suite};

    #[test]
    fn chat_room_sizes_divide_the_connections() {
        let p = Suite::ChatRoom.points(&o());
        let sizes: Vec<f64> = p.iter().map(Point::x).collect();
        assert_eq!(sizes, [2.0, 10.0, 100.0, 1000.0]);
        assert_eq!(p[0].load, Load::Open { rate: 5_000.0 });
        assert_eq!(
            p[3].load,
            Load::Open {
                rate: 5_000.0 / 999.0
            }
        );
        let small = Suite::ChatRoom.points(&Overrides {
            conns: Some(vec![20]),
            ..o()
        });
        assert_eq!(small.iter().map(Point::x).collect::<Vec<_>>(), [2.0, 10.0]);
    }
}
