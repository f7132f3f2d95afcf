//! Counting: [`Counter`], [`CounterGroup`], per-CPU sets ([`PerCpu`]) and their [`Stat`]s; a counter of
//! the calling thread read from user space without a syscall ([`SelfReadCounter`]).
//!
//! ```no_run
//! use perf_event::config::{Cpu, Opts, Proc};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true;
//! let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! counter.enable()?;
//! let v: Vec<u8> = vec![1; 1 << 20];
//! counter.disable()?;
//! println!("{} page faults for {} bytes", counter.stat()?.count, v.len());
//! # Ok::<(), perf_event::Error>(())
//! ```

pub mod group;
mod group_fit;
mod merged;
mod per_cpu;
mod self_read;
mod stat;

pub use group::CounterGroup;
pub(crate) use merged::where_copies_count;
pub use merged::{MergedCounter, MergedStat};
pub use per_cpu::PerCpu;
pub use self_read::{ReadPath, SelfReadCounter};
pub use stat::{GroupStat, Scaled, SiblingStat, Stat};

use std::borrow::Borrow;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use perf_core::PerfFd;
use perf_sys as sys;
use sys::perf_event_attr;

use crate::config::{attr, Opts, Target};
use crate::diagnose::{check_fixed_rules, diagnose_open_on, out_of_range, OpenRequest};
use crate::error::{Error, Result};
use crate::event::Event;

const GROUP: u64 = sys::PERF_FORMAT_GROUP as u64;

pub(crate) use stat::SINGLE_MAX;

/// An open perf event: counts while enabled, read with [`stat`](Self::stat).
///
/// Opened with `O_CLOEXEC`. Closing (dropping) it stops counting.
pub struct Counter {
    /// The event's fd, typed so that perf-core maps it (one consumer per ring, also across `fork()`).
    file: PerfFd,
    attr: perf_event_attr,
    /// Kept for the strings `attr` points to (probe names and paths).
    event: Event,
    target: Target,
    read_size: usize,
    /// Whether a [`Sampler`](crate::sample::Sampler) maps this counter's ring (one consumer), and the
    /// counted pause shared with it.
    pub(crate) output: std::sync::Arc<crate::sample::Output>,
    /// Set while `PERF_EVENT_IOC_SET_OUTPUT` sends this counter's records into another ring: its own
    /// mapping would be a second consumer of that ring (kernels before 6.16 or so allow it).
    pub(crate) redirected: std::sync::atomic::AtomicBool,
}

