//! `--api epoll`: the floor of the readiness model. One level-triggered epoll set
//! over non-blocking sockets (nix's thin wrapper of epoll(7), no reactor library).
//!
//! Each readable connection gets one `read` into the thread's single 16 KiB buffer,
//! and what was read is written straight back. Only a write the kernel cuts short
//! leaves bytes behind: they move to the connection's own buffer, and the
//! connection waits for EPOLLOUT instead of EPOLLIN until they are gone, so it is
//! never read from while echo is pending (at most one read, 16 KiB, under the
//! 64 KiB of docs/PROTOCOL.md). An idle connection holds no buffer at all.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};

use anyhow::Context;
use launch::{Shutdown, Snapshot};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use proto::echo::READ_BUF;
use slab::Slab;

/// epoll user data of the listener and of the signalfd; connections use their slab key.
const LISTENER: u64 = u64::MAX;
const SIGNAL: u64 = u64::MAX - 1;

struct Conn {
    stream: TcpStream,
    /// Bytes read but not yet written back; non-empty only while waiting for EPOLLOUT.
    pending: Vec<u8>,
}

/// Serves echo until SIGINT or SIGTERM; returns the counters.
pub(crate) fn serve(listener: TcpListener, shutdown: &Shutdown) -> anyhow::Result<Snapshot> {
    listener
        .set_nonblocking(true)
        .context("making the listener non-blocking")?;
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("creating an epoll set")?;
    epoll
        .add(&listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
        .context("adding the listener to epoll")?;
    epoll
        .add(shutdown, EpollEvent::new(EpollFlags::EPOLLIN, SIGNAL))
        .context("adding the signalfd to epoll")?;
    launch::announce_ready(listener.local_addr()?)?;

    let mut stats = Snapshot::default();
    let mut conns: Slab<Conn> = Slab::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut events = vec![EpollEvent::empty(); 1024];
    loop {
        let n = match epoll.wait(&mut events, EpollTimeout::NONE) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("epoll_wait"),
        };
        for ev in &events[..n] {
            match ev.data() {
                LISTENER => accept_all(&listener, &epoll, &mut conns, &mut stats)?,
                SIGNAL => {
                    if shutdown.take().is_some() {
                        stats.closed += conns.len() as u64;
                        return Ok(stats);
                    }
                }
                key => {
                    let key = key as usize;
                    let Some(conn) = conns.get_mut(key) else {
                        continue;
                    };
                    match step(key, conn, ev.events(), &mut buf, &epoll, &mut stats) {
                        Ok(true) => {}
                        Ok(false) => close(&mut conns, key, &mut stats),
                        Err(_) => {
                            stats.errors += 1;
                            close(&mut conns, key, &mut stats);
                        }
                    }
                }
            }
        }
    }
}

/// Accepts every connection waiting in the backlog.
fn accept_all(
    listener: &TcpListener,
    epoll: &Epoll,
    conns: &mut Slab<Conn>,
    stats: &mut Snapshot,
) -> anyhow::Result<()> {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            // EMFILE, ECONNABORTED and the like cost that connection, not the server.
            Err(_) => {
                stats.errors += 1;
                return Ok(());
            }
        };
        if stream.set_nonblocking(true).is_err() || stream.set_nodelay(true).is_err() {
            stats.errors += 1;
            continue;
        }
        let entry = conns.vacant_entry();
        let event = EpollEvent::new(EpollFlags::EPOLLIN, entry.key() as u64);
        epoll
            .add(&stream, event)
            .context("adding a connection to epoll")?;
        entry.insert(Conn {
            stream,
            pending: Vec::new(),
        });
        stats.accepted += 1;
    }
}

/// Handles one event of a connection; `Ok(false)` when it is done and may close.
fn step(
    key: usize,
    conn: &mut Conn,
    ready: EpollFlags,
    buf: &mut [u8],
    epoll: &Epoll,
    stats: &mut Snapshot,
) -> io::Result<bool> {
    if !conn.pending.is_empty() {
        // Waiting for EPOLLOUT (or an error or hang-up, which the write reports).
        let n = write_some(&mut conn.stream, &conn.pending)?;
        stats.bytes_out += n as u64;
        conn.pending.drain(..n);
        if conn.pending.is_empty() {
            // Free the buffer: an idle connection holds none.
            conn.pending = Vec::new();
            wait_for(epoll, key, conn, EpollFlags::EPOLLIN)?;
        }
        return Ok(true);
    }
    if !ready.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
        return Ok(true);
    }
    // EOF is only ever read with nothing pending, so it closes at once.
    let n = match conn.stream.read(buf) {
        Ok(0) => return Ok(false),
        Ok(n) => n,
        Err(e) if is_transient(&e) => return Ok(true),
        Err(e) => return Err(e),
    };
    stats.bytes_in += n as u64;
    let sent = write_some(&mut conn.stream, &buf[..n])?;
    stats.bytes_out += sent as u64;
    if sent < n {
        conn.pending.extend_from_slice(&buf[sent..n]);
        wait_for(epoll, key, conn, EpollFlags::EPOLLOUT)?;
    }
    Ok(true)
}

/// Writes what the socket takes now: 0 when it takes nothing.
fn write_some(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<usize> {
    match stream.write(bytes) {
        Ok(n) => Ok(n),
        Err(e) if is_transient(&e) => Ok(0),
        Err(e) => Err(e),
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Switches what the connection waits for: input, or room to write its pending echo.
fn wait_for(epoll: &Epoll, key: usize, conn: &Conn, interest: EpollFlags) -> io::Result<()> {
    let mut event = EpollEvent::new(interest, key as u64);
    epoll.modify(&conn.stream, &mut event)?;
    Ok(())
}

/// Closes a connection: dropping the stream closes the fd and takes it out of epoll.
fn close(conns: &mut Slab<Conn>, key: usize, stats: &mut Snapshot) {
    conns.remove(key);
    stats.closed += 1;
}
