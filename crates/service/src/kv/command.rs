//! The commands of `--proto kv` and their replies, byte for byte those of
//! redis-server 7.0 (`t_string.c`, `db.c`, `server.c`), error texts included: the
//! argument checks run in Redis's order, so that the first failing check answers.
//!
//! Where ringside answers differently, on purpose (docs/protocol-notes.md): `SELECT` of
//! a database other than 0 (there is one), `COMMAND` and `COMMAND DOCS` (an empty list:
//! redis-cli then runs without its hints), and `CONFIG GET`, which knows `save` and
//! `appendonly` only (what redis-benchmark asks before it starts).

use proto::resp::{
    Request, encode_array_header, encode_bulk, encode_error, encode_integer, encode_null,
    encode_simple, parse_i64,
};

use super::store::{Entry, Store, is_expired, live, now_ms};

/// What the connection does after a command's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum After {
    Continue,
    /// Close once the replies so far are written (`QUIT`).
    Close,
    /// Close without a reply (Redis's answer to `POST` and `Host:`, an HTTP request
    /// sent to its port).
    Drop,
}

const NOT_INTEGER: &[u8] = b"ERR value is not an integer or out of range";
const SYNTAX: &[u8] = b"ERR syntax error";
const OVERFLOW: &[u8] = b"ERR increment or decrement would overflow";

/// A command's name in Redis's table (lower case, as its errors show it) and its arity:
/// `n > 0` exactly n words, `-n` at least n.
struct Spec {
    name: &'static str,
    arity: i32,
}

const fn spec(name: &'static str, arity: i32) -> Spec {
    Spec { name, arity }
}

/// Every command served, in the order the dispatch tries them (the hot ones first).
const COMMANDS: &[Spec] = &[
    spec("get", 2),
    spec("set", -3),
    spec("ping", -1),
    spec("incr", 2),
    spec("mset", -3),
    spec("mget", -2),
    spec("del", -2),
    spec("exists", -2),
    spec("incrby", 3),
    spec("decr", 2),
    spec("decrby", 3),
    spec("echo", 2),
    spec("ttl", 2),
    spec("pttl", 2),
    spec("dbsize", 1),
    spec("flushall", -1),
    spec("flushdb", -1),
    spec("select", 2),
    spec("config", -2),
    spec("command", -1),
];

/// Executes one request against `store`, appending its reply to `out`.
pub(super) fn execute(store: &Store, req: &Request<'_>, out: &mut Vec<u8>) -> After {
    let name = req.arg(0).unwrap_or_default();
    // Redis answers these before it looks the command up, whatever their arguments.
    if name.eq_ignore_ascii_case(b"quit") {
        encode_simple(out, b"OK");
        return After::Close;
    }
    if name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:") {
        return After::Drop;
    }
    let Some(spec) = COMMANDS
        .iter()
        .find(|s| name.eq_ignore_ascii_case(s.name.as_bytes()))
    else {
        unknown_command(req, out);
        return After::Continue;
    };
    let argc = req.len() as i64;
    let arity = i64::from(spec.arity);
    if (arity > 0 && argc != arity) || argc < -arity {
        wrong_arity(spec.name, out);
        return After::Continue;
    }
    let arg = |i: usize| req.arg(i).unwrap_or_default();
    match spec.name {
        "get" => get(store, arg(1), out),
        "set" => set(store, req, out),
        "ping" => match req.len() {
            1 => encode_simple(out, b"PONG"),
            2 => encode_bulk(out, arg(1)),
            _ => wrong_arity("ping", out),
        },
        "incr" => incr_by(store, arg(1), 1, out),
        "decr" => incr_by(store, arg(1), -1, out),
        "incrby" => match parse_i64(arg(2)) {
            Some(by) => incr_by(store, arg(1), by, out),
            None => encode_error(out, NOT_INTEGER),
        },
        "decrby" => match parse_i64(arg(2)) {
            None => encode_error(out, NOT_INTEGER),
            Some(i64::MIN) => encode_error(out, b"ERR decrement would overflow"),
            Some(by) => incr_by(store, arg(1), -by, out),
        },
        "mset" => mset(store, req, out),
        "mget" => mget(store, req, out),
        "del" => del(store, req, out),
        "exists" => exists(store, req, out),
        "echo" => encode_bulk(out, arg(1)),
        "ttl" => ttl(store, arg(1), false, out),
        "pttl" => ttl(store, arg(1), true, out),
        "dbsize" => encode_integer(out, store.len() as i64),
        "flushall" | "flushdb" => {
            let mode_ok = match req.len() {
                1 => true,
                2 => arg(1).eq_ignore_ascii_case(b"sync") || arg(1).eq_ignore_ascii_case(b"async"),
                _ => false,
            };
            if mode_ok {
                store.clear();
                encode_simple(out, b"OK");
            } else {
                encode_error(out, SYNTAX);
            }
        }
        "select" => match parse_i64(arg(1)).filter(|&n| i32::try_from(n).is_ok()) {
            None => encode_error(out, NOT_INTEGER),
            Some(0) => encode_simple(out, b"OK"),
            Some(_) => encode_error(out, b"ERR DB index is out of range"),
        },
        "config" => config(req, out),
        "command" => command(req, out),
        other => unreachable!("{other} is in COMMANDS but has no arm"),
    }
    After::Continue
}

