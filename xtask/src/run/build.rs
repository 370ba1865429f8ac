//! Finding what this checkout builds (`cargo metadata`, `go version`) and building it
//! (`cargo build`, `go build`), then checking every `+flag` against its binary's `--help`, so
//! that a typo fails before the sweep.
//!
//! It may call the plan layer's `servers` (the inventory it fills) and the run layer's `peer`
//! (each peer's entry, through the run layer's list).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::plan::servers::{Inventory, Variant};

impl Inventory {
    /// Finds what the workspace at `root` builds (`cargo metadata`), whether Go is here, and
    /// the peers.
    pub(crate) fn discover(root: &Path) -> Result<Inventory> {
        let out = Command::new(cargo())
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .current_dir(root)
            .stderr(Stdio::inherit())
            .output()
            .context("running cargo metadata")?;
        if !out.status.success() {
            bail!("cargo metadata failed ({})", out.status);
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("reading cargo metadata's output")?;
        let mut inv = Inventory {
            target_dir: meta["target_directory"]
                .as_str()
                .map_or_else(|| root.join("target"), PathBuf::from),
            peers: crate::run::peers().iter().map(|p| p.entry()).collect(),
            io_uring: conformance::io_uring_usable().err(),
            ..Inventory::default()
        };
        for pkg in meta["packages"].as_array().into_iter().flatten() {
            let Some(pkg_name) = pkg["name"].as_str() else {
                continue;
            };
            for target in pkg["targets"].as_array().into_iter().flatten() {
                let is_bin = target["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "bin"));
                let Some(name) = target["name"].as_str() else {
                    continue;
                };
                if is_bin && (name.starts_with("srv-") || name == "loadgen") {
                    inv.packages.insert(name.to_string(), pkg_name.to_string());
                }
            }
        }
        let go_dir = root.join("peers/go");
        inv.go_dir = go_dir.join("go.mod").is_file().then_some(go_dir);
        inv.go_version = Command::new("go")
            .arg("version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        Ok(inv)
    }

    /// Builds loadgen and the binaries of `variants` (`cargo build -p ...`, and `go build` for
    /// srv-go), printing the builds' own output.
    pub(crate) fn build(
        &self,
        root: &Path,
        variants: &[Variant],
        profile: &str,
    ) -> Result<Option<String>> {
        let mut packages: Vec<&str> = Vec::new();
        for bin in variants
            .iter()
            .map(|v| v.binary.as_str())
            .chain(["loadgen"])
        {
            if let Some(pkg) = self.packages.get(bin) {
                if !packages.contains(&pkg.as_str()) {
                    packages.push(pkg);
                }
            } else if bin == "loadgen" {
                bail!(
                    "no package of this workspace builds loadgen: the bench needs crates/loadgen"
                );
            }
        }
        let mut cmd = Command::new(cargo());
        cmd.args(["build", "--bins", "--profile", profile])
            .current_dir(root);
        for p in &packages {
            cmd.args(["-p", p]);
        }
        eprintln!("building ({profile}): {}", packages.join(", "));
        let status = cmd.status().context("running cargo build")?;
        if !status.success() {
            bail!("cargo build failed ({status}); the output above says why");
        }
        if variants.iter().any(|v| v.binary == "srv-go") {
            return Ok(self.build_go(profile).err());
        }
        Ok(None)
    }

    /// Builds srv-go, or says why it could not be (no Go, or `go build` failed: a toolchain
    /// too old, a module that cannot be fetched): the Go servers are then left out of the
    /// run, which goes on without them, as without Go at all.
    fn build_go(&self, profile: &str) -> Result<(), String> {
        let (Some(dir), Some(version)) = (&self.go_dir, &self.go_version) else {
            return Err(self.missing("srv-go").unwrap_or_default());
        };
        let out = self.binary_path("srv-go", profile);
        eprintln!("building srv-go with {version}");
        let status = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&out)
            .arg(".")
            .current_dir(dir)
            .status()
            .map_err(|e| format!("go build could not run ({e})"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "go build of peers/go failed with {version} ({status}; the output above says why)"
            ))
        }
    }

    /// Checks that every `+flag` of the variants is a flag its binary has (`--help`), so that a
    /// typo fails before the sweep, not at its first point.
    pub(crate) fn check_flags(&self, variants: &[Variant], profile: &str) -> Result<()> {
        for v in variants {
            let extra: Vec<&String> = v.flags.iter().filter(|f| f.starts_with("--")).collect();
            if extra.is_empty() {
                continue;
            }
            let path = self.binary_path(&v.binary, profile);
            let help = Command::new(&path)
                .arg("--help")
                .output()
                .with_context(|| format!("running {} --help", path.display()))?;
            let text = String::from_utf8_lossy(&help.stdout).to_string()
                + &String::from_utf8_lossy(&help.stderr);
            let known = flags_in_help(&text);
            for f in extra {
                if !known.iter().any(|k| k == f) {
                    bail!(
                        "{} has no flag {f} (server `{}`); its flags are: {}",
                        v.binary,
                        v.name,
                        known.join(" ")
                    );
                }
            }
        }
        Ok(())
    }
}

/// The `--long` flags a `--help` text mentions.
fn flags_in_help(text: &str) -> Vec<String> {
    let mut flags: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        let is_flag = word.len() > 2
            && word.starts_with("--")
            && word[2..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic());
        if is_flag && !flags.iter().any(|f| f == word) {
            flags.push(word.to_string());
        }
    }
    flags
}

/// The cargo that runs us (cargo sets `CARGO` for what it runs), or the one on PATH.
pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_from_help() {
        let help =
            "Options:\n  --proto <PROTO>  the protocol\n  --completer  use it\n  -h, --help\n";
        assert_eq!(flags_in_help(help), ["--proto", "--completer", "--help"]);
    }
}
