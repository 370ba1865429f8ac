//! Key-value conformance (PROTOCOL.md "Key-value", docs/protocol-notes.md "Kv"): reply
//! bytes as redis-server 7 sends them, error texts and protocol errors included, through
//! raw bytes and through a real client (the `redis` crate); pipelining split anywhere;
//! one store per server; bounded memory under a client that pipelines and never reads.
//!
//! The reply checks run against redis-server itself too, when it is installed
//! (`redis_server_is_the_reference`), so that they are shown to encode Redis's behaviour
//! and not ours. The bounded-memory check does not: Redis buffers such a client's
//! replies without limit by default, which is what ours must not do.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use conformance::net::{self, Deadline, read_to_close, shutdown_write};
use conformance::{IO_TIMEOUT, Limit, Need, SERVERS, Server, Target};
use proto::resp::{Reply, encode_request, parse_reply};

conformance::conformance_tests!(
    kv_raw_replies needs Kv,
    kv_redis_client needs Kv,
    kv_pipelined_splits needs Kv,
    kv_one_store_for_all_connections needs Kv,
    kv_bounded_memory needs Kv & ReadPause,
    kv_large_replies_to_a_client_that_never_reads_stay_bounded needs Kv,
);

const MIB: usize = 1 << 20;

/// The command lines a server serves kv with: every server plain, and srv-fiber and
/// srv-go also with the article's one-owner design.
fn kv_variants(target: &Target) -> Vec<Vec<&'static str>> {
    let mut variants = vec![vec!["--proto", "kv"]];
    if matches!(target.spec().bin, "srv-fiber" | "srv-go") {
        variants.push(vec!["--proto", "kv", "--kv-owner"]);
    }
    variants
}

/// A request as an array of bulk strings.
fn req(words: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_request(&mut out, words);
    out
}

/// What one case sends on a fresh connection and the exact bytes it gets back; `closes`
/// when the server must then close the connection.
struct Case {
    send: Vec<u8>,
    reply: &'static [u8],
    closes: bool,
}

fn case(send: impl Into<Vec<u8>>, reply: &'static [u8]) -> Case {
    Case {
        send: send.into(),
        reply,
        closes: false,
    }
}

fn closing(send: impl Into<Vec<u8>>, reply: &'static [u8]) -> Case {
    Case {
        send: send.into(),
        reply,
        closes: true,
    }
}

