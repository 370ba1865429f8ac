//! The protocol checks of a server that is already running at an address, whoever started
//! it: what `cargo xtask bench` puts an outside server (`--servers 'ext:NAME=COMMAND'`)
//! through before it measures it, and what `cargo xtask conform` runs alone. They hold a
//! server to what the bench's clients rely on (docs/PROTOCOL.md): echo byte for byte, large
//! and pipelined, a half-close, many connections at once; the kv replies loadgen and
//! redis-benchmark read; TechEmpower's plaintext and json, pipelined, and a 404. (The full
//! suite, `tests/`, starts ours itself and holds them to every rule besides.) Each check
//! names itself in its error, and every wait is bounded by [`IO_TIMEOUT`].

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;

use crate::net::{IO_TIMEOUT, connect, is_timeout, read_to_close, shutdown_write};
use crate::rng::pattern;

/// One check: its name, and what it does against a server at an address.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    pub name: &'static str,
    pub run: fn(SocketAddr) -> io::Result<()>,
}

/// The checks of `proto` (`echo`, `kv`, `http`), or `None` for a protocol without them.
pub fn checks(proto: &str) -> Option<&'static [Check]> {
    match proto {
        "echo" => Some(ECHO),
        "kv" => Some(KV),
        "http" => Some(HTTP),
        _ => None,
    }
}

/// Runs every check of `proto` against `addr`, in order, and stops at the first that fails:
/// `Err((its name, why))`.
pub fn run(proto: &str, addr: SocketAddr) -> Result<(), (&'static str, String)> {
    let Some(list) = checks(proto) else {
        return Err((
            "protocol",
            format!("no checks of the protocol `{proto}` (echo, kv, http)"),
        ));
    };
    for c in list {
        (c.run)(addr).map_err(|e| (c.name, e.to_string()))?;
    }
    Ok(())
}

const ECHO: &[Check] = &[
    Check {
        name: "echo_bytes",
        run: echo_bytes,
    },
    Check {
        name: "echo_one_mebibyte",
        run: echo_large,
    },
    Check {
        name: "echo_half_close",
        run: echo_half_close,
    },
    Check {
        name: "echo_100_connections",
        run: echo_many,
    },
];

const KV: &[Check] = &[
    Check {
        name: "kv_ping",
        run: kv_ping,
    },
    Check {
        name: "kv_set_get",
        run: kv_set_get,
    },
    Check {
        name: "kv_pipelined",
        run: kv_pipelined,
    },
];

const HTTP: &[Check] = &[
    Check {
        name: "http_plaintext",
        run: http_plaintext,
    },
    Check {
        name: "http_json",
        run: http_json,
    },
    Check {
        name: "http_pipelined",
        run: http_pipelined,
    },
    Check {
        name: "http_not_found",
        run: http_not_found,
    },
];

fn wrong(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads exactly `n` bytes.
fn read_n(s: &mut TcpStream, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).map_err(|e| {
        if is_timeout(&e) {
            io::Error::new(
                e.kind(),
                format!(
                    "waiting for {n} bytes: not all came back within {} s",
                    IO_TIMEOUT.as_secs()
                ),
            )
        } else {
            io::Error::new(e.kind(), format!("reading {n} bytes: {e}"))
        }
    })?;
    Ok(buf)
}

/// Writes `out` and checks that the same bytes come back.
fn echo_once(s: &mut TcpStream, out: &[u8]) -> io::Result<()> {
    s.write_all(out)?;
    let back = read_n(s, out.len())?;
    if back != out {
        let at = back.iter().zip(out).position(|(a, b)| a != b).unwrap_or(0);
        return Err(wrong(format!(
            "echoed {} bytes that differ from those sent at byte {at}",
            out.len()
        )));
    }
    Ok(())
}

fn echo_bytes(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    for msg in [&b"hello\n"[..], b"x", &[0u8, 255, 13, 10, 0][..]] {
        echo_once(&mut s, msg)?;
    }
    Ok(())
}

