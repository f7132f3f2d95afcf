//! Async record iterators: [`AsyncIter`] (a [`Stream`] of owned records) and [`AsyncCowIter`]
//! (the zero-copy closure form), woken by the kernel through one shared reactor thread
//! (`reactor.rs`). The user-facing explanation is on [`AsyncIter`].

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;

use super::reactor::Waiter;
use super::record::{Parser, Priv, RawRecord, Record};
use super::{CowChunk, CowIter, Iter, Sampler};
use crate::error::{Error, Result};

/// Where a stream is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Still waiting for records.
    Open,
    /// The kernel said hangup or error: drain what is left, then end.
    Draining,
    /// Ended: every poll returns `None`.
    Done,
}

/// The readiness half shared by both iterators: the waiter and where the stream is.
#[derive(Debug)]
pub(super) struct Wait {
    waiter: Waiter,
    end: End,
}

/// What the caller should do after [`Wait::poll`].
enum Step {
    /// Try the ring again.
    Retry,
    /// Yield this error.
    Error(Error),
    /// The stream is over.
    End,
    /// Nothing to do until the task is woken.
    Pending,
}

impl Wait {
    pub(super) fn new(sampler: &Sampler) -> Result<Self> {
        Ok(Self {
            waiter: sampler.waiters()?.waiter(),
            end: End::Open,
        })
    }

    /// Called when the ring was found empty: registers the waker and decides.
    fn poll(&mut self, cx: &Context<'_>, retried: &mut bool) -> Step {
        match self.end {
            End::Done => return Step::End,
            End::Draining => {
                self.end = End::Done;
                return Step::End;
            }
            End::Open => {}
        }
        let ready = self.waiter.poll_ready(cx);
        if ready.error {
            // Records written before the error are still delivered after it.
            self.end = End::Draining;
            return Step::Error(Error::io(
                "waiting for records",
                io::Error::other(
                    "the kernel reported EPOLLERR on the sampler: the event is in error state \
                     (a pinned counter could not be kept on its PMU, or the PMU was removed); \
                     re-enable it or open it unpinned",
                ),
            ));
        }
        if ready.hangup {
            // The target exited: one last look at the ring, then the end.
            self.end = End::Draining;
            return Step::Retry;
        }
        if (ready.readable || ready.flush) && !*retried {
            // A wakeup (or a flush tick, or the ring given back by another reader) arrived after the
            // ring was looked at: look again, once.
            *retried = true;
            return Step::Retry;
        }
        Step::Pending
    }

    /// Shared poll loop: `take` looks at the ring once (`None`: empty, or ended when `ended()`).
    ///
    /// While another reader holds the ring the task waits: it is woken when the ring is given back.
    /// An error that ends the reader is yielded once; the stream ends after it.
    pub(super) fn poll_with<T>(
        &mut self,
        cx: &Context<'_>,
        mut take: impl FnMut() -> Option<Result<T>>,
        ended: impl Fn() -> bool,
    ) -> Poll<Option<Result<T>>> {
        let mut retried = false;
        loop {
            if self.end != End::Done {
                match take() {
                    Some(Err(Error::RingBusy)) => {}
                    Some(item) => return Poll::Ready(Some(item)),
                    None if ended() => {
                        self.end = End::Done;
                        return Poll::Ready(None);
                    }
                    None => {}
                }
            }
            match self.poll(cx, &mut retried) {
                Step::Retry => continue,
                Step::Error(e) => return Poll::Ready(Some(Err(e))),
                Step::End => return Poll::Ready(None),
                Step::Pending => return Poll::Pending,
            }
        }
    }

    /// See [`AsyncIter::flush_every`].
    pub(super) fn flush_every(&mut self, interval: Option<Duration>) -> Result<()> {
        self.waiter.set_flush_interval(interval)
    }
}

