//! RECV, the reading half of a chat connection's process pair: it reads the
//! client's lines, answers what it can, appends `SAY`s to the room files under
//! an exclusive lock, and tells SEND everything else through the pipe.

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

use anyhow::Context;
use nix::fcntl::OFlag;
use nix::sys::wait::waitpid;
use proto::chat::{ChatError, Command, LineBuffer, MAX_LINE, Reply};
use service::log::RoomLog;

use super::frames::{Frame, push_frame, push_write};
use super::{ChildConfig, send};
use crate::fork::{Forked, fork_single_threaded};
use launch::Counters;

pub(super) fn serve(stream: TcpStream, config: &ChildConfig) -> anyhow::Result<()> {
    let (pipe_r, pipe_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    let send_pid = match fork_single_threaded()? {
        Forked::Child => {
            drop(pipe_w);
            send::serve(&stream, File::from(pipe_r), config);
        }
        Forked::Parent(pid) => pid,
    };
    drop(pipe_r);
    let mut pipe = File::from(pipe_w);
    let result = read_lines(&stream, &mut pipe, config);
    // Closing the pipe tells SEND that nothing more comes; it writes what it
    // has, then exits, and this process reaps it.
    drop(pipe);
    let _ = waitpid(send_pid, None);
    result
}

fn read_lines(mut stream: &TcpStream, pipe: &mut File, config: &ChildConfig) -> anyhow::Result<()> {
    let counters = config.counters;
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut frames = Vec::new();
    let mut name = String::from("anon");
    let mut joined: Vec<String> = Vec::new();
    let mut logs: HashMap<String, RoomLog> = HashMap::new();
    loop {
        let n = match stream.read(lines.spare()) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        Counters::add(&counters.bytes_in, n as u64);
        lines.commit(n);
        while let Some(line) = lines.next_line() {
            Counters::add(&counters.lines, 1);
            let command = match line.and_then(Command::parse) {
                Ok(command) => command,
                Err(e) => {
                    push_write(&mut frames, |o| Reply::err(e).encode(o));
                    if e.closes_connection() {
                        pipe.write_all(&frames)?;
                        return Ok(());
                    }
                    continue;
                }
            };
            match command {
                Command::Nick { name: new } => {
                    new.clone_into(&mut name);
                    push_write(&mut frames, |o| Reply::Ok.encode(o));
                }
                Command::Ping { token } => {
                    push_write(&mut frames, |o| Reply::Pong { token }.encode(o));
                }
                Command::Join { room, since } => {
                    if joined.iter().any(|r| r == room) {
                        push_write(&mut frames, |o| {
                            Reply::err(ChatError::AlreadyJoined).encode(o)
                        });
                    } else {
                        // The JOIN takes effect now: what is in the room now is
                        // replayed, what is appended later is live.
                        match room_log(&mut logs, config, room).and_then(|log| {
                            log.refresh_locked()?;
                            Ok(log.next_seq() - 1)
                        }) {
                            Ok(upto) => {
                                joined.push(room.to_owned());
                                push_frame(&mut frames, &Frame::Join { room, since, upto });
                            }
                            Err(e) => {
                                eprintln!("srv-threads: room {room}: storage failure: {e:#}");
                                push_write(&mut frames, |o| {
                                    Reply::err(ChatError::StorageFailure).encode(o)
                                });
                            }
                        }
                    }
                }
                Command::Leave { room } => match joined.iter().position(|r| r == room) {
                    Some(i) => {
                        joined.swap_remove(i);
                        push_frame(&mut frames, &Frame::Leave { room });
                    }
                    None => push_write(&mut frames, |o| Reply::err(ChatError::NotJoined).encode(o)),
                },
                Command::Say { room, text } => {
                    // SEND must hear of the append before the record can exist.
                    push_frame(&mut frames, &Frame::Appending { room });
                    pipe.write_all(&frames)?;
                    frames.clear();
                    let seq = match append(&mut logs, config, room, &name, text) {
                        Ok(seq) => {
                            Counters::add(&counters.messages, 1);
                            seq
                        }
                        Err(e) => {
                            eprintln!("srv-threads: room {room}: storage failure: {e:#}");
                            0
                        }
                    };
                    push_frame(&mut frames, &Frame::Appended { room, seq });
                }
            }
        }
        pipe.write_all(&frames)?;
        frames.clear();
    }
}

fn append(
    logs: &mut HashMap<String, RoomLog>,
    config: &ChildConfig,
    room: &str,
    name: &str,
    text: &str,
) -> anyhow::Result<u64> {
    Ok(room_log(logs, config, room)?.append_locked(name, text)?)
}

/// This process's own handle on a room file, opened under the lock on first use.
fn room_log<'a>(
    logs: &'a mut HashMap<String, RoomLog>,
    config: &ChildConfig,
    room: &str,
) -> anyhow::Result<&'a mut RoomLog> {
    if !logs.contains_key(room) {
        let log = RoomLog::open_locked(&config.data, room, config.fsync)?;
        logs.insert(room.to_owned(), log);
    }
    Ok(logs.get_mut(room).expect("inserted above"))
}