/// Every case, with the bytes redis-server 7.0 sends. Keys are distinct per case, so
/// the cases do not depend on each other's order.
fn cases() -> Vec<Case> {
    let cat = |parts: &[Vec<u8>]| parts.concat();
    vec![
        case(req(&[b"PING"]), b"+PONG\r\n"),
        case(req(&[b"ping", b"hi"]), b"$2\r\nhi\r\n"),
        case(req(&[b"ECHO", b"a\r\nb"]), b"$4\r\na\r\nb\r\n"),
        case(
            cat(&[req(&[b"SET", b"c1", b"v"]), req(&[b"GET", b"c1"]), req(&[b"GET", b"c1-none"])]),
            b"+OK\r\n$1\r\nv\r\n$-1\r\n",
        ),
        case(
            cat(&[
                req(&[b"SET", b"c2\0\xff", b"\r\n\0"]),
                req(&[b"GET", b"c2\0\xff"]),
            ]),
            b"+OK\r\n$3\r\n\r\n\0\r\n",
        ),
        case(
            cat(&[
                req(&[b"SET", b"c3", b"1", b"NX"]),
                req(&[b"SET", b"c3", b"2", b"NX"]),
                req(&[b"SET", b"c3-none", b"2", b"XX"]),
                req(&[b"SET", b"c3", b"3", b"XX", b"GET"]),
                req(&[b"GET", b"c3"]),
            ]),
            b"+OK\r\n$-1\r\n$-1\r\n$1\r\n1\r\n$1\r\n3\r\n",
        ),
        case(req(&[b"SET", b"c4", b"v", b"NX", b"XX"]), b"-ERR syntax error\r\n"),
        case(req(&[b"SET", b"c4", b"v", b"EX"]), b"-ERR syntax error\r\n"),
        case(req(&[b"SET", b"c4", b"v", b"EX", b"1", b"PX", b"1"]), b"-ERR syntax error\r\n"),
        case(
            req(&[b"SET", b"c4", b"v", b"EX", b"x"]),
            b"-ERR value is not an integer or out of range\r\n",
        ),
        case(
            req(&[b"SET", b"c4", b"v", b"PX", b"0"]),
            b"-ERR invalid expire time in 'set' command\r\n",
        ),
        case(
            req(&[b"SET", b"c4", b"v", b"EX", b"9223372036854776"]),
            b"-ERR invalid expire time in 'set' command\r\n",
        ),
        case(
            cat(&[
                req(&[b"SET", b"c5", b"v", b"EX", b"100"]),
                req(&[b"TTL", b"c5"]),
                req(&[b"SET", b"c5", b"w"]),
                req(&[b"TTL", b"c5"]),
                req(&[b"SET", b"c5", b"w", b"PXAT", b"1"]),
                req(&[b"EXISTS", b"c5"]),
            ]),
            b"+OK\r\n:100\r\n+OK\r\n:-1\r\n+OK\r\n:0\r\n",
        ),
        case(
            cat(&[
                req(&[b"INCR", b"c6"]),
                req(&[b"INCRBY", b"c6", b"41"]),
                req(&[b"DECR", b"c6"]),
                req(&[b"DECRBY", b"c6", b"-2"]),
                req(&[b"INCRBY", b"c6", b"x"]),
                req(&[b"SET", b"c6", b"9223372036854775807"]),
                req(&[b"INCR", b"c6"]),
                req(&[b"SET", b"c6", b"01"]),
                req(&[b"INCR", b"c6"]),
            ]),
            b":1\r\n:42\r\n:41\r\n:43\r\n-ERR value is not an integer or out of range\r\n+OK\r\n\
-ERR increment or decrement would overflow\r\n+OK\r\n-ERR value is not an integer or out of range\r\n",
        ),
        case(
            cat(&[
                req(&[b"MSET", b"c7a", b"1", b"c7b", b"2"]),
                req(&[b"MGET", b"c7a", b"c7-none", b"c7b"]),
                req(&[b"EXISTS", b"c7a", b"c7a", b"c7-none"]),
                req(&[b"DEL", b"c7a", b"c7a", b"c7-none"]),
                req(&[b"MSET", b"c7a", b"1", b"c7b"]),
            ]),
            b"+OK\r\n*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n:2\r\n:1\r\n\
-ERR wrong number of arguments for 'mset' command\r\n",
        ),
        case(req(&[b"GET"]), b"-ERR wrong number of arguments for 'get' command\r\n"),
        case(req(&[b"get", b"a", b"b"]), b"-ERR wrong number of arguments for 'get' command\r\n"),
        case(
            req(&[b"PING", b"a", b"b"]),
            b"-ERR wrong number of arguments for 'ping' command\r\n",
        ),
        case(
            req(&[b"NOSUCH", b"a", b"b\r\nc"]),
            b"-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b  c' \r\n",
        ),
        case(b"nosuch\r\n".to_vec(), b"-ERR unknown command 'nosuch', with args beginning with: \r\n"),
        case(
            cat(&[req(&[b"SELECT", b"0"]), req(&[b"SELECT", b"16"]), req(&[b"SELECT", b"x"])]),
            b"+OK\r\n-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n",
        ),
        case(req(&[b"FLUSHDB", b"x"]), b"-ERR syntax error\r\n"),
        case(req(&[b"DBSIZE", b"x"]), b"-ERR wrong number of arguments for 'dbsize' command\r\n"),
        case(
            // One name a request: with several, Redis lists them in its dict's order,
            // which changes from one run to the next.
            cat(&[req(&[b"CONFIG", b"GET", b"appendonly"]), req(&[b"config", b"get", b"save"])]),
            b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n*2\r\n$4\r\nsave\r\n$0\r\n\r\n",
        ),
        case(
            req(&[b"CONFIG", b"GET"]),
            b"-ERR wrong number of arguments for 'config|get' command\r\n",
        ),
        case(
            req(&[b"CONFIG", b"NOSUCH"]),
            b"-ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.\r\n",
        ),
        // Inline commands, with Redis's quoting.
        case(
            b"SET c8 \"a b\\x41\\n\" \r\nGET c8\r\nGET 'c8'\n\r\n  \r\n".to_vec(),
            b"+OK\r\n$5\r\na bA\n\r\n$5\r\na bA\n\r\n",
        ),
        // Requests of no words get no reply.
        case(b"*0\r\n*-1\r\nPING\r\n".to_vec(), b"+PONG\r\n"),
        closing(
            cat(&[req(&[b"PING"]), req(&[b"QUIT"]), req(&[b"PING"])]),
            b"+PONG\r\n+OK\r\n",
        ),
        closing(b"PING\r\n*x\r\nPING\r\n".to_vec(), b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"),
        closing(b"*1\r\n:1\r\n".to_vec(), b"-ERR Protocol error: expected '$', got ':'\r\n"),
        closing(b"*1\r\n$-1\r\n".to_vec(), b"-ERR Protocol error: invalid bulk length\r\n"),
        closing(
            b"*1\r\n$536870913\r\n".to_vec(),
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        closing(
            b"ECHO \"abc\r\n".to_vec(),
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        closing(
            vec![b'x'; 64 * 1024 + 1],
            b"-ERR Protocol error: too big inline request\r\n",
        ),
    ]
}

/// Runs every case against the kv server at `addr`.
fn check_cases(addr: SocketAddr) -> Result<()> {
    for (i, case) in cases().into_iter().enumerate() {
        let what = || format!("case {i}: {}", case.send.escape_ascii());
        let mut stream = net::connect(addr)?;
        stream.write_all(&case.send)?;
        if case.closes {
            let got = read_to_close(&mut stream, case.reply.len() + 1024).with_context(what)?;
            ensure!(
                got == case.reply,
                "{}: got {:?}, want {:?} then a close",
                what(),
                got.escape_ascii().to_string(),
                case.reply.escape_ascii().to_string()
            );
            continue;
        }
        let mut got = vec![0; case.reply.len()];
        stream.read_exact(&mut got).with_context(what)?;
        ensure!(
            got == case.reply,
            "{}: got {:?}, want {:?}",
            what(),
            got.escape_ascii().to_string(),
            case.reply.escape_ascii().to_string()
        );
        // Nothing more than the expected replies: the next reply is a PONG.
        stream.write_all(b"PING\r\n")?;
        let mut pong = [0; 7];
        stream.read_exact(&mut pong).with_context(what)?;
        ensure!(
            &pong == b"+PONG\r\n",
            "{}: more replies than expected",
            what()
        );
    }
    Ok(())
}

fn kv_raw_replies(target: &Target) -> Result<()> {
    for args in kv_variants(target) {
        let server = target.start(&args)?;
        check_cases(server.addr()).with_context(|| args.join(" "))?;
    }
    Ok(())
}

/// A real client: redis-rs's connection setup, typed replies, a pipeline, errors as
/// it reports them, and a key that expires.
fn check_redis_client(addr: SocketAddr) -> Result<()> {
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    let mut con = client.get_connection_with_timeout(IO_TIMEOUT)?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;

    let pong: String = redis::cmd("PING").query(&mut con)?;
    ensure!(pong == "PONG", "PING: {pong}");
    let value: &[u8] = b"\0\xffbinary\r\nvalue";
    let () = redis::cmd("SET")
        .arg(b"rc:k\0")
        .arg(value)
        .query(&mut con)?;
    let got: Vec<u8> = redis::cmd("GET").arg(b"rc:k\0").query(&mut con)?;
    ensure!(got == value, "GET of a binary value: {got:?}");
    let none: Option<Vec<u8>> = redis::cmd("GET").arg("rc:none").query(&mut con)?;
    ensure!(none.is_none(), "GET of a missing key: {none:?}");

    let (a, b, c): (i64, i64, Vec<Option<String>>) = redis::pipe()
        .cmd("INCR")
        .arg("rc:n")
        .cmd("INCRBY")
        .arg("rc:n")
        .arg(9)
        .cmd("MSET")
        .arg("rc:x")
        .arg("1")
        .arg("rc:y")
        .arg("2")
        .ignore()
        .cmd("MGET")
        .arg("rc:x")
        .arg("rc:none")
        .arg("rc:y")
        .query(&mut con)?;
    ensure!((a, b) == (1, 10), "INCR, INCRBY: {a}, {b}");
    ensure!(
        c == [Some("1".to_string()), None, Some("2".to_string())],
        "MGET: {c:?}"
    );

    let err = redis::cmd("INCR")
        .arg(b"rc:k\0")
        .query::<i64>(&mut con)
        .err()
        .context("INCR of a non-number must fail")?;
    ensure!(
        err.to_string()
            .contains("value is not an integer or out of range"),
        "INCR of a non-number: {err}"
    );

    let () = redis::cmd("SET")
        .arg("rc:ttl")
        .arg("v")
        .arg("PX")
        .arg(50)
        .query(&mut con)?;
    // Lazy expiry: the key is gone once its time has passed, when it is next touched.
    let deadline = Deadline::after(Duration::from_secs(5));
    loop {
        let v: Option<String> = redis::cmd("GET").arg("rc:ttl").query(&mut con)?;
        if v.is_none() {
            break;
        }
        deadline.check("a key set with PX 50 to expire")?;
        thread::sleep(Duration::from_millis(10));
    }
    let exists: i64 = redis::cmd("EXISTS").arg("rc:ttl").query(&mut con)?;
    ensure!(exists == 0, "an expired key still exists");
    Ok(())
}

fn kv_redis_client(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "kv"])?;
    check_redis_client(server.addr())
}

/// A long pipeline written in pieces cut at every offset class, read back whole: the
/// replies are those of the same requests sent one by one, in order.
fn kv_pipelined_splits(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "kv"])?;
    let mut stream = server.connect()?;
    let mut requests = Vec::new();
    let mut want = Vec::new();
    for i in 0..2000u32 {
        let key = format!("pl:{}", i % 50);
        let value = format!("{i}");
        requests.extend(req(&[b"SET", key.as_bytes(), value.as_bytes()]));
        requests.extend(req(&[b"GET", key.as_bytes()]));
        requests.extend_from_slice(b"INCR pl:n\r\n");
        want.extend_from_slice(b"+OK\r\n");
        want.extend(format!("${}\r\n{value}\r\n", value.len()).into_bytes());
        want.extend(format!(":{}\r\n", i + 1).into_bytes());
    }
    let reader = {
        let mut stream = stream.try_clone()?;
        let len = want.len();
        thread::spawn(move || -> io::Result<Vec<u8>> {
            let mut got = vec![0; len];
            stream.read_exact(&mut got)?;
            Ok(got)
        })
    };
    // Pieces of 1, 2, 3, … 97 bytes, then again: every request is cut somewhere.
    let mut at = 0;
    let mut size = 1;
    while at < requests.len() {
        let end = (at + size).min(requests.len());
        stream.write_all(&requests[at..end])?;
        at = end;
        size = size % 97 + 1;
    }
    let got = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader panicked"))?
        .context("reading the pipeline's replies")?;
    if got != want {
        let first = (0..got.len()).find(|&i| got[i] != want[i]).unwrap_or(0);
        bail!(
            "the replies differ from byte {first}: got {:?}",
            got[first..(first + 40).min(got.len())]
                .escape_ascii()
                .to_string()
        );
    }
    Ok(())
}