/// An async iterator of owned records: a [`Stream`] driven by the shared reactor.
///
///
/// [`Iter::into_async`] and [`CowIter::into_async`] register the sampler's fd with the process's
/// reactor: one helper thread (`perf-event-io`) and one epoll set for every async iterator, so a
/// thousand samplers cost one thread, not a thousand. Any executor works (tokio, async-std,
/// `futures::executor`, a hand-written one): the reactor only calls [`Waker::wake`](std::task::Waker::wake).
///
/// ```no_run
/// use perf_event::config::{Opts, Proc, Cpu, SampleOn, WakeUpOn};
/// use perf_event::count::Counter;
/// use perf_event::event::sw::Software;
///
/// # fn main() -> Result<(), perf_event::Error> {
/// let mut opts = Opts::default();
/// opts.sample_on = SampleOn::Count(1_000_000); // every ms of task clock
/// opts.sample_format.code_addr = true;
/// opts.wake_up.on = WakeUpOn::Samples(1); // wake the task at every sample
/// let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts)?;
/// let sampler = counter.sampler(4)?;
/// let mut stream = sampler.iter().into_async()?;
/// counter.enable()?;
/// futures::executor::block_on(async {
///     std::thread::spawn(|| (0..50_000_000u64).sum::<u64>());
///     while let Some((cpumode, record)) = stream.next().await {
///         println!("{cpumode:?} {record:-?}");
///     }
/// });
/// # Ok(()) }
/// ```
///
/// # When the task is woken
///
/// The kernel wakes a sampler's fd according to [`Opts::wake_up`](crate::config::Opts::wake_up):
/// after every N samples (`WakeUpOn::Samples(n)`, `wakeup_events`) or once N bytes are in the ring
/// (`WakeUpOn::Bytes(n)`, `wakeup_watermark`). The default (`Samples(0)`) is a watermark of half
/// the ring: a slow event on a large ring may then wake its reader seconds late, or, at the end of
/// a capture, never. Either choose a small wake-up threshold, or set a flush interval with
/// [`AsyncIter::flush_every`], which wakes the task periodically to take whatever is in the ring.
/// Records are never lost by waiting: only a full ring drops them (and reports a
/// [`Lost`](super::record::Record) record).
///
/// # How the stream ends
///
/// - When the monitored task exits (the kernel reports `EPOLLHUP` once the task and its inherited
///   children are gone), the stream yields what is left in the ring and then ends (`None`). An
///   event on every task of a CPU never hangs up.
/// - When the kernel reports `EPOLLERR` (a pinned counter that could not be kept on its PMU, or a
///   PMU that was removed), the stream yields one [`Error`] item, then what is left in the ring,
///   then ends. (The spec-compatible [`AsyncIter::next`] ends at the error; use
///   [`AsyncIter::try_next`] or the [`Stream`] to see it.) Neither case busy-loops: the reactor
///   registers fds edge-triggered.
///
/// # Using your own reactor
///
/// [`Sampler`](super::Sampler) implements [`AsFd`], so an executor's own reactor can watch it
/// instead. Use one or the other on a sampler: the kernel hands each wakeup of a perf fd to one
/// poller (`perf_poll` exchanges the ring's pending bits with zero), and once this crate's iterators
/// waited on a sampler ([`Iter::next_timeout`], the async forms), its registration with the shared
/// reactor stays until the sampler is dropped. With tokio's `AsyncFd`:
///
/// ```no_run
/// use perf_event::config::{Opts, Proc, Cpu, SampleOn, WakeUpOn};
/// use perf_event::count::Counter;
/// use perf_event::event::sw::Software;
/// use std::os::fd::AsFd;
/// use tokio::io::unix::AsyncFd;
/// use tokio::io::Interest;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut opts = Opts::default();
/// opts.sample_on = SampleOn::Count(1_000_000);
/// opts.wake_up.on = WakeUpOn::Samples(1);
/// let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts)?;
/// let sampler = counter.sampler(4)?;
/// // Tokio registers the fd edge-triggered: `perf_poll` reports EPOLLIN once per kernel wakeup.
/// let fd = sampler.as_fd().try_clone_to_owned()?;
/// // SAFETY: the AsyncFd owns `fd`, so it stays open, and the same, while registered (tokio ≥ 1.54
/// // asks this of the caller; older versions have the safe, now deprecated, `with_interest`).
/// let ready = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
/// let mut iter = sampler.iter();
/// counter.enable()?;
/// std::thread::spawn(|| (0..50_000_000u64).sum::<u64>());
/// let mut n = 0;
/// while n < 10 {
///     let mut guard = ready.readable().await?;
///     // Drain everything, then clear the readiness and wait for the next wakeup.
///     for (_cpumode, _record) in iter.by_ref() {
///         n += 1;
///     }
///     guard.clear_ready();
/// }
/// # Ok(()) }
/// ```
///
/// Made by [`Iter::into_async`].
#[derive(Debug)]
pub struct AsyncIter<'a> {
    inner: Iter<'a>,
    wait: Wait,
}

