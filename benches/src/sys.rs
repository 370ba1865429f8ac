//! Every line of unsafe code in the benchmarks: an io_uring that reads eventfds into
//! buffers it owns, Linux AIO through raw system calls, glibc's POSIX AIO, and the futex
//! calls of the thread hand-off.
//!
//! Each type here is safe to use. The rule that makes it so is the same for all three
//! asynchronous interfaces: the kernel (or glibc's helper thread) is only ever given a
//! pointer into a buffer the type owns on the heap, and a type that is dropped while an
//! operation may still write into its buffer leaks the buffer instead of freeing it.
//!
//! ```text
//!  EventfdRing                         SQE user_data = index i into bufs
//!  +------------------+               +------------------------------+
//!  | IoUring          | -- SQE i -->  | READ fd_i, &bufs[i], 8 bytes |
//!  | bufs: [u64; N]   | <-- CQE i --  | res = 8, user_data = i       |
//!  | in_flight: usize |               +------------------------------+
//!  +------------------+
//! ```

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use io_uring::{IoUring, opcode, types};

/// Turns the `-1` of a failed libc call into the `io::Error` of `errno`.
fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Bytes of one eventfd read: the 8-byte counter.
const EVENTFD_READ: usize = 8;

/// The setup flags an [`EventfdRing`] is created with: the three configurations the fiber
/// runtime offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingSetup {
    /// No setup flags.
    Default,
    /// `IORING_SETUP_COOP_TASKRUN` (Linux 5.19): completions are not forced onto the
    /// submitter with an interrupt, they run at its next kernel entry.
    CoopTaskrun,
    /// `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN` (Linux 6.1): one thread
    /// submits, and completion work runs only when it waits for completions.
    SingleIssuerDeferTaskrun,
}

impl RingSetup {
    /// Every configuration, in the order the benchmarks and the report list them.
    pub const ALL: [RingSetup; 3] = [
        RingSetup::Default,
        RingSetup::CoopTaskrun,
        RingSetup::SingleIssuerDeferTaskrun,
    ];

    /// The name used in benchmark ids.
    pub fn label(self) -> &'static str {
        match self {
            RingSetup::Default => "default",
            RingSetup::CoopTaskrun => "coop_taskrun",
            RingSetup::SingleIssuerDeferTaskrun => "single_issuer+defer_taskrun",
        }
    }
}

/// An io_uring that reads up to `capacity` eventfds per submission into buffers it owns.
pub struct EventfdRing {
    ring: IoUring,
    /// One 8-byte buffer per read of a batch; read `i` of a batch lands in `bufs[i]`.
    ///
    /// # Invariant
    /// While `in_flight > 0` the kernel may still write into `bufs`: it is neither freed
    /// nor reallocated then (`Drop` leaks it).
    bufs: Box<[u64]>,
    /// SQEs pushed and not yet reaped as CQEs.
    in_flight: usize,
}

