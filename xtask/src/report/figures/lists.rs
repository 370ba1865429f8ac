//! Each suite's figures, as values: the list [`of_suite`] gives for a suite, in the order the
//! report shows them. A new figure of a suite is one more [`Figure`] in its list; a new suite
//! is one more arm of the match, which names every suite.
//!
//! It may call what `figures` may.

use super::{Data, Figure, PointAt, cpu_ci, scaling, tp_ci};
use crate::plan::suites::{self, Suite};
use crate::record::row::Row;
use crate::report::plots::{Bound, Scale};

/// A measure of the rows of `series` against their x, with no error bars.
pub(crate) fn measure(series: &str, y: fn(&Row) -> Option<f64>) -> Data {
    Data::Lines {
        series: series.into(),
        x: |r| r.x,
        y,
        ci: |_| None,
    }
}

/// Throughput against the series' x, with its intervals.
fn throughput(series: &str) -> Data {
    Data::Lines {
        series: series.into(),
        x: |r| r.x,
        y: |r| r.throughput_per_sec,
        ci: tp_ci,
    }
}

/// Server CPU per request against the series' x, with its intervals.
fn cpu_per_request(series: &str) -> Data {
    Data::Lines {
        series: series.into(),
        x: |r| r.x,
        y: |r| r.cpu_us_per_req,
        ci: cpu_ci,
    }
}

fn spectra_at(series: &str) -> Data {
    Data::Spectra {
        series: series.into(),
    }
}

fn cpu_time_at(series: &str) -> Data {
    Data::CpuOverTime {
        series: series.into(),
    }
}

const CONNS: (&str, Scale) = ("connections", Scale::Log);
const PERCENTILE: (&str, Scale) = ("percentile", Scale::Nines);
const SECONDS: (&str, Scale) = (
    "seconds from the start of the measured window (negative: warmup)",
    Scale::Linear,
);
const CPU_PCT: (&str, Scale) = ("CPU (% of one core)", Scale::Linear);
const ECHOES: (&str, Scale) = ("echoes per second", Scale::Linear);
const CPU_PER_ECHO: (&str, Scale) = ("µs of CPU per echo (user + system)", Scale::Linear);
const CPU_PER_REQUEST: (&str, Scale) = ("µs of CPU per request (user + system)", Scale::Linear);

/// The quick suite's figures.
fn quick() -> Vec<Figure> {
    vec![
        Figure::new(
            "throughput",
            "Echo throughput, closed loop, 16 B",
            CONNS,
            ECHOES,
            throughput("closed"),
        ),
        Figure::new(
            "cpu-per-echo",
            "Server CPU per echo, closed loop",
            CONNS,
            CPU_PER_ECHO,
            cpu_per_request("closed"),
        ),
        closed_ranked(false),
        closed_ranked(true),
        // Fifteen servers' dots at one rate would overlap: a ranked row per server instead.
        // (A run of before the quick suite had one open-loop rate has a second.)
        open_ranked(0),
        open_ranked(1),
        Figure::new(
            "cv",
            "Stability: coefficient of variation of server CPU (500 ms samples)",
            CONNS,
            ("CV of CPU (σ/μ)", Scale::Linear),
            measure("closed", |r| r.cpu_cv),
        ),
        Figure::new(
            "latency-closed",
            "Latency spectrum, closed loop, {point}",
            PERCENTILE,
            ("latency (µs)", Scale::Log),
            spectra_at("closed"),
        ),
        Figure::new(
            "latency-open",
            "Latency spectrum at equal load, open loop, {point}",
            PERCENTILE,
            ("latency from intended send (µs)", Scale::Log),
            spectra_at("open"),
        ),
        Figure::new(
            "cpu-time",
            "Server CPU over time, open loop, {point}",
            SECONDS,
            CPU_PCT,
            cpu_time_at("open"),
        ),
    ]
}

/// The quick suite's CPU per echo at its `index`-th open-loop rate, a ranked row per server.
fn open_ranked(index: usize) -> Figure {
    let name = match index {
        0 => "cpu-per-echo-open".to_string(),
        i => format!("cpu-per-echo-open-{}", i + 1),
    };
    Figure::new(
        name,
        "Server CPU per echo at {point}, ranked (bars: interval; grey: the floor)",
        ("", Scale::Linear),
        CPU_PER_ECHO,
        Data::RankedDots {
            series: "open".into(),
            at: PointAt::Nth(index),
            y: |r| r.cpu_us_per_req,
            ci: cpu_ci,
            lowest_first: true,
        },
    )
}

