//! ARCHITECTURE.md's invariants that a reading of the source can check, checked: each
//! server crate depends on its own runtime only (`cargo metadata` for the host, offline), every `.rs`
//! file opens with a `//!` doc (as rust-analyzer's tidy test asks), unsafe code is fenced
//! where ARCHITECTURE.md says, no file includes another's by a `path` attribute, xtask's
//! modules import each other in layers and without a cycle, xtask prints to stdout only
//! through `report::stdout`, no xtask file is over
//! [`MAX_LINES`] long, and no function of xtask or loadgen is over [`MAX_FN_LINES`].
//!
//! Each check collects every violation and fails with the list, so one run names them
//! all.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

mod functions;
mod imports;
mod runtimes;

use imports::{LAYERS, xtask_imports};
use runtimes::{ALLOWED, RUNTIMES, dependency_graph, reachable};

/// The workspace root (xtask sits at `<root>/xtask`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent directory")
        .to_path_buf()
}

/// Every `.rs` file of the workspace's own code (the crates, xtask, benches, the fuzz
/// targets), as paths relative to the root; build output and hidden directories left out.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut files = Vec::new();
    for top in ["crates", "xtask", "benches", "fuzz"] {
        walk(&root.join(top), &mut files);
    }
    let mut files: Vec<PathBuf> = files
        .into_iter()
        .map(|p| p.strip_prefix(&root).map(Path::to_path_buf).unwrap_or(p))
        .collect();
    files.sort();
    assert!(
        files.len() > 100,
        "found only {} .rs files under {}: the walk is broken",
        files.len(),
        root.display()
    );
    files
}

fn read(rel: &Path) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

fn fail_with(what: &str, bad: &[String]) {
    assert!(bad.is_empty(), "{what}:\n  {}", bad.join("\n  "));
}

