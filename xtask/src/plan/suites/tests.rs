//! The suites' tests: their points, their defaults, their references.

use super::*;

/// The overrides of a command line that changes nothing, one worker.
pub(super) fn o() -> Overrides {
    Overrides {
        workers: 1,
        ..Overrides::default()
    }
}

#[test]
fn conns_lists() {
    assert_eq!(parse_conns("1,10, 100"), Ok(vec![1, 10, 100]));
    assert!(parse_conns("0").is_err());
    assert!(parse_conns("1,,2").is_err());
    assert!(parse_conns("ten").is_err());
}

#[test]
fn the_reference_is_named_in_advance() {
    let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let run = names(&["reactor", "go", "floor-epoll", "redis", "nginx"]);
    let r = |suite: Suite, explicit| suite.reference(&run, explicit);
    assert_eq!(r(Suite::Quick, None).as_deref(), Some("floor-epoll"));
    assert_eq!(r(Suite::Kv, None).as_deref(), Some("redis"));
    assert_eq!(r(Suite::Http, None).as_deref(), Some("nginx"));
    assert_eq!(r(Suite::Scaling, None).as_deref(), Some("reactor"));
    assert_eq!(r(Suite::Quick, Some("go")).as_deref(), Some("go"));
    // A --reference that is not in the run is no reference: the suite's own, or the first.
    assert_eq!(
        r(Suite::Quick, Some("nope")).as_deref(),
        Some("floor-epoll")
    );
    let without = names(&["go", "reactor"]);
    assert_eq!(
        Suite::Quick.reference(&without, None).as_deref(),
        Some("go")
    );
    assert_eq!(Suite::Quick.reference(&[], None), None);
}

/// How many servers run by default (sixteen): what a suite's time is estimated for.
pub(super) fn default_servers() -> f64 {
    conformance::SERVERS
        .iter()
        .filter(|s| s.bench.is_some_and(|b| b.default))
        .count() as f64
}