/// The quick suite's closed loop at its most connections, a ranked row per server: its
/// throughput (the most first) or its CPU per echo (the least first).
fn closed_ranked(cpu: bool) -> Figure {
    let (name, what, y_axis, y, ci): (_, _, _, fn(&Row) -> Option<f64>, _) = if cpu {
        (
            "cpu-per-echo-closed-ranked",
            "Server CPU per echo",
            CPU_PER_ECHO,
            |r| r.cpu_us_per_req,
            cpu_ci as fn(&Row) -> Option<(f64, f64)>,
        )
    } else {
        (
            "throughput-ranked",
            "Echoes/s",
            ECHOES,
            |r| r.throughput_per_sec,
            tp_ci,
        )
    };
    Figure::new(
        name,
        format!("{what}, closed loop, {{point}}, ranked (bars: interval; grey: the floor)"),
        ("", Scale::Linear),
        y_axis,
        Data::RankedDots {
            series: "closed".into(),
            at: PointAt::Last,
            y,
            ci,
            lowest_first: cpu,
        },
    )
}

/// The emper-echo suite's figures (the io_uring paper's Figures 5 to 8); `workers` for the
/// Little's-law bound.
fn emper_echo(workers: usize) -> Vec<Figure> {
    let us = suites::EMPER_COMPUTE_US;
    let bound = suites::littles_law_bound(workers, us);
    let work = format!("work-{us}us");
    vec![
        Figure::new(
            "throughput",
            "Echo throughput (io_uring paper, Fig. 5)",
            CONNS,
            ECHOES,
            throughput("no-work"),
        ),
        Figure::new(
            "throughput-work",
            format!("Echo throughput with {us} µs of work per echo (Figs. 6, 7)"),
            CONNS,
            ECHOES,
            measure(&work, |r| r.throughput_per_sec),
        )
        .bound(Bound {
            y: bound,
            label: format!("Little's law bound: {workers} worker(s) / {us} µs = {bound:.0}/s"),
        }),
        Figure::new(
            "latency",
            "Latency spectrum at {point} (Fig. 8)",
            PERCENTILE,
            ("latency (µs)", Scale::Log),
            spectra_at("no-work"),
        ),
    ]
}

/// The chat-cpu suite's figures (the C-versus-Go paper's Figure 3).
fn chat_cpu() -> Vec<Figure> {
    vec![
        Figure::new(
            "cpu-mean",
            "Chat ingest at 1 Mbit/s per connection: server CPU (C-vs-Go paper, Fig. 3a)",
            CONNS,
            ("mean CPU (% of one core)", Scale::Linear),
            measure("ingest", |r| r.cpu_mean_pct),
        ),
        Figure::new(
            "cv",
            "Chat ingest: coefficient of variation of CPU (Fig. 3b)",
            CONNS,
            ("CV of CPU (σ/μ, 500 ms samples)", Scale::Linear),
            measure("ingest", |r| r.cpu_cv),
        ),
        Figure::new(
            "cpu-time",
            "Server CPU over time, {point}",
            SECONDS,
            CPU_PCT,
            cpu_time_at("ingest"),
        ),
    ]
}

/// The chat-room suite's figures: fan-out against the room size.
fn chat_room() -> Vec<Figure> {
    let room = ("room size", Scale::Log);
    vec![
        Figure::new(
            "delivery-p99",
            "Chat fan-out: delivery latency p99 (SAY to each member's MSG)",
            room,
            ("p99 delivery latency (µs)", Scale::Log),
            measure("rooms", |r| r.delivery_p99_us),
        ),
        Figure::new(
            "cpu-per-delivery",
            "Chat fan-out: server CPU per message sent",
            room,
            ("µs of CPU per SAY", Scale::Log),
            measure("rooms", |r| r.cpu_us_per_req),
        ),
    ]
}

/// The kv suite's figures: a pair a pipeline depth and operation, for the two measures the
/// issue asks for: requests/s (both clients) and server CPU per request (loadgen's window
/// is the steadier one).
fn kv() -> Vec<Figure> {
    let mut out = Vec::new();
    for (op, p) in [("get", 1), ("set", 1), ("get", 16), ("set", 16)] {
        let series = format!("loadgen-{op}-p{p}");
        let name = op.to_uppercase();
        out.push(Figure::new(
            format!("{op}-p{p}-throughput"),
            format!("kv {name}, pipeline {p}: requests/s (loadgen)"),
            CONNS,
            ("requests per second", Scale::Linear),
            throughput(&series),
        ));
        out.push(Figure::new(
            format!("{op}-p{p}-cpu"),
            format!("kv {name}, pipeline {p}: server CPU per request (loadgen)"),
            CONNS,
            CPU_PER_REQUEST,
            cpu_per_request(&series),
        ));
    }
    out
}

