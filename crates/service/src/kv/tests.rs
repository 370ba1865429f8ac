//! The commands' replies, byte for byte as redis-server 7.0.15 sent them when checked by
//! hand (the conformance suite checks the same against a live redis-server), and the
//! connection's flow: pipelining, the output limit, closing.

use proto::resp::encode_request;

use super::{Connection, Flow, Store};

/// The replies to `requests` (each an array of bulk strings), sent as one batch.
fn run(store: &Store, requests: &[&[&[u8]]]) -> (Vec<u8>, Flow) {
    let mut input = Vec::new();
    for r in requests {
        encode_request(&mut input, r);
    }
    let mut conn = Connection::new();
    conn.feed(&input);
    let mut out = Vec::new();
    let flow = conn.execute(store, &mut out, usize::MAX);
    (out, flow)
}

fn replies(requests: &[&[&[u8]]]) -> Vec<u8> {
    run(&Store::new(), requests).0
}

#[test]
fn strings_and_counters() {
    assert_eq!(
        replies(&[
            &[b"SET", b"k", b"v"],
            &[b"get", b"k"],
            &[b"GET", b"nokey"],
            &[b"SET", b"i", b"abc"],
            &[b"INCR", b"i"],
            &[b"SET", b"i", b"9223372036854775807"],
            &[b"INCR", b"i"],
            &[b"INCRBY", b"i", b"x"],
            &[b"DECR", b"n"],
            &[b"INCRBY", b"n", b"10"],
            &[b"DECRBY", b"n", b"-9223372036854775808"],
            &[b"SET", b"i", b" 1"],
            &[b"INCR", b"i"],
            &[b"SET", b"i", b"-0"],
            &[b"INCR", b"i"],
        ]),
        b"+OK\r\n$1\r\nv\r\n$-1\r\n+OK\r\n-ERR value is not an integer or out of range\r\n+OK\r\n\
-ERR increment or decrement would overflow\r\n-ERR value is not an integer or out of range\r\n\
:-1\r\n:9\r\n-ERR decrement would overflow\r\n+OK\r\n-ERR value is not an integer or out of range\r\n\
+OK\r\n-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn set_options_in_redis_order() {
    let cases: &[(&[&[u8]], &[u8])] = &[
        (
            &[b"SET", b"k", b"v", b"NX", b"XX"],
            b"-ERR syntax error\r\n",
        ),
        (&[b"SET", b"k", b"v", b"EX"], b"-ERR syntax error\r\n"),
        (
            &[b"SET", b"k", b"v", b"EX", b"x"],
            b"-ERR value is not an integer or out of range\r\n",
        ),
        (
            &[b"SET", b"k", b"v", b"EX", b"0"],
            b"-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &[b"SET", b"k", b"v", b"PX", b"-1"],
            b"-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &[b"SET", b"k", b"v", b"EX", b"9223372036854776"],
            b"-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &[b"SET", b"k", b"v", b"PX", b"9223372036854775807"],
            b"-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &[b"SET", b"k", b"v", b"KEEPTTL", b"EX", b"1"],
            b"-ERR syntax error\r\n",
        ),
        (
            &[b"SET", b"k", b"v", b"EX", b"1", b"PX", b"1"],
            b"-ERR syntax error\r\n",
        ),
        (
            &[b"SET", b"k", b"v", b"EX", b"10", b"EX", b"20"],
            b"+OK\r\n",
        ),
        (
            &[b"SET", b"k"],
            b"-ERR wrong number of arguments for 'set' command\r\n",
        ),
    ];
    for (request, reply) in cases {
        assert_eq!(replies(&[request]), *reply, "{request:?}");
    }
    assert_eq!(
        replies(&[
            &[b"SET", b"k", b"1"],
            &[b"SET", b"k", b"v", b"GET"],
            &[b"SET", b"k", b"w", b"NX", b"GET"],
            &[b"SET", b"nx1", b"w", b"XX", b"GET"],
            &[b"SET", b"k", b"x", b"NX"],
            &[b"SET", b"nx2", b"x", b"XX"],
            &[b"SET", b"nx2", b"x", b"NX"],
        ]),
        b"+OK\r\n$1\r\n1\r\n$1\r\nv\r\n$-1\r\n$-1\r\n$-1\r\n+OK\r\n"
    );
}

#[test]
fn expiry_is_lazy_and_kept_by_incr() {
    let store = Store::new();
    // PXAT 1 is long past: the key is deleted at once, as Redis does.
    let (out, _) = run(
        &store,
        &[
            &[b"SET", b"gone", b"v", b"PXAT", b"1"],
            &[b"GET", b"gone"],
            &[b"SET", b"n", b"1", b"EX", b"100"],
            &[b"INCR", b"n"],
            &[b"TTL", b"n"],
            &[b"SET", b"n", b"5", b"KEEPTTL"],
            &[b"TTL", b"n"],
            &[b"SET", b"n", b"5"],
            &[b"TTL", b"n"],
            &[b"PTTL", b"nokey"],
        ],
    );
    assert_eq!(
        out,
        b"+OK\r\n$-1\r\n+OK\r\n:2\r\n:100\r\n+OK\r\n:100\r\n+OK\r\n:-1\r\n:-2\r\n"
    );
    assert_eq!(store.len(), 1);
}

#[test]
fn multi_key_commands() {
    assert_eq!(
        replies(&[
            &[b"MSET", b"a", b"1", b"b", b"2"],
            &[b"MGET", b"a", b"zz", b"b"],
            &[b"EXISTS", b"a", b"a", b"zz"],
            &[b"DEL", b"a", b"a", b"zz"],
            &[b"DBSIZE"],
            &[b"MSET", b"a", b"1", b"b"],
            &[b"FLUSHALL"],
            &[b"DBSIZE"],
            &[b"FLUSHALL", b"async", b"x"],
            &[b"FLUSHDB", b"SYNC"],
            &[b"DBSIZE", b"x"],
        ]),
        b"+OK\r\n*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n:2\r\n:1\r\n:1\r\n\
-ERR wrong number of arguments for 'mset' command\r\n+OK\r\n:0\r\n-ERR syntax error\r\n+OK\r\n\
-ERR wrong number of arguments for 'dbsize' command\r\n"
    );
}

#[test]
fn connection_commands_and_errors() {
    let cases: &[(&[&[u8]], &[u8])] = &[
        (&[b"PING"], b"+PONG\r\n"),
        (&[b"ping", b"a"], b"$1\r\na\r\n"),
        (
            &[b"PING", b"a", b"b"],
            b"-ERR wrong number of arguments for 'ping' command\r\n",
        ),
        (
            &[b"ECHO"],
            b"-ERR wrong number of arguments for 'echo' command\r\n",
        ),
        (&[b"SELECT", b"0"], b"+OK\r\n"),
        (
            &[b"SELECT", b"x"],
            b"-ERR value is not an integer or out of range\r\n",
        ),
        (&[b"SELECT", b"16"], b"-ERR DB index is out of range\r\n"),
        (
            &[b"CONFIG"],
            b"-ERR wrong number of arguments for 'config' command\r\n",
        ),
        (
            &[b"CONFIG", b"GET"],
            b"-ERR wrong number of arguments for 'config|get' command\r\n",
        ),
        (
            &[b"CONFIG", b"FOO"],
            b"-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n",
        ),
        (
            &[b"CONFIG", b"GET", b"save"],
            b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n",
        ),
        (
            &[b"CONFIG", b"GET", b"appendonly"],
            b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n",
        ),
        (&[b"CONFIG", b"GET", b"nosuch"], b"*0\r\n"),
        (
            &[b"CONFIG", b"GET", b"appendonly", b"save", b"SAVE"],
            b"*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$4\r\nsave\r\n$0\r\n\r\n",
        ),
        (
            &[b"COMMAND", b"FOO"],
            b"-ERR unknown subcommand 'FOO'. Try COMMAND HELP.\r\n",
        ),
        (
            &[b"FOO", b"a", b"b\r\nc"],
            b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b  c' \r\n",
        ),
        (
            &[b"foo"],
            b"-ERR unknown command 'foo', with args beginning with: \r\n",
        ),
        (
            &[b"FOO", b"a\x00b", b"c"],
            b"-ERR unknown command 'FOO', with args beginning with: 'a' 'c' \r\n",
        ),
    ];
    for (request, reply) in cases {
        assert_eq!(replies(&[request]), *reply, "{request:?}");
    }
    let (long, _) = run(&Store::new(), &[&[b"FOO", &[b'a'; 100], &[b'b'; 100]]]);
    let mut want = b"-ERR unknown command 'FOO', with args beginning with: '".to_vec();
    want.extend_from_slice(&[b'a'; 100]);
    want.extend_from_slice(b"' '");
    want.extend_from_slice(&[b'b'; 25]);
    want.extend_from_slice(b"' \r\n");
    assert_eq!(long, want);
}

#[test]
fn quit_protocol_errors_and_http_close() {
    let store = Store::new();
    assert_eq!(
        run(&store, &[&[b"QUIT", b"x"], &[b"PING"]]),
        (b"+OK\r\n".to_vec(), Flow::Close)
    );
    assert_eq!(
        run(&store, &[&[b"PING"], &[b"POST", b"/"], &[b"PING"]]),
        (Vec::new(), Flow::Close)
    );
    let mut conn = Connection::new();
    let mut out = Vec::new();
    conn.feed(b"PING\r\n*1\r\n:1\r\nPING\r\n");
    assert_eq!(conn.execute(&store, &mut out, usize::MAX), Flow::Close);
    assert_eq!(
        out,
        b"+PONG\r\n-ERR Protocol error: expected '$', got ':'\r\n"
    );
    conn.feed(b"PING\r\n");
    assert_eq!(conn.execute(&store, &mut out, usize::MAX), Flow::Close);
}

#[test]
fn output_stops_at_the_limit_and_resumes() {
    let store = Store::new();
    let mut conn = Connection::new();
    let mut out = Vec::new();
    conn.feed(&b"PING\r\n".repeat(10));
    // Seven bytes a reply: a limit of 20 stops after three.
    assert_eq!(conn.execute(&store, &mut out, 20), Flow::OutputFull);
    assert_eq!(out, b"+PONG\r\n".repeat(3));
    out.clear();
    assert_eq!(conn.execute(&store, &mut out, 20), Flow::OutputFull);
    out.clear();
    assert_eq!(conn.execute(&store, &mut out, 20), Flow::OutputFull);
    out.clear();
    assert_eq!(conn.execute(&store, &mut out, 20), Flow::NeedInput);
    assert_eq!(out, b"+PONG\r\n");
    assert_eq!(conn.pending_input(), 0);
}

#[test]
fn binary_keys_and_values_and_a_request_split_anywhere() {
    let store = Store::new();
    let mut input = Vec::new();
    encode_request(&mut input, &[&b"SET"[..], b"k\r\n\0", b"\xff\0v\r\n"]);
    encode_request(&mut input, &[&b"GET"[..], b"k\r\n\0"]);
    let mut conn = Connection::new();
    let mut out = Vec::new();
    for byte in &input {
        conn.feed(std::slice::from_ref(byte));
        assert_eq!(conn.execute(&store, &mut out, usize::MAX), Flow::NeedInput);
    }
    assert_eq!(out, b"+OK\r\n$5\r\n\xff\0v\r\n\r\n");
}

#[test]
fn serve_blocking_answers_and_stops_at_quit() {
    let store = Store::new();
    let counters = crate::counters::Counters::default();
    let mut tally = counters.tally();
    let input: &[u8] = b"SET a 1\r\nINCR a\r\nQUIT\r\nGET a\r\n";
    let mut written = Vec::new();
    super::serve_blocking(input, &mut written, &store, 64 * 1024, &mut tally)
        .expect("in-memory I/O");
    assert_eq!(written, b"+OK\r\n:2\r\n+OK\r\n");
    drop(tally);
    let s = counters.snapshot();
    assert_eq!(
        (s.bytes_in, s.bytes_out),
        (30, 14),
        "one read; QUIT ends it, GET is not run"
    );
}
