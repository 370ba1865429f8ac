//! The HTTP service's answers, byte for byte, and its rule of pending output.

use proto::http::parse_response;

use super::*;

/// Feeds `input` and executes until the connection needs input or closes; returns the
/// responses as (status, head, body) and the last flow.
fn run(conn: &mut Connection, input: &[u8]) -> (Vec<(u16, String, Vec<u8>)>, Flow) {
    conn.feed(input);
    let mut out = Vec::new();
    let flow = loop {
        match conn.execute(&mut out) {
            Flow::OutputFull => continue,
            flow => break flow,
        }
    };
    let mut responses = Vec::new();
    let mut rest = &out[..];
    while !rest.is_empty() {
        let head = parse_response(rest).unwrap().expect("a whole head");
        let text = String::from_utf8(rest[..head.len].to_vec()).unwrap();
        // A HEAD response has a Content-Length but no body: the tests know which.
        let body_len = if text.contains("Content-Type") && !input.starts_with(b"HEAD") {
            head.content_length.unwrap()
        } else {
            0
        };
        let body = rest[head.len..head.len + body_len].to_vec();
        responses.push((head.status, text, body));
        rest = &rest[head.len + body_len..];
    }
    (responses, flow)
}

fn one(input: &[u8]) -> ((u16, String, Vec<u8>), Flow) {
    let (mut r, flow) = run(&mut Connection::new(64 * 1024), input);
    assert_eq!(r.len(), 1, "{r:?}");
    (r.remove(0), flow)
}

#[test]
fn plaintext_and_json() {
    let ((status, head, body), flow) = one(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((status, flow), (200, Flow::NeedInput));
    assert_eq!(body, b"Hello, World!");
    let date = std::str::from_utf8(&date::now()).unwrap().to_owned();
    let expected = |ctype: &str, len: usize| {
        format!(
            "HTTP/1.1 200 OK\r\nServer: ringside\r\nDate: {date}\r\nContent-Type: {ctype}\r\n\
             Content-Length: {len}\r\n\r\n"
        )
    };
    // The date may turn over between the two calls; compare around it.
    let same = |a: &str, b: &str| a.len() == b.len() && a[..37] == b[..37] && a[66..] == b[66..];
    assert!(same(&head, &expected("text/plain", 13)), "{head}");
    let ((status, head, body), _) = one(b"GET /json?x=1 HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    assert_eq!(body, br#"{"message":"Hello, World!"}"#);
    assert!(same(&head, &expected("application/json", 27)), "{head}");
}

#[test]
fn head_404_405() {
    let ((status, head, _), flow) = one(b"HEAD /json HTTP/1.1\r\n\r\n");
    assert_eq!((status, flow), (200, Flow::NeedInput));
    assert!(head.contains("Content-Length: 27\r\n"), "{head}");
    let ((status, head, _), flow) = one(b"GET /nope HTTP/1.1\r\n\r\n");
    assert_eq!((status, flow), (404, Flow::NeedInput));
    assert!(head.contains("Content-Length: 0\r\n"), "{head}");
    let ((status, head, _), flow) = one(b"DELETE /plaintext HTTP/1.1\r\n\r\n");
    assert_eq!((status, flow), (405, Flow::NeedInput));
    assert!(head.contains("Allow: GET, HEAD\r\n"), "{head}");
}

#[test]
fn errors_answer_then_close() {
    for (input, status) in [
        (&b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"[..], 400),
        (
            b"POST /plaintext HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            501,
        ),
        (
            b"POST /plaintext HTTP/1.1\r\nContent-Length: 65537\r\n\r\n",
            413,
        ),
        (b"GE\x01T / HTTP/1.1\r\n\r\n", 400),
    ] {
        let ((got, head, _), flow) = one(input);
        assert_eq!((got, flow), (status, Flow::Close));
        assert!(head.contains("Connection: close\r\n"), "{head}");
    }
    let mut long = b"GET / HTTP/1.1\r\nX: ".to_vec();
    long.resize(9000, b'a');
    let ((status, _, _), flow) = one(&long);
    assert_eq!((status, flow), (431, Flow::Close));
}

#[test]
fn keep_alive_and_close() {
    let ((_, head, _), flow) = one(b"GET /plaintext HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_eq!(flow, Flow::Close);
    assert!(head.contains("Connection: close\r\n"));
    let ((_, head, _), flow) = one(b"GET /plaintext HTTP/1.0\r\n\r\n");
    assert_eq!(flow, Flow::Close);
    assert!(head.contains("Connection: close\r\n"));
    let ((_, head, _), flow) = one(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(flow, Flow::NeedInput);
    assert!(head.contains("Connection: keep-alive\r\n"));
    // Nothing after a close is answered.
    let mut conn = Connection::new(64 * 1024);
    let (r, flow) = run(
        &mut conn,
        b"GET /json HTTP/1.1\r\nConnection: close\r\n\r\nGET /json HTTP/1.1\r\n\r\n",
    );
    assert_eq!((r.len(), flow), (1, Flow::Close));
    assert_eq!(run(&mut conn, b"GET /json HTTP/1.1\r\n\r\n").1, Flow::Close);
}

#[test]
fn pipelined_and_split_requests() {
    let request = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut conn = Connection::new(64 * 1024);
    let (r, _) = run(&mut conn, &request.repeat(16));
    assert_eq!(r.len(), 16);
    let mut answered = 0;
    for byte in request.repeat(2) {
        answered += run(&mut conn, &[byte]).0.len();
    }
    assert_eq!(answered, 2);
    // A body is read and dropped, across reads.
    let (r, _) = run(
        &mut conn,
        b"POST /nope HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",
    );
    assert!(r.is_empty());
    let (r, _) = run(&mut conn, b"cdeGET /json HTTP/1.1\r\n\r\n");
    assert_eq!(r.iter().map(|r| r.0).collect::<Vec<_>>(), [404, 200]);
}

#[test]
fn output_stops_at_the_limit() {
    let mut conn = Connection::new(1000);
    conn.feed(&b"GET /plaintext HTTP/1.1\r\n\r\n".repeat(100));
    let mut out = Vec::new();
    assert_eq!(conn.execute(&mut out), Flow::OutputFull);
    let one = out.len() / out.windows(4).filter(|w| w == b"\r\n\r\n").count();
    assert!(out.len() >= 1000 && out.len() < 1000 + one, "{}", out.len());
    out.clear();
    let mut batches = 1;
    while conn.execute(&mut out) == Flow::OutputFull {
        batches += 1;
        out.clear();
    }
    assert!(batches > 1);
    assert_eq!(conn.pending_input(), 0);
}
