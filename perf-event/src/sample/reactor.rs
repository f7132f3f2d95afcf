//! The shared reactor: one helper thread and one epoll set wake every waiter of every sampler in the
//! process.
//!
//! Each sampler has exactly one registration ([`Waiters`]): a duplicate of its fd in the reactor's epoll
//! set, edge-triggered, for `EPOLLIN | EPOLLHUP | EPOLLERR`. Any number of waiters share it — async
//! iterators ([`AsyncIter`](super::AsyncIter), [`AsyncCowIter`](super::AsyncCowIter), the merged per-CPU
//! stream) and blocking waits ([`Iter::next_timeout`](super::Iter::next_timeout)) — and every waiter sees
//! every report. The registration is made for the first waiter and lasts until the sampler is dropped,
//! so that the iterators a profiler makes at every poll do not each duplicate the fd, add it to the set,
//! remove it and close it again; a waiter that comes after the kernel's one report of a lasting
//! condition (`EPOLLHUP`, `EPOLLERR`) still learns of it. One registration is what a perf fd needs: `perf_poll` hands out `EPOLLIN` once per kernel
//! wakeup (it exchanges the ring's pending poll bits with zero), so two registrations of one event (or a
//! `poll(2)` beside an epoll set) would split the wakeups between them and leave one waiter asleep.
//!
//! The thread (named `perf-event-io`, started on first use) sleeps in `epoll_wait`; when the kernel wakes
//! a perf fd (the sampler's [`wake_up`](crate::config::Opts) setting: every N samples or past a
//! watermark, half the ring by default), the thread records the readiness in every waiter of that
//! sampler and wakes them. Edge-triggered also keeps `EPOLLHUP`, which `perf_poll` reports on every poll
//! once the target has exited, from becoming a busy loop.
//!
//! A waiter may carry a flush timer (a `timerfd` in the same epoll set) that wakes it periodically, so
//! that records below the wakeup watermark are seen without waiting for the watermark.
//!
//! A child made by `fork()` has the reactor's memory but not its thread, and its copy of the epoll fd is
//! the parent's epoll set: the first registration in a child starts a reactor of its own
//! (perf-core's fork generation tells), and a child never touches the parent's set. A reactor that could
//! not be started (e.g. `EMFILE`) is not remembered: the next registration tries again.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use perf_core::fork::{Lock, LockGuard};
use rustix::event::{epoll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

use crate::error::{Error, Result};

/// Every lock here is a fork-safe [`Lock`] (a child made while the reactor thread or another thread held
/// one takes it over), held for a few instructions of ours: no waker is woken, cloned or dropped while one
/// is held (an executor's waker runs its code, which may drop a task holding another reader of the same
/// sampler and so take the same lock), and no `Waiters` or `Reactor` is dropped under one.
fn lock<T: Default>(m: &Lock<T>) -> LockGuard<'_, T> {
    m.lock()
}

/// What the kernel reported for a sampler since a waiter last looked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Readiness {
    /// `EPOLLIN`: the kernel woke the fd (records past the wakeup threshold). Cleared when taken.
    pub(crate) readable: bool,
    /// `EPOLLHUP`: the monitored task exited (and has no children left). Sticky.
    pub(crate) hangup: bool,
    /// `EPOLLERR`: the event is in error state (a pinned counter lost its PMU, or the PMU was
    /// removed). Cleared when taken, so it is reported once per kernel report.
    pub(crate) error: bool,
    /// The waiter's flush timer fired, or another reader gave the ring back: look again. Cleared
    /// when taken.
    pub(crate) flush: bool,
}

impl Readiness {
    fn any(&self) -> bool {
        self.readable || self.hangup || self.error || self.flush
    }
}

/// What an epoll token stands for.
#[derive(Debug)]
enum Entry {
    /// A sampler's fd.
    Fd(Weak<Waiters>),
    /// A waiter's flush timer.
    Timer(Weak<Waiters>, usize),
}

/// The process's reactor: the epoll set, what its tokens stand for, and the generation it belongs to.
#[derive(Debug)]
struct Reactor {
    generation: u64,
    epoll: Arc<OwnedFd>,
    entries: Arc<Lock<HashMap<u64, Entry>>>,
    next_token: AtomicU64,
}

