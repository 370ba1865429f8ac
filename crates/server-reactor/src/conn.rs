//! A connection as the reactor holds it in its slab: the socket with its
//! readiness, and the protocol's state machine.

use crate::chat::Chat;
use crate::echo::Echo;
use crate::io::Io;
use std::sync::Arc;

use service::kv::{Served, Store};

use crate::exchange::Exchanged;

/// What a connection wants after a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Nothing to do until the next event (readable, writable, or mail).
    Idle,
    /// It used up its budget with work left: another turn, after the others.
    Again,
    /// Finished: close the socket.
    Done,
}

/// One connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) io: Io,
    pub(crate) kind: Kind,
}

/// The protocol state machine of a connection.
#[derive(Debug)]
pub(crate) enum Kind {
    Echo(Echo),
    Chat(Chat),
    Kv(Exchanged<Served<Arc<Store>>>),
    Http(Exchanged<service::http::Connection>),
}

impl Conn {
    /// Whether output waits for the socket.
    pub(crate) fn has_output(&self) -> bool {
        match &self.kind {
            Kind::Echo(e) => e.has_output(),
            Kind::Chat(c) => c.has_output(),
            Kind::Kv(k) => k.has_output(),
            Kind::Http(h) => h.has_output(),
        }
    }
}
