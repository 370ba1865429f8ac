//! wrk, the http suite's outside client (the one TechEmpower runs): its arguments for a point
//! (one thread, the point's connections, `scripts/wrk/pipeline.lua` at the test's depth), and
//! its output read: requests/s, the responses it counted, and the latency line the script
//! prints. A run with socket errors (connect, read, write, timeout) or non-2xx responses fails
//! the point, saying so: wrk itself exits 0 after both. wrk's latency is taken from when each
//! request was sent, not when it was due (it is not corrected for coordinated omission).
//!
//! It may call the plan layer and the run layer's `outside` and `outcome`.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::plan::placement::Placement;
use crate::plan::suites::{Point, Stop, Workload};
use crate::run::outcome::Failure;
use crate::run::outside::{OutsideClient, Said};

/// The client, looked up on PATH.
const WRK: &str = "wrk";
/// How to get it on Debian and Ubuntu.
const INSTALL: &str = "apt-get install wrk";
/// TechEmpower's `--timeout`: a response later than this is a socket error (`timeout`).
const TIMEOUT_SECS: u32 = 8;

/// wrk as an outside client.
#[derive(Debug)]
pub(crate) struct Wrk;

/// The one wrk client, for `run::outside_clients`.
pub(crate) static CLIENT: Wrk = Wrk;

impl OutsideClient for Wrk {
    fn program(&self) -> &'static str {
        WRK
    }

    /// wrk has no `--version` that exits 0: it is here when it runs at all.
    fn missing(&self) -> Option<String> {
        Command::new(WRK)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
            .then(|| format!("`{WRK}` is not on PATH ({INSTALL})"))
    }

    fn args(&self, point: &Point, addr: &str) -> Option<(Vec<String>, u64)> {
        wrk_args(point, addr, &crate::plan::project_root())
    }

    fn prepare(&self, _: &Point, _: &str, _: &Path, _: &Placement) -> Result<(), Failure> {
        Ok(())
    }

    fn output(&self) -> &'static str {
        "summary"
    }

    fn parse(&self, stdout: &str) -> Result<Said, String> {
        parse_output(stdout)
    }

    fn note(&self) -> &'static str {
        "wrk: its own latency from each request's send (not corrected for coordinated omission: p50, p95, p99, max), no histogram; whole seconds; the server's CPU over its whole run, connection setup included; statuses counted, bodies not checked"
    }
}

/// wrk's arguments for `point` against `addr`, and a guess of the requests (for the time
/// limit only: wrk says what it sent). wrk takes whole seconds: a shorter point runs one.
fn wrk_args(point: &Point, addr: &str, root: &Path) -> Option<(Vec<String>, u64)> {
    let Workload::Http { path, pipeline, .. } = point.workload else {
        return None;
    };
    let secs = match point.stop {
        Stop::Duration(d) => d.ceil().max(1.0) as u64,
        Stop::Requests(_) => return None,
    };
    let script = root.join("scripts/wrk/pipeline.lua");
    let args = [
        "-t1".to_string(),
        format!("-c{}", point.conns),
        format!("-d{secs}s"),
        format!("--timeout={TIMEOUT_SECS}s"),
        "-s".to_string(),
        script.display().to_string(),
        format!("http://{addr}{}", path.path()),
        "--".to_string(),
        pipeline.to_string(),
    ];
    Some((args.to_vec(), secs * 1_000_000))
}