/// The reactor of this process (and fork generation); `None` until first use or after a failed start.
static REACTOR: Lock<Option<Arc<Reactor>>> = Lock::new(None);

impl Reactor {
    /// The current reactor, started (or, in a fork child, started afresh) if needed.
    fn get() -> Result<Arc<Reactor>> {
        let generation = perf_core::fork::generation();
        let mut slot = lock(&REACTOR);
        if let Some(r) = slot.as_ref().filter(|r| r.generation == generation) {
            return Ok(Arc::clone(r));
        }
        // A failure is returned, not kept: a transient EMFILE must not disable async forever.
        let r = Arc::new(Reactor::start(generation).map_err(|e| {
            Error::io(
                "starting the perf-event reactor (an epoll set and its thread)",
                e,
            )
        })?);
        // A fork child's copy of its parent's reactor is dropped after the lock is released.
        let parents = slot.replace(Arc::clone(&r));
        drop(slot);
        drop(parents);
        Ok(r)
    }

    fn start(generation: u64) -> io::Result<Self> {
        let epoll = Arc::new(epoll::create(epoll::CreateFlags::CLOEXEC)?);
        let entries: Arc<Lock<HashMap<u64, Entry>>> = Arc::default();
        std::thread::Builder::new()
            .name("perf-event-io".into())
            .spawn({
                let (epoll, entries) = (Arc::clone(&epoll), Arc::clone(&entries));
                move || run(&epoll, &entries)
            })?;
        Ok(Self {
            generation,
            epoll,
            entries,
            next_token: AtomicU64::new(1),
        })
    }

    fn token(&self) -> u64 {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether this reactor's epoll set is ours to change (not a parent's, seen from a fork child).
    fn is_current(&self) -> bool {
        self.generation == perf_core::fork::generation()
    }
}

/// The reactor thread: wait, record readiness, wake. It sleeps in `epoll_wait` while nothing happens.
fn run(epoll: &OwnedFd, entries: &Lock<HashMap<u64, Entry>>) {
    let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
    let mut work: Vec<(Arc<Waiters>, Option<usize>, epoll::EventFlags)> = Vec::with_capacity(64);
    let mut wake: Vec<Waker> = Vec::with_capacity(64);
    loop {
        events.clear();
        match epoll::wait(epoll, spare_capacity(&mut events), None) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(_) => {
                // Only EBADF/EFAULT/EINVAL are documented, none of which can happen on our own
                // epoll fd; back off rather than spin if the impossible happens.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        }
        {
            let entries = lock(entries);
            for ev in &events {
                let (weak, timer) = match entries.get(&ev.data.u64()) {
                    Some(Entry::Fd(w)) => (w, None),
                    Some(Entry::Timer(w, id)) => (w, Some(*id)),
                    None => continue, // removed after the kernel queued the event
                };
                if let Some(w) = weak.upgrade() {
                    work.push((w, timer, ev.flags));
                }
            }
        }
        // No reactor lock is held while a sampler's waiters are locked.
        for (waiters, timer, flags) in work.drain(..) {
            match timer {
                None => waiters.report(flags, &mut wake),
                Some(id) => waiters.flush_fired(id, &mut wake),
            }
        }
        // Wake outside every lock: a waker may run the task inline.
        for w in wake.drain(..) {
            w.wake();
        }
    }
}

fn spare_capacity(v: &mut Vec<epoll::Event>) -> rustix::buffer::SpareCapacity<'_, epoll::Event> {
    rustix::buffer::spare_capacity(v)
}

/// The waiters of one registration, and what a waiter that comes later must still learn: the kernel
/// reports `EPOLLHUP` and `EPOLLERR` once per wakeup (edge-triggered), but both last.
#[derive(Debug, Default)]
struct Slots {
    list: Vec<Option<Slot>>,
    /// `EPOLLHUP` was reported: the target is gone for good. A new waiter starts with it.
    hangup: bool,
    /// The last report had `EPOLLERR`: a new waiter asks the fd whether the error lasts (it ends
    /// when the event is enabled again, which no report tells).
    error: bool,
}

