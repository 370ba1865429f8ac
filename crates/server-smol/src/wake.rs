//! What the fan-out across threads rests on, checked on smol itself: a connection's
//! outbox (`service::outbox::one_task::Outbox`, whose wake-up is
//! `service::signal::Signal`, a std `Waker` behind a mutex) wakes a task blocked on
//! smol from another thread. smol has no `Notify`, and its wakers are ordinary
//! thread-safe `Waker`s, so any runtime-free wake-up works.

use std::time::Duration;

use service::hub::{Line, Subscriber};
use service::outbox::one_task::Outbox;
use smol::future::FutureExt;

fn line(s: &str) -> Line {
    Line::from(s.as_bytes())
}

/// Whether `outbox.notified()` completes within 5 s, while `meanwhile` runs on
/// another thread started from the waiting future (and returns true).
fn woken(outbox: &Outbox, meanwhile: impl FnOnce() -> bool + Send + 'static) -> bool {
    smol::block_on(async {
        let other = std::thread::spawn(meanwhile);
        let woken = async {
            outbox.notified().await;
            true
        }
        .or(async {
            smol::Timer::after(Duration::from_secs(5)).await;
            false
        })
        .await;
        woken && other.join().unwrap_or(false)
    })
}

#[test]
fn an_offer_made_while_the_task_was_busy_is_kept() {
    let outbox = Outbox::new(100);
    assert!(outbox.offer(&line("MSG r 1 a x\n")));
    assert!(woken(&outbox, || true));
}

#[test]
fn an_offer_from_another_thread_wakes_a_task_that_waits() {
    let outbox = Outbox::new(100);
    let other = outbox.clone();
    assert!(woken(&outbox, move || other.offer(&line("MSG r 1 a x\n"))));
}

#[test]
fn a_cut_wakes_the_task() {
    let outbox = Outbox::new(4);
    assert!(!outbox.offer(&line("MSG r 1 a x\n")));
    assert!(woken(&outbox, || true), "the cut left a permit");
    assert!(outbox.is_cut());
}
