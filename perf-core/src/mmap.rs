//! Mapping a perf fd: the mmap page plus `2^n` data pages ([`Ring::map_exclusive`], [`Ring::map`]), the page
//! alone ([`MappedPage`]), and the AUX area ([`Ring::map_aux_exclusive`], [`Ring::map_aux`]).
//!
//! The mappings are made with memmap2 (`MAP_SHARED`), writable for normal rings and read-only for overwrite
//! rings (the kernel picks the ring mode from the mapping's protection). Refusals are turned into errors that
//! say what to change: the locked-memory budget (`perf_event_mlock_kb`, `RLIMIT_MEMLOCK`) for EPERM, the
//! kernel's largest ring for ENOMEM, a redirected output (`PERF_EVENT_IOC_SET_OUTPUT`) for EBUSY.
//!
//! # Safety
//!
//! The kernel attaches a second `mmap` of a perf fd (or of a duplicate of it) to the ring that already
//! exists, and an old kernel maps the target's ring for an fd redirected with `SET_OUTPUT`: a second mapping
//! is a second consumer of one tail, and one of them would read bytes the kernel reuses. No function can see
//! that from the fd alone, so [`Ring::map`] and [`Ring::map_aux`] are `unsafe` with that contract, and
//! [`Ring::map_exclusive`] asks the kernel instead: `PERF_EVENT_IOC_SET_OUTPUT(-1)` fails while the event has
//! any mapping, and succeeding detaches any redirection, so the ring mapped next is new and ours alone.
//! That proof holds within this process (the check and the mapping are serialised); across processes it
//! needs an fd no other process maps, which is what [`PerfFd`] stands for: `map_exclusive` takes one, and
//! refuses a fork child's copy of its parent's.
//!
//! A mapping is kept alive (in an `Arc`) by every ring and page view made from it, so the pointers handed to
//! the rings and to [`UserPage::from_ptr`] stay valid; it is registered with the fork handlers (`fork.rs`)
//! while it lives.

use std::io;
use std::mem::offset_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};
use perf_sys::perf_event_mmap_page;

use crate::fd::PerfFd;
use crate::fork::Lock;
use crate::page::UserPage;
use crate::ring::{Area, Aux, Data, Owner, Producer, Ring, RingMode};
use crate::ErrorKind;
use crate::{fork, Error};

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// Checks `pages` (a power of two, or 0 when `allow_zero`) and returns `pages * page_size + extra`.
fn mapping_len<A: Area>(pages: u64, extra: u64, allow_zero: bool) -> Result<u64, Error> {
    if !(pages.is_power_of_two() || (allow_zero && pages == 0)) {
        return Err(ErrorKind::BadRingSize {
            area: A::NAME,
            size: pages,
        }
        .into());
    }
    let page_size = page_size();
    pages
        .checked_mul(page_size)
        .and_then(|len| len.checked_add(extra))
        .filter(|&len| usize::try_from(len).is_ok() && isize::try_from(len).is_ok())
        .ok_or(
            ErrorKind::SizeOverflow {
                area: A::NAME,
                pages,
                page_size,
            }
            .into(),
        )
}

/// Turns an mmap(2) failure into the error that explains it.
fn map_error(area: &'static str, len: u64, offset: u64, source: io::Error) -> Error {
    match source.raw_os_error() {
        Some(libc::ENOMEM) => ErrorKind::MapTooLarge { area, len, source }.into(),
        Some(libc::EPERM) => {
            let mlock_kb = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unreadable".to_owned());
            let (memlock_cur, memlock_max) = memlock_limit();
            ErrorKind::MapMemory {
                area,
                len,
                mlock_kb,
                memlock_cur,
                memlock_max,
                source,
            }
            .into()
        }
        Some(libc::EBUSY) => ErrorKind::MapBusy { area, source }.into(),
        errno => ErrorKind::Map {
            area,
            len,
            offset,
            hint: match errno {
                Some(libc::EINVAL) => Some(
                    "the fd is already mapped with another size, or this event cannot be mapped",
                ),
                Some(libc::EOPNOTSUPP) => Some(
                    "this event's PMU has no AUX area (only PMUs such as \
                    Intel PT, BTS, CoreSight or ARM SPE have one)",
                ),
                Some(libc::ENODEV) | Some(libc::EACCES) => {
                    Some("not a perf event fd, or not mappable")
                }
                _ => None,
            },
            source,
        }
        .into(),
    }
}