#[test]
fn every_source_file_opens_with_a_module_doc() {
    let bad: Vec<String> = rust_files()
        .into_iter()
        .filter(|f| {
            let text = read(f);
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|f| f.display().to_string())
        .collect();
    fail_with(
        "these files do not open with a `//!` line saying what they are for",
        &bad,
    );
}

/// The start of a `path` attribute, spelled in two pieces so that a plain grep for it
/// (`grep -rn '#\[path' crates xtask`, as a reviewer would run) does not find this file.
const PATH_ATTRIBUTE: &str = concat!("#", "[path");

#[test]
fn no_file_includes_another_by_path() {
    let bad: Vec<String> = rust_files()
        .into_iter()
        .flat_map(|f| {
            read(&f)
                .lines()
                .enumerate()
                .filter(|(_, l)| l.trim_start().starts_with(PATH_ATTRIBUTE))
                .map(|(i, l)| format!("{}:{}: {}", f.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    fail_with(
        "`path` attribute includes (share the code through a crate instead)",
        &bad,
    );
}

/// `println!` and `print!`, spelled in two pieces so that this file is not among the hits.
const PRINT_MACROS: [&str; 2] = [concat!("println", "!("), concat!("print", "!(")];

#[test]
fn xtask_prints_to_stdout_only_through_report_stdout() {
    let bad: Vec<String> = rust_files()
        .into_iter()
        .filter(|f| f.starts_with("xtask/src") && !f.ends_with("tests.rs"))
        .flat_map(|f| {
            read(&f)
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim_start().starts_with("//"))
                .filter(|(_, l)| {
                    PRINT_MACROS.iter().any(|m| {
                        l.match_indices(m)
                            .any(|(at, _)| !l[..at].ends_with('e') && !l[..at].ends_with('_'))
                    })
                })
                .map(|(i, l)| format!("{}:{}: {}", f.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    fail_with(
        "stdout written with the print macros, which panic once a reader such as `head` has \
         gone (use `report::stdout::line` or `put`)",
        &bad,
    );
}
#[test]
fn each_server_depends_only_on_its_own_runtime() {
    let graph = dependency_graph();
    let mut bad = Vec::new();
    for (krate, allowed) in ALLOWED {
        assert!(
            graph.contains_key(*krate),
            "no package {krate} in the workspace"
        );
        let deps = reachable(&graph, krate);
        for runtime in RUNTIMES {
            if deps.contains(*runtime) && !allowed.contains(runtime) {
                bad.push(format!(
                    "{krate} depends on {runtime} (cargo tree -p {krate})"
                ));
            }
        }
        // The allowance is not a dead letter: a server does use what it is allowed.
        if let Some(own) = allowed.first()
            && !deps.contains(*own)
        {
            bad.push(format!(
                "{krate} no longer depends on {own}: update this test"
            ));
        }
    }
    fail_with(
        "runtime crates where ARCHITECTURE.md says there are none",
        &bad,
    );
}

/// The crate roots (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`) of a crate.
fn crate_roots(krate: &str) -> Vec<PathBuf> {
    let dir = if krate == "xtask" {
        PathBuf::from("xtask")
    } else {
        Path::new("crates").join(krate)
    };
    let roots: Vec<PathBuf> = rust_files()
        .into_iter()
        .filter(|f| {
            f.strip_prefix(dir.join("src")).is_ok_and(|rel| {
                rel == Path::new("lib.rs")
                    || rel == Path::new("main.rs")
                    || rel.parent() == Some(Path::new("bin"))
            })
        })
        .collect();
    assert!(!roots.is_empty(), "{krate} has no crate root");
    roots
}

/// A directory, a subdirectory of it left out (fenced as a whole), and the `(file, item)`
/// places where `allow(unsafe_code)` may appear (`file` for a whole file).
type Fence = (
    &'static str,
    Option<&'static str>,
    &'static [(&'static str, &'static str)],
);

/// Where `allow(unsafe_code)` appears under `dir` (outside `except`): the file, and the
/// item it is on (`file` for an inner `#![allow]`).
fn unsafe_allowances(dir: &Path, except: Option<&Path>) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for f in rust_files() {
        if !f.starts_with(dir) || except.is_some_and(|e| f.starts_with(e)) {
            continue;
        }
        let text = read(&f);
        let lines: Vec<&str> = text.lines().collect();
        let file = f.file_name().unwrap().to_string_lossy().into_owned();
        for (i, line) in lines.iter().enumerate() {
            let line = line.trim_start();
            if line.starts_with("#![allow(unsafe_code)]") {
                found.push((file.clone(), "file".to_owned()));
            } else if line.starts_with("#[allow(unsafe_code)]") {
                let item = lines[i + 1..]
                    .iter()
                    .map(|l| l.trim())
                    .find(|l| !l.starts_with("#[") && !l.starts_with("//"))
                    .unwrap_or("");
                found.push((file.clone(), item.to_owned()));
            }
        }
    }
    found
}

#[test]
fn unsafe_code_is_fenced_where_the_architecture_says() {
    let mut bad = Vec::new();
    let has = |f: &Path, attr: &str| read(f).lines().any(|l| l.trim_start().starts_with(attr));
    for krate in [
        "proto",
        "service",
        "launch",
        "cpulist",
        "search",
        "loadgen",
        "conformance",
        "server-reactor",
        "server-tokio",
        "server-tokio-uring",
        "server-monoio",
        "server-compio",
        "server-smol",
    ] {
        for root in crate_roots(krate) {
            if !has(&root, "#![forbid(unsafe_code)]") {
                bad.push(format!("{}: no #![forbid(unsafe_code)]", root.display()));
            }
        }
    }
    for krate in [
        "server-threads",
        "server-floor",
        "server-fiber",
        "server-may",
        "server-glommio",
        "fiber",
        "xtask",
    ] {
        for root in crate_roots(krate) {
            // `forbid` is stricter still (a program of the crate that needs no fence).
            if !has(&root, "#![deny(unsafe_code)]") && !has(&root, "#![forbid(unsafe_code)]") {
                bad.push(format!("{}: no #![deny(unsafe_code)]", root.display()));
            }
        }
    }
    // Where each of those may allow it, and nowhere else.
    let fences: [Fence; 7] = [
        ("crates/server-threads", None, &[("fork.rs", "file")]),
        (
            "xtask/src",
            None,
            &[
                ("join.rs", "pub(super) fn on_exec("),
                ("perf_open.rs", "file"),
            ],
        ),
        ("crates/server-may", None, &[("coroutines.rs", "file")]),
        ("crates/server-glommio", None, &[("listener.rs", "file")]),
        ("crates/server-floor", None, &[("uring.rs", "file")]),
        (
            "crates/server-fiber",
            None,
            &[("serve.rs", "fn allow_migration(")],
        ),
        (
            "crates/fiber/src",
            Some("crates/fiber/src/sys"),
            &[
                ("lib.rs", "mod sys;"),
                ("runtime.rs", "pub unsafe fn work_stealing("),
            ],
        ),
    ];
    for (dir, except, allowed) in fences {
        let found = unsafe_allowances(Path::new(dir), except.map(Path::new));
        for (file, item) in &found {
            let ok = allowed
                .iter()
                .any(|(f, i)| f == file && (item == i || item.starts_with(i)));
            if !ok {
                bad.push(format!("{dir}: allow(unsafe_code) in {file} on `{item}`"));
            }
        }
        if found.len() != allowed.len() {
            bad.push(format!(
                "{dir}: expected allow(unsafe_code) exactly at {allowed:?}, found {found:?}"
            ));
        }
    }
    fail_with("unsafe code outside the fences ARCHITECTURE.md names", &bad);
}

/// The most lines an xtask file may have: past it, a file holds more than one concern.
const MAX_LINES: usize = 500;

#[test]
fn no_xtask_file_is_too_long() {
    let bad: Vec<String> = rust_files()
        .into_iter()
        .filter(|f| f.starts_with("xtask"))
        .filter_map(|f| {
            let n = read(&f).lines().count();
            (n > MAX_LINES).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    fail_with(
        &format!("xtask files over {MAX_LINES} lines (split them by concern)"),
        &bad,
    );
}

/// The most lines a function of xtask's or loadgen's `src/` may have, from its `fn` line
/// to its closing brace (STYLE.md: a step you can read on one screen, about 60 lines).
const MAX_FN_LINES: usize = 100;

/// The functions allowed to be longer, each with its reason: a table of constants or a
/// generated match, not a flow (a flow is split into named steps).
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[];

#[test]
fn no_function_in_xtask_or_loadgen_is_too_long() {
    let mut bad = Vec::new();
    let mut excused = Vec::new();
    for f in rust_files()
        .into_iter()
        .filter(|f| f.starts_with("xtask/src") || f.starts_with("crates/loadgen/src"))
    {
        let path = f.display().to_string();
        for func in functions::functions(&read(&f)) {
            if func.lines <= MAX_FN_LINES {
                continue;
            }
            if LONG_FUNCTIONS
                .iter()
                .any(|(p, name, _)| *p == path && *name == func.name)
            {
                excused.push((path.clone(), func.name));
                continue;
            }
            bad.push(format!(
                "{path}:{} fn {}: {} lines",
                func.line, func.name, func.lines
            ));
        }
    }
    // An exception outlives its reason when the function is split: drop it then.
    for (p, name, _) in LONG_FUNCTIONS {
        if !excused.iter().any(|(ep, en)| ep == p && en == name) {
            bad.push(format!(
                "{p} fn {name} is listed in LONG_FUNCTIONS but is not over {MAX_FN_LINES} lines"
            ));
        }
    }
    fail_with(
        &format!(
            "functions over {MAX_FN_LINES} lines (split them into named steps, or list a \
             table or a generated match in LONG_FUNCTIONS with its reason)"
        ),
        &bad,
    );
}

/// A layer's place in [`LAYERS`]; the tasks come after them all.
fn rank(unit: &str) -> usize {
    let top = unit.split("::").next().unwrap_or(unit);
    LAYERS
        .iter()
        .position(|l| *l == top)
        .unwrap_or(LAYERS.len())
}

#[test]
fn xtask_modules_use_only_what_is_below_them_and_no_cycle() {
    let graph = xtask_imports();
    assert!(
        graph
            .get("run::point")
            .is_some_and(|d| d.contains("run::outcome")),
        "the import reader found no import of run::outcome in run::point: it is broken"
    );
    let mut bad: Vec<String> = Vec::new();
    for (from, deps) in &graph {
        for to in deps.iter().filter(|to| rank(to) > rank(from)) {
            bad.push(format!("{from} uses {to}, which is above it"));
        }
    }
    // A depth-first walk: an edge back to a unit still on the path closes a cycle.
    fn walk<'a>(
        g: &'a BTreeMap<String, BTreeSet<String>>,
        at: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        bad: &mut Vec<String>,
    ) {
        if let Some(i) = path.iter().position(|p| *p == at) {
            bad.push(format!("a cycle: {} -> {at}", path[i..].join(" -> ")));
            return;
        }
        if !done.insert(at) {
            return;
        }
        path.push(at);
        for next in g.get(at).into_iter().flatten() {
            walk(g, next, path, done, bad);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for from in graph.keys() {
        walk(&graph, from, &mut Vec::new(), &mut done, &mut bad);
    }
    fail_with(
        "xtask modules that break its layers (plan, run, record, report; see ARCHITECTURE.md)",
        &bad,
    );
}
