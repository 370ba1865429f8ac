//! A small chat server for the tests: a thread per connection, rooms in memory under one
//! lock, `MSG` and `ACK` written under that lock so that every member sees seq order. It can
//! break the delivery guarantee on purpose.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proto::chat::{Command, LineBuffer, MAX_LINE, Reply};

/// What the peer does wrong, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChatMisbehave {
    /// A correct chat server (without durability, which loadgen cannot see).
    Nothing,
    /// Does not deliver the message with this seq to one member of its room.
    SkipDelivery(u64),
    /// Delivers the message with this seq twice to one member of its room.
    DuplicateDelivery(u64),
    /// Answers every `SAY` with `ERR storage failure`.
    RefuseSay,
}

#[derive(Default)]
struct Room {
    next: u64,
    members: Vec<(u64, Arc<Mutex<TcpStream>>)>,
}

type Rooms = Arc<Mutex<HashMap<String, Room>>>;

/// A running chat peer; it stops accepting when dropped.
#[derive(Debug)]
pub(crate) struct ChatPeer {
    pub(crate) addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl ChatPeer {
    pub(crate) fn spawn(how: ChatMisbehave) -> ChatPeer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the chat peer");
        let addr = listener
            .local_addr()
            .expect("local address of the chat peer");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let rooms: Rooms = Arc::default();
        thread::spawn(move || {
            for (id, stream) in (0u64..).zip(listener.incoming()) {
                if stopping.load(Ordering::Acquire) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let rooms = Arc::clone(&rooms);
                thread::spawn(move || serve(id, stream, &rooms, how));
            }
        });
        ChatPeer { addr, stop }
    }
}

impl Drop for ChatPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop; if the connect fails the loop is already gone.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn send(to: &Mutex<TcpStream>, reply: Reply<'_>) {
    let mut line = Vec::new();
    reply.encode(&mut line);
    // A member that went away just misses the line.
    if let Ok(mut s) = to.lock() {
        let _ = s.write_all(&line);
    }
}

fn serve(id: u64, stream: TcpStream, rooms: &Rooms, how: ChatMisbehave) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut reader) = stream.try_clone() else {
        return;
    };
    let me = Arc::new(Mutex::new(stream));
    let mut nick = String::from("anon");
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        lines.extend_from_slice(&buf[..n]);
        while let Some(line) = lines.next_line() {
            let Ok(line) = line else {
                send(
                    &me,
                    Reply::Err {
                        reason: "line too long",
                    },
                );
                return;
            };
            match Command::parse(line) {
                Ok(Command::Nick { name }) => {
                    nick = name.to_owned();
                    send(&me, Reply::Ok);
                }
                Ok(Command::Join { room, .. }) => {
                    let mut all = rooms.lock().expect("rooms lock");
                    let r = all.entry(room.to_owned()).or_insert_with(|| Room {
                        next: 1,
                        members: Vec::new(),
                    });
                    r.members.push((id, Arc::clone(&me)));
                    send(&me, Reply::Joined { room, next: r.next });
                }
                Ok(Command::Say { room, text }) => {
                    if how == ChatMisbehave::RefuseSay {
                        send(
                            &me,
                            Reply::Err {
                                reason: "storage failure",
                            },
                        );
                        continue;
                    }
                    let mut all = rooms.lock().expect("rooms lock");
                    let r = all.entry(room.to_owned()).or_insert_with(|| Room {
                        next: 1,
                        members: Vec::new(),
                    });
                    let seq = r.next;
                    r.next += 1;
                    let msg = Reply::Msg {
                        room,
                        seq,
                        name: &nick,
                        text,
                    };
                    let mut first_other = true;
                    for (member, to) in &r.members {
                        if *member == id {
                            continue;
                        }
                        let times = match how {
                            ChatMisbehave::SkipDelivery(s) if s == seq && first_other => 0,
                            ChatMisbehave::DuplicateDelivery(s) if s == seq && first_other => 2,
                            _ => 1,
                        };
                        first_other = false;
                        for _ in 0..times {
                            send(to, msg);
                        }
                    }
                    send(&me, Reply::Ack { room, seq });
                }
                Ok(Command::Ping { token }) => send(&me, Reply::Pong { token }),
                Ok(Command::Leave { room }) => send(&me, Reply::Left { room }),
                Err(e) => send(&me, Reply::err(e)),
            }
        }
    }
    let mut all = rooms.lock().expect("rooms lock");
    for r in all.values_mut() {
        r.members.retain(|(m, _)| *m != id);
    }
}
