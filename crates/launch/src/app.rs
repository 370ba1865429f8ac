//! What a server serves, opened from the common command line: echo with its
//! [`EchoConfig`], chat with its [`Rooms`], kv with its [`Kv`] store, or http with its
//! limit of pending output, beside the counters every
//! connection adds to. Servers that keep connection state in async tasks
//! (srv-tokio, srv-tokio-uring, srv-monoio, srv-compio, srv-glommio, srv-smol) begin
//! with [`Service::begin`], share one [`Service`] across their tasks, dispatch each
//! connection on [`App::connection`] (kv and http as one [`Exchanges`]) and count its end
//! with [`closed`].

use std::sync::Arc;

use anyhow::Context;
use service::echo::EchoConfig;
use service::exchange::{Exchange, Feed, Flow};
use service::hub::Subscriber;
use service::kv::Store;
use service::offload::Rooms;

use crate::{CommonArgs, Counters, FsyncMode, Proto, Shutdown, Tally};

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

impl<S: Subscriber> Service<S> {
    /// The first steps of a server that runs on worker threads of its own: installs the
    /// stop signals (before any thread starts, so every thread blocks them), pins the
    /// calling thread to `--cpus` (every thread started from here on inherits the list;
    /// workers then narrow it to their own CPU), and opens the service.
    pub fn begin(args: &CommonArgs) -> anyhow::Result<(Shutdown, Arc<Self>)> {
        let shutdown = Shutdown::install()?;
        if let Some(cpus) = &args.cpus {
            crate::cpus::pin_current_thread_to(cpus)?;
        }
        Ok((shutdown, Arc::new(Service::open(args)?)))
    }
}

/// What one connection serves, as a connection task dispatches on it: echo and chat with
/// what they need, kv and http as one [`Exchange`] (the request-reply loop is the same).
#[derive(Debug)]
pub enum Conn<'a, S: Subscriber> {
    /// `--proto echo`.
    Echo(&'a EchoConfig),
    /// `--proto chat`.
    Chat(&'a Arc<Rooms<S>>),
    /// `--proto kv` or `--proto http`: a fresh connection state.
    Exchange(Exchanges<'a>),
}

/// A kv or http connection's state, one [`Exchange`].
#[derive(Debug)]
pub enum Exchanges<'a> {
    /// `--proto kv`, against the server's one store.
    Kv(service::kv::Served<&'a service::kv::Store>),
    /// `--proto http`.
    Http(service::http::Connection),
}

impl<S: Subscriber> App<S> {
    /// What a new connection serves.
    pub fn connection(&self) -> Conn<'_, S> {
        match self {
            App::Echo(config) => Conn::Echo(config),
            App::Chat(rooms) => Conn::Chat(rooms),
            App::Kv(kv) => {
                Conn::Exchange(Exchanges::Kv(service::kv::Served::new(&kv.store, kv.limit)))
            }
            App::Http(limit) => {
                Conn::Exchange(Exchanges::Http(service::http::Connection::new(*limit)))
            }
        }
    }
}

impl Feed for Exchanges<'_> {
    fn feed(&mut self, bytes: &[u8]) {
        match self {
            Exchanges::Kv(c) => c.feed(bytes),
            Exchanges::Http(c) => c.feed(bytes),
        }
    }
}

impl Exchange for Exchanges<'_> {
    fn execute(&mut self, out: &mut Vec<u8>) -> Flow {
        match self {
            Exchanges::Kv(c) => c.execute(out),
            Exchanges::Http(c) => c.execute(out),
        }
    }
}

/// Counts a connection's end into `tally`: closed, and an error too when `result` is one.
pub fn closed<T, E>(tally: &mut Tally, result: &Result<T, E>) {
    if result.is_err() {
        tally.add(crate::Count::Errors, 1);
    }
    tally.add(crate::Count::Closed, 1);
}
