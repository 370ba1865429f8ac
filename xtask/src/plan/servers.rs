//! The servers the bench can run, and how they are built.
//!
//! A *variant* is a server binary plus flags, written `NAME[+FLAG[=VALUE]]...`: `threads`,
//! `tokio-per-core`, `fiber+completer`, `fiber+completer+ring-flags=sqpoll`. Each `+FLAG`
//! becomes `--FLAG` (and `=VALUE` its value) on the server's command line, so runtime options
//! can be compared side by side without a table entry for each combination. One pseudo-flag
//! is the bench's own: `+name=LABEL` passes nothing to the server and names the variant
//! `LABEL` in the run, so that one binary can run twice under two names
//! (`--servers reactor,reactor+name=again`: an A/A run, whose every comparison must come out
//! `~`). The known names
//! come from the conformance suite's server list (`conformance::server_list!`, the entries
//! with a `bench` name), so the bench runs what the suite tests; any other `srv-<name>`
//! binary of the workspace is picked up as `<name>`. Beside ours, the peers (servers of
//! someone else's, which the run layer starts and stops) are listed here as [`PeerEntry`]s.
//! And any program at all joins as `ext:NAME=COMMAND` (an *outside server*, [`EXT`]): the
//! command line of a server that speaks a ringside protocol, with `{addr}`, `{host}`,
//! `{port}`, `{workers}`, `{cpus}` and `{proto}` filled in by the run layer
//! (`run::server`), which starts it as it starts ours.
//!
//! It may call the plan layer's `suites`. (Finding what this checkout builds, and building
//! it, is `run::build`.)

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::plan::suites::{Suite, Workload};

/// A known variant: its name, binary, built-in flags, and what it is, for the report.
#[derive(Debug, Clone, Copy)]
struct Known {
    name: &'static str,
    binary: &'static str,
    flags: &'static [&'static str],
    about: &'static str,
    /// Run when `--servers` is not given.
    default: bool,
    /// What the conformance list says it does not serve (`EchoOnly`, `NoChat`, `NoKv`,
    /// `NoHttp`, ...): it sits out the points that need it.
    spec: &'static conformance::ServerSpec,
}

impl Known {
    /// Whether `v` is this entry, perhaps with `+flags` after its own.
    fn is_base_of(&self, v: &Variant) -> bool {
        v.binary == self.binary
            && v.flags.len() >= self.flags.len()
            && self.flags.iter().zip(&v.flags).all(|(a, b)| a == b)
    }
}

/// The known variants: the entries of the conformance suite's one server list that have
/// a bench name, in the list's order, so that a server is added (and tested) in one place.
fn known() -> impl Iterator<Item = Known> {
    conformance::SERVERS.iter().filter_map(|spec| {
        let bench = spec.bench?;
        Some(Known {
            name: bench.name,
            binary: spec.bin,
            flags: spec.args,
            about: bench.about,
            default: bench.default,
            spec,
        })
    })
}

/// A server as the bench runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Variant {
    /// As written on the command line, e.g. `fiber+completer`.
    pub(crate) name: String,
    pub(crate) binary: String,
    /// Flags after the common ones.
    pub(crate) flags: Vec<String>,
    pub(crate) about: String,
    /// An outside server's command line, its placeholders unfilled (`ext:NAME=COMMAND`);
    /// `None` for ours and the peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) command: Option<String>,
}

/// How `--servers` names an outside server: `ext:NAME=COMMAND`.
pub(crate) const EXT: &str = "ext:";

/// The protocols an outside server is checked at and run at: those with wire checks
/// (`conformance::wire`). It sits out chat points, and echo points with compute, which
/// its command line cannot be told of.
pub(crate) const EXT_PROTOS: [&str; 3] = ["echo", "kv", "http"];

/// The outside server of `spec`, `ext:NAME=COMMAND`.
pub(crate) fn ext_variant(spec: &str) -> Result<Variant> {
    let rest = spec.strip_prefix(EXT).unwrap_or(spec);
    let Some((name, command)) = rest.split_once('=') else {
        bail!(
            "`{spec}`: an outside server is written ext:NAME=COMMAND, as in 'ext:py=python3 echo.py {{addr}}'"
        );
    };
    let name = label(spec, Some(name.trim()))?;
    let command = command.trim();
    if command.is_empty() {
        bail!("`{spec}`: the command after `=` is empty");
    }
    Ok(Variant {
        binary: format!("{EXT}{name}"),
        name,
        flags: Vec::new(),
        about: format!("outside server: `{command}`"),
        command: Some(command.to_string()),
    })
}

