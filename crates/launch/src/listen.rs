//! Listening sockets for every server that binds with std or socket2: one
//! listener ([`bind`]), or a group of `SO_REUSEPORT` listeners on one address, one
//! per worker ([`bind_group`]). Both use the same deep backlog, so that 10,000
//! clients connecting at once are all accepted, whichever server they meet.
//!
//! The sockets are left blocking, as std leaves them; a server that polls them
//! sets them non-blocking itself. What a server does when `accept` fails is
//! decided here too ([`accept_failed`]), so every server backs off alike.

use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use anyhow::Context;
use socket2::{Domain, Socket, Type};

/// The accept backlog. std's `TcpListener::bind` asks for 128, and with 10,000
/// connections opened at once about a thousand of them then wait in SYN-ACK
/// retransmission for a second or more. The kernel caps it at
/// `net.core.somaxconn` (4096 by default since Linux 5.4).
pub const BACKLOG: i32 = 4096;

/// How long a server stops accepting after an accept error that would recur at
/// once (EMFILE, ENFILE, ENOBUFS, ENOMEM): the connection stays in the backlog
/// and the listener stays readable, so retrying at once would spin.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What a server does after `accept` failed with `e` (other than `WouldBlock`,
/// which is its runtime's business): `None` to accept again at once (a signal,
/// or a client that gave up before it was accepted), or a pause of
/// [`ACCEPT_BACKOFF`], which this reports on stderr as `name`.
pub fn accept_failed(name: &str, e: &io::Error) -> Option<Duration> {
    match e.kind() {
        ErrorKind::Interrupted | ErrorKind::ConnectionAborted => None,
        _ => {
            eprintln!(
                "{name}: accept failed: {e}; retrying in {} ms",
                ACCEPT_BACKOFF.as_millis()
            );
            Some(ACCEPT_BACKOFF)
        }
    }
}

/// Binds one listening TCP socket with an error that names the address.
///
/// `SO_REUSEADDR` is set (so a restart right after a stop works) but not
/// `SO_REUSEPORT`, so an address in use is reported, not shared.
pub fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    listener(addr, false).with_context(|| format!("cannot listen on {addr}"))
}

/// Binds `n` listeners on one address that share it through `SO_REUSEPORT`; the
/// kernel spreads new connections over them by a hash. With `n == 1` this is
/// [`bind`].
///
/// `SO_REUSEPORT` would also let the group share a port with another process of
/// the same user that set it too, so the address is first bound the ordinary
/// way (which fails if anyone holds it, and resolves port 0), then released and
/// bound again as a group. Another process that binds the port in the
/// microseconds between makes the group fail (an error, exit 2) or, if it set
/// `SO_REUSEPORT` itself, shares it: a window this small is accepted for a
/// benchmark server.
pub fn bind_group(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<TcpListener>> {
    let probe = bind(addr)?;
    if n <= 1 {
        return Ok(vec![probe]);
    }
    let addr = probe
        .local_addr()
        .context("reading the bound address of the listener")?;
    drop(probe);
    (0..n)
        .map(|i| {
            listener(addr, true).with_context(|| {
                format!("cannot listen on {addr} (SO_REUSEPORT listener {i} of {n})")
            })
        })
        .collect()
}

fn listener(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// The listeners of a server with one per worker (`--workers`, `SO_REUSEPORT`), bound to
/// `--addr` ([`bind_group`]), and the address they listen on (the READY line's).
pub fn bind_per_worker(args: &crate::CommonArgs) -> anyhow::Result<(Vec<TcpListener>, SocketAddr)> {
    let listeners = bind_group(args.addr, args.worker_count())?;
    let addr = listeners[0]
        .local_addr()
        .context("reading the bound address")?;
    Ok((listeners, addr))
}

/// Counts a connection just accepted into `tally`; `nodelay` is how setting `TCP_NODELAY`
/// on it went (replies are small and each one matters: no Nagle delay), which a
/// connection whose socket refused it does without.
pub fn accepted<E>(tally: &mut crate::Tally, nodelay: Result<(), E>) {
    let _ = nodelay;
    tally.add(crate::Count::Accepted, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_that_recur_at_once_back_off() {
        for kind in [ErrorKind::Interrupted, ErrorKind::ConnectionAborted] {
            assert_eq!(accept_failed("t", &kind.into()), None, "{kind:?}");
        }
        // EMFILE: the process is out of descriptors.
        let emfile = io::Error::from_raw_os_error(24);
        assert_eq!(accept_failed("t", &emfile), Some(ACCEPT_BACKOFF));
    }

    #[test]
    fn a_group_shares_one_resolved_port() {
        let all = bind_group("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        assert_eq!(all.len(), 3);
        let ports: Vec<u16> = all.iter().map(|l| l.local_addr().unwrap().port()).collect();
        assert_ne!(ports[0], 0);
        assert!(ports.iter().all(|&p| p == ports[0]), "{ports:?}");
    }

    #[test]
    fn a_port_held_elsewhere_is_refused_with_its_address() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        for n in [1, 2] {
            let err = bind_group(addr, n).unwrap_err();
            assert!(
                format!("{err:#}").contains(&format!("cannot listen on {addr}")),
                "{err:#}"
            );
        }
        let err = bind(addr).unwrap_err();
        assert!(format!("{err:#}").contains("cannot listen on"), "{err:#}");
    }

    #[test]
    fn a_group_port_is_refused_to_a_plain_bind() {
        let group = bind_group("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        let addr = group[0].local_addr().unwrap();
        assert!(bind(addr).is_err());
    }

    #[test]
    fn a_single_listener_accepts() {
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let _client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        l.accept().unwrap();
    }
}
