//! Protocol and storage throughput: parsing and encoding chat lines with
//! `proto::chat::{Command, Reply}`, and appending to and replaying a room log
//! (`service::log::RoomLog`) in a temporary directory. Every pass checks its output.

#![deny(unsafe_code)]

use std::hint::black_box;

use benches::ids;
use benches::workload::{
    CommandCorpus, LogAppend, LogReplay, ReplyCorpus, encode_commands, encode_replies,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Lines per corpus pass.
const LINES: usize = 1000;
/// Messages in the replayed room.
const REPLAY_MESSAGES: u64 = 10_000;

fn chat(c: &mut Criterion) {
    let commands = CommandCorpus::new(LINES);
    let replies = ReplyCorpus::new(LINES);
    let mut group = c.benchmark_group(ids::CHAT);

    let says = commands
        .parse_all()
        .unwrap_or_else(|e| panic!("command corpus: {e}"));
    group.throughput(throughput(LINES, commands.bytes.len()));
    group.bench_function(ids::PARSE_COMMAND, |b| {
        b.iter(|| {
            let got = black_box(&commands)
                .parse_all()
                .unwrap_or_else(|e| panic!("chat/parse_command: {e}"));
            assert_eq!(got, says, "chat/parse_command: SAY count changed");
        });
    });
    let parsed = commands
        .commands()
        .unwrap_or_else(|e| panic!("command corpus: {e}"));
    let mut out = Vec::with_capacity(commands.bytes.len());
    group.bench_function(ids::ENCODE_COMMAND, |b| {
        b.iter(|| {
            encode_commands(black_box(&parsed), &mut out, commands.bytes.len())
                .unwrap_or_else(|e| panic!("chat/encode_command: {e}"));
        });
    });

    let msgs = replies
        .parse_all()
        .unwrap_or_else(|e| panic!("reply corpus: {e}"));
    group.throughput(throughput(LINES, replies.bytes.len()));
    group.bench_function(ids::PARSE_REPLY, |b| {
        b.iter(|| {
            let got = black_box(&replies)
                .parse_all()
                .unwrap_or_else(|e| panic!("chat/parse_reply: {e}"));
            assert_eq!(got, msgs, "chat/parse_reply: MSG count changed");
        });
    });
    let parsed = replies
        .replies()
        .unwrap_or_else(|e| panic!("reply corpus: {e}"));
    let mut out = Vec::with_capacity(replies.bytes.len());
    group.bench_function(ids::ENCODE_REPLY, |b| {
        b.iter(|| {
            encode_replies(black_box(&parsed), &mut out, replies.bytes.len())
                .unwrap_or_else(|e| panic!("chat/encode_reply: {e}"));
        });
    });
    group.finish();
}

fn room_log(c: &mut Criterion) {
    let mut group = c.benchmark_group(ids::ROOM_LOG);
    let mut append = LogAppend::new().unwrap_or_else(|e| panic!("room_log/append: {e}"));
    group.throughput(Throughput::Elements(1));
    group.bench_function(ids::APPEND, |b| {
        b.iter_custom(|n| {
            append
                .append(n)
                .unwrap_or_else(|e| panic!("room_log/append: {e}"))
        });
    });

    let replay = LogReplay::new(REPLAY_MESSAGES).unwrap_or_else(|e| panic!("room_log/replay: {e}"));
    group.throughput(Throughput::ElementsAndBytes {
        elements: replay.messages(),
        bytes: replay.text_bytes(),
    });
    group.bench_function(ids::REPLAY, |b| {
        b.iter(|| {
            let got = replay
                .replay()
                .unwrap_or_else(|e| panic!("room_log/replay: {e}"));
            assert_eq!(got, REPLAY_MESSAGES, "room_log/replay: record count");
        });
    });
    group.finish();
}

fn throughput(lines: usize, bytes: usize) -> Throughput {
    Throughput::ElementsAndBytes {
        elements: lines as u64,
        bytes: bytes as u64,
    }
}

criterion_group!(benches, chat, room_log);
criterion_main!(benches);