/// One waiter's state.
#[derive(Debug, Default)]
struct Slot {
    waker: Option<Waker>,
    ready: Readiness,
    /// The flush timer and its epoll token. A periodic timerfd re-arms only when read, so the thread
    /// reads it.
    timer: Option<(OwnedFd, u64)>,
}

impl Slot {
    /// The readiness bits reported since the last look: `readable`, `error` and `flush` are cleared,
    /// `hangup` stays.
    fn take_ready(&mut self) -> Readiness {
        let ready = self.ready;
        self.ready = Readiness {
            hangup: ready.hangup,
            ..Readiness::default()
        };
        ready
    }
}

/// A sampler's one registration with the reactor, and the waiters that share it.
#[derive(Debug)]
pub(crate) struct Waiters {
    reactor: Arc<Reactor>,
    token: u64,
    /// The reactor's duplicate of the sampler's fd: the registration never outlives the file it watches.
    fd: OwnedFd,
    slots: Lock<Slots>,
}

impl Waiters {
    /// Registers `fd` (duplicated) with the current reactor, starting it if needed.
    pub(crate) fn register(fd: BorrowedFd<'_>) -> Result<Arc<Waiters>> {
        let reactor = Reactor::get()?;
        let fd = rustix::io::fcntl_dupfd_cloexec(fd, 0)
            .map_err(|e| Error::io("duplicating the sampler's fd for the reactor", e.into()))?;
        let token = reactor.token();
        let waiters = Arc::new(Waiters {
            reactor: Arc::clone(&reactor),
            token,
            fd,
            slots: Lock::new(Slots::default()),
        });
        lock(&reactor.entries).insert(token, Entry::Fd(Arc::downgrade(&waiters)));
        let flags = epoll::EventFlags::IN
            | epoll::EventFlags::HUP
            | epoll::EventFlags::ERR
            | epoll::EventFlags::ET;
        if let Err(e) = epoll::add(
            &*reactor.epoll,
            &waiters.fd,
            epoll::EventData::new_u64(token),
            flags,
        ) {
            lock(&reactor.entries).remove(&token);
            return Err(Error::io(
                "adding the sampler's fd to the reactor's epoll set",
                e.into(),
            ));
        }
        Ok(waiters)
    }

    /// A new waiter; it sees every report from now on, and a hangup or an error still there that
    /// was reported before it came.
    pub(crate) fn waiter(self: &Arc<Self>) -> Waiter {
        let (id, error) = {
            let mut slots = lock(&self.slots);
            let slot = Slot {
                ready: Readiness {
                    hangup: slots.hangup,
                    ..Readiness::default()
                },
                ..Slot::default()
            };
            let id = match slots.list.iter().position(Option::is_none) {
                Some(i) => {
                    slots.list[i] = Some(slot);
                    i
                }
                None => {
                    slots.list.push(Some(slot));
                    slots.list.len() - 1
                }
            };
            (id, slots.error)
        };
        let waiter = Waiter {
            waiters: Arc::clone(self),
            id,
        };
        if error {
            self.refresh();
        }
        waiter
    }