impl<'a> Iter<'a> {
    /// Creates an asynchronous iterator: registers the sampler with the shared reactor thread
    /// (started on first use).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the fd cannot be duplicated or added to the epoll set, or the reactor
    /// thread cannot be started.
    pub fn into_async(self) -> Result<AsyncIter<'a>> {
        let wait = Wait::new(self.sampler())?;
        Ok(AsyncIter { inner: self, wait })
    }
}

impl<'a> AsyncIter<'a> {
    /// Polls for the next record, registering the task for wakeup when the ring is empty; `None`
    /// once the stream has ended (the target exited and the ring is drained).
    ///
    /// This is the spec's form, with no error items: after `EPOLLERR` it yields what is left in
    /// the ring and ends; a corrupt ring ends it. Use [`poll_try_next`](Self::poll_try_next) (or
    /// the [`Stream`]) to see errors.
    pub fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<(Priv, Record)>> {
        let this = self.get_mut();
        loop {
            return match this.poll_try_next_inner(cx) {
                Poll::Ready(Some(Ok(it))) => Poll::Ready(Some(it)),
                Poll::Ready(Some(Err(_))) if this.wait.end == End::Draining => continue,
                Poll::Ready(Some(Err(_))) | Poll::Ready(None) => {
                    this.wait.end = End::Done;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            };
        }
    }

    /// Polls for the next record or error. After an error item from the kernel (`EPOLLERR`) the
    /// records still in the ring follow, then the end.
    pub fn poll_try_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Priv, Record)>>> {
        self.get_mut().poll_try_next_inner(cx)
    }

    fn poll_try_next_inner(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Priv, Record)>>> {
        let inner = &mut self.inner;
        let ended = Cell::new(false);
        let take = || {
            let item = inner.try_next();
            ended.set(inner.reader().ended());
            item
        };
        self.wait.poll_with(cx, take, || ended.get())
    }

    /// Waits for the next record; `None` once the stream has ended. The spec's form, with no
    /// error items (see [`poll_next`](Self::poll_next) and [`try_next`](Self::try_next)).
    pub async fn next(&mut self) -> Option<(Priv, Record)> {
        poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// Waits for the next record or error; `None` once the stream has ended.
    pub async fn try_next(&mut self) -> Option<Result<(Priv, Record)>> {
        poll_fn(|cx| self.poll_try_next_inner(cx)).await
    }

    /// Wakes the task every `interval` even without a kernel wakeup, so records below the
    /// wake-up threshold are delivered at most `interval` late; `None` turns it off.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the timer cannot be created.
    pub fn flush_every(&mut self, interval: Option<Duration>) -> Result<()> {
        self.wait.waiter.set_flush_interval(interval)
    }

    /// The synchronous iterator back, e.g. to drain the ring without waiting.
    pub fn into_sync(self) -> Iter<'a> {
        self.inner
    }
}

impl Stream for AsyncIter<'_> {
    /// An owned record, or an error from the kernel (`EPOLLERR`) or the parser.
    type Item = Result<(Priv, Record)>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_try_next_inner(cx)
    }
}

impl AsFd for AsyncIter<'_> {
    /// The sampler's fd.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.sampler().as_fd()
    }
}

/// An async zero-copy record iterator: [`CowIter::next`]'s closure form, driven by the shared
/// reactor.
///
/// Made by [`CowIter::into_async`]. It is woken, and ends, as [`AsyncIter`] does.
#[derive(Debug)]
pub struct AsyncCowIter<'a> {
    inner: CowIter<'a>,
    wait: Wait,
    error: Option<Error>,
}

