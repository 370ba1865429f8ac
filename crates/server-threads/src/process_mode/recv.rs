//! RECV, the reading half of a chat connection's process pair: it reads the
//! client's lines and hands them to `service::file_session`, which answers what it
//! can and appends `SAY`s to the room files under an exclusive lock; RECV passes
//! the answers and everything else on to SEND through the pipe.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

use anyhow::Context;
use nix::fcntl::OFlag;
use nix::sys::wait::waitpid;
use proto::chat::{LineBuffer, MAX_LINE};
use service::file_session::{FileSession, Step};

use super::frames::{Frame, push_frame, push_write};
use super::{ChildConfig, send};
use crate::fork::{Forked, fork_single_threaded};
use launch::{Count, Tally};
use service::counters::Block;

/// RECV counts into `tally`; SEND into `send_block`.
pub(super) fn serve(
    stream: TcpStream,
    config: &ChildConfig,
    tally: &mut Tally,
    send_block: &'static Block,
) -> anyhow::Result<()> {
    let (pipe_r, pipe_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    let send_pid = match fork_single_threaded()? {
        Forked::Child => {
            drop(pipe_w);
            send::serve(&stream, File::from(pipe_r), config, Tally::over(send_block));
        }
        Forked::Parent(pid) => pid,
    };
    drop(pipe_r);
    let mut pipe = File::from(pipe_w);
    let result = read_lines(&stream, &mut pipe, config, tally);
    // Closing the pipe tells SEND that nothing more comes; it writes what it
    // has, then exits, and this process reaps it.
    drop(pipe);
    let _ = waitpid(send_pid, None);
    result
}

fn read_lines(
    mut stream: &TcpStream,
    pipe: &mut File,
    config: &ChildConfig,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut session = FileSession::new(&config.data, config.fsync);
    let mut frames = Vec::new();
    // Replies the session gives at once, sent on to SEND in a 'W' frame each.
    let mut replies = Vec::new();
    loop {
        let n = match stream.read(lines.spare()) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        tally.add(Count::BytesIn, n as u64);
        lines.commit(n);
        while let Some(line) = lines.next_line() {
            tally.add(Count::Lines, 1);
            replies.clear();
            let step = session.handle(line, &mut replies);
            if !replies.is_empty() {
                push_write(&mut frames, |o| o.extend_from_slice(&replies));
            }
            match step {
                Step::Next => {}
                Step::Close => {
                    pipe.write_all(&frames)?;
                    return Ok(());
                }
                Step::Join { room, since, upto } => {
                    push_frame(&mut frames, &Frame::Join { room, since, upto });
                }
                Step::Leave { room } => push_frame(&mut frames, &Frame::Leave { room }),
                Step::Say { room, text } => {
                    // SEND must hear of the append before the record can exist.
                    push_frame(&mut frames, &Frame::Appending { room });
                    pipe.write_all(&frames)?;
                    frames.clear();
                    let seq = session.append(room, text);
                    if seq.is_some() {
                        tally.add(Count::Messages, 1);
                    }
                    // 0 tells SEND the append failed (seqs start at 1).
                    let seq = seq.unwrap_or(0);
                    push_frame(&mut frames, &Frame::Appended { room, seq });
                }
            }
        }
        pipe.write_all(&frames)?;
        frames.clear();
    }
}
