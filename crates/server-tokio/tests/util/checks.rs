//! The end-to-end checks srv-tokio and srv-tokio-uring share: echo, chat
//! (fan-out across workers, the seam, errors, the slow-subscriber cut, `--fsync
//! always`), the clean stop, and the exit status 2 of a port in use or a missing
//! CPU. The conformance suite checks docs/PROTOCOL.md in full; these check what the two
//! crates add over it: their listeners, their outboxes, their offloading, in
//! every setup (flavor, worker count) a crate has.

use std::io::{Read, Write};
use std::process::ExitStatus;
use std::thread;

use super::{Server, start, try_start};

/// Declares every check below as a `#[test]` of the calling test crate, run against the
/// [`Variant`] `$server`. Add a check here and both crates run it.
macro_rules! end_to_end_tests {
    ($server:expr) => {
        end_to_end_tests!(@each $server;
            echo_is_byte_exact_on_many_connections_and_stops_cleanly,
            echo_with_compute_holds_a_partial_message_until_eof,
            chat_fans_out_across_workers_with_the_seam_in_place,
            a_subscriber_that_does_not_read_is_cut_and_the_others_are_not,
            a_port_in_use_is_exit_2_before_ready,
            pinned_workers_serve_and_a_missing_cpu_is_exit_2);
    };
    (@each $server:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                $crate::util::checks::$name(&$server);
            }
        )*
    };
}

/// A server binary and the setups every check runs it in.
pub(crate) struct Variant {
    /// The binary's path (`env!("CARGO_BIN_EXE_...")`).
    pub(crate) bin: &'static str,
    /// Its name, as its stderr lines begin.
    pub(crate) name: &'static str,
    /// The arguments of each setup, such as `--flavor per-core --workers 2`.
    pub(crate) setups: &'static [&'static [&'static str]],
}

impl Variant {
    fn start(&self, setup: &[&str], args: &[&str]) -> Server {
        start(self.bin, &[setup, args].concat())
    }

    fn try_start(&self, setup: &[&str], args: &[&str]) -> Result<Server, (String, ExitStatus)> {
        try_start(self.bin, &[setup, args].concat())
    }