/// `-ERR wrong number of arguments for '<name>' command`.
fn wrong_arity(name: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"-ERR wrong number of arguments for '");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"' command\r\n");
}

/// The text of a C string argument as Redis's `%s` sees it: up to its first NUL.
fn c_str(bytes: &[u8]) -> &[u8] {
    bytes.split(|&b| b == 0).next().unwrap_or_default()
}

/// Appends an error built from client bytes the way Redis's `addReplyErrorFormat` does:
/// CR and LF become spaces, so that the reply stays one line.
fn error_from_bytes(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'-');
    out.extend(
        text.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Redis's unknown-command error: the name (at most 128 bytes), then the arguments,
/// each quoted and followed by a space, while the list is shorter than 128 bytes, the
/// last one cut to fill it up to 128.
fn unknown_command(req: &Request<'_>, out: &mut Vec<u8>) {
    let name = c_str(req.arg(0).unwrap_or_default());
    let mut args: Vec<u8> = Vec::new();
    for arg in req.args().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let arg = c_str(arg);
        let room = 128 - args.len();
        args.push(b'\'');
        args.extend_from_slice(&arg[..arg.len().min(room)]);
        args.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(&name[..name.len().min(128)]);
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend_from_slice(&args);
    error_from_bytes(out, &text);
}

/// Redis's unknown-subcommand error, for `CONFIG` and `COMMAND`.
fn unknown_subcommand(container: &str, sub: &[u8], out: &mut Vec<u8>) {
    let sub = c_str(sub);
    let mut text = b"ERR unknown subcommand '".to_vec();
    text.extend_from_slice(&sub[..sub.len().min(128)]);
    text.extend_from_slice(b"'. Try ");
    text.extend_from_slice(container.to_ascii_uppercase().as_bytes());
    text.extend_from_slice(b" HELP.");
    error_from_bytes(out, &text);
}

fn get(store: &Store, key: &[u8], out: &mut Vec<u8>) {
    match live(&mut store.lock(key), key) {
        Some(entry) => encode_bulk(out, &entry.value),
        None => encode_null(out),
    }
}

/// The options of `SET`, parsed as Redis's `parseExtendedStringArgumentsOrReply`.
#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    /// The expiry argument and its kind.
    expire: Option<(&'a [u8], Expire)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Expire {
    Ex,
    Px,
    ExAt,
    PxAt,
}

fn set(store: &Store, req: &Request<'_>, out: &mut Vec<u8>) {
    let mut o = SetOptions::default();
    let mut j = 3;
    while j < req.len() {
        let opt = req.arg(j).unwrap_or_default();
        let next = req.arg(j + 1);
        let kind = o.expire.map(|(_, k)| k);
        let is = |name: &[u8]| opt.eq_ignore_ascii_case(name);
        if is(b"nx") && !o.xx {
            o.nx = true;
        } else if is(b"xx") && !o.nx {
            o.xx = true;
        } else if is(b"get") {
            o.get = true;
        } else if is(b"keepttl") && kind.is_none() {
            o.keep_ttl = true;
        } else if let (Some(value), Some(want)) = (next, expire_kind(opt)) {
            // The same kind twice is allowed (the last wins), two kinds are not.
            if o.keep_ttl || kind.is_some_and(|k| k != want) {
                encode_error(out, SYNTAX);
                return;
            }
            o.expire = Some((value, want));
            j += 1;
        } else {
            encode_error(out, SYNTAX);
            return;
        }
        j += 1;
    }
    let expires_at = match o.expire {
        None => None,
        Some((value, kind)) => match expire_at(value, kind) {
            Ok(at) => Some(at),
            Err(text) => {
                encode_error(out, text);
                return;
            }
        },
    };
    let key = req.arg(1).unwrap_or_default();
    let value = req.arg(2).unwrap_or_default();
    let mut shard = store.lock(key);
    let old = live(&mut shard, key);
    if o.get {
        match &old {
            Some(entry) => encode_bulk(out, &entry.value),
            None => encode_null(out),
        }
    }
    if (o.nx && old.is_some()) || (o.xx && old.is_none()) {
        if !o.get {
            encode_null(out);
        }
        return;
    }
    let expires_at = match (o.keep_ttl, old) {
        (true, Some(entry)) => entry.expires_at,
        _ => expires_at,
    };
    // A time already past (EXAT/PXAT in the past) deletes the key, as in Redis.
    let mut now = None;
    let entry = Entry {
        value: value.to_vec(),
        expires_at,
    };
    if is_expired(&entry, &mut now) {
        shard.remove(key);
    } else {
        shard.insert(key.to_vec(), entry);
    }
    if !o.get {
        encode_simple(out, b"OK");
    }
}

fn expire_kind(opt: &[u8]) -> Option<Expire> {
    let is = |name: &[u8]| opt.eq_ignore_ascii_case(name);
    if is(b"ex") {
        Some(Expire::Ex)
    } else if is(b"px") {
        Some(Expire::Px)
    } else if is(b"exat") {
        Some(Expire::ExAt)
    } else if is(b"pxat") {
        Some(Expire::PxAt)
    } else {
        None
    }
}

/// The absolute expiry time of an `EX`/`PX`/`EXAT`/`PXAT` argument, or Redis's error.
fn expire_at(value: &[u8], kind: Expire) -> Result<i64, &'static [u8]> {
    const INVALID: &[u8] = b"ERR invalid expire time in 'set' command";
    let n = parse_i64(value).ok_or(NOT_INTEGER)?;
    let seconds = matches!(kind, Expire::Ex | Expire::ExAt);
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(INVALID);
    }
    let ms = if seconds { n * 1000 } else { n };
    match kind {
        Expire::Ex | Expire::Px => ms.checked_add(now_ms()).ok_or(INVALID),
        Expire::ExAt | Expire::PxAt => Ok(ms),
    }
}

