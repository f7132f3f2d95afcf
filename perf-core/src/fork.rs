//! What `fork(2)` does to perf mappings, and how a child stays safe.
//!
//! The kernel maps perf rings with `VM_DONTCOPY` (`perf_mmap`), so a child made by `fork()` has no
//! mapping where its copy of a [`Ring`](crate::Ring) or [`MappedPage`](crate::MappedPage) points: a read
//! would fault, and worse, a later `mmap` in the child could land there and the ring would read (or its
//! `Drop` unmap) somebody else's memory. Two things prevent that:
//!
//! - a fork *generation*, bumped in the child by a `pthread_atfork` handler: rings compare it with the
//!   generation they were made in and refuse to work in a child ([`ErrorKind::ForkedChild`](crate::ErrorKind::ForkedChild));
//! - a registry of live perf mappings: the same child handler maps anonymous zeroed memory over each of
//!   them (`MAP_FIXED`), so every pointer a ring or page view still holds points at memory the child owns,
//!   nothing else can be mapped there, and dropping the copy only unmaps that placeholder.
//!
//! The handlers are installed the first time a perf fd is mapped; before that there is nothing to protect.
//! A raw `clone(2)` without `CLONE_VM` bypasses `pthread_atfork`; it is `unsafe` and its caller's business.
//!
//! # Safety
//!
//! The registry is guarded by a spin lock that the `prepare` handler takes before the fork and the
//! `parent`/`child` handlers release, so the child never finds it held by a thread that does not exist
//! there. The child handler only calls `mmap`, which is async-signal-safe, and reads the registry.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped in every child made by `fork()` once the handlers are installed.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The fork generation of this process: 0 in the original process, and different in every child made by
/// `fork()` after the first call of this function (or the first perf mapping), which installs the
/// `pthread_atfork` handlers. State that must not be shared with a child (a helper thread, an epoll set)
/// records the generation it was made in and starts afresh when it differs.
pub fn generation() -> u64 {
    imp::install();
    GENERATION.load(Ordering::Relaxed)
}

#[cfg(not(miri))]
mod imp {
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Once;

    use super::GENERATION;

    /// Live mappings `(address, length)`.
    struct Registry(UnsafeCell<Vec<(usize, usize)>>);

    // SAFETY: the vector is only touched while `LOCKED` is held (see `with_registry` and the handlers).
    unsafe impl Sync for Registry {}

    static REGISTRY: Registry = Registry(UnsafeCell::new(Vec::new()));
    static LOCKED: AtomicBool = AtomicBool::new(false);
    static INSTALL: Once = Once::new();

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
        unlock();
    }

    pub(crate) fn install() {
        INSTALL.call_once(|| {
            // SAFETY: the handlers are `extern "C"` functions without arguments that live for the program's
            // life; they only use the lock, the registry and mmap.
            unsafe {
                libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
            }
        });
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
