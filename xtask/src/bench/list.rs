//! `cargo xtask bench --list`: the suites (each says what it is, from its own file in
//! `plan::suites`) and the servers, with whether each can run here.
//!
//! It may call the plan layer.

use super::BenchArgs;
use crate::plan::servers::{Inventory, not_default};
use crate::plan::suites::Suite;
use crate::report::stdout;

/// Prints what `--list` shows.
pub(super) fn list(args: &BenchArgs, inv: &Inventory) {
    let (defaults, _) = inv.defaults();
    stdout::line("Suites (--suite, comma-separated):\n");
    for s in Suite::ALL {
        let points = s.points(&args.overrides(args.workers()));
        stdout::line(s.list_text(&points, args.repeats(s), defaults.len()));
        if s == Suite::Scaling {
            stdout::line(format_args!(
                "              {}",
                super::scaling_stop(&args.server_cpus)
            ));
        }
    }
    stdout::line("\nServers (--servers NAME[+FLAG[=VALUE]]..., e.g. fiber+completer):\n");
    for name in inv.names() {
        match inv.parse(&name) {
            Ok(v) => {
                let mut state = inv
                    .cannot_run(&v)
                    .map_or_else(|| "buildable".to_string(), |why| format!("not here: {why}"));
                if not_default().iter().any(|(n, _)| *n == name) {
                    state.push_str("; not in the default run: name it in --servers");
                }
                let cmd = std::iter::once(v.binary.clone())
                    .chain(v.flags.clone())
                    .collect::<Vec<_>>()
                    .join(" ");
                stdout::line(format_args!("  {name:<16} {cmd:<32} {} [{state}]", v.about));
            }
            Err(e) => stdout::line(format_args!("  {name:<16} {e}")),
        }
    }
    match &inv.go_version {
        Some(v) => stdout::line(format_args!("\ngo: {v}")),
        None => stdout::line("\ngo: not on PATH, so srv-go is not built"),
    }
}
