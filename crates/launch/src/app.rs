//! What a server serves, opened from the common command line: echo with its
//! [`EchoConfig`], or chat with its [`Rooms`], beside the counters every
//! connection adds to. Servers that keep connection state in async tasks
//! (srv-tokio, srv-tokio-uring) share one [`Service`] across their tasks and
//! dispatch each connection on [`App`].

use std::sync::Arc;

use anyhow::Context;
use service::echo::EchoConfig;
use service::hub::Subscriber;
use service::offload::Rooms;

use crate::{CommonArgs, Counters, FsyncMode, Proto};

/// What every connection of a server shares.
#[derive(Debug)]
pub struct Service<S: Subscriber> {
    /// The protocol and its state.
    pub app: App<S>,
    /// What the connections count, printed at exit.
    pub counters: Arc<Counters>,
}

/// The protocol a server speaks, with what it needs.
#[derive(Debug)]
pub enum App<S: Subscriber> {
    /// `--proto echo`.
    Echo(EchoConfig),
    /// `--proto chat`; with `--fsync always`, hub calls go to the runtime's
    /// blocking pool ([`Rooms::offload`]).
    Chat(Arc<Rooms<S>>),
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
        };
        Ok(Service {
            app,
            counters: Arc::default(),
        })
    }

    /// After every connection stopped: flushes the rooms and prints the
    /// counters line as `name` ([`crate::finish`]).
    pub fn finish(&self, name: &str) -> anyhow::Result<()> {
        let rooms = match &self.app {
            App::Chat(rooms) => Some(&rooms.hub),
            App::Echo(_) => None,
        };
        crate::finish(name, rooms, &self.counters)
    }
}
