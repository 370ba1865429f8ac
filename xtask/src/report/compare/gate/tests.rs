//! The gate's tests: recorded runs as fixtures (`xtask/tests/fixtures/gate`, README there),
//! each end of the gate and the rule's edge, on rows made here.

use std::path::PathBuf;

use super::*;
use crate::record::summary::read_summary;

fn fixture(name: &str) -> Vec<Row> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate");
    read_summary(&dir.join(name)).unwrap()
}

fn gate(a: &str, b: &str, metric: Metric, control: Option<&str>) -> Gate {
    judge(&fixture(a), &fixture(b), metric, 5.0, control)
}

#[test]
fn a_run_of_one_repeat_compared_with_itself_is_inconclusive() {
    let g = gate("once", "once", Metric::Cpu, None);
    assert_eq!(g.outcome, Outcome::Inconclusive);
    assert_eq!(g.exit_status, INCONCLUSIVE);
    assert_eq!(g.family, 0);
    assert_eq!(g.with(Status::Unjudged).count(), 6);
    assert!(
        g.with(Status::Unjudged)
            .all(|d| d.why.as_deref() == Some("fewer than 3 repeats")),
        "{g:?}"
    );
}

#[test]
fn two_runs_of_one_binary_pass_against_the_control() {
    let g = gate("base", "again", Metric::Cpu, None);
    assert_eq!(g.outcome, Outcome::Pass, "{g:?}");
    assert_eq!(g.exit_status, 0);
    // floor-epoll is the control at each of the three points; reactor is judged against it.
    assert_eq!(g.with(Status::Control).count(), 3);
    assert_eq!(g.family, 3);
    assert!(
        g.with(Status::Pass)
            .all(|d| d.server == "reactor" && d.control.as_deref() == Some("floor-epoll"))
    );
    assert!(g.notes().iter().any(|n| n.starts_with("**Control**")));
}

#[test]
fn reactor_against_reactor_with_five_microseconds_of_compute_fails() {
    let g = gate("base", "compute", Metric::Cpu, None);
    assert_eq!(g.outcome, Outcome::Fail);
    assert_eq!(g.exit_status, 1);
    let failed: Vec<String> = g.with(Status::Fail).map(line).collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(
        failed[0].starts_with("quick / reactor / 1 conns: 1.46× ["),
        "{failed:?}"
    );
    assert!(
        failed[0].ends_with("against floor-epoll's change"),
        "{failed:?}"
    );
}

#[test]
fn a_run_whose_every_point_is_disturbed_is_inconclusive() {
    let g = gate("base", "disturbed", Metric::Cpu, None);
    assert_eq!(g.outcome, Outcome::Inconclusive);
    assert_eq!(g.family, 0);
    assert!(
        g.with(Status::Unjudged).all(|d| d.why.as_deref()
            == Some("disturbed by other load (‡) in B")
            && d.disturbed == [false, true]),
        "{g:?}"
    );
}

#[test]
fn a_machine_that_moved_as_a_whole_does_not_fail_the_gate() {
    // Both servers 13% dearer in B: the control takes it out.
    let g = gate("base", "drifted", Metric::Cpu, None);
    assert_eq!(g.outcome, Outcome::Pass, "{g:?}");
    let c = g.with(Status::Control).next().unwrap();
    assert!(c.ratio.is_some_and(|r| r > 1.1), "{c:?}");
    assert!(
        g.with(Status::Pass)
            .all(|d| (d.ratio.unwrap() - 1.0).abs() < 0.03)
    );
    // Without it (`--control none`), the shift is read as the code's unless widened: the
    // header says there was no control, and the drift widens each interval.
    let bare = gate("base", "drifted", Metric::Cpu, Some("none"));
    assert!(
        bare.notes()
            .iter()
            .any(|n| n.starts_with("**No control** at 6"))
    );
    assert_eq!(bare.with(Status::Control).count(), 0);
    let g = gate("alone", "alone-drifted", Metric::Cpu, None);
    assert!(
        g.notes()
            .iter()
            .any(|n| n.starts_with("**No control** at 3"))
    );
    assert_eq!(g.outcome, Outcome::Pass, "{g:?}");
    assert!(
        g.with(Status::Pass)
            .all(|d| d.low.unwrap() < 1.05 && d.ratio.unwrap() > 1.1)
    );
}

#[test]
fn client_bound_points_are_not_judged_on_throughput() {
    let g = gate("base", "again", Metric::Throughput, None);
    assert_eq!(g.outcome, Outcome::Inconclusive);
    let why: Vec<&str> = g
        .with(Status::Unjudged)
        .filter_map(|d| d.why.as_deref())
        .collect();
    // closed-c1000 is † in both runs, for both servers.
    assert_eq!(why.len(), 2, "{why:?}");
    assert!(why.iter().all(|w| w.starts_with("client-bound (†")));
    // Its CPU is still the server's, and judged.
    assert_eq!(gate("base", "again", Metric::Cpu, None).family, 3);
}