/// The http suite's figures: requests/s of both tests by both clients; loadgen's CPU per
/// request too.
fn http() -> Vec<Figure> {
    let wrk = ["wrk-plaintext-p16", "wrk-json-p1"];
    let lg = ["loadgen-plaintext-p16", "loadgen-json-p1"];
    let mut out = Vec::new();
    for s in wrk.into_iter().chain(lg) {
        let y = "requests per second";
        out.push(Figure::new(
            format!("{s}-throughput"),
            format!("http {s}: {y}"),
            CONNS,
            (y, Scale::Linear),
            throughput(s),
        ));
        if lg.contains(&s) {
            let (y, y_scale) = CPU_PER_REQUEST;
            out.push(Figure::new(
                format!("{s}-cpu"),
                format!("http {s}: {y}"),
                CONNS,
                (y, y_scale),
                cpu_per_request(s),
            ));
        }
    }
    out
}

/// The memory suite's figure.
fn memory() -> Vec<Figure> {
    vec![Figure::new(
        "per-conn",
        "Memory per idle connection (PSS)",
        CONNS,
        ("KiB per connection", Scale::Linear),
        measure("idle", |r| r.mem_per_conn_bytes.map(|b| b / 1024.0)),
    )]
}

/// The figures of `suite`, in the order the report shows them. The match names every
/// suite, so that a new suite without figures is a compile error here rather than a silent
/// gap.
pub(crate) fn of_suite(suite: Suite, rows: &[Row], workers: usize) -> Vec<Figure> {
    match suite {
        Suite::Quick => quick()
            .into_iter()
            .map(|f| with_resolution(f, rows))
            .collect(),
        Suite::EmperEcho => emper_echo(workers),
        Suite::ChatCpu => chat_cpu(),
        Suite::ChatRoom => chat_room(),
        Suite::Kv => kv(),
        Suite::Http => http(),
        Suite::Memory => memory(),
        Suite::Scaling => scaling::figures(rows),
        Suite::Capacity => super::capacity::figures(rows),
        // Drawn by the `search` module from its own runs.
        Suite::Search => Vec::new(),
        Suite::Churn | Suite::Idle | Suite::Sizes | Suite::Bursts | Suite::Skew => {
            super::crossover::figure(suite, rows)
        }
    }
}

/// The open loop's latency spectrum with the run's resolution across it: the floor server's
/// p99 at the point drawn (the last of the series), the least latency the machine and its
/// client show there.
fn with_resolution(figure: Figure, rows: &[Row]) -> Figure {
    if figure.name != "latency-open" {
        return figure;
    }
    let floor = super::points_of(rows, "quick", "open")
        .last()
        .and_then(|p| crate::record::row::find(rows, "quick", "floor-epoll", &p.0))
        .and_then(|r| r.p99_us);
    match floor {
        Some(p99) => figure.bound(Bound {
            y: p99,
            label: format!("resolution: floor-epoll's p99, {p99:.0} µs"),
        }),
        None => figure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_row(server: &str, point: &str, p99: f64) -> Row {
        Row {
            suite: "quick".into(),
            series: "open".into(),
            server: server.into(),
            point: point.into(),
            label: format!("1000 conns @ {point}"),
            x: 1000.0,
            p99_us: Some(p99),
            ..Row::default()
        }
    }

    #[test]
    fn the_open_spectrum_draws_the_floors_p99_at_its_point_as_the_resolution() {
        let rows = vec![
            open_row("floor-epoll", "r1000", 150.0),
            open_row("reactor", "r20000", 400.0),
            open_row("floor-epoll", "r20000", 310.0),
        ];
        let figures: Vec<Figure> = quick()
            .into_iter()
            .map(|f| with_resolution(f, &rows))
            .collect();
        let open = figures.iter().find(|f| f.name == "latency-open").unwrap();
        assert_eq!(open.bounds.len(), 1);
        assert_eq!(open.bounds[0].y, 310.0);
        assert!(open.bounds[0].label.contains("floor-epoll"));
        assert!(
            figures
                .iter()
                .filter(|f| f.name != "latency-open")
                .all(|f| f.bounds.is_empty())
        );
        let without: Vec<Figure> = quick()
            .into_iter()
            .map(|f| with_resolution(f, &rows[1..2]))
            .collect();
        assert!(without.iter().all(|f| f.bounds.is_empty()));
    }
}
