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
//!   perf-event is a [`Lock`], which a child takes over from a holder that does not exist in the child
//!   (a thread of an ancestor other than the one that forked).
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
//! A [`Lock`] is taken over in a child only when its holder belongs to an older generation and is not
//! the thread that forked (whose guard lives on in the child), i.e. was a thread the child does not
//! have. Nothing needs that holder to have been idle: the takeover moves the lock's value to a new
//! allocation and leaves the old one (leaked) to whatever still refers to it from before the fork (the
//! forking thread may have borrowed it through another thread's guard), so no two references reach
//! one value, whatever code ran under the lock.

use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
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
        super::record_forker();
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

/// A token that tells the threads of one process apart, allocated on a thread's first lock: never 0,
/// never reused in this process. A fork child's only thread keeps the token it had in the parent (its
/// thread-local storage is copied), and a thread made in the child gets one above every token its
/// ancestors had handed out when it was made (the counter is copied at the fork), so no thread of the
/// child bears the token of an ancestor's thread that holds a lock stranded there, except the forking
/// thread itself.
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    TOKEN
        .try_with(|t| match t.get() {
            0 => {
                let token = NEXT.fetch_add(1, Ordering::Relaxed);
                t.set(token);
                token
            }
            token => token,
        })
        // A lock taken while the thread's storage is torn down: no token (a fork child may then take
        // that lock over, into a value of its own).
        .unwrap_or(0)
}

thread_local! {
    /// This thread's [`thread_token`]; 0 until its first lock.
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

/// No thread: what [`FORKER`] holds in a process not made by `fork()` after the handlers were
/// installed, or whose forking thread had never taken a lock.
const NO_THREAD: u64 = u64::MAX;

/// The token of the thread that called `fork()` to make this process (set by the child handler): the
/// one thread of this process that may hold a guard of an older generation.
static FORKER: AtomicU64 = AtomicU64::new(NO_THREAD);

/// Records the calling thread as the one that forked this process: for the child handler. Allocates
/// nothing (a thread without a token holds no lock).
#[cfg(not(miri))]
fn record_forker() {
    let token = TOKEN.try_with(Cell::get).unwrap_or(0);
    let forker = if token == 0 { NO_THREAD } else { token };
    FORKER.store(forker, Ordering::Relaxed);
}

/// Who is asking for a [`Lock`]: the process's generation, the thread that forked it, the thread.
#[derive(Clone, Copy, Debug)]
struct Asker {
    generation: u64,
    forker: u64,
    thread: u64,
}

impl Asker {
    fn current() -> Self {
        Asker {
            generation: generation(),
            forker: FORKER.load(Ordering::Relaxed),
            thread: thread_token(),
        }
    }
}

/// A mutual-exclusion lock that a `fork()` cannot strand: what perf-core and perf-event use for every
/// lock a process shares among its threads.
///
/// With `std::sync::Mutex`, a child made by `fork()` while another thread held the lock finds it held
/// forever (that thread does not exist in the child), and its first use of the lock hangs. A `Lock`
/// records the fork [`generation`] and the thread of its holder. A thread that finds it held by an older
/// generation takes it over, with a value of its own (`T::default()`), unless the holder is the thread
/// that called `fork()`, which lives on in the child with its guard: that lock stays held, as in the
/// parent, until that guard is dropped. The old value may be half-updated, so it is neither read nor
/// dropped: it leaks, and whatever still refers to it from before the fork (the forking thread's
/// borrows, a leaked guard) keeps referring to it alone, never to the new value.
///
/// Within one process it is an ordinary lock: waiters spin briefly, then yield and sleep, so keep
/// critical sections short and never call code that could block on something else while holding
/// one; taking it again on the thread that holds it waits forever ([`try_lock`](Self::try_lock) says
/// `None`), in a fork child too. A guard stays on the thread that took it (it is not `Send`). A panic
/// while holding one releases it without poisoning, so keep the value usable at every step.
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
    /// The holder's [`thread_token`]; 0 while free (and for an instant after the lock is taken).
    holder: AtomicU64,
    /// Where the value lives once a fork child took the lock over (a box of its own, leaked by the
    /// next takeover); null while it is `first`.
    moved: AtomicPtr<T>,
    /// The value until a takeover; after one it is left alone (neither read nor dropped).
    first: UnsafeCell<ManuallyDrop<T>>,
}