impl Counter {
    /// Opens `event` on `target` with `opts` (by value or by reference).
    ///
    /// `target` is `(Proc, Cpu)` in any combination with `Proc::ALL`/`Cpu::ALL`, or
    /// `(Cgroup, Cpu)`. By default the counter starts disabled: call [`enable`](Self::enable).
    ///
    /// # Errors
    ///
    /// The open's errno, diagnosed: [`Error::Permission`] (with `perf_event_paranoid` and what would
    /// work), [`Error::NotSupported`] (missing PMU or event), [`Error::KernelTooOld`],
    /// [`Error::TooManyFiles`], [`Error::NoSuchProcess`], [`Error::BadCpu`], ... and the event's own
    /// conversion error (e.g. an unknown event name). Before the open: [`Error::TargetOutOfRange`]
    /// for a pid or CPU above `i32::MAX`, [`Error::InvalidOption`] for an option no kernel takes
    /// (a user stack size that is not a multiple of 8 or not below 65535, a period of 2^63 or
    /// more).
    pub fn new<E>(event: E, target: impl Into<Target>, opts: impl Borrow<Opts>) -> Result<Self>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        Self::new_with(event, target, opts, |_| {})
    }

    /// Like [`new`](Self::new), but `edit` may change the raw `perf_event_attr` before the open:
    /// the escape hatch for anything [`Opts`] does not model.
    ///
    /// ```no_run
    /// use perf_event::config::{Cpu, Opts, Proc};
    /// use perf_event::count::Counter;
    /// use perf_event::event::sw::Software;
    ///
    /// let c = Counter::new_with(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), Opts::default(), |attr| {
    ///     attr.set_exclude_kernel(1);
    /// })?;
    /// # Ok::<(), perf_event::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn new_with<E>(
        event: E,
        target: impl Into<Target>,
        opts: impl Borrow<Opts>,
        edit: impl FnOnce(&mut perf_event_attr),
    ) -> Result<Self>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        let event = event.try_into()?;
        let opts = opts.borrow();
        let mut a = attr::build(&event, opts);
        let default_lost = attr::add_default_lost(&mut a, opts, format_lost_refused());
        edit(&mut a);
        // The edit may have cleared it: then there is no default left to drop.
        let default_lost = default_lost && a.read_format & FORMAT_LOST != 0;
        Self::open(event, a, target.into(), None, default_lost)
    }

    /// Opens `attr` on `target`. With `default_lost`, `PERF_FORMAT_LOST` in its read format is
    /// our default rather than the user's request: if the kernel refuses the attr with `EINVAL`,
    /// it is opened again without it, and the error of that open (the user's own attr) is the one
    /// reported.
    pub(crate) fn open(
        event: Event,
        attr: perf_event_attr,
        target: Target,
        group: Option<BorrowedFd<'_>>,
        default_lost: bool,
    ) -> Result<Self> {
        if let Some(bad) = target.out_of_range {
            return Err(out_of_range(bad, &target));
        }
        check_fixed_rules(event.name(), &attr)?;
        let pid = target.pid_arg().map_err(|errno| {
            Error::io(
                "duplicating the cgroup fd",
                io::Error::from_raw_os_error(errno),
            )
        })?;
        let flags = target.flags | u64::from(sys::PERF_FLAG_FD_CLOEXEC);
        // On E2BIG the kernel writes the size of its own attr back into the copy it was given.
        let mut kernel_attr_size = None;
        let (fd, attr) =
            open_dropping_default_lost(attr, default_lost, &FORMAT_LOST_REFUSED, |a| {
                let mut sent = *a;
                let r = PerfFd::open(&mut sent, pid, target.cpu, group, flags);
                kernel_attr_size = (sent.size != a.size).then_some(sent.size);
                r
            });
        let fd = fd.map_err(|e| {
            diagnose_open_on(
                e,
                &OpenRequest {
                    event: event.name(),
                    attr: &attr,
                    pid: target.pid,
                    cpu: target.cpu,
                    cgroup: target.is_cgroup(),
                    kernel_attr_size,
                },
                &target,
            )
        })?;
        let read_size = stat::Stat::read_size(attr.read_format, 1);
        Ok(Self {
            file: fd,
            attr,
            event,
            target,
            read_size,
            output: Default::default(),
            redirected: Default::default(),
        })
    }

    /// Enables every counter of the calling process (`prctl(PR_TASK_PERF_EVENTS_ENABLE)`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the prctl fails.
    #[doc(alias = "PR_TASK_PERF_EVENTS_ENABLE")]
    pub fn enable_all() -> Result<()> {
        sys::task_perf_events(true).map_err(|e| Error::io("PR_TASK_PERF_EVENTS_ENABLE", e))
    }

    /// Disables every counter of the calling process (`prctl(PR_TASK_PERF_EVENTS_DISABLE)`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the prctl fails.
    #[doc(alias = "PR_TASK_PERF_EVENTS_DISABLE")]
    pub fn disable_all() -> Result<()> {
        sys::task_perf_events(false).map_err(|e| Error::io("PR_TASK_PERF_EVENTS_DISABLE", e))
    }

    /// Starts counting (`PERF_EVENT_IOC_ENABLE`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_ENABLE")]
    pub fn enable(&self) -> Result<()> {
        sys::ioctl::enable(self.fd()).map_err(|e| self.ioctl_error("PERF_EVENT_IOC_ENABLE", e))
    }

    /// Stops counting (`PERF_EVENT_IOC_DISABLE`); the count is kept.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_DISABLE")]
    pub fn disable(&self) -> Result<()> {
        sys::ioctl::disable(self.fd()).map_err(|e| self.ioctl_error("PERF_EVENT_IOC_DISABLE", e))
    }

    /// Sets the count to zero (`PERF_EVENT_IOC_RESET`); times enabled and running go on.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_RESET")]
    pub fn reset(&self) -> Result<()> {
        sys::ioctl::reset(self.fd()).map_err(|e| self.ioctl_error("PERF_EVENT_IOC_RESET", e))
    }

    /// Same as [`reset`](Self::reset).
    ///
    /// # Errors
    ///
    /// As [`reset`](Self::reset).
    pub fn clear_count(&self) -> Result<()> {
        self.reset()
    }

    /// Reads the counter: one `read(2)` into a stack buffer, no allocation (unless the read format
    /// has `siblings`, which returns the whole group in [`Stat::siblings`]; use
    /// [`CounterGroup::stat`] for an allocation-free group read).
    ///
    /// # Errors
    ///
    /// [`Error::PinnedCounterInError`] when a pinned counter lost its place on the PMU (the read
    /// returns end of file), [`Error::ShortRead`] when the kernel returned fewer bytes than the read
    /// format implies, [`Error::Io`] when the read fails.
    #[inline]
    pub fn stat(&self) -> Result<Stat> {
        if self.attr.read_format & GROUP != 0 {
            return self.stat_group();
        }
        // Zeroed past what the read fills: the decode loads every word and selects those present.
        let mut buf = [0u8; SINGLE_MAX];
        let want = self.read_size.min(SINGLE_MAX);
        // rustix issues the syscall directly (no libc cancellation-point wrapper), and `PerfFd` hands
        // over its fd number without a call.
        let got = rustix::io::read(&self.file, &mut buf[..want]).map_err(read_errno)?;
        if got != want {
            return Err(short(got, want));
        }
        Ok(Stat::decode_single(&buf, self.attr.read_format))
    }

    #[cold]
    fn stat_group(&self) -> Result<Stat> {
        read_group(self.file.as_file(), self.attr.read_format)
    }

    /// The event id (`PERF_EVENT_IOC_ID`), as found in group reads and records.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_ID")]
    pub fn id(&self) -> Result<u64> {
        sys::ioctl::id(self.fd()).map_err(|e| self.ioctl_error("PERF_EVENT_IOC_ID", e))
    }

    /// Sets an ftrace filter on a tracepoint counter (`PERF_EVENT_IOC_SET_FILTER`), e.g.
    /// `"count == 7"`; only matching hits count.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] when the filter contains a NUL byte; [`Error::Io`] when the kernel refuses
    /// it (`EINVAL` on a non-tracepoint event, `EINVAL`/`EEXIST` for an expression it cannot parse).
    #[doc(alias = "PERF_EVENT_IOC_SET_FILTER")]
    pub fn set_filter(&self, filter: &str) -> Result<()> {
        let c = CString::new(filter).map_err(|_| Error::Parse {
            input: filter.into(),
            reason: "a filter cannot contain a NUL byte".into(),
        })?;
        self.with_ftrace_filter(&c)
    }

    /// [`set_filter`](Self::set_filter) with a C string.
    ///
    /// # Errors
    ///
    /// As [`set_filter`](Self::set_filter).
    pub fn with_ftrace_filter(&self, filter: &CStr) -> Result<()> {
        sys::ioctl::set_filter(self.fd(), filter).map_err(|e| {
            let what = match e.raw_os_error() {
                Some(libc::EEXIST) | Some(libc::EINVAL) | Some(libc::ENOENT)
                    if self.attr.type_ == sys::PERF_TYPE_TRACEPOINT =>
                {
                    format!(
                        "{}: the kernel cannot parse filter {filter:?} (a syntax error, or a \
                         field the tracepoint does not have: see its tracefs `format` file)",
                        self.event.name()
                    )
                }
                Some(libc::EINVAL) => {
                    format!("{}: filters apply to tracepoints only", self.event.name())
                }
                _ => format!("{}: PERF_EVENT_IOC_SET_FILTER", self.event.name()),
            };
            Error::io(what, e)
        })
    }

    /// Attaches a BPF program (its fd) to the event (`PERF_EVENT_IOC_SET_BPF`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_SET_BPF")]
    pub fn attach_bpf(&self, prog: impl AsFd) -> Result<()> {
        sys::ioctl::set_bpf(self.fd(), prog.as_fd())
            .map_err(|e| self.ioctl_error("PERF_EVENT_IOC_SET_BPF", e))
    }

    /// The ids of the BPF programs attached to the event's tracepoint (`PERF_EVENT_IOC_QUERY_BPF`,
    /// Linux 4.16): at most `buf_len` ids, and `Some(n)` when `n` more are attached.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_QUERY_BPF")]
    pub fn query_bpf(&self, buf_len: u32) -> Result<(Vec<u32>, Option<u32>)> {
        let mut len = buf_len as usize;
        loop {
            let mut ids = vec![0u32; len];
            match sys::ioctl::query_bpf(self.fd(), &mut ids) {
                Ok(total) => {
                    let total = total as usize;
                    ids.truncate(total.min(buf_len as usize));
                    let more = total.saturating_sub(buf_len as usize);
                    return Ok((ids, (more > 0).then_some(more as u32)));
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && len < 1 << 16 => {
                    len = (len * 2).max(16);
                }
                Err(e) => return Err(self.ioctl_error("PERF_EVENT_IOC_QUERY_BPF", e)),
            }
        }
    }

    /// Changes the event of an open counter (`PERF_EVENT_IOC_MODIFY_ATTRIBUTES`, Linux 4.17): the
    /// kernel supports it for breakpoints (move to another address, change the type or length).
    ///
    /// The kernel takes the enabled state from the attr it is given: the counter is **enabled**
    /// after the switch (call [`disable`](Self::disable) afterwards to keep it off).
    ///
    /// # Errors
    ///
    /// [`Error::Io`]: `EOPNOTSUPP` for other events, `EINVAL` when the type of event differs.
    #[doc(alias = "PERF_EVENT_IOC_MODIFY_ATTRIBUTES")]
    pub fn switch_to<E>(&mut self, event: E) -> Result<()>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        let event: Event = event.try_into()?;
        let mut a = self.attr;
        event.apply(&mut a);
        a.set_disabled(0);
        self.modify_attributes(&a)?;
        self.attr = a;
        self.event = event;
        Ok(())
    }

    /// Sends a raw attr to `PERF_EVENT_IOC_MODIFY_ATTRIBUTES`; see [`switch_to`](Self::switch_to).
    /// Its `disabled` bit decides whether the counter is enabled afterwards.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    pub fn modify_attributes(&self, attr: &perf_event_attr) -> Result<()> {
        sys::ioctl::modify_attributes(self.fd(), attr)
            .map_err(|e| self.ioctl_error("PERF_EVENT_IOC_MODIFY_ATTRIBUTES", e))
    }

    /// Enables a sampling counter for `overflows` more overflows, after which it disables itself
    /// (`PERF_EVENT_IOC_REFRESH`). Refused (`EINVAL`) on inherited counters.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_REFRESH")]
    pub fn refresh(&self, overflows: u32) -> Result<()> {
        sys::ioctl::refresh(self.fd(), overflows)
            .map_err(|e| self.ioctl_error("PERF_EVENT_IOC_REFRESH", e))
    }

    /// Sets the sample period (or the frequency, for a `SampleOn::Freq` counter) from the next
    /// overflow on (`PERF_EVENT_IOC_PERIOD`). 0 is refused.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_PERIOD")]
    pub fn period(&self, period: u64) -> Result<()> {
        sys::ioctl::period(self.fd(), period)
            .map_err(|e| self.ioctl_error("PERF_EVENT_IOC_PERIOD", e))
    }

    /// Pauses (`true`) or resumes ring-buffer output (`PERF_EVENT_IOC_PAUSE_OUTPUT`, Linux 4.7);
    /// needs a mapped ring buffer.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails (`EINVAL` without a buffer).
    #[doc(alias = "PERF_EVENT_IOC_PAUSE_OUTPUT")]
    pub fn pause_output(&self, pause: bool) -> Result<()> {
        // Shared with the sampler's counted pause: a resume while `Sampler::newest` copies the ring
        // takes effect when the copy ends.
        self.output
            .set_user_pause(&crate::sample::Control::Kernel, self.fd(), pause)
            .map_err(|e| match e {
                Error::Io { source, .. } => self.ioctl_error("PERF_EVENT_IOC_PAUSE_OUTPUT", source),
                e => e,
            })
    }

    /// Sends this counter's records into `target`'s ring buffer, or detaches with `None`
    /// (`PERF_EVENT_IOC_SET_OUTPUT`). Both must be on the same CPU (or both on any CPU).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_SET_OUTPUT")]
    pub fn set_output(&self, target: Option<&Counter>) -> Result<()> {
        sys::ioctl::set_output(self.fd(), target.map(|t| t.fd()))
            .map_err(|e| self.ioctl_error("PERF_EVENT_IOC_SET_OUTPUT", e))?;
        self.redirected
            .store(target.is_some(), std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// The counter's file.
    pub fn file(&self) -> &File {
        self.file.as_file()
    }

    /// The counter's fd as perf-core's [`PerfFd`]: what
    /// [`perf_core::Ring::map_exclusive`] maps (the counter's [`sampler`](Self::sampler) does that for
    /// you). In a child made by `fork()` it is the parent's event, which the child cannot map.
    pub fn perf_fd(&self) -> &PerfFd {
        &self.file
    }

    /// The counter's fd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// The `perf_event_attr` the counter was opened with (a parser of its records needs
    /// `sample_type`, `read_format`, ...).
    pub fn attr(&self) -> &perf_event_attr {
        &self.attr
    }

    /// The event.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// The target it was opened on.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The CPU it counts on, `None` for any CPU.
    pub fn cpu(&self) -> Option<u32> {
        self.target.cpu()
    }

    fn ioctl_error(&self, what: &str, e: io::Error) -> Error {
        Error::io(format!("{}: {what}", self.event.name()), e)
    }
}

const FORMAT_LOST: u64 = sys::PERF_FORMAT_LOST as u64;

/// Set once the running kernel refused an attr with `PERF_FORMAT_LOST` that it took without:
/// sampling counters stop getting it by default. Asked of the kernel, never decided by version
/// (Debian's 5.10.223 has it, Linux 6.0 added it).
static FORMAT_LOST_REFUSED: AtomicBool = AtomicBool::new(false);

fn format_lost_refused() -> bool {
    FORMAT_LOST_REFUSED.load(Ordering::Relaxed)
}

/// Opens `attr` with `open`; when `default_lost` (the `PERF_FORMAT_LOST` bit is our default, not
/// the user's) and the kernel says `EINVAL`, opens again without the bit, and records in
/// `refused` that this kernel lacks it if that succeeds. Returns the result of the last open and
/// the attr it was given: the one opened, or the one whose error is reported.
fn open_dropping_default_lost<T>(
    attr: perf_event_attr,
    default_lost: bool,
    refused: &AtomicBool,
    mut open: impl FnMut(&perf_event_attr) -> io::Result<T>,
) -> (io::Result<T>, perf_event_attr) {
    match open(&attr) {
        Err(e) if default_lost && e.raw_os_error() == Some(libc::EINVAL) => {
            let mut plain = attr;
            plain.read_format &= !FORMAT_LOST;
            let r = open(&plain);
            if r.is_ok() {
                refused.store(true, Ordering::Relaxed);
            }
            (r, plain)
        }
        r => (r, attr),
    }
}

/// A group read (`PERF_FORMAT_GROUP`) of the counter `file`, with a buffer grown until the group
/// fits.
#[cold]
pub(crate) fn read_group(file: &File, read_format: u64) -> Result<Stat> {
    let mut buf = vec![0u8; 512];
    loop {
        match (&*file).read(&mut buf) {
            Ok(0) => return Err(Error::PinnedCounterInError),
            Ok(n) => {
                let g = buf
                    .get(..n)
                    .and_then(|b| GroupStat::decode(b, read_format))
                    .ok_or(Error::ShortRead {
                        expected: buf.len(),
                        got: n,
                    })?;
                return Ok(g.to_stat());
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && buf.len() < 1 << 24 => {
                let len = buf.len() * 4;
                buf.resize(len, 0);
            }
            Err(e) => return Err(read_error(e)),
        }
    }
}

#[cold]
fn read_error(e: io::Error) -> Error {
    Error::io("reading a perf counter", e)
}

/// [`read_error`] from rustix's errno: the conversion to `io::Error` stays off the hot path too.
#[cold]
#[inline(never)]
pub(crate) fn read_errno(e: rustix::io::Errno) -> Error {
    read_error(e.into())
}

#[cold]
fn short(got: usize, expected: usize) -> Error {
    if got == 0 {
        Error::PinnedCounterInError
    } else {
        Error::ShortRead { expected, got }
    }
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("fd", &self.file.as_raw_fd())
            .field("event", &self.event)
            .field("target", &self.target)
            .field("read_format", &self.attr.read_format)
            .finish_non_exhaustive()
    }
}

impl AsFd for Counter {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl AsRawFd for Counter {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel older than `PERF_FORMAT_LOST`: `EINVAL` for the bit, `ok` otherwise.
    fn old_kernel(
        calls: &mut Vec<u64>,
        rest: io::Result<u32>,
    ) -> impl FnMut(&perf_event_attr) -> io::Result<u32> + '_ {
        let mut rest = Some(rest);
        move |a| {
            calls.push(a.read_format);
            if a.read_format & FORMAT_LOST != 0 {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            rest.take().expect("opened twice without the bit")
        }
    }

    fn with_lost() -> perf_event_attr {
        perf_event_attr {
            read_format: FORMAT_LOST | u64::from(sys::PERF_FORMAT_ID),
            ..Default::default()
        }
    }

    #[test]
    fn a_default_lost_format_the_kernel_refuses_is_dropped_and_remembered() {
        let refused = AtomicBool::new(false);
        let mut calls = Vec::new();
        let (fd, attr) =
            open_dropping_default_lost(with_lost(), true, &refused, old_kernel(&mut calls, Ok(7)));
        assert_eq!(fd.unwrap(), 7);
        let id = u64::from(sys::PERF_FORMAT_ID);
        assert_eq!(attr.read_format, id, "the attr opened is the one kept");
        assert_eq!(calls, [FORMAT_LOST | id, id]);
        assert!(refused.load(Ordering::Relaxed));
    }

    #[test]
    fn an_explicit_lost_format_is_never_dropped() {
        let refused = AtomicBool::new(false);
        let mut calls = Vec::new();
        let (r, attr) =
            open_dropping_default_lost(with_lost(), false, &refused, old_kernel(&mut calls, Ok(7)));
        let e = r.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        assert_eq!(attr.read_format & FORMAT_LOST, FORMAT_LOST);
        assert_eq!(calls.len(), 1);
        assert!(!refused.load(Ordering::Relaxed));
    }

    #[test]
    fn when_the_attr_fails_without_the_default_too_that_error_is_reported() {
        let refused = AtomicBool::new(false);
        let mut calls = Vec::new();
        let (r, attr) = open_dropping_default_lost(
            with_lost(),
            true,
            &refused,
            old_kernel(&mut calls, Err(io::Error::from_raw_os_error(libc::EACCES))),
        );
        let e = r.unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::EACCES),
            "the user's own attr's error"
        );
        assert_eq!(
            attr.read_format & FORMAT_LOST,
            0,
            "diagnosed without our default"
        );
        assert!(!refused.load(Ordering::Relaxed), "not the bit's fault");
        // An error other than EINVAL is not retried.
        let mut once = 0;
        let (r, _) =
            open_dropping_default_lost(with_lost(), true, &refused, |_| -> io::Result<u32> {
                once += 1;
                Err(io::Error::from_raw_os_error(libc::ESRCH))
            });
        assert!(r.is_err());
        assert_eq!(once, 1);
    }
}
