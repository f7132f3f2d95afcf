//! [`SelfReadCounter`]: a counter of the calling thread read without a system call when the CPU and the
//! kernel allow it (`rdpmc` on x86_64, the PMU counter registers on aarch64), and with `read(2)` otherwise.
//!
//! The kernel publishes, in the first page of the counter's mapping, which hardware counter holds the
//! event (`index`) and what to add to it (`offset`); perf-core's [`UserPage::read_self`] reads both and
//! the register under the page's sequence lock. That is only meaningful for the thread the counter counts
//! (the register belongs to the CPU it runs on), so a `SelfReadCounter` counts the thread that opened it
//! and cannot be sent to another thread.
//!
//! On aarch64 the event must ask for user access when it is opened: [`SelfReadCounter::new`] sets the
//! PMU's `rdpmc` format bit (`config1:1`), and the kernel grants it while the sysctl
//! `kernel.perf_user_access` is on. Since Linux 6.1 on arm64: the arm64 kernel matrix reads from user
//! space on 6.1, 6.12 and the newest, and falls back to `read(2)` on 5.10. On x86_64 nothing is needed at open: `rdpmc` is allowed
//! for tasks that map a counter's page while `/sys/bus/event_source/devices/cpu/rdpmc` is 1 (the
//! default); the matrix's x86 guests have no PMU, so that path is not proven there.
//!
//! [`UserPage::read_self`]: perf_core::UserPage::read_self

use std::borrow::Borrow;
use std::fs;
use std::marker::PhantomData;
use std::ops::Deref;

use perf_core::{Capabilities, MappedPage};
use perf_sys as sys;

use super::{Counter, Stat};
use crate::config::{Opts, Target};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::sys::{is_cpu_pmu, pmu_name, pmus, PMU_DIR};
use crate::version::KernelVersion;

const ENA: u64 = sys::PERF_FORMAT_TOTAL_TIME_ENABLED as u64;
const RUN: u64 = sys::PERF_FORMAT_TOTAL_TIME_RUNNING as u64;
/// Read formats a user-space read can serve: the count and the two times.
const SELF_READABLE: u64 = ENA | RUN;

/// How [`SelfReadCounter::stat`] reads the counter now.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadPath {
    /// From user space: the hardware counter `counter` (the page's `index - 1`; on aarch64 31 is
    /// `PMCCNTR_EL0`, `n` is `PMEVCNTR<n>_EL0`), `pmc_width` bits wide.
    UserSpace {
        /// The hardware counter number.
        counter: u32,
        /// Its width in bits (the value is sign-extended from it).
        pmc_width: u16,
    },
    /// With `read(2)`, and why.
    Syscall {
        /// Why no user-space read is possible now, and what would allow one where something can.
        reason: String,
    },
}

/// A counter of the calling thread that reads itself from user space when it can (no system call:
/// `rdpmc` on x86_64, `mrs` of the PMU counter register on aarch64) and with `read(2)` when it cannot.
///
/// It derefs to its [`Counter`] (enable, disable, reset, ...); its own [`stat`](Self::stat) is the
/// self-reading one. It is neither `Send` nor `Sync`: the hardware register read is only the counter's
/// value on the thread it counts. Its counter's one mapping is the page, so it has no
/// [`Sampler`](crate::sample::Sampler) (the kernel refuses a second mapping of another size).
///
/// ```no_run
/// use perf_event::config::{Cpu, Opts, Proc};
/// use perf_event::count::{ReadPath, SelfReadCounter};
/// use perf_event::event::hw::Hardware;
///
/// let mut opts = Opts::default();
/// opts.exclude.kernel = true;
/// let counter = SelfReadCounter::new(Hardware::Instr, (Proc::CURRENT, Cpu::ALL), &opts)?;
/// counter.enable()?;
/// let x: u64 = (0..1000u64).sum();
/// let n = counter.stat()?.count; // no syscall when `read_path` says UserSpace
/// if let ReadPath::Syscall { reason } = counter.read_path()? {
///     println!("read(2) only: {reason}");
/// }
/// println!("{x}: {n} instructions");
/// # Ok::<(), perf_event::Error>(())
/// ```
#[doc(alias = "rdpmc")]
#[doc(alias = "cap_user_rdpmc")]
#[doc(alias = "perf_user_access")]
#[derive(Debug)]
pub struct SelfReadCounter {
    counter: Counter,
    /// The counter's first page, when a user-space read can ever work for it.
    page: Option<MappedPage>,
    /// Why it never can (not this thread's counter, a read format it cannot serve, ...), or what the
    /// open found out (the PMU refused user access).
    fixed_reason: Option<String>,
    /// Pinned to the opening thread: the register read is per CPU, meaningful for the counted thread.
    _not_send: PhantomData<*const ()>,
}