impl<'a> CowIter<'a> {
    /// Creates an asynchronous iterator: registers the sampler with the shared reactor thread
    /// (started on first use).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the fd cannot be duplicated or added to the epoll set, or the reactor
    /// thread cannot be started.
    pub fn into_async(self) -> Result<AsyncCowIter<'a>> {
        let wait = Wait::new(self.sampler())?;
        Ok(AsyncCowIter {
            inner: self,
            wait,
            error: None,
        })
    }
}

impl<'a> AsyncCowIter<'a> {
    /// Polls for the next record and, when there is one, calls `f` with its bytes in the ring and
    /// the parser; the ring's tail moves when `f` returns. `None` once the iterator has ended (the
    /// target exited and the ring is drained, or the kernel reported `EPOLLERR`; see
    /// [`take_error`](Self::take_error)).
    ///
    /// `f` is called at most once; when the poll is pending it is dropped uncalled.
    pub fn poll_next<F, R>(self: Pin<&mut Self>, cx: &mut Context<'_>, f: F) -> Poll<Option<R>>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R + Unpin,
    {
        self.get_mut().poll_next_inner(cx, f)
    }

    fn poll_next_inner<F, R>(&mut self, cx: &mut Context<'_>, f: F) -> Poll<Option<R>>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R,
    {
        let inner = &mut self.inner;
        let mut f = Some(f);
        loop {
            let ended = Cell::new(false);
            let take = || {
                let item = inner
                    .try_next(|c, p| f.take().map(|f| f(c, p)))
                    .and_then(|r| r.transpose());
                ended.set(inner.reader().ended());
                item
            };
            return match self.wait.poll_with(cx, take, || ended.get()) {
                Poll::Ready(Some(Ok(r))) => Poll::Ready(Some(r)),
                Poll::Ready(Some(Err(e))) => {
                    self.error = Some(e);
                    continue;
                }
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }

    /// Waits for the next record and calls `f` with it (see [`poll_next`](Self::poll_next));
    /// `None` once the iterator has ended.
    pub async fn next<F, R>(&mut self, f: F) -> Option<R>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R + Unpin,
    {
        let mut f = Some(f);
        poll_fn(|cx| match f.take() {
            Some(g) => {
                // `poll_next_inner` consumes the closure even when pending; keep it for the next
                // poll by passing a forwarding closure and putting it back if unused.
                let mut slot = Some(g);
                let polled = self.poll_next_inner(cx, |c, p| slot.take().map(|g| g(c, p)));
                match polled {
                    Poll::Ready(Some(Some(r))) => Poll::Ready(Some(r)),
                    Poll::Ready(Some(None)) | Poll::Ready(None) => Poll::Ready(None),
                    Poll::Pending => {
                        f = slot;
                        Poll::Pending
                    }
                }
            }
            None => Poll::Ready(None),
        })
        .await
    }

    /// Polls for the next record and lends it until the next call (the form of
    /// `perf-event-open` 0.7): `Ready(None)` once the iterator has ended, as
    /// [`poll_next`](Self::poll_next). The record is consumed when it is returned; the tail moves
    /// as for [`CowIter::lending_next`].
    pub fn poll_lending_next(&mut self, cx: &Context<'_>) -> Poll<Option<RawRecord<'_>>> {
        match self.poll_record(cx) {
            Poll::Ready(true) => Poll::Ready(self.inner.lend()),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Waits for the next record and lends it until the next call; `None` once the iterator has
    /// ended. See [`poll_lending_next`](Self::poll_lending_next).
    ///
    /// ```no_run
    /// # use perf_event::config::{Cpu, Opts, Proc, SampleOn, WakeUpOn};
    /// # use perf_event::count::Counter;
    /// # use perf_event::event::sw::Software;
    /// # let mut opts = Opts::default();
    /// # opts.sample_on = SampleOn::Count(1_000_000);
    /// # opts.wake_up.on = WakeUpOn::Samples(1);
    /// # let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts)?;
    /// # let sampler = counter.sampler(4)?;
    /// let mut iter = sampler.iter().into_cow().into_async()?;
    /// futures::executor::block_on(async {
    ///     while let Some(rr) = iter.lending_next().await {
    ///         println!("{} bytes: {:-?}", rr.as_raw().len(), rr.parse().1);
    ///     }
    /// });
    /// # Ok::<(), perf_event::Error>(())
    /// ```
    pub async fn lending_next(&mut self) -> Option<RawRecord<'_>> {
        // Wait for a record first, then lend it: a future cannot return a borrow of the state its
        // closure holds, so the waiting and the lending are two steps.
        if poll_fn(|cx| self.poll_record(cx)).await {
            self.inner.lend()
        } else {
            None
        }
    }

    /// Waits until the reader has consumed a record to lend (`true`), or ended.
    fn poll_record(&mut self, cx: &Context<'_>) -> Poll<bool> {
        let inner = &mut self.inner;
        loop {
            let ended = Cell::new(false);
            let take = || {
                let item = if inner.reader().has_record(false) {
                    Some(Ok(()))
                } else {
                    inner.reader().take_error().map(Err)
                };
                ended.set(inner.reader().ended());
                item
            };
            return match self.wait.poll_with(cx, take, || ended.get()) {
                Poll::Ready(Some(Ok(()))) => Poll::Ready(true),
                Poll::Ready(Some(Err(e))) => {
                    self.error = Some(e);
                    continue;
                }
                Poll::Ready(None) => Poll::Ready(false),
                Poll::Pending => Poll::Pending,
            };
        }
    }

    /// The error that ended the iterator (`EPOLLERR`), if any; taking it clears it.
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// Wakes the task every `interval` even without a kernel wakeup; see
    /// [`AsyncIter::flush_every`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the timer cannot be created.
    pub fn flush_every(&mut self, interval: Option<Duration>) -> Result<()> {
        self.wait.waiter.set_flush_interval(interval)
    }

    /// The synchronous iterator back.
    pub fn into_sync(self) -> CowIter<'a> {
        self.inner
    }
}

impl AsFd for AsyncCowIter<'_> {
    /// The sampler's fd.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.sampler().as_fd()
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    use crate::config::{Cpu, Opts, Proc, SampleOn, WakeUpOn};
    use crate::count::Counter;
    use crate::event::sw::Software;
    use crate::sample::record::Record;

    /// The async lending form yields every record of a child's task clock, with its bytes and
    /// parse, and ends when the child exits.
    #[test]
    #[allow(clippy::zombie_processes)] // waited for below; a failed assertion ends the test process
    fn async_lending_next_lends_records_and_ends_after_the_target_exits() {
        let mut child = Command::new("sh")
            .args([
                "-c",
                "read x; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        #[allow(clippy::field_reassign_with_default)]
        // options are set field by field, as in the docs
        let opts = {
            let mut opts = Opts::default();
            opts.sample_on = SampleOn::Count(200_000);
            opts.sample_format.code_addr = true;
            opts.wake_up.on = WakeUpOn::Samples(2);
            opts
        };
        let counter = match Counter::new(Software::TaskClock, (Proc(child.id()), Cpu::ALL), &opts) {
            Ok(c) => c,
            Err(e) => {
                let _ = child.kill();
                println!("skipped: cannot sample a child's task clock here ({e})");
                return;
            }
        };
        let sampler = counter.sampler(6).unwrap();
        let mut iter = sampler.iter().into_cow().into_async().unwrap();
        counter.enable().unwrap();
        drop(child.stdin.take());
        let (mut samples, mut bytes) = (0u64, 0usize);
        futures::executor::block_on(async {
            while let Some(rr) = iter.lending_next().await {
                bytes += rr.as_raw().as_bytes().len();
                samples += u64::from(matches!(rr.parse().1, Record::Sample(_)));
            }
        });
        assert!(iter.take_error().is_none());
        assert!(child.wait().unwrap().success());
        assert!(samples > 5, "{samples} samples");
        assert!(
            bytes >= samples as usize * 16,
            "{bytes} bytes for {samples} samples"
        );
    }
}
