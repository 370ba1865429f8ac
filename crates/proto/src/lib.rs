//! Sans-I/O codecs for the ringside wire protocols.
//!
//! Every ringside server, whatever runtime it is built on, the load generator and the
//! conformance tests speak the protocols of `docs/PROTOCOL.md` through this crate, so that
//! the bytes on the wire are the same everywhere and only the runtime differs. The
//! choices `docs/PROTOCOL.md` leaves open (exact `ERR` texts, argument rules, buffer sizes)
//! are written down in `docs/protocol-notes.md` and implemented here.
//!
//! What it is:
//!
//! - [`echo`]: the shared buffer sizes of the echo servers, and [`echo::MessageCutter`],
//!   which counts the `--msg-size` messages in an echo stream for `--compute-us`.
//! - [`chat`]: the chat line protocol: [`chat::Command`] (client to server) and
//!   [`chat::Reply`] (server to client), each with `parse` and `encode`, the exact `ERR`
//!   reasons in [`chat::ChatError`], and [`chat::LineBuffer`], which splits a byte
//!   stream into lines under a length limit without copying or allocating per line.
//! - [`resp`]: RESP2, the Redis protocol of `--proto kv`: [`resp::RequestBuffer`] cuts
//!   a client's bytes into requests (arrays of bulk strings and inline commands) with
//!   redis-server 7's limits and `Protocol error` texts, the `encode_*` functions write
//!   replies, and [`resp::parse_reply`] reads them on the client side.
//! - [`http`]: HTTP/1.1 as `--proto http` speaks it: [`http::RequestBuffer`] cuts a
//!   client's bytes into requests with `httparse` (keep-alive, pipelining, bodies
//!   skipped, the limits and the status each earns), [`http::Head`] writes a response
//!   head, and [`http::parse_response`] reads one on the client side.
//!
//! What it is not: it performs no I/O, owns no sockets, knows no runtime, and keeps no
//! chat state. Whether a connection has already joined a room, what the next seq of a
//! room is, and what gets written to disk belong to the `service` crate; reading and
//! writing sockets belongs to each server. The caller moves bytes between the network
//! and these types.
//!
//! # Example
//!
//! A server reads client bytes into a [`chat::LineBuffer`], parses each complete line
//! and encodes the reply:
//!
//! ```
//! use proto::chat::{ChatError, Command, LineBuffer, Reply, MAX_LINE};
//!
//! let mut input = LineBuffer::new(MAX_LINE);
//! // Bytes as a socket might deliver them: one and a half lines.
//! input.extend_from_slice(b"PING hello there\r\nNICK bo");
//!
//! let mut out = Vec::new();
//! while let Some(line) = input.next_line() {
//!     let reply = match line.and_then(Command::parse) {
//!         Ok(Command::Ping { token }) => Reply::Pong { token },
//!         Ok(_) => Reply::Ok,
//!         Err(e) => Reply::err(e),
//!     };
//!     reply.encode(&mut out);
//! }
//! assert_eq!(out, b"PONG hello there\n");
//! assert_eq!(input.pending(), 7); // "NICK bo" waits for the rest of its line
//!
//! input.extend_from_slice(b"b\n");
//! let line = input.next_line().expect("a complete line").expect("short enough");
//! assert_eq!(Command::parse(line), Ok(Command::Nick { name: "bob" }));
//! assert_eq!(Command::parse(b"nick bob"), Err(ChatError::UnknownCommand));
//! ```
#![forbid(unsafe_code)]

pub mod chat;
pub mod echo;
pub mod http;
pub mod resp;