impl std::fmt::Debug for EventfdRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventfdRing")
            .field("fd", &self.ring.as_raw_fd())
            .field("capacity", &self.bufs.len())
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl EventfdRing {
    /// Creates a ring for batches of up to `capacity` reads (1 to 4096) with `setup`.
    ///
    /// Fails with the kernel's error where io_uring or a flag is unavailable (`ENOSYS`,
    /// `EPERM` where io_uring is forbidden, `EINVAL` for a flag older kernels lack).
    pub fn new(setup: RingSetup, capacity: usize) -> io::Result<EventfdRing> {
        if !(1..=4096).contains(&capacity) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an EventfdRing holds 1 to 4096 reads",
            ));
        }
        let mut builder = IoUring::builder();
        match setup {
            RingSetup::Default => {}
            RingSetup::CoopTaskrun => {
                builder.setup_coop_taskrun();
            }
            RingSetup::SingleIssuerDeferTaskrun => {
                builder.setup_single_issuer().setup_defer_taskrun();
            }
        }
        // `capacity <= 4096`, so the conversion cannot fail.
        let entries = u32::try_from(capacity.next_power_of_two()).unwrap_or(4096);
        let ring = builder.build(entries)?;
        Ok(EventfdRing {
            ring,
            bufs: vec![0; capacity].into_boxed_slice(),
            in_flight: 0,
        })
    }

    /// Reads each of `fds` once with one `io_uring_enter` that submits them all and waits
    /// for all of their completions; `out[i]` gets the counter read from `fds[i]`.
    ///
    /// Every read must complete for the call to return, so a read of an eventfd whose
    /// counter is 0 blocks it, as a blocking `read(2)` would.
    pub fn read_batch<F: AsFd>(&mut self, fds: &[F], out: &mut [u64]) -> io::Result<()> {
        let n = fds.len();
        if n > self.bufs.len() || out.len() != n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "read_batch: more fds than the ring holds, or out is not as long as fds",
            ));
        }
        if self.in_flight != 0 {
            return Err(io::Error::other(
                "the ring still has reads in flight from a call that failed",
            ));
        }
        for (i, fd) in fds.iter().enumerate() {
            let buf = self.bufs[i..].as_mut_ptr().cast::<u8>();
            let sqe =
                opcode::Read::new(types::Fd(fd.as_fd().as_raw_fd()), buf, EVENTFD_READ as u32)
                    .build()
                    .user_data(i as u64);
            // SAFETY: [1] the SQE's buffer is `bufs[i]`, 8 bytes owned by `self` on the
            // heap, which stays allocated while the read is in flight (the invariant of
            // `bufs`: `in_flight` counts this read from here on, and `Drop` leaks `bufs` if
            // it is still counted); [2] the fd is only read by the kernel, and a closed fd
            // makes a failed CQE, not undefined behaviour.
            unsafe { self.ring.submission().push(&sqe) }
                .map_err(|_| io::Error::other("the submission queue is full"))?;
            self.in_flight += 1;
        }

        let mut first_error = None;
        while self.in_flight > 0 {
            match self.ring.submit_and_wait(self.in_flight) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            for cqe in self.ring.completion() {
                self.in_flight -= 1;
                let i = usize::try_from(cqe.user_data()).unwrap_or(usize::MAX);
                let res = cqe.result();
                let outcome = if i >= n {
                    Err(io::Error::other(format!(
                        "a completion carries user_data {i}, not one of ours"
                    )))
                } else if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else if res as usize != EVENTFD_READ {
                    Err(io::Error::other(format!(
                        "an eventfd read returned {res} bytes, not 8"
                    )))
                } else {
                    Ok(())
                };
                if let Err(e) = outcome {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                // Only now that nothing is in flight are the buffers ours to read.
                out.copy_from_slice(&self.bufs[..n]);
                Ok(())
            }
        }
    }
}

