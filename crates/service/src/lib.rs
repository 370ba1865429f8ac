//! What every ringside server serves, free of any runtime: the durable room log
//! ([`log`]) and its group commit ([`commit`]), the in-process room hub that fans messages out to subscribers ([`hub`]),
//! one chat connection's protocol state ([`session`]; [`file_session`] where connections
//! share no memory and meet in the room files alone), the outbound queue's state and
//! slow-subscriber rule that every server's outbox wraps ([`outbox`]) and the outboxes of
//! async runtimes over it ([`outbox::one_task`], [`outbox::two_task`]), woken through
//! [`signal`], the hub calls of async runtimes, inline or on a blocking pool ([`offload`]),
//! the first of two futures ([`race`]), the echo loop and the chat connection for blocking
//! runtimes ([`echo`], [`blocking`]), the echo, request-reply and chat loops of futures-io
//! streams ([`stream`]), the busy-wait that models request processing ([`compute`]),
//! the key-value store and connection of `--proto kv` ([`kv`]), the HTTP service of
//! `--proto http` ([`http`]), the request-reply loop both share ([`exchange`]),
//! and the counters every server prints at exit ([`counters`]).
//!
//! This crate does no networking of its own (its loops are generic over `Read` and `Write`,
//! or futures-io's `AsyncRead` and `AsyncWrite`) and owns one thread only (the group commit of
//! `--fsync always`, which syncs room files off every event loop): each server drives the [`hub::Hub`]
//! from its own connections and implements [`hub::Subscriber`] over its own queues. The
//! wire codecs are `proto`'s; the file format is `docs/room-log.md`.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use service::hub::{Hub, JoinStep, Line, Subscriber};
//! use service::log::Fsync;
//!
//! /// A connection's outbound queue, reduced to a byte buffer.
//! #[derive(Clone, Default)]
//! struct Queue(Arc<Mutex<Vec<u8>>>);
//!
//! impl Subscriber for Queue {
//!     fn offer(&self, line: &Line) -> bool {
//!         self.0.lock().unwrap().extend_from_slice(line);
//!         true
//!     }
//!     fn push_seam(&self, lines: Vec<u8>) {
//!         self.0.lock().unwrap().extend_from_slice(&lines);
//!     }
//! }
//!
//! let hub: Hub<Queue> = Hub::open(None, Fsync::Never)?;
//! let (alice, bob) = (hub.new_conn_id(), hub.new_conn_id());
//! assert_eq!(hub.say("lobby", alice, "alice", "hello")?, 1);
//!
//! // JOIN lobby 0: replay, then the seam, then live messages.
//! let queue = Queue::default();
//! let mut out = Vec::new();
//! let step = hub.join_step("lobby", 0, bob, &queue, &mut out, 64 * 1024)?;
//! assert_eq!(step, JoinStep::Joined { next: 2 });
//! hub.say("lobby", alice, "alice", "still here")?;
//! assert_eq!(
//!     queue.0.lock().unwrap().as_slice(),
//!     b"MSG lobby 1 alice hello\nJOINED lobby 2\nMSG lobby 2 alice still here\n"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

pub mod blocking;
pub mod commit;
pub mod compute;
pub mod counters;
pub mod echo;
pub mod exchange;
pub mod file_session;
pub mod http;
pub mod hub;
pub mod kv;
pub mod log;
pub mod offload;
pub mod outbox;
pub mod race;
pub mod session;
pub mod signal;
pub mod stream;
