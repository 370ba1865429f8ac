//! The queue of a program whose async tasks, on every worker's runtime, take from one
//! [`Work`] (search-monoio, search-compio, search-glommio): the work under a lock and
//! the wakers of the tasks waiting for more of it, and one task's loop. Free of any
//! runtime: it needs only that a task's `Waker` may be woken from another worker's
//! thread, which monoio (with its `sync` feature), compio and glommio (its foreign
//! wakers) all allow. search-tokio-uring keeps its own queue around Tokio's `Notify`.
//!
//! ```
//! use std::pin::pin;
//! use std::task::{Context, Waker};
//! use search::tally::Tally;
//! use search::tasks::Tasks;
//! use search::work::Work;
//!
//! let tally = Tally::new();
//! let tasks = Tasks::new(Work::of_roots(&[], &tally));
//! let run = pin!(tasks.run(&tally, async |path| panic!("{path:?} is not there")));
//! // No roots: the walk is over at once.
//! assert!(run.poll(&mut Context::from_waker(Waker::noop())).is_ready());
//! ```

use std::future::poll_fn;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use crate::tally::Tally;
use crate::work::{Item, Taken, Work, list};

/// The walk's work under a lock, and the wakers of the tasks waiting for more of it.
#[derive(Debug)]
pub struct Tasks(Mutex<(Work, Vec<Waker>)>);

impl Tasks {
    /// The queue of `work`, no task waiting.
    pub fn new(work: Work) -> Self {
        Tasks(Mutex::new((work, Vec::new())))
    }

    fn lock(&self) -> MutexGuard<'_, (Work, Vec<Waker>)> {
        // Each critical section leaves `Work` consistent, or panicked in `list`'s caller.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next item, or `None` when the walk is over.
    pub async fn take(&self) -> Option<Item> {
        // The look and the registration are under one lock: no wake-up is lost.
        poll_fn(|cx| {
            let mut state = self.lock();
            match state.0.take() {
                Taken::Item(item) => Poll::Ready(Some(item)),
                Taken::Over => Poll::Ready(None),
                Taken::Wait => {
                    state.1.push(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Ends one taken item, queueing what it found, and wakes every waiting task if
    /// there is more to take or the walk is over.
    pub fn finish(&self, found: Vec<Item>) {
        let woken = {
            let mut state = self.lock();
            if state.0.finish(found) {
                std::mem::take(&mut state.1)
            } else {
                Vec::new()
            }
        };
        woken.into_iter().for_each(Waker::wake);
    }

    /// One task's loop until the walk is over: lists a directory on the calling thread
    /// (io_uring has no `getdents`) and searches a file with `search`.
    pub async fn run(&self, tally: &Tally, mut search: impl AsyncFnMut(&Path)) {
        let mut found = Vec::new();
        while let Some(item) = self.take().await {
            match &item {
                Item::Dir(dir) => list(dir, tally, &mut found),
                Item::File(path) => search(path).await,
            }
            self.finish(std::mem::take(&mut found));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Context;

    use super::*;

    #[test]
    fn a_task_waits_while_an_item_is_in_progress_and_is_woken_by_its_end() {
        let tally = Tally::new();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let tasks = Tasks::new(Work::of_roots(&[dir.path().to_path_buf()], &tally));
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Some(Item::Dir(root))) = pin!(tasks.take()).poll(&mut cx) else {
            panic!("the root comes first");
        };
        let mut waiting = pin!(tasks.take());
        assert!(
            waiting.as_mut().poll(&mut cx).is_pending(),
            "the root is in progress"
        );
        let mut found = Vec::new();
        list(&root, &tally, &mut found);
        tasks.finish(found);
        assert!(matches!(
            waiting.poll(&mut cx),
            Poll::Ready(Some(Item::File(_)))
        ));
    }

    #[test]
    fn a_task_searches_every_file_of_the_tree() {
        let tally = Tally::new();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        std::fs::write(dir.path().join("sub/b"), b"y").unwrap();
        let tasks = Tasks::new(Work::of_roots(&[dir.path().to_path_buf()], &tally));
        let mut files = Vec::new();
        {
            let run = pin!(tasks.run(&tally, async |path| files.push(path.to_path_buf())));
            assert!(run.poll(&mut Context::from_waker(Waker::noop())).is_ready());
        }
        files.sort();
        assert_eq!(files, [dir.path().join("a"), dir.path().join("sub/b")]);
    }
}
