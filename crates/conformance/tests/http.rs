//! HTTP conformance (`--proto http`, docs/protocol-notes.md "Http"): TechEmpower's
//! plaintext and json bytes and headers, HEAD, 404, 405 with `Allow`, the statuses that
//! close a connection (400, 413, 431, 501), `Connection: close` and HTTP/1.0,
//! pipelining and a request split byte by byte, a body read and dropped, a client that
//! pipelines and never reads, and a slow client beside a fast one. srv-go answers from
//! Go's net/http: the checks read what a client reads (status, headers, body), not the
//! order of the headers. `http_wrk_pipelined` runs wrk briefly where it is installed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use conformance::net::{self, read_to_close, shutdown_write};
use conformance::{Server, Target};
use proto::http::{ResponseHead, parse_response};

conformance::conformance_tests!(
    http_plaintext_and_json needs Http,
    http_head_404_405 needs Http,
    http_errors_answer_and_close needs Http,
    http_connection_close_and_http10 needs Http,
    http_pipelined_and_split needs Http,
    http_body_is_discarded needs Http,
    http_never_reading_client_is_not_read needs Http & ReadPause,
    http_slow_client_does_not_stall_others needs Http,
    http_wrk_pipelined needs Http,
);

const MIB: usize = 1 << 20;
const PLAINTEXT: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: ringside\r\n\r\n";
const JSON: &[u8] = b"GET /json HTTP/1.1\r\nHost: ringside\r\n\r\n";
const PLAINTEXT_BODY: &[u8] = b"Hello, World!";
const JSON_BODY: &[u8] = br#"{"message":"Hello, World!"}"#;

/// One response as a client reads it.
#[derive(Debug)]
struct Response {
    head: ResponseHead,
    /// The head as text, for the header checks and for messages.
    text: String,
    body: Vec<u8>,
}

impl Response {
    /// The value of header `name`, if present.
    fn header(&self, name: &str) -> Option<&str> {
        self.text.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Reads responses from a stream, keeping what arrives past the one asked for.
struct Reader<'a> {
    stream: &'a mut TcpStream,
    buf: Vec<u8>,
}

impl<'a> Reader<'a> {
    fn new(stream: &'a mut TcpStream) -> Self {
        Reader {
            stream,
            buf: Vec::new(),
        }
    }