/// RLIMIT_MEMLOCK (soft, hard) as text.
fn memlock_limit() -> (String, String) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return ("unknown".to_owned(), "unknown".to_owned());
    }
    let show = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            "unlimited".to_owned()
        } else {
            v.to_string()
        }
    };
    (show(lim.rlim_cur), show(lim.rlim_max))
}

fn map(
    fd: BorrowedFd<'_>,
    area: &'static str,
    len: u64,
    offset: u64,
    mode: RingMode,
) -> Result<MmapRaw, Error> {
    let mut opts = MmapOptions::new();
    // `len` fits in usize (checked by `mapping_len`).
    opts.len(len as usize).offset(offset);
    let mapped = match mode {
        RingMode::Normal => opts.map_raw(fd.as_raw_fd()),
        RingMode::Overwrite => opts.map_raw_read_only(fd.as_raw_fd()),
    };
    mapped.map_err(|e| map_error(area, len, offset, e))
}

fn page_of(raw: &MmapRaw) -> NonNull<perf_event_mmap_page> {
    // The mapping is page aligned and non-empty; memmap2 never returns null for a successful mapping.
    NonNull::new(raw.as_mut_ptr().cast()).unwrap_or(NonNull::dangling())
}

/// A perf mapping, registered with the fork handlers (see `fork.rs`) while it lives.
#[derive(Debug)]
pub(crate) struct Mapping {
    raw: MmapRaw,
}

impl Mapping {
    fn new(raw: MmapRaw) -> Self {
        fork::register(raw.as_ptr() as usize, raw.len());
        Mapping { raw }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Unregistered before memmap2 unmaps it, so a fork in between never maps over a freed range.
        fork::unregister(self.raw.as_ptr() as usize, self.raw.len());
    }
}

/// Serialises [`Ring::map_exclusive`]'s check and mapping within this process; a [`Lock`], so a fork while a
/// thread maps does not leave it held in the child.
static EXCLUSIVE: Lock<()> = Lock::new(());

/// Asks the kernel to prove that the event behind `fd` has no mapping at all, and detaches a
/// `PERF_EVENT_IOC_SET_OUTPUT` redirection so that mapping it gives the event's own, fresh ring.
///
/// `perf_event_set_output(event, NULL)` refuses (EINVAL) while the event has an active mmap.
fn prove_unmapped(fd: BorrowedFd<'_>, area: &'static str) -> Result<(), Error> {
    perf_sys::ioctl::set_output(fd, None).map_err(|source| match source.raw_os_error() {
        Some(libc::EINVAL) => ErrorKind::AlreadyMapped { area }.into(),
        _ => ErrorKind::NotPerfFd { area, source }.into(),
    })
}

impl Ring<Data> {
    /// Maps an event's ring after the kernel has proven that nothing else maps it: the safe constructor.
    ///
    /// Before mapping, it asks the kernel to detach the fd's output (`PERF_EVENT_IOC_SET_OUTPUT` with -1),
    /// which the kernel refuses while the event has any mapping; so the ring this maps is the event's own,
    /// new, and its only consumer is this `Ring`, whose later mappings (another `map_exclusive`, an AUX area
    /// through [`map_aux_exclusive`](Ring::map_aux_exclusive)) are refused or tracked. A redirection the fd
    /// had (`SET_OUTPUT` to another event) is undone. The check and the mapping are serialised in this
    /// process, and `fd` is a [`PerfFd`] opened in this process: a fork child's copy of its parent's event
    /// is refused, so two processes never both pass the check (see [`PerfFd`]).
    ///
    /// `data_pages` (a power of two) data pages follow the mmap page; the mapping is writable for
    /// [`RingMode::Normal`], read-only for [`RingMode::Overwrite`] (open the event with `write_backward` for
    /// that, and read it with [`copy_backward`](Ring::copy_backward)). The data area is where the page's
    /// `data_offset`/`data_size` say (Linux 4.1+), else right after the page. The memory counts against
    /// `perf_event_mlock_kb` per CPU, then `RLIMIT_MEMLOCK`. The ring keeps a duplicate of `fd`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InheritedFd`] (a fork child's copy of its parent's event), [`ErrorKind::AlreadyMapped`]
    /// (the event is mapped already: by another ring, or by a mapping of a duplicate fd),
    /// [`ErrorKind::NotPerfFd`], [`ErrorKind::BadRingSize`] (`data_pages` not a non-zero power of two),
    /// [`ErrorKind::SizeOverflow`], [`ErrorKind::MapMemory`] (the locked-memory budget, with its current
    /// values), [`ErrorKind::MapTooLarge`], [`ErrorKind::Map`] (anything else).
    pub fn map_exclusive(fd: &PerfFd, data_pages: u64, mode: RingMode) -> Result<Self, Error> {
        if !fd.opened_here() {
            return Err(ErrorKind::InheritedFd { area: Data::NAME }.into());
        }
        let len = mapping_len::<Data>(data_pages, page_size(), false)?;
        let dup = fd.try_clone().map_err(|source| ErrorKind::NotPerfFd {
            area: Data::NAME,
            source,
        })?;
        let _serial = EXCLUSIVE.lock();
        prove_unmapped(fd.as_fd(), Data::NAME)?;
        // SAFETY: the kernel just proved the event has no mapping, so the one made here is the ring's first
        // and only consumer: nothing else in this process can map it until this returns (`EXCLUSIVE`), and
        // no other process maps it (a `PerfFd` opened in this process and fork generation, whose sharing
        // with other processes its `unsafe` constructor rules out); afterwards a safe second mapping is
        // refused by the same check.
        let mut ring = unsafe { Self::map_len(fd.as_fd(), len, mode) }?;
        ring.fd = Some(Arc::new(dup));
        Ok(ring)
    }

