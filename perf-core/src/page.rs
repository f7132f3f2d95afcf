//! [`UserPage`]: the first page of a perf mapping (`struct perf_event_mmap_page`), read consistently.
//!
//! The kernel rewrites the counter fields (`index`, `offset`, `time_*`, the capability bits) under a sequence
//! count, `lock`, incremented before and after each update (`perf_event_update_userpage`). A reader loads
//! `lock`, the fields, then `lock` again, and retries if it changed. We load every field with a relaxed atomic
//! and fence with `Acquire` before the second `lock` load: the C++ memory model's seqlock reader, which costs
//! plain loads on x86_64 and is correct even against a writer on another CPU (the kernel's writer runs on
//! the reader's CPU for self-monitoring, where compiler barriers would do).
//!
//! With a snapshot, [`PageSnapshot`] does the arithmetic of the UAPI header: counter-value sign extension, the
//! TSC ⇄ perf-time conversion and the extrapolation of `time_enabled`/`time_running`. [`UserPage::read_self`]
//! reads a counter without a syscall (`rdpmc` on x86_64, the PMU event counter registers on aarch64) when the
//! kernel allows it, and says "not available" otherwise so callers fall back to read(2).
//!
//! # Safety
//!
//! A `UserPage` holds a pointer to a page that must stay mapped and 8-byte aligned for its lifetime
//! ([`UserPage::from_ptr`]); all its fields are accessed through atomics only. The counter-read instruction
//! is executed only when the kernel set `cap_user_rdpmc` and a non-zero `index` in a consistent snapshot:
//! the kernel then enabled user access to the counter (CR4.PCE on x86, PMUSERENR_EL0 on arm64); executing it
//! otherwise would fault.

use std::marker::PhantomData;
use std::mem::offset_of;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU16, AtomicU32, AtomicU64, Ordering};

use perf_sys::perf_event_mmap_page;

use crate::Error;
use crate::ErrorKind;

/// Seqlock attempts before [`ErrorKind::PageUnstable`]. The kernel rewrites the page on context switches and
/// ioctls, not continuously, so a read retries a few times at most; the bound only stops a page whose `lock`
/// stays odd (never seen from a kernel) from spinning forever. About a millisecond of retries.
const MAX_ATTEMPTS: u32 = 100_000;

bitflags::bitflags! {
    /// The capability bits of the mmap page (`perf_event_mmap_page.capabilities`).
    #[doc(alias = "capabilities")]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct Capabilities: u64 {
        /// Old meaning of bit 0, unreliable; ignore (see `BIT0_IS_DEPRECATED`).
        #[doc(alias = "cap_bit0")]
        const BIT0 = 1 << 0;
        /// Set by kernels since 3.12: bit 0 is meaningless and the bits below are valid.
        #[doc(alias = "cap_bit0_is_deprecated")]
        const BIT0_IS_DEPRECATED = 1 << 1;
        /// The counter can be read from user space (`rdpmc`, or `mrs` on arm64) at `index - 1`.
        #[doc(alias = "cap_user_rdpmc")]
        const USER_RDPMC = 1 << 2;
        /// `time_shift`, `time_mult`, `time_offset` convert cycle counts to time deltas.
        #[doc(alias = "cap_user_time")]
        const USER_TIME = 1 << 3;
        /// `time_zero` converts cycle counts to perf timestamps (and back).
        #[doc(alias = "cap_user_time_zero")]
        const USER_TIME_ZERO = 1 << 4;
        /// The cycle counter is narrower than 64 bits: apply `time_cycles`/`time_mask`. Since Linux 5.12.
        #[doc(alias = "cap_user_time_short")]
        const USER_TIME_SHORT = 1 << 5;
    }
}

