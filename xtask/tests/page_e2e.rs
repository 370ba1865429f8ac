//! `report.html` in a real browser: a tiny sweep of two servers through the real command line
//! (or the run named by `RINGSIDE_PAGE_RUN=DIR`, to check a real run's page), then headless
//! Chromium opens the page and a small page of the test's own reads what it rendered: the
//! at-a-glance table has a row per server, the plots and the point figures have a size, a
//! click sorts a table, a server turned off leaves the tables and figures, and at a phone's
//! width the page does not scroll sideways. Chromium's every request goes to a proxy on
//! loopback that counts them: the page must fetch nothing. Without Chromium the test checks
//! the file alone and says how to install it.

mod util;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long Chromium may take to load and dump the page.
const BROWSER_DEADLINE: Duration = Duration::from_secs(120);

/// What Chromium itself asks of its vendor's services whatever the page (its component
/// updater, sign-in and clock), even with background networking off: not the page's.
const CHROMIUM_OWN: [&str; 3] = [
    "update.googleapis.com",
    "accounts.google.com",
    "clients2.google.com",
];

const INSTALL: &str = "apt-get update && apt-get install -y chromium";

/// The test's page: the report in two frames (a wide window and a phone's), and a script that
/// writes what it measured into `<pre id="result">` for `--dump-dom`.
const CHECKER: &str = r#"<!DOCTYPE html><html><body>
<iframe id="wide" src="report.html" style="width:1280px;height:900px"></iframe>
<iframe id="narrow" src="report.html" style="width:390px;height:800px"></iframe>
<pre id="result">pending</pre>
<script>
function check() {
  var r = {};
  try {
    var d = document.getElementById("wide").contentDocument;
    var t = d.querySelector("section#at-a-glance table");
    var names = function (t) {
      return Array.prototype.map.call(t.tBodies[0].rows, function (tr) {
        return tr.classList.contains("hidden") ? null : tr.cells[0].textContent.trim();
      }).filter(function (x) { return x !== null; });
    };
    r.glance = t ? names(t) : null;
    var sized = function (sel) {
      return Array.prototype.filter.call(d.querySelectorAll(sel), function (e) {
        var b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0;
      }).length;
    };
    r.plots = d.querySelectorAll("figure.plot svg").length;
    r.plots_sized = sized("figure.plot svg");
    r.marks = d.querySelectorAll("svg.mark circle").length;
    r.marks_sized = sized("svg.mark circle");
    r.resources = d.defaultView.performance.getEntriesByType("resource").map(function (e) { return e.name; });
    r.hgrm_links = d.querySelectorAll(".dotrow .name a[href$='.hgrm']").length;
    // Sort the first table by its CPU column, ascending.
    if (t) {
      var th = t.tHead.rows[0].cells[2];
      th.click();
      r.sorted = th.getAttribute("aria-sort");
    }
    // Turn the first server off.
    var box = d.querySelector("nav#servers input[data-toggle]");
    if (box) {
      r.toggled = box.getAttribute("data-toggle");
      box.click();
      r.glance_after_toggle = t ? names(t) : null;
      r.dotrows_left = Array.prototype.filter.call(
        d.querySelectorAll(".dotrow[data-server]"), function (e) {
          return e.getAttribute("data-server") === r.toggled && e.getBoundingClientRect().height > 0;
        }).length;
    }
    var n = document.getElementById("narrow").contentDocument;
    r.narrow_scroll_width = n.documentElement.scrollWidth;
    r.narrow_width = n.documentElement.clientWidth;
  } catch (e) { r.error = String(e); }
  document.getElementById("result").textContent = "RESULT " + JSON.stringify(r) + " END";
}
window.addEventListener("load", check);
</script></body></html>"#;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// A proxy on loopback that accepts whatever Chromium sends and counts it, until `stop`.
fn counting_proxy(stop: Arc<AtomicBool>) -> (u16, mpsc::Receiver<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let until = Instant::now() + BROWSER_DEADLINE + Duration::from_secs(10);
        while !stop.load(Ordering::Relaxed) && Instant::now() < until {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                    let mut buf = [0; 512];
                    let n = s.read(&mut buf).unwrap_or(0);
                    let text = String::from_utf8_lossy(&buf[..n]);
                    seen.push(text.lines().next().unwrap_or("").to_string());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = tx.send(seen);
    });
    (port, rx)
}