fn incr_by(store: &Store, key: &[u8], by: i64, out: &mut Vec<u8>) {
    let mut shard = store.lock(key);
    let (current, expires_at) = match live(&mut shard, key) {
        None => (0, None),
        Some(entry) => match parse_i64(&entry.value) {
            Some(n) => (n, entry.expires_at),
            None => {
                encode_error(out, NOT_INTEGER);
                return;
            }
        },
    };
    let Some(next) = current.checked_add(by) else {
        encode_error(out, OVERFLOW);
        return;
    };
    // INCR keeps the key's time to live, as in Redis.
    shard.insert(
        key.to_vec(),
        Entry {
            value: next.to_string().into_bytes(),
            expires_at,
        },
    );
    encode_integer(out, next);
}

fn mset(store: &Store, req: &Request<'_>, out: &mut Vec<u8>) {
    if req.len() & 1 == 0 {
        wrong_arity("mset", out);
        return;
    }
    let mut locked = store.lock_many(req.args().skip(1).step_by(2));
    let mut words = req.args().skip(1);
    while let (Some(key), Some(value)) = (words.next(), words.next()) {
        locked.shard(key).insert(
            key.to_vec(),
            Entry {
                value: value.to_vec(),
                expires_at: None,
            },
        );
    }
    encode_simple(out, b"OK");
}