// SAFETY: the value is only reached through a guard, and one guard per value exists at a time (see `lock`
// and `take_over`); moving the lock moves the value.
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
            holder: AtomicU64::new(0),
            moved: AtomicPtr::new(std::ptr::null_mut()),
            first: UnsafeCell::new(ManuallyDrop::new(value)),
        }
    }

    /// The value, by `&mut` (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        let moved = *self.moved.get_mut();
        if moved.is_null() {
            self.first.get_mut()
        } else {
            // SAFETY: `moved` came from `Box::into_raw` in `take_over` and is freed only by `drop`;
            // `&mut self` excludes every guard of this lock, so nothing else references the value.
            unsafe { &mut *moved }
        }
    }

    /// Where the value lives now; read while holding the lock.
    fn value_ptr(&self) -> NonNull<T> {
        let moved = self.moved.load(Ordering::Acquire);
        // `ManuallyDrop<T>` has `T`'s layout.
        NonNull::new(moved).unwrap_or_else(|| {
            // SAFETY: `UnsafeCell::get` is never null.
            unsafe { NonNull::new_unchecked(self.first.get().cast::<T>()) }
        })
    }

    /// The guard of a lock just taken with `state` by `thread`.
    fn guard(&self, state: u64, thread: u64) -> LockGuard<'_, T> {
        self.holder.store(thread, Ordering::Relaxed);
        LockGuard {
            lock: self,
            value: self.value_ptr(),
            state,
            thread,
            _value: PhantomData,
        }
    }
}

impl<T> Drop for Lock<T> {
    fn drop(&mut self) {
        let moved = *self.moved.get_mut();
        if moved.is_null() {
            // SAFETY: no takeover happened, so `first` is the live value, dropped once, here.
            unsafe { ManuallyDrop::drop(self.first.get_mut()) };
        } else {
            // SAFETY: `moved` came from `Box::into_raw` and is the live value; `&mut self` excludes
            // every guard. `first` and boxes moved away from are left alone (see `take_over`).
            drop(unsafe { Box::from_raw(moved) });
        }
    }
}

impl<T: Default> Lock<T> {
    /// Takes the lock, waiting while another thread of this process holds it; a lock held by a thread
    /// that does not exist in this process (stranded by `fork()`) is taken over, with the value
    /// `T::default()`.
    pub fn lock(&self) -> LockGuard<'_, T> {
        self.lock_as(Asker::current())
    }

    fn lock_as(&self, asker: Asker) -> LockGuard<'_, T> {
        let mut spins = 0u32;
        loop {
            if let Some(g) = self.try_lock_as(asker) {
                return g;
            }
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

    /// Takes the lock if it is free (or stranded by `fork()`, as [`lock`](Self::lock) does); `None`
    /// while a thread of this process holds it, the calling thread included.
    pub fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        self.try_lock_as(Asker::current())
    }

    fn try_lock_as(&self, asker: Asker) -> Option<LockGuard<'_, T>> {
        let mine = asker.generation.wrapping_add(1);
        loop {
            match self
                .state
                .compare_exchange(0, mine, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Some(self.guard(mine, asker.thread)),
                Err(held) if held < mine && self.holder.load(Ordering::Relaxed) != asker.forker => {
                    match self.take_over(held, mine, asker.thread) {
                        Some(g) => return Some(g),
                        // Released or taken meanwhile: look again.
                        None => continue,
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Takes the lock from a holder of an older generation than `mine` that is not the thread that
    /// forked this process (stranded by `fork()`), moving the value to a new place: `None` if the
    /// lock changed meanwhile. Generations only grow along a line of descent, so an older holder was
    /// a thread of an ancestor process; the only such thread here is the one that forked.
    fn take_over(&self, held: u64, mine: u64, thread: u64) -> Option<LockGuard<'_, T>> {
        // Made before the lock is taken: `T::default()` is the caller's code, never run under a lock.
        let fresh = Box::into_raw(Box::<T>::default());
        if self
            .state
            .compare_exchange(held, mine, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // SAFETY: `fresh` came from `Box::into_raw` above and was never shared.
            drop(unsafe { Box::from_raw(fresh) });
            return None;
        }
        // The old value (`first`, or an earlier box) is left where it is, leaked: the stranded guard may
        // have been the forking thread's (a guard moved or leaked there, or a borrow of its value that
        // thread kept), so something may still refer to it; nothing reaches it through this lock again.
        self.moved.store(fresh, Ordering::Release);
        Some(self.guard(mine, thread))
    }
}

/// Access to a [`Lock`]'s value; releases the lock on drop.
pub struct LockGuard<'a, T> {
    lock: &'a Lock<T>,
    /// The value this guard owns: where it lived when the lock was taken (a takeover moves the lock's
    /// value elsewhere, never this one). Not `Send`: a guard stays on its thread, which the lock
    /// records as its holder.
    value: NonNull<T>,
    /// The lock's state this guard set: its generation + 1.
    state: u64,
    thread: u64,
    _value: PhantomData<&'a mut T>,
}

// SAFETY: a shared guard lends `&T` only, which another thread may use where `T: Sync`.
unsafe impl<T: Sync> Sync for LockGuard<'_, T> {}

impl<T> Deref for LockGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard owns `value` (the lock, or a takeover that moved the lock's value away from
        // it, gives it to no other guard), so no `&mut` to it exists elsewhere.
        unsafe { self.value.as_ref() }
    }
}

