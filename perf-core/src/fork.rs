//! What `fork(2)` does to perf mappings and to locks, and how a child stays safe.
//!
//! The kernel maps perf rings with `VM_DONTCOPY` (`perf_mmap`), so a child made by `fork()` has no
//! mapping where its copy of a [`Ring`](crate::Ring) or [`MappedPage`](crate::MappedPage) points: a read
//! would fault, and worse, a later `mmap` in the child could land there and the ring would read (or its
//! `Drop` unmap) somebody else's memory. And the child shares every fd with its parent, so a parent's
//! event mapped again in the child would be a second consumer of the parent's ring. Three things prevent
//! that:
//!
//! - a fork *generation*, bumped in the child by a `pthread_atfork` handler: rings compare it with the
//!   generation they were made in and refuse to work in a child
//!   ([`ErrorKind::ForkedChild`](crate::ErrorKind::ForkedChild)), and the safe constructors map only a [`PerfFd`](crate::PerfFd) opened in the current generation
//!   ([`ErrorKind::InheritedFd`](crate::ErrorKind::InheritedFd));
//! - a registry of live perf mappings: the same child handler maps anonymous zeroed memory over each of
//!   them (`MAP_FIXED`), so every pointer a ring or page view still holds points at memory the child owns,
//!   nothing else can be mapped there, and dropping the copy only unmaps that placeholder;
//! - no lock that a fork can strand: the child has only the thread that called `fork()`, so a lock some
//!   other thread held at that instant would stay held forever. The registry's lock is taken by the
//!   `prepare` handler and released on both sides; every other process-wide lock of perf-core and
//!   perf-event is a [`Lock`], which a child takes over from a holder of an older generation.
//!
//! The handlers are installed the first time a perf fd is opened or mapped, or a [`Lock`] is taken;
//! before that there is nothing to protect. A raw `clone(2)` without `CLONE_VM` bypasses
//! `pthread_atfork`; it is `unsafe` and its caller's business.
//!
//! # Safety
//!
//! The registry is guarded by a spin lock that the `prepare` handler takes before the fork and the
//! `parent`/`child` handlers release, so the child never finds it held by a thread that does not exist
//! there. The child handler only calls `mmap`, which is async-signal-safe, and reads the registry.
//!
//! A [`Lock`] is taken over in a child only when its holder belongs to an older generation, i.e. was a
//! thread of an ancestor process that the child does not have: the thread that forked cannot be that
//! holder, because no code of this crate runs anything but its own short critical section (never user
//! code, never `fork`) while it holds a `Lock`.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bumped in every child made by `fork()` once the handlers are installed.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The fork generation of this process: 0 in the original process, and different in every child made by
/// `fork()` after the first call of this function (or the first perf mapping), which installs the
/// `pthread_atfork` handlers. State that must not be shared with a child (a helper thread, an epoll set,
/// an event fd) records the generation it was made in and starts afresh when it differs. Along one line
/// of descent it only grows: a child's generation is its parent's plus one.
pub fn generation() -> u64 {
    imp::install();
    GENERATION.load(Ordering::Relaxed)
}

#[cfg(not(miri))]
mod imp {
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    use super::GENERATION;

    /// Live mappings `(address, length)`.
    struct Registry(UnsafeCell<Vec<(usize, usize)>>);

    // SAFETY: the vector is only touched while `LOCKED` is held (see `with_registry` and the handlers).
    unsafe impl Sync for Registry {}

    static REGISTRY: Registry = Registry(UnsafeCell::new(Vec::new()));
    static LOCKED: AtomicBool = AtomicBool::new(false);

    /// The handlers are installed.
    const DONE: i32 = -1;
    /// 0: not installed; [`DONE`]; else the pid of the process whose thread is installing them. Not a
    /// `std::sync::Once`: a fork while another thread runs a `Once` leaves the child's copy running forever.
    static INSTALL: AtomicI32 = AtomicI32::new(0);

    fn lock() {
        while LOCKED
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
    }

    fn unlock() {
        LOCKED.store(false, Ordering::Release);
    }

