//! `PERF_EVENT_IOC_*`: the ioctl numbers, computed for the target architecture, and one safe function per
//! ioctl.
//!
//! The numbers are built with the architecture's `_IOC` encoding (`asm-generic/ioctl.h`, or the 13-bit-size,
//! 3-bit-direction variant of powerpc, mips, sparc and alpha) and the target's pointer size, because the
//! kernel defines several of them with a pointer type (`_IOW('$', 6, char *)`). They are never copied from
//! x86_64.
//!
//! # Safety
//!
//! Every function here takes a [`BorrowedFd`], so the fd is open for the call. The kernel checks that it is
//! a perf event fd and fails with `ENOTTY` otherwise; the arguments are plain integers or pointers to
//! buffers sized exactly as the ioctl number encodes (a driver that follows the `_IOC` convention reads or
//! writes no more than that).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::perf_event_attr;

#[cfg(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "mips32r6",
    target_arch = "mips64r6",
    target_arch = "sparc",
    target_arch = "sparc64",
))]
pub(crate) mod encoding {
    pub(crate) const NONE: u32 = 1;
    pub(crate) const READ: u32 = 2;
    pub(crate) const WRITE: u32 = 4;
    pub(crate) const SIZEBITS: u32 = 13;
}

#[cfg(not(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "mips32r6",
    target_arch = "mips64r6",
    target_arch = "sparc",
    target_arch = "sparc64",
)))]
pub(crate) mod encoding {
    pub(crate) const NONE: u32 = 0;
    pub(crate) const WRITE: u32 = 1;
    pub(crate) const READ: u32 = 2;
    pub(crate) const SIZEBITS: u32 = 14;
}

const NRSHIFT: u32 = 0;
const TYPESHIFT: u32 = 8;
const SIZESHIFT: u32 = 16;
const DIRSHIFT: u32 = SIZESHIFT + encoding::SIZEBITS;

/// `_IOC(dir, type, nr, size)` with this architecture's encoding.
pub(crate) const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    (dir << DIRSHIFT)
        | ((ty as u32) << TYPESHIFT)
        | ((nr as u32) << NRSHIFT)
        | ((size as u32) << SIZESHIFT)
}

const PTR: usize = core::mem::size_of::<*const u8>();
const T: u8 = b'$';

/// `_IO('$', 0)`: enable the event (and, with the group variant, its whole group).
pub const PERF_EVENT_IOC_ENABLE: u32 = ioc(encoding::NONE, T, 0, 0);
/// `_IO('$', 1)`: disable the event.
pub const PERF_EVENT_IOC_DISABLE: u32 = ioc(encoding::NONE, T, 1, 0);
/// `_IO('$', 2)`: enable for N more overflows, then disable.
pub const PERF_EVENT_IOC_REFRESH: u32 = ioc(encoding::NONE, T, 2, 0);
/// `_IO('$', 3)`: zero the count.
pub const PERF_EVENT_IOC_RESET: u32 = ioc(encoding::NONE, T, 3, 0);
/// `_IOW('$', 4, __u64)`: set the sample period (or frequency).
pub const PERF_EVENT_IOC_PERIOD: u32 = ioc(encoding::WRITE, T, 4, 8);
/// `_IO('$', 5)`: send this event's records to another event's ring buffer.
pub const PERF_EVENT_IOC_SET_OUTPUT: u32 = ioc(encoding::NONE, T, 5, 0);
/// `_IOW('$', 6, char *)`: set a tracepoint filter.
pub const PERF_EVENT_IOC_SET_FILTER: u32 = ioc(encoding::WRITE, T, 6, PTR);
/// `_IOR('$', 7, __u64 *)`: read the event id.
pub const PERF_EVENT_IOC_ID: u32 = ioc(encoding::READ, T, 7, PTR);
/// `_IOW('$', 8, __u32)`: attach a BPF program.
pub const PERF_EVENT_IOC_SET_BPF: u32 = ioc(encoding::WRITE, T, 8, 4);
/// `_IOW('$', 9, __u32)`: pause (1) or resume (0) ring-buffer output.
pub const PERF_EVENT_IOC_PAUSE_OUTPUT: u32 = ioc(encoding::WRITE, T, 9, 4);
/// `_IOWR('$', 10, struct perf_event_query_bpf *)`: list attached BPF programs.
pub const PERF_EVENT_IOC_QUERY_BPF: u32 = ioc(encoding::READ | encoding::WRITE, T, 10, PTR);
/// `_IOW('$', 11, struct perf_event_attr *)`: change attributes of an open event.
pub const PERF_EVENT_IOC_MODIFY_ATTRIBUTES: u32 = ioc(encoding::WRITE, T, 11, PTR);

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn ioctl_arg(fd: BorrowedFd<'_>, request: u32, arg: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: `fd` is open for the call; `arg` is an integer the kernel does not dereference for the
    // requests passed here (ENABLE, DISABLE, RESET, REFRESH, SET_OUTPUT, SET_BPF, PAUSE_OUTPUT).
    check(unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg) })
}