impl<T> DerefMut for LockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through this guard.
        unsafe { self.value.as_mut() }
    }
}

impl<T: fmt::Debug> fmt::Debug for LockGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> Drop for LockGuard<'_, T> {
    fn drop(&mut self) {
        // A guard from before a fork whose lock was taken over releases nothing: neither the new
        // holder's thread nor its state. Otherwise both are still this guard's (a takeover racing with
        // this drop finds the holder cleared first, or clears nothing of this guard's: see `take_over`).
        if self.lock.state.load(Ordering::Relaxed) != self.state {
            return;
        }
        let _ =
            self.lock
                .holder
                .compare_exchange(self.thread, 0, Ordering::Relaxed, Ordering::Relaxed);
        let _ =
            self.lock
                .state
                .compare_exchange(self.state, 0, Ordering::Release, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{thread_token, Asker, Lock};

    /// The calling thread, asking as if in a fork child (one generation on) made by `forker`.
    fn in_child(forker: u64) -> Asker {
        let here = Asker::current();
        Asker {
            generation: here.generation + 1,
            forker,
            thread: thread_token(),
        }
    }

    #[test]
    fn a_fork_child_never_takes_a_lock_its_forking_thread_holds() {
        // Issue 37, item 1: the thread that held a guard forked, and in the child its own `try_lock`
        // took the lock over and handed out a second `&mut` while the first lived. Simulated: the
        // generation moves on, the forking thread is this one. Miri checks that no two references alias.
        let lock = Lock::new(vec![1u8, 2, 3]);
        let mut first = lock.lock();
        let me = thread_token();
        assert!(lock.try_lock_as(in_child(me)).is_none());
        // A thread made in the child cannot take it either: its holder lives there.
        std::thread::scope(|s| {
            s.spawn(|| assert!(lock.try_lock_as(in_child(me)).is_none()));
        });
        first.push(4);
        drop(first);
        // Released by its own guard in the child: taken as usual, same value.
        let again = lock.try_lock_as(in_child(me)).expect("free after the drop");
        assert_eq!(*again, [1, 2, 3, 4]);
    }

    #[test]
    fn a_takeover_moves_the_value_away_from_borrows_made_before_the_fork() {
        // The holder (another thread, gone in the child) lent the value; the thread that forks kept the
        // borrow. The child's takeover must give it a value of its own, not the borrowed one.
        let lock = Lock::new(vec![7u8; 8]);
        let mut guard = lock.lock();
        let holder = thread_token();
        let seen: &Vec<u8> = &guard;
        std::thread::scope(|s| {
            s.spawn(|| {
                let forker = thread_token();
                assert_ne!(forker, holder);
                let mut taken = lock.try_lock_as(in_child(forker)).expect("a stranded lock");
                assert!(
                    taken.is_empty(),
                    "the value after a takeover is T::default()"
                );
                taken.extend_from_slice(&[9; 64]);
                assert_eq!(*seen, [7u8; 8], "the borrow still sees the old value alone");
                drop(taken);
                // The new value stays the lock's.
                assert_eq!(lock.try_lock_as(in_child(forker)).unwrap().len(), 64);
            });
        });
        // The stranded guard still owns the old value, and its drop releases nothing of the new holder.
        guard.push(1);
        assert_eq!(guard.len(), 9);
        let child = Asker {
            generation: Asker::current().generation + 1,
            forker: u64::MAX,
            thread: thread_token(),
        };
        let held = lock.try_lock_as(child).expect("free in the child");
        // Frees the old value's buffer, which the lock itself never drops again (Miri's leak check).
        drop(std::mem::take(&mut *guard));
        drop(guard);
        assert!(
            lock.try_lock_as(child).is_none(),
            "the stranded guard's drop released the new holder's lock"
        );
        assert_eq!(held.len(), 64);
    }

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
