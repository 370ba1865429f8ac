//! The order of the servers within each round of a point: a Williams design, its servers
//! drawn at random, so that no server's repeats all sit in one position of the round.
//!
//! A run measures each point in rounds, every server once per round. Whatever the first run
//! of a round pays and the next does not (a cold page cache for the binary, a neighbour that
//! quiets down), and whatever drifts within a round, lands on a position. In a fixed order
//! (A B C every round) it lands on the same server every time, and the verdicts' model, whose
//! rounds are blocks but whose positions are not, reads it as a difference.
//!
//! A Williams design is a Latin square whose rows put every server in every position once
//! and follow every server by every other one exactly once (for an odd count, the square and
//! its mirror, each pair twice). Round `k` of a point takes row `k` (cycling), so over `r`
//! rounds each server holds each position `⌊r/n⌋` or `⌈r/n⌉` times.
//!
//! Which server plays which symbol of the square is drawn at each point, from the run's seed
//! (`order_seed` in `meta.json`, `--order-seed` to replay it). A relabelled Williams square is
//! one too, so the balance holds whatever the draw; what the draw adds is that nothing left
//! over by the design is the same from run to run. With 2 servers and 5 rounds one of them
//! goes first 3 times, and the first run of a point follows another point's load: a fixed
//! labelling gave both to the same server in every run, so a small effect of either piled up
//! on it run after run; drawn, it falls on each server by chance, which is what the tests'
//! level assumes.
//!
//! The orders are recorded in `meta.json` by name, and a resumed run takes them from there
//! (`keep`), so that its rounds run in the order the run began with.
//!
//! It may call the plan layer's `suites` and `servers`.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
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

/// The order of the servers in each of `rounds` rounds of a point: the design's rows in
/// turn, symbol `s` of the square played by server `servers[s]` (a permutation of `0..n`).
pub(crate) fn rounds(servers: &[usize], rounds: usize) -> Vec<Vec<usize>> {
    let square = williams(servers.len());
    if square.is_empty() {
        return vec![Vec::new(); rounds];
    }
    (0..rounds)
        .map(|k| {
            square[k % square.len()]
                .iter()
                .map(|&s| servers[s])
                .collect()
        })
        .collect()
}

/// The random source of a run's orders: the same `seed` draws the same orders (ChaCha8, whose
/// stream the `rand_chacha` crate keeps stable across versions).
pub(crate) fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Which of `n` servers plays each symbol of the square: a permutation of `0..n` drawn from
/// `rng`.
pub(crate) fn draw(n: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut servers: Vec<usize> = (0..n).collect();
    servers.shuffle(rng);
    servers
}

/// A seed for a run that was given none: the operating system's randomness, by way of the
/// standard library's hasher keys.
pub(crate) fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
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
/// that serve the point (`serves`), in `repeats` rounds of the design, who plays which symbol
/// drawn point by point from `seed`.
pub(crate) fn plan(
    points: &[Point],
    servers: &[Variant],
    serves: impl Fn(&Variant, Workload) -> bool,
    repeats: impl Fn(Suite) -> usize,
    seed: u64,
) -> Vec<PointOrder> {
    let mut rng = rng(seed);
    points
        .iter()
        .map(|p| {
            let here: Vec<&Variant> = servers.iter().filter(|v| serves(v, p.workload)).collect();
            PointOrder {
                suite: p.suite.name().to_string(),
                point: p.id.clone(),
                rounds: rounds(&draw(here.len(), &mut rng), repeats(p.suite))
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
                for seed in 0..3 {
                    let rows = rounds(&draw(n, &mut rng(seed)), r);
                    assert_eq!(rows.len(), r);
                    let (lo, hi) = (r / n, r.div_ceil(n));
                    for (s, by_pos) in positions(n, &rows).iter().enumerate() {
                        assert!(
                            by_pos.iter().all(|&c| lo <= c && c <= hi),
                            "n {n}, {r} rounds, seed {seed}: server {s} {by_pos:?}"
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
    fn two_servers_alternate_in_the_order_drawn() {
        assert_eq!(rounds(&[0, 1], 5), [[0, 1], [1, 0], [0, 1], [1, 0], [0, 1]]);
        assert_eq!(rounds(&[1, 0], 5), [[1, 0], [0, 1], [1, 0], [0, 1], [1, 0]]);
        assert_eq!(rounds(&[0, 1, 2], 2), [[0, 1, 2], [1, 2, 0]]);
        assert_eq!(rounds(&[2, 0, 1], 2), [[2, 0, 1], [0, 1, 2]]);
        assert_eq!(rounds(&[], 2), [Vec::<usize>::new(), Vec::new()]);
    }

    #[test]
    fn a_seed_draws_the_same_orders_and_other_seeds_others() {
        let draws = |seed| {
            let mut r = rng(seed);
            (0..4).map(|_| draw(6, &mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        for d in draws(7) {
            let mut sorted = d.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..6).collect::<Vec<_>>());
        }
        assert_ne!(fresh_seed(), fresh_seed());
    }

    #[test]
    fn what_the_design_leaves_over_falls_on_each_server_by_chance() {
        // 2 servers, 5 rounds: one goes first 3 times. Over 400 points drawn from one seed,
        // each server is that one about half the time (a binomial 200 ± 10; the bounds are
        // 5 standard deviations, and the seed fixes the draw, so the test cannot flake).
        let mut r = rng(0x5eed_0de7);
        let first_three_times =
            |s: usize, rows: &[Vec<usize>]| rows.iter().filter(|row| row[0] == s).count() == 3;
        let server_0 = (0..400)
            .filter(|_| first_three_times(0, &rounds(&draw(2, &mut r), 5)))
            .count();
        assert!(
            (150..=250).contains(&server_0),
            "server 0 first 3 times at {server_0} of 400"
        );
        // And for 3 servers each of the six labellings comes up.
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.insert(draw(3, &mut r));
        }
        assert_eq!(seen.len(), 6);
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
            command: None,
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