impl Variant {
    /// Whether it is an outside server (`ext:NAME=COMMAND`).
    pub(crate) fn is_ext(&self) -> bool {
        self.command.is_some()
    }

    /// Whether the server, one of ours, serves `workload`: one whose conformance entry lacks
    /// what the workload needs sits it out (srv-floor runs plain echo and idle points only;
    /// srv-go `--model poll` no chat or http; srv-threads' process mode no kv). (A peer serves
    /// its protocol only: see [`Inventory::serves`].)
    pub(crate) fn serves(&self, workload: Workload) -> bool {
        // The one-owner store is a kv design; the flag means nothing elsewhere.
        if self.flags.iter().any(|f| f == "--kv-owner") {
            return workload.proto() == "kv";
        }
        if self.echo_only_flag().is_some() && workload.proto() != "echo" {
            return false;
        }
        self.lacks(workload).is_none()
    }

    /// The flag of its own that only the echo service takes (`+compute-us=N`, N > 0: kv,
    /// http and chat ignore it), if it has one: a point of another protocol would measure
    /// it under a name that says otherwise, so it sits those points out.
    pub(crate) fn echo_only_flag(&self) -> Option<&'static str> {
        let at = self.flags.iter().position(|f| f == "--compute-us")?;
        let value = self.flags.get(at + 1).map_or("", String::as_str);
        (value.parse::<u64>() != Ok(0)).then_some("--compute-us")
    }

    /// What of `workload` the server does not serve, by the conformance list's limits of
    /// its entry (or of any entry its binary and flags begin with), or `None` when it serves
    /// it.
    pub(crate) fn lacks(&self, workload: Workload) -> Option<conformance::Need> {
        use conformance::Need;
        let need = match workload.proto() {
            "chat" => Need::Chat,
            "kv" => Need::Kv,
            "http" => Need::Http,
            _ if workload.compute_us() > 0 => Need::Compute,
            _ => return None,
        };
        if self.is_ext() {
            return (!EXT_PROTOS.contains(&workload.proto()) || need == Need::Compute)
                .then_some(need);
        }
        // Echo-only is a property of the binary (srv-floor refuses the rest whatever its
        // flags); the other limits belong to the entry's flags (`--model poll`).
        let lacking = known().any(|k| {
            (k.is_base_of(self) || k.spec.limits.contains(&conformance::Limit::EchoOnly))
                && k.binary == self.binary
                && !k.spec.serves(need)
        });
        lacking.then_some(need)
    }
}

/// A peer as the plan sees it: a server of someone else's that runs beside ours at one
/// protocol's points (`run::peer::Peer::entry` makes it).
#[derive(Debug, Clone)]
pub(crate) struct PeerEntry {
    /// Its name in `--servers`.
    pub(crate) name: &'static str,
    /// Its program, the binary of its variant.
    pub(crate) program: &'static str,
    /// The `--proto` of the points it runs at.
    pub(crate) proto: &'static str,
    /// The suite whose default servers it joins.
    pub(crate) suite: Suite,
    /// Why it takes no `+flags`.
    pub(crate) fixed: &'static str,
    /// Why it cannot run here, or `None` when it can.
    pub(crate) missing: Option<String>,
    pub(crate) variant: Variant,
}

/// What this checkout can build (server binaries by package, and the Go peer), and the peers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inventory {
    /// Binary name to package name, for every `srv-*` and `loadgen` binary of the workspace.
    pub(crate) packages: BTreeMap<String, String>,
    pub(crate) target_dir: PathBuf,
    /// `peers/go`, when it is there.
    pub(crate) go_dir: Option<PathBuf>,
    /// `go version`, when `go` is on PATH.
    pub(crate) go_version: Option<String>,
    /// The peers, whether they are here or not.
    pub(crate) peers: Vec<PeerEntry>,
    /// Why this kernel cannot run the io_uring servers (`conformance::io_uring_usable`: the
    /// ring they ask for, the operations they submit), or `None` where it can.
    pub(crate) io_uring: Option<String>,
}