    /// Asks the fd what holds now (a `poll(2)` that does not wait) and reports it to every waiter.
    /// `perf_poll` hands a pending `EPOLLIN` to whoever polls first, so it goes to every waiter here,
    /// as the reactor would have done with it. Only after an error: the usual path makes no syscall.
    fn refresh(&self) {
        // A fork child never polls the event it shares with its parent (it would take the parent's
        // wakeup); no waiter is made there (`Sampler::waiters` refuses), this is for the record.
        if !self.reactor.is_current() {
            return;
        }
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let Ok(_) = rustix::event::poll(
            &mut fds,
            Some(&Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            }),
        ) else {
            return;
        };
        let revents = fds[0].revents();
        let mut flags = epoll::EventFlags::empty();
        for (p, e) in [
            (PollFlags::IN, epoll::EventFlags::IN),
            (PollFlags::HUP, epoll::EventFlags::HUP),
            (PollFlags::ERR, epoll::EventFlags::ERR),
        ] {
            if revents.contains(p) {
                flags |= e;
            }
        }
        let mut wake = Vec::new();
        self.report(flags, &mut wake);
        for w in wake {
            w.wake();
        }
    }

    /// The kernel reported `flags` for the fd: every waiter gets them. Nothing reported (a
    /// [`refresh`](Self::refresh) that found nothing) only says that no error lasts.
    fn report(&self, flags: epoll::EventFlags, wake: &mut Vec<Waker>) {
        let mut slots = lock(&self.slots);
        slots.hangup |= flags.contains(epoll::EventFlags::HUP);
        slots.error = flags.contains(epoll::EventFlags::ERR);
        if flags.is_empty() {
            return;
        }
        for slot in slots.list.iter_mut().flatten() {
            slot.ready.readable |= flags.contains(epoll::EventFlags::IN);
            slot.ready.hangup |= flags.contains(epoll::EventFlags::HUP);
            slot.ready.error |= flags.contains(epoll::EventFlags::ERR);
            wake.extend(slot.waker.take());
        }
    }

    /// Asks every waiter to look again (the ring was given back by another reader).
    pub(crate) fn wake_all(&self) {
        let mut wake = Vec::new();
        {
            let mut slots = lock(&self.slots);
            for slot in slots.list.iter_mut().flatten() {
                slot.ready.flush = true;
                wake.extend(slot.waker.take());
            }
        }
        for w in wake {
            w.wake();
        }
    }

    /// Waiter `id`'s flush timer fired.
    fn flush_fired(&self, id: usize, wake: &mut Vec<Waker>) {
        let mut slots = lock(&self.slots);
        if let Some(Some(slot)) = slots.list.get_mut(id) {
            if let Some((t, _)) = &slot.timer {
                // Non-blocking; EAGAIN only means another expiry was already read.
                let _ = rustix::io::read(t, &mut [0u8; 8]);
            }
            slot.ready.flush = true;
            wake.extend(slot.waker.take());
        }
    }

    fn remove_timer(&self, timer: Option<(OwnedFd, u64)>) {
        if let Some((t, token)) = timer {
            if self.reactor.is_current() {
                let _ = epoll::delete(&*self.reactor.epoll, &t);
                lock(&self.reactor.entries).remove(&token);
            }
        }
    }
}

impl AsFd for Waiters {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Waiters {
    fn drop(&mut self) {
        // In a fork child the epoll set is the parent's: leave it alone (closing our duplicate there does
        // not remove the parent's registration).
        if self.reactor.is_current() {
            // Removed from the set before the duplicate closes; a failure can only mean it is gone.
            let _ = epoll::delete(&*self.reactor.epoll, &self.fd);
            lock(&self.reactor.entries).remove(&self.token);
        }
    }
}

/// Unparks a thread blocked in [`Waiter::wait_blocking`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Blocks the thread until any of `waiters` has something reported or `timeout` passes; returns what
/// each saw (all empty on timeout).
pub(crate) fn wait_any(waiters: &[&Waiter], timeout: Duration) -> Vec<Readiness> {
    let deadline = Instant::now().checked_add(timeout);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    loop {
        let ready: Vec<Readiness> = waiters.iter().map(|w| w.take(&waker)).collect();
        if ready.iter().any(Readiness::any) {
            return ready;
        }
        let left = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(l) if !l.is_zero() => l,
                _ => return ready,
            },
            None => Duration::from_secs(3600),
        };
        std::thread::park_timeout(left);
    }
}

/// One waiter of a sampler: a task (through [`poll_ready`](Self::poll_ready)) or a thread (through
/// [`wait_blocking`](Self::wait_blocking)). Dropping it removes it.
#[derive(Debug)]
pub(crate) struct Waiter {
    waiters: Arc<Waiters>,
    id: usize,
}

impl Waiter {
    fn with_slot<R>(&self, f: impl FnOnce(&mut Slot) -> R) -> Option<R> {
        let mut slots = lock(&self.waiters.slots);
        slots.list.get_mut(self.id).and_then(Option::as_mut).map(f)
    }