/// What one connection writes, every other one reads, on every worker.
fn kv_one_store_for_all_connections(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "kv", "--workers", "2"])?;
    let mut conns = (0..8)
        .map(|_| server.connect())
        .collect::<io::Result<Vec<_>>>()?;
    for (i, conn) in conns.iter_mut().enumerate() {
        conn.write_all(&req(&[b"SET", format!("sh:{i}").as_bytes(), b"v"]))?;
        conn.write_all(b"INCR sh:n\r\n")?;
        let mut back = [0; 5];
        conn.read_exact(&mut back)?;
        ensure!(&back == b"+OK\r\n", "SET on connection {i}");
        let reply = read_reply(conn)?;
        ensure!(
            reply == Reply::Integer(i as i64 + 1),
            "INCR on connection {i}: {reply:?}"
        );
    }
    for (i, conn) in conns.iter_mut().enumerate() {
        let keys: Vec<String> = (0..8).map(|k| format!("sh:{k}")).collect();
        let mut words: Vec<&[u8]> = vec![b"EXISTS"];
        words.extend(keys.iter().map(|k| k.as_bytes()));
        conn.write_all(&req(&words))?;
        let reply = read_reply(conn)?;
        ensure!(
            reply == Reply::Integer(8),
            "EXISTS of all keys on connection {i}: {reply:?}"
        );
    }
    Ok(())
}