/// The counter and time fields of the mmap page, read at one instant (seqlock-consistent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageSnapshot {
    /// The sequence count the snapshot was taken under.
    pub lock: u32,
    /// Hardware counter number plus one; 0 when the counter cannot be read from user space.
    pub index: u32,
    /// Add to the hardware counter value to get the event count.
    pub offset: i64,
    /// Time the event was enabled, in ns, at the last page update.
    pub time_enabled: u64,
    /// Time the event was running, in ns, at the last page update.
    pub time_running: u64,
    /// Capability bits.
    pub capabilities: Capabilities,
    /// Width of the hardware counter in bits (for sign extension).
    pub pmc_width: u16,
    /// Cycle → time conversion shift.
    pub time_shift: u16,
    /// Cycle → time conversion multiplier.
    pub time_mult: u32,
    /// Cycle → time conversion offset.
    pub time_offset: u64,
    /// Perf timestamp at cycle count 0 (`cap_user_time_zero`).
    pub time_zero: u64,
    /// Base of a short cycle counter (`cap_user_time_short`).
    pub time_cycles: u64,
    /// Mask of a short cycle counter (`cap_user_time_short`).
    pub time_mask: u64,
}

/// A counter read from user space, without a syscall; see [`UserPage::read_self`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserCount {
    /// The event count (`offset` + hardware counter, sign-extended).
    pub count: u64,
    /// Time enabled in ns (extrapolated to now when the page allows time conversion).
    pub time_enabled: u64,
    /// Time running in ns (extrapolated likewise).
    pub time_running: u64,
}

impl UserCount {
    /// The count scaled for multiplexing: `count * enabled / running` (the raw count when running is 0).
    pub fn scaled(&self) -> u64 {
        if self.time_running == 0 || self.time_running == self.time_enabled {
            return self.count;
        }
        let scaled =
            u128::from(self.count) * u128::from(self.time_enabled) / u128::from(self.time_running);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }
}

impl PageSnapshot {
    /// The hardware counter to read from user space (`index - 1`), when the kernel allows it.
    pub fn user_counter(&self) -> Option<u32> {
        if self.capabilities.contains(Capabilities::USER_RDPMC) && self.index != 0 {
            Some(self.index - 1)
        } else {
            None
        }
    }

    /// Sign-extends a raw hardware counter value of `pmc_width` bits and adds `offset`: the event count.
    pub fn count_from_pmc(&self, pmc: u64) -> u64 {
        let width = u32::from(self.pmc_width);
        let pmc = if (1..64).contains(&width) {
            let shift = 64 - width;
            (((pmc << shift) as i64) >> shift) as u64
        } else {
            pmc
        };
        (self.offset as u64).wrapping_add(pmc)
    }

    /// Applies `cap_user_time_short`: widens a short cycle count relative to `time_cycles`.
    fn widen_cycles(&self, cyc: u64) -> u64 {
        if self.capabilities.contains(Capabilities::USER_TIME_SHORT) {
            self.time_cycles
                .wrapping_add(cyc.wrapping_sub(self.time_cycles) & self.time_mask)
        } else {
            cyc
        }
    }

    /// `(cyc >> shift) * mult + ((cyc & (2^shift - 1)) * mult) >> shift`, wrapping like the kernel's u64.
    fn scale_cycles(&self, cyc: u64) -> u64 {
        let shift = u32::from(self.time_shift).min(63);
        let mult = u64::from(self.time_mult);
        let quot = cyc >> shift;
        let rem = cyc & ((1u64 << shift) - 1);
        quot.wrapping_mul(mult)
            .wrapping_add(rem.wrapping_mul(mult) >> shift)
    }

    /// Nanoseconds since the last page update for cycle count `cyc` (`cap_user_time`), or `None`.
    pub fn time_delta(&self, cyc: u64) -> Option<u64> {
        if !self.capabilities.contains(Capabilities::USER_TIME) {
            return None;
        }
        let cyc = self.widen_cycles(cyc);
        Some(self.time_offset.wrapping_add(self.scale_cycles(cyc)))
    }