/// What the plan asks of the inventory: the peers, what each server serves and lacks, the
/// names `--servers` takes.
impl Inventory {
    /// Why `v` cannot run here: its binary cannot be built ([`Inventory::missing`]), or it
    /// needs io_uring and this kernel's will not do; `None` where it can.
    pub(crate) fn cannot_run(&self, v: &Variant) -> Option<String> {
        self.missing(&v.binary).or_else(|| {
            let uring = known()
                .any(|k| k.spec.limits.contains(&conformance::Limit::IoUring) && k.is_base_of(v));
            self.io_uring.clone().filter(|_| uring)
        })
    }

    /// The peer whose program is `binary`, if any.
    pub(crate) fn peer(&self, binary: &str) -> Option<&PeerEntry> {
        self.peers.iter().find(|p| p.program == binary)
    }

    /// Whether `v` serves `workload`: a peer its protocol only, ours as [`Variant::serves`]
    /// says.
    pub(crate) fn serves(&self, v: &Variant, workload: Workload) -> bool {
        match self.peer(&v.binary) {
            Some(p) => workload.proto() == p.proto,
            None => v.serves(workload),
        }
    }

    /// Why `binary` cannot be built (or, for a peer, run) here, or `None` when it can.
    pub(crate) fn missing(&self, binary: &str) -> Option<String> {
        if binary.starts_with(EXT) {
            return None;
        }
        if let Some(p) = self.peer(binary) {
            return p.missing.clone();
        }
        if binary == "srv-go" {
            return match (&self.go_dir, &self.go_version) {
                (None, _) => Some("peers/go is not in this checkout".into()),
                (Some(_), None) => Some("`go` is not on PATH (install Go to run it)".into()),
                (Some(_), Some(_)) => None,
            };
        }
        (!self.packages.contains_key(binary))
            .then(|| format!("no package of this workspace builds {binary} (yet)"))
    }