/// Reads one reply.
fn read_reply(stream: &mut TcpStream) -> Result<Reply> {
    let mut buf = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        if let Some((reply, used)) = parse_reply(&buf)? {
            ensure!(used == buf.len(), "more bytes than one reply");
            return Ok(reply);
        }
        let n = stream.read(&mut chunk)?;
        ensure!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The servers that cannot pause a client (`Limit::NoReadPause`: srv-go `--model gnet`)
/// are held to what they do instead of `kv_bounded_memory`: they cut a client that never
/// reads, their memory bounded meanwhile.
#[test]
fn servers_that_cannot_pause_cut_a_kv_client_that_never_reads() {
    for spec in SERVERS
        .iter()
        .filter(|s| s.limits.contains(&Limit::NoReadPause))
    {
        conformance::run_check(
            spec,
            "kv_never_reading_client_is_cut",
            &[Need::Kv],
            |target| -> Result<()> {
                for args in kv_variants(target) {
                    kv_never_reading_client_is_cut(target, &args)
                        .with_context(|| args.join(" "))?;
                }
                Ok(())
            },
        );
    }
}

/// Issue 61's client, as a user would write it: it SETs a 300 KB value, then pipelines GETs
/// of it 1,000 at a time and never reads. Every server that speaks kv, whether it pauses
/// such a client or cuts it, must bound what it holds per request, not per read: one 64 KiB
/// read holds about 2,700 such GETs, 800 MB of replies. The flood is bounded by count
/// (32 MiB past what the kernel's buffers hold, so that whatever way it ends, by a cut, a
/// stall of the writes or its count, the server has read and handled a good part of it)
/// and by a stall of the writes; the server's peak RSS (`VmHWM`) must grow by less than
/// [`LARGE_RSS_BOUND`] over it.
fn kv_large_replies_to_a_client_that_never_reads_stay_bounded(target: &Target) -> Result<()> {
    for args in kv_variants(target) {
        large_replies_stay_bounded(target, &args).with_context(|| args.join(" "))?;
    }
    Ok(())
}

/// What the server may grow by under issue 61's client: a reply of 300 KB held per
/// connection, and the input and kernel-side buffers around it, fit many times over.
const LARGE_RSS_BOUND: u64 = 256 << 20;

fn large_replies_stay_bounded(target: &Target, args: &[&str]) -> Result<()> {
    const VALUE: usize = 300 * 1000;
    const BATCH: usize = 1000;
    const STALL: Duration = Duration::from_secs(1);
    let (wmem, rmem) = net::tcp_buffer_max();
    let server = target.start(args)?;
    let mut client = server.connect()?;
    net::set_recv_buffer(&client, 64 * 1024)?;
    client.write_all(&req(&[b"SET", b"big:k", &vec![b'v'; VALUE]]))?;
    let mut ok = [0; 5];
    client.read_exact(&mut ok)?;
    ensure!(&ok == b"+OK\r\n", "SET of a 300 KB value answered {ok:?}");
    let baseline = server.rss()?;

    let gets = req(&[b"GET", b"big:k"]).repeat(BATCH);
    let batches = (32 * MIB + wmem + rmem).div_ceil(gets.len());
    let end = net::flood_with_request(&client, &gets, gets.len() * batches, STALL);
    let how = match end {
        Ok((sent, true)) => format!("paused after {} of {batches} batches", sent / gets.len()),
        Ok((_, false)) => format!("took all {batches} batches"),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ) =>
        {
            "cut the client".to_string()
        }
        Err(e) => return Err(e).context("flooding GETs of a 300 KB value"),
    };
    let grown = server.peak_rss()?.saturating_sub(baseline);
    eprintln!(
        "kv_large_replies: {} {how}; peak RSS grew by {} MiB",
        target.spec().id,
        grown >> 20
    );
    ensure!(
        grown < LARGE_RSS_BOUND,
        "server peak RSS grew by {} MiB under GETs of a 300 KB value from a client that never \
         reads (it {how}; bound {} MiB)",
        grown >> 20,
        LARGE_RSS_BOUND >> 20
    );
    Ok(())
}