fn flag(group: bool) -> libc::c_ulong {
    if group {
        crate::PERF_IOC_FLAG_GROUP as libc::c_ulong
    } else {
        0
    }
}

/// Enables the event (`PERF_EVENT_IOC_ENABLE`).
#[doc(alias = "PERF_EVENT_IOC_ENABLE")]
pub fn enable(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_ENABLE, flag(false)).map(drop)
}

/// Enables every event of the group whose member is `fd` (`PERF_EVENT_IOC_ENABLE` with
/// `PERF_IOC_FLAG_GROUP`).
#[doc(alias = "PERF_IOC_FLAG_GROUP")]
pub fn enable_group(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_ENABLE, flag(true)).map(drop)
}

/// Disables the event (`PERF_EVENT_IOC_DISABLE`).
#[doc(alias = "PERF_EVENT_IOC_DISABLE")]
pub fn disable(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_DISABLE, flag(false)).map(drop)
}

/// Disables the whole group (`PERF_EVENT_IOC_DISABLE` with `PERF_IOC_FLAG_GROUP`).
pub fn disable_group(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_DISABLE, flag(true)).map(drop)
}

/// Zeroes the count (`PERF_EVENT_IOC_RESET`). Times enabled and running are not reset.
#[doc(alias = "PERF_EVENT_IOC_RESET")]
pub fn reset(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_RESET, flag(false)).map(drop)
}

/// Zeroes the count of every group member (`PERF_EVENT_IOC_RESET` with `PERF_IOC_FLAG_GROUP`).
pub fn reset_group(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_RESET, flag(true)).map(drop)
}

/// Enables a sampling event for `overflows` more overflows, after which it disables itself and signals
/// `POLL_HUP` (`PERF_EVENT_IOC_REFRESH`). The kernel refuses it on inherited events (`EINVAL`).
#[doc(alias = "PERF_EVENT_IOC_REFRESH")]
pub fn refresh(fd: BorrowedFd<'_>, overflows: u32) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_REFRESH, overflows as libc::c_ulong).map(drop)
}

/// Sets the sample period, or the frequency for a `freq` event (`PERF_EVENT_IOC_PERIOD`). 0 is refused.
#[doc(alias = "PERF_EVENT_IOC_PERIOD")]
pub fn period(fd: BorrowedFd<'_>, period: u64) -> io::Result<()> {
    // SAFETY: the kernel reads one u64 through the pointer, which points to a live local.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_PERIOD as _,
            &period as *const u64,
        )
    })
    .map(drop)
}

/// Redirects this event's ring-buffer output into `target`'s buffer, or detaches it with `None`
/// (`PERF_EVENT_IOC_SET_OUTPUT`). Both events must be on the same CPU (or both on any CPU).
#[doc(alias = "PERF_EVENT_IOC_SET_OUTPUT")]
pub fn set_output(fd: BorrowedFd<'_>, target: Option<BorrowedFd<'_>>) -> io::Result<()> {
    // Detaching takes -1 as a long: an int -1 zero-extended would be a bad fd (EBADF).
    let arg = target.map_or(-1 as libc::c_long, |t| t.as_raw_fd() as libc::c_long);
    ioctl_arg(fd, PERF_EVENT_IOC_SET_OUTPUT, arg as libc::c_ulong).map(drop)
}

/// Sets an ftrace filter on a tracepoint event (`PERF_EVENT_IOC_SET_FILTER`), e.g. `"fd == 1"`.
/// A filter the kernel cannot parse fails with `EINVAL` or `EEXIST`.
#[doc(alias = "PERF_EVENT_IOC_SET_FILTER")]
pub fn set_filter(fd: BorrowedFd<'_>, filter: &CStr) -> io::Result<()> {
    // SAFETY: the kernel reads a NUL-terminated string, which `CStr` guarantees.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_SET_FILTER as _,
            filter.as_ptr(),
        )
    })
    .map(drop)
}

/// Returns the event id, as found in `PERF_SAMPLE_ID` and read formats (`PERF_EVENT_IOC_ID`).
#[doc(alias = "PERF_EVENT_IOC_ID")]
pub fn id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: the kernel writes one u64 through the pointer, which points to a live local.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ID as _, &mut id as *mut u64) })?;
    Ok(id)
}

/// Attaches a BPF program (a `BPF_PROG_TYPE_TRACEPOINT`/`KPROBE`/`PERF_EVENT` program fd) to the event
/// (`PERF_EVENT_IOC_SET_BPF`).
#[doc(alias = "PERF_EVENT_IOC_SET_BPF")]
pub fn set_bpf(fd: BorrowedFd<'_>, prog: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_arg(
        fd,
        PERF_EVENT_IOC_SET_BPF,
        prog.as_raw_fd() as libc::c_ulong,
    )
    .map(drop)
}

