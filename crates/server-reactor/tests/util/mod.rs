//! What the tests of srv-reactor share: starting reactors in this process and
//! connecting to them with every wait bounded.

// Each test file uses some of these helpers, not all of them.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use server_reactor::{AcceptMode, Config, Mailbox, Reactors};
use service::echo::EchoConfig;
use service::hub::Hub;
use service::log::Fsync;

/// Any read or write that takes longer than this means the server is stuck.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn config(workers: usize, accept: AcceptMode, compute: Option<Duration>) -> Config {
    Config {
        addr: "127.0.0.1:0".parse().expect("a valid address"),
        workers,
        cpus: None,
        accept,
        echo: EchoConfig {
            compute,
            msg_size: NonZeroUsize::new(16).expect("non-zero"),
        },
        max_pending: 1 << 20,
    }
}

pub(crate) fn echo(workers: usize, accept: AcceptMode) -> Reactors {
    Reactors::start(&config(workers, accept, None), None).expect("reactors start")
}

pub(crate) fn chat(workers: usize, accept: AcceptMode) -> (Reactors, Arc<Hub<Mailbox>>) {
    let hub = Arc::new(Hub::open(None, Fsync::Never).expect("a temporary hub"));
    let reactors = Reactors::start(&config(workers, accept, None), Some(Arc::clone(&hub)))
        .expect("reactors start");
    (reactors, hub)
}

pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}