    fn with_registry<R>(f: impl FnOnce(&mut Vec<(usize, usize)>) -> R) -> R {
        lock();
        // SAFETY: `LOCKED` is held, so nobody else touches the vector until `unlock`.
        let r = f(unsafe { &mut *REGISTRY.0.get() });
        unlock();
        r
    }

    extern "C" fn prepare() {
        lock();
    }

    extern "C" fn parent() {
        unlock();
    }

    extern "C" fn child() {
        // SAFETY: `prepare` took `LOCKED` in the parent just before the fork, so the child owns it.
        let regions = unsafe { &*REGISTRY.0.get() };
        for &(addr, len) in regions {
            // SAFETY: `[addr, addr + len)` was a perf mapping of the parent, which the kernel did not copy
            // (VM_DONTCOPY): no Rust object of the child owns memory there except the ring or page view that
            // registered it, which only reads it atomically. Mapping zeroed anonymous memory over it keeps
            // those pointers valid and the range reserved. A failure leaves the hole, which the generation
            // check keeps every ring away from.
            unsafe {
                libc::mmap(
                    addr as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                );
            }
        }
        GENERATION.fetch_add(1, Ordering::Relaxed);
        // The handlers ran, so they are registered here (an installer the parent was still running when it
        // forked had registered them: glibc serialises registration with fork).
        INSTALL.store(DONE, Ordering::Release);
        unlock();
    }

    #[inline]
    pub(crate) fn install() {
        if INSTALL.load(Ordering::Acquire) != DONE {
            install_slow();
        }
    }

    #[cold]
    fn install_slow() {
        // SAFETY: getpid has no preconditions and cannot fail.
        let me = unsafe { libc::getpid() };
        loop {
            match INSTALL.load(Ordering::Acquire) {
                DONE => return,
                // Another thread of this process is installing: wait for it.
                pid if pid == me => std::thread::yield_now(),
                // Nobody, or an installer of an ancestor process that forked before registering (its
                // handlers would have marked this copy DONE): install here.
                seen => {
                    if INSTALL
                        .compare_exchange(seen, me, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        // SAFETY: the handlers are `extern "C"` functions without arguments that live for
                        // the program's life; they only use the lock, the registry and mmap.
                        unsafe {
                            libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
                        }
                        INSTALL.store(DONE, Ordering::Release);
                        return;
                    }
                }
            }
        }
    }

    pub(crate) fn register(addr: usize, len: usize) {
        install();
        with_registry(|r| r.push((addr, len)));
    }

    pub(crate) fn unregister(addr: usize, len: usize) {
        with_registry(|r| {
            if let Some(i) = r.iter().position(|&e| e == (addr, len)) {
                r.swap_remove(i);
            }
        });
    }
}

#[cfg(miri)]
mod imp {
    pub(crate) fn install() {}
    pub(crate) fn register(_addr: usize, _len: usize) {}
    pub(crate) fn unregister(_addr: usize, _len: usize) {}
}

pub(crate) use imp::{register, unregister};

/// Whether the current process is a fork child of the one that had `generation`.
#[inline]
pub(crate) fn forked_since(generation: u64) -> bool {
    GENERATION.load(Ordering::Relaxed) != generation
}

/// A mutual-exclusion lock that a `fork()` cannot strand: what perf-core and perf-event use for every
/// lock a process shares among its threads.
///
/// With `std::sync::Mutex`, a child made by `fork()` while another thread held the lock finds it held
/// forever (that thread does not exist in the child), and its first use of the lock hangs. A `Lock`
/// records the fork [`generation`] of its holder; a thread that finds it held by an older generation
/// takes it over, and the value is replaced by `T::default()` (the old one may be half-updated, so it is
/// neither read nor dropped: it leaks). Within one process it is an ordinary lock: waiters spin briefly,
/// then yield and sleep, so keep critical sections short, and never call code that could block on
/// something else or `fork()` while holding one (the takeover relies on the forking thread holding none).
/// A panic while holding one releases it without poisoning, so keep the value usable at every step.
///
/// ```
/// use perf_core::fork::Lock;
///
/// let lock = Lock::new(vec![1]);
/// lock.lock().push(2);
/// assert_eq!(*lock.lock(), [1, 2]);
/// ```
pub struct Lock<T> {
    /// 0 while free; else the holder's generation + 1.
    state: AtomicU64,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and one guard exists at a time (see `lock`); moving
// the lock moves the value.
unsafe impl<T: Send> Send for Lock<T> {}
// SAFETY: as above: shared access hands out `&mut T` to one thread at a time, which needs `T: Send`.
unsafe impl<T: Send> Sync for Lock<T> {}

// A panic while a guard is held releases the lock (there is no poisoning, as with `std::sync::Mutex`, which is
// unwind-safe for the same reason once its poison is ignored): keep what a `Lock` guards usable after a panic
// in the middle of an update, as every `Lock` of perf-core and perf-event does (flags, counts, slots).
impl<T> std::panic::UnwindSafe for Lock<T> {}
impl<T> std::panic::RefUnwindSafe for Lock<T> {}

impl<T: Default> Default for Lock<T> {
    fn default() -> Self {
        Lock::new(T::default())
    }
}

impl<T> fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("held", &(self.state.load(Ordering::Relaxed) != 0))
            .finish_non_exhaustive()
    }
}

