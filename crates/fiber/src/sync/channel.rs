//! A bounded multi-producer, multi-consumer channel.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::park::{self, Parked, Waker};

/// Creates a channel that holds at most `capacity` messages (at least one).
///
/// [`Sender::try_send`] never parks and works from any thread, which suits a hub that offers
/// a message to many subscribers and must not wait for a slow one. [`Sender::send`] and
/// [`Receiver::recv`] park the fiber (or block the thread) when the channel is full or empty.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            capacity: capacity.max(1),
            senders: 1,
            receivers: 1,
            send_waiters: VecDeque::new(),
            recv_waiters: VecDeque::new(),
        }),
    });
    (
        Sender {
            chan: Arc::clone(&chan),
        },
        Receiver { chan },
    )
}

struct Chan<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    queue: VecDeque<T>,
    capacity: usize,
    senders: usize,
    receivers: usize,
    send_waiters: VecDeque<Waker>,
    recv_waiters: VecDeque<Waker>,
}

impl<T> Chan<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn register(waiters: &mut VecDeque<Waker>, me: &Waker) {
    if !waiters.iter().any(|w| w.same(me)) {
        waiters.push_back(me.clone());
    }
}

fn unregister(waiters: &mut VecDeque<Waker>, me: &Waker) {
    waiters.retain(|w| !w.same(me));
}

/// The sending half; clone it for more producers.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half; clone it for more consumers (each message goes to one).
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

/// The receivers are gone; the message comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// Why [`Sender::try_send`] did not send; the message comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The channel is full.
    Full(T),
    /// The receivers are gone.
    Disconnected(T),
}

/// The senders are gone and the channel is empty.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct RecvError;

/// Why [`Receiver::try_recv`] returned nothing.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// Nothing queued now.
    Empty,
    /// The senders are gone and the channel is empty.
    Disconnected,
}

/// Why [`Receiver::recv_timeout`] returned nothing.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    /// Nothing arrived in time.
    Timeout,
    /// The senders are gone and the channel is empty.
    Disconnected,
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receivers are gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => {
                f.write_str("sending on a channel whose receivers are gone")
            }
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders are gone")
    }
}

impl std::error::Error for RecvError {}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => RecvError.fmt(f),
        }
    }
}

impl std::error::Error for TryRecvError {}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a channel"),
            RecvTimeoutError::Disconnected => RecvError.fmt(f),
        }
    }
}

impl std::error::Error for RecvTimeoutError {}

impl<T> Sender<T> {
    /// Queues `value` if there is room now; never parks.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let waiter = {
            let mut st = self.chan.lock();
            if st.receivers == 0 {
                return Err(TrySendError::Disconnected(value));
            }
            if st.queue.len() >= st.capacity {
                return Err(TrySendError::Full(value));
            }
            st.queue.push_back(value);
            st.recv_waiters.pop_front()
        };
        if let Some(w) = waiter {
            w.wake();
        }
        Ok(())
    }

    /// Queues `value`, parking while the channel is full.
    ///
    /// Fails (giving the value back) if the receivers are gone, or if the fiber is torn down
    /// at shutdown while it waits.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut me: Option<Waker> = None;
        loop {
            let waiter = {
                let mut st = self.chan.lock();
                if st.receivers == 0 {
                    if let Some(me) = &me {
                        unregister(&mut st.send_waiters, me);
                    }
                    return Err(SendError(value));
                }
                if st.queue.len() < st.capacity {
                    st.queue.push_back(value);
                    if let Some(me) = &me {
                        unregister(&mut st.send_waiters, me);
                    }
                    st.recv_waiters.pop_front()
                } else {
                    let w = me.get_or_insert_with(Waker::current);
                    register(&mut st.send_waiters, w);
                    drop(st);
                    if park::park() == Parked::Cancelled {
                        let mut st = self.chan.lock();
                        if let Some(me) = &me {
                            unregister(&mut st.send_waiters, me);
                        }
                        return Err(SendError(value));
                    }
                    continue;
                }
            };
            if let Some(w) = waiter {
                w.wake();
            }
            return Ok(());
        }
    }

    /// Whether the receivers are gone.
    pub fn is_closed(&self) -> bool {
        self.chan.lock().receivers == 0
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.chan.lock().queue.len()
    }

    /// Whether nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Sender<T> {
        self.chan.lock().senders += 1;
        Sender {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waiters = {
            let mut st = self.chan.lock();
            st.senders -= 1;
            if st.senders > 0 {
                return;
            }
            std::mem::take(&mut st.recv_waiters)
        };
        for w in waiters {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Takes a message if one is queued now.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let (value, waiter) = {
            let mut st = self.chan.lock();
            match st.queue.pop_front() {
                Some(v) => (v, st.send_waiters.pop_front()),
                None if st.senders == 0 => return Err(TryRecvError::Disconnected),
                None => return Err(TryRecvError::Empty),
            }
        };
        if let Some(w) = waiter {
            w.wake();
        }
        Ok(value)
    }

    /// Takes the next message, parking while the channel is empty.
    ///
    /// Fails once the senders are gone and the channel is empty, or if the fiber is torn
    /// down at shutdown while it waits.
    pub fn recv(&self) -> Result<T, RecvError> {
        match self.recv_deadline(None) {
            Ok(v) => Ok(v),
            Err(_) => Err(RecvError),
        }
    }

    /// Like [`recv`](Self::recv), giving up after `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_deadline(Some(Instant::now() + timeout))
    }

    fn recv_deadline(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        let mut me: Option<Waker> = None;
        loop {
            let (value, waiter) = {
                let mut st = self.chan.lock();
                match st.queue.pop_front() {
                    Some(v) => {
                        if let Some(me) = &me {
                            unregister(&mut st.recv_waiters, me);
                        }
                        (v, st.send_waiters.pop_front())
                    }
                    None if st.senders == 0 => return Err(RecvTimeoutError::Disconnected),
                    None => {
                        let w = me.get_or_insert_with(Waker::current);
                        register(&mut st.recv_waiters, w);
                        drop(st);
                        let parked = match deadline {
                            None => park::park(),
                            Some(d) => {
                                let now = Instant::now();
                                if now >= d {
                                    let mut st = self.chan.lock();
                                    unregister(&mut st.recv_waiters, w);
                                    return Err(RecvTimeoutError::Timeout);
                                }
                                if park::on_fiber() {
                                    crate::time::park_fiber_timeout(d - now)
                                } else {
                                    park::park_thread_timeout(d - now);
                                    Parked::Woken
                                }
                            }
                        };
                        if parked == Parked::Cancelled {
                            let mut st = self.chan.lock();
                            unregister(&mut st.recv_waiters, w);
                            return Err(RecvTimeoutError::Disconnected);
                        }
                        continue;
                    }
                }
            };
            if let Some(w) = waiter {
                w.wake();
            }
            return Ok(value);
        }
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.chan.lock().queue.len()
    }

    /// Whether nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An iterator that receives until the senders are gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Receiver<T> {
        self.chan.lock().receivers += 1;
        Receiver {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let (waiters, dropped) = {
            let mut st = self.chan.lock();
            st.receivers -= 1;
            if st.receivers > 0 {
                return;
            }
            (
                std::mem::take(&mut st.send_waiters),
                std::mem::take(&mut st.queue),
            )
        };
        // Queued messages are dropped outside the lock: their destructors may use channels.
        drop(dropped);
        for w in waiters {
            w.wake();
        }
    }
}