/// The value the floods GET: a reply five times its request.
const FLOOD_VALUE: [u8; 100] = [b'v'; 100];

/// Two connections to `server`: the flood's, its receive buffer small, which stores a 100-byte
/// value under `key`, and another, which PINGs; with the server's RSS then, the baseline.
fn flood_pair(server: &Server, key: &[u8]) -> Result<(TcpStream, TcpStream, u64)> {
    let mut flood = server.connect()?;
    net::set_recv_buffer(&flood, 64 * 1024)?;
    let mut other = server.connect()?;
    flood.write_all(&req(&[b"SET", key, &FLOOD_VALUE]))?;
    let mut ok = [0; 5];
    flood.read_exact(&mut ok)?;
    other.write_all(b"PING\r\n")?;
    let mut pong = [0; 7];
    other.read_exact(&mut pong)?;
    Ok((flood, other, server.rss()?))
}

/// A client that pipelines a bounded flood of GETs of a 100-byte value and never reads is
/// cut before the flood ends, the server's RSS grows by less than a bound that a server
/// buffering the replies would pass, and another client is served throughout.
fn kv_never_reading_client_is_cut(target: &Target, args: &[&str]) -> Result<()> {
    const RSS_BOUND: u64 = 32 << 20;
    const STALL: Duration = Duration::from_secs(2);
    let (wmem, rmem) = net::tcp_buffer_max();
    let flood_cap = 32 * MIB + wmem + rmem;

    let server = target.start(args)?;
    let (flood, mut other, baseline) = flood_pair(&server, b"cut:k")?;
    let mut pong = [0; 7];

    let end = net::flood_with_request(&flood, &req(&[b"GET", b"cut:k"]), flood_cap, STALL);
    net::expect_cut(end).context("a client that never reads")?;

    let grown = server.rss()?.saturating_sub(baseline);
    ensure!(
        grown < RSS_BOUND,
        "server RSS grew by {} MiB before it cut a client that never reads (bound {} MiB)",
        grown >> 20,
        RSS_BOUND >> 20
    );
    other.write_all(b"PING\r\n")?;
    other
        .read_exact(&mut pong)
        .context("the other client after the cut")?;
    ensure!(&pong == b"+PONG\r\n", "the other client got {pong:?}");
    Ok(())
}

