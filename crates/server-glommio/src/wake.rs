//! What the fan-out across executors rests on, checked on glommio itself: a
//! connection's outbox (`service::outbox::one_task::Outbox`, whose wake-up is
//! `service::signal::Signal`, a std `Waker` behind a mutex) wakes a task of a glommio
//! executor from another thread. glommio's executors share nothing, and its own
//! channels between them (`glommio::channels::shared_channel`) join one producer
//! executor to one consumer: no fit for a hub that any of N executors, or a
//! blocking-pool thread, offers to. What glommio's users rely on instead are its
//! foreign wakers (since 0.8): a task's `Waker` woken on any thread is queued to the
//! owning executor, and that executor's eventfd, which its ring waits on, is written.
//! So any runtime-free wake-up works. These tests skip with a line where glommio
//! cannot start.

use std::time::Duration;

use futures_lite::future;
use service::hub::{Line, Subscriber};
use service::outbox::one_task::Outbox;

fn line(s: &str) -> Line {
    Line::from(s.as_bytes())
}

/// Whether `outbox.notified()` completes within 5 s in a task of a glommio
/// executor, while `meanwhile` runs on another thread started from the task
/// (and returns true); `None`, with a line saying so, where glommio cannot start.
fn woken_on_glommio(
    outbox: &Outbox,
    meanwhile: impl FnOnce() -> bool + Send + 'static,
) -> Option<bool> {
    let ex = match glommio::LocalExecutorBuilder::default().make() {
        Ok(ex) => ex,
        Err(e) => {
            eprintln!("skipped: glommio cannot start here: {e}");
            return None;
        }
    };
    Some(ex.run(async {
        let other = std::thread::spawn(meanwhile);
        let woken = future::or(
            async {
                outbox.notified().await;
                true
            },
            async {
                glommio::timer::sleep(Duration::from_secs(5)).await;
                false
            },
        )
        .await;
        woken && other.join().unwrap_or(false)
    }))
}

#[test]
fn an_offer_made_while_the_task_was_busy_is_kept() {
    let outbox = Outbox::new(100);
    assert!(outbox.offer(&line("MSG r 1 a x\n")));
    assert_ne!(woken_on_glommio(&outbox, || true), Some(false));
}

#[test]
fn an_offer_from_another_thread_wakes_a_task_that_waits() {
    let outbox = Outbox::new(100);
    let other = outbox.clone();
    // The thread starts once the task runs, so the offer most likely comes
    // while it waits: glommio's foreign-waker path.
    let offer = move || other.offer(&line("MSG r 1 a x\n"));
    assert_ne!(woken_on_glommio(&outbox, offer), Some(false));
}

#[test]
fn a_cut_wakes_the_task() {
    let outbox = Outbox::new(4);
    assert!(!outbox.offer(&line("MSG r 1 a x\n")));
    assert_ne!(woken_on_glommio(&outbox, || true), Some(false));
    assert!(outbox.is_cut());
}