    /// The setup, for messages.
    fn label(&self, setup: &[&str]) -> String {
        format!("{} {}", self.name, setup.join(" "))
    }
}

pub(crate) fn echo_is_byte_exact_on_many_connections_and_stops_cleanly(v: &Variant) {
    for setup in v.setups {
        let server = v.start(setup, &["--proto", "echo"]);
        let clients: Vec<_> = (0..8u8)
            .map(|i| {
                let mut client = server.connect();
                thread::spawn(move || {
                    let data: Vec<u8> = (0..200_000u32).map(|j| (j as u8) ^ i).collect();
                    let mut writer = client.stream.try_clone().unwrap();
                    let sent = data.clone();
                    let w = thread::spawn(move || {
                        writer.write_all(&sent).unwrap();
                        writer.shutdown(std::net::Shutdown::Write).unwrap();
                    });
                    let mut got = Vec::new();
                    client.stream.read_to_end(&mut got).unwrap();
                    w.join().unwrap();
                    assert!(got == data, "connection {i}: echo differs");
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        let (status, err) = server.stop();
        let label = v.label(setup);
        assert!(status.success(), "{label}: {status}: {err}");
        assert!(
            err.contains(&format!("{}: stopped: accepted=8", v.name))
                && err.contains("bytes_out=1600000"),
            "{label}: {err}"
        );
    }
}

pub(crate) fn echo_with_compute_holds_a_partial_message_until_eof(v: &Variant) {
    for setup in v.setups {
        let server = v.start(
            setup,
            &["--proto", "echo", "--compute-us", "1", "--msg-size", "4"],
        );
        let mut c = server.connect();
        c.stream.write_all(b"abcdef").unwrap();
        let mut got = [0u8; 4];
        c.stream.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcd");
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        c.stream.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"ef", "{}", v.label(setup));
    }
}

pub(crate) fn chat_fans_out_across_workers_with_the_seam_in_place(v: &Variant) {
    for setup in v.setups {
        let label = v.label(setup);
        for fsync in ["never", "always"] {
            let server = v.start(setup, &["--proto", "chat", "--fsync", fsync]);
            let mut a = server.connect();
            assert_eq!(
                a.ask("NICK ada\nJOIN r 0\nSAY r one\n", 3),
                ["OK", "JOINED r 1", "ACK r 1"]
            );
            // More connections than workers, so that some land on another one.
            let mut others: Vec<_> = (0..4).map(|_| server.connect()).collect();
            for o in &mut others {
                assert_eq!(o.ask("JOIN r 0\n", 2), ["MSG r 1 ada one", "JOINED r 2"]);
            }
            assert_eq!(a.ask("SAY r two\n", 1), ["ACK r 2"]);
            for o in &mut others {
                assert_eq!(o.lines(1), ["MSG r 2 ada two"]);
            }
            assert_eq!(
                others[0].ask("PING x y\nLEAVE r\nJOIN\n", 3),
                ["PONG x y", "LEFT r", "ERR wrong number of arguments"]
            );
            let long = format!("SAY r {}\n", "x".repeat(5000));
            assert_eq!(a.ask(&long, 1), ["ERR line too long"]);
            assert_eq!(a.line(), None, "a line too long closes the connection");
            let (status, err) = server.stop();
            assert!(status.success(), "{label}/{fsync}: {err}");
            assert!(err.contains("messages=2"), "{label}/{fsync}: {err}");
        }
    }
}

pub(crate) fn a_subscriber_that_does_not_read_is_cut_and_the_others_are_not(v: &Variant) {
    // 18 MB of messages: more than the loopback socket buffers of the silent
    // subscriber hold (at most 6 MB received plus 4 MB sent by default).
    const MESSAGES: usize = 6000;
    // Sent, acknowledged and read by the reading subscriber per round: 30 KB.
    // A batch the server has written counts as pending until its task sees the
    // write return, so two rounds may count at once: 60 KB, under the 64 KiB
    // limit, so only the silent subscriber can pass it.
    const ROUND: usize = 10;
    for setup in v.setups {
        let label = v.label(setup);
        let server = v.start(setup, &["--proto", "chat", "--max-pending", "64K"]);
        let mut silent = server.connect();
        assert_eq!(silent.ask("JOIN r 0\n", 1), ["JOINED r 1"]);
        let mut reading = server.connect();
        assert_eq!(reading.ask("JOIN r 0\n", 1), ["JOINED r 1"]);
        let mut sender = server.connect();
        let say = format!("SAY r {}\n", "y".repeat(3000)).repeat(ROUND);
        for round in 0..MESSAGES / ROUND {
            sender.send(&say);
            for seq in round * ROUND + 1..=(round + 1) * ROUND {
                assert_eq!(sender.line().unwrap(), format!("ACK r {seq}"));
                let line = reading
                    .line()
                    .unwrap_or_else(|| panic!("the reading subscriber was cut at {seq}"));
                assert!(
                    line.starts_with(&format!("MSG r {seq} anon y")),
                    "{line:.40}"
                );
            }
        }
        // What reached the silent one before the cut, then the end of the stream.
        let mut got = 0;
        while let Some(line) = silent.line() {
            assert!(line.starts_with("MSG r "), "{line:.40}");
            got += 1;
            assert!(
                got < MESSAGES,
                "{label}: the silent subscriber got everything"
            );
        }
        let (status, err) = server.stop();
        assert!(status.success(), "{label}: {err}");
        assert!(err.contains("cut_subscribers=1"), "{label}: {err}");
    }
}

pub(crate) fn a_port_in_use_is_exit_2_before_ready(v: &Variant) {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    for setup in v.setups {
        let label = v.label(setup);
        let Err((err, status)) = v.try_start(setup, &["--proto", "echo", "--addr", &addr]) else {
            panic!("{label}: started on a port in use");
        };
        assert_eq!(status.code(), Some(2), "{label}: {err}");
        assert!(
            err.starts_with(&format!("{}: error: cannot listen on", v.name)),
            "{label}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

pub(crate) fn pinned_workers_serve_and_a_missing_cpu_is_exit_2(v: &Variant) {
    for setup in v.setups {
        let label = v.label(setup);
        let server = v.start(setup, &["--proto", "echo", "--cpus", "0"]);
        let mut c = server.connect();
        c.stream.write_all(b"pinned\n").unwrap();
        assert_eq!(c.line().unwrap(), "pinned");
        let (status, _) = server.stop_with(nix::sys::signal::Signal::SIGINT);
        assert!(status.success(), "{label}");
        let Err((err, status)) = v.try_start(setup, &["--proto", "echo", "--cpus", "100000"])
        else {
            panic!("{label}: started on a CPU that is not there");
        };
        assert_eq!(status.code(), Some(2), "{label}: {err}");
    }
}
