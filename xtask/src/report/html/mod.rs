//! `report.html`: the run's report as one self-contained page, beside `report.md`. Its text is
//! report.md's, rendered from the Markdown (so every section, table and verdict is written once,
//! by `markdown`), in the page's template (`page.html`, minijinja) with a header of the run, a
//! bar that turns servers on and off, every table sortable by any column, every plot inline, and
//! per suite a figure of each point (`dots`): a row per server, its median and interval for
//! throughput, CPU per request and p99, the values on hover, and a link to the point's raw
//! histogram. Nothing is fetched: the script (`page.js`, ours) and the style are inline.
//!
//! It may call the record layer (rows, meta) and the report layer's `cells` and `markdown`.

mod dots;

use std::path::Path;

use anyhow::{Context, Result};
use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use serde::Serialize;

use crate::record::meta::{Meta, mitigations_line};
use crate::record::row::{DISTURBED_PCT, Row, STEAL_PCT, servers};
use crate::record::run_dir::write_whole;
use crate::report::markdown::Input;

const TEMPLATE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// One fact of the header: its name and its text.
#[derive(Debug, Clone, Serialize)]
struct Fact {
    name: &'static str,
    text: String,
}

/// What the page shows.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Page {
    title: String,
    /// The conclusion's paragraphs, under the title.
    conclusion: Vec<String>,
    facts: Vec<Fact>,
    warnings: Vec<String>,
    /// The servers the bar turns on and off.
    servers: Vec<String>,
    /// Each suite's figures of its points.
    figures: Vec<dots::SuiteDots>,
    /// report.md as HTML, its plots inline.
    body: String,
}

impl Page {
    /// The page of a run: its header from `input.meta`, its body from `markdown` (report.md's
    /// text), the plots it names read from `dir`.
    pub(crate) fn of_run(dir: &Path, input: &Input<'_>, markdown: &str) -> Page {
        let names: Vec<&str> = input.suites.iter().map(|s| s.name()).collect();
        Page {
            title: format!("ringside bench: {}", names.join(", ")),
            conclusion: crate::report::markdown::conclusion(input),
            facts: facts(input),
            warnings: warnings(input.meta, input.rows),
            servers: servers(input.rows),
            figures: dots::of_rows(input.rows),
            body: body(markdown, Some(dir), true),
        }
    }

    /// A page of Markdown alone (the search suite's report, a comparison): its title, its
    /// text, its plots read from `dir`.
    pub(crate) fn of_markdown(title: &str, markdown: &str, dir: Option<&Path>) -> Page {
        Page {
            title: title.to_string(),
            conclusion: Vec::new(),
            facts: Vec::new(),
            warnings: Vec::new(),
            servers: Vec::new(),
            figures: Vec::new(),
            body: body(markdown, dir, false),
        }
    }

    /// The page of `cargo xtask compare --out`.
    pub(crate) fn comparison(a: &str, b: &str, markdown: &str) -> Page {
        Page::of_markdown(
            &format!("ringside compare: {b} against {a}"),
            markdown,
            None,
        )
    }

    /// The page as HTML.
    pub(crate) fn render(&self) -> Result<String> {
        let mut env = minijinja::Environment::new();
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        env.add_template("page.html", TEMPLATE)
            .context("the page's template")?;
        let page = env
            .get_template("page.html")
            .context("the page's template")?;
        page.render(minijinja::context! {
            page => minijinja::value::Serde(self),
            script => minijinja::Value::from_safe_string(SCRIPT.to_string()),
            style => minijinja::Value::from_safe_string(STYLE.to_string()),
            body => minijinja::Value::from_safe_string(self.body.clone()),
        })
        .context("rendering report.html")
    }
}

/// Writes `page` to `path`, whole or not at all.
pub(crate) fn write_page(path: &Path, page: &Page) -> Result<()> {
    write_whole(path, page.render()?.as_bytes())
}

/// Writes `report.html` of the run in `dir`.
pub(crate) fn write_report(dir: &Path, input: &Input<'_>, markdown: &str) -> Result<()> {
    write_page(
        &dir.join("report.html"),
        &Page::of_run(dir, input, markdown),
    )
}

