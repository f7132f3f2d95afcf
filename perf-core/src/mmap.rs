//! Mapping a perf fd: the mmap page plus `2^n` data pages ([`Ring::map`]), the page alone ([`MappedPage`]),
//! and the AUX area ([`Ring::map_aux`]).
//!
//! The mappings are made with memmap2 (`MAP_SHARED`), writable for normal rings and read-only for overwrite
//! rings (the kernel picks the ring mode from the mapping's protection). Refusals are turned into errors that
//! say what to change: the locked-memory budget (`perf_event_mlock_kb`, `RLIMIT_MEMLOCK`) for EPERM and
//! ENOMEM, a redirected output (`PERF_EVENT_IOC_SET_OUTPUT`) for EBUSY.
//!
//! # Safety
//!
//! A mapping is kept alive (in an `Arc`) by every ring and page view made from it, so the pointers handed to
//! [`Ring::from_raw_parts`] and [`UserPage::from_ptr`] stay valid. The kernel's side of the contract is the
//! perf ring protocol: in a normal ring it writes only outside `[data_tail, data_head)`. Mapping the same fd
//! twice and reading it from two rings breaks that (two consumers of one tail); perf-event owns each fd's
//! single ring.

use std::io;
use std::mem::offset_of;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};
use perf_sys::perf_event_mmap_page;

use crate::page::UserPage;
use crate::ring::{Area, Aux, Data, Owner, Ring, RingMode};
use crate::Error;

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// Checks `pages` (a power of two, or 0 when `allow_zero`) and returns `pages * page_size + extra`.
fn mapping_len<A: Area>(pages: u64, extra: u64, allow_zero: bool) -> Result<u64, Error> {
    if !(pages.is_power_of_two() || (allow_zero && pages == 0)) {
        return Err(Error::BadRingSize {
            area: A::NAME,
            size: pages,
        });
    }
    let page_size = page_size();
    pages
        .checked_mul(page_size)
        .and_then(|len| len.checked_add(extra))
        .filter(|&len| usize::try_from(len).is_ok() && isize::try_from(len).is_ok())
        .ok_or(Error::SizeOverflow {
            area: A::NAME,
            pages,
            page_size,
        })
}

/// Turns an mmap(2) failure into the error that explains it.
fn map_error(area: &'static str, len: u64, offset: u64, source: io::Error) -> Error {
    match source.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOMEM) => {
            let mlock_kb = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unreadable".to_owned());
            let (memlock_cur, memlock_max) = memlock_limit();
            Error::MapMemory {
                area,
                len,
                mlock_kb,
                memlock_cur,
                memlock_max,
                source,
            }
        }
        Some(libc::EBUSY) => Error::MapBusy { area, source },
        errno => Error::Map {
            area,
            len,
            offset,
            hint: match errno {
                Some(libc::EINVAL) => {
                    ": the fd is already mapped with another size, or this event cannot be mapped"
                }
                Some(libc::EOPNOTSUPP) => {
                    ": this event's PMU has no AUX area (only PMUs such as \
                    Intel PT, BTS, CoreSight or ARM SPE have one)"
                }
                Some(libc::ENODEV) | Some(libc::EACCES) => ": not a perf event fd, or not mappable",
                _ => "",
            },
            source,
        },
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