impl EventfdRing {
    /// Submits `n` `IORING_OP_NOP`s (up to the capacity) with one `io_uring_enter` and
    /// waits for their completions: the cost of an io_uring request that does no I/O.
    pub fn nop_batch(&mut self, n: usize) -> io::Result<()> {
        if n > self.bufs.len() || self.in_flight != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "nop_batch: more NOPs than the ring holds, or reads still in flight",
            ));
        }
        for i in 0..n {
            let sqe = opcode::Nop::new().build().user_data(i as u64);
            // SAFETY: a NOP names no buffer and no fd, so nothing must outlive it.
            unsafe { self.ring.submission().push(&sqe) }
                .map_err(|_| io::Error::other("the submission queue is full"))?;
            self.in_flight += 1;
        }
        let mut first_error = None;
        while self.in_flight > 0 {
            match self.ring.submit_and_wait(self.in_flight) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            for cqe in self.ring.completion() {
                self.in_flight -= 1;
                if cqe.result() != 0 {
                    first_error.get_or_insert_with(|| {
                        io::Error::other(format!("a NOP completed with {}", cqe.result()))
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for EventfdRing {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // The kernel may still write into the buffers after the ring's fd is closed.
            Box::leak(std::mem::take(&mut self.bufs));
        }
    }
}

/// `IOCB_CMD_PREAD` from `linux/aio_abi.h`.
const IOCB_CMD_PREAD: u16 = 0;

/// `struct io_event` from `linux/aio_abi.h`.
#[repr(C)]
#[derive(Debug, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

/// A Linux AIO context (`io_setup`) that reads one eventfd at a time: `io_submit` of one
/// `IOCB_CMD_PREAD`, then `io_getevents` for its completion. glibc has no wrappers for
/// these calls, so they are raw system calls.
#[derive(Debug)]
pub struct LinuxAio {
    ctx: libc::c_ulong,
    /// The control block of the read in flight.
    ///
    /// # Invariant
    /// While `in_flight` the kernel may still write into `buf`: neither it nor `iocb` is
    /// freed then.
    iocb: Box<libc::iocb>,
    buf: Box<u64>,
    in_flight: bool,
}

impl LinuxAio {
    /// Creates a context with room for one request.
    pub fn new() -> io::Result<LinuxAio> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: `io_setup(nr_events, ctxp)` writes the new context id into `ctx`, a live
        // local that was zeroed as the call requires.
        cvt(unsafe { libc::syscall(libc::SYS_io_setup, 1 as libc::c_long, &raw mut ctx) })?;
        Ok(LinuxAio {
            ctx,
            // SAFETY: `iocb` is a plain C struct of integers, for which all zeroes is a valid
            // value (and the value the kernel expects in the fields we leave alone).
            iocb: Box::new(unsafe { std::mem::zeroed() }),
            buf: Box::new(0),
            in_flight: false,
        })
    }

    /// Reads `fd`'s counter: one `io_submit`, then `io_getevents` until it completes.
    pub fn read(&mut self, fd: impl AsFd) -> io::Result<u64> {
        if self.in_flight {
            return Err(io::Error::other(
                "the AIO context still has a read in flight from a call that failed",
            ));
        }
        let fd = u32::try_from(fd.as_fd().as_raw_fd())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "negative fd"))?;
        // SAFETY: as in `new`: all zeroes is a valid `iocb`.
        *self.iocb = unsafe { std::mem::zeroed() };
        self.iocb.aio_lio_opcode = IOCB_CMD_PREAD;
        self.iocb.aio_fildes = fd;
        self.iocb.aio_buf = ptr::from_mut::<u64>(&mut self.buf) as u64;
        self.iocb.aio_nbytes = EVENTFD_READ as u64;
        let mut list = [ptr::from_mut::<libc::iocb>(&mut self.iocb)];
        // SAFETY: [1] `list` holds one pointer to a valid, initialised iocb that lives in
        // `self`; [2] the iocb points at `buf`, 8 bytes owned by `self` that stay allocated
        // while the read is in flight (`in_flight` is set below before anything can fail,
        // and `Drop` waits for or leaks an in-flight read).
        let submitted = cvt(unsafe {
            libc::syscall(
                libc::SYS_io_submit,
                self.ctx,
                1 as libc::c_long,
                list.as_mut_ptr(),
            )
        })?;
        if submitted != 1 {
            return Err(io::Error::other("io_submit accepted no request"));
        }
        self.in_flight = true;
        let mut event = IoEvent::default();
        loop {
            // SAFETY: `io_getevents(ctx, min_nr, nr, events, timeout)` writes at most `nr`
            // (1) events into `event`, a live local of the kernel's `struct io_event`
            // layout; a null timeout waits without limit.
            let got = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.ctx,
                    1 as libc::c_long,
                    1 as libc::c_long,
                    &raw mut event,
                    ptr::null_mut::<libc::timespec>(),
                )
            };
            match cvt(got) {
                Ok(1) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.in_flight = false;
        if event.res < 0 {
            let errno = i32::try_from(-event.res).unwrap_or(libc::EIO);
            return Err(io::Error::from_raw_os_error(errno));
        }
        if event.res != EVENTFD_READ as i64 {
            return Err(io::Error::other(format!(
                "a Linux AIO eventfd read returned {} bytes, not 8",
                event.res
            )));
        }
        Ok(*self.buf)
    }
}

impl Drop for LinuxAio {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from `io_setup` and is destroyed only here. `io_destroy`
        // cancels or waits for every request in flight before it returns.
        let destroyed = cvt(unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) });
        if destroyed.is_err() && self.in_flight {
            // The kernel may still write into these.
            Box::leak(std::mem::replace(&mut self.buf, Box::new(0)));
            // SAFETY: as in `new`: all zeroes is a valid `iocb`.
            Box::leak(std::mem::replace(
                &mut self.iocb,
                Box::new(unsafe { std::mem::zeroed() }),
            ));
        }
    }
}

/// POSIX AIO as glibc implements it: `aio_read` hands the request to a pool of helper
/// threads inside the process (one of which performs the `read(2)`), and `aio_suspend`
/// waits for that thread to finish it. There is no kernel asynchronous I/O involved.
#[derive(Debug)]
pub struct PosixAio {
    /// # Invariant
    /// While `in_flight`, glibc's helper thread may still use `cb` and write into `buf`:
    /// neither is freed then (`Drop` leaks them).
    cb: Box<libc::aiocb>,
    buf: Box<u64>,
    in_flight: bool,
}

impl PosixAio {
    /// Creates the control block; glibc starts its helper threads on the first request.
    pub fn new() -> PosixAio {
        PosixAio {
            // SAFETY: `aiocb` is a C struct of integers and pointers, for which all zeroes
            // is a valid value (null pointers, no signal).
            cb: Box::new(unsafe { std::mem::zeroed() }),
            buf: Box::new(0),
            in_flight: false,
        }
    }