impl<T> Lock<T> {
    /// A free lock holding `value`.
    pub const fn new(value: T) -> Self {
        Lock {
            state: AtomicU64::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, by `&mut` (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T: Default> Lock<T> {
    /// Takes the lock, waiting while another thread of this process holds it; a lock held by a thread
    /// of an ancestor process (stranded by `fork()`) is taken over, its value replaced by
    /// `T::default()`.
    pub fn lock(&self) -> LockGuard<'_, T> {
        let mine = generation().wrapping_add(1);
        let mut spins = 0u32;
        loop {
            match self
                .state
                .compare_exchange_weak(0, mine, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return self.guard(),
                Err(0) => continue, // spurious failure
                Err(held) if self.take_over(held, mine) => return self.guard(),
                Err(_) => {
                    spins = spins.saturating_add(1);
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else if spins < 128 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            }
        }
    }

    /// The guard of a lock just taken.
    fn guard(&self) -> LockGuard<'_, T> {
        LockGuard {
            lock: self,
            _value: PhantomData,
        }
    }

    /// Takes the lock from a holder of an older generation than `mine` (stranded by `fork()`): whether
    /// it did. Generations only grow along a line of descent, so an older holder was a thread of an
    /// ancestor process, not of this one.
    fn take_over(&self, held: u64, mine: u64) -> bool {
        if held >= mine
            || self
                .state
                .compare_exchange(held, mine, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        // SAFETY: we hold the lock now; the stranded holder's guard does not exist in this process, so
        // nobody else references the value. It may be half-updated, so it is overwritten without being
        // read or dropped.
        unsafe { self.value.get().write(T::default()) };
        true
    }

    /// Takes the lock if it is free (or stranded by `fork()`, as [`lock`](Self::lock) does); `None`
    /// while another thread of this process holds it.
    pub fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        let mine = generation().wrapping_add(1);
        match self
            .state
            .compare_exchange(0, mine, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Some(self.guard()),
            Err(held) if self.take_over(held, mine) => Some(self.guard()),
            Err(_) => None,
        }
    }
}

/// Access to a [`Lock`]'s value; releases the lock on drop.
pub struct LockGuard<'a, T> {
    lock: &'a Lock<T>,
    /// Sync only where `T` is: a shared guard lends `&T`.
    _value: PhantomData<&'a mut T>,
}

impl<T> Deref for LockGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no `&mut` to the value exists elsewhere.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for LockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, so this is the only reference to the value.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T: fmt::Debug> fmt::Debug for LockGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> Drop for LockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.state.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Lock;

    #[test]
    fn a_lock_excludes_and_try_lock_says_when_it_is_held() {
        let lock = Lock::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let mut g = lock.lock();
                        let v = *g;
                        std::hint::spin_loop();
                        *g = v + 1;
                    }
                });
            }
        });
        assert_eq!(*lock.lock(), 800);
        let held = lock.lock();
        assert!(lock.try_lock().is_none(), "held by this thread");
        drop(held);
        *lock.try_lock().expect("free again") += 1;
        assert_eq!(*Lock::new(5).get_mut(), 5);
        let mut lock = lock;
        assert_eq!(*lock.get_mut(), 801);
    }
}
