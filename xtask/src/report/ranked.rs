//! Ranked dot plots: one point of a run, one row per server, sorted best first from the
//! top, the median a dot and its interval a bar, the kernel's floor marked. With fifteen or
//! so servers a line per server over two rates tangles; a ranked row per server reads at a
//! glance (where each server stands, which intervals overlap, how far above the floor).
//!
//! It may call nothing else of xtask.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// One server's row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dot {
    pub(crate) name: String,
    /// The median.
    pub(crate) value: f64,
    /// The interval of the median, when the point had repeats.
    pub(crate) interval: Option<(f64, f64)>,
    /// The load generator's limit, not the server's: drawn hollow.
    pub(crate) client_bound: bool,
    /// The kernel's floor (srv-floor): drawn grey, with a line down the plot at its median.
    pub(crate) floor: bool,
}

/// A ranked dot plot, ready to draw.
#[derive(Debug, Clone)]
pub(crate) struct Ranked {
    pub(crate) title: String,
    /// What the value axis measures.
    pub(crate) x_desc: String,
    /// The rows, in any order: [`draw`] sorts them.
    pub(crate) dots: Vec<Dot>,
    /// Rank the lowest value first (a cost), else the highest (a rate).
    pub(crate) lowest_first: bool,
}

const DOT: RGBColor = RGBColor(31, 119, 180);
const FLOOR: RGBColor = RGBColor(110, 110, 110);