    /// Every variant name `--servers` accepts here: the known ones and any other `srv-*`.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = known().map(|k| k.name.to_string()).collect();
        for bin in self.packages.keys() {
            if let Some(name) = bin.strip_prefix("srv-")
                && !known().any(|k| k.binary == bin)
            {
                names.push(name.to_string());
            }
        }
        names.extend(self.peers.iter().map(|p| p.name.to_string()));
        names
    }

    /// The default servers that can be built here, and a line for each one that cannot.
    pub(crate) fn defaults(&self) -> (Vec<Variant>, Vec<String>) {
        let mut run = Vec::new();
        let mut skipped = Vec::new();
        for k in known().filter(|k| k.default) {
            let v = known_variant(&k, k.name);
            match self.cannot_run(&v) {
                None => run.push(v),
                Some(why) => skipped.push(format!("{}: {why}", k.name)),
            }
        }
        // A peer joins the defaults of its suite only (see bench).
        for name in self.names() {
            if !known().any(|k| k.name == name) && !self.peers.iter().any(|p| p.name == name) {
                run.push(self.parse(&name).expect("a discovered name parses"));
            }
        }
        (run, skipped)
    }

    /// Parses one `--servers` entry.
    pub(crate) fn parse(&self, spec: &str) -> Result<Variant> {
        if spec.starts_with(EXT) {
            return ext_variant(spec);
        }
        let mut parts = spec.split('+');
        let base = parts.next().unwrap_or_default();
        let mut v = if let Some(p) = self.peers.iter().find(|p| p.name == base) {
            if spec != base {
                bail!("`{spec}`: {base} takes no +flags ({})", p.fixed);
            }
            return Ok(p.variant.clone());
        } else if let Some(k) = known().find(|k| k.name == base) {
            known_variant(&k, spec)
        } else if self.packages.contains_key(&format!("srv-{base}")) {
            Variant {
                name: spec.to_string(),
                binary: format!("srv-{base}"),
                flags: Vec::new(),
                about: format!("srv-{base}"),
                command: None,
            }
        } else {
            bail!(
                "unknown server `{base}`; the servers are: {} (add runtime flags with +, as in \
                 fiber+completer; any other program as ext:NAME=COMMAND)",
                self.names().join(", ")
            );
        };
        for flag in parts {
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            if name == "name" {
                v.name = label(spec, value)?;
                continue;
            }
            let ok = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !name.starts_with('-');
            if !ok {
                bail!(
                    "`+{flag}` in `{spec}` is not a flag name (write +completer or +ring-flags=sqpoll)"
                );
            }
            v.flags.push(format!("--{name}"));
            if let Some(value) = value {
                v.flags.push(value.to_string());
            }
            v.about = format!(
                "{} --{name}{}",
                v.about,
                value.map(|x| format!(" {x}")).unwrap_or_default()
            );
        }
        Ok(v)
    }

    /// The entries of a `--servers` list: split at commas, except that an outside server's
    /// command runs on over a comma until what follows is a server name (`reactor`,
    /// `fiber+completer`) or another `ext:`, so that a command may hold commas.
    fn entries(&self, list: &str) -> Vec<String> {
        let names = self.names();
        let mut out: Vec<String> = Vec::new();
        for piece in list.split(',') {
            let base = piece.trim().split('+').next().unwrap_or_default();
            let starts_entry = piece.trim().starts_with(EXT) || names.iter().any(|n| n == base);
            match out.last_mut() {
                Some(last) if last.trim_start().starts_with(EXT) && !starts_entry => {
                    last.push(',');
                    last.push_str(piece);
                }
                _ => out.push(piece.to_string()),
            }
        }
        out
    }

    /// Parses `--servers`, a comma-separated list, and checks that each can be built here.
    pub(crate) fn select(&self, list: &str) -> Result<Vec<Variant>> {
        let mut out: Vec<Variant> = Vec::new();
        for spec in self
            .entries(list)
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        {
            let v = self.parse(spec)?;
            if let Some(why) = self.cannot_run(&v) {
                bail!("server `{spec}` cannot run here: {why}");
            }
            match out.iter().find(|o| o.name == v.name) {
                // The same entry twice runs once.
                Some(o) if *o == v => {}
                Some(_) => bail!(
                    "two --servers entries are named `{}`; give one another name with \
                     +name=LABEL",
                    v.name
                ),
                None => out.push(v),
            }
        }
        if out.is_empty() {
            bail!(
                "--servers names no server; the servers are: {}",
                self.names().join(", ")
            );
        }
        Ok(out)
    }

    /// Where a built binary is, for the cargo profile `profile`.
    pub(crate) fn binary_path(&self, binary: &str, profile: &str) -> PathBuf {
        let dir = if profile == "dev" { "debug" } else { profile };
        self.target_dir.join(dir).join(binary)
    }
}

/// The named servers left out of the default run, each with what it is (which says why:
/// srv-go `--model poll` spends a CPU per worker whether or not a client is connected, so
/// it would tax every other server's points it does not run at).
pub(crate) fn not_default() -> Vec<(&'static str, &'static str)> {
    known()
        .filter(|k| !k.default)
        .map(|k| (k.name, k.about))
        .collect()
}

/// Whether the server named `name` is the kernel's floor (srv-floor, echo only), which the
/// report marks rather than ranks among the runtimes.
pub(crate) fn is_floor(name: &str) -> bool {
    known().any(|k| k.name == name && k.spec.limits.contains(&conformance::Limit::EchoOnly))
}

fn known_variant(k: &Known, name: &str) -> Variant {
    Variant {
        name: name.to_string(),
        binary: k.binary.to_string(),
        flags: k.flags.iter().map(ToString::to_string).collect(),
        about: k.about.to_string(),
        command: None,
    }
}

/// The name `+name=LABEL` gives a variant: a word a file name and a table can carry.
fn label(spec: &str, value: Option<&str>) -> Result<String> {
    match value {
        Some(l)
            if !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && !l.starts_with('.') =>
        {
            Ok(l.to_string())
        }
        _ => bail!(
            "`{spec}`: +name takes a label of letters, digits, `-`, `_` and `.` (as in \
             reactor+name=again)"
        ),
    }
}

#[cfg(test)]
mod tests;