    /// Maps a perf fd's ring without checking that it has no other consumer; see
    /// [`map_exclusive`](Ring::map_exclusive) for the layout, modes and errors.
    ///
    /// # Safety
    ///
    /// No other consumer of this fd's ring exists while the returned ring lives: no other [`Ring`] of the
    /// same event (the kernel attaches a second `mmap` of an fd, or of a duplicate, to the same ring), of an
    /// event whose output this fd was redirected to with `PERF_EVENT_IOC_SET_OUTPUT` (older kernels map the
    /// target's ring then), and nothing else that reads the data area or stores `data_tail`, in this
    /// process or any other that shares the fd (a fork child, a process it was sent to with `SCM_RIGHTS` or
    /// taken from with `pidfd_getfd`, a program that inherited it across `exec`).
    ///
    /// # Errors
    ///
    /// As [`map_exclusive`](Ring::map_exclusive), less the exclusivity check.
    pub unsafe fn map(fd: BorrowedFd<'_>, data_pages: u64, mode: RingMode) -> Result<Self, Error> {
        let len = mapping_len::<Data>(data_pages, page_size(), false)?;
        // SAFETY: the caller's contract is `map_len`'s.
        unsafe { Self::map_len(fd, len, mode) }
    }

    /// # Safety
    ///
    /// As [`Ring::map`].
    unsafe fn map_len(fd: BorrowedFd<'_>, len: u64, mode: RingMode) -> Result<Self, Error> {
        let page_size = page_size();
        let raw = map(fd, Data::NAME, len, 0, mode)?;
        let generation = fork::generation();
        let mapping = Arc::new(Mapping::new(raw));
        let page = page_of(&mapping.raw);
        let (offset, size) = {
            // SAFETY: the mapping holds the page (page aligned) and is alive while `mapping` is; the page's
            // fields are only accessed atomically.
            let view = unsafe { UserPage::from_ptr(page) };
            (view.data_offset(), view.data_size())
        };
        let (offset, size) = if size != 0 && offset.checked_add(size).is_some_and(|end| end <= len)
        {
            (offset, size)
        } else {
            (page_size, len - page_size)
        };
        // `offset < len`, which fits in usize.
        let data = NonNull::new(mapping.raw.as_mut_ptr().wrapping_add(offset as usize))
            .unwrap_or(NonNull::dangling());
        let owner = Owner(mapping);
        // SAFETY: page and data area lie in the mapping, which `owner` keeps alive and `fork` covers; the page
        // is writable in normal mode (PROT_WRITE); the kernel follows the ring protocol and writes overwrite
        // areas outside the Rust memory model; head/tail are accessed atomically by us and by the kernel; the
        // caller promises this is the only consumer.
        unsafe {
            Ring::with_producer(
                page,
                data,
                size,
                mode,
                Some(owner),
                Producer::Kernel,
                Some(generation),
            )
        }
    }

