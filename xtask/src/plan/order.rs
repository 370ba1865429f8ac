//! The order of the servers within each round of a point: a Williams design, so that no
//! server's repeats all sit in one position of the round.
//!
//! A run measures each point in rounds, every server once per round. Whatever the first run
//! of a round pays and the next does not (a cold page cache for the binary, a neighbour that
//! quiets down), and whatever drifts within a round, lands on a position. In a fixed order
//! (A B C every round) it lands on the same server every time, and the Mann-Whitney test,
//! which takes the repeats of two servers as exchangeable, reads it as a difference.
//!
//! A Williams design is a Latin square whose rows put every server in every position once
//! and follow every server by every other one exactly once (for an odd count, the square and
//! its mirror, each pair twice). Round `k` of a point takes row `k` (cycling), so over `r`
//! rounds each server holds each position `⌊r/n⌋` or `⌈r/n⌉` times. At point `p` the servers
//! are relabelled by `+p` (a relabelled Williams square is one too), so that the server the
//! leftover rounds favour (2 servers, 5 rounds: one of them goes first 3 times) is not the
//! same at every point.
//!
//! The orders are recorded in `meta.json` by name, and a resumed run takes them from there
//! (`keep`), so that its rounds run in the order the run began with.
//!
//! It may call the plan layer's `suites` and `servers`.

use serde::{Deserialize, Serialize};

use crate::plan::servers::Variant;
use crate::plan::suites::{Point, Suite, Workload};

/// The rows of the Williams design for `n` servers: `n` rows for an even `n` (and for one
/// server), `2n` (the square, then its mirror) for an odd one; each row a permutation of
/// `0..n`.
pub(crate) fn williams(n: usize) -> Vec<Vec<usize>> {
    // The first row zigzags, 0, 1, n-1, 2, n-2, ...: its successive differences are then all
    // different mod n, which is what makes each ordered pair follow once in the cyclic shifts.
    let first: Vec<usize> = (0..n)
        .map(|j| {
            if j % 2 == 1 {
                j.div_ceil(2)
            } else {
                (n - j / 2) % n
            }
        })
        .collect();
    let mut rows: Vec<Vec<usize>> = (0..n)
        .map(|i| first.iter().map(|s| (s + i) % n).collect())
        .collect();
    if n % 2 == 1 && n > 1 {
        let mirror: Vec<Vec<usize>> = rows
            .iter()
            .map(|r| r.iter().rev().copied().collect())
            .collect();
        rows.extend(mirror);
    }
    rows
}

/// The order of `n` servers (indices `0..n`) in each of `rounds` rounds of the point at
/// index `point`: the design's rows in turn, the servers relabelled by `+point`.
pub(crate) fn rounds(n: usize, rounds: usize, point: usize) -> Vec<Vec<usize>> {
    let square = williams(n);
    if square.is_empty() {
        return vec![Vec::new(); rounds];
    }
    (0..rounds)
        .map(|k| {
            square[k % square.len()]
                .iter()
                .map(|s| (s + point) % n)
                .collect()
        })
        .collect()
}

/// The order the servers ran in at one point, round by round, by name: what `meta.json`
/// keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PointOrder {
    pub(crate) suite: String,
    /// The point's id.
    pub(crate) point: String,
    /// Each round's servers, in the order they ran.
    pub(crate) rounds: Vec<Vec<String>>,
}

/// The order of every round of every point, aligned with `points`: the servers of `servers`
/// that serve the point (`serves`), in `repeats` rounds of the design.
pub(crate) fn plan(
    points: &[Point],
    servers: &[Variant],
    serves: impl Fn(&Variant, Workload) -> bool,
    repeats: impl Fn(Suite) -> usize,
) -> Vec<PointOrder> {
    points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let here: Vec<&Variant> = servers.iter().filter(|v| serves(v, p.workload)).collect();
            PointOrder {
                suite: p.suite.name().to_string(),
                point: p.id.clone(),
                rounds: rounds(here.len(), repeats(p.suite), i)
                    .into_iter()
                    .map(|row| row.into_iter().map(|s| here[s].name.clone()).collect())
                    .collect(),
            }
        })
        .collect()
}

