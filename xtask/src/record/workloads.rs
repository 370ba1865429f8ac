//! What a row keeps of issue 62's workloads: the point's knobs (churn's requests per
//! connection, idle connections, the mix of sizes, kv's key distribution and SET:GET mix, the
//! mean payload of a request), and the connections counted on both sides: loadgen's opened
//! and idle held, the server's accepted and closed (its stop line, `service::counters`); and
//! kv's GET and SET latency apart.
//!
//! It may call the plan layer, the run layer's `outcome`, and the record layer's `row` and
//! `stats`.

use crate::plan::suites::{KV_VALUE_SIZE, Point, Workload};
use crate::record::row::Row;
use crate::record::stats::median_of;
use crate::run::outcome::Measured;

/// Fills the row's knobs from its point.
pub(crate) fn identity(row: &mut Row, point: &Point) {
    let s = &point.shape;
    row.requests_per_conn = s.requests_per_conn;
    row.idle_conns = (s.idle_conns > 0).then_some(s.idle_conns);
    row.sizes = s.sizes.map(str::to_string);
    row.key_dist = s.key_dist.map(str::to_string);
    row.ratio = s.ratio.map(|(set, get)| format!("{set}:{get}"));
    row.msg_bytes = match point.workload {
        Workload::Echo { msg_size, .. } => Some(s.mean_size().unwrap_or(msg_size as f64)),
        Workload::Kv { .. } => Some(s.mean_size().unwrap_or(KV_VALUE_SIZE as f64)),
        _ => None,
    };
}

/// Fills the connections each side counted, the median of the repeats that said them.
pub(crate) fn connections(row: &mut Row, ok: &[&Measured]) {
    row.connections_opened = median_of(ok, |m| m.connections.map(|c| c[0] as f64));
    if row.idle_conns.is_some() {
        row.idle_held = median_of(ok, |m| m.connections.map(|c| c[1] as f64));
    }
    let count = |name: &str| {
        median_of(ok, |m| {
            m.counters
                .as_deref()
                .and_then(|l| counter(l, name))
                .map(|n| n as f64)
        })
    };
    // srv-go says `conns=`: every connection it accepted, live or ended; it counts none
    // closed.
    row.server_accepted = count("accepted").or_else(|| count("conns"));
    row.server_closed = count("closed");
    let op = |i: usize| median_of(ok, |m| m.ops_us.and_then(|o| o[i]));
    (
        row.get_p50_us,
        row.get_p99_us,
        row.set_p50_us,
        row.set_p99_us,
    ) = (op(0), op(1), op(2), op(3));
}

/// The count `name=N` of a server's stop line (`srv: stopped: accepted=12 closed=12 …`).
pub(crate) fn counter(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::suites::{Overrides, Suite};

    #[test]
    fn reads_the_servers_counts_from_its_stop_line() {
        let line = "srv-tokio: stopped: accepted=4096 closed=4090 bytes_in=10 messages=3";
        assert_eq!(counter(line, "accepted"), Some(4096));
        assert_eq!(counter(line, "closed"), Some(4090));
        assert_eq!(counter(line, "lines"), None);
        assert_eq!(counter("accepted=x", "accepted"), None);
        let go = "srv-go: stopped: conns=812 bytes_in=1 bytes_out=1 msgs=3";
        assert_eq!(counter(go, "conns"), Some(812));
    }

    /// A repeat that said `connections`, `ops_us` and the server's stop line `counters`.
    fn measured(connections: [u64; 2], counters: &str) -> Measured {
        serde_json::from_value(serde_json::json!({
            "throughput_per_sec": 1.0, "errors": 0, "delivery_errors": 0,
            "client_cpu_per_msg_us": 0.0, "client_bound": false, "window_secs": 1.0,
            "window_exact": true, "hist": "h", "notes": [],
            "cost": crate::run::cost::ServerCost::default(),
            "connections": connections, "ops_us": [10.0, 20.0, null, 40.0],
            "counters": counters,
        }))
        .unwrap()
    }

    #[test]
    fn the_connections_counted_on_both_sides_reach_the_row() {
        let a = measured([100, 3], "srv: stopped: accepted=101 closed=99 bytes_in=1");
        let b = measured([120, 3], "srv: stopped: accepted=121 closed=121 bytes_in=1");
        let c = measured([110, 2], "srv: stopped: accepted=111 closed=111 bytes_in=1");
        let mut row = Row {
            idle_conns: Some(3),
            ..Row::default()
        };
        connections(&mut row, &[&a, &b, &c]);
        assert_eq!(
            (row.connections_opened, row.idle_held),
            (Some(110.0), Some(3.0))
        );
        assert_eq!(
            (row.server_accepted, row.server_closed),
            (Some(111.0), Some(111.0))
        );
        assert_eq!(
            (row.get_p99_us, row.set_p50_us, row.set_p99_us),
            (Some(20.0), None, Some(40.0))
        );
        // srv-go counts what it accepted as `conns=`, and nothing closed.
        let go = measured(
            [7, 0],
            "srv-go: stopped: conns=8 bytes_in=1 bytes_out=1 msgs=3",
        );
        let mut row = Row::default();
        connections(&mut row, &[&go]);
        assert_eq!(
            (row.server_accepted, row.server_closed, row.idle_held),
            (Some(8.0), None, None)
        );
    }

    #[test]
    fn a_row_keeps_its_points_knobs() {
        let o = Overrides {
            workers: 1,
            ..Overrides::default()
        };
        let find = |suite: Suite, id: &str| {
            let p = suite.points(&o).into_iter().find(|p| p.id == id).unwrap();
            let mut row = Row::default();
            identity(&mut row, &p);
            row
        };
        let r = find(Suite::Churn, "r10-c512");
        assert_eq!(
            (r.requests_per_conn, r.idle_conns, r.msg_bytes),
            (Some(10), None, Some(16.0))
        );
        let r = find(Suite::Idle, "active-1-c10000");
        assert_eq!(r.idle_conns, Some(9900));
        let r = find(Suite::Sizes, "echo-mix-c64");
        assert_eq!(r.sizes.as_deref(), Some("64:95,64K:5"));
        assert!((r.msg_bytes.unwrap() - 3337.6).abs() < 1e-6);
        let r = find(Suite::Sizes, "kv-loadgen-1KiB-c50");
        assert_eq!(r.msg_bytes, Some(1024.0));
        let r = find(Suite::Skew, "set1-get30-zipf1.2-c50");
        assert_eq!(
            (r.key_dist.as_deref(), r.ratio.as_deref()),
            (Some("zipf:1.2"), Some("1:30"))
        );
    }
}