/// The header's facts: the machine, the run, the commit, the command, the placement, how CPU
/// was counted.
fn facts(input: &Input<'_>) -> Vec<Fact> {
    let m = input.meta;
    let s = &m.settings;
    let quota = s["server_cpu_quota"].as_f64();
    let mut f = vec![
        Fact {
            name: "machine",
            text: format!(
                "{} ({} CPUs, Linux {})",
                m.cpu_model.as_deref().unwrap_or("an unknown CPU"),
                m.cores,
                m.kernel.as_deref().unwrap_or("?")
            ),
        },
        Fact {
            name: "run",
            text: format!(
                "{}, started {}{}",
                m.run_id,
                m.started,
                m.finished
                    .as_deref()
                    .map_or_else(String::new, |t| format!(", finished {t}"))
            ),
        },
        Fact {
            name: "commit",
            text: format!(
                "{}{}",
                m.commit.as_deref().map_or("?", |c| &c[..c.len().min(12)]),
                if m.dirty {
                    " with uncommitted changes"
                } else {
                    ""
                }
            ),
        },
        Fact {
            name: "command",
            text: m.command.clone(),
        },
        Fact {
            name: "placement",
            text: format!(
                "server on CPU {} with {} worker(s), load generator on CPU {}{}",
                input.server_cpus,
                input.workers,
                input.client_cpus,
                s["placement"]["topology"]
                    .as_str()
                    .map_or_else(String::new, |t| format!("; {t}"))
            ),
        },
        Fact {
            name: "accounting",
            text: crate::report::markdown::accounting_line(m)
                + &quota.map_or_else(String::new, |q| {
                    format!("; under a CPU quota of {q} CPU (cgroup)")
                }),
        },
        Fact {
            name: "mitigations",
            text: mitigations_line(&m.mitigations),
        },
        Fact {
            name: "load average",
            text: format!(
                "{} at the start, {} at the end; steal over the run {}",
                m.load_average_start.as_deref().unwrap_or("?"),
                m.load_average_end.as_deref().unwrap_or("?"),
                m.steal_pct
                    .map_or_else(|| "not read".into(), |s| format!("{s:.1}%"))
            ),
        },
    ];
    if let Some(seed) = m.order_seed {
        f.push(Fact {
            name: "order seed",
            text: seed.to_string(),
        });
    }
    f
}

/// Percent of the machine's CPU time stolen over the whole run above which the page warns: a
/// note on the host, not a mark (a point is ‡ by its own steal, `Row::disturbed`).
const RUN_STEAL_PCT: f64 = 2.0;

/// What a reader must know before trusting a figure of the run.
fn warnings(m: &Meta, rows: &[Row]) -> Vec<String> {
    let mut w = Vec::new();
    if m.interrupted {
        w.push(
            "The run was interrupted (Ctrl-C): what is here is what was measured before.".into(),
        );
    }
    if m.dirty {
        w.push(
            "The checkout had uncommitted changes: the commit alone does not say what ran.".into(),
        );
    }
    if m.steal_pct.is_some_and(|s| s > RUN_STEAL_PCT) {
        w.push(format!(
            "The hypervisor stole over {RUN_STEAL_PCT}% of the machine's CPU time during the run."
        ));
    }
    let count = |f: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| f(r)).count();
    let failed = count(&|r| r.ok < r.repeats);
    if failed > 0 {
        w.push(format!(
            "{failed} point(s) failed in some repeat: see \"Failures and notes\"."
        ));
    }
    let disturbed = count(&|r| r.disturbed());
    if disturbed > 0 {
        w.push(format!(
            "{disturbed} point(s) ‡ (not judged): something else used over {DISTURBED_PCT}% of the server's CPU, or the hypervisor stole over {STEAL_PCT}% of it in the median repeat."
        ));
    }
    let bound = count(&|r| r.client_bound);
    if bound > 0 {
        w.push(format!(
            "{bound} point(s) †: client-bound (the load generator's CPU was saturated)."
        ));
    }
    w
}

