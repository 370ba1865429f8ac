//! The command line every server shares (docs/DESIGN.md, "Every server binary").
//! Each server flattens [`CommonArgs`] into its own parser and adds only the
//! flags of its runtime.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::cpus::CpuList;

/// The flags every ringside server accepts, with the same names and meanings.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// The protocol to serve: `echo` (a byte stream sent back as it comes),
    /// `chat` (the line protocol with durable rooms), `kv` (a Redis subset over
    /// RESP2, for redis-cli and redis-benchmark) or `http` (HTTP/1.1, TechEmpower's
    /// `/plaintext` and `/json`, for wrk). See docs/PROTOCOL.md.
    #[arg(long, value_enum)]
    pub proto: Proto,

    /// The address to listen on. Port 0 picks a free port; the READY line
    /// prints the real one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,

    /// Worker threads of the runtime. Defaults to the number of CPUs the
    /// server may use (those of --cpus, or of its affinity mask).
    #[arg(long)]
    pub workers: Option<NonZeroUsize>,

    /// CPUs to pin the workers to, as a list like `1`, `1,3` or `0-3` (each CPU
    /// once, no spaces). Worker i runs on the i-th CPU of the list, round robin.
    #[arg(long)]
    pub cpus: Option<CpuList>,

    /// Echo only (kv, http and chat ignore it): busy-wait this many microseconds of
    /// the thread's own CPU time (CLOCK_THREAD_CPUTIME_ID, so time spent preempted or
    /// throttled does not count; never a sleep) before echoing each complete message
    /// of --msg-size bytes, to model request processing. 0 echoes bytes as they arrive.
    #[arg(long, default_value_t = 0, value_name = "MICROSECONDS")]
    pub compute_us: u64,

    /// Echo only: the message size, in bytes, that --compute-us cuts the stream
    /// into (1 to 65536: a held partial message counts against the 64 KiB a
    /// connection may have pending).
    #[arg(long, default_value = "16", value_parser = parse_msg_size, value_name = "BYTES")]
    pub msg_size: NonZeroUsize,

    /// Chat only: the directory of the durable room logs (created if missing,
    /// recovered at start). Without it, a fresh temporary directory is used
    /// and removed at exit.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,

    /// Chat only: `never` acknowledges a message once write(2) returns (it
    /// survives a crash of the server); `always` also waits for fdatasync (it
    /// survives a crash of the machine).
    #[arg(long, value_enum, default_value_t = FsyncMode::Never)]
    pub fsync: FsyncMode,

    /// Chat: a subscriber whose queued output passes this many bytes is
    /// disconnected (it can reconnect and catch up with JOIN). Kv and http: a
    /// connection whose pending replies reach 64 KiB, or this when it is smaller, is
    /// not read from until it reads them. Suffixes K, M and G multiply by 1024, 1024² and
    /// 1024³.
    #[arg(long, default_value = "1M", value_parser = parse_bytes, value_name = "BYTES")]
    pub max_pending: usize,
}

impl CommonArgs {
    /// The number of workers: --workers, or else one per CPU the server may use.
    pub fn worker_count(&self) -> usize {
        match (self.workers, &self.cpus) {
            (Some(n), _) => n.get(),
            (None, Some(cpus)) => cpus.len(),
            (None, None) => crate::cpus::allowed_count(),
        }
    }

    /// The spin per complete echo message, or `None` when --compute-us is 0.
    pub fn compute(&self) -> Option<Duration> {
        (self.compute_us > 0).then(|| Duration::from_micros(self.compute_us))
    }

    /// Kv and http: the pending output at which a connection is no longer read from, 64 KiB
    /// (PROTOCOL.md's limit) or --max-pending when that is smaller.
    pub fn kv_max_pending(&self) -> usize {
        self.max_pending.min(proto::echo::MAX_PENDING)
    }

    /// The echo service's settings: --compute-us and --msg-size.
    pub fn echo(&self) -> service::echo::EchoConfig {
        service::echo::EchoConfig {
            compute: self.compute(),
            msg_size: self.msg_size,
        }
    }
}

