//! The shared reactor: one helper thread and one epoll set wake the tasks of every async
//! iterator in the process.
//!
//! An async iterator ([`AsyncIter`](super::AsyncIter), [`AsyncCowIter`](super::AsyncCowIter))
//! registers a duplicate of its sampler's fd in the reactor's epoll set, edge-triggered, for
//! `EPOLLIN | EPOLLHUP | EPOLLERR`. The thread (named `perf-event-io`, started on first use and
//! kept for the life of the process) sleeps in `epoll_wait`; when the kernel wakes a perf fd (the
//! sampler's [`wake_up`](crate::config::Opts) setting: every N samples or past a watermark, half
//! the ring by default), the thread records the readiness and wakes the task that last polled.
//! Any number of samplers share the one thread; a registration costs one `dup` and one
//! `epoll_ctl`, and dropping it removes it.
//!
//! Edge-triggered is what a perf fd needs: `perf_poll` hands out `EPOLLIN` once per kernel wakeup
//! (it exchanges the ring's pending poll bits with zero) but reports `EPOLLHUP` on every poll once
//! the target has exited, which a level-triggered set would report in a busy loop.
//!
//! A registration may also carry a flush timer (a `timerfd` in the same epoll set) that wakes
//! the task periodically, so that records below the wakeup watermark are seen without waiting for
//! the watermark.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Waker};
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::io::Errno;
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

use crate::error::{Error, Result};

/// The low bit of an epoll token: set for a registration's flush timer, clear for its perf fd.
const TIMER_BIT: u64 = 1;

/// What the kernel reported for a registered fd since the task last looked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Readiness {
    /// `EPOLLIN`: the kernel woke the fd (records past the wakeup threshold). Cleared when taken.
    pub(crate) readable: bool,
    /// `EPOLLHUP`: the monitored task exited (and has no children left). Sticky.
    pub(crate) hangup: bool,
    /// `EPOLLERR`: the event is in error state (a pinned counter lost its PMU, or the PMU was
    /// removed). Cleared when taken, so it is reported once per kernel report.
    pub(crate) error: bool,
}

/// A registration's state, shared between the reactor thread and the polling task.
#[derive(Debug, Default)]
struct SlotState {
    waker: Option<Waker>,
    ready: Readiness,
    /// The flush timer. A periodic timerfd re-arms only when read, so the thread reads it.
    timer: Option<OwnedFd>,
}

#[derive(Debug, Default)]
struct Slot {
    state: Mutex<SlotState>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // A panic while holding this lock leaves plain flags behind: still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

type Slots = Mutex<HashMap<u64, Arc<Slot>>>;

/// The process-wide reactor: the epoll set, the registrations by token, the thread's counters.
#[derive(Debug)]
struct Reactor {
    epoll: Arc<OwnedFd>,
    slots: Arc<Slots>,
    next_token: AtomicU64,
}

/// Started on first use; the error (if the epoll set or the thread could not be created) is kept
/// and returned to every registration.
static REACTOR: LazyLock<std::result::Result<Reactor, (io::ErrorKind, String)>> =
    LazyLock::new(|| Reactor::start().map_err(|e| (e.kind(), e.to_string())));

impl Reactor {
    fn start() -> io::Result<Self> {
        let epoll = Arc::new(epoll::create(epoll::CreateFlags::CLOEXEC)?);
        let slots: Arc<Slots> = Arc::default();
        std::thread::Builder::new()
            .name("perf-event-io".into())
            .spawn({
                let (epoll, slots) = (epoll.clone(), slots.clone());
                move || run(&epoll, &slots)
            })?;
        Ok(Self {
            epoll,
            slots,
            // Tokens step by 2: the low bit tells a timer from its perf fd.
            next_token: AtomicU64::new(2),
        })
    }