    /// `time_enabled` and `time_running` extrapolated to cycle count `cyc` (running only advances while the
    /// counter is on a PMU, `index != 0`); the stored values when `cap_user_time` is off.
    pub fn extrapolate(&self, cyc: u64) -> (u64, u64) {
        match self.time_delta(cyc) {
            Some(delta) => (
                self.time_enabled.wrapping_add(delta),
                if self.index != 0 {
                    self.time_running.wrapping_add(delta)
                } else {
                    self.time_running
                },
            ),
            None => (self.time_enabled, self.time_running),
        }
    }

    /// The perf timestamp (as in samples' `PERF_SAMPLE_TIME`) of cycle count `cyc` (`cap_user_time_zero`).
    pub fn cycles_to_perf_time(&self, cyc: u64) -> Option<u64> {
        if !self.capabilities.contains(Capabilities::USER_TIME_ZERO) {
            return None;
        }
        let cyc = self.widen_cycles(cyc);
        Some(self.time_zero.wrapping_add(self.scale_cycles(cyc)))
    }

    /// The cycle count (TSC on x86) of perf timestamp `time` (`cap_user_time_zero`, `time_mult != 0`).
    pub fn perf_time_to_cycles(&self, time: u64) -> Option<u64> {
        if !self.capabilities.contains(Capabilities::USER_TIME_ZERO) || self.time_mult == 0 {
            return None;
        }
        let shift = u32::from(self.time_shift).min(63);
        let mult = u64::from(self.time_mult);
        let t = time.wrapping_sub(self.time_zero);
        let quot = t / mult;
        let rem = t % mult;
        Some((quot << shift).wrapping_add((rem << shift) / mult))
    }
}

/// The mmap page of a perf event (`struct perf_event_mmap_page`), borrowed from a mapping or a ring.
#[doc(alias = "perf_event_mmap_page")]
#[derive(Clone, Copy, Debug)]
pub struct UserPage<'a> {
    ptr: NonNull<perf_event_mmap_page>,
    _mapping: PhantomData<&'a perf_event_mmap_page>,
}

// SAFETY: a UserPage only performs atomic loads of memory that stays mapped for 'a.
unsafe impl Send for UserPage<'_> {}
// SAFETY: as above: `&UserPage` gives atomic loads only.
unsafe impl Sync for UserPage<'_> {}

macro_rules! load {
    ($self:ident, $atomic:ty, $field:ident) => {{
        let ptr = $self
            .ptr
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(offset_of!(perf_event_mmap_page, $field))
            .cast();
        // SAFETY: the field lies inside the page, which is valid and 8-byte aligned for 'a (contract of
        // `from_ptr`), so the field is aligned for its type; the page is only accessed atomically.
        unsafe { <$atomic>::from_ptr(ptr) }.load(Ordering::Relaxed)
    }};
}

impl<'a> UserPage<'a> {
    /// A view of the mmap page at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points to a `perf_event_mmap_page`, 8-byte aligned, readable for `'a`, whose fields are only
    /// ever accessed atomically (by anyone) during `'a`.
    pub unsafe fn from_ptr(ptr: NonNull<perf_event_mmap_page>) -> Self {
        UserPage {
            ptr,
            _mapping: PhantomData,
        }
    }

    /// `version` of the page layout.
    pub fn version(&self) -> u32 {
        load!(self, AtomicU32, version)
    }

    /// `compat_version`: the lowest version this layout is compatible with.
    pub fn compat_version(&self) -> u32 {
        load!(self, AtomicU32, compat_version)
    }

    /// `data_offset`: where the data area starts in the mapping (0 before Linux 4.1).
    pub fn data_offset(&self) -> u64 {
        load!(self, AtomicU64, data_offset)
    }

    /// `data_size`: the data area's size in bytes (0 before Linux 4.1).
    pub fn data_size(&self) -> u64 {
        load!(self, AtomicU64, data_size)
    }

    /// `aux_offset`: where the AUX area is mapped (written by user space before mapping it).
    pub fn aux_offset(&self) -> u64 {
        load!(self, AtomicU64, aux_offset)
    }

