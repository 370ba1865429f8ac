//! Waiting for the first of two futures, the other dropped: what `tokio::select!` and
//! `monoio::select!` give their servers, for the runtimes that ship no such macro
//! (compio's users reach for `futures`' `select`, glommio's and smol's for
//! futures-lite's `or`), and for [`crate::stream`]. Two arms need no more than this.
//!
//! ```
//! use std::pin::pin;
//! use std::task::{Context, Poll, Waker};
//! use service::race::{First, first};
//!
//! let race = pin!(first(std::future::pending::<()>(), std::future::ready(2)));
//! let won = race.poll(&mut Context::from_waker(Waker::noop()));
//! assert!(matches!(won, Poll::Ready(First::B(2))));
//! ```

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

/// Which future finished first.
#[derive(Debug)]
pub enum First<A, B> {
    /// The first one.
    A(A),
    /// The second one.
    B(B),
}

/// Polls `a`, then `b`, each turn, and returns the first output; the other future is
/// dropped (for a compio operation, that cancels it on the ring).
pub async fn first<A: Future, B: Future>(a: A, b: B) -> First<A::Output, B::Output> {
    let (mut a, mut b) = (pin!(a), pin!(b));
    poll_fn(|cx| {
        if let Poll::Ready(out) = a.as_mut().poll(cx) {
            return Poll::Ready(First::A(out));
        }
        b.as_mut().poll(cx).map(First::B)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Waker};

    use super::*;

    #[test]
    fn the_first_ready_wins_and_the_first_argument_goes_first() {
        let mut cx = Context::from_waker(Waker::noop());
        let both = pin!(first(std::future::ready(1), std::future::ready("b"))).poll(&mut cx);
        assert!(matches!(both, Poll::Ready(First::A(1))));
        let second = pin!(first(std::future::pending::<()>(), std::future::ready(2))).poll(&mut cx);
        assert!(matches!(second, Poll::Ready(First::B(2))));
    }
}