/// The protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Proto {
    /// Every byte received is sent back.
    Echo,
    /// The chat line protocol with durable rooms.
    Chat,
    /// A Redis subset over RESP2 (`service::kv`).
    Kv,
    /// HTTP/1.1, TechEmpower's plaintext and json (`service::http`).
    Http,
}

/// When an appended chat message counts as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FsyncMode {
    /// After write(2).
    Never,
    /// After write(2) and fdatasync(2).
    Always,
}

impl From<FsyncMode> for service::log::Fsync {
    fn from(mode: FsyncMode) -> Self {
        match mode {
            FsyncMode::Never => service::log::Fsync::Never,
            FsyncMode::Always => service::log::Fsync::Always,
        }
    }
}

/// Parses --msg-size: 1 to `proto::echo::MAX_PENDING` bytes.
fn parse_msg_size(s: &str) -> Result<NonZeroUsize, String> {
    s.parse::<NonZeroUsize>()
        .ok()
        .filter(|n| n.get() <= proto::echo::MAX_PENDING)
        .ok_or_else(|| {
            format!(
                "`{s}` is not a message size from 1 to {} bytes",
                proto::echo::MAX_PENDING
            )
        })
}

/// Parses a byte count with an optional K, M or G suffix (powers of 1024).
fn parse_bytes(s: &str) -> Result<usize, String> {
    let (digits, unit) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1usize << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a byte count like 65536, 64K or 1M"))?;
    match n.checked_mul(unit) {
        Some(0) | None => Err(format!(
            "`{s}` must be between 1 byte and {} bytes",
            usize::MAX
        )),
        Some(bytes) => Ok(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    fn parse(args: &[&str]) -> Result<CommonArgs, clap::Error> {
        let argv = std::iter::once("srv-test").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.common)
    }

    #[test]
    fn defaults_match_design() {
        let a = parse(&["--proto", "echo"]).unwrap();
        assert_eq!(a.addr, "127.0.0.1:0".parse().unwrap());
        assert_eq!(a.msg_size.get(), 16);
        assert_eq!(a.compute(), None);
        assert_eq!(a.max_pending, 1 << 20);
        assert_eq!(a.fsync, FsyncMode::Never);
        assert!(a.worker_count() >= 1);
    }

    #[test]
    fn byte_counts_take_suffixes() {
        assert_eq!(parse_bytes("65536"), Ok(65536));
        assert_eq!(parse_bytes("64K"), Ok(65536));
        assert_eq!(parse_bytes("2m"), Ok(2 << 20));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("x1M").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(parse(&[]).is_err(), "--proto is required");
        assert!(parse(&["--proto", "nope"]).is_err());
        let kv = parse(&["--proto", "kv"]).unwrap();
        assert_eq!(kv.kv_max_pending(), 64 * 1024);
        let kv = parse(&["--proto", "kv", "--max-pending", "4K"]).unwrap();
        assert_eq!(parse(&["--proto", "http"]).unwrap().proto, Proto::Http);
        assert_eq!(kv.kv_max_pending(), 4096);
        assert!(parse(&["--proto", "echo", "--workers", "0"]).is_err());
        assert!(parse(&["--proto", "echo", "--msg-size", "0"]).is_err());
        assert!(parse(&["--proto", "echo", "--msg-size", "65537"]).is_err());
        assert!(parse(&["--proto", "echo", "--msg-size", "65536"]).is_ok());
        assert!(parse(&["--proto", "echo", "--addr", "localhost"]).is_err());
    }

    #[test]
    fn workers_follow_cpus() {
        let a = parse(&["--proto", "chat", "--cpus", "0-2"]).unwrap();
        assert_eq!(a.worker_count(), 3);
        let a = parse(&["--proto", "chat", "--cpus", "0-2", "--workers", "5"]).unwrap();
        assert_eq!(a.worker_count(), 5);
        assert_eq!(a.compute_us, 0);
    }
}