/// A client that pipelines GETs of a 100-byte value (a reply five times its request)
/// and never reads: the server must stop reading it once its pending replies pass the
/// limit, grow by no more than a bound, keep serving others, and lose nothing.
fn kv_bounded_memory(target: &Target) -> Result<()> {
    for args in kv_variants(target) {
        bounded_memory(target, &args).with_context(|| args.join(" "))?;
    }
    Ok(())
}

fn bounded_memory(target: &Target, args: &[&str]) -> Result<()> {
    // A server that buffered replies without bound would hold five times the flood
    // (less what the kernel holds), far past this; a conforming one holds 64 KiB of
    // replies and a read.
    const RSS_BOUND: u64 = 32 << 20;
    const STALL: Duration = Duration::from_millis(300);
    let (wmem, rmem) = net::tcp_buffer_max();
    let flood_cap = 32 * MIB + wmem + rmem;

    let server = target.start(args)?;
    let (mut flood, mut other, baseline) = flood_pair(&server, b"bm:k")?;
    let mut pong = [0; 7];

    let get = req(&[b"GET", b"bm:k"]);
    let (sent, stalled) = net::flood_with_request(&flood, &get, flood_cap, STALL)?;
    eprintln!(
        "kv_bounded_memory: the flood stalled after {} KiB",
        sent / 1024
    );
    ensure!(
        stalled,
        "the server kept reading a client that never reads: {} MiB of requests accepted",
        sent / MIB
    );

    other.write_all(b"PING\r\n")?;
    other
        .read_exact(&mut pong)
        .context("the other client while one floods")?;
    ensure!(&pong == b"+PONG\r\n", "the other client got {pong:?}");

    let grown = server.rss()?.saturating_sub(baseline);
    ensure!(
        grown < RSS_BOUND,
        "server RSS grew by {} MiB under a client that never reads (bound {} MiB)",
        grown >> 20,
        RSS_BOUND >> 20
    );

    // Every complete request gets its reply once the client reads.
    shutdown_write(&flood)?;
    net::set_recv_buffer(&flood, 4 * MIB)?;
    let complete = sent / get.len();
    let mut one = Vec::new();
    proto::resp::encode_bulk(&mut one, &FLOOD_VALUE);
    let got = read_to_close(&mut flood, (complete + 1) * one.len())?;
    ensure!(
        got.len() == complete * one.len(),
        "{complete} complete GETs sent, {} bytes of replies came back ({} expected)",
        got.len(),
        complete * one.len()
    );
    ensure!(
        got.chunks(one.len()).all(|r| r == one),
        "a reply of the flood came back wrong"
    );
    Ok(())
}

