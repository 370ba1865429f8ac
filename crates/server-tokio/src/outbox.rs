//! A chat connection's outbound queue: `service::outbox::one_task::Outbox`, the one
//! srv-glommio and srv-smol use too (its module doc says why a mutex over one byte
//! buffer and a wake-up, not a channel), woken here with Tokio's own
//! `tokio::sync::Notify`, whose `notify_one` keeps a permit for a task that is busy.

use std::future::Future;

use service::signal::Notifier;
use tokio::sync::Notify;

/// A handle to one connection's outbound queue; clones share it.
pub(crate) type Outbox = service::outbox::one_task::Outbox<TokioNotify>;

/// Tokio's `Notify` as the outbox's wake-up.
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
    //! The outbox is `service`'s to test; these check that Tokio's `Notify` wakes it.

    use std::time::Duration;

    use service::hub::{Line, Subscriber};

    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    #[tokio::test]
    async fn an_offer_wakes_the_task_even_if_it_was_busy() {
        let outbox = Outbox::new(100);
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        tokio::time::timeout(Duration::from_secs(5), outbox.notified())
            .await
            .expect("the permit was kept");
    }

    #[tokio::test]
    async fn a_cut_wakes_the_task() {
        let outbox = Outbox::new(4);
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        tokio::time::timeout(Duration::from_secs(5), outbox.notified())
            .await
            .expect("the cut left a permit");
        assert!(outbox.is_cut());
    }
}
