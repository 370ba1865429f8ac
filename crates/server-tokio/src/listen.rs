//! Listening sockets, built with socket2 so that the options are explicit: one
//! listener for the multi flavor, or one `SO_REUSEPORT` listener per worker on the
//! same address for the per-core flavor. All of them are bound in `main` before
//! READY, so an address in use is an error (exit 2) before anything is announced.

use std::net::{SocketAddr, TcpListener};

use anyhow::Context;
use socket2::{Domain, Protocol, Socket, Type};

/// The accept backlog: what `tokio::net::TcpListener::bind` uses, deep enough
/// for a thousand clients connecting at once.
const BACKLOG: i32 = 1024;

/// `count` non-blocking listeners on `addr`. With `count > 1` they share the
/// address through `SO_REUSEPORT` and the kernel spreads new connections over
/// them; port 0 is resolved by the first and reused by the rest.
///
/// `SO_REUSEPORT` shares a port only among sockets that all set it (and belong
/// to the same user), so a port another program holds is still refused.
pub(crate) fn listeners(addr: SocketAddr, count: usize) -> anyhow::Result<Vec<TcpListener>> {
    let reuse_port = count > 1;
    let first = listener(addr, reuse_port)?;
    let bound = first.local_addr().context("reading the bound address")?;
    let mut all = Vec::with_capacity(count);
    all.push(first);
    for _ in 1..count {
        all.push(listener(bound, reuse_port)?);
    }
    Ok(all)
}

fn listener(addr: SocketAddr, reuse_port: bool) -> anyhow::Result<TcpListener> {
    let build = || -> std::io::Result<TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        // As std and Tokio do: a restart right after a stop can bind again.
        socket.set_reuse_address(true)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(BACKLOG)?;
        Ok(socket.into())
    };
    build().with_context(|| format!("cannot listen on {addr}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuseport_listeners_share_one_resolved_port() {
        let all = listeners("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        let ports: Vec<u16> = all.iter().map(|l| l.local_addr().unwrap().port()).collect();
        assert_ne!(ports[0], 0);
        assert!(ports.iter().all(|&p| p == ports[0]), "{ports:?}");
    }

    #[test]
    fn a_port_held_elsewhere_is_refused() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        for count in [1, 2] {
            let err = listeners(addr, count).unwrap_err();
            assert!(format!("{err:#}").contains("cannot listen on"), "{err:#}");
        }
    }
}
