//! The system-call techniques of the io_uring paper's Table I, each reading an eventfd
//! whose counter is already non-zero, so that what is timed is the technique and not a
//! wait for data.
//!
//! A benchmark round arms up to [`POOL`] eventfds, each with its own value (untimed),
//! times one read of each through the technique, then checks that every read returned
//! exactly the value written to its fd (untimed). A technique that reads the wrong fd,
//! reads nothing or reads twice fails the benchmark instead of timing nothing.

use std::io;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::sys::{EventfdRing, LinuxAio, PosixAio, RingSetup};

/// Eventfds armed per round: the largest io_uring batch, so a batch of 64 is one submit.
pub const POOL: usize = 64;

/// How long the epoll technique waits for an fd it armed before calling the path broken.
const EPOLL_TIMEOUT_MS: u16 = 1000;

/// One way of reading an eventfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Technique {
    /// A blocking `read(2)`.
    Blocking,
    /// `epoll_wait(2)` for one ready fd (level-triggered), then a non-blocking `read(2)`.
    Epoll,
    /// io_uring: `batch` reads per `io_uring_enter`, which submits them and waits for
    /// their completions.
    IoUring {
        /// The ring's setup flags.
        setup: RingSetup,
        /// Reads per submission, 1 to [`POOL`].
        batch: usize,
    },
    /// Linux AIO: `io_submit` of one read, then `io_getevents`.
    LinuxAio,
    /// POSIX AIO (glibc's thread pool): `aio_read`, then `aio_suspend`.
    PosixAio,
}

/// The state a technique keeps between reads.
#[derive(Debug)]
enum Backend {
    Blocking,
    Epoll {
        epoll: Epoll,
        events: [EpollEvent; 1],
    },
    IoUring {
        // Boxed: the ring is ten times the size of the other variants.
        ring: Box<EventfdRing>,
        batch: usize,
    },
    LinuxAio(LinuxAio),
    PosixAio(PosixAio),
}

/// A pool of eventfds and one technique to read them, for timing.
#[derive(Debug)]
pub struct EventfdBench {
    fds: Vec<EventFd>,
    backend: Backend,
    /// What the last round wrote to each fd.
    expected: Vec<u64>,
    /// What the last round read from each fd.
    got: Vec<u64>,
    rounds: u64,
}

