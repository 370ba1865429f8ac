//! A chat connection's outbound queue between its two tasks and the room hub:
//! `service::outbox::two_task::Outbox`, the one srv-monoio and srv-compio use too (its
//! module doc gives the reasons for a mutex over one byte buffer), woken here with
//! Tokio's own `tokio::sync::Notify`, one per task, whose `notify_one` keeps a permit
//! for a task that is busy.

use std::future::Future;

use service::signal::Notifier;
use tokio::sync::Notify;

/// A handle to one connection's outbound queue; clones share it.
pub(crate) type Outbox = service::outbox::two_task::Outbox<TokioNotify>;

/// Tokio's `Notify` as the outbox's wake-ups.
#[derive(Debug, Default)]
pub(crate) struct TokioNotify(Notify);

impl Notifier for TokioNotify {
    fn notify(&self) {
        self.0.notify_one();
    }

    fn notified(&self) -> impl Future<Output = ()> + Send + '_ {
        self.0.notified()
    }
}

#[cfg(test)]
mod tests {
    //! The outbox is `service`'s to test; this checks that Tokio's `Notify` wakes a
    //! reader waiting for room.

    use service::outbox::two_task::Next;

    use super::*;

    #[test]
    fn own_output_waits_for_room_and_is_woken_by_the_write() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let outbox = Outbox::new(10);
            assert!(
                outbox.push_own(&mut vec![b'a'; 30]).await,
                "an empty queue takes anything"
            );
            let mut more = vec![b'b'; 5];
            let pushed = tokio::select! {
                biased;
                pushed = outbox.push_own(&mut more) => Some(pushed),
                () = std::future::ready(()) => None,
            };
            assert_eq!(pushed, None, "30 + 5 > 10 must wait");
            let mut batch = Vec::new();
            let Next::Write(done) = outbox.next(&mut batch) else {
                panic!("expected a batch");
            };
            outbox.sent(done, &mut batch);
            assert!(outbox.push_own(&mut more).await, "room was made");
        });
    }
}
