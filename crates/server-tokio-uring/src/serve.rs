//! Start, accept and stop: a thread per worker, each pinned (with `--cpus`),
//! each running its own tokio-uring runtime and accept loop on its own listener.
//!
//! Start: block the stop signals, pin `main` to the `--cpus` list, open the rooms,
//! bind every listener, start the workers and wait until each has pinned itself
//! and set up its ring, then print READY. Any failure before READY (no io_uring,
//! a CPU that is not there, the port in use) is one line and exit status 2.
//! Stop: on SIGINT or SIGTERM, tell every worker to stop (its runtime drops its
//! tasks and cancels what is in flight on its ring), `fdatasync` every room,
//! print the counters, and return.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use launch::cpus::pin_current_thread;
use launch::{CommonArgs, Counters, CpuList, FsyncMode, Proto, Shutdown};
use service::echo::EchoConfig;
use tokio::sync::watch;
use tokio_uring::net::{TcpListener, TcpStream};

use crate::chat::{self, Rooms};
use crate::kv::{self, Kv};
use crate::{NAME, echo};

/// Submission-queue entries per ring (the completion queue gets twice as many):
/// a thousand connections each keep a read in flight.
const RING_ENTRIES: u32 = 1024;

/// How long a worker may take to start before the server gives up.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the stop waits for the workers' runtimes to come down.
const STOP_GRACE: Duration = Duration::from_secs(4);

/// What every connection task of the server shares, across all runtimes.
#[derive(Debug)]
pub(crate) struct Service {
    app: App,
    counters: Arc<Counters>,
}

#[derive(Debug)]
enum App {
    Echo(EchoConfig),
    Chat(Arc<Rooms>),
    Kv(Kv),
}

pub(crate) fn serve(args: &CommonArgs) -> anyhow::Result<()> {
    let shutdown = Shutdown::install()?;
    if let Some(cpus) = &args.cpus {
        // Every thread started from here on inherits the list; workers then
        // narrow it to their own CPU.
        launch::cpus::pin_current_thread_to(cpus)?;
    }
    let service = Arc::new(Service::open(args)?);
    let listeners = launch::bind_group(args.addr, args.worker_count())?;
    let addr = listeners[0]
        .local_addr()
        .context("reading the bound address")?;
    let workers = start(listeners, args.cpus.as_ref(), &service)?;
    launch::announce_ready(addr)?;
    shutdown.wait();
    workers.stop();
    service.finish()
}

impl Service {
    fn open(args: &CommonArgs) -> anyhow::Result<Self> {
        let app = match args.proto {
            Proto::Echo => App::Echo(args.echo()),
            Proto::Chat => App::Chat(Arc::new(Rooms {
                hub: launch::open_rooms(args)?.context("chat without rooms")?,
                max_pending: args.max_pending,
                offload: args.fsync == FsyncMode::Always,
            })),
            Proto::Kv => App::Kv(Kv {
                store: service::kv::Store::new(),
                limit: args.kv_max_pending(),
            }),
        };
        Ok(Service {
            app,
            counters: Arc::default(),
        })
    }

    /// After the workers stopped: flush the rooms and print the counters.
    fn finish(&self) -> anyhow::Result<()> {
        let rooms = match &self.app {
            App::Chat(rooms) => Some(&rooms.hub),
            App::Echo(_) | App::Kv(_) => None,
        };
        launch::finish(NAME, rooms, &self.counters)
    }
}

/// The started workers.
#[derive(Debug)]
struct Workers {
    stop: watch::Sender<bool>,
    done: mpsc::Receiver<()>,
    threads: usize,
}

/// Starts a worker thread per listener and waits until each has its runtime.
fn start(
    listeners: Vec<StdListener>,
    cpus: Option<&CpuList>,
    service: &Arc<Service>,
) -> anyhow::Result<Workers> {
    let (stop, stopped) = watch::channel(false);
    let (report, started) = mpsc::channel();
    let (finished, done) = mpsc::channel();
    let threads = listeners.len();
    for (index, listener) in listeners.into_iter().enumerate() {
        let worker = Worker {
            cpu: cpus.map(|cpus| cpus.for_worker(index)),
            listener,
            service: Arc::clone(service),
            stop: stopped.clone(),
            finished: finished.clone(),
        };
        let report = report.clone();
        std::thread::Builder::new()
            .name(format!("{NAME}-{index}"))
            .spawn(move || worker.run(&report))
            .context("starting a worker thread")?;
    }
    for _ in 0..threads {
        started
            .recv_timeout(START_TIMEOUT)
            .context("a worker thread did not start")??;
    }
    Ok(Workers {
        stop,
        done,
        threads,
    })
}

impl Workers {
    /// Tells every worker to stop and waits, a bounded time, until they have.
    fn stop(self) {
        let _ = self.stop.send(true);
        let deadline = Instant::now() + STOP_GRACE;
        for _ in 0..self.threads {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.done.recv_timeout(left).is_err() {
                break;
            }
        }
    }
}

/// One worker thread, before it starts.
struct Worker {
    cpu: Option<usize>,
    listener: StdListener,
    service: Arc<Service>,
    stop: watch::Receiver<bool>,
    finished: mpsc::Sender<()>,
}

impl Worker {
    fn run(self, report: &mpsc::Sender<anyhow::Result<()>>) {
        let Worker {
            cpu,
            listener,
            service,
            mut stop,
            finished,
        } = self;
        let setup = || -> anyhow::Result<tokio_uring::Runtime> {
            if let Some(cpu) = cpu {
                pin_current_thread(cpu)?;
            }
            let mut builder = tokio_uring::builder();
            builder.entries(RING_ENTRIES);
            tokio_uring::Runtime::new(&builder).context(
                "cannot set up an io_uring (is it disabled by kernel.io_uring_disabled, \
                 a seccomp filter, or RLIMIT_MEMLOCK?)",
            )
        };
        let runtime = match setup() {
            Ok(runtime) => {
                let _ = report.send(Ok(()));
                runtime
            }
            Err(e) => {
                let _ = report.send(Err(e));
                return;
            }
        };
        runtime.block_on(async {
            let listener = TcpListener::from_std(listener);
            tokio::select! {
                () = accept_loop(listener, service) => {}
                _ = stop.wait_for(|&stop| stop) => {}
            }
        });
        // Drops every connection task of this worker and cancels its operations.
        drop(runtime);
        let _ = finished.send(());
    }
}

/// Accepts connections for as long as the runtime runs it, a task each, on this
/// worker's runtime.
async fn accept_loop(listener: TcpListener, service: Arc<Service>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                Counters::add(&service.counters.accepted, 1);
                // Replies are small and each one matters: no Nagle delay.
                let _ = stream.set_nodelay(true);
                tokio_uring::spawn(connection(stream, Arc::clone(&service)));
            }
            Err(e) => {
                // EMFILE and friends: the connection stays in the backlog, so
                // back off instead of spinning on it.
                eprintln!("{NAME}: accept failed: {e}; retrying in 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn connection(stream: TcpStream, service: Arc<Service>) {
    let counters = &service.counters;
    let result = match &service.app {
        App::Echo(config) => echo::serve(&stream, config, counters).await,
        App::Chat(rooms) => chat::serve(stream, rooms, counters).await,
        App::Kv(store) => kv::serve(&stream, store, counters).await,
    };
    if result.is_err() {
        Counters::add(&counters.errors, 1);
    }
    Counters::add(&counters.closed, 1);
}
