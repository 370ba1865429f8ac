//! srv-tokio end to end, in both flavors, with the checks it shares with
//! srv-tokio-uring (`util/checks.rs`).

#[macro_use]
mod util;

use util::checks::Variant;

const SERVER: Variant = Variant {
    bin: env!("CARGO_BIN_EXE_srv-tokio"),
    name: "srv-tokio",
    setups: &[
        &["--flavor", "multi", "--workers", "2"],
        &["--flavor", "per-core", "--workers", "2"],
    ],
};

end_to_end_tests!(SERVER);
