//! The `memory` section: memory per idle connection.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::pivot;
use crate::record::row::Row;
use crate::report::cells::fmt_bytes;

pub(crate) fn section(out: &mut String, rows: &[Row]) {
    let s = "memory";
    let _ = writeln!(
        out,
        "Connections held open and all but idle (one echo a second over all of them). Memory per connection is the growth over the memory before the first connection, divided by the connections: of the server's user memory (PSS over its processes), of the kernel's thread stacks (`KernelStack` in /proc/meminfo: 16 KiB for every thread a thread-per-connection server starts) and of TCP socket memory (`mem` pages of /proc/net/sockstat, both ends of each loopback connection, loadgen's included). The kernel's two are machine-wide, so whatever else ran moves them too. Total, then user / kernel stacks / sockets:\n"
    );
    pivot(out, rows, s, "idle", "memory per conn", |r| {
        format!(
            "{} = {} / {} / {}",
            fmt_bytes(r.total_mem_per_conn_bytes),
            fmt_bytes(r.mem_per_conn_bytes),
            fmt_bytes(r.kernel_stack_per_conn_bytes),
            fmt_bytes(r.socket_mem_per_conn_bytes)
        )
    });
    pivot(out, rows, s, "idle", "whole server", |r| {
        format!(
            "{} in {} process(es), {} thread(s)",
            fmt_bytes(r.peak_mem_bytes),
            r.max_procs,
            r.max_threads
        )
    });
    let _ = writeln!(
        out,
        "**Beside the literature** (goroutine-switch article): a goroutine starts with a 2 KiB stack, an OS thread reserves 8 MiB of *virtual* stack; what a thread really costs is what it touches, which the table above shows.\n"
    );
}
