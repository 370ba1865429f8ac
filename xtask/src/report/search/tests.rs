//! Tests of the search suite's report: summaries, ratios, the paper's line, how each
//! program reads its files.

use super::*;

#[test]
fn quartiles_interpolate() {
    let v = [1.0, 2.0, 3.0, 4.0, 5.0];
    assert_eq!(quantile(&v, 0.5), 3.0);
    assert_eq!(quantile(&v, 0.25), 2.0);
    assert_eq!(quantile(&[1.0, 2.0], 0.5), 1.5);
}

/// One run of `program`: 0.1 s user, 0.2 s system, one match.
fn m(program: &str, round: usize, wall_s: f64, failure: Option<&str>) -> Measure {
    Measure {
        program: program.into(),
        round,
        wall_s,
        user_s: 0.1,
        sys_s: 0.2,
        files_matched: 1,
        matches: 1,
        files: None,
        bytes: None,
        errors: None,
        failure: failure.map(String::from),
    }
}

/// A run of `repeat` rounds made of `measures`.
fn run_of(repeat: usize, measures: Vec<Measure>) -> SearchRun {
    SearchRun {
        tree: "/t".into(),
        needle: "x".into(),
        cold: false,
        cpus: "0".into(),
        workers: 1,
        repeat,
        reference: None,
        manifest: None,
        not_run: vec![],
        measures,
    }
}

#[test]
fn a_failed_run_fails_its_program_and_ratios_need_significance() {
    let run = run_of(
        2,
        vec![
            m("a", 1, 1.0, None),
            m("b", 1, 2.0, Some("counts differ")),
            m("a", 2, 1.5, None),
            m("b", 2, 2.5, None),
        ],
    );
    let l = lines(&run);
    assert_eq!(l.len(), 2);
    assert!(l[0].failure.is_none());
    assert_eq!(l[1].failure.as_deref(), Some("round 1: counts differ"));
    assert!((l[0].cpu[0] - 0.3).abs() < 1e-9);
    // Two rounds that disagree: 1.5× then 1.67×, one degree of freedom, no verdict.
    assert!(
        ratios(&l[0], &[&l[1]])[0].starts_with('~'),
        "{:?}",
        ratios(&l[0], &[&l[1]])
    );
    // Eight rounds, the other twice as slow in each give or take 1%: found.
    let mut measures = Vec::new();
    for k in 1..=8 {
        let fast = 1.0 + 0.1 * k as f64;
        measures.push(m("fast", k, fast, None));
        let wobble = if k % 2 == 0 { 1.01 } else { 0.99 };
        measures.push(m("slow", k, 2.0 * fast * wobble, None));
    }
    let l = lines(&run_of(8, measures));
    let r = ratios(&l[0], &[&l[1]]);
    assert!(r[0].starts_with("2.00× ["), "{r:?}");
}

#[test]
fn the_report_says_search_may_blocks_its_coroutines() {
    let run = run_of(
        1,
        vec![
            m("search-may", 1, 1.0, None),
            m("search-monoio", 1, 1.0, None),
        ],
    );
    let s = how_they_read(&run);
    assert!(s.contains("search-monoio: monoio's io_uring"), "{s}");
    assert!(s.contains("blocking `std::fs` calls inside may's"), "{s}");
    let run = run_of(1, vec![m("search-tokio", 1, 1.0, None)]);
    assert!(!how_they_read(&run).contains("search-may"));
}

#[test]
fn the_paper_line_says_which_program_did_not_run_and_which_failed() {
    let line = |measures: Vec<(&str, Option<&str>)>| {
        let run = run_of(
            1,
            measures.into_iter().map(|(p, f)| m(p, 1, 1.0, f)).collect(),
        );
        let l = lines(&run);
        let ok: Vec<&Line> = l.iter().filter(|l| l.failure.is_none()).collect();
        against_the_paper(&run, &ok)
    };
    let s = line(vec![("search-fiber", None), ("search-threads", None)]);
    assert!(s.ends_with("Here: search-go did not run.\n"), "{s}");
    let s = line(vec![
        ("search-fiber", None),
        ("search-go", Some("counts differ")),
    ]);
    assert!(s.ends_with("Here: search-go failed.\n"), "{s}");
    let s = line(vec![("search-threads", None)]);
    assert!(
        s.contains("search-fiber did not run and search-go did not run"),
        "{s}"
    );
    // One run each: nothing to test.
    let s = line(vec![("search-fiber", None), ("search-go", None)]);
    assert!(s.contains("search-go / search-fiber = –"), "{s}");
}