/// A heading's text as an id: lower case, letters and digits, words joined by `-`.
fn slug(text: &str) -> String {
    let mut s = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    s.trim_end_matches('-').to_string()
}

/// report.md's text as HTML: each `##` section in a `<section>` with its heading's id, every
/// table in a scrolling box, and each plot it names (`![caption](file.svg)`) read from `dir`
/// and put inline (a plot that cannot be read is said so in its place). `skip_head` leaves
/// out what comes before the first `##` (the title and header the page's own header
/// replaces).
fn body(markdown: &str, dir: Option<&Path>, skip_head: bool) -> String {
    let mut events: Vec<Event<'_>> = Vec::new();
    let mut in_section = false;
    let mut skipping = skip_head;
    let mut image: Option<(String, String)> = None;
    let mut drop_paragraph_end = false;
    let mut heading: Option<Vec<Event<'_>>> = None;
    for e in Parser::new_ext(markdown, Options::ENABLE_TABLES) {
        match e {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H2,
                ..
            }) => {
                skipping = false;
                heading = Some(Vec::new());
            }
            Event::End(TagEnd::Heading(HeadingLevel::H2)) => {
                let inner = heading.take().unwrap_or_default();
                let text: String = inner
                    .iter()
                    .filter_map(|e| match e {
                        Event::Text(t) | Event::Code(t) => Some(t.to_string()),
                        _ => None,
                    })
                    .collect();
                if in_section {
                    events.push(Event::Html("</section>\n".into()));
                }
                in_section = true;
                events.push(Event::Html(
                    format!("<section id=\"{}\">\n<h2>", slug(&text)).into(),
                ));
                events.extend(inner);
                events.push(Event::Html("</h2>\n".into()));
            }
            _ if skipping => {}
            e if heading.is_some() => heading.as_mut().map_or((), |h| h.push(e)),
            Event::Start(Tag::Image { dest_url, .. }) => {
                image = Some((dest_url.to_string(), String::new()));
            }
            Event::Text(t) if image.is_some() => {
                if let Some((_, alt)) = image.as_mut() {
                    alt.push_str(&t);
                }
            }
            Event::End(TagEnd::Image) => {
                if let Some((file, caption)) = image.take() {
                    // A plot alone in its paragraph: the figure replaces the paragraph (a
                    // `<figure>` may not sit in a `<p>`).
                    if matches!(events.last(), Some(Event::Start(Tag::Paragraph))) {
                        events.pop();
                        drop_paragraph_end = true;
                    }
                    events.push(Event::Html(figure(dir, &file, &caption).into()));
                }
            }
            Event::End(TagEnd::Paragraph) if drop_paragraph_end => drop_paragraph_end = false,
            _ if image.is_some() => {}
            Event::Start(Tag::Table(a)) => {
                events.push(Event::Html("<div class=\"scroll\">".into()));
                events.push(Event::Start(Tag::Table(a)));
            }
            Event::End(TagEnd::Table) => {
                events.push(Event::End(TagEnd::Table));
                events.push(Event::Html("</div>\n".into()));
            }
            e => events.push(e),
        }
    }
    if in_section {
        events.push(Event::Html(CowStr::from("</section>\n")));
    }
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    html
}

/// A plot inline: the SVG file `file` of `dir`, without its XML declaration, in a `<figure>`
/// with its caption.
fn figure(dir: Option<&Path>, file: &str, caption: &str) -> String {
    let caption = minijinja::HtmlEscape(caption).to_string();
    let svg = dir
        .filter(|_| !file.contains("..") && file.ends_with(".svg"))
        .and_then(|d| std::fs::read_to_string(d.join(file)).ok())
        .and_then(|t| t.find("<svg").map(|i| t[i..].to_string()));
    match svg {
        Some(svg) => {
            format!("<figure class=\"plot\">{svg}<figcaption>{caption}</figcaption></figure>\n")
        }
        None => format!(
            "<figure class=\"plot missing\"><figcaption>{caption} (the plot {} could not be read)</figcaption></figure>\n",
            minijinja::HtmlEscape(file)
        ),
    }
}

#[cfg(test)]
mod tests;
