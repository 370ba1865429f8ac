//! The conclusion's tests, from fixture rows: every server named once, equal ones grouped, the
//! ranges, the disturbed points, the notes; the ranking and the terminal's lines.

use super::*;
use crate::record::meta::Meta;
use crate::report::markdown::glance::tests::row;

/// Five rounds of CPU per echo around `k` times 10 µs, the jitter's order `shift`ed so that
/// no two servers move together.
fn cpu(k: f64, shift: usize) -> Vec<f64> {
    let jitter = [0.0, 0.02, -0.01, 0.01, 0.03];
    (0..5)
        .map(|i| 10.0 * k * (1.0 + jitter[(i + shift) % 5]))
        .collect()
}

fn fixture() -> Vec<Row> {
    let servers = [
        ("floor-epoll", 1.0),
        ("reactor", 1.0),
        ("tokio", 1.01),
        ("tokio-uring", 1.24),
        ("monoio", 1.27),
        ("smol", 1.30),
        ("go-eventloop", 1.45),
        ("glommio", 1.70),
        ("threads-process", 1.72),
        ("busy", 1.0),
    ];
    let mut rows: Vec<Row> = servers
        .iter()
        .enumerate()
        .map(|(i, (s, k))| row(s, "open", "open", &cpu(*k, i), None))
        .collect();
    rows[9].other_load_pct = Some(50.0);
    rows
}

fn input_of<'a>(meta: &'a Meta, rows: &'a [Row]) -> Input<'a> {
    Input {
        meta,
        rows,
        plots: &[],
        variants: &[],
        skipped: &[],
        suites: &[Suite::Quick],
        server_cpus: "1".into(),
        client_cpus: "0".into(),
        workers: 1,
        capacity: &[],
    }
}

#[test]
fn the_paragraph_names_every_server_once_grouped_with_ranges() {
    let rows = fixture();
    let meta = Meta::default();
    let input = input_of(&meta, &rows);
    let notes = vec!["X and Y swap places under skew.".to_string()];
    let p = paragraph(&input, Suite::Quick, &notes).unwrap();
    assert!(
        p.starts_with(
            "At 20,000 echoes/s over 1000 connections, against floor-epoll's CPU per echo"
        ),
        "{p}"
    );
    assert!(
        p.contains(
            "two servers cost the same as floor-epoll within this run's precision (reactor, tokio)"
        ),
        "{p}"
    );
    assert!(p.contains("tokio-uring, monoio and smol 1.2"), "{p}");
    assert!(p.contains("glommio and threads-process about 1.7"), "{p}");
    assert!(
        p.contains("Not judged: busy (disturbed by other load (‡))"),
        "{p}"
    );
    assert!(p.contains("1 of its 10 points disturbed"), "{p}");
    assert!(p.ends_with("X and Y swap places under skew."), "{p}");
    for (s, _) in rows.iter().map(|r| (r.server.as_str(), ())) {
        let named = p
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .filter(|w| *w == s)
            .count();
        let expected = if s == "floor-epoll" { 2 } else { 1 };
        assert_eq!(named, expected, "{s} in {p}");
    }
}

#[test]
fn bands_group_close_ratios_and_give_ranges() {
    let b = bands(&[
        ("c".into(), 1.7),
        ("a".into(), 1.24),
        ("b".into(), 1.30),
        ("d".into(), 1.71),
        ("e".into(), 2.5),
    ]);
    assert_eq!(b, ["a and b 1.24–1.30×", "c and d about 1.71×", "e 2.50×"]);
    // Two within 2% of each other keep their hundredths.
    let close = bands(&[("f".into(), 1.13), ("g".into(), 1.15)]);
    assert_eq!(close, ["f and g about 1.14×"]);
}

#[test]
fn without_repeats_the_ratios_are_given_without_verdicts() {
    let mut rows = fixture();
    rows.truncate(4);
    for r in &mut rows {
        r.per_round.clear();
        r.per_repeat.clear();
        r.ok = 1;
        r.repeats = 1;
    }
    let meta = Meta::default();
    let input = input_of(&meta, &rows);
    let p = paragraph(&input, Suite::Quick, &[]).unwrap();
    assert!(p.contains("without a verdict"), "{p}");
    assert!(p.contains("tokio-uring 1.2"), "{p}");
    assert!(!p.contains("cost the same"), "{p}");
}