/// A mebibyte written from a thread while it is read back: a server that must write before
/// it reads more would stall a client that did the same.
fn echo_large(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    let mut out = vec![0; 1 << 20];
    pattern(7, 0, &mut out);
    let mut w = s.try_clone()?;
    let sent = out.clone();
    let writer = thread::spawn(move || w.write_all(&sent));
    let back = read_n(&mut s, out.len());
    writer
        .join()
        .map_err(|_| wrong("the writer panicked".into()))??;
    if back? != out {
        return Err(wrong("the mebibyte came back different".into()));
    }
    Ok(())
}

/// Bytes then a half-close: every byte comes back, then the server closes.
fn echo_half_close(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    let mut out = vec![0; 4096];
    pattern(9, 0, &mut out);
    s.write_all(&out)?;
    shutdown_write(&s)?;
    let back = read_to_close(&mut s, out.len())?;
    if back != out {
        return Err(wrong(format!(
            "after a half-close got {} bytes back of {} (or different ones), then EOF",
            back.len(),
            out.len()
        )));
    }
    Ok(())
}

/// A hundred connections open at once, each echoed in turn.
fn echo_many(addr: SocketAddr) -> io::Result<()> {
    let mut conns = (0..100)
        .map(|_| connect(addr))
        .collect::<io::Result<Vec<_>>>()?;
    for (i, s) in conns.iter_mut().enumerate() {
        echo_once(s, format!("connection {i:03}\n").as_bytes())?;
    }
    Ok(())
}

/// Sends `req` and checks that exactly `want` comes back.
fn exchange(s: &mut TcpStream, req: &[u8], want: &[u8]) -> io::Result<()> {
    s.write_all(req)?;
    let got = read_n(s, want.len())?;
    if got != want {
        return Err(wrong(format!(
            "sent {:?}, want {:?}, got {:?}",
            String::from_utf8_lossy(req),
            String::from_utf8_lossy(want),
            String::from_utf8_lossy(&got)
        )));
    }
    Ok(())
}