impl Ring<Data> {
    /// Maps a perf fd's ring: the mmap page plus `data_pages` data pages (a power of two), writable for
    /// [`RingMode::Normal`], read-only for [`RingMode::Overwrite`] (open the event with `write_backward` for
    /// that, and read it with [`backward_snapshot`](Ring::backward_snapshot)).
    ///
    /// The data area is where the page's `data_offset`/`data_size` say (Linux 4.1+), else right after the page.
    /// The memory counts against `perf_event_mlock_kb` per CPU, then `RLIMIT_MEMLOCK`.
    ///
    /// # Errors
    ///
    /// [`Error::BadRingSize`] (`data_pages` not a non-zero power of two), [`Error::SizeOverflow`],
    /// [`Error::MapMemory`] (EPERM/ENOMEM: the locked-memory budget, with its current values),
    /// [`Error::MapBusy`] (EBUSY: output redirected), [`Error::Map`] (anything else).
    pub fn map(fd: BorrowedFd<'_>, data_pages: u64, mode: RingMode) -> Result<Self, Error> {
        let page_size = page_size();
        let len = mapping_len::<Data>(data_pages, page_size, false)?;
        let raw = Arc::new(map(fd, Data::NAME, len, 0, mode)?);
        let page = page_of(&raw);
        let (offset, size) = {
            // SAFETY: the mapping holds the page (page aligned) and is alive while `raw` is; the page's
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
        let data = NonNull::new(raw.as_mut_ptr().wrapping_add(offset as usize))
            .unwrap_or(NonNull::dangling());
        let owner: Owner = raw;
        // SAFETY: page and data area lie in the mapping, which `owner` keeps alive; the page is writable in
        // normal mode (PROT_WRITE); the kernel follows the ring protocol; head/tail are accessed atomically
        // by us and by the kernel; this is a fresh mapping, so we are its only consumer (see module docs).
        unsafe { Ring::from_raw_parts(page, data, size, mode, Some(owner)) }
    }

    /// Maps the AUX area of this ring's event: `aux_pages` pages (a power of two) after the data area,
    /// writable for [`RingMode::Normal`] (the PMU stops when it is full), read-only for
    /// [`RingMode::Overwrite`] (snapshot mode: read it with [`aux_snapshot`](Ring::aux_snapshot)).
    ///
    /// Writes `aux_offset` and `aux_size` into the mmap page, then maps them. Only PMUs with an AUX area
    /// (Intel PT, BTS, CoreSight, ARM SPE...) accept this. `fd` must be the fd this ring maps.
    /// Since Linux 4.1.
    ///
    /// # Errors
    ///
    /// As [`Ring::map`]; [`Error::RingMode`] if this data ring is an overwrite ring (its page is read-only, so
    /// the AUX offset cannot be written).
    pub fn map_aux(
        &mut self,
        fd: BorrowedFd<'_>,
        aux_pages: u64,
        mode: RingMode,
    ) -> Result<Ring<Aux>, Error> {
        if self.mode() != RingMode::Normal {
            return Err(Error::RingMode {
                area: Aux::NAME,
                what: "setting the AUX offset",
                needs: "normal (writable) data",
                is: "overwrite",
            });
        }
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
        let data = NonNull::new(raw.as_mut_ptr()).unwrap_or(NonNull::dangling());
        let owner: Owner = Arc::new((self.owner().cloned(), raw));
        // SAFETY: the page stays mapped through the data ring's owner, cloned into `owner` with the AUX
        // mapping; the AUX area is `len` bytes; the page is writable (normal data ring); the kernel follows
        // the AUX protocol; the kernel allows one AUX mapping per ring buffer, so we are its only consumer.
        unsafe { Ring::from_raw_parts(self.page_ptr(), data, len, mode, Some(owner)) }
    }
}

/// The mmap page alone (no data pages): what self-monitoring needs to read a counter without a syscall.
#[derive(Debug)]
pub struct MappedPage {
    raw: MmapRaw,
}

impl MappedPage {
    /// Maps the first page of a perf fd, read-only.
    ///
    /// # Errors
    ///
    /// As [`Ring::map`].
    pub fn map(fd: BorrowedFd<'_>) -> Result<Self, Error> {
        let len = mapping_len::<Data>(0, page_size(), true)?;
        let raw = map(fd, "page", len, 0, RingMode::Overwrite)?;
        Ok(MappedPage { raw })
    }

    /// The page's fields.
    pub fn page(&self) -> UserPage<'_> {
        // SAFETY: the page is mapped (readable, page aligned) while `self` lives, and only read atomically.
        unsafe { UserPage::from_ptr(page_of(&self.raw)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc and getrlimit")]
    fn memory_refusals_name_the_budget_and_its_values() {
        for errno in [libc::EPERM, libc::ENOMEM] {
            let err = map_error("data", 1 << 20, 0, io::Error::from_raw_os_error(errno));
            let Error::MapMemory {
                mlock_kb,
                memlock_cur,
                ..
            } = &err
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
        }
        assert!(matches!(
            map_error("aux", 0, 0, io::Error::from_raw_os_error(libc::EBUSY)),
            Error::MapBusy { area: "aux", .. }
        ));
        assert!(matches!(
            map_error("data", 4096, 0, io::Error::from_raw_os_error(libc::EINVAL)),
            Error::Map { .. }
        ));
    }

    #[test]
    fn page_counts_are_checked() {
        assert!(matches!(
            mapping_len::<Data>(3, 0, false),
            Err(Error::BadRingSize { size: 3, .. })
        ));
        assert!(matches!(
            mapping_len::<Data>(0, 0, false),
            Err(Error::BadRingSize { .. })
        ));
        assert_eq!(mapping_len::<Data>(0, 7, true).unwrap(), 7);
        assert_eq!(
            mapping_len::<Data>(4, page_size(), false).unwrap(),
            5 * page_size()
        );
        assert!(matches!(
            mapping_len::<Aux>(1 << 63, 0, false),
            Err(Error::SizeOverflow { area: "aux", .. })
        ));
    }
}