    /// Takes what was reported since the last call after storing `waker` for the next report:
    /// `readable`, `error` and `flush` are cleared; `hangup` stays.
    ///
    /// The waker is stored before the bits are read, so a report that arrives between the caller's
    /// last look at the ring and this call is either in the bits returned or wakes the stored waker.
    ///
    /// Cloning a waker and dropping one run the executor's code (a task that owns its future, which may
    /// hold another reader of this sampler): neither happens under the slots' lock. The clone is made
    /// before it is taken, and the waker replaced is dropped after it is released.
    fn take(&self, waker: &Waker) -> Readiness {
        // Comparing wakers runs no executor code (`will_wake` compares their data and vtable).
        let stored = self
            .with_slot(|slot| {
                slot.waker
                    .as_ref()
                    .is_some_and(|w| w.will_wake(waker))
                    .then(|| slot.take_ready())
            })
            .flatten();
        if let Some(ready) = stored {
            return ready;
        }
        let mut new = Some(waker.clone());
        let ready = self.with_slot(|slot| {
            std::mem::swap(&mut slot.waker, &mut new);
            slot.take_ready()
        });
        // The replaced waker (or the clone, when the slot is gone) is dropped here, with no lock held.
        drop(new);
        ready.unwrap_or_default()
    }

    /// [`take`](Self::take) with the task's waker.
    pub(crate) fn poll_ready(&self, cx: &Context<'_>) -> Readiness {
        self.take(cx.waker())
    }