/// Pauses (`true`) or resumes (`false`) writing into the ring buffer (`PERF_EVENT_IOC_PAUSE_OUTPUT`,
/// Linux 4.7). Records produced while paused are counted as lost.
#[doc(alias = "PERF_EVENT_IOC_PAUSE_OUTPUT")]
pub fn pause_output(fd: BorrowedFd<'_>, pause: bool) -> io::Result<()> {
    ioctl_arg(fd, PERF_EVENT_IOC_PAUSE_OUTPUT, pause as libc::c_ulong).map(drop)
}

/// Lists the BPF programs attached to the event's tracepoint (`PERF_EVENT_IOC_QUERY_BPF`, Linux 4.16):
/// fills `ids` with up to `ids.len()` program ids and returns how many programs are attached in all
/// (which may exceed `ids.len()`; the kernel then fails with `ENOSPC`, reported as an error).
#[doc(alias = "PERF_EVENT_IOC_QUERY_BPF")]
pub fn query_bpf(fd: BorrowedFd<'_>, ids: &mut [u32]) -> io::Result<u32> {
    // struct perf_event_query_bpf { __u32 ids_len; __u32 prog_cnt; __u32 ids[]; }
    let mut buf = vec![0u32; 2 + ids.len()];
    buf[0] = u32::try_from(ids.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `buf` holds the header and `ids_len` trailing u32s, as the kernel expects to read and write.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_QUERY_BPF as _,
            buf.as_mut_ptr(),
        )
    })?;
    let count = buf[1];
    let n = (count as usize).min(ids.len());
    ids[..n].copy_from_slice(&buf[2..2 + n]);
    Ok(count)
}

/// Changes attributes of an open event (`PERF_EVENT_IOC_MODIFY_ATTRIBUTES`, Linux 4.17). Only breakpoint
/// events support it (address, length and type); others fail with `EOPNOTSUPP`.
#[doc(alias = "PERF_EVENT_IOC_MODIFY_ATTRIBUTES")]
pub fn modify_attributes(fd: BorrowedFd<'_>, attr: &perf_event_attr) -> io::Result<()> {
    if attr.size as usize > core::mem::size_of::<perf_event_attr>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let copy = *attr;
    // SAFETY: the kernel reads `copy.size` bytes (at most the struct, checked above) from a live local.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_MODIFY_ATTRIBUTES as _,
            &copy as *const perf_event_attr,
        )
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values `linux/perf_event.h` gives on 64-bit generic-encoding architectures.
    #[cfg(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    ))]
    #[test]
    fn numbers_match_the_kernel_on_64_bit_generic_arches() {
        assert_eq!(PERF_EVENT_IOC_ENABLE, 0x2400);
        assert_eq!(PERF_EVENT_IOC_DISABLE, 0x2401);
        assert_eq!(PERF_EVENT_IOC_REFRESH, 0x2402);
        assert_eq!(PERF_EVENT_IOC_RESET, 0x2403);
        assert_eq!(PERF_EVENT_IOC_PERIOD, 0x4008_2404);
        assert_eq!(PERF_EVENT_IOC_SET_OUTPUT, 0x2405);
        assert_eq!(PERF_EVENT_IOC_SET_FILTER, 0x4008_2406);
        assert_eq!(PERF_EVENT_IOC_ID, 0x8008_2407);
        assert_eq!(PERF_EVENT_IOC_SET_BPF, 0x4004_2408);
        assert_eq!(PERF_EVENT_IOC_PAUSE_OUTPUT, 0x4004_2409);
        assert_eq!(PERF_EVENT_IOC_QUERY_BPF, 0xc008_240a);
        assert_eq!(PERF_EVENT_IOC_MODIFY_ATTRIBUTES, 0x4008_240b);
    }

    /// 32-bit generic arches: the pointer-typed ioctls carry size 4.
    #[cfg(any(target_arch = "x86", target_arch = "arm"))]
    #[test]
    fn numbers_match_the_kernel_on_32_bit_generic_arches() {
        assert_eq!(PERF_EVENT_IOC_SET_FILTER, 0x4004_2406);
        assert_eq!(PERF_EVENT_IOC_ID, 0x8004_2407);
        assert_eq!(PERF_EVENT_IOC_QUERY_BPF, 0xc004_240a);
    }

    /// powerpc64: `_IOC_WRITE` is 4 at bit 29, `_IOC_READ` 2.
    #[cfg(target_arch = "powerpc64")]
    #[test]
    fn numbers_match_the_kernel_on_powerpc64() {
        assert_eq!(PERF_EVENT_IOC_ENABLE, 0x2000_2400);
        assert_eq!(PERF_EVENT_IOC_PERIOD, 0x8008_2404);
        assert_eq!(PERF_EVENT_IOC_ID, 0x4008_2407);
    }
}
