//! What a server serves, opened from the common command line: echo with its
//! [`EchoConfig`], chat with its [`Rooms`], kv with its [`Kv`] store, or http with its
//! limit of pending output, beside the counters every
//! connection adds to. Servers that keep connection state in async tasks
//! (srv-tokio, srv-tokio-uring) share one [`Service`] across their tasks and
//! dispatch each connection on [`App`].

use std::sync::Arc;

use anyhow::Context;
use service::echo::EchoConfig;
use service::hub::Subscriber;
use service::kv::Store;
use service::offload::Rooms;

use crate::{CommonArgs, Counters, FsyncMode, Proto};

/// What every connection of a server shares.
#[derive(Debug)]
pub struct Service<S: Subscriber> {
    /// The protocol and its state.
    pub app: App<S>,
    /// What the connections count, printed at exit: each task or thread takes a
    /// [`crate::Tally`] of its own from it.
    pub counters: Counters,
}

/// The protocol a server speaks, with what it needs.
#[derive(Debug)]
pub enum App<S: Subscriber> {
    /// `--proto echo`.
    Echo(EchoConfig),
    /// `--proto chat`; with `--fsync always`, hub calls go to the runtime's
    /// blocking pool ([`Rooms::offload`]).
    Chat(Arc<Rooms<S>>),
    /// `--proto kv`.
    Kv(Kv),
    /// `--proto http`: the pending output at which a connection is not read from
    /// (`--max-pending`, at most 64 KiB), as for kv.
    Http(usize),
}

/// What the connections of `--proto kv` share: the one store of every worker, and the
/// pending output at which a connection stops being read (`--max-pending`, at most
/// 64 KiB).
#[derive(Debug)]
pub struct Kv {
    /// The keys and values.
    pub store: Store,
    /// A connection whose unsent replies reach this many bytes is not read until they
    /// are sent.
    pub limit: usize,
}

impl<S: Subscriber> Service<S> {
    /// Opens what `args` ask for: for chat, recovers the rooms of `--data`.
    pub fn open(args: &CommonArgs) -> anyhow::Result<Self> {
        let app = match args.proto {
            Proto::Echo => App::Echo(args.echo()),
            Proto::Chat => App::Chat(Arc::new(Rooms {
                hub: crate::open_rooms(args)?.context("chat without rooms")?,
                max_pending: args.max_pending,
                offload: args.fsync == FsyncMode::Always,
            })),
            Proto::Kv => App::Kv(Kv {
                store: Store::new(),
                limit: args.kv_max_pending(),
            }),
            Proto::Http => App::Http(args.kv_max_pending()),
        };
        Ok(Service {
            app,
            counters: Counters::default(),
        })
    }

    /// After every connection stopped: flushes the rooms and prints the
    /// counters line as `name` ([`crate::finish`]).
    pub fn finish(&self, name: &str) -> anyhow::Result<()> {
        let rooms = match &self.app {
            App::Chat(rooms) => Some(&rooms.hub),
            App::Echo(_) | App::Kv(_) | App::Http(_) => None,
        };
        crate::finish(name, rooms, &self.counters)
    }
}
