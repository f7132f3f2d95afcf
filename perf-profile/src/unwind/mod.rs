//! Unwinding: a sample's call chain as frames, leaf first.
//!
//! With `-g fp` the kernel walks the frame pointers at the sample and writes the chain into the
//! sample (`PERF_SAMPLE_CALLCHAIN`): kernel frames, then user frames, each part introduced by a
//! `PERF_CONTEXT_*` marker. This module splits it at the markers. Every frame but the first of
//! each part is a return address, which points after the call: one is subtracted so that it names
//! the calling instruction (and its line), as perf and samply do.
//!
//! With `-g dwarf` ([`dwarf`], x86_64 and aarch64) the kernel part of the chain still comes from
//! the kernel; the user part is unwound here from a copy of the user stack with framehop.
//!
//! # Where a stack ends
//!
//! A stack unwound to its natural end ends at its outermost frame: with DWARF, the frame whose
//! CFI says the return address is undefined (glibc's `_start` and the child side of `clone`
//! say so: `.cfi_undefined rip` on x86_64), or, in code without unwind tables, a frame pointer or
//! return address of zero (`_start` clears the frame pointer); with frame pointers, the return
//! address of the last frame record the kernel finds before a frame pointer of zero. Every stack of one code path ends at the
//! same frame that way, in each mode; the modes differ only where frame pointers cannot see:
//! the frames between `main` and `_start` keep none in most distributions' glibc, so with
//! `-g fp` a stack ends at main's caller (`__libc_start_call_main`) and with `-g dwarf` at
//! `_start`.
//!
//! A stack whose unwinding stopped before that is marked ([`Ending::Truncated`]; the profile's
//! [`Frame::TRUNCATED`](crate::aggregate::Frame::TRUNCATED) root, named `[truncated]`) rather than
//! shown rooted at whatever frame it stopped in:
//!
//! - with frame pointers, when the kernel's chain holds as many frames as its limit
//!   ([`chain_ran_out`]: `perf_event_max_stack`, 127 by default): the kernel stopped there. A
//!   walk the kernel ended at a frame pointer that was not one (code built without frame
//!   pointers) cannot be told from a complete one, and is not marked;
//! - with DWARF, when the next frame would be read outside the copied stack (a stack deeper than
//!   `-g dwarf,SIZE` copies), when any other unwinding error stops it (a corrupt stack, a frame
//!   that does not advance), after [`dwarf::MAX_FRAMES`] frames, and when it reaches a file
//!   whose unwind tables are still being read ([`Ending::Pending`]: the capture keeps such a
//!   sample and unwinds it again once they are read, so that a process's first samples end where
//!   its later ones do; only one still waiting after a bound is marked).

use perf_event::perf_sys as sys;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod dwarf;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) mod elf;

/// How the unwinding of a user stack ended (see [Where a stack ends](self#where-a-stack-ends)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// At the stack's outermost frame.
    Root,
    /// Before it: the copy or the frame limit ran out, or the unwinder failed.
    Truncated,
    /// At a frame in a file whose unwind tables are still being read: unwinding the same sample
    /// again once they are read goes on from there.
    Pending,
}

/// Whether the kernel's call chain `chain` (`PERF_SAMPLE_CALLCHAIN`) ran out of frames: it holds
/// `max_stack` frames, the kernel's limit (`perf_event_max_stack`, or the event's
/// `sample_max_stack`), which counts the frames but not the `PERF_CONTEXT_*` markers.
pub fn chain_ran_out(chain: &[u64], max_stack: u32) -> bool {
    max_stack > 0
        && chain
            .iter()
            .filter(|&&ip| ip < sys::PERF_CONTEXT_MAX)
            .count()
            >= max_stack as usize
}

/// The kernel's limit on the frames of a call chain (`/proc/sys/kernel/perf_event_max_stack`),
/// 127 (the kernel's default) where it cannot be read.
pub fn max_stack() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(127)
}

/// Where a frame's code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Context {
    /// User space.
    User,
    /// The kernel.
    Kernel,
}

/// One frame of a call chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawFrame {
    /// The instruction's address: the sampled one, or a return address minus one.
    pub addr: u64,
    /// User or kernel.
    pub context: Context,
}

/// The frames of `chain` (the sample's `PERF_SAMPLE_CALLCHAIN`, leaf first), appended to `out`.
/// `ip` and `cpumode_kernel` describe the sample when it has no call chain (one frame).
#[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
pub fn frames_from_call_chain(
    chain: Option<&[u64]>,
    ip: Option<u64>,
    cpumode_kernel: bool,
    out: &mut Vec<RawFrame>,
) {
    let default = if cpumode_kernel {
        Context::Kernel
    } else {
        Context::User
    };
    let Some(chain) = chain.filter(|c| !c.is_empty()) else {
        if let Some(addr) = ip {
            out.push(RawFrame {
                addr,
                context: default,
            });
        }
        return;
    };
    let mut context = Some(default);
    let mut first = true;
    for &ip in chain {
        if ip >= sys::PERF_CONTEXT_MAX {
            context = match ip {
                x if x == sys::PERF_CONTEXT_KERNEL => Some(Context::Kernel),
                x if x == sys::PERF_CONTEXT_USER => Some(Context::User),
                // Hypervisor and guest frames are not ours to name.
                _ => None,
            };
            first = true;
            continue;
        }
        let Some(context) = context else {
            continue;
        };
        let addr = if first { ip } else { ip.saturating_sub(1) };
        first = false;
        // Some kernels end a chain with a zero (an unwinder that gave up).
        if ip == 0 {
            continue;
        }
        out.push(RawFrame { addr, context });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = sys::PERF_CONTEXT_KERNEL;
    const U: u64 = sys::PERF_CONTEXT_USER;

    #[test]
    fn kernel_then_user_with_return_addresses_adjusted() {
        let mut out = Vec::new();
        frames_from_call_chain(
            Some(&[K, 0xffff_0010, 0xffff_0100, U, 0x1000, 0x2000, 0]),
            None,
            true,
            &mut out,
        );
        let f = |addr, context| RawFrame { addr, context };
        assert_eq!(
            out,
            [
                f(0xffff_0010, Context::Kernel),
                f(0xffff_00ff, Context::Kernel),
                f(0x1000, Context::User),
                f(0x1fff, Context::User),
            ]
        );
    }

    #[test]
    fn a_chain_ran_out_when_its_frames_not_its_markers_reach_the_limit() {
        assert!(chain_ran_out(&[K, 1, 2, U, 3], 3));
        assert!(!chain_ran_out(&[K, 1, U, 3], 3), "markers are not frames");
        assert!(!chain_ran_out(&[1, 2], 3));
        assert!(!chain_ran_out(&[1, 2], 0));
    }

    #[test]
    fn no_chain_is_the_ip_alone_and_guest_frames_are_dropped() {
        let mut out = Vec::new();
        frames_from_call_chain(None, Some(0x42), false, &mut out);
        assert_eq!(
            out,
            [RawFrame {
                addr: 0x42,
                context: Context::User
            }]
        );
        out.clear();
        let guest = sys::PERF_CONTEXT_GUEST_KERNEL;
        frames_from_call_chain(Some(&[guest, 0x99, U, 0x10]), None, false, &mut out);
        assert_eq!(
            out,
            [RawFrame {
                addr: 0x10,
                context: Context::User
            }]
        );
    }
}
