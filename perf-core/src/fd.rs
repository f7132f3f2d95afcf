//! [`PerfFd`]: a perf event fd whose sharing perf-core controls, the only fd the safe ring constructors map.
//!
//! The kernel proves that an event has no mapping *now* (`PERF_EVENT_IOC_SET_OUTPUT(fd, -1)` is refused
//! while it has one), but not that no other process is about to map it: two processes sharing the fd
//! (through `fork()`, `SCM_RIGHTS`, `pidfd_getfd`, or an fd kept across `exec`) can both pass the check and
//! map it, and the kernel attaches both mappings to one ring with one `data_tail`. Within a process,
//! perf-core serialises the check and the mapping; across processes nothing can. So the safe constructors
//! ([`Ring::map_exclusive`](crate::Ring::map_exclusive)) take a `PerfFd` rather than any fd: one made by
//! [`PerfFd::open`] in this process and this fork generation, which a fork child's copy is not (it gets
//! [`ErrorKind::InheritedFd`](crate::ErrorKind::InheritedFd), and must open its own event). An fd from
//! anywhere else becomes a `PerfFd` only through `unsafe` [`PerfFd::from_owned`], whose caller promises
//! that no other process maps the event.
//!
//! # Safety
//!
//! A `PerfFd` keeps its fd's number beside the `File` that owns it, so that [`AsFd`] and [`AsRawFd`] are
//! a field load the caller inlines (std's `File::as_fd` is an out-of-line call through two functions,
//! which a counter read paid on every `read(2)`). The number is set once, from the `File`, when the
//! `PerfFd` is made, and the `File` is never replaced: it names the open fd for as long as the `PerfFd`
//! lives, which is what [`BorrowedFd::borrow_raw`] asks for the lifetime of the `&self` borrow.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use perf_sys::perf_event_attr;

use crate::fork;

/// An open perf event whose fd perf-core knows the sharing of: opened by [`PerfFd::open`] in this process
/// (or vouched for with [`PerfFd::from_owned`]), in a fork [`generation`](fork::generation) it records.
///
/// Duplicates made with [`try_clone`](Self::try_clone) share that generation: they stay in this process,
/// where mapping is serialised. A child made by `fork()` inherits the fd, but its copy of the `PerfFd` belongs to
/// the parent's generation, so the safe constructors refuse it.
///
/// ```no_run
/// use perf_core::{PerfFd, Ring, RingMode};
/// use perf_sys::{perf_event_attr, PERF_COUNT_SW_DUMMY, PERF_TYPE_SOFTWARE};
///
/// let mut attr = perf_event_attr {
///     type_: PERF_TYPE_SOFTWARE,
///     config: PERF_COUNT_SW_DUMMY as u64,
///     size: std::mem::size_of::<perf_event_attr>() as u32,
///     ..Default::default()
/// };
/// attr.set_comm(1);
/// let fd = PerfFd::open(&mut attr, 0, -1, None, perf_sys::PERF_FLAG_FD_CLOEXEC as u64)?;
/// let ring = Ring::map_exclusive(&fd, 8, RingMode::Normal)?;
/// # drop(ring);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "perf_event_open")]
pub struct PerfFd {
    file: File,
    /// `file`'s fd number (see the module's Safety section).
    raw: RawFd,
    generation: u64,
}

impl PerfFd {
    /// Opens a perf event: [`perf_sys::perf_event_open_mut`] (on `E2BIG` the kernel writes the size of its
    /// own `perf_event_attr` into `attr.size`), recording the current fork generation. Add
    /// `PERF_FLAG_FD_CLOEXEC` to `flags` unless the fd must survive `exec` (a program that inherits it
    /// cannot map it safely anyway).
    ///
    /// This is the one place perf-core calls `perf_event_open`: it chooses nothing about the event, it only
    /// gives the fd a type that says it has not been shared with another process.
    ///
    /// # Errors
    ///
    /// The kernel's errno, as [`perf_sys::perf_event_open`] describes.
    pub fn open(
        attr: &mut perf_event_attr,
        pid: libc::pid_t,
        cpu: libc::c_int,
        group_fd: Option<BorrowedFd<'_>>,
        flags: u64,
    ) -> io::Result<PerfFd> {
        // The generation is read (and the fork handlers installed) before the fd exists, so a fork after
        // this point is always seen as one.
        let generation = fork::generation();
        let fd = perf_sys::perf_event_open_mut(attr, pid, cpu, group_fd, flags)?;
        Ok(PerfFd::new(File::from(fd), generation))
    }

    /// Wraps a perf event fd obtained elsewhere (a raw `perf_event_open`, a received or inherited fd) so
    /// that the safe constructors accept it.
    ///
    /// # Safety
    ///
    /// While any ring made from this `PerfFd` (or a duplicate of it) lives, no other process maps the
    /// event's ring: not the process it came from, nor one it is passed to or shared with. Within this
    /// process perf-core checks the rest ([`Ring::map_exclusive`](crate::Ring::map_exclusive)).
    pub unsafe fn from_owned(fd: OwnedFd) -> PerfFd {
        PerfFd::new(File::from(fd), fork::generation())
    }

    /// A duplicate (`F_DUPFD_CLOEXEC`) of the same event, of the same generation.
    ///
    /// # Errors
    ///
    /// As `dup(2)` (`EMFILE` when the process is out of fds).
    pub fn try_clone(&self) -> io::Result<PerfFd> {
        Ok(PerfFd::new(self.file.try_clone()?, self.generation))
    }

    fn new(file: File, generation: u64) -> PerfFd {
        let raw = file.as_raw_fd();
        PerfFd {
            file,
            raw,
            generation,
        }
    }

    /// Whether this fd was opened in the current process (not inherited through `fork()`): only then do
    /// the safe constructors map it.
    pub fn opened_here(&self) -> bool {
        !fork::forked_since(self.generation)
    }

    /// The fd as a `File` (for `read(2)` of counts).
    pub fn as_file(&self) -> &File {
        &self.file
    }

    /// The plain fd: no longer accepted by the safe constructors.
    pub fn into_owned(self) -> OwnedFd {
        self.file.into()
    }
}

impl fmt::Debug for PerfFd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerfFd")
            .field("fd", &self.file.as_raw_fd())
            .field("opened_here", &self.opened_here())
            .finish()
    }
}

impl AsFd for PerfFd {
    #[inline]
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `raw` is the fd `self.file` owns, set when `self` was made; `self.file` is never
        // replaced and closes the fd only when `self` drops, so it stays open for the borrow of `self`.
        unsafe { BorrowedFd::borrow_raw(self.raw) }
    }
}

impl AsRawFd for PerfFd {
    #[inline]
    fn as_raw_fd(&self) -> RawFd {
        self.raw
    }
}

impl From<PerfFd> for OwnedFd {
    fn from(fd: PerfFd) -> OwnedFd {
        fd.into_owned()
    }
}