impl EventfdBench {
    /// Creates [`POOL`] eventfds (non-blocking for [`Technique::Epoll`], blocking
    /// otherwise) and the technique's state: the epoll instance with every fd registered,
    /// the ring, or the AIO context. Fails where the kernel lacks the technique.
    pub fn new(technique: Technique) -> io::Result<EventfdBench> {
        let flags = match technique {
            Technique::Epoll => EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC,
            _ => EfdFlags::EFD_CLOEXEC,
        };
        let fds = (0..POOL)
            .map(|_| EventFd::from_value_and_flags(0, flags))
            .collect::<Result<Vec<_>, _>>()?;
        let backend = match technique {
            Technique::Blocking => Backend::Blocking,
            Technique::Epoll => {
                let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
                for (i, fd) in fds.iter().enumerate() {
                    epoll.add(fd, EpollEvent::new(EpollFlags::EPOLLIN, i as u64))?;
                }
                Backend::Epoll {
                    epoll,
                    events: [EpollEvent::empty()],
                }
            }
            Technique::IoUring { setup, batch } => {
                if !(1..=POOL).contains(&batch) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("an io_uring batch is 1 to {POOL} reads"),
                    ));
                }
                Backend::IoUring {
                    ring: Box::new(EventfdRing::new(setup, batch)?),
                    batch,
                }
            }
            Technique::LinuxAio => Backend::LinuxAio(LinuxAio::new()?),
            Technique::PosixAio => Backend::PosixAio(PosixAio::new()),
        };
        Ok(EventfdBench {
            fds,
            backend,
            expected: vec![0; POOL],
            got: vec![0; POOL],
            rounds: 0,
        })
    }

    /// Performs `reads` checked reads and returns the time spent in the reads alone.
    pub fn time_reads(&mut self, reads: u64) -> io::Result<Duration> {
        let mut total = Duration::ZERO;
        let mut left = reads;
        while left > 0 {
            let n = usize::try_from(left).map_or(POOL, |l| l.min(POOL));
            self.arm(n)?;
            let start = Instant::now();
            self.read_armed(n)?;
            total += start.elapsed();
            check(&self.expected[..n], &self.got[..n])?;
            left -= n as u64;
        }
        Ok(total)
    }

    /// Writes a value no earlier round used to each of the first `n` fds.
    fn arm(&mut self, n: usize) -> io::Result<()> {
        self.rounds += 1;
        for (i, fd) in self.fds[..n].iter().enumerate() {
            let value = self.rounds * POOL as u64 + i as u64;
            fd.write(value)?;
            self.expected[i] = value;
            self.got[i] = 0;
        }
        Ok(())
    }

    /// Reads the first `n` fds, which [`EventfdBench::arm`] made ready, into `got`.
    fn read_armed(&mut self, n: usize) -> io::Result<()> {
        let fds = &self.fds[..n];
        let got = &mut self.got[..n];
        match &mut self.backend {
            Backend::Blocking => {
                for (fd, got) in fds.iter().zip(got) {
                    *got = fd.read()?;
                }
            }
            Backend::Epoll { epoll, events } => {
                for _ in 0..n {
                    if epoll.wait(events, EPOLL_TIMEOUT_MS)? != 1 {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "epoll_wait found no ready eventfd though some were armed",
                        ));
                    }
                    let i = usize::try_from(events[0].data()).unwrap_or(usize::MAX);
                    let fd = fds.get(i).ok_or_else(|| {
                        io::Error::other(format!("epoll_wait returned an unknown fd index {i}"))
                    })?;
                    got[i] = fd.read()?;
                }
            }
            Backend::IoUring { ring, batch } => {
                for (fds, got) in fds.chunks(*batch).zip(got.chunks_mut(*batch)) {
                    ring.read_batch(fds, got)?;
                }
            }
            Backend::LinuxAio(aio) => {
                for (fd, got) in fds.iter().zip(got) {
                    *got = aio.read(fd)?;
                }
            }
            Backend::PosixAio(aio) => {
                for (fd, got) in fds.iter().zip(got) {
                    *got = aio.read(fd)?;
                }
            }
        }
        Ok(())
    }
}

/// The reference points the techniques are made of: the cost of entering the kernel at
/// all (`getppid(2)`, which does nearly nothing inside), and of an io_uring request that
/// does no I/O (a NOP, [`POOL`] per enter).
#[derive(Debug)]
pub struct Baseline {
    parent: nix::unistd::Pid,
    ring: Option<EventfdRing>,
}

impl Baseline {
    /// Notes the parent's pid and creates a default ring, if io_uring is available.
    pub fn new() -> Baseline {
        Baseline {
            parent: nix::unistd::getppid(),
            ring: EventfdRing::new(RingSetup::Default, POOL).ok(),
        }
    }

    /// Makes `n` `getppid` calls, checking each answer; returns the time they took.
    pub fn traps(&self, n: u64) -> io::Result<Duration> {
        let start = Instant::now();
        for _ in 0..n {
            // glibc does not cache getppid: each call enters the kernel.
            let got = nix::unistd::getppid();
            if got != self.parent {
                return Err(io::Error::other(format!(
                    "getppid returned {got}, not {}",
                    self.parent
                )));
            }
        }
        Ok(start.elapsed())
    }

