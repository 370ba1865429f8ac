//! `compare`'s lines on the anatomy of a request: for each point where B costs more CPU per
//! request, what changed in the counts (`report::anatomy`).
//!
//! It may call what `compare` may.

use std::fmt::Write as _;

use crate::record::row::Row;
use crate::record::verdict::Verdict;

/// For each point where B's CPU per request is higher than A's (its verdict finds a
/// difference), what changed in the anatomy of a request (`report::anatomy`).
pub(super) fn changes(
    out: &mut String,
    a: &[Row],
    b: &[Row],
    verdicts: &[Option<[Option<Verdict>; 4]>],
) {
    let lines: Vec<String> = b
        .iter()
        .zip(verdicts)
        .filter_map(|(rb, v)| {
            let cpu = v.as_ref()?[2]
                .as_ref()
                .filter(|c| c.differs && c.ratio > 1.0)?;
            let ra = a
                .iter()
                .find(|r| r.suite == rb.suite && r.server == rb.server && r.point == rb.point)?;
            crate::report::anatomy::changed(ra, rb, cpu.ratio)
        })
        .collect();
    if !lines.is_empty() {
        let _ = writeln!(
            out,
            "\n**What changed in the anatomy of a request** where B costs more CPU per request:\n"
        );
        for l in lines {
            let _ = writeln!(out, "- {l}");
        }
    }
}