impl SelfReadCounter {
    /// Opens `event` on `target` with `opts` (as [`Counter::new`]), asking the PMU for user-space reads
    /// where that takes an attr bit (aarch64: the PMU's `rdpmc` format term, Linux 6.1), and maps its
    /// page. When the kernel refuses user access (the PMU cannot give it for this event), the counter
    /// is opened without it and reads with `read(2)`.
    ///
    /// User-space reads need the calling thread as the target (`Proc::CURRENT`), no `inherit`, and a
    /// read format of at most `time_enabled` and `time_running`; otherwise every read is a `read(2)`.
    ///
    /// # Errors
    ///
    /// As [`Counter::new`].
    pub fn new<E>(event: E, target: impl Into<Target>, opts: impl Borrow<Opts>) -> Result<Self>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        let event: Event = event.try_into()?;
        let target = target.into();
        let opts = opts.borrow();
        let bit = user_access_bit(&event);
        let Some((field, mask)) = bit else {
            return Self::from_counter(Counter::new::<Event>(event, target, opts)?);
        };
        let with_bit = Counter::new_with::<Event>(event.clone(), target.clone(), opts, |a| {
            set_config_bits(a, field, mask);
        });
        match with_bit {
            Ok(c) => Self::from_counter(c),
            // The PMU cannot give this event user access (e.g. a 64-bit user counter on a PMU without
            // long event counters, or a CPU-wide event): count without it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) => {
                let counter = Counter::new::<Event>(event, target, opts)?;
                let mut me = Self::from_counter(counter)?;
                me.fixed_reason.get_or_insert(format!(
                    "the PMU refused user-space access for this event ({e}); it is counted without it"
                ));
                Ok(me)
            }
            Err(e) => Err(e),
        }
    }

    /// Makes an open counter self-reading: maps its page. On aarch64 a counter opened without the PMU's
    /// user-access bit ([`new`](Self::new) sets it) always reads with `read(2)`.
    ///
    /// # Errors
    ///
    /// None today: a page that cannot be mapped (a redirected counter, the locked-memory budget) only
    /// means `read(2)`, and [`read_path`](Self::read_path) says why.
    pub fn from_counter(counter: Counter) -> Result<Self> {
        let fixed_reason = never_reason(&counter);
        let (page, fixed_reason) = match fixed_reason {
            Some(r) => (None, Some(r)),
            None => match MappedPage::map(counter.fd()) {
                Ok(p) => (Some(p), None),
                Err(e) => (
                    None,
                    Some(format!("the counter's page cannot be mapped: {e}")),
                ),
            },
        };
        Ok(Self {
            counter,
            page,
            fixed_reason,
            _not_send: PhantomData,
        })
    }

    /// Reads the counter: from user space when [`read_path`](Self::read_path) is `UserSpace` (the
    /// counter is on the PMU and the kernel allows it), else with [`Counter::stat`]. The times are
    /// extrapolated to now from the page when the kernel publishes a clock (`cap_user_time`), else those
    /// of its last update.
    ///
    /// # Errors
    ///
    /// As [`Counter::stat`] when it falls back to `read(2)`.
    #[inline]
    pub fn stat(&self) -> Result<Stat> {
        if let Some(page) = &self.page {
            if let Ok(Some(u)) = page.page().read_self() {
                let rf = self.counter.attr.read_format;
                return Ok(Stat {
                    count: u.count,
                    time_enabled: (rf & ENA != 0).then_some(u.time_enabled),
                    time_running: (rf & RUN != 0).then_some(u.time_running),
                    ..Stat::default()
                });
            }
        }
        self.counter.stat()
    }

    /// How [`stat`](Self::stat) reads the counter now: `UserSpace` while the counter is on the PMU and
    /// the kernel lets this thread read it, else `Syscall` with the reason (a disabled or multiplexed-out
    /// counter, `kernel.perf_user_access` 0, a kernel or PMU without user reads, ...).
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] if the page kept changing while it was read.
    pub fn read_path(&self) -> Result<ReadPath> {
        let Some(page) = &self.page else {
            return Ok(ReadPath::Syscall {
                reason: self.fixed_reason.clone().unwrap_or_default(),
            });
        };
        let snap = page.page().snapshot()?;
        if let Some(counter) = snap.user_counter() {
            return Ok(ReadPath::UserSpace {
                counter,
                pmc_width: snap.pmc_width,
            });
        }
        let reason = match &self.fixed_reason {
            Some(r) => r.clone(),
            None if !snap.capabilities.contains(Capabilities::USER_RDPMC) => {
                no_cap_reason(&self.counter)
            }
            None => no_index_reason(),
        };
        Ok(ReadPath::Syscall { reason })
    }

    /// The counter.
    pub fn counter(&self) -> &Counter {
        &self.counter
    }

    /// The counter, without its page.
    pub fn into_counter(self) -> Counter {
        self.counter
    }
}