/// srv-threads --mode process refuses kv, as it must (its processes share no store).
#[test]
fn kv_refused_in_process_mode() {
    let spec = conformance::SERVERS
        .iter()
        .find(|s| s.id == "threads_process")
        .expect("threads_process is in the server list");
    conformance::run_check(
        spec,
        "kv_refused_in_process_mode",
        &[],
        |target| -> Result<()> {
            let exit = target.run_to_exit(&["--proto", "kv"])?;
            ensure!(
                exit.code == Some(2) && exit.stderr.contains("--mode thread"),
                "expected exit status 2 naming --mode thread, got {}: {:?}",
                exit.describe_status(),
                exit.stderr
            );
            Ok(())
        },
    );
}

/// redis-server on a free loopback port, persistence off; killed on drop.
struct RedisServer {
    child: Child,
    addr: SocketAddr,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts redis-server, or says why it cannot (not installed).
fn start_redis() -> Result<Option<RedisServer>> {
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port();
    let spawned = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).context("starting redis-server"),
    };
    let server = RedisServer {
        child,
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
    };
    let deadline = Deadline::after(Duration::from_secs(10));
    while TcpStream::connect_timeout(&server.addr, IO_TIMEOUT).is_err() {
        deadline.check("redis-server to accept connections")?;
        thread::sleep(Duration::from_millis(20));
    }
    Ok(Some(server))
}

/// The same reply checks against redis-server 7: the cases encode Redis's behaviour.
#[test]
fn redis_server_is_the_reference() -> Result<()> {
    let Some(redis) = start_redis()? else {
        let line = "skipped redis-server: not installed \
                    (apt-get install redis-server redis-tools)\n";
        let _ = io::stderr().write_all(line.as_bytes());
        return Ok(());
    };
    check_cases(redis.addr).context("redis-server")?;
    check_redis_client(redis.addr).context("redis-server, through the redis crate")
}