#[test]
fn ranked_puts_the_cheapest_first_and_the_terminal_a_line_a_server() {
    let rows = fixture();
    let names = servers(&rows);
    let r = ranked(&rows, Suite::Quick, &names);
    assert_eq!(r.last().map(String::as_str), Some("threads-process"));
    assert!(r.iter().position(|s| s == "smol") > r.iter().position(|s| s == "tokio-uring"));
    let meta = Meta::default();
    let t = terminal(&input_of(&meta, &rows));
    let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("  ")).collect();
    assert_eq!(lines.len(), rows.len(), "{t}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("floor-epoll") && l.ends_with("reference")),
        "{t}"
    );
    assert!(!t.contains("| ---"), "{t}");
}

#[test]
fn a_name_ending_in_s_takes_an_apostrophe_alone() {
    assert_eq!(possessive("threads"), "threads'");
    assert_eq!(possessive("floor-epoll"), "floor-epoll's");
}

#[test]
fn the_at_a_glance_table_is_ranked_by_the_headline_figure() {
    let rows = fixture();
    let meta = Meta::default();
    let mut out = String::new();
    crate::report::markdown::glance::at_a_glance(&mut out, &input_of(&meta, &rows));
    let at = |s: &str| {
        out.find(&format!("| **{s}** |"))
            .unwrap_or_else(|| panic!("{s} not in {out}"))
    };
    // Ranked by CPU per echo, the cheapest first (a disturbed one too, by its median),
    // where the run's order (the fixture's) put busy last.
    assert!(at("floor-epoll") < at("tokio-uring"), "{out}");
    assert!(at("tokio-uring") < at("smol"), "{out}");
    assert!(at("smol") < at("glommio"), "{out}");
    assert!(at("glommio") < at("threads-process"), "{out}");
    assert!(at("busy") < at("tokio-uring"), "{out}");
}

#[test]
fn a_suite_without_traffic_has_no_headline_and_a_closed_one_its_throughput() {
    let mut rows = vec![
        crate::record::row::tests::row("a", "c10", 10.0, 1000.0),
        crate::record::row::tests::row("a", "c100", 100.0, 3000.0),
    ];
    let h = Headline::of(&rows, Suite::Quick).unwrap();
    assert_eq!((h.point.as_str(), h.metric), ("c100", "throughput_per_sec"));
    for r in &mut rows {
        r.throughput_per_sec = None;
    }
    assert_eq!(Headline::of(&rows, Suite::Quick), None);
}

#[test]
fn cpu_at_unequal_loads_is_no_headline() {
    let mut rows = vec![
        crate::record::row::tests::row("a", "open", 100.0, 1000.0),
        crate::record::row::tests::row("b", "open", 100.0, 2000.0),
    ];
    rows[0].rate = Some(1000.0);
    rows[1].rate = Some(1000.0);
    let h = Headline::of(&rows, Suite::Quick).unwrap();
    assert_eq!(h.metric, "cpu_us_per_req");
    // Each at a share of its own capacity (bursts with --capacities): no comparison.
    rows[1].rate = Some(2000.0);
    assert_eq!(Headline::of(&rows, Suite::Quick), None);
    // The run still has its paragraph, which says why no CPU is compared.
    let meta = Meta::default();
    let said = paragraphs(&input_of(&meta, &rows));
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("at a share of its own capacity"),
        "{}",
        said[0]
    );
    assert!(
        said[0].contains("None of its 2 points was disturbed"),
        "{}",
        said[0]
    );
    assert!(
        !said[0].contains('×'),
        "no ratio at unequal loads: {}",
        said[0]
    );
}

#[test]
fn without_a_named_reference_the_first_server_run_is_it_whatever_the_ranking() {
    // The floor is not in the run: the reference is the first server that ran, `dear`,
    // though the ranking puts `cheap` first.
    let rows = vec![
        row("dear", "open", "open", &cpu(1.5, 0), None),
        row("cheap", "open", "open", &cpu(1.0, 1), None),
    ];
    let meta = Meta::default();
    let input = input_of(&meta, &rows);
    let p = paragraph(&input, Suite::Quick, &[]).unwrap();
    assert!(p.contains("against dear's CPU per echo"), "{p}");
    let t = terminal(&input);
    let line = |s: &str| t.lines().find(|l| l.trim_start().starts_with(s)).unwrap();
    assert!(line("dear").ends_with("reference"), "{t}");
    assert!(line("cheap").contains("0.6"), "{t}");
    let mut out = String::new();
    crate::report::markdown::glance::at_a_glance(&mut out, &input);
    assert!(out.contains("Verdicts against **dear**"), "{out}");
    assert!(
        out.find("| **cheap** |") < out.find("| **dear** |"),
        "{out}"
    );
}
