//! What each server crate may depend on: the runtime crates, each server's own, and the
//! dependency graph from `cargo metadata` that tidy's runtime check walks.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use super::root;

/// The runtime crates: a server crate may reach (through any chain of normal
/// dependencies) only the ones its runtime is made of.
pub(crate) const RUNTIMES: &[&str] = &[
    "tokio",
    "tokio-uring",
    "mio",
    "io-uring",
    "fiber",
    "corosensei",
    "monoio",
    "compio",
    "glommio",
    "smol",
    "async-io",
    "async-executor",
    "may",
    "generator",
    "may_queue",
];

/// Each crate the servers share, and each server crate, with the runtime crates it may
/// depend on.
pub(crate) const ALLOWED: &[(&str, &[&str])] = &[
    ("proto", &[]),
    ("service", &[]),
    ("launch", &[]),
    ("server-threads", &[]),
    ("server-reactor", &["mio"]),
    ("server-tokio", &["tokio", "mio"]),
    (
        "server-tokio-uring",
        &["tokio-uring", "tokio", "io-uring", "mio"],
    ),
    ("server-fiber", &["fiber", "io-uring", "corosensei"]),
    ("server-floor", &["io-uring"]),
    ("server-monoio", &["monoio", "io-uring"]),
    ("server-compio", &["compio", "io-uring"]),
    ("server-glommio", &["glommio"]),
    ("server-smol", &["smol", "async-io", "async-executor"]),
    ("server-may", &["may", "generator", "may_queue"]),
];

/// The host's target triple, as `rustc -vV` names it.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap_or_else(|| panic!("no `host:` line in rustc -vV:\n{text}"))
        .to_owned()
}

/// Package name to the names of its normal (not dev, not build) dependencies, from
/// `cargo metadata` of the workspace, offline, resolved for the host. Without
/// `--filter-platform` cargo needs the manifests of every platform's dependencies (the
/// Windows ones too), which a build on Linux never downloads: on a fresh machine
/// `--offline` would fail. The servers are built for the host, so its graph is the one
/// the invariant is about.
pub(crate) fn dependency_graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host_triple()])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve nodes") {
        let name = names[node["id"].as_str().unwrap()].to_owned();
        let deps = graph.entry(name).or_default();
        for dep in node["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            if normal {
                deps.insert(names[dep["pkg"].as_str().unwrap()].to_owned());
            }
        }
    }
    graph
}

pub(crate) fn reachable(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_owned()];
    while let Some(pkg) = todo.pop() {
        for dep in graph.get(&pkg).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen
}
