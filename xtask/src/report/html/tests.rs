//! The page's tests: what it holds of a run (header, sections, sortable tables, plots inline,
//! a figure row per server with its histogram link) and that it names nothing to fetch.
//!
//! It may call what `html` may.

use super::*;
use crate::plan::suites::Suite;

fn row(server: &str, point: &str, label: &str, cpu: &[f64]) -> Row {
    let mut r = Row {
        suite: "quick".into(),
        server: server.into(),
        series: "open".into(),
        point: point.into(),
        label: label.into(),
        x: 1000.0,
        conns: 1000,
        rate: Some(20_000.0),
        ok: cpu.len(),
        repeats: cpu.len(),
        throughput_per_sec: Some(20_000.0),
        cpu_us_per_req: crate::record::stats::median(cpu),
        p99_us: Some(250.0),
        hist: Some(format!("quick/{server}/{point}.hist")),
        ..Row::default()
    };
    let i = crate::record::stats::median_interval(cpu).unwrap();
    (r.cpu_us_per_req_ci_low, r.cpu_us_per_req_ci_high) = (Some(i.low), Some(i.high));
    r.per_repeat.insert("cpu_us_per_req".into(), cpu.to_vec());
    r
}

fn page(dir: &Path, rows: &[Row]) -> String {
    let meta = Meta {
        run_id: "20261201-000000-abc".into(),
        cpu_model: Some("Test CPU".into()),
        cores: 2,
        commit: Some("0123456789abcdef".into()),
        command: "cargo xtask bench --servers a,b <script>".into(),
        ..Meta::default()
    };
    let plots = vec![crate::report::figures::PlotFile {
        suite: "quick".into(),
        file: "plots/quick-x.svg".into(),
        caption: "A plot".into(),
    }];
    let input = Input {
        capacity: &[],
        meta: &meta,
        rows,
        plots: &plots,
        variants: &[],
        skipped: &[],
        suites: &[Suite::Quick],
        server_cpus: "1".into(),
        client_cpus: "0".into(),
        workers: 1,
    };
    let text = crate::report::markdown::render(&input);
    Page::of_run(dir, &input, &text).render().unwrap()
}

#[test]
fn the_page_holds_the_run_and_fetches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("plots")).unwrap();
    std::fs::write(
        dir.path().join("plots/quick-x.svg"),
        "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"><rect width=\"5\" height=\"5\"/></svg>",
    )
    .unwrap();
    let rows = vec![
        row(
            "a",
            "open",
            "1000 conns @ 20000/s",
            &[10.0, 10.2, 9.9, 10.1, 10.3],
        ),
        row(
            "b",
            "open",
            "1000 conns @ 20000/s",
            &[15.0, 15.3, 15.1, 14.9, 15.2],
        ),
    ];
    let html = page(dir.path(), &rows);
    // The header, escaped.
    assert!(
        html.contains("<dt>machine</dt><dd>Test CPU (2 CPUs, Linux ?)</dd>"),
        "{html}"
    );
    assert!(html.contains("<dd>0123456789ab</dd>"), "{html}");
    assert!(
        html.contains("cargo xtask bench --servers a,b &lt;script&gt;"),
        "{html}"
    );
    assert_eq!(
        html.matches("<script>").count(),
        1,
        "the command reached the page unescaped"
    );
    // The conclusion under the title, as report.md opens.
    assert!(
        html.contains("<p class=\"conclusion\">At 20,000 echoes&#x2f;s over 1000 connections"),
        "{html}"
    );
    // report.md's sections, at a glance first, its tables in scrolling boxes, its verdicts.
    assert!(html.contains("<section id=\"at-a-glance\">"), "{html}");
    assert!(html.contains("<div class=\"scroll\"><table>"), "{html}");
    assert!(html.contains("1.50× [1.47–1.53] (p&lt;0.001)"), "{html}");
    // The plot inline, without its XML declaration.
    assert!(html.contains("<figure class=\"plot\"><svg xmlns"), "{html}");
    assert!(!html.contains("<?xml"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    // A figure row per server, its histogram linked, its value and interval on hover.
    assert_eq!(
        html.matches("<div class=\"dotrow\" data-server=").count(),
        2,
        "{html}"
    );
    // (minijinja escapes `/` too: `&#x2f;`, which the browser reads as `/`.)
    assert!(
        html.contains("href=\"quick&#x2f;a&#x2f;open.hgrm\""),
        "{html}"
    );
    assert!(html.contains("data-tip=\"a, 1000 conns @ 20000&#x2f;s, server CPU per request: 10.1 µs [9.90 µs–10.3 µs]\""), "{html}");
    // Each column's scale.
    assert!(
        html.contains("<div>server CPU per request, 0 to 15.3 µs</div>"),
        "{html}"
    );
    // The bar that turns servers on and off.
    assert!(html.contains("data-toggle=\"a\""), "{html}");
    // Nothing to fetch: no external script, style, font or image; the only URL is SVG's
    // namespace, which is a name, not a fetch.
    for bad in ["src=", "<link", "@import", "url(", "https://"] {
        assert!(
            !html.contains(bad),
            "the page names something to fetch: {bad}"
        );
    }
    assert_eq!(
        html.matches("http://").count(),
        html.matches("http://www.w3.org/2000/svg").count()
    );
}

#[test]
fn a_plot_that_cannot_be_read_is_said_so_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let rows = vec![row("a", "open", "1000 conns @ 20000/s", &[10.0, 10.2, 9.9])];
    let html = page(dir.path(), &rows);
    assert!(html.contains("<figure class=\"plot missing\"><figcaption>A plot (the plot plots&#x2f;quick-x.svg could not be read)"), "{html}");
    assert!(!html.contains("<p><figure"), "{html}");
}

#[test]
fn headings_become_ids() {
    assert_eq!(slug("quick: CPU per echo, 16 B"), "quick-cpu-per-echo-16-b");
    assert_eq!(slug("At a glance"), "at-a-glance");
}

#[test]
fn a_page_of_markdown_alone_has_no_bar() {
    let p = Page::comparison(
        "A",
        "B",
        "# B against A\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n",
    );
    let html = p.render().unwrap();
    assert!(
        html.contains("<title>ringside compare: B against A</title>"),
        "{html}"
    );
    assert!(html.contains("<td>1</td>"), "{html}");
    assert!(!html.contains("nav id=\"servers\""), "{html}");
}