    /// `aux_size`: the AUX area's size (written by user space before mapping it).
    pub fn aux_size(&self) -> u64 {
        load!(self, AtomicU64, aux_size)
    }

    /// `aux_head`: how many bytes the PMU has written to the AUX area in all (free-running), loaded with
    /// Acquire as a ring's head is. Since Linux 4.1.
    pub fn aux_head(&self) -> u64 {
        let head = load!(self, AtomicU64, aux_head);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        head
    }

    /// Reads the counter and time fields consistently (retrying while the kernel updates them).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::PageUnstable`] if the page changed on every one of many attempts.
    pub fn snapshot(&self) -> Result<PageSnapshot, Error> {
        self.consistent(|_| (), |_| ()).map(|(s, ())| s)
    }

    /// Reads the event's count from user space when the kernel allows it (`cap_user_rdpmc` and a non-zero
    /// `index`), extrapolating the times with the cycle counter when `cap_user_time` is set.
    ///
    /// `Ok(None)` means "not available here": software, tracepoint and other non-PMU events, a PMU that does
    /// not allow user reads, no hardware PMU (as in most VMs), or an architecture without support. Use
    /// read(2) then. Counts of group members with `PERF_FORMAT_ID`/`LOST` are not available this way either.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::PageUnstable`] if the page changed on every one of many attempts.
    pub fn read_self(&self) -> Result<Option<UserCount>, Error> {
        let (snap, read) = self.consistent(
            |_| (),
            |snap| {
                let counter = snap.user_counter()?;
                let pmc = arch::read_counter(counter)?;
                let cyc = if snap.capabilities.contains(Capabilities::USER_TIME) {
                    arch::read_cycles()
                } else {
                    None
                };
                Some((pmc, cyc))
            },
        )?;
        Ok(read.map(|(pmc, cyc)| {
            let (time_enabled, time_running) = match cyc {
                Some(cyc) => snap.extrapolate(cyc),
                None => (snap.time_enabled, snap.time_running),
            };
            UserCount {
                count: snap.count_from_pmc(pmc),
                time_enabled,
                time_running,
            }
        }))
    }

    /// The seqlock loop. `hook` runs after the first `lock` load (tests use it to play a concurrent writer);
    /// `inside` runs inside the critical section with the fields read so far.
    fn consistent<T>(
        &self,
        mut hook: impl FnMut(u32),
        mut inside: impl FnMut(&PageSnapshot) -> T,
    ) -> Result<(PageSnapshot, T), Error> {
        let lock_ptr = self
            .ptr
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(offset_of!(perf_event_mmap_page, lock))
            .cast();
        // SAFETY: as in `load!`: an aligned field of the valid page, accessed atomically only.
        let lock = unsafe { AtomicU32::from_ptr(lock_ptr) };
        for attempt in 0..MAX_ATTEMPTS {
            let seq = lock.load(Ordering::Acquire);
            hook(attempt);
            if seq % 2 == 1 {
                // A writer is between its two increments.
                std::hint::spin_loop();
                continue;
            }
            let capabilities = load!(self, AtomicU64, __bindgen_anon_1);
            let snap = PageSnapshot {
                lock: seq,
                index: load!(self, AtomicU32, index),
                offset: load!(self, AtomicU64, offset) as i64,
                time_enabled: load!(self, AtomicU64, time_enabled),
                time_running: load!(self, AtomicU64, time_running),
                capabilities: Capabilities::from_bits_retain(capabilities),
                pmc_width: load!(self, AtomicU16, pmc_width),
                time_shift: load!(self, AtomicU16, time_shift),
                time_mult: load!(self, AtomicU32, time_mult),
                time_offset: load!(self, AtomicU64, time_offset),
                time_zero: load!(self, AtomicU64, time_zero),
                time_cycles: load!(self, AtomicU64, time_cycles),
                time_mask: load!(self, AtomicU64, time_mask),
            };
            let value = inside(&snap);
            fence(Ordering::Acquire);
            if lock.load(Ordering::Relaxed) == seq {
                return Ok((snap, value));
            }
            std::hint::spin_loop();
        }
        Err(ErrorKind::PageUnstable {
            attempts: MAX_ATTEMPTS,
        }
        .into())
    }