    /// Reads one response; `head_only` for the answer to a HEAD.
    fn response(&mut self, head_only: bool) -> Result<Response> {
        let mut chunk = [0; 16 * 1024];
        loop {
            if let Some(head) = parse_response(&self.buf)? {
                let len = match (head_only, head.content_length) {
                    (true, _) => 0,
                    (false, Some(len)) => len,
                    // Go's net/http sends its own refusals (400, 431) without a length and
                    // closes: the body is what comes before the close.
                    (false, None) if head.close && head.status >= 400 => {
                        let rest = read_to_close(self.stream, 64 * 1024)?;
                        self.buf.extend_from_slice(&rest);
                        self.buf.len() - head.len
                    }
                    (false, None) => bail!("a response without Content-Length"),
                };
                if self.buf.len() >= head.len + len {
                    let text = String::from_utf8_lossy(&self.buf[..head.len]).into_owned();
                    let body = self.buf[head.len..head.len + len].to_vec();
                    self.buf.drain(..head.len + len);
                    return Ok(Response { head, text, body });
                }
            }
            let n = self
                .stream
                .read(&mut chunk)
                .context("waiting for a response")?;
            ensure!(
                n > 0,
                "the server closed the connection before a whole response ({} bytes)",
                self.buf.len()
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// After the responses read: the server closes the connection, sending nothing more.
    fn closed(&mut self) -> Result<()> {
        let rest = read_to_close(self.stream, 64 * 1024).context("waiting for the close")?;
        ensure!(
            self.buf.is_empty() && rest.is_empty(),
            "bytes after the last response: {:?}",
            String::from_utf8_lossy(&[&self.buf[..], &rest[..]].concat())
        );
        Ok(())
    }
}

fn start(target: &Target) -> Result<Server> {
    Ok(target.start(&["--proto", "http"])?)
}

/// Sends `request` on a fresh connection and reads one response.
fn ask(server: &Server, request: &[u8], head_only: bool) -> Result<(Response, TcpStream)> {
    let mut stream = server.connect()?;
    stream.write_all(request)?;
    let response = Reader::new(&mut stream).response(head_only)?;
    Ok((response, stream))
}

/// What every response carries: `Server`, an IMF-fixdate `Date`, `Content-Length`.
fn check_common(r: &Response) -> Result<()> {
    ensure!(
        r.header("server").is_some(),
        "no Server header:\n{}",
        r.text
    );
    let date = r.header("date").context("no Date header")?;
    let fixdate = date.len() == 29
        && date.ends_with(" GMT")
        && date.as_bytes()[3] == b','
        && date.as_bytes()[16] == b' ';
    ensure!(fixdate, "Date {date:?} is not an IMF-fixdate");
    ensure!(
        r.head.content_length.is_some(),
        "no Content-Length:\n{}",
        r.text
    );
    Ok(())
}

fn check_ok(r: &Response, content_type: &str, body: &[u8], head_only: bool) -> Result<()> {
    check_common(r)?;
    ensure!(
        r.head.status == 200,
        "status {}:\n{}",
        r.head.status,
        r.text
    );
    ensure!(
        r.header("content-type") == Some(content_type),
        "Content-Type {:?}, expected {content_type}",
        r.header("content-type")
    );
    ensure!(r.head.content_length == Some(body.len()), "{}", r.text);
    if !head_only {
        ensure!(
            r.body == body,
            "body {:?}",
            String::from_utf8_lossy(&r.body)
        );
    }
    Ok(())
}

fn http_plaintext_and_json(target: &Target) -> Result<()> {
    let server = start(target)?;
    let (r, _) = ask(&server, PLAINTEXT, false)?;
    check_ok(&r, "text/plain", PLAINTEXT_BODY, false)?;
    let (r, _) = ask(&server, JSON, false)?;
    check_ok(&r, "application/json", JSON_BODY, false)?;
    Ok(())
}

fn http_head_404_405(target: &Target) -> Result<()> {
    let server = start(target)?;
    let mut stream = server.connect()?;
    // On one connection: a HEAD has no body, so the next response follows at once.
    stream.write_all(b"HEAD /json HTTP/1.1\r\nHost: ringside\r\n\r\n")?;
    stream.write_all(PLAINTEXT)?;
    let mut reader = Reader::new(&mut stream);
    check_ok(&reader.response(true)?, "application/json", JSON_BODY, true)?;
    check_ok(
        &reader.response(false)?,
        "text/plain",
        PLAINTEXT_BODY,
        false,
    )?;

    let (r, _) = ask(
        &server,
        b"GET /nothing-here HTTP/1.1\r\nHost: ringside\r\n\r\n",
        false,
    )?;
    check_common(&r)?;
    ensure!(r.head.status == 404, "status {}", r.head.status);
    for method in ["POST", "PUT", "DELETE"] {
        let request =
            format!("{method} /plaintext HTTP/1.1\r\nHost: ringside\r\nContent-Length: 0\r\n\r\n");
        let (r, _) = ask(&server, request.as_bytes(), false)?;
        check_common(&r)?;
        ensure!(r.head.status == 405, "{method}: status {}", r.head.status);
        ensure!(
            r.header("allow") == Some("GET, HEAD"),
            "{method}: Allow {:?}",
            r.header("allow")
        );
    }
    Ok(())
}

/// A request the server refuses gets its status, then the connection closes.
fn http_errors_answer_and_close(target: &Target) -> Result<()> {
    let server = start(target)?;
    let mut long = b"GET /plaintext HTTP/1.1\r\nHost: ringside\r\nX-Long: ".to_vec();
    // Far past 8 KiB, past net/http's 4 KiB of slack too.
    long.resize(20 * 1024, b'a');
    long.extend_from_slice(b"\r\n\r\n");
    let cases: [(&str, Vec<u8>, u16); 4] = [
        (
            "a malformed request line",
            b"GE\x01T /plaintext HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "a malformed header",
            b"GET /plaintext HTTP/1.1\r\nNo colon here\r\n\r\n".to_vec(),
            400,
        ),
        ("headers over 8 KiB", long, 431),
        (
            "a chunked body",
            b"POST /plaintext HTTP/1.1\r\nHost: ringside\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                .to_vec(),
            501,
        ),
    ];
    for (what, request, status) in cases {
        let (r, mut stream) = ask(&server, &request, false).context(what)?;
        ensure!(
            r.head.status == status,
            "{what}: status {}, expected {status}",
            r.head.status
        );
        // The connection closes: anything sent now goes unanswered.
        let _ = stream.write_all(PLAINTEXT);
        let rest = read_to_close(&mut stream, 64 * 1024).context(what)?;
        ensure!(
            rest.is_empty(),
            "{what}: the connection stayed open ({} more bytes)",
            rest.len()
        );
    }
    Ok(())
}

fn http_connection_close_and_http10(target: &Target) -> Result<()> {
    let server = start(target)?;
    for (what, request) in [
        (
            "Connection: close",
            &b"GET /plaintext HTTP/1.1\r\nHost: ringside\r\nConnection: close\r\n\r\n"[..],
        ),
        ("HTTP/1.0", b"GET /plaintext HTTP/1.0\r\n\r\n"),
    ] {
        let mut stream = server.connect()?;
        stream.write_all(request)?;
        let mut reader = Reader::new(&mut stream);
        let r = reader.response(false).context(what)?;
        check_common(&r)?;
        ensure!(r.head.status == 200 && r.body == PLAINTEXT_BODY, "{what}");
        reader.closed().context(what)?;
    }
    // HTTP/1.0 with keep-alive stays open.
    let mut stream = server.connect()?;
    let keep = b"GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    stream.write_all(keep)?;
    let mut reader = Reader::new(&mut stream);
    check_ok(
        &reader.response(false)?,
        "application/json",
        JSON_BODY,
        false,
    )?;
    reader.stream.write_all(keep)?;
    check_ok(
        &reader.response(false)?,
        "application/json",
        JSON_BODY,
        false,
    )
    .context("a second HTTP/1.0 keep-alive request")?;
    Ok(())
}

fn http_pipelined_and_split(target: &Target) -> Result<()> {
    let server = start(target)?;
    // Sixteen requests in one write, as TechEmpower's plaintext test pipelines them.
    let mut stream = server.connect()?;
    let mut batch = Vec::new();
    for i in 0..16 {
        batch.extend_from_slice(if i % 3 == 2 { JSON } else { PLAINTEXT });
    }
    stream.write_all(&batch)?;
    let mut reader = Reader::new(&mut stream);
    for i in 0..16 {
        let r = reader
            .response(false)
            .with_context(|| format!("response {i}"))?;
        if i % 3 == 2 {
            check_ok(&r, "application/json", JSON_BODY, false)?;
        } else {
            check_ok(&r, "text/plain", PLAINTEXT_BODY, false)?;
        }
    }
    // One request, a byte per write (TCP_NODELAY: a segment each).
    for &byte in PLAINTEXT {
        reader.stream.write_all(&[byte])?;
    }
    check_ok(
        &reader.response(false)?,
        "text/plain",
        PLAINTEXT_BODY,
        false,
    )
    .context("a request sent byte by byte")?;
    Ok(())
}

fn http_body_is_discarded(target: &Target) -> Result<()> {
    let server = start(target)?;
    let mut stream = server.connect()?;
    // A body that looks like requests: none of it may be answered.
    let body = JSON.repeat(1000);
    let head = format!(
        "POST /plaintext HTTP/1.1\r\nHost: ringside\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body)?;
    stream.write_all(PLAINTEXT)?;
    let mut reader = Reader::new(&mut stream);
    let r = reader.response(false)?;
    ensure!(
        r.head.status == 405,
        "POST with a body: status {}",
        r.head.status
    );
    check_ok(
        &reader.response(false)?,
        "text/plain",
        PLAINTEXT_BODY,
        false,
    )
    .context("the request after a body")?;

    // A body over 64 KiB is not read: 413, and the connection closes.
    let request = b"POST /plaintext HTTP/1.1\r\nHost: ringside\r\nContent-Length: 1000000\r\n\r\n";
    let (r, mut stream) = ask(&server, request, false)?;
    ensure!(
        r.head.status == 413,
        "a 1 MB body: status {}",
        r.head.status
    );
    let rest = read_to_close(&mut stream, 64 * 1024)?;
    ensure!(rest.is_empty(), "bytes after the 413");
    Ok(())
}

/// A client that pipelines and never reads: the server stops reading it (64 KiB of
/// responses wait, plus what the kernel holds), keeps serving others, grows by no more
/// than a bound, and answers every complete request once the client reads.
fn http_never_reading_client_is_not_read(target: &Target) -> Result<()> {
    const RSS_BOUND: u64 = 32 << 20;
    const STALL: Duration = Duration::from_millis(300);
    let (wmem, rmem) = net::tcp_buffer_max();
    let flood_cap = 32 * MIB + wmem + rmem;

    let server = start(target)?;
    let mut flood = server.connect()?;
    net::set_recv_buffer(&flood, 64 * 1024)?;
    let (r, mut other) = ask(&server, PLAINTEXT, false)?;
    check_ok(&r, "text/plain", PLAINTEXT_BODY, false)?;
    let baseline = server.rss()?;

    let (sent, stalled) = net::flood_with_request(&flood, PLAINTEXT, flood_cap, STALL)?;
    eprintln!(
        "http_never_reading_client_is_not_read: the flood stalled after {} KiB",
        sent / 1024
    );
    ensure!(
        stalled,
        "the server kept reading a client that never reads: {} MiB of requests accepted",
        sent / MIB
    );

    other.write_all(JSON)?;
    check_ok(
        &Reader::new(&mut other).response(false)?,
        "application/json",
        JSON_BODY,
        false,
    )
    .context("the other client while one floods")?;

    let grown = server.rss()?.saturating_sub(baseline);
    ensure!(
        grown < RSS_BOUND,
        "server RSS grew by {} MiB under a client that never reads (bound {} MiB)",
        grown >> 20,
        RSS_BOUND >> 20
    );

    // Every complete request gets its response once the client reads.
    shutdown_write(&flood)?;
    net::set_recv_buffer(&flood, 4 * MIB)?;
    let complete = sent / PLAINTEXT.len();
    let mut reader = Reader::new(&mut flood);
    for i in 0..complete {
        let r = reader
            .response(false)
            .with_context(|| format!("response {i} of {complete}"))?;
        if r.head.status != 200 || r.body != PLAINTEXT_BODY {
            bail!("response {i} of {complete}: {}", r.text);
        }
    }
    Ok(())
}

/// A client that sends its request a byte at a time holds no one else up: others are
/// answered while its request is incomplete, and it is answered once it is whole.
fn http_slow_client_does_not_stall_others(target: &Target) -> Result<()> {
    let server = start(target)?;
    let mut slow = server.connect()?;
    let half = PLAINTEXT.len() / 2;
    for &byte in &PLAINTEXT[..half] {
        slow.write_all(&[byte])?;
    }
    for _ in 0..4 {
        let (r, _) = ask(&server, JSON, false)?;
        check_ok(&r, "application/json", JSON_BODY, false).context("a client beside a slow one")?;
    }
    for &byte in &PLAINTEXT[half..] {
        slow.write_all(&[byte])?;
    }
    check_ok(
        &Reader::new(&mut slow).response(false)?,
        "text/plain",
        PLAINTEXT_BODY,
        false,
    )
    .context("the slow client")?;
    Ok(())
}

/// wrk with `scripts/wrk/pipeline.lua`, 16 requests pipelined per connection, for a
/// second: no socket errors and no non-2xx responses. Skipped where wrk is missing.
fn http_wrk_pipelined(target: &Target) -> Result<()> {
    if Command::new("wrk").arg("--version").output().is_err() {
        eprintln!("skipped: wrk is not installed (apt-get install wrk)");
        return Ok(());
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/wrk/pipeline.lua"
    );
    let server = start(target)?;
    let url = format!("http://{}/plaintext", server.addr());
    let out = Command::new("timeout")
        .args([
            "20", "wrk", "-t1", "-c16", "-d1s", "-s", script, &url, "--", "16",
        ])
        .output()
        .context("running wrk")?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "wrk failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        !text.contains("Socket errors") && !text.contains("Non-2xx"),
        "wrk saw errors:\n{text}"
    );
    ensure!(text.contains("Requests/sec"), "no wrk summary:\n{text}");
    Ok(())
}
