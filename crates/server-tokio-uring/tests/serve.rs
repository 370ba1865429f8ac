//! srv-tokio-uring end to end, with one runtime and with two sharing the port, with
//! the checks it shares with srv-tokio.

// The same helpers and checks as srv-tokio's tests: one copy, in server-tokio.
#[path = "../../server-tokio/tests/util/mod.rs"]
#[macro_use]
mod util;

use util::checks::Variant;

const SERVER: Variant = Variant {
    bin: env!("CARGO_BIN_EXE_srv-tokio-uring"),
    name: "srv-tokio-uring",
    setups: &[&["--workers", "1"], &["--workers", "2"]],
};

end_to_end_tests!(SERVER);
