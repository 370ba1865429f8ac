//! srv-tokio end to end, in both flavors, with the checks it shares with
//! srv-tokio-uring (`util/checks.rs`).

mod util;

use util::checks::{self, Variant};

const SERVER: Variant = Variant {
    bin: env!("CARGO_BIN_EXE_srv-tokio"),
    name: "srv-tokio",
    setups: &[
        &["--flavor", "multi", "--workers", "2"],
        &["--flavor", "per-core", "--workers", "2"],
    ],
};

#[test]
fn echo_is_byte_exact_on_many_connections_and_stops_cleanly() {
    checks::echo_is_byte_exact_on_many_connections_and_stops_cleanly(&SERVER);
}

#[test]
fn echo_with_compute_holds_a_partial_message_until_eof() {
    checks::echo_with_compute_holds_a_partial_message_until_eof(&SERVER);
}

#[test]
fn chat_fans_out_across_workers_with_the_seam_in_place() {
    checks::chat_fans_out_across_workers_with_the_seam_in_place(&SERVER);
}

#[test]
fn a_subscriber_that_does_not_read_is_cut_and_the_others_are_not() {
    checks::a_subscriber_that_does_not_read_is_cut_and_the_others_are_not(&SERVER);
}

#[test]
fn a_port_in_use_is_exit_2_before_ready() {
    checks::a_port_in_use_is_exit_2_before_ready(&SERVER);
}

#[test]
fn pinned_workers_serve_and_a_missing_cpu_is_exit_2() {
    checks::pinned_workers_serve_and_a_missing_cpu_is_exit_2(&SERVER);
}