    /// Maps the AUX area of this ring's event, safely: `aux_pages` pages (a power of two) after the data
    /// area, writable for [`RingMode::Normal`] (the PMU stops when it is full), read-only for
    /// [`RingMode::Overwrite`] (snapshot mode: read it with [`copy_aux_snapshot`](Ring::copy_aux_snapshot)).
    ///
    /// Only for a ring made by [`map_exclusive`](Ring::map_exclusive), which proved it is the event's only
    /// consumer; one AUX ring at a time per data ring. Writes `aux_offset` and `aux_size` into the mmap page,
    /// then maps them. Only PMUs with an AUX area (Intel PT, BTS, CoreSight, ARM SPE...) accept this.
    /// Since Linux 4.1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AuxUnavailable`] for a ring not made by `map_exclusive`, or one whose AUX ring is alive;
    /// as [`map_aux`](Ring::map_aux) otherwise.
    pub fn map_aux_exclusive(
        &mut self,
        aux_pages: u64,
        mode: RingMode,
    ) -> Result<Ring<Aux>, Error> {
        let Some(fd) = self.fd.clone() else {
            return Err(ErrorKind::AuxUnavailable {
                why: "the data ring was not made by Ring::map_exclusive",
            }
            .into());
        };
        if self.aux_claim.swap(true, Ordering::AcqRel) {
            return Err(ErrorKind::AuxUnavailable {
                why: "an AUX ring of this data ring is alive (one AUX area per ring)",
            }
            .into());
        }
        // SAFETY: `fd` is the event this ring maps (kept by `map_exclusive`), and this ring is its only
        // consumer (proved by `map_exclusive`), so the only AUX consumer is the one made here: a second one
        // through this ring is refused by `aux_claim` until it drops.
        let made = unsafe { self.map_aux(fd.as_fd(), aux_pages, mode) };
        if made.is_err() {
            self.aux_claim.store(false, Ordering::Release);
        }
        made
    }

    /// Maps the AUX area of this ring's event without checking for other consumers; see
    /// [`map_aux_exclusive`](Ring::map_aux_exclusive).
    ///
    /// # Safety
    ///
    /// `fd` is the event this ring maps, and no other consumer of its AUX area exists while the returned
    /// ring lives, in any process (the kernel attaches a second AUX mapping of the same ring to the same
    /// area).
    ///
    /// # Errors
    ///
    /// As [`Ring::map_exclusive`]; [`ErrorKind::RingMode`] if this data ring is an overwrite ring (its page is
    /// read-only, so the AUX offset cannot be written); [`ErrorKind::ForkedChild`] in a child made by `fork()`.
    pub unsafe fn map_aux(
        &mut self,
        fd: BorrowedFd<'_>,
        aux_pages: u64,
        mode: RingMode,
    ) -> Result<Ring<Aux>, Error> {
        if self.mode() != RingMode::Normal {
            return Err(ErrorKind::RingMode {
                area: Aux::NAME,
                what: "setting the AUX offset",
                needs: "normal (writable) data",
                is: "overwrite",
            }
            .into());
        }
        self.check_process()?;
        let len = mapping_len::<Aux>(aux_pages, 0, false)?;
        let page = self.page();
        let page_size = page_size();
        let end = page
            .data_offset()
            .max(page_size)
            .saturating_add(self.size());
        let aux_offset = end.div_ceil(page_size).saturating_mul(page_size);
        let field = |offset: usize| {
            let ptr = self
                .page_ptr()
                .as_ptr()
                .cast::<u8>()
                .wrapping_add(offset)
                .cast::<u64>();
            // SAFETY: an aligned u64 field of the page, which is mapped writable (normal mode) for the
            // ring's life and only accessed atomically.
            unsafe { AtomicU64::from_ptr(ptr) }
        };
        field(offset_of!(perf_event_mmap_page, aux_offset)).store(aux_offset, Ordering::Relaxed);
        field(offset_of!(perf_event_mmap_page, aux_size)).store(len, Ordering::Relaxed);
        let raw = map(fd, Aux::NAME, len, aux_offset, mode)?;
        let generation = fork::generation();
        let mapping = Mapping::new(raw);
        let data = NonNull::new(mapping.raw.as_mut_ptr()).unwrap_or(NonNull::dangling());
        let claim = AuxClaim(Arc::clone(&self.aux_claim));
        let owner = Owner(Arc::new((self.owner().cloned(), mapping, claim)));
        // SAFETY: the page stays mapped through the data ring's owner, cloned into `owner` with the AUX
        // mapping; the AUX area is `len` bytes, page aligned; the page is writable (normal data ring); the
        // kernel follows the AUX protocol; the caller promises we are the only AUX consumer.
        unsafe {
            Ring::with_producer(
                self.page_ptr(),
                data,
                len,
                mode,
                Some(owner),
                Producer::Kernel,
                Some(generation),
            )
        }
    }
}

/// Clears a data ring's "AUX ring alive" flag when the AUX ring's memory goes.
#[derive(Debug)]
struct AuxClaim(Arc<AtomicBool>);

