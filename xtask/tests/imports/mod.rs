//! How xtask's modules use each other, read from its source for tidy's layer check: each
//! file's module path, the unit a module belongs to, and the units each one uses, from its
//! `crate::` paths (in `use` items and inline) and the paths through the child modules it
//! declares.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{read, rust_files};

/// xtask's layers in the order a run flows through them, which is the bottom of the stack
/// first: a module may use its own layer and the layers before it, never one after it (it
/// would reach up); the tasks (`main.rs`, `bench`, `crash`, `micro`) sit on top and may use
/// them all.
pub(crate) const LAYERS: [&str; 4] = ["plan", "run", "record", "report"];

/// The module path of each file of xtask/src: `run/point.rs` is `run::point`,
/// `run/redis/mod.rs` is `run::redis`, `main.rs` is the root (empty).
fn xtask_modules() -> Vec<(PathBuf, Vec<String>)> {
    let src = Path::new("xtask/src");
    rust_files()
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).ok()?.with_extension("");
            let mut path: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into()).collect();
            if matches!(path.last().map(String::as_str), Some("mod" | "main")) {
                path.pop();
            }
            Some((f, path))
        })
        .collect()
}

/// The unit the cycle check works on: in a layer, a folder or file under it
/// (`run::point`, `report::markdown`), or the layer's own `mod.rs` (`run`); elsewhere, a
/// top-level module (`bench`), or `main` for the root. A folder's files and its `mod.rs` are
/// one unit, as a parent module and its children are.
fn unit(path: &[String]) -> String {
    let depth = if path.first().is_some_and(|p| LAYERS.contains(&p.as_str())) {
        2
    } else {
        1
    };
    let unit = path[..path.len().min(depth)].join("::");
    if unit.is_empty() { "main".into() } else { unit }
}

/// The paths a use tree starting at `text` names, as segments: `run::{cpus, point::X}` gives
/// `run::cpus` and `run::point::X`.
fn use_paths(text: &str) -> Vec<Vec<String>> {
    fn tree(s: &[u8], i: &mut usize) -> Vec<Vec<String>> {
        let mut segs: Vec<String> = Vec::new();
        loop {
            while *i < s.len() && s[*i].is_ascii_whitespace() {
                *i += 1;
            }
            if s.get(*i) == Some(&b'{') {
                *i += 1;
                let mut out = Vec::new();
                while *i < s.len() && s[*i] != b'}' {
                    for sub in tree(s, i) {
                        out.push(segs.iter().cloned().chain(sub).collect());
                    }
                    while *i < s.len() && matches!(s[*i], b',' | b' ' | b'\n' | b'\t') {
                        *i += 1;
                    }
                }
                *i += 1;
                return out;
            }
            let start = *i;
            while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
                *i += 1;
            }
            match std::str::from_utf8(&s[start..*i]).unwrap_or("") {
                "" | "self" => break,
                ident => segs.push(ident.to_owned()),
            }
            if !s[*i..].starts_with(b"::") {
                break;
            }
            *i += 2;
        }
        vec![segs]
    }
    tree(text.as_bytes(), &mut 0)
}

/// Unit to the units it uses, read from each file's `crate::` paths (in `use` items and
/// inline) and its paths through the child modules it declares (`mod x;` then `x::...`).
pub(crate) fn xtask_imports() -> BTreeMap<String, BTreeSet<String>> {
    let modules = xtask_modules();
    let known: BTreeSet<&[String]> = modules.iter().map(|(_, p)| p.as_slice()).collect();
    // The unit of a path's longest prefix that is a module.
    let target = |segs: &[String]| {
        let n = (1..=segs.len())
            .rev()
            .find(|&n| known.contains(&segs[..n]))?;
        Some(unit(&segs[..n]))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, path) in &modules {
        let from = unit(path);
        // Comments say what a module may call; only code counts.
        let code: String = read(file)
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut found = Vec::new();
        for (at, _) in code.match_indices("crate::") {
            found.extend(use_paths(&code[at + "crate::".len()..]));
        }
        for line in code.lines() {
            let Some(child) = line
                .trim()
                .strip_prefix("mod ")
                .or_else(|| line.trim().strip_prefix("pub(crate) mod "))
            else {
                continue;
            };
            let Some(child) = child.strip_suffix(';') else {
                continue;
            };
            let prefix = format!("{child}::");
            for (at, _) in code.match_indices(&prefix) {
                let before = code[..at].chars().next_back().unwrap_or(' ');
                if !(before.is_alphanumeric() || before == '_' || before == ':') {
                    for p in use_paths(&code[at..]) {
                        found.push(path.iter().cloned().chain(p).collect());
                    }
                }
            }
        }
        let deps = graph.entry(from.clone()).or_default();
        for to in found.iter().filter_map(|p| target(p)) {
            if to != from {
                deps.insert(to);
            }
        }
    }
    graph
}