    /// Reads `fd`'s counter: `aio_read`, then `aio_suspend` until `aio_error` says it is
    /// done, then `aio_return`.
    pub fn read(&mut self, fd: impl AsFd) -> io::Result<u64> {
        if self.in_flight {
            return Err(io::Error::other(
                "the control block still has a read in flight from a call that failed",
            ));
        }
        // SAFETY: as in `new`: all zeroes is a valid `aiocb`.
        *self.cb = unsafe { std::mem::zeroed() };
        self.cb.aio_fildes = fd.as_fd().as_raw_fd();
        self.cb.aio_buf = ptr::from_mut::<u64>(&mut self.buf).cast();
        self.cb.aio_nbytes = EVENTFD_READ;
        self.cb.aio_sigevent.sigev_notify = libc::SIGEV_NONE;
        let cb = ptr::from_mut::<libc::aiocb>(&mut self.cb);
        // SAFETY: [1] `cb` is a valid, initialised aiocb owned by `self`; [2] it and the
        // 8-byte `buf` it points at stay allocated while the request is in flight
        // (`in_flight` is set right after, and `Drop` leaks both while it is set).
        cvt(libc::c_long::from(unsafe { libc::aio_read(cb) }))?;
        self.in_flight = true;
        let status = loop {
            // SAFETY: `cb` is the control block of the request just queued.
            let status = unsafe { libc::aio_error(cb) };
            if status != libc::EINPROGRESS {
                break status;
            }
            let list = [cb.cast_const()];
            // SAFETY: `list` holds one pointer to a live aiocb; a null timeout waits
            // without limit.
            let r = unsafe { libc::aio_suspend(list.as_ptr(), 1, ptr::null()) };
            if r == -1 {
                let e = io::Error::last_os_error();
                if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) {
                    return Err(e);
                }
            }
        };
        if status == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the request is complete (`aio_error` returned something other than
        // EINPROGRESS) and `aio_return` is called once for it, as POSIX requires.
        let ret = unsafe { libc::aio_return(cb) };
        self.in_flight = false;
        if status != 0 {
            return Err(io::Error::from_raw_os_error(status));
        }
        if ret != EVENTFD_READ as isize {
            return Err(io::Error::other(format!(
                "a POSIX AIO eventfd read returned {ret} bytes, not 8"
            )));
        }
        Ok(*self.buf)
    }
}

impl Default for PosixAio {
    fn default() -> PosixAio {
        PosixAio::new()
    }
}

impl Drop for PosixAio {
    fn drop(&mut self) {
        if self.in_flight {
            // glibc's helper thread may still write into these.
            Box::leak(std::mem::replace(&mut self.buf, Box::new(0)));
            // SAFETY: as in `new`: all zeroes is a valid `aiocb`.
            Box::leak(std::mem::replace(
                &mut self.cb,
                Box::new(unsafe { std::mem::zeroed() }),
            ));
        }
    }
}

/// Sleeps in `futex(FUTEX_WAIT_PRIVATE)` while `word` holds `expected`, for at most
/// `timeout`. Returns `false` if the timeout ran out, `true` otherwise (woken, the word
/// already differed, or a signal): the caller re-reads the word either way.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) -> io::Result<bool> {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: [1] `word.as_ptr()` points at a live, aligned u32 for the whole call, which
    // the kernel only reads; [2] `ts` is a live timespec (a relative timeout for
    // FUTEX_WAIT); the remaining arguments are unused by FUTEX_WAIT.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &raw const ts,
            ptr::null::<u32>(),
            0u32,
        )
    };
    match cvt(r) {
        Ok(_) => Ok(true),
        Err(e) => match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EINTR) => Ok(true),
            Some(libc::ETIMEDOUT) => Ok(false),
            _ => Err(e),
        },
    }
}

/// Wakes up to `n` threads sleeping in [`futex_wait`] on `word`; returns how many woke.
pub fn futex_wake(word: &AtomicU32, n: u32) -> io::Result<usize> {
    let n = libc::c_int::try_from(n).unwrap_or(libc::c_int::MAX);
    // SAFETY: `word.as_ptr()` points at a live, aligned u32 for the whole call; FUTEX_WAKE
    // uses only the address and the count.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        )
    };
    Ok(usize::try_from(cvt(r)?).unwrap_or(0))
}