impl Drop for AuxClaim {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The mmap page of a perf fd, alone or shared with a ring: what self-monitoring needs to read a counter
/// without a syscall, and what a ring's owner reads its times from while the ring is busy elsewhere.
///
/// Owned, `Send` and `Sync`; it keeps the mapping alive.
#[derive(Debug, Clone)]
pub struct MappedPage {
    /// Keeps the mapping (or simulated region) alive for `page`.
    _owner: Owner,
    page: NonNull<perf_event_mmap_page>,
}

// SAFETY: the page is only read atomically through `UserPage`, and `owner` (a `Send + Sync` mapping or
// simulated region) keeps it mapped for as long as any clone lives.
unsafe impl Send for MappedPage {}
// SAFETY: as above.
unsafe impl Sync for MappedPage {}

impl MappedPage {
    /// Maps the first page of a perf fd, read-only.
    ///
    /// A page-only mapping is not a ring: it reads no data area and stores no tail. The kernel then gives
    /// the event a ring without data pages, so a later [`Ring::map_exclusive`] of the same fd is refused.
    ///
    /// # Errors
    ///
    /// As [`Ring::map_exclusive`].
    pub fn map(fd: BorrowedFd<'_>) -> Result<Self, Error> {
        let len = mapping_len::<Data>(0, page_size(), true)?;
        let raw = map(fd, "page", len, 0, RingMode::Overwrite)?;
        let mapping = Arc::new(Mapping::new(raw));
        let page = page_of(&mapping.raw);
        Ok(MappedPage {
            _owner: Owner(mapping),
            page,
        })
    }

    /// The page's fields.
    pub fn page(&self) -> UserPage<'_> {
        // SAFETY: the page is mapped (readable, page aligned) while `self` lives, and only read atomically;
        // in a fork child it is a zeroed placeholder (see `fork`).
        unsafe { UserPage::from_ptr(self.page) }
    }
}

impl<A: Area> Ring<A> {
    /// The ring's mmap page as an owned view that keeps the mapping alive: read the counter's times or
    /// index through it while the ring itself is busy (borrowed mutably by a reader, or on another thread).
    ///
    /// `None` for a ring made by [`Ring::from_raw_parts`] without an owner.
    pub fn mapped_page(&self) -> Option<MappedPage> {
        self.owner().map(|owner| MappedPage {
            _owner: owner.clone(),
            page: self.page_ptr(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc and getrlimit")]
    fn memory_refusals_name_the_budget_and_its_values() {
        let err = map_error(
            "data",
            1 << 32,
            0,
            io::Error::from_raw_os_error(libc::ENOMEM),
        );
        assert!(
            matches!(err.kind(), ErrorKind::MapTooLarge { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("2^18 pages"), "{err}");
        let err = map_error(
            "data",
            1 << 20,
            0,
            io::Error::from_raw_os_error(libc::EPERM),
        );
        let ErrorKind::MapMemory {
            mlock_kb,
            memlock_cur,
            ..
        } = err.kind()
        else {
            panic!("{err:?}");
        };
        let msg = err.to_string();
        assert!(msg.contains("perf_event_mlock_kb is"), "{msg}");
        assert!(msg.contains("RLIMIT_MEMLOCK is"), "{msg}");
        assert!(!memlock_cur.is_empty());
        if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb") {
            assert_eq!(mlock_kb, s.trim());
        }
        assert!(matches!(
            map_error("aux", 0, 0, io::Error::from_raw_os_error(libc::EBUSY)).kind(),
            ErrorKind::MapBusy { area: "aux", .. }
        ));
        assert!(matches!(
            map_error("data", 4096, 0, io::Error::from_raw_os_error(libc::EINVAL)).kind(),
            ErrorKind::Map { .. }
        ));
    }

    #[test]
    fn page_counts_are_checked() {
        assert!(matches!(
            mapping_len::<Data>(3, 0, false).map_err(Error::into_kind),
            Err(ErrorKind::BadRingSize { size: 3, .. })
        ));
        assert!(matches!(
            mapping_len::<Data>(0, 0, false).map_err(Error::into_kind),
            Err(ErrorKind::BadRingSize { .. })
        ));
        assert_eq!(mapping_len::<Data>(0, 7, true).unwrap(), 7);
        assert_eq!(
            mapping_len::<Data>(4, page_size(), false).unwrap(),
            5 * page_size()
        );
        assert!(matches!(
            mapping_len::<Aux>(1 << 63, 0, false).map_err(Error::into_kind),
            Err(ErrorKind::SizeOverflow { area: "aux", .. })
        ));
    }
}