    #[cfg(test)]
    pub(crate) fn snapshot_with_hook(&self, hook: impl FnMut(u32)) -> Result<PageSnapshot, Error> {
        self.consistent(hook, |_| ()).map(|(s, ())| s)
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod arch {
    /// `rdpmc` of hardware counter `counter` (the page's `index - 1`).
    ///
    /// Only called with a counter the kernel advertised (`cap_user_rdpmc`, `index != 0`) in a consistent
    /// page snapshot: the kernel has then set CR4.PCE for this task, so the instruction does not fault.
    pub(super) fn read_counter(counter: u32) -> Option<u64> {
        let (lo, hi): (u32, u32);
        // SAFETY: see above; `rdpmc` reads ECX and writes EDX:EAX only, touches no memory or stack.
        unsafe {
            std::arch::asm!("rdpmc", in("ecx") counter, out("eax") lo, out("edx") hi,
                options(nomem, nostack, preserves_flags));
        }
        Some(u64::from(hi) << 32 | u64::from(lo))
    }

    /// The time-stamp counter.
    pub(super) fn read_cycles() -> Option<u64> {
        // SAFETY: `rdtsc` is available on every x86_64 CPU and has no memory effects.
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
}

#[cfg(all(target_arch = "aarch64", not(miri)))]
mod arch {
    /// `mrs` of `PMEVCNTR<n>_EL0` for each listed `n`: the event counters are read directly, not through
    /// the `PMSELR_EL0` selector, whose value the kernel (an interrupt's counter access on older kernels,
    /// a context switch) may change between the select and the read with nothing in the page telling.
    macro_rules! read_evcntr {
        ($counter:expr; $($n:literal)*) => {
            match $counter {
                $($n => {
                    let value: u64;
                    // SAFETY: see `read_counter`; reading a system register has no memory effects.
                    unsafe {
                        std::arch::asm!(concat!("mrs {v}, pmevcntr", stringify!($n), "_el0"),
                            v = out(reg) value, options(nomem, nostack, preserves_flags));
                    }
                    Some(value)
                })*
                _ => None,
            }
        };
    }

    /// Reads PMU counter `counter` (the page's `index - 1`): 31 is the cycle counter `PMCCNTR_EL0` (the
    /// kernel's index 32), `n` below 31 is the event counter `PMEVCNTR<n>_EL0` (index `n + 1`).
    ///
    /// Only called with a counter the kernel advertised (`cap_user_rdpmc`, `index != 0`) in a consistent page
    /// snapshot: the kernel has then enabled EL0 reads of the counters (PMUSERENR_EL0.ER and .CR, for tasks
    /// with a user-access event when `kernel.perf_user_access` is 1, Linux 6.1+), so the instructions do
    /// not trap.
    pub(super) fn read_counter(counter: u32) -> Option<u64> {
        if counter == 31 {
            let value: u64;
            // SAFETY: see above; reading a system register has no memory effects.
            unsafe {
                std::arch::asm!("mrs {v}, pmccntr_el0", v = out(reg) value,
                    options(nomem, nostack, preserves_flags));
            }
            return Some(value);
        }
        read_evcntr!(counter; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30)
    }

    /// The virtual counter `CNTVCT_EL0` (the arch timer the kernel's time fields are based on).
    pub(super) fn read_cycles() -> Option<u64> {
        let value: u64;
        // SAFETY: CNTVCT_EL0 is readable at EL0 on Linux; `isb` orders the read after earlier instructions.
        unsafe {
            std::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) value,
                options(nomem, nostack, preserves_flags));
        }
        Some(value)
    }
}

#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
mod arch {
    /// No user-space counter read on this target.
    pub(super) fn read_counter(_counter: u32) -> Option<u64> {
        None
    }