/// The orders of a resumed run: for each point of `planned`, the one `recorded` in its
/// `meta.json`. A point the record lacks (a run from before orders were recorded) keeps the
/// fixed order such runs used, the servers as `servers` lists them. Within a round, a recorded
/// name that no longer serves the point is dropped and a server the record does not name
/// runs last, so that the rounds run exactly the servers planned now.
pub(crate) fn keep(
    recorded: &[PointOrder],
    planned: Vec<PointOrder>,
    servers: &[Variant],
) -> Vec<PointOrder> {
    let rank = |name: &String| servers.iter().position(|v| &v.name == name);
    planned
        .into_iter()
        .map(|mut p| {
            let before = recorded
                .iter()
                .find(|r| r.suite == p.suite && r.point == p.point);
            for (k, round) in p.rounds.iter_mut().enumerate() {
                let mut kept: Vec<String> = match before {
                    Some(b) => b.rounds.get(k).map_or_else(Vec::new, |r| {
                        r.iter().filter(|n| round.contains(n)).cloned().collect()
                    }),
                    None => {
                        let mut fixed = round.clone();
                        fixed.sort_by_key(|n| rank(n));
                        fixed
                    }
                };
                for n in round.iter() {
                    if !kept.contains(n) {
                        kept.push(n.clone());
                    }
                }
                *round = kept;
            }
            p
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count[s][pos]`: how often server `s` ran in position `pos` over `rows`.
    fn positions(n: usize, rows: &[Vec<usize>]) -> Vec<Vec<usize>> {
        let mut count = vec![vec![0; n]; n];
        for row in rows {
            for (pos, &s) in row.iter().enumerate() {
                count[s][pos] += 1;
            }
        }
        count
    }

    /// `count[a][b]`: how often server `b` ran right after server `a` within a round.
    fn follows(n: usize, rows: &[Vec<usize>]) -> Vec<Vec<usize>> {
        let mut count = vec![vec![0; n]; n];
        for row in rows {
            for w in row.windows(2) {
                count[w[0]][w[1]] += 1;
            }
        }
        count
    }

    #[test]
    fn the_design_is_a_williams_square() {
        assert_eq!(williams(2), [[0, 1], [1, 0]]);
        assert_eq!(williams(4)[0], [0, 1, 3, 2]);
        assert_eq!(williams(3).len(), 6);
        assert_eq!(williams(1), [[0]]);
        assert!(williams(0).is_empty());
        for n in 1..=9 {
            let rows = williams(n);
            let copies = if n % 2 == 1 && n > 1 { 2 } else { 1 };
            for row in &rows {
                let mut sorted = row.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n {n}: {row:?}");
            }
            // Every server in every position, and every ordered pair adjacent, equally often.
            assert!(
                positions(n, &rows).iter().flatten().all(|&c| c == copies),
                "n {n}: positions {:?}",
                positions(n, &rows)
            );
            let f = follows(n, &rows);
            for (a, row) in f.iter().enumerate() {
                for (b, &c) in row.iter().enumerate() {
                    assert_eq!(c, if a == b { 0 } else { copies }, "n {n}: {a} then {b}");
                }
            }
        }
    }

    #[test]
    fn any_number_of_rounds_balances_positions_as_nearly_as_it_can() {
        for n in 1..=7 {
            for r in 1..=12 {
                for point in 0..3 {
                    let rows = rounds(n, r, point);
                    assert_eq!(rows.len(), r);
                    let (lo, hi) = (r / n, r.div_ceil(n));
                    for (s, by_pos) in positions(n, &rows).iter().enumerate() {
                        assert!(
                            by_pos.iter().all(|&c| lo <= c && c <= hi),
                            "n {n}, {r} rounds, point {point}: server {s} {by_pos:?}"
                        );
                    }
                    // Carry-over: within a pass of the design no pair follows more often than
                    // the design allows, so no server sits after the same one round after
                    // round.
                    let passes = r.div_ceil(williams(n).len());
                    let most = if n % 2 == 1 { 2 * passes } else { passes };
                    assert!(
                        follows(n, &rows).iter().flatten().all(|&c| c <= most),
                        "n {n}, {r} rounds: {:?}",
                        follows(n, &rows)
                    );
                }
            }
        }
    }

    #[test]
    fn two_servers_alternate_and_the_leftover_round_alternates_over_points() {
        assert_eq!(rounds(2, 5, 0), [[0, 1], [1, 0], [0, 1], [1, 0], [0, 1]]);
        assert_eq!(rounds(2, 5, 1), [[1, 0], [0, 1], [1, 0], [0, 1], [1, 0]]);
        assert_eq!(rounds(3, 2, 0), [[0, 1, 2], [1, 2, 0]]);
        assert_eq!(rounds(0, 2, 0), [Vec::<usize>::new(), Vec::new()]);
    }

    fn order(point: &str, rounds: &[&[&str]]) -> PointOrder {
        PointOrder {
            suite: "quick".into(),
            point: point.into(),
            rounds: rounds
                .iter()
                .map(|r| r.iter().map(|s| s.to_string()).collect())
                .collect(),
        }
    }

    fn variant(name: &str) -> Variant {
        Variant {
            name: name.into(),
            binary: format!("srv-{name}"),
            flags: vec![],
            about: String::new(),
        }
    }

    #[test]
    fn a_resumed_run_keeps_its_recorded_order() {
        let servers = [variant("a"), variant("b"), variant("c")];
        let planned = vec![
            order("p1", &[&["a", "b", "c"], &["b", "c", "a"]]),
            order("p2", &[&["b", "c", "a"], &["c", "a", "b"]]),
        ];
        let recorded = vec![order("p1", &[&["c", "a", "b"], &["a", "c", "b"]])];
        let kept = keep(&recorded, planned.clone(), &servers);
        assert_eq!(kept[0], recorded[0]);
        // Not recorded: the fixed order of the runs from before orders were recorded.
        assert_eq!(kept[1], order("p2", &[&["a", "b", "c"], &["a", "b", "c"]]));
        // Recorded as planned: nothing changes.
        assert_eq!(keep(&planned, planned.clone(), &servers), planned);
        // A server gone since is dropped; one the record lacks runs last.
        let now = vec![order("p1", &[&["a", "d"], &["d", "a"]])];
        assert_eq!(
            keep(&recorded, now, &servers)[0],
            order("p1", &[&["a", "d"], &["a", "d"]])
        );
    }
}