fn mget(store: &Store, req: &Request<'_>, out: &mut Vec<u8>) {
    let mut locked = store.lock_many(req.args().skip(1));
    encode_array_header(out, req.len() - 1);
    for key in req.args().skip(1) {
        match live(locked.shard(key), key) {
            Some(entry) => encode_bulk(out, &entry.value),
            None => encode_null(out),
        }
    }
}

fn del(store: &Store, req: &Request<'_>, out: &mut Vec<u8>) {
    let mut locked = store.lock_many(req.args().skip(1));
    let mut removed = 0;
    for key in req.args().skip(1) {
        let shard = locked.shard(key);
        if live(shard, key).is_some() {
            shard.remove(key);
            removed += 1;
        }
    }
    encode_integer(out, removed);
}

fn exists(store: &Store, req: &Request<'_>, out: &mut Vec<u8>) {
    let mut locked = store.lock_many(req.args().skip(1));
    // A key named twice counts twice, as in Redis.
    let found = req
        .args()
        .skip(1)
        .filter(|key| live(locked.shard(key), key).is_some())
        .count();
    encode_integer(out, found as i64);
}

fn ttl(store: &Store, key: &[u8], millis: bool, out: &mut Vec<u8>) {
    let mut shard = store.lock(key);
    let reply = match live(&mut shard, key) {
        None => -2,
        Some(Entry {
            expires_at: None, ..
        }) => -1,
        Some(Entry {
            expires_at: Some(at),
            ..
        }) => {
            let left = (*at - now_ms()).max(0);
            if millis { left } else { (left + 500) / 1000 }
        }
    };
    encode_integer(out, reply);
}

/// `CONFIG GET <name>...`: the two settings redis-benchmark asks for, with the values
/// of a redis-server without persistence; any other name matches nothing.
fn config(req: &Request<'_>, out: &mut Vec<u8>) {
    let sub = req.arg(1).unwrap_or_default();
    if !sub.eq_ignore_ascii_case(b"get") {
        unknown_subcommand("config", sub, out);
        return;
    }
    if req.len() < 3 {
        wrong_arity("config|get", out);
        return;
    }
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
    for name in req.args().skip(2) {
        for (known, value) in [(&b"save"[..], &b""[..]), (b"appendonly", b"no")] {
            if name.eq_ignore_ascii_case(known) && !pairs.iter().any(|(k, _)| *k == known) {
                pairs.push((known, value));
            }
        }
    }
    encode_array_header(out, pairs.len() * 2);
    for (name, value) in pairs {
        encode_bulk(out, name);
        encode_bulk(out, value);
    }
}

/// `COMMAND` and `COMMAND DOCS`: an empty list (clients then go without hints).
fn command(req: &Request<'_>, out: &mut Vec<u8>) {
    match req.arg(1) {
        None => encode_array_header(out, 0),
        Some(sub) if sub.eq_ignore_ascii_case(b"docs") => encode_array_header(out, 0),
        Some(sub) => unknown_subcommand("command", sub, out),
    }
}
