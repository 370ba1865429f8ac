//! The `skew` suite: key skew for the kv servers, keys drawn uniformly, by Zipf's law of
//! exponent 0.99 (YCSB's) and 1.2 (loadgen's `--key-dist`), at SET:GET 1:30 (Facebook's ETC,
//! reads heavy) and 1:1 (loadgen's `--ratio`, memtier's spelling), 50 connections in closed
//! loop, beside redis-server. A hot key is where a store behind one lock or one owner queues.
//! redis-benchmark draws keys uniformly only (`-r`), so loadgen alone drives it.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, KvDriver, Load, NO_RATE, Point, Shape, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "skew",
    title: "Key skew: uniform and Zipf keys, SET:GET 1:30 and 1:1",
    help: "Key skew for kv: keys uniform, Zipf 0.99 and Zipf 1.2 × SET:GET 1:30 and 1:1, 50 connections, closed loop, beside redis-server (about 3 min with the kv servers)",
    duration: 1.0,
    warmup: 0.35,
    conns: &[50],
    repeats: 1,
    rate_meaning: NO_RATE,
    extra_servers: &["fiber+kv-owner", "go+kv-owner"],
    default_servers_help: Some(
        "for skew also fiber+kv-owner, go+kv-owner and `redis` (redis-server, when installed)",
    ),
};

/// How keys are drawn, as loadgen's `--key-dist` takes it.
pub(crate) const KEY_DISTS: [&str; 3] = ["uniform", "zipf:0.99", "zipf:1.2"];
/// The mixes, SET:GET.
pub(crate) const RATIOS: [(u32, u32); 2] = [(1, 30), (1, 1)];

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for &c in &cx.conns {
        for (set, get) in RATIOS {
            for dist in KEY_DISTS {
                let series = format!("set{set}-get{get}");
                let key = dist.replace(':', "");
                out.push(cx.shaped(
                    &series,
                    format!("{series}-{key}-c{c}"),
                    format!("SET:GET {set}:{get}, {dist} keys, {}", conns_label(c)),
                    c,
                    (
                        Workload::Kv {
                            get: true,
                            pipeline: 1,
                            driver: KvDriver::Loadgen,
                        },
                        Shape {
                            key_dist: Some(dist),
                            ratio: Some((set, get)),
                            ..Shape::default()
                        },
                    ),
                    Load::Closed,
                    Stop::Duration(cx.duration),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Point, Suite};

    #[test]
    fn skew_crosses_key_dists_and_ratios_beside_redis() {
        let p = Suite::Skew.points(&o());
        assert_eq!(p.len(), 3 * 2);
        let got: Vec<(&str, (u32, u32))> = p
            .iter()
            .map(|p| (p.shape.key_dist.unwrap(), p.shape.ratio.unwrap()))
            .collect();
        assert_eq!(got[0], ("uniform", (1, 30)));
        assert_eq!(got[1], ("zipf:0.99", (1, 30)));
        assert_eq!(got[5], ("zipf:1.2", (1, 1)));
        assert_eq!(p[1].id, "set1-get30-zipf0.99-c50");
        assert!(
            p.iter()
                .all(|p| p.workload.proto() == "kv" && p.conns == 50)
        );
        assert_eq!(Suite::Skew.own_reference(), Some("redis"));
        assert!(Suite::Skew.runs_peers_of(Suite::Kv));
        // The kv servers: the sixteen, but the four that do not speak kv, and three beside.
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>() * 15.0;
        assert!(secs < 4.0 * 60.0, "{secs}");
    }
}
