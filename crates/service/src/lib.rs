//! What every server serves, runtime-free.
#![forbid(unsafe_code)]

pub mod counters;
pub mod echo;
pub mod session;