    fn get() -> Result<&'static Self> {
        REACTOR.as_ref().map_err(|(kind, msg)| {
            Error::io(
                "starting the perf-event reactor (epoll set and its thread)",
                io::Error::new(*kind, msg.clone()),
            )
        })
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The reactor thread: wait, record readiness, wake. It never exits; it sleeps in `epoll_wait`
/// while nothing happens.
fn run(epoll: &OwnedFd, slots: &Slots) {
    let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
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
            let slots = slots.lock().unwrap_or_else(PoisonError::into_inner);
            for ev in &events {
                let data = ev.data.u64();
                let Some(slot) = slots.get(&(data & !TIMER_BIT)) else {
                    // Deregistered after the kernel queued the event.
                    continue;
                };
                let flags = ev.flags;
                let mut st = slot.lock();
                if data & TIMER_BIT == 0 {
                    st.ready.readable |= flags.contains(epoll::EventFlags::IN);
                    st.ready.hangup |= flags.contains(epoll::EventFlags::HUP);
                    st.ready.error |= flags.contains(epoll::EventFlags::ERR);
                } else if let Some(t) = &st.timer {
                    // Non-blocking; EAGAIN only means another expiry was already read.
                    let _ = rustix::io::read(t, &mut [0u8; 8]);
                }
                if let Some(w) = st.waker.take() {
                    wake.push(w);
                }
            }
        }
        // Wake outside every lock: a waker may run the task inline.
        for w in wake.drain(..) {
            w.wake();
        }
    }
}

/// One fd in the shared reactor: its readiness and the waker of the task that polls it.
///
/// Holds a duplicate of the fd, so the registration never outlives the file it watches (the
/// duplicate keeps it open); dropping the registration removes it from the epoll set.
#[derive(Debug)]
pub(crate) struct Registration {
    token: u64,
    fd: OwnedFd,
    slot: Arc<Slot>,
}

impl Registration {
    /// Registers `fd` (duplicated) for `EPOLLIN | EPOLLHUP | EPOLLERR`, edge-triggered.
    ///
    /// Starts the reactor thread on first use.
    pub(crate) fn new(fd: BorrowedFd<'_>) -> Result<Self> {
        let reactor = Reactor::get()?;
        let fd = rustix::io::fcntl_dupfd_cloexec(fd, 0)
            .map_err(|e| Error::io("duplicating the sampler's fd for the reactor", e.into()))?;
        let token = reactor.next_token.fetch_add(2, Ordering::Relaxed);
        let slot = Arc::<Slot>::default();
        reactor.slots().insert(token, slot.clone());
        let flags = epoll::EventFlags::IN
            | epoll::EventFlags::HUP
            | epoll::EventFlags::ERR
            | epoll::EventFlags::ET;
        if let Err(e) = epoll::add(
            &*reactor.epoll,
            &fd,
            epoll::EventData::new_u64(token),
            flags,
        ) {
            reactor.slots().remove(&token);
            return Err(Error::io(
                "adding the sampler's fd to the reactor's epoll set",
                e.into(),
            ));
        }
        Ok(Self { token, fd, slot })
    }

    /// Takes what the kernel reported since the last call, after storing `cx`'s waker for the
    /// next report. `readable` and `error` are cleared; `hangup` stays.
    ///
    /// The waker is stored before the bits are read, so a report that arrives between the
    /// caller's last look at the ring and this call is either in the bits returned or wakes the
    /// stored waker: no wakeup is lost.
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Readiness {
        let mut st = self.slot.lock();
        match &mut st.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        let ready = st.ready;
        st.ready.readable = false;
        st.ready.error = false;
        ready
    }

    /// The readiness bits without registering a waker or clearing them.
    #[cfg(test)]
    pub(crate) fn peek(&self) -> Readiness {
        self.slot.lock().ready
    }

