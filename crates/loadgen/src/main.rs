//! The `loadgen` binary: parses the command line, runs the load, prints the summary and
//! writes the files asked for. Exit status 2 for a usage error or a server that is not there,
//! 1 for a failure while measuring.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use loadgen::cli::{Cli, Outputs};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.workload, loadgen::cli::Command::Agent) {
        return match loadgen::agent::serve(
            std::io::BufReader::new(std::io::stdin()),
            std::io::stdout().lock(),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("loadgen agent: {e}");
                ExitCode::from(1)
            }
        };
    }
    let (cfg, outputs) = match cli.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("loadgen: {e}");
            return ExitCode::from(2);
        }
    };
    // Open the outputs first: a typo in a path should not cost a whole run.
    let files = match open_outputs(&outputs) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            return ExitCode::from(2);
        }
    };
    let summary = match loadgen::run(&cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("loadgen: {e}");
            return ExitCode::from(if e.is_usage() { 2 } else { 1 });
        }
    };
    println!("{summary}");
    match write_outputs(&summary, files) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            ExitCode::from(1)
        }
    }
}

struct Files {
    json: Option<(BufWriter<File>, String)>,
    hist: Option<(BufWriter<File>, String)>,
    hgrm: Option<(BufWriter<File>, String)>,
    interval_log: Option<(BufWriter<File>, String)>,
}

fn open_outputs(o: &Outputs) -> anyhow::Result<Files> {
    let open = |p: &Option<std::path::PathBuf>, what: &str| -> anyhow::Result<_> {
        p.as_deref()
            .map(|p: &Path| {
                File::create(p)
                    .map(|f| (BufWriter::new(f), p.display().to_string()))
                    .with_context(|| format!("cannot create the {what} file {}", p.display()))
            })
            .transpose()
    };
    Ok(Files {
        json: open(&o.json, "--json")?,
        hist: open(&o.hist, "--hist")?,
        hgrm: open(&o.hgrm, "--hgrm")?,
        interval_log: open(&o.interval_log, "--interval-log")?,
    })
}

fn write_outputs(s: &loadgen::Summary, files: Files) -> anyhow::Result<()> {
    if let Some((mut w, path)) = files.json {
        serde_json::to_writer_pretty(&mut w, s)
            .map_err(anyhow::Error::from)
            .and_then(|()| Ok(w.write_all(b"\n")?))
            .and_then(|()| Ok(w.flush()?))
            .with_context(|| format!("writing {path}"))?;
    }
    if let Some((mut w, path)) = files.hist {
        s.histograms
            .write_v2(&mut w)
            .and_then(|()| w.flush())
            .with_context(|| format!("writing {path}"))?;
    }
    if let Some((mut w, path)) = files.hgrm {
        s.histograms
            .write_hgrm(&mut w)
            .and_then(|()| w.flush())
            .with_context(|| format!("writing {path}"))?;
    }
    if let Some((mut w, path)) = files.interval_log {
        s.histograms
            .write_interval_log(&mut w)
            .and_then(|()| w.flush())
            .with_context(|| format!("writing {path}"))?;
    }
    Ok(())
}