    /// Submits `n` NOPs, [`POOL`] per enter, checking each completion; returns the time
    /// they took. Fails where io_uring is unavailable.
    pub fn nops(&mut self, n: u64) -> io::Result<Duration> {
        let ring = self
            .ring
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "no io_uring here"))?;
        let start = Instant::now();
        let mut left = n;
        while left > 0 {
            let batch = usize::try_from(left).map_or(POOL, |l| l.min(POOL));
            ring.nop_batch(batch)?;
            left -= batch as u64;
        }
        Ok(start.elapsed())
    }

    /// Whether [`Baseline::nops`] can run.
    pub fn has_io_uring(&self) -> bool {
        self.ring.is_some()
    }
}

/// `n` io_uring NOPs, one after another, each submitted and waited for by a fiber on
/// `runtime` (`fiber::nop`): the trap, the NOP, and the runtime's own work per operation
/// (the SQE and its op, the CQE's reaping, the fiber's wake-up and resume).
pub fn fiber_nops(runtime: &fiber::Runtime, n: u64) -> io::Result<Duration> {
    runtime
        .block_on(move || {
            let start = Instant::now();
            for _ in 0..n {
                fiber::nop()?;
            }
            Ok(start.elapsed())
        })
        .map_err(io::Error::other)?
}

impl Default for Baseline {
    fn default() -> Baseline {
        Baseline::new()
    }
}

/// Checks that every read returned the value written to its fd.
pub fn check(expected: &[u64], got: &[u64]) -> io::Result<()> {
    if expected.len() != got.len() {
        return Err(io::Error::other(format!(
            "{} reads for {} armed eventfds",
            got.len(),
            expected.len()
        )));
    }
    match expected.iter().zip(got).position(|(e, g)| e != g) {
        None => Ok(()),
        Some(i) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "eventfd {i}: read {} but {} was written",
                got[i], expected[i]
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

    use super::*;

    /// Whether io_uring (with `setup`) can be used here; says why not on stderr.
    fn ring_available(setup: RingSetup) -> bool {
        match EventfdRing::new(setup, 1) {
            Ok(_) => true,
            Err(e) => {
                eprintln!("skipping io_uring {}: {e}", setup.label());
                false
            }
        }
    }

    #[test]
    fn every_technique_reads_what_was_written() {
        let mut techniques = vec![
            Technique::Blocking,
            Technique::Epoll,
            Technique::LinuxAio,
            Technique::PosixAio,
        ];
        for setup in RingSetup::ALL {
            if ring_available(setup) {
                for batch in [1, 16, POOL] {
                    techniques.push(Technique::IoUring { setup, batch });
                }
            }
        }
        for technique in techniques {
            let mut bench = EventfdBench::new(technique).unwrap();
            // A partial round as well as full ones.
            bench
                .time_reads(2 * POOL as u64 + 5)
                .unwrap_or_else(|e| panic!("{technique:?}: {e}"));
            assert_eq!(bench.rounds, 3, "{technique:?}");
            // The counters were drained: no fd is left readable.
            let mut polls: Vec<_> = bench
                .fds
                .iter()
                .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
                .collect();
            assert_eq!(poll(&mut polls, PollTimeout::ZERO), Ok(0), "{technique:?}");
        }
    }

    #[test]
    fn a_wrong_value_fails_the_check() {
        assert!(check(&[1, 2, 3], &[1, 2, 3]).is_ok());
        let err = check(&[1, 2, 3], &[1, 0, 3]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("eventfd 1"), "{err}");
        assert!(check(&[1, 2], &[1]).is_err());
    }

    #[test]
    fn baselines_run() {
        let mut baseline = Baseline::new();
        baseline.traps(100).unwrap();
        if baseline.has_io_uring() {
            baseline.nops(2 * POOL as u64 + 3).unwrap();
        } else {
            assert!(baseline.nops(1).is_err());
        }
    }

    #[test]
    fn out_of_range_batches_are_refused() {
        for batch in [0, POOL + 1] {
            let technique = Technique::IoUring {
                setup: RingSetup::Default,
                batch,
            };
            assert!(EventfdBench::new(technique).is_err(), "batch {batch}");
        }
    }
}