/// Reads wrk's summary and the script's `ringside:` line; errors and non-2xx responses are
/// a failure of the run.
fn parse_output(text: &str) -> Result<Said, String> {
    let after = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::trim)
    };
    if let Some(errors) = after("Socket errors:") {
        // `connect 0, read 12, write 0, timeout 0`: any but zeros fails.
        let counts: Vec<u64> = errors
            .split(',')
            .filter_map(|kv| kv.split_whitespace().nth(1)?.parse().ok())
            .collect();
        if counts.iter().any(|&n| n > 0) {
            return Err(format!("wrk saw socket errors: {errors}"));
        }
    }
    if let Some(n) = after("Non-2xx or 3xx responses:") {
        return Err(format!("wrk got {n} responses that were not 2xx or 3xx"));
    }
    let rps: f64 = after("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no `Requests/sec:` in wrk's output: {text:?}"))?;
    let line = after("ringside:").ok_or_else(|| {
        format!("no `ringside:` line (scripts/wrk/pipeline.lua's `done`) in wrk's output: {text:?}")
    })?;
    // `requests N latency_us p50 A p95 B p99 C max D`
    let words: Vec<&str> = line.split_whitespace().collect();
    let value = |name: &str| -> Result<f64, String> {
        words
            .iter()
            .position(|w| *w == name)
            .and_then(|i| words.get(i + 1)?.parse().ok())
            .ok_or_else(|| format!("no {name} in wrk's `ringside:` line {line:?}"))
    };
    let requests = value("requests")? as u64;
    if requests == 0 {
        return Err("wrk got no response".into());
    }
    Ok(Said {
        rps,
        requests: Some(requests),
        latency_us: [value("p50")?, value("p95")?, value("p99")?, value("max")?],
        avg_min_us: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::suites::{Overrides, Suite};

    /// wrk 4.1.0 against srv-reactor, `-t1 -c256 -d5s`, pipeline 16.
    const CLEAN: &str = "Running 5s test @ http://127.0.0.1:40123/plaintext
  1 threads and 256 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    11.61ms    3.02ms  41.27ms   86.18%
    Req/Sec   352.43k    21.06k  381.63k    82.00%
  1753728 requests in 5.00s, 224.09MB read
Requests/sec: 350524.71
Transfer/sec:     44.79MB
ringside: requests 1753728 latency_us p50 11240 p95 15871 p99 22310 max 41270
";

    #[test]
    fn a_clean_run_reads_whole() {
        let s = parse_output(CLEAN).unwrap();
        assert!((s.rps - 350_524.71).abs() < 1e-6);
        assert_eq!(s.requests, Some(1_753_728));
        assert_eq!(s.latency_us, [11_240.0, 15_871.0, 22_310.0, 41_270.0]);
    }

    #[test]
    fn socket_errors_and_non_2xx_fail_the_run() {
        let errors = CLEAN.replace(
            "Requests/sec:",
            "  Socket errors: connect 0, read 12, write 0, timeout 3\nRequests/sec:",
        );
        let e = parse_output(&errors).unwrap_err();
        assert!(e.contains("socket errors: connect 0, read 12"), "{e}");
        let zeros = CLEAN.replace(
            "Requests/sec:",
            "  Socket errors: connect 0, read 0, write 0, timeout 0\nRequests/sec:",
        );
        assert!(parse_output(&zeros).is_ok());
        let non2xx = CLEAN.replace(
            "Requests/sec:",
            "  Non-2xx or 3xx responses: 1753728\nRequests/sec:",
        );
        let e = parse_output(&non2xx).unwrap_err();
        assert!(e.contains("1753728 responses that were not 2xx"), "{e}");
    }

    #[test]
    fn a_run_without_the_script_or_a_response_fails() {
        let bare: String = CLEAN
            .lines()
            .filter(|l| !l.starts_with("ringside:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(parse_output(&bare).unwrap_err().contains("pipeline.lua"));
        assert!(parse_output("").is_err());
        let none = CLEAN.replace("requests 1753728", "requests 0");
        assert!(parse_output(&none).unwrap_err().contains("no response"));
    }

    #[test]
    fn wrk_args_follow_the_point() {
        let points = Suite::Http.points(&Overrides {
            workers: 1,
            duration: Some(0.3),
            ..Overrides::default()
        });
        let p = points
            .iter()
            .find(|p| p.id == "wrk-plaintext-p16-c256")
            .unwrap();
        let (args, _) = wrk_args(p, "127.0.0.1:9", Path::new("/r")).unwrap();
        assert_eq!(
            args.join(" "),
            "-t1 -c256 -d1s --timeout=8s -s /r/scripts/wrk/pipeline.lua http://127.0.0.1:9/plaintext -- 16"
        );
        let json = points.iter().find(|p| p.id == "wrk-json-p1-c16").unwrap();
        let (args, _) = wrk_args(json, "127.0.0.1:9", Path::new("/r")).unwrap();
        assert!(args.join(" ").ends_with("http://127.0.0.1:9/json -- 1"));
        let echo = Suite::Quick.points(&Overrides::default());
        assert!(wrk_args(&echo[0], "127.0.0.1:1", Path::new("/r")).is_none());
    }
}