    /// Blocks the thread until something is reported or `timeout` passes; returns what was reported
    /// (nothing on timeout).
    pub(crate) fn wait_blocking(&self, timeout: Duration) -> Readiness {
        let deadline = Instant::now().checked_add(timeout);
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        loop {
            let ready = self.take(&waker);
            if ready.any() {
                return ready;
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(l) if !l.is_zero() => l,
                    _ => return ready,
                },
                None => Duration::from_secs(3600),
            };
            std::thread::park_timeout(left);
        }
    }

    /// The registration's epoll token: the same for every waiter of one registration.
    #[cfg(test)]
    pub(crate) fn token(&self) -> u64 {
        self.waiters.token
    }

    /// The readiness bits without registering a waker or clearing them.
    #[cfg(test)]
    pub(crate) fn peek(&self) -> Readiness {
        self.with_slot(|s| s.ready).unwrap_or_default()
    }

    /// Wakes this waiter every `interval` even without a kernel wakeup (`None` stops it), so records
    /// below the wakeup watermark are delivered at most `interval` late.
    pub(crate) fn set_flush_interval(&mut self, interval: Option<Duration>) -> Result<()> {
        let reactor = &self.waiters.reactor;
        let Some(interval) = interval.filter(|d| !d.is_zero()) else {
            let old = self.with_slot(|s| s.timer.take()).flatten();
            self.waiters.remove_timer(old);
            return Ok(());
        };
        let ts = Timespec {
            tv_sec: i64::try_from(interval.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(interval.subsec_nanos()),
        };
        let spec = Itimerspec {
            it_interval: ts,
            it_value: ts,
        };
        let rearmed = self.with_slot(|s| {
            s.timer.as_ref().map(|(t, _)| {
                timerfd_settime(t, TimerfdTimerFlags::empty(), &spec)
                    .map_err(|e| Error::io("setting the flush timer", e.into()))
            })
        });
        if let Some(Some(done)) = rearmed {
            return done.map(drop);
        }
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )
        .map_err(|e| Error::io("creating the flush timer (timerfd)", e.into()))?;
        timerfd_settime(&timer, TimerfdTimerFlags::empty(), &spec)
            .map_err(|e| Error::io("setting the flush timer", e.into()))?;
        let token = reactor.token();
        lock(&reactor.entries).insert(token, Entry::Timer(Arc::downgrade(&self.waiters), self.id));
        if let Err(e) = epoll::add(
            &*reactor.epoll,
            &timer,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        ) {
            lock(&reactor.entries).remove(&token);
            return Err(Error::io("adding the flush timer to the reactor", e.into()));
        }
        self.with_slot(|s| s.timer = Some((timer, token)));
        Ok(())
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        // The slot leaves the lock whole: its waker is dropped (executor code, which may drop another
        // reader of this sampler and so take this lock) only once the lock is released.
        let slot = lock(&self.waiters.slots)
            .list
            .get_mut(self.id)
            .and_then(Option::take);
        if let Some(mut slot) = slot {
            self.waiters.remove_timer(slot.timer.take());
            drop(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn wait_for(count: &Count, n: usize) -> bool {
        let start = Instant::now();
        while count.0.load(Ordering::SeqCst) < n {
            if start.elapsed() > Duration::from_secs(5) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        (count, waker)
    }

    #[test]
    fn hangup_on_pipe_reader_is_sticky_and_wakes_once() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let waiter = Waiters::register(r.as_fd()).unwrap().waiter();
        let (count, waker) = counter();
        let cx = Context::from_waker(&waker);
        assert_eq!(waiter.poll_ready(&cx), Readiness::default());
        drop(w);
        assert!(wait_for(&count, 1), "no wakeup after the writer closed");
        assert!(waiter.poll_ready(&cx).hangup);
        // Edge-triggered: no further events, no busy loop; hangup stays.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(waiter.poll_ready(&cx).hangup);
    }

    #[test]
    fn error_on_pipe_writer_is_reported_once() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let waiter = Waiters::register(w.as_fd()).unwrap().waiter();
        let (count, waker) = counter();
        let cx = Context::from_waker(&waker);
        // A pipe's write end is writable at once; we do not ask for EPOLLOUT, so nothing.
        let _ = waiter.poll_ready(&cx);
        drop(r);
        assert!(wait_for(&count, 1), "no wakeup after the reader closed");
        let got = waiter.poll_ready(&cx);
        assert!(got.error, "{got:?}");
        assert!(!waiter.poll_ready(&cx).error, "error is taken once");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "no busy loop on EPOLLERR"
        );
    }

    #[test]
    fn readable_is_edge_and_cleared_when_taken() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let waiter = Waiters::register(r.as_fd()).unwrap().waiter();
        let (count, waker) = counter();
        let cx = Context::from_waker(&waker);
        assert!(!waiter.poll_ready(&cx).readable);
        rustix::io::write(&w, b"x").unwrap();
        assert!(wait_for(&count, 1));
        assert!(waiter.poll_ready(&cx).readable);
        assert!(!waiter.poll_ready(&cx).readable);
        rustix::io::write(&w, b"y").unwrap();
        assert!(wait_for(&count, 2));
        assert!(waiter.peek().readable);
    }

    #[test]
    fn every_waiter_of_one_registration_sees_every_report() {
        // Issue: two registrations of one perf fd split the kernel's wakeups (perf_poll exchanges the
        // poll bits with zero), so one waiter never woke. One registration fans out to all.
        let (r, w) = rustix::pipe::pipe().unwrap();
        let waiters = Waiters::register(r.as_fd()).unwrap();
        let (a, b) = (waiters.waiter(), waiters.waiter());
        let (count_a, waker_a) = counter();
        let (count_b, waker_b) = counter();
        for round in 1..=50 {
            let _ = a.poll_ready(&Context::from_waker(&waker_a));
            let _ = b.poll_ready(&Context::from_waker(&waker_b));
            rustix::io::write(&w, b"x").unwrap();
            assert!(wait_for(&count_a, round), "A missed wakeup {round}");
            assert!(wait_for(&count_b, round), "B missed wakeup {round}");
            assert!(a.peek().readable && b.peek().readable);
        }
        // A thread waiter shares it too.
        let c = waiters.waiter();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            rustix::io::write(&w, b"z").unwrap();
            w
        });
        assert!(c.wait_blocking(Duration::from_secs(5)).readable);
        drop(writer.join().unwrap());
    }

    #[test]
    fn a_waiter_that_comes_after_the_hangup_sees_it() {
        // A registration outlives its waiters (it lives as long as the sampler); the kernel reports
        // EPOLLHUP, edge-triggered, once. A later waiter (the next iterator) must still see it, or its
        // wait for a target that is gone lasts its whole timeout.
        let (r, w) = rustix::pipe::pipe().unwrap();
        let waiters = Waiters::register(r.as_fd()).unwrap();
        let first = waiters.waiter();
        let (count, waker) = counter();
        let _ = first.poll_ready(&Context::from_waker(&waker));
        drop(w);
        assert!(wait_for(&count, 1), "no wakeup after the writer closed");
        drop(first);
        let later = waiters.waiter();
        assert!(later.peek().hangup, "{:?}", later.peek());
        let start = Instant::now();
        assert!(later.wait_blocking(Duration::from_secs(5)).hangup);
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_waiter_that_comes_after_an_error_sees_it_while_it_lasts() {
        // EPOLLERR (a pinned event in error state, a PMU removed) lasts until the event is enabled
        // again, but is reported once per kernel wakeup: a later waiter of the same registration (the
        // next async stream) must learn of it, or it waits for records that never come.
        let (r, w) = rustix::pipe::pipe().unwrap();
        let waiters = Waiters::register(w.as_fd()).unwrap();
        let first = waiters.waiter();
        let (count, waker) = counter();
        let cx = Context::from_waker(&waker);
        let _ = first.poll_ready(&cx);
        drop(r);
        assert!(wait_for(&count, 1), "no wakeup after the reader closed");
        assert!(first.poll_ready(&cx).error);
        drop(first);
        let later = waiters.waiter();
        let (count, waker) = counter();
        let got = later.poll_ready(&Context::from_waker(&waker));
        assert!(got.error, "{got:?}");
        // Told once, as any report, and no busy loop.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!later.poll_ready(&Context::from_waker(&waker)).error);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_waiter_after_a_passing_error_is_not_told_of_it() {
        // The other half: a registration that once saw an error but whose fd is fine again (a
        // re-enabled event) does not end the next stream with a stale error.
        let (r, w) = rustix::pipe::pipe().unwrap();
        let waiters = Waiters::register(r.as_fd()).unwrap();
        let mut wake = Vec::new();
        waiters.report(epoll::EventFlags::ERR, &mut wake);
        let later = waiters.waiter();
        let (_count, waker) = counter();
        let got = later.poll_ready(&Context::from_waker(&waker));
        assert!(!got.error && !got.hangup, "{got:?}");
        drop(w);
    }

    #[test]
    fn a_blocking_wait_ends_at_its_timeout() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let waiter = Waiters::register(r.as_fd()).unwrap().waiter();
        let start = Instant::now();
        assert_eq!(
            waiter.wait_blocking(Duration::from_millis(30)),
            Readiness::default()
        );
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(30) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }

    #[test]
    fn flush_timer_wakes_periodically_and_stops() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let waiters = Waiters::register(r.as_fd()).unwrap();
        let mut waiter = waiters.waiter();
        let other = waiters.waiter();
        waiter
            .set_flush_interval(Some(Duration::from_millis(5)))
            .unwrap();
        let (count, waker) = counter();
        let cx = Context::from_waker(&waker);
        for n in 1..=3 {
            let _ = waiter.poll_ready(&cx);
            assert!(wait_for(&count, n), "flush timer did not fire");
        }
        assert!(waiter.poll_ready(&cx).flush);
        assert!(
            !other.peek().flush,
            "a waiter's timer wakes that waiter only"
        );
        waiter.set_flush_interval(None).unwrap();
        let before = count.0.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert!(count.0.load(Ordering::SeqCst) <= before + 1);
    }

    #[test]
    fn many_registrations_share_one_thread() {
        let pipes: Vec<_> = (0..64).map(|_| rustix::pipe::pipe().unwrap()).collect();
        let waiters: Vec<_> = pipes
            .iter()
            .map(|(r, _)| Waiters::register(r.as_fd()).unwrap().waiter())
            .collect();
        let (count, waker) = counter();
        let cx = Context::from_waker(&waker);
        for w in &waiters {
            let _ = w.poll_ready(&cx);
        }
        for (_, w) in &pipes {
            rustix::io::write(w, b"x").unwrap();
        }
        assert!(wait_for(&count, 64));
        assert!(waiters.iter().all(|r| r.peek().readable));
        let threads = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                std::fs::read_to_string(e.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "perf-event-io")
            })
            .count();
        assert_eq!(threads, 1);
    }
}