fn cpu_row(server: &str, cpu: &[f64]) -> Row {
    let mut r = Row {
        suite: "kv".into(),
        server: server.into(),
        point: "p".into(),
        label: "p".into(),
        ok: cpu.len(),
        repeats: cpu.len(),
        ..Row::default()
    };
    r.per_repeat.insert("cpu_us_per_req".into(), cpu.to_vec());
    r
}

#[test]
fn the_rule_is_the_whole_interval_beyond_the_threshold() {
    let a = vec![cpu_row("x", &[10.0, 10.1, 9.9, 10.05, 9.95])];
    // 30% dearer in every repeat: its interval is wholly above 1.05 (no control in kv
    // without redis: widened, and still above).
    let b = vec![cpu_row("x", &[13.0, 13.1, 12.9, 13.05, 12.95])];
    let g = judge(&a, &b, Metric::Cpu, 5.0, None);
    assert_eq!(g.outcome, Outcome::Fail, "{g:?}");
    // With a control of its own, the same regression against an unchanged server: a tight
    // interval. 7% dearer: the estimate above 5%, the interval reaching below 1.05: a pass.
    let ctl = |v: f64| cpu_row("c", &[v, v * 1.01, v * 0.99, v * 1.005, v * 0.995]);
    let a = vec![ctl(5.0), cpu_row("x", &[10.0, 10.2, 9.8, 10.1, 9.9])];
    let b = vec![ctl(5.0), cpu_row("x", &[10.7, 10.9, 10.5, 10.8, 10.6])];
    let g = judge(&a, &b, Metric::Cpu, 5.0, Some("c"));
    let d = g.with(Status::Pass).next().unwrap();
    assert!(d.ratio.unwrap() > 1.05 && d.low.unwrap() < 1.05, "{d:?}");
    assert_eq!(g.outcome, Outcome::Pass);
    // At 0% the same is a failure: any real regression.
    assert_eq!(
        judge(&a, &b, Metric::Cpu, 0.0, Some("c")).outcome,
        Outcome::Fail
    );
    // Cheaper is never a failure.
    assert_eq!(
        judge(&b, &a, Metric::Cpu, 0.0, Some("c")).outcome,
        Outcome::Pass
    );
}

#[test]
fn lost_points_fail_and_points_only_in_b_are_not_gated() {
    let a = fixture("base");
    let mut b = fixture("again");
    b.retain(|r| !(r.server == "reactor" && r.point == "closed-c1"));
    let mut extra = b[0].clone();
    extra.server = "tokio".into();
    b.push(extra);
    let g = judge(&a, &b, Metric::Cpu, 5.0, None);
    assert_eq!(g.outcome, Outcome::Fail);
    let failed: Vec<String> = g.with(Status::Fail).map(line).collect();
    assert_eq!(failed, ["quick / reactor / 1 conns: not in B"]);
    assert!(g.decisions.iter().all(|d| d.server != "tokio"));
    // A point B failed where A ran fails too; one both failed is not judged.
    let mut b = fixture("again");
    b[1].ok = 0;
    b[1].failure = Some("the server did not start".into());
    let g = judge(&a, &b, Metric::Cpu, 5.0, None);
    assert!(
        line(g.with(Status::Fail).next().unwrap()).contains("B failed (the server did not start)")
    );
    let mut a2 = a.clone();
    a2[1].ok = 0;
    let g = judge(&a2, &b, Metric::Cpu, 5.0, None);
    assert_eq!(g.outcome, Outcome::Inconclusive, "{g:?}");
}

#[test]
fn p99_off_the_schedule_is_not_judged_and_the_json_says_why() {
    let a = fixture("base");
    let mut b = fixture("again");
    for r in b.iter_mut().filter(|r| r.point.starts_with("open")) {
        r.schedule_ok = Some(false);
    }
    let g = judge(&a, &b, Metric::P99, 5.0, None);
    assert_eq!(g.outcome, Outcome::Inconclusive);
    let json = serde_json::to_value(&g).unwrap();
    assert_eq!(json["outcome"], "inconclusive");
    assert_eq!(json["exit_status"], 3);
    let d = json["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["status"] == "unjudged")
        .unwrap();
    assert_eq!(d["schedule_missed"], serde_json::json!([false, true]));
    assert!(d["why"].as_str().unwrap().contains('◊'));
}