impl Deref for SelfReadCounter {
    type Target = Counter;

    fn deref(&self) -> &Counter {
        &self.counter
    }
}

/// Why `counter` can never be read from user space, or `None` when it may be.
fn never_reason(counter: &Counter) -> Option<String> {
    let a = &counter.attr;
    let me = rustix::thread::gettid().as_raw_nonzero().get();
    match counter.target.pid() {
        Some(0) => {}
        Some(pid) if pid == me => {}
        _ => {
            return Some(
                "user-space reads are for the calling thread's own counter (Proc::CURRENT); this \
                 one counts another task, a CPU or a cgroup"
                    .into(),
            )
        }
    }
    if a.inherit() != 0 {
        return Some(
            "an inherited counter's value includes its children's, which only read(2) sums".into(),
        );
    }
    if a.read_format & !SELF_READABLE != 0 {
        return Some(
            "the read format asks for more than the count and times (group, id or lost records), \
             which only read(2) returns"
                .into(),
        );
    }
    if !is_on_cpu_pmu(a.type_) {
        return Some(format!(
            "{} is not a hardware CPU PMU event: only those live in a counter register",
            counter.event.name()
        ));
    }
    None
}

/// Whether events of PMU type `ty` are counted by a CPU PMU's registers.
pub(super) fn is_on_cpu_pmu(ty: u32) -> bool {
    matches!(
        ty,
        sys::PERF_TYPE_HARDWARE | sys::PERF_TYPE_HW_CACHE | sys::PERF_TYPE_RAW
    ) || pmu_name(ty).is_some_and(|n| is_cpu_pmu(&n))
}

/// The CPU PMU that counts `event` (for its sysfs files).
fn cpu_pmu_of(event: &Event) -> Option<String> {
    cpu_pmu_name(event.ty())
}

/// The CPU PMU that counts events of type `ty`: its own for a dynamic PMU type, else the first CPU PMU
/// in sysfs (where the generic hardware types go).
pub(super) fn cpu_pmu_name(ty: u32) -> Option<String> {
    if let Some(n) = pmu_name(ty).filter(|n| is_cpu_pmu(n)) {
        return Some(n);
    }
    if !is_on_cpu_pmu(ty) {
        return None;
    }
    pmus().into_iter().map(|(n, _)| n).find(|n| is_cpu_pmu(n))
}

/// The attr bit that asks `event`'s PMU for user access: `(config field, mask)` from the PMU's `rdpmc`
/// format term (`config1:1` on arm64 since Linux 6.1), `None` where no bit is needed (x86) or the PMU
/// has none (arm64 before 6.1).
fn user_access_bit(event: &Event) -> Option<(u8, u64)> {
    let pmu = cpu_pmu_of(event)?;
    let term = fs::read_to_string(format!("{PMU_DIR}/{pmu}/format/rdpmc")).ok()?;
    parse_format_bits(term.trim())
}

