//! The `perf_event_open(2)` system call.
//!
//! # Safety
//!
//! The raw entry point passes a pointer to the kernel, which reads `attr.size` bytes from it and may write
//! the `size` field back (on `E2BIG`). The safe wrapper takes a reference and refuses a `size` larger than
//! the struct, so the kernel never reads past it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::perf_event_attr;

/// Calls `perf_event_open(2)` directly; returns the raw result (a fd, or -1 with `errno` set).
///
/// The syscall number is libc's `SYS_perf_event_open` for the target architecture.
///
/// # Safety
///
/// `attr` must point to memory valid for reads of `(*attr).size` bytes (or of the kernel's
/// `PERF_ATTR_SIZE_VER0` when `size` is 0), and for a write of its `size` field. Pointers embedded in the
/// attr (`kprobe_func`, `uprobe_path`) must point to NUL-terminated strings.
#[doc(alias = "perf_event_open")]
pub unsafe fn perf_event_open_raw(
    attr: *const perf_event_attr,
    pid: libc::pid_t,
    cpu: libc::c_int,
    group_fd: libc::c_int,
    flags: libc::c_ulong,
) -> libc::c_long {
    // SAFETY: forwarded to the caller's contract above; the other arguments are plain integers.
    unsafe { libc::syscall(libc::SYS_perf_event_open, attr, pid, cpu, group_fd, flags) }
}

/// Opens a perf event: `perf_event_open(attr, pid, cpu, group_fd, flags)`.
///
/// `pid` is a thread or process id (0 = the calling thread, -1 = any, or a cgroup directory fd with
/// `PERF_FLAG_PID_CGROUP`); `cpu` is a CPU number or -1 for any; `group_fd` the group leader, or `None`
/// to start a new group. Add `PERF_FLAG_FD_CLOEXEC` to `flags` unless you want the fd inherited on exec.
///
/// `attr.size` may be 0 (the kernel then assumes its first ABI version) or at most
/// `size_of::<perf_event_attr>()`; anything larger is refused with `EINVAL` before the syscall, since the
/// kernel would read past the struct.
///
/// # Errors
///
/// The kernel's errno as [`io::Error`]: `EACCES`/`EPERM` (privilege: see `perf_event_paranoid`),
/// `ENOENT`/`EOPNOTSUPP` (no such event or PMU), `EINVAL`, `E2BIG` (the kernel is older than an option
/// that was set; it then writes its own attr size into `attr.size`, which this wrapper cannot show you
/// through a shared reference: use [`perf_event_open_mut`] to see it), `ESRCH`, `EMFILE`, ...
pub fn perf_event_open(
    attr: &perf_event_attr,
    pid: libc::pid_t,
    cpu: libc::c_int,
    group_fd: Option<BorrowedFd<'_>>,
    flags: u64,
) -> io::Result<OwnedFd> {
    // The kernel may write `size` back on E2BIG: give it a private copy so the shared reference stays
    // unchanged.
    let mut copy = *attr;
    perf_event_open_mut(&mut copy, pid, cpu, group_fd, flags)
}

/// [`perf_event_open`] that lets the kernel write into `attr`: on `E2BIG` it stores the size of its
/// own `perf_event_attr` in `attr.size` (the only field it writes), which tells the caller which
/// fields the running kernel lacks.
///
/// # Errors
///
/// As [`perf_event_open`].
#[doc(alias = "perf_event_open")]
pub fn perf_event_open_mut(
    attr: &mut perf_event_attr,
    pid: libc::pid_t,
    cpu: libc::c_int,
    group_fd: Option<BorrowedFd<'_>>,
    flags: u64,
) -> io::Result<OwnedFd> {
    if attr.size as usize > core::mem::size_of::<perf_event_attr>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let group = group_fd.map_or(-1, |fd| fd.as_raw_fd());
    // SAFETY: `attr` is a live, exclusively borrowed perf_event_attr whose `size` is at most its own
    // size (checked above), so the kernel's read of `size` bytes and write of the `size` field stay
    // inside it.
    let ret = unsafe {
        perf_event_open_raw(
            core::ptr::from_mut(attr).cast_const(),
            pid,
            cpu,
            group,
            flags as libc::c_ulong,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the syscall returns a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as libc::c_int) })
}

/// Enables (`true`) or disables (`false`) every perf event attached to the calling process
/// (`prctl(PR_TASK_PERF_EVENTS_ENABLE / PR_TASK_PERF_EVENTS_DISABLE)`), e.g. to fence a region of code
/// without holding the counters' fds.
#[doc(alias = "PR_TASK_PERF_EVENTS_ENABLE")]
#[doc(alias = "PR_TASK_PERF_EVENTS_DISABLE")]
pub fn task_perf_events(enable: bool) -> io::Result<()> {
    let op = if enable {
        libc::PR_TASK_PERF_EVENTS_ENABLE
    } else {
        libc::PR_TASK_PERF_EVENTS_DISABLE
    };
    // SAFETY: these prctl operations take no pointer arguments.
    let ret = unsafe { libc::prctl(op, 0, 0, 0, 0) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Safe reads of the attr's unions. Every member of each union is a plain integer of the same size, so
/// any bit pattern is valid whichever member was written.
impl perf_event_attr {
    /// `sample_period` or `sample_freq` (the same u64; `freq` says which).
    pub fn sample_period_or_freq(&self) -> u64 {
        // SAFETY: both members are u64; every bit pattern is a valid u64.
        unsafe { self.__bindgen_anon_1.sample_period }
    }

    /// `config1`, also `bp_addr`, `kprobe_func` and `uprobe_path` (the same u64).
    pub fn config1(&self) -> u64 {
        // SAFETY: all four members are u64; every bit pattern is a valid u64.
        unsafe { self.__bindgen_anon_3.config1 }
    }

    /// `config2`, also `bp_len`, `kprobe_addr` and `probe_offset` (the same u64).
    pub fn config2(&self) -> u64 {
        // SAFETY: all four members are u64; every bit pattern is a valid u64.
        unsafe { self.__bindgen_anon_4.config2 }
    }

    /// `wakeup_events` or `wakeup_watermark` (the same u32; `watermark` says which).
    pub fn wakeup_events_or_watermark(&self) -> u32 {
        // SAFETY: both members are u32; every bit pattern is a valid u32.
        unsafe { self.__bindgen_anon_2.wakeup_events }
    }

    /// `aux_action`: the u32 holding `aux_start_paused` (bit 0), `aux_pause` (bit 1) and
    /// `aux_resume` (bit 2).
    pub fn aux_action(&self) -> u32 {
        // SAFETY: the union is a u32 or a 4-byte bitfield struct; every bit pattern is a valid u32.
        unsafe { self.__bindgen_anon_5.aux_action }
    }
}