    /// Wakes the registered task every `interval` even without a kernel wakeup (`None` stops
    /// it), so records below the wakeup watermark are delivered at most `interval` late.
    pub(crate) fn set_flush_interval(&mut self, interval: Option<Duration>) -> Result<()> {
        let reactor = Reactor::get()?;
        let Some(interval) = interval.filter(|d| !d.is_zero()) else {
            if let Some(t) = self.slot.lock().timer.take() {
                let _ = epoll::delete(&*reactor.epoll, &t);
            }
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
        if let Some(t) = &self.slot.lock().timer {
            timerfd_settime(t, TimerfdTimerFlags::empty(), &spec)
                .map_err(|e| Error::io("setting the flush timer", e.into()))?;
            return Ok(());
        }
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )
        .map_err(|e| Error::io("creating the flush timer (timerfd)", e.into()))?;
        timerfd_settime(&timer, TimerfdTimerFlags::empty(), &spec)
            .map_err(|e| Error::io("setting the flush timer", e.into()))?;
        // Stored under the lock taken before the add, so the thread, which reads the timer to
        // re-arm it, cannot see an expiry before the timer is in place.
        let mut st = self.slot.lock();
        epoll::add(
            &*reactor.epoll,
            &timer,
            epoll::EventData::new_u64(self.token | TIMER_BIT),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )
        .map_err(|e| Error::io("adding the flush timer to the reactor", e.into()))?;
        st.timer = Some(timer);
        Ok(())
    }
}

impl AsFd for Registration {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(reactor) = Reactor::get() {
            // Remove from the set before the duplicate closes; a failure can only mean it is
            // already gone.
            let _ = epoll::delete(&*reactor.epoll, &self.fd);
            if let Some(t) = self.slot.lock().timer.take() {
                let _ = epoll::delete(&*reactor.epoll, &t);
            }
            reactor.slots().remove(&self.token);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;
    use std::time::Instant;

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

    #[test]
    fn hangup_on_pipe_reader_is_sticky_and_wakes_once() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let reg = Registration::new(r.as_fd()).unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert_eq!(reg.poll_ready(&mut cx), Readiness::default());
        drop(w);
        assert!(wait_for(&count, 1), "no wakeup after the writer closed");
        assert!(reg.poll_ready(&mut cx).hangup);
        // Edge-triggered: no further events, no busy loop; hangup stays.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(reg.poll_ready(&mut cx).hangup);
    }

    #[test]
    fn error_on_pipe_writer_is_reported_once() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let reg = Registration::new(w.as_fd()).unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        // A pipe's write end is writable at once; we do not ask for EPOLLOUT, so nothing.
        let _ = reg.poll_ready(&mut cx);
        drop(r);
        assert!(wait_for(&count, 1), "no wakeup after the reader closed");
        let got = reg.poll_ready(&mut cx);
        assert!(got.error, "{got:?}");
        assert!(!reg.poll_ready(&mut cx).error, "error is taken once");
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
        let reg = Registration::new(r.as_fd()).unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(!reg.poll_ready(&mut cx).readable);
        rustix::io::write(&w, b"x").unwrap();
        assert!(wait_for(&count, 1));
        assert!(reg.poll_ready(&mut cx).readable);
        assert!(!reg.poll_ready(&mut cx).readable);
        rustix::io::write(&w, b"y").unwrap();
        assert!(wait_for(&count, 2));
        assert!(reg.peek().readable);
    }

    #[test]
    fn flush_timer_wakes_periodically_and_stops() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let mut reg = Registration::new(r.as_fd()).unwrap();
        reg.set_flush_interval(Some(Duration::from_millis(5)))
            .unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        for n in 1..=3 {
            let _ = reg.poll_ready(&mut cx);
            assert!(wait_for(&count, n), "flush timer did not fire");
        }
        // The timer only wakes; it reports no readiness.
        assert_eq!(reg.poll_ready(&mut cx), Readiness::default());
        reg.set_flush_interval(None).unwrap();
        let before = count.0.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert!(count.0.load(Ordering::SeqCst) <= before + 1);
    }

    #[test]
    fn many_registrations_share_one_thread() {
        let pipes: Vec<_> = (0..64).map(|_| rustix::pipe::pipe().unwrap()).collect();
        let regs: Vec<_> = pipes
            .iter()
            .map(|(r, _)| Registration::new(r.as_fd()).unwrap())
            .collect();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        for reg in &regs {
            let _ = reg.poll_ready(&mut cx);
        }
        for (_, w) in &pipes {
            rustix::io::write(w, b"x").unwrap();
        }
        assert!(wait_for(&count, 64));
        assert!(regs.iter().all(|r| r.peek().readable));
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