fn kv_ping(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    exchange(&mut s, b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n")?;
    exchange(&mut s, b"PING\r\n", b"+PONG\r\n")
}

fn kv_set_get(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    exchange(
        &mut s,
        b"*3\r\n$3\r\nSET\r\n$12\r\nconform:key1\r\n$5\r\nhello\r\n",
        b"+OK\r\n",
    )?;
    exchange(
        &mut s,
        b"*2\r\n$3\r\nGET\r\n$12\r\nconform:key1\r\n",
        b"$5\r\nhello\r\n",
    )?;
    exchange(
        &mut s,
        b"*2\r\n$3\r\nGET\r\n$13\r\nconform:none0\r\n",
        b"$-1\r\n",
    )?;
    exchange(
        &mut s,
        b"*2\r\n$3\r\nDEL\r\n$12\r\nconform:key1\r\n",
        b":1\r\n",
    )
}

fn kv_pipelined(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    let (mut req, mut want) = (Vec::new(), Vec::new());
    for i in 0..16 {
        let v = format!("value{i:02}");
        req.extend(
            format!(
                "*3\r\n$3\r\nSET\r\n$10\r\nconform:{i:02}\r\n${}\r\n{v}\r\n",
                v.len()
            )
            .bytes(),
        );
        req.extend(format!("*2\r\n$3\r\nGET\r\n$10\r\nconform:{i:02}\r\n").bytes());
        want.extend(format!("+OK\r\n${}\r\n{v}\r\n", v.len()).bytes());
    }
    exchange(&mut s, &req, &want)
}

/// An HTTP/1.1 response: its status, its headers (names in lower case) and its body.
type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// Reads one HTTP/1.1 response, its body by `Content-Length`.
fn response(s: &mut TcpStream) -> io::Result<Response> {
    let mut head = Vec::new();
    let mut byte = [0; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Err(wrong("a response head of more than 16 KiB".into()));
        }
        s.read_exact(&mut byte)
            .map_err(|e| io::Error::new(e.kind(), format!("reading a response head: {e}")))?;
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code = status
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| wrong(format!("not an HTTP/1.1 status line: {status:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .ok_or_else(|| wrong(format!("no Content-Length in {text:?}")))?;
    Ok((code, headers, read_n(s, len)?))
}

/// `GET path` answered 200 with `body` and a `Content-Type` that starts with `kind`, and the
/// `Server` and `Date` headers TechEmpower asks for.
fn get_ok(s: &mut TcpStream, path: &str, body: &[u8], kind: &str) -> io::Result<()> {
    let (code, headers, got) = response(s)?;
    let has = |n: &str| {
        headers
            .iter()
            .find(|(h, _)| h == n)
            .map(|(_, v)| v.as_str())
    };
    if code != 200 || got != body {
        return Err(wrong(format!(
            "GET {path}: want 200 and {:?}, got {code} and {:?}",
            String::from_utf8_lossy(body),
            String::from_utf8_lossy(&got)
        )));
    }
    if !has("content-type").is_some_and(|t| t.starts_with(kind)) {
        return Err(wrong(format!("GET {path}: Content-Type is not {kind}")));
    }
    for h in ["server", "date"] {
        if has(h).is_none() {
            return Err(wrong(format!("GET {path}: no {h} header")));
        }
    }
    Ok(())
}

fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")
}

fn http_plaintext(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    s.write_all(request("/plaintext").as_bytes())?;
    get_ok(&mut s, "/plaintext", b"Hello, World!", "text/plain")
}

fn http_json(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    s.write_all(request("/json").as_bytes())?;
    get_ok(
        &mut s,
        "/json",
        br#"{"message":"Hello, World!"}"#,
        "application/json",
    )
}

fn http_pipelined(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    s.write_all(request("/plaintext").repeat(16).as_bytes())?;
    for _ in 0..16 {
        get_ok(
            &mut s,
            "/plaintext (16 pipelined)",
            b"Hello, World!",
            "text/plain",
        )?;
    }
    Ok(())
}

fn http_not_found(addr: SocketAddr) -> io::Result<()> {
    let mut s = connect(addr)?;
    s.write_all(request("/no-such-page").as_bytes())?;
    let (code, _, _) = response(&mut s)?;
    if code != 404 {
        return Err(wrong(format!("GET /no-such-page: want 404, got {code}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server on loopback that runs `serve` on each connection, on a thread of its own.
    fn serve(serve: fn(TcpStream)) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            for s in l.incoming().flatten() {
                thread::spawn(move || serve(s));
            }
        });
        addr
    }

    #[test]
    fn a_true_echo_passes_and_a_wrong_one_is_named() {
        let good = serve(|mut s| {
            let _ = s.set_read_timeout(Some(IO_TIMEOUT));
            let mut r = s.try_clone().unwrap();
            let _ = io::copy(&mut r, &mut s);
        });
        assert_eq!(run("echo", good), Ok(()));
        // Upper-cases what it echoes: the first check names it.
        let bad = serve(|mut s| {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = s.read(&mut buf) {
                let up = buf[..n].to_ascii_uppercase();
                if s.write_all(&up).is_err() {
                    break;
                }
            }
        });
        let (name, why) = run("echo", bad).unwrap_err();
        assert_eq!(name, "echo_bytes", "{why}");
        assert!(why.contains("differ"), "{why}");
        // Never closes after a half-close: named, after IO_TIMEOUT at most.
        let stays = serve(|mut s| {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = s.read(&mut buf) {
                let _ = s.write_all(&buf[..n]);
            }
            thread::sleep(IO_TIMEOUT * 2);
        });
        assert_eq!(run("echo", stays).unwrap_err().0, "echo_half_close");
        assert_eq!(run("chat", good).unwrap_err().0, "protocol");
    }
}