/// Chromium's `--dump-dom` of the checker page in `dir`, with every request through the
/// proxy on `port`.
fn dump(browser: &Path, dir: &Path, port: u16) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--disable-breakpad",
            "--no-pings",
            "--metrics-recording-only",
            "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter,SigninInterceptBubble,AccountConsistency",
            "--allow-file-access-from-files",
            "--virtual-time-budget=10000",
            &format!("--proxy-server=http://127.0.0.1:{port}"),
            "--proxy-bypass-list=<-loopback>",
            &format!("--user-data-dir={}", profile.path().display()),
            "--dump-dom",
        ])
        .arg(format!("file://{}", dir.join("check.html").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running chromium");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > BROWSER_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium ran for more than {BROWSER_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

#[test]
fn the_page_renders_in_chromium_and_fetches_nothing() {
    let (out, made) = match std::env::var_os("RINGSIDE_PAGE_RUN") {
        Some(dir) => (PathBuf::from(dir), false),
        None => {
            let out = util::fresh_out("xtask-page");
            util::run_bench(
                "cargo xtask bench",
                &[
                    "--cargo-profile",
                    "dev",
                    "--servers",
                    "threads,reactor",
                    "--conns",
                    "1",
                    "--duration",
                    "0.3",
                    "--warmup",
                    "0",
                    "--rate",
                    "1000",
                    "--repeat",
                    "2",
                    "--quiet-wait",
                    "0",
                ],
                &out,
            );
            (out, true)
        }
    };
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let mut servers: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r["suite"] == "quick") {
        let s = r["server"].as_str().unwrap().to_string();
        if !servers.contains(&s) {
            servers.push(s);
        }
    }
    let page = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert!(page.contains("<section id=\"at-a-glance\">"));

    let Some(browser) = chromium() else {
        eprintln!("skipped the browser half: no chromium on PATH (install it: {INSTALL})");
        return;
    };
    // The checker beside a copy of the page, so that the run directory is left as it was.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(out.join("report.html"), dir.path().join("report.html")).unwrap();
    std::fs::write(dir.path().join("check.html"), CHECKER).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (port, requests) = counting_proxy(stop.clone());
    let dom = dump(&browser, dir.path(), port);
    stop.store(true, Ordering::Relaxed);
    let requests: Vec<String> = requests
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default()
        .into_iter()
        .filter(|line| {
            // `CONNECT host:443 ...` or `GET http://host/... ...`.
            let target = line.split(' ').nth(1).unwrap_or("");
            let host = target
                .trim_start_matches("http://")
                .split(['/', ':'])
                .next()
                .unwrap_or("");
            !CHROMIUM_OWN.contains(&host)
        })
        .collect();
    assert!(requests.is_empty(), "the page fetched: {requests:?}");

    let json = dom
        .split("RESULT ")
        .nth(1)
        .and_then(|s| s.split(" END").next())
        .unwrap_or_else(|| panic!("the checker wrote nothing: {dom}"));
    let json = json.replace("&quot;", "\"").replace("&amp;", "&");
    let r: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(
        r["resources"],
        serde_json::json!([]),
        "the page loaded resources: {r}"
    );
    assert_eq!(
        r["glance"],
        serde_json::json!(servers),
        "a row per server: {r}"
    );
    assert!(r["plots"].as_u64().unwrap() >= 3, "{r}");
    assert_eq!(r["plots"], r["plots_sized"], "every plot has a size: {r}");
    let points = rows.len() as u64;
    assert!(r["marks"].as_u64().unwrap() >= points, "{r}");
    assert_eq!(r["marks"], r["marks_sized"], "every mark has a size: {r}");
    assert_eq!(r["hgrm_links"].as_u64().unwrap(), points, "{r}");
    assert_eq!(r["sorted"], "ascending", "{r}");
    let off = r["toggled"].as_str().unwrap();
    assert_eq!(off, servers[0], "{r}");
    let left: Vec<&str> = servers[1..].iter().map(String::as_str).collect();
    let shown: Vec<&str> = r["glance_after_toggle"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let mut shown_sorted = shown.clone();
    shown_sorted.sort_unstable();
    let mut left_sorted = left.clone();
    left_sorted.sort_unstable();
    assert_eq!(shown_sorted, left_sorted, "{r}");
    assert_eq!(r["dotrows_left"], 0, "{r}");
    assert!(
        r["narrow_scroll_width"].as_u64().unwrap() <= r["narrow_width"].as_u64().unwrap() + 1,
        "the page scrolls sideways at a phone's width: {r}"
    );
    if made {
        std::fs::remove_dir_all(&out).unwrap();
    }
}