/// Parses a sysfs format term `configN:A` or `configN:A-B` into `(N, mask)` (N 0 for `config`).
fn parse_format_bits(term: &str) -> Option<(u8, u64)> {
    let (field, bits) = term.split_once(':')?;
    let n: u8 = match field.strip_prefix("config")? {
        "" => 0,
        d => d.parse().ok()?,
    };
    let (lo, hi): (u32, u32) = match bits.split_once('-') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => {
            let a = bits.parse().ok()?;
            (a, a)
        }
    };
    if hi < lo || hi > 63 {
        return None;
    }
    let width = hi - lo + 1;
    let mask = if width == 64 {
        u64::MAX
    } else {
        ((1u64 << width) - 1) << lo
    };
    Some((n, mask))
}

/// Sets `mask` in config field `field` of `a` (`config`, `config1`, ...).
fn set_config_bits(a: &mut sys::perf_event_attr, field: u8, mask: u64) {
    match field {
        0 => a.config |= mask,
        1 => {
            let v = a.config1();
            a.__bindgen_anon_3.config1 = v | mask;
        }
        2 => {
            let v = a.config2();
            a.__bindgen_anon_4.config2 = v | mask;
        }
        3 => a.config3 |= mask,
        _ => a.config4 |= mask,
    }
}

/// Why the kernel offers no user-space read at all for `counter` (`cap_user_rdpmc` is 0).
fn no_cap_reason(counter: &Counter) -> String {
    let pmu = cpu_pmu_of(&counter.event);
    let running = KernelVersion::running();
    let kernel = running
        .as_ref()
        .map_or_else(|| "unknown".to_owned(), |(_, r)| r.clone());
    if cfg!(target_arch = "aarch64") {
        let has_term = pmu
            .as_ref()
            .is_some_and(|p| fs::metadata(format!("{PMU_DIR}/{p}/format/rdpmc")).is_ok());
        if !has_term || read_sysctl("perf_user_access").is_none() {
            return format!(
                "this kernel ({kernel}) offers no user-space counter reads on arm64: Linux 6.1 added \
                 them (kernel.perf_user_access and the PMU's `rdpmc` format term)"
            );
        }
        return "the kernel does not let this counter be read from user space (cap_user_rdpmc is \
                0): open it with SelfReadCounter::new, which asks the PMU for user access"
            .into();
    }
    if let Some(p) = &pmu {
        if let Ok(v) = fs::read_to_string(format!("{PMU_DIR}/{p}/rdpmc")) {
            if v.trim() == "0" {
                return format!(
                    "rdpmc is disabled: {PMU_DIR}/{p}/rdpmc is 0 (write 1 to allow it for tasks that \
                     map a counter)"
                );
            }
        }
    }
    format!(
        "the kernel ({kernel}) does not let this counter be read from user space (cap_user_rdpmc \
         is 0)"
    )
}

/// Why a counter the kernel may let us read has no register now (`index` is 0).
fn no_index_reason() -> String {
    if cfg!(target_arch = "aarch64") && read_sysctl("perf_user_access").as_deref() == Some("0") {
        return "kernel.perf_user_access is 0: `sysctl kernel.perf_user_access=1` allows user-space \
                counter reads"
            .into();
    }
    "the counter is not on the PMU now (disabled, not yet scheduled, or multiplexed out)".into()
}

/// `/proc/sys/kernel/<name>`, trimmed, when it exists.
fn read_sysctl(name: &str) -> Option<String> {
    fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_terms() {
        assert_eq!(parse_format_bits("config1:1"), Some((1, 0b10)));
        assert_eq!(parse_format_bits("config:0-7"), Some((0, 0xff)));
        assert_eq!(parse_format_bits("config2:0-63"), Some((2, u64::MAX)));
        assert_eq!(parse_format_bits("config1:8-3"), None);
        assert_eq!(parse_format_bits("event:1"), None);
        let mut a = sys::perf_event_attr::default();
        set_config_bits(&mut a, 1, 0b10);
        set_config_bits(&mut a, 1, 0b1);
        assert_eq!(a.config1(), 0b11);
    }
}