/// The rows best first (the top of the plot), the rest of the order by name so that it
/// does not depend on the order the servers ran.
pub(crate) fn ranked(dots: &[Dot], lowest_first: bool) -> Vec<Dot> {
    let mut out: Vec<Dot> = dots
        .iter()
        .filter(|d| d.value.is_finite())
        .cloned()
        .collect();
    out.sort_by(|a, b| {
        let by = a.value.total_cmp(&b.value);
        let by = if lowest_first { by } else { by.reverse() };
        by.then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// The value axis: from zero to a little past the largest interval's end.
fn value_range(dots: &[Dot]) -> (f64, f64) {
    let hi = dots
        .iter()
        .map(|d| d.interval.map_or(d.value, |(_, h)| h.max(d.value)))
        .fold(0.0f64, f64::max);
    (0.0, if hi > 0.0 { hi * 1.08 } else { 1.0 })
}

/// A label of the value axis: `20k` past ten thousand, whole numbers whole.
fn value_label(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Draws `plot` into an SVG file at `path`; nothing when it has no row.
pub(crate) fn draw(plot: &Ranked, path: &Path) -> Result<()> {
    let err = |e: &dyn std::fmt::Debug| anyhow!("drawing {}: {e:?}", path.display());
    let dots = ranked(&plot.dots, plot.lowest_first);
    let n = dots.len();
    let (x0, x1) = value_range(&dots);
    // A row is 28 pixels: the plot grows with the servers rather than squeezing them; a
    // line under it says what a hollow dot is, when one is (the plot has no legend).
    let note = dots.iter().any(|d| d.client_bound);
    let height = (160 + 28 * n as u32).max(320);
    let root = SVGBackend::new(path, (960, height + if note { 24 } else { 0 })).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (area, under) = root.split_vertically(height);
    if note {
        under
            .draw(&Text::new(
                "hollow dot: client-bound (the load generator's limit, not the server's)",
                (16, 2),
                ("sans-serif", 14),
            ))
            .map_err(|e| err(&e))?;
    }
    // Row i (0 the best) is drawn at y = n - 1 - i, so the best is at the top.
    let mut chart = ChartBuilder::on(&area)
        .caption(&plot.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(200)
        .build_cartesian_2d(x0..x1, -0.5..(n as f64 - 0.5))
        .map_err(|e| err(&e))?;
    let names: Vec<String> = dots
        .iter()
        .map(|d| {
            if d.floor {
                format!("{} (floor)", d.name)
            } else {
                d.name.clone()
            }
        })
        .collect();
    let y_label = |y: &f64| {
        let i = n as f64 - 1.0 - y.round();
        let whole = (y - y.round()).abs() < 1e-6 && i >= 0.0;
        whole
            .then(|| names.get(i as usize).cloned())
            .flatten()
            .unwrap_or_default()
    };
    chart
        .configure_mesh()
        .x_desc(&plot.x_desc)
        .x_label_formatter(&|v: &f64| value_label(*v))
        .y_labels(n.max(1))
        .y_label_formatter(&y_label)
        .disable_y_mesh()
        .light_line_style(WHITE.mix(0.0))
        .label_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    draw_floors(&mut chart, &dots, n, &err)?;
    draw_rows(&mut chart, &dots, &err)?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A dashed line down the plot at each floor's median, so each row reads as a distance
/// above the kernel's floor.
fn draw_floors(
    chart: &mut Chart<'_, '_>,
    dots: &[Dot],
    n: usize,
    err: &dyn Fn(&dyn std::fmt::Debug) -> anyhow::Error,
) -> Result<()> {
    for d in dots.iter().filter(|d| d.floor) {
        chart
            .draw_series(DashedLineSeries::new(
                [(d.value, -0.5), (d.value, n as f64 - 0.5)],
                6,
                5,
                FLOOR.mix(0.6).stroke_width(1),
            ))
            .map_err(|e| err(&e))?;
    }
    Ok(())
}

/// Each row's bar (its interval) and dot (its median, hollow where client-bound).
fn draw_rows(
    chart: &mut Chart<'_, '_>,
    dots: &[Dot],
    err: &dyn Fn(&dyn std::fmt::Debug) -> anyhow::Error,
) -> Result<()> {
    let n = dots.len();
    for (i, d) in dots.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        let colour = if d.floor { FLOOR } else { DOT };
        if let Some((lo, hi)) = d.interval {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    [(lo, y), (hi, y)],
                    colour.stroke_width(3),
                )))
                .map_err(|e| err(&e))?;
        }
        let style = if d.client_bound {
            colour.stroke_width(2)
        } else {
            colour.filled()
        };
        chart
            .draw_series(std::iter::once(Circle::new((d.value, y), 5, style)))
            .map_err(|e| err(&e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(name: &str, value: f64, floor: bool) -> Dot {
        Dot {
            name: name.into(),
            value,
            interval: Some((value * 0.9, value * 1.1)),
            client_bound: false,
            floor,
        }
    }

    #[test]
    fn rows_rank_best_first_ties_by_name() {
        let dots = [
            dot("b", 2.0, false),
            dot("a", 2.0, false),
            dot("floor-epoll", 1.0, true),
            dot("c", 3.0, false),
            dot("nan", f64::NAN, false),
        ];
        let names = |v: Vec<Dot>| v.into_iter().map(|d| d.name).collect::<Vec<_>>();
        assert_eq!(names(ranked(&dots, true)), ["floor-epoll", "a", "b", "c"]);
        assert_eq!(names(ranked(&dots, false)), ["c", "a", "b", "floor-epoll"]);
    }

    #[test]
    fn draws_an_svg_with_every_row_named() {
        let dir = std::env::temp_dir().join(format!("xtask-ranked-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.svg");
        let mut dots: Vec<Dot> = (0..16)
            .map(|i| dot(&format!("server-{i}"), 10.0 + f64::from(i), false))
            .collect();
        dots.push(dot("floor-uring", 6.0, true));
        dots[3].client_bound = true;
        dots[4].interval = None;
        let plot = Ranked {
            title: "CPU per echo".into(),
            x_desc: "µs".into(),
            dots,
            lowest_first: true,
        };
        draw(&plot, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        for i in 0..16 {
            assert!(
                svg.contains(&format!("\nserver-{i}\n")),
                "server-{i} unnamed"
            );
        }
        assert!(svg.contains("floor-uring (floor)"));
        assert!(svg.contains("hollow dot: client-bound"));
        assert_eq!(value_label(20_000.0), "20k");
        assert_eq!(value_label(5.0), "5");
        assert_eq!(value_label(2.5), "2.5");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