    /// No cycle counter read on this target.
    pub(super) fn read_cycles() -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Sim, SimConfig};

    fn page_of(sim: &Sim) -> UserPage<'_> {
        sim.ring.page()
    }

    #[test]
    fn a_writer_changing_lock_makes_the_reader_retry() {
        let sim = Sim::new(SimConfig::new(64)).unwrap();
        sim.kernel.update_page(|p| {
            p.index = 3;
            p.offset = -5;
            p.time_enabled = 100;
        });
        let mut attempts = 0;
        let snap = page_of(&sim)
            .snapshot_with_hook(|attempt| {
                attempts = attempt + 1;
                match attempt {
                    // A whole update lands between the reader's two lock loads.
                    0 => sim.kernel.update_page(|p| {
                        p.index = 4;
                        p.time_enabled = 200;
                    }),
                    // The reader meets a writer half-way (odd lock), then the writer finishes.
                    1 => sim.kernel.bump_page_lock(),
                    2 => sim.kernel.bump_page_lock(),
                    _ => {}
                }
            })
            .unwrap();
        assert_eq!(attempts, 4);
        assert_eq!((snap.index, snap.offset, snap.time_enabled), (4, -5, 200));
        assert_eq!(snap.lock, 6);
        assert_eq!(
            snap.capabilities,
            Capabilities::BIT0_IS_DEPRECATED,
            "as 6.x kernels without PMU"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "100 000 seqlock rounds take too long under Miri")]
    fn a_page_that_never_settles_is_an_error() {
        let sim = Sim::new(SimConfig::new(64)).unwrap();
        let r = page_of(&sim).snapshot_with_hook(|_| sim.kernel.update_page(|_| ()));
        assert!(matches!(
            r.map_err(Error::into_kind),
            Err(ErrorKind::PageUnstable { .. })
        ));
    }

    #[test]
    fn snapshots_are_consistent_against_a_writer_thread() {
        let Sim { kernel, ring, .. } = Sim::new(SimConfig::new(64)).unwrap();
        let n: u64 = if cfg!(miri) { 50 } else { 20_000 };
        let writer = std::thread::spawn(move || {
            for i in 1..=n {
                kernel.update_page(|p| {
                    p.time_enabled = i;
                    p.time_running = 2 * i;
                    p.offset = -(i as i64);
                    p.time_zero = i * 3;
                });
                // The kernel updates the page on context switches and ioctls, not back to back.
                std::thread::yield_now();
            }
        });
        let mut last = 0;
        while last < n {
            let s = ring.page().snapshot().unwrap();
            assert_eq!(s.time_running, 2 * s.time_enabled, "torn read: {s:?}");
            assert_eq!(s.offset, -(s.time_enabled as i64));
            assert_eq!(s.time_zero, 3 * s.time_enabled);
            assert!(s.time_enabled >= last);
            last = s.time_enabled;
            std::hint::spin_loop();
        }
        writer.join().unwrap();
    }

    #[test]
    fn user_reads_are_not_available_without_the_cap_or_an_index() {
        let sim = Sim::new(SimConfig::new(64)).unwrap();
        let page = page_of(&sim);
        assert_eq!(page.read_self().unwrap(), None);
        sim.kernel.update_page(|p| p.index = 1); // index without the cap
        assert_eq!(page.read_self().unwrap(), None);
        sim.kernel.update_page(|p| {
            p.index = 0;
            p.capabilities |= Capabilities::USER_RDPMC; // cap without an index
        });
        assert_eq!(page.read_self().unwrap(), None);
        let s = page.snapshot().unwrap();
        assert_eq!(s.user_counter(), None);
        sim.kernel.update_page(|p| p.index = 5);
        assert_eq!(page.snapshot().unwrap().user_counter(), Some(4));
        assert_eq!(page.data_offset(), 4096);
        assert_eq!(page.data_size(), 64);
    }

    #[test]
    fn counter_values_are_sign_extended_to_pmc_width() {
        let s = PageSnapshot {
            pmc_width: 48,
            offset: 1000,
            ..Default::default()
        };
        // A 48-bit counter that went "negative" (the kernel programs -period).
        let raw = (1u64 << 48) - 10;
        assert_eq!(s.count_from_pmc(raw), 990);
        assert_eq!(s.count_from_pmc(10), 1010);
        // Garbage above the width is ignored.
        assert_eq!(s.count_from_pmc(0xffff_0000_0000_0000 | 10), 1010);
        let wide = PageSnapshot {
            pmc_width: 64,
            offset: -1,
            ..Default::default()
        };
        assert_eq!(wide.count_from_pmc(1), 0);
    }

    /// TSC at 3 GHz: 1 cycle = 1/3 ns; mult/shift as the kernel picks them (mult = 2^shift / 3).
    fn tsc_page() -> PageSnapshot {
        PageSnapshot {
            capabilities: Capabilities::USER_TIME | Capabilities::USER_TIME_ZERO,
            time_shift: 31,
            time_mult: ((1u64 << 31) / 3) as u32,
            time_offset: 1_000,
            time_zero: 5_000_000,
            time_enabled: 10_000,
            time_running: 4_000,
            index: 2,
            ..Default::default()
        }
    }

    #[test]
    fn cycles_convert_to_time_as_the_uapi_says() {
        let s = tsc_page();
        let cyc = 3_000_000_000u64; // one second of TSC
        let delta = s.time_delta(cyc).unwrap();
        assert!((delta as i64 - 1_000_001_000).abs() <= 1, "{delta}");
        let (enabled, running) = s.extrapolate(cyc);
        assert_eq!(enabled, 10_000 + delta);
        assert_eq!(running, 4_000 + delta);
        let t = s.cycles_to_perf_time(cyc).unwrap();
        assert!((t as i64 - 1_005_000_000).abs() <= 1, "{t}");
        // And back, to within one cycle of rounding.
        let back = s.perf_time_to_cycles(t).unwrap();
        assert!((back as i64 - cyc as i64).abs() <= 3, "{back}");
        // Without the caps: nothing to convert, times as stored.
        let off = PageSnapshot {
            capabilities: Capabilities::empty(),
            ..s
        };
        assert_eq!(off.time_delta(cyc), None);
        assert_eq!(off.cycles_to_perf_time(cyc), None);
        assert_eq!(off.perf_time_to_cycles(t), None);
        assert_eq!(off.extrapolate(cyc), (10_000, 4_000));
        // A counter not on the PMU (index 0) does not run.
        let idle = PageSnapshot { index: 0, ..s };
        assert_eq!(idle.extrapolate(cyc).1, 4_000);
    }

    #[test]
    fn short_cycle_counters_are_widened() {
        let mut s = tsc_page();
        s.capabilities |= Capabilities::USER_TIME_SHORT;
        s.time_cycles = 0x00ff_ffff_ff00; // near the top of a 40-bit counter
        s.time_mask = (1 << 40) - 1;
        // The counter wrapped: raw 0x100 is really 0x1_0000_0000_0100 relative to time_cycles' epoch.
        let widened_delta = s.time_delta(0x100).unwrap();
        let plain = PageSnapshot {
            capabilities: Capabilities::USER_TIME,
            ..s
        };
        assert_eq!(widened_delta, plain.time_delta(0x0100_0000_0100).unwrap());
    }

    #[test]
    fn scaling_for_multiplexing() {
        let c = UserCount {
            count: 1_000,
            time_enabled: 300,
            time_running: 100,
        };
        assert_eq!(c.scaled(), 3_000);
        let never = UserCount {
            time_running: 0,
            ..c
        };
        assert_eq!(never.scaled(), 1_000);
        let huge = UserCount {
            count: u64::MAX,
            time_enabled: u64::MAX,
            time_running: 1,
        };
        assert_eq!(huge.scaled(), u64::MAX);
    }
}
