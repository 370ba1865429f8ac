//! The capacity suite's conclusion, from `capacity.json`: for each workload, the servers
//! whose capacity cannot be told from the reference's (its interval holds 1), the others by
//! band of their multiple of it, and those whose search found only a bound.
//!
//! It may call what `markdown` may.

use super::{and, bands, count, possessive};
use crate::record::capacity::Capacity;
use crate::report::cells::fmt_rate;

/// The paragraph of `lines` (capacity.json's), a sentence a workload; `None` without lines.
pub(crate) fn paragraph(lines: &[Capacity]) -> Option<String> {
    let mut workloads: Vec<&str> = Vec::new();
    for c in lines {
        if !workloads.contains(&c.workload.as_str()) {
            workloads.push(&c.workload);
        }
    }
    let sentences: Vec<String> = workloads
        .iter()
        .filter_map(|w| {
            workload(
                &lines
                    .iter()
                    .filter(|c| c.workload == *w)
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    (!sentences.is_empty()).then(|| sentences.join(" "))
}

/// One workload's sentence.
fn workload(lines: &[&Capacity]) -> Option<String> {
    let first = lines.first()?;
    let reference = &first.reference;
    let base = lines
        .iter()
        .find(|c| &c.server == reference && c.is_the_servers())
        .and_then(|c| c.capacity_per_sec);
    let quota = first
        .cpu_quota
        .map_or_else(String::new, |q| format!(" under a quota of {q} CPU"));
    let mut name = first.workload.clone();
    if let Some(c) = name.get_mut(..1) {
        c.make_ascii_uppercase();
    }
    let mut text = format!("{name} at {}{quota}", first.objective);
    let Some(base) = base else {
        let _ = std::fmt::Write::write_fmt(
            &mut text,
            format_args!(
                ": the reference, {reference}, found no capacity of its own, so no multiples."
            ),
        );
        return Some(text);
    };
    text.push_str(&format!(
        ", against {} capacity ({}/s): ",
        possessive(reference),
        fmt_rate(Some(base))
    ));
    let (mut same, mut apart, mut raw, mut bounds) = (vec![], vec![], vec![], vec![]);
    for c in lines.iter().filter(|c| &c.server != reference) {
        match (c.is_the_servers(), c.vs_reference) {
            (true, Some(r)) => match (c.vs_reference_low, c.vs_reference_high) {
                (Some(lo), Some(hi)) if lo <= 1.0 && 1.0 <= hi => same.push(c.server.clone()),
                (Some(_), Some(_)) => apart.push((c.server.clone(), r)),
                _ => raw.push((c.server.clone(), r)),
            },
            _ => bounds.push(format!("{} ({})", c.server, c.result)),
        }
    }
    let mut parts = Vec::new();
    if !same.is_empty() {
        parts.push(format!(
            "{} within their intervals of it ({})",
            count(same.len()),
            same.join(", ")
        ));
    }
    parts.extend(bands(&apart));
    if !raw.is_empty() {
        parts.push(format!(
            "one search each, no intervals, the multiples: {}",
            bands(&raw).join("; ")
        ));
    }
    text.push_str(&parts.join("; "));
    text.push('.');
    if !bounds.is_empty() {
        text.push_str(&format!(" A bound only: {}.", and(&bounds)));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(server: &str, cap: Option<f64>, result: &str) -> Capacity {
        Capacity {
            server: server.into(),
            workload: "echo".into(),
            objective: "p99=1ms".into(),
            result: result.into(),
            capacity_per_sec: cap,
            searches: 1,
            cpu_quota: Some(0.25),
            reference: "floor-epoll".into(),
            ..Capacity::default()
        }
    }

    #[test]
    fn capacity_names_every_server_once_with_its_multiple_or_its_bound() {
        let mut lines = vec![
            line("floor-epoll", Some(20_000.0), "capacity"),
            line("reactor", Some(29_000.0), "capacity"),
            line("tokio", Some(28_000.0), "capacity"),
            line("threads-process", Some(4_700.0), "capacity"),
            line("monoio", Some(9_000.0), "unconfirmed"),
        ];
        crate::record::capacity::rank(&mut lines);
        let p = paragraph(&lines).unwrap();
        assert!(
            p.starts_with("Echo at p99=1ms under a quota of 0.25 CPU, against floor-epoll's capacity (20.0k/s): "),
            "{p}"
        );
        assert!(p.contains("one search each, no intervals, the multiples: threads-process 0.23×; tokio and reactor 1.40–1.45×"), "{p}");
        assert!(p.ends_with("A bound only: monoio (unconfirmed)."), "{p}");
    }
}
